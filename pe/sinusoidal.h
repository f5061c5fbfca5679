/*
The sinusoidal absolute encodings: fixed sinusoids of the token's position added to its
embedding times sqrt(C), no parameters (the backward only scales the tokens' gradient by
sqrt(C)), each with its official code's table:

  sinusoidal (Vaswani et al. 2017), as fairseq computes it, the ALiBi paper's baseline:

      x_t = sqrt(C) wte[token_t] + p[pos],   pos = t + 2 (fairseq counts positions from its
                                             padding_idx + 1)
      p[pos, k] = sin(pos w_k),  p[pos, C/2 + k] = cos(pos w_k),  w_k = 10000^(-k / (C/2 - 1))

  for k < C/2 (tensor2tensor's layout; an odd C leaves the last column 0). Revision 1
  (revision 0 added interleaved sinusoids to unscaled embeddings).

  shape (Kiyono et al. 2021, SHAPE), as its official code (butsugiri/shape at a2b04a2,
  onmt/modules/embeddings.py 27-79, OpenNMT-py's PositionalEncoding): the interleaved table

      p[pos, 2m] = sin(pos d_m),  p[pos, 2m + 1] = cos(pos d_m),  d_m = 10000^(-2m / C)

  from pos = t, every sequence shifted by an offset: in training its own, k_b uniform in
  {0..K-1} (torch.randint's bound is excluded), at evaluation K itself (embeddings.py 76-77,
  a shift no training row had); x_t = sqrt(C) wte[token_t] + p[t + k]. K = 0 is the plain
  table. K is the checkpoint's word 18 (the driver's -sk); the offsets are the encoding's own
  positions (pe_positions_own), which every path reads as it reads given positions.

Both compute the angles in double (the official tables are float32: at position p their
angles differ by up to about p 6e-8 rad; docs/encodings.md).
*/
#if PE_PART == PE_PART_DEFINITION

#define SINUSOIDAL_FIRST_POS 2

#define PE_CONFIG_CHECK
static void pe_config_check(const GPT2Config* c, const char* what) {
    if (c->channels < 4) { fatal("%s: sinusoidal needs at least 4 channels, got %d", what, c->channels); } // w_k divides by C/2 - 1
#if PE_IS(SHAPE)
    if (c->channels % 2 != 0) { fatal("%s: shape's interleaved table needs an even number of channels, got %d", what, c->channels); }
#endif
}

#if PE_IS(SINUSOIDAL)
// column c of C of the sinusoid of a token at position pos (angles in double in both paths)
PE_FN double sinusoid(double pos, int c, int C) {
    int half = C / 2;
    if (c >= 2 * half) { return 0; } // an odd C's last column
    double angle = (pos + SINUSOIDAL_FIRST_POS) * exp(-(c % half) * log(10000.0) / (half - 1));
    return c < half ? sin(angle) : cos(angle);
}
#else
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
static int pe_positions_own(const GPT2Config* cfg, int* pos, int draws, int B, int T, int span, int training, uint64_t key) {
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
#endif

#elif PE_PART == PE_PART_CPU

#define PE_EMBED
static void pe_embed_forward(GPT2* model, floatX* out, int B, int T) {
    int C = model->config.channels;
    real scale = sqrt((real)C);
    const int* positions = pe_positions(model, 0);
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        real* o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) { o[c] *= scale; }
        for (int c = 0; c < C; c++) { o[c] += (real)sinusoid(positions[bt], c, C); }
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
// embedding and adds its sinusoid, the angle in double as the CPU path (positions (B, T);
// NULL: the token's index t)
__global__ void sinusoidal_embed_forward_kernel(floatX* out, const int* positions, int N, int T, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * C) { return; }
    size_t bt = idx / C;
    float p = (float)sinusoid(positions != NULL ? positions[bt] : (int)(bt % T), (int)(idx % C), C);
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
    sinusoidal_embed_forward_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(out, pe_positions(model, 0), B * T, T, C);
    cudaCheckLaunch("sinusoidal_embed_forward_kernel");
}
static void pe_embed_backward(GPT2* model, floatX* dout, int B, int T) {
    int C = model->config.channels;
    size_t n = (size_t)B * T * C;
    scale_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(dout, n, sqrtf((float)C));
    cudaCheckLaunch("scale_kernel");
}

#elif PE_PART == PE_PART_TEST

#if PE_IS(SINUSOIDAL)
// fairseq: embed_scale sqrt(C), positions from padding_idx + 1 = 2, [sin | cos] halves of
// frequencies exp(-k log(10000) / (C/2 - 1)) (an independent reading, in double)
#define PE_REF_EMBED
static double pe_ref_embed(GPT2* model, double token, int pos, int c) {
    int C = model->config.channels, half = C / 2, k = c % half;
    double angle = (pos + 2) * exp(-k * log(10000.0) / (half - 1));
    return token * sqrt((double)C) + (c >= 2 * half ? 0 : c < half ? sin(angle) : cos(angle));
}
#else
// OpenNMT's PositionalEncoding (SHAPE's embeddings.py 31-36): emb sqrt(dim), pe[:, 0::2] =
// sin(position div_term), pe[:, 1::2] = cos(...), div_term = exp(arange(0, dim, 2) -log(10000) / dim)
// (an independent reading, in double), at the token's position with its offset
#define PE_REF_EMBED
static double pe_ref_embed(GPT2* model, double token, int pos, int c) {
    int C = model->config.channels;
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
    int span = pe_positions_own(&cfg, pos, 1, B, T, T, 1, rp_key(RP_STREAM_TEST, 9, 0));
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
    pe_positions_own(&cfg, pos, 1, B, T, T, 0, rp_key(RP_STREAM_TEST, 9, 0));
    bad = 0;
    for (int i = 0; i < B * T; i++) { bad += pos[i] != i % T + K; }
    check(bad == 0, "evaluation: every row at K", bad, 0);
    cfg.shape_k = 0;
    for (int training = 0; training < 2; training++) {
        for (int i = 0; i < B * T; i++) { pos[i] = i % T; }
        pe_positions_own(&cfg, pos, 1, B, T, T, training, rp_key(RP_STREAM_TEST, 9, 0));
        bad = 0;
        for (int i = 0; i < B * T; i++) { bad += pos[i] != i % T; }
        check(bad == 0, training ? "K = 0, training: no offset (the plain table)" : "K = 0, evaluation: no offset", bad, 0);
    }
    free(pos);
}

// the tests' model: an offset range of 7
#define PE_TEST_CONFIG
static void pe_test_config(GPT2Config* cfg) { cfg->shape_k = 7; }
#endif

#endif
