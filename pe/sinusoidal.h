/*
The sinusoidal absolute encodings: fixed sinusoids of the token's position added to its
embedding times sqrt(C), no parameters (the backward only scales the tokens' gradient by
sqrt(C)), each with its official code's table:

  sinusoidal (Vaswani et al. 2017), as fairseq computes it, the ALiBi paper's baseline:

      x_t = sqrt(C) wte[token_t] + p[pos],   pos = t + 2 (fairseq counts positions from its
                                             padding_idx + 1)
      p[pos, k] = sin(pos w_k),  p[pos, C/2 + k] = cos(pos w_k),  w_k = 10000^(-k / (C/2 - 1))

  for k < C/2 (tensor2tensor's layout; an odd C leaves the last column 0). Revision 1
  (revision 0 added interleaved sinusoids to unscaled embeddings). floater keeps this
  embedding, as its official code keeps fairseq's (pe/floater.h: SINUSOIDAL_FAIRSEQ).

  shape (Kiyono et al. 2021, SHAPE), as its official code (butsugiri/shape at a2b04a2,
  onmt/modules/embeddings.py 27-79, OpenNMT-py's PositionalEncoding): the interleaved table

      p[pos, 2m] = sin(pos d_m),  p[pos, 2m + 1] = cos(pos d_m),  d_m = 10000^(-2m / C)

  from pos = t, every sequence shifted by an offset: in training its own, k_b uniform in
  {0..K-1} (torch.randint's bound is excluded), at evaluation K itself (embeddings.py 76-77,
  a shift no training row had); x_t = sqrt(C) wte[token_t] + p[t + k]. K = 0 is the plain
  table. K is the checkpoint's word 18 (the driver's -sk); the offsets are the encoding's own
  positions (pe_positions_own), which every path reads as it reads given positions.

  cape (Likhomanenko et al. 2021, CAPE), as its official code (flashlight's `cape` branch at
  5fcb891, fl/contrib/modules/SinusoidalPositionEmbedding.cpp 18-87): the concatenated table

      p[pos, m] = sin(pos s_m),  p[pos, C/2 + m] = cos(pos s_m),  s_m = 10000^(-2m / C)

  at a float position: in a training pass the augmented (t + delta_b + eps_bt) lambda_b,
  delta_b uniform in [-G/2, G/2] (the row's global shift, G the full width as the official
  globalShift), eps_bt uniform in [-1/2, 1/2] (each token's local shift, on with -cl 1),
  lambda_b = exp(u), u uniform in [-ln S, ln S] (the row's global scaling), drawn from the
  pass's key; at evaluation the plain position t. No mean-centring (the official aug's first
  step): in a causal model it would move every earlier token's position as the window grows.
  G, S and the local shift are the run's -cg, -cs, -cl, not the checkpoint's.

All compute the angles in double (the official tables are float32: at position p their
angles differ by up to about p 6e-8 rad; docs/encodings.md).
*/
#if PE_PART == PE_PART_DEFINITION

#define SINUSOIDAL_FIRST_POS 2
// fairseq's table: sinusoidal's, and floater's, which keeps it as its official code does (pe/floater.h)
#define SINUSOIDAL_FAIRSEQ (PE_IS(SINUSOIDAL) || PE_IS(FLOATER))

#define PE_CONFIG_CHECK
static void pe_config_check(const GPT2Config* c, const char* what) {
    if (c->channels < 4) { fatal("%s: sinusoidal needs at least 4 channels, got %d", what, c->channels); } // w_k divides by C/2 - 1
#if !SINUSOIDAL_FAIRSEQ
    if (c->channels % 2 != 0) { fatal("%s: %s's table needs an even number of channels, got %d", what, pe_name(PE_ID), c->channels); }
#endif
}

#if SINUSOIDAL_FAIRSEQ
// column c of C of the sinusoid of a token at position pos (angles in double in both paths)
PE_FN double sinusoid(double pos, int c, int C) {
    int half = C / 2;
    if (c >= 2 * half) { return 0; } // an odd C's last column
    double angle = (pos + SINUSOIDAL_FIRST_POS) * exp(-(c % half) * log(10000.0) / (half - 1));
    return c < half ? sin(angle) : cos(angle);
}
#elif PE_IS(SHAPE)
PE_FN double sinusoid(double pos, int c, int C) {
    double angle = pos * exp((c - c % 2) * -(log(10000.0) / C));
    return c % 2 == 0 ? sin(angle) : cos(angle);
}

// SHAPE's offsets (the encoding's own positions, after the positions given, drawn or the
// indices): each row's k_b in training, drawn from the pass's key (the driver's), K at
// evaluation; returns the positions' new range
#define PE_OWN_POSITIONS
#define PE_WHOLE_ROWS 1 // a row's offset is drawn by its place in the pass: the length buckets keep rows whole
#define PE_WHOLE_ROWS_WHY "shape: a row's offset is drawn by its place in the pass"
#define SHAPE_STREAM 0x5348 // the offsets' key within the pass's
static int pe_positions_own(const GPT2Config* cfg, int* pos, const int* tokens, int draws, int B, int T, int span, int training, uint64_t key) {
    int K = cfg->shape_k, most = 0;
    for (int b = 0; b < B; b++) {
        uint64_t state = random_seed(rp_key(key, (uint64_t)b, SHAPE_STREAM));
        int k = !training ? K : K > 0 ? (int)(((uint64_t)random_u32(&state) * (uint64_t)K) >> 32) : 0;
        for (int d = 0; d < draws; d++) {
            for (int t = 0; t < T; t++) { pos[((size_t)d * B + b) * T + t] += k; }
        }
        most = k > most ? k : most;
    }
    return span + most;
}
#else // cape
PE_FN double sinusoid(double pos, int c, int C) {
    int half = C / 2;
    double angle = pos * exp(-2.0 * (c % half) * log(10000.0) / C);
    return c < half ? sin(angle) : cos(angle);
}

// the float position of token t of row b at position pos (given, drawn or its index): in a
// training pass CAPE's augmentation, drawn from the pass's key (the driver's), else pos
#define PE_WHOLE_ROWS 1 // a row's shift and scale are drawn by its place in the pass: the length buckets keep rows whole
#define PE_WHOLE_ROWS_WHY "cape: a row's shift and scale are drawn by its place in the pass"
#define CAPE_STREAM 0x4341 // the draws' key within the pass's
#define PE_TRAINING_POSITIONS 1 // a training pass's positions are augmented
static double cape_position(const CapeAugment* a, int pos, int b, int t, int training, uint64_t key) {
    if (!training) { return pos; }
    uint64_t row = random_seed(rp_key(key, (uint64_t)b, CAPE_STREAM));
    double shift = (double)random_f32(&row) * a->global - a->global / 2.0;
    double u = (double)random_f32(&row) * 2.0 * log((double)a->scale) - log((double)a->scale);
    double local = 0;
    if (a->local) {
        uint64_t token = random_seed(rp_key(key, ((uint64_t)b << 32) | (uint64_t)t, CAPE_STREAM));
        local = (double)random_f32(&token) - 0.5;
    }
    return (pos + shift + local) * exp(u);
}
#endif

// the position of token bt (row bt / T) that the sinusoid takes: cape's float one, or the
// token's (pos, given, drawn or its index, with the encoding's own)
static double sinusoid_position(const GPT2Config* cfg, const int* pos, size_t bt, int T, int training, uint64_t key) {
#if PE_IS(CAPE)
    return cape_position(&cfg->cape, pos[bt], (int)(bt / T), (int)(bt % T), training, key);
#else
    return pos[bt];
#endif
}

#elif PE_PART == PE_PART_CPU

#define PE_EMBED
static void pe_embed_forward(GPT2* model, floatX* out, int B, int T) {
    int C = model->config.channels;
    real scale = sqrt((real)C);
    const int* positions = pe_positions(model, 0);
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        real* o = out + (size_t)bt * C;
        double pos = sinusoid_position(&model->config, positions, bt, T, model->training, model->rp_key);
        for (int c = 0; c < C; c++) { o[c] *= scale; }
        for (int c = 0; c < C; c++) { o[c] += (real)sinusoid(pos, c, C); }
    }
}
static void pe_embed_backward(GPT2* model, floatX* dout, int B, int T) {
    int C = model->config.channels;
    real scale = sqrt((real)C);
    #pragma omp parallel for
    for (size_t i = 0; i < (size_t)B * T * C; i++) { dout[i] *= scale; }
}

#elif PE_PART == PE_PART_CUDA

#define PE_EMBED
// sinusoidal_embed_forward_kernel: one thread per (token, column) scales the token's
// embedding and adds its sinusoid, the angle in double as the CPU path (the token's float
// position fpos (B, T), cape's; else its position (B, T); NULL: its index t)
__global__ void sinusoidal_embed_forward_kernel(floatX* out, const int* positions, const double* fpos, int N, int T, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * C) { return; }
    size_t bt = idx / C;
    double pos = fpos != NULL ? fpos[bt] : positions != NULL ? positions[bt] : (int)(bt % T);
    float p = (float)sinusoid(pos, (int)(idx % C), C);
    out[idx] = (floatX)((float)out[idx] * sqrtf((float)C) + p);
}
// scale_kernel: x *= a (the tokens' gradient times sqrt(C))
__global__ void scale_kernel(floatX* x, size_t n, float a) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { x[i] = (floatX)((float)x[i] * a); }
}
static void pe_embed_forward(GPT2* model, floatX* out, int B, int T) {
    int C = model->config.channels;
    size_t n = (size_t)B * T * C;
    const double* fpos = NULL;
#if PE_IS(CAPE) // the float positions, made on the host as the CPU path makes them
    double* host = (double*)malloc_check((size_t)B * T * sizeof(double));
    const int* pos = model->pos_host; // the embedding's draw, (B, T)
    for (size_t bt = 0; bt < (size_t)B * T; bt++) { host[bt] = sinusoid_position(&model->config, pos, bt, T, model->training, model->rp_key); }
    fpos = (const double*)pe_pass_upload(model, host, (size_t)B * T * sizeof(double), "cape's positions");
    free(host);
#endif
    sinusoidal_embed_forward_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(out, pe_positions(model, 0), fpos, B * T, T, C);
    cudaCheckLaunch("sinusoidal_embed_forward_kernel");
}
static void pe_embed_backward(GPT2* model, floatX* dout, int B, int T) {
    int C = model->config.channels;
    size_t n = (size_t)B * T * C;
    scale_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(dout, n, sqrtf((float)C));
    cudaCheckLaunch("scale_kernel");
}

#elif PE_PART == PE_PART_TEST

#if SINUSOIDAL_FAIRSEQ
// fairseq: embed_scale sqrt(C), positions from padding_idx + 1 = 2, [sin | cos] halves of
// frequencies exp(-k log(10000) / (C/2 - 1)) (an independent reading, in double)
#define PE_REF_EMBED
static double pe_ref_embed(GPT2* model, double token, size_t bt, int c) {
    int C = model->config.channels, half = C / 2, k = c % half, pos = pe_positions(model, 0)[bt];
    double angle = (pos + 2) * exp(-k * log(10000.0) / (half - 1));
    return token * sqrt((double)C) + (c >= 2 * half ? 0 : c < half ? sin(angle) : cos(angle));
}
#elif PE_IS(SHAPE)
// OpenNMT's PositionalEncoding (SHAPE's embeddings.py 31-36): emb sqrt(dim), pe[:, 0::2] =
// sin(position div_term), pe[:, 1::2] = cos(...), div_term = exp(arange(0, dim, 2) -log(10000) / dim)
// (an independent reading, in double), at the token's position with its offset
#define PE_REF_EMBED
static double pe_ref_embed(GPT2* model, double token, size_t bt, int c) {
    int C = model->config.channels, pos = pe_positions(model, 0)[bt];
    double angle = pos * exp((double)(2 * (c / 2)) * -(log(10000.0) / C));
    return token * sqrt((double)C) + (c % 2 == 0 ? sin(angle) : cos(angle));
}

// the offsets (pe_positions_own): in training each row's own, uniform in {0..K-1}, every value
// drawn, the same for every token of the row; at evaluation K; K = 0 no offset in either
#define PE_TESTS
static void pe_tests(void) {
    printf("shape: the offsets of training and evaluation\n");
    enum { B = 4000, T = 3, K = 10 };
    GPT2Config cfg = tiny_config(T);
    cfg.shape_k = K;
    int* pos = (int*)malloc_check((size_t)B * T * sizeof(int));
    int count[K] = {0}, bad = 0;
    for (int i = 0; i < B * T; i++) { pos[i] = i % T; }
    int span = pe_positions_own(&cfg, pos, NULL, 1, B, T, T, 1, rp_key(RP_STREAM_TEST, 9, 0));
    for (int b = 0; b < B; b++) {
        int k = pos[b * T] - 0;
        bad += k < 0 || k >= K || pos[b * T + 1] != k + 1 || pos[b * T + 2] != k + 2;
        if (k >= 0 && k < K) { count[k]++; }
    }
    double worst = 0; // each offset B / K = 400 times, sd 19
    for (int k = 0; k < K; k++) { worst = fmax(worst, fabs(count[k] - B / K) / (double)(B / K)); }
    check(bad == 0, "training: each row one offset in {0..K-1}", bad, 0);
    check(worst < 0.25 && span <= T + K - 1, "training: every offset drawn 400 +- 25% times of 4000 rows", worst, 0.25);
    for (int i = 0; i < B * T; i++) { pos[i] = i % T; }
    pe_positions_own(&cfg, pos, NULL, 1, B, T, T, 0, rp_key(RP_STREAM_TEST, 9, 0));
    bad = 0;
    for (int i = 0; i < B * T; i++) { bad += pos[i] != i % T + K; }
    check(bad == 0, "evaluation: every row at K", bad, 0);
    cfg.shape_k = 0;
    for (int training = 0; training < 2; training++) {
        for (int i = 0; i < B * T; i++) { pos[i] = i % T; }
        pe_positions_own(&cfg, pos, NULL, 1, B, T, T, training, rp_key(RP_STREAM_TEST, 9, 0));
        bad = 0;
        for (int i = 0; i < B * T; i++) { bad += pos[i] != i % T; }
        check(bad == 0, training ? "K = 0, training: no offset (the plain table)" : "K = 0, evaluation: no offset", bad, 0);
    }
    free(pos);
}

// the tests' model: an offset range of 7
#define PE_TEST_CONFIG
static void pe_test_config(GPT2Config* cfg) { cfg->shape_k = 7; }
#else
// flashlight's SinusoidalPositionEmbedding (cape branch, .cpp 27-28, 77-86): input inputScale
// (sqrt(C) here) + concatenate(sin(positions scale_), cos(positions scale_[:C/2])), scale_ =
// exp(-2 iota(C/2) log(10000) / C) (an independent reading, in double), at the token's float
// position, which pe_tests checks
#define PE_REF_EMBED
static double pe_ref_embed(GPT2* model, double token, size_t bt, int c) {
    int C = model->config.channels, m = c < C / 2 ? c : c - C / 2;
    double pos = sinusoid_position(&model->config, pe_positions(model, 0), bt, model->seq_len, model->training, model->rp_key);
    double angle = pos * exp(-2.0 * m * log(10000.0) / C);
    return token * sqrt((double)C) + (c < C / 2 ? sin(angle) : cos(angle));
}

// the augmentation's draws over B rows of T = 2 at positions 0, 1 (cape_position): in training
// each row shifted by delta in [-G/2, G/2) and scaled by lambda in [1/S, S), each token moved by
// eps in [-1/2, 1/2), each of the three uniform (its mean within 2% of the width, its quartiles'
// shares within 2% of a quarter: 10 and 6 standard deviations), the same key the same positions, another key others; at evaluation and with
// G = 0, S = 1, no local shift the positions themselves, and a model's losses at them equal
#define PE_TESTS
static void pe_tests(void) {
    printf("cape: the augmentation of training's positions\n");
    enum { B = 20000 };
    uint64_t key = rp_key(RP_STREAM_TEST, 9, 0);
    const CapeAugment shift = {6, 1, 0}, scale = {0, 4, 0}, local = {0, 1, 1};
    const CapeAugment* cases[3] = {&shift, &scale, &local};
    const char* what[3] = {"global shift: delta uniform in [-G/2, G/2), G = 6, the same for the row's tokens",
                           "global scaling: ln lambda uniform in [-ln S, ln S), S = 4, the row's",
                           "local shift: eps uniform in [-1/2, 1/2), each token's"};
    for (int k = 0; k < 3; k++) {
        const CapeAugment* a = cases[k];
        double lo = k == 0 ? -3 : k == 1 ? -log(4.0) : -0.5, width = -2 * lo, mean = 0, worst = 0;
        int quart[4] = {0}, bad = 0;
        for (int b = 0; b < B; b++) {
            double p0 = cape_position(a, 0, b, 0, 1, key), p1 = cape_position(a, 1, b, 1, 1, key);
            double v = k == 0 ? p0 : k == 1 ? log(p1 - p0) : p0; // delta; ln lambda; eps of token 0
            bad += v < lo || v >= lo + width || (k == 0 && p1 - p0 != 1) || (k == 2 && p1 - 1 == p0);
            mean += v / B;
            quart[(int)fmin(3, fmax(0, floor((v - lo) / width * 4)))]++;
        }
        for (int q = 0; q < 4; q++) { worst = fmax(worst, fabs(quart[q] - B / 4) / (double)B); }
        double off = fmax(fabs(mean - (lo + width / 2)) / width, worst);
        check(bad == 0 && off < 0.02, what[k], bad > 0 ? 1 : off, 0.02);
    }
    int same = 1, moved = 0, plain = 1;
    const CapeAugment all = {10, 2, 1}, none = {0, 1, 0};
    for (int b = 0; b < 50; b++) {
        for (int t = 0; t < 8; t++) {
            double p = cape_position(&all, t, b, t, 1, key);
            same &= p == cape_position(&all, t, b, t, 1, key);
            moved += p != cape_position(&all, t, b, t, 1, key + 1);
            plain &= cape_position(&all, t, b, t, 0, key) == t && cape_position(&none, t, b, t, 1, key) == t;
        }
    }
    check(same && moved == 400, "the pass's key decides the positions: the same key the same, another others", 400 - moved, 0);
    check(plain, "evaluation, and training with G = 0, S = 1, no local shift: the positions themselves", !plain, 0);
    enum { NB = 2, T = 16 };
    GPT2Config cfg = tiny_config(T);
    cfg.cape = none;
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 3);
    int x[NB * T];
    uint64_t rng = random_seed(5);
    random_tokens(x, NB * T, cfg.vocab_size, &rng);
    gpt2_forward(&model, x, x, NB, T, 0);
    double evaluation = model.mean_loss;
    gpt2_forward(&model, x, x, NB, T, 1);
    check(model.mean_loss == evaluation, "no augmentation: a training pass's loss is an evaluation's, bit for bit", model.mean_loss - evaluation, 0);
    model.config.cape = all;
    gpt2_forward(&model, x, x, NB, T, 1);
    check(model.mean_loss != evaluation, "the augmentation changes a training pass's loss", model.mean_loss == evaluation, 0);
    gpt2_free(&model);
}

// the tests' model: every part of the augmentation, a wide scale
#define PE_TEST_CONFIG
static void pe_test_config(GPT2Config* cfg) { cfg->cape = (CapeAugment){6, 3, 1}; }
#endif

#endif
