/*
rope (Su et al. 2021) and xpos (Sun et al. 2022, torchscale's code), one family: q and k
are rotated by their position in every layer.

rope: each pair (2k, 2k+1) of q and of k at position n is rotated by the angle n theta_k,
theta_k = 10000^(-2k/hs), so that q_i . k_j depends on i - j only; the backward rotates the
gradients back (the transpose of a rotation). At evaluation a RoPE scaling variant (-rs:
PI, NTK-aware, YaRN, static or dynamic; llmc/pe.h's PEEval) changes theta_k and multiplies
q and k by YaRN's mscale (rope_frequencies below, jquesnelle/yarn's scaled_rope code).

xpos: rope, then pair k of q at position n times zeta_k^(m/gamma) and of k times
zeta_k^(-m/gamma), m = n - ceil(T/2), zeta_k = (2k + 0.4 hs) / (1.4 hs), gamma = 512:
q_i . k_j gains zeta_k^((i-j)/gamma), a decay with distance, strongest at high frequencies
(the centre cancels). Lengths whose largest factor would exceed 2^XPOS_MAX_LOG2 are refused
(fp32 and bf16 hold 2^+-126; the margin keeps q, k and their gradients normal numbers).
With -xb 1, blockwise causal attention beyond the training length w: query i sees keys
from (floor(i / (w/2)) - 1) * (w/2) on (a bias of PE_MASKED_BIAS before that).

With randomized positions the rotation and xpos's factors take pos_t (each layer its own
draw) and the centre is that of the draws' range.
*/
#if PE_PART == PE_PART_DEFINITION

#define ROPE_BASE 10000.0f
#define XPOS_SCALE_BASE 512.0
#define XPOS_MAX_LOG2 64.0
// the bias of a key outside xPos's blockwise causal attention window: finite, so that an
// online softmax never meets -inf - (-inf) in a row whose first key tile is all masked
#define PE_MASKED_BIAS (-1e30f)
#if PE_IS(XPOS)
#define XPOS_GAMMA XPOS_SCALE_BASE
#else
#define XPOS_GAMMA INFINITY // rope is xpos without the decay: zeta^(n / inf) = 1
#endif

#define PE_CONFIG_CHECK
static void pe_config_check(const GPT2Config* c, const char* what) {
    if ((c->channels / c->num_heads) % 2 != 0) { fatal("%s: %s needs an even head size, got %d", what, pe_name(c->pe), c->channels / c->num_heads); }
}

// xPos's per-pair decay base zeta_m = (2m + 0.4 hs) / (1.4 hs), m in [0, hs/2) (torchscale)
PE_FN double xpos_zeta(int m, int hs) { return (2.0 * m + 0.4 * hs) / (1.4 * hs); }

// the longest sequence whose xPos factors zeta_0^(+-ceil(T/2)/gamma) stay within 2^XPOS_MAX_LOG2
static inline int xpos_max_length(int hs) {
    return 2 * (int)floor(XPOS_MAX_LOG2 * XPOS_SCALE_BASE / -log2(xpos_zeta(0, hs)));
}
// the evaluation variants: rope's scalings, xpos's blockwise causal attention (llmc/pe.h)
#define PE_EVAL_VARIANTS
static int pe_has_eval_variant(int v) { return v == PE_EVAL_PLAIN || (PE_IS(ROPE) ? v <= PE_EVAL_DYN_YARN : v == PE_EVAL_BCA); }

// xPos's blockwise causal attention with blocks of `half` (0: off): the bias of key j for query i
PE_FN real xpos_bca_bias(int half, int i, int j) { return half > 0 && j < (i / half - 1) * half ? PE_MASKED_BIAS : 0; }

#if PE_IS(XPOS)
#define PE_MAX_LENGTH
static int pe_max_length(const GPT2Config* c) { return xpos_max_length(c->channels / c->num_heads); }
#define PE_LIMIT_REASON "its scale factors leave the floating-point range beyond"
#endif

#define YARN_BETA_FAST 32.0
#define YARN_BETA_SLOW 1.0

// YaRN's pair index whose wavelength fits r rotations in the training length L (the code's
// find_correction_dim): hs ln(L / (2 pi r)) / (2 ln base)
static inline double yarn_correction_dim(double r, int hs, int L) {
    return hs * log(L / (r * 2.0 * M_PI)) / (2.0 * log((double)ROPE_BASE));
}

// the ramp's ends lo = max(floor(I(32)), 0), hi = min(ceil(I(1)), hs - 1) (find_correction_range)
static inline void yarn_correction_range(int hs, int L, int* lo, int* hi) {
    int a = (int)floor(yarn_correction_dim(YARN_BETA_FAST, hs, L));
    int b = (int)ceil(yarn_correction_dim(YARN_BETA_SLOW, hs, L));
    *lo = a > 0 ? a : 0;
    *hi = b < hs - 1 ? b : hs - 1;
}

// YaRN's q and k factor: 0.1 ln s + 1 for s > 1, else 1 (get_mscale); the logits get its square
static inline double yarn_mscale(double s) { return s > 1 ? 0.1 * log(s) + 1.0 : 1.0; }

// the scale factor of a RoPE variant in a forward pass over T tokens: the static factor,
// or for the dynamic variants max(1, T / L); 1 for plain rope
static inline double rope_scale(const PEEval* e, int T) {
    switch (e->variant) {
        case PE_EVAL_PI: case PE_EVAL_NTK: case PE_EVAL_YARN: return e->rope_factor;
        case PE_EVAL_DYN_PI: case PE_EVAL_DYN_NTK: case PE_EVAL_DYN_YARN: return T > e->train_len ? (double)T / e->train_len : 1.0;
        default: return 1.0;
    }
}

// RoPE's angular frequencies inv_freq[k], k in [0, hs/2) (radians per position), for the
// variant in effect in a forward pass over T tokens (jquesnelle/yarn's scaled_rope code);
// returns the factor that q and k are multiplied by (YaRN's mscale(s), 1 otherwise)
static double rope_frequencies(double* inv_freq, int hs, const PEEval* e, int T) {
    double s = rope_scale(e, T), base = ROPE_BASE;
    int v = e->variant;
    if (v == PE_EVAL_NTK || v == PE_EVAL_DYN_NTK) { base *= pow(s, hs / (hs - 2.0)); }
    int lo = 0, hi = 0;
    if (v == PE_EVAL_YARN || v == PE_EVAL_DYN_YARN) { yarn_correction_range(hs, e->train_len, &lo, &hi); }
    for (int k = 0; 2 * k < hs; k++) {
        double theta = pow(base, -2.0 * k / hs);
        if (v == PE_EVAL_PI || v == PE_EVAL_DYN_PI) { theta /= s; }
        if (v == PE_EVAL_YARN || v == PE_EVAL_DYN_YARN) {
            // g = 1 keeps theta (high frequencies), g = 0 interpolates theta / s; the ramp
            // goes linearly over the pair index between lo and hi (hi == lo: hi + 0.001)
            double ramp = (k - lo) / (hi == lo ? 0.001 : (double)(hi - lo));
            ramp = ramp < 0 ? 0 : (ramp > 1 ? 1 : ramp);
            double g = 1 - ramp;
            theta = theta / s * (1 - g) + theta * g;
        }
        inv_freq[k] = theta;
    }
    return v == PE_EVAL_YARN || v == PE_EVAL_DYN_YARN ? yarn_mscale(s) : 1.0;
}

#elif PE_PART == PE_PART_CPU

// rotates (direction 1) or rotates back (-1) q and k of every token, token t of row b at
// position pos[b T + t] (of a range of `span` positions: xpos's centre), with the frequencies
// of the evaluation variant e and xPos's decay of scale base gamma
static void rope_rotate(real* qkv, const PEEval* e, double gamma, const int* pos, int span, int B, int T, int C, int NH,
                        int direction) {
    int hs = C / NH;
    double inv_freq[hs / 2];
    double mscale = rope_frequencies(inv_freq, hs, e, T);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            real* row = qkv + ((size_t)b * T + t) * 3 * C;
            int pt = pos[(size_t)b * T + t];
            for (int k = 0; 2 * k < hs; k++) {
                double angle = pt * inv_freq[k];
                real cs = (real)cos(angle), sn = (real)(direction * sin(angle));
                double z = pow(xpos_zeta(k, hs), (pt - (span + 1) / 2) / gamma);
                double f[2] = {mscale * z, mscale / z}; // the factors of q and k
                for (int part = 0; part < 2; part++) { // q, then k
                    for (int h = 0; h < NH; h++) {
                        real* x = row + part * C + h * hs + 2 * k;
                        real x0 = x[0], x1 = x[1];
                        x[0] = (real)f[part] * (x0 * cs - x1 * sn);
                        x[1] = (real)f[part] * (x0 * sn + x1 * cs);
                    }
                }
            }
        }
    }
}
#define PE_LAYER
static void pe_layer_forward(GPT2* model, int l, int B, int T) {
    GPT2Config* c = &model->config;
    rope_rotate(model->acts.t.qkv + layer_slot(model, l) * model->acts_N * 3 * c->channels, &model->pe_eval, XPOS_GAMMA,
                pe_positions(model, l), model->pos_span, B, T, c->channels, c->num_heads, 1);
}
static void pe_layer_backward(GPT2* model, int l, int B, int T) {
    GPT2Config* c = &model->config;
    rope_rotate(model->grads_acts.t.qkv + (size_t)l * model->acts_N * 3 * c->channels, &model->pe_eval, XPOS_GAMMA,
                pe_positions(model, l), model->pos_span, B, T, c->channels, c->num_heads, -1);
}

#if PE_IS(XPOS)
// blockwise causal attention (-xb): the window's half w/2, 0 when it is off (every key j <= i)
#define PE_BIAS
typedef struct { int half; } PEBias;
typedef struct { int i; } PERow;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    const PEEval* e = &model->pe_eval;
    pb->half = e->variant == PE_EVAL_BCA && T > e->train_len ? e->train_len / 2 : 0;
}
static inline PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { PERow r = {i}; return r; }
static inline real pe_bias(const PEBias* pb, const PERow* r, int j) { return xpos_bca_bias(pb->half, r->i, j); }
#endif

#elif PE_PART == PE_PART_CUDA

// The table of cos, sin and the two factors of every position 0..span-1 and pair is computed in
// double, as the CPU path, for the frequencies of the evaluation variant in effect
// (rope_frequencies, YaRN's mscale in the factors), and again whenever the positions' range,
// the length or the variant changes; a token reads the row of its position (given, drawn or
// its index).
#define PE_LAYER
struct RopeFreq { double f[64]; }; // theta_k of hs/2 <= 64 pairs, by value to the kernel
// rope_table_kernel: one thread per (position, pair) computes cos, sin and the q and k
// factors, in double as the CPU path (positions 0..span-1: xpos's centre is the range's)
__global__ void rope_table_kernel(float4* table, RopeFreq freq, double mscale, double gamma, int span, int hs) {
    int half = hs / 2;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= span * half) { return; }
    int pt = idx / half, k = idx % half;
    double angle = pt * freq.f[k];
    double z = pow(xpos_zeta(k, hs), (pt - (span + 1) / 2) / gamma);
    table[idx] = make_float4((float)cos(angle), (float)sin(angle), (float)(mscale * z), (float)(mscale / z));
}
// rope_rotate_kernel: one thread per (token, head, pair) rotates that pair of q and of k by
// the table's row of the token's position (pos (B, T); NULL: its index); direction -1 undoes it
__global__ void rope_rotate_kernel(floatX* qkv, const float4* table, const int* pos, int N, int T, int C, int hs, float direction) {
    int half = hs / 2, pairs = C / 2;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * pairs) { return; }
    size_t bt = idx / pairs;
    int pc = idx % pairs; // pair index over all heads: head pc / half, frequency pc % half
    int t = pos != NULL ? pos[bt] : (int)(bt % T), k = pc % half;
    float4 cs = table[t * half + k];
    float sn = direction * cs.y, f[2] = {cs.z, cs.w};
    for (int part = 0; part < 2; part++) { // q, then k
        floatX* x = qkv + bt * 3 * C + part * C + 2 * pc;
        float x0 = (float)x[0], x1 = (float)x[1];
        x[0] = (floatX)(f[part] * (x0 * cs.x - x1 * sn));
        x[1] = (floatX)(f[part] * (x0 * sn + x1 * cs.x));
    }
}
// the table for a forward pass over T tokens whose positions lie in [0, pos_span), unless it
// is already there (the memory grows to the longest range)
static void rope_table_update(GPT2* model, int T) {
    const PEEval* e = &model->pe_eval;
    const PEEval* had = &model->rope_table_eval;
    int span = model->pos_span;
    if (model->rope_table_T == T && model->rope_table_span == span && had->variant == e->variant && had->rope_factor == e->rope_factor
        && had->train_len == e->train_len) { return; }
    int hs = model->config.channels / model->config.num_heads;
    if (model->rope_len < span) {
        cudaCheck(cudaStreamSynchronize(ctx.stream)); // no kernel reads the old table any more
        cuda_free((void**)&model->rope_table);
        model->rope_table = (float4*)cuda_malloc((size_t)span * (hs / 2) * sizeof(float4), "the rope table");
        model->rope_len = span;
    }
    RopeFreq freq;
    double mscale = rope_frequencies(freq.f, hs, e, T);
    rope_table_kernel<<<CEIL_DIV(span * hs / 2, 256), 256, 0, ctx.stream>>>(model->rope_table, freq, mscale, XPOS_GAMMA, span, hs);
    cudaCheckLaunch("rope_table_kernel");
    model->rope_table_T = T;
    model->rope_table_span = span;
    model->rope_table_eval = *e;
}
static void rope_rotate(floatX* qkv, const float4* table, const int* pos, int B, int T, int C, int NH, float direction) {
    size_t n = (size_t)B * T * (C / 2);
    rope_rotate_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(qkv, table, pos, B * T, T, C, C / NH, direction);
    cudaCheckLaunch("rope_rotate_kernel");
}
static void pe_layer_forward(GPT2* model, int l, int B, int T) {
    GPT2Config* c = &model->config;
    rope_table_update(model, T);
    rope_rotate(model->acts.qkv + layer_slot(model, l) * model->acts_N * 3 * c->channels, model->rope_table, pe_positions(model, l),
                B, T, c->channels, c->num_heads, 1.0f);
}
static void pe_layer_backward(GPT2* model, int l, int B, int T) {
    GPT2Config* c = &model->config;
    rope_table_update(model, T);
    rope_rotate(model->gs.dbig, model->rope_table, pe_positions(model, l), B, T, c->channels, c->num_heads, -1.0f);
}
#if PE_IS(XPOS)
// blockwise causal attention (-xb): the window's half w/2, 0 when it is off (every key j <= i)
#define PE_BIAS
struct PEBias { int half; };
struct PERow { int b, h, i; float shift; };
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    const PEEval* e = &model->pe_eval;
    pb->half = e->variant == PE_EVAL_BCA && T > e->train_len ? e->train_len / 2 : 0;
}
__device__ __forceinline__ PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { return {b, h, i, 0.0f}; }
__device__ __forceinline__ float pe_bias(const PEBias* pb, const PERow* r, int j) { return xpos_bca_bias(pb->half, r->i, j); }
#endif

#elif PE_PART == PE_PART_TEST

// q and k of a token at position pos rotated as the definition says (an independent reading,
// in double): rope with a scaling variant's frequencies and YaRN's factor (rope_frequencies,
// whose table is checked against hand-computed values below), xpos's decay from torchscale
#define PE_REF_ROTATE
static void pe_ref_rotate(GPT2* model, double* qkv, int pos, int T) {
    int C = model->config.channels, NH = model->config.num_heads, hs = C / NH;
    double freq[2048];
    double mscale = rope_frequencies(freq, hs, &model->pe_eval, T);
    for (int part = 0; part < 2; part++) {
        for (int h = 0; h < NH; h++) {
            for (int k = 0; k < hs / 2; k++) {
                double theta = pos * (model->pe_eval.variant == PE_EVAL_PLAIN || model->pe_eval.variant == PE_EVAL_BCA
                                      ? pow(10000.0, -2.0 * k / hs) : freq[k]);
                double f = mscale;
#if PE_IS(XPOS)
                // torchscale: zeta = (2k + 0.4 hs) / (1.4 hs), q times zeta^(n/512), k times
                // zeta^(-n/512), n = pos - ceil(T/2) (randomized positions: the middle of their range)
                double zeta = (2.0 * k + 0.4 * hs) / (1.4 * hs);
                f = pow(zeta, (part == 0 ? 1 : -1) * (pos - ceil(model->pos_span / 2.0)) / 512.0);
#endif
                double* p = qkv + part * C + h * hs + 2 * k;
                double a = p[0], b = p[1];
                p[0] = f * (a * cos(theta) - b * sin(theta));
                p[1] = f * (a * sin(theta) + b * cos(theta));
            }
        }
    }
}

#if PE_IS(XPOS)
// blockwise causal attention (sunyt32/torchscale): beyond the training length w, query i
// sees the keys of its own block of w/2 and the one before
#define PE_REF_BIAS
static double pe_ref_bias(GPT2* model, int l, int b, int h, int i, int j, int T) {
    int w = model->pe_eval.train_len;
    if (model->pe_eval.variant == PE_EVAL_BCA && T > w && j < (i / (w / 2) - 1) * (w / 2)) { return -INFINITY; }
    return 0;
}

// xpos with an infinite scale base is rope; blockwise causal attention is the naive
// attention with the window mask, and off at or below the training length; the length
// limit of its factors
static void test_xpos(void) {
    printf("xpos: identities, blockwise causal attention, numeric range\n");
    int B = 2, T = 40, C = 12, NH = 3, hs = 4;
    uint64_t rng = random_seed(31);
    size_t n = (size_t)B * T * 3 * C;
    real* a = (real*)malloc_check(n * sizeof(real));
    real* r = (real*)malloc_check(n * sizeof(real));
    for (size_t i = 0; i < n; i++) { a[i] = r[i] = random_normal(&rng); }
    PEEval plain = {PE_EVAL_PLAIN, 1, T};
    int pos[80]; // (B, T)
    for (int bt = 0; bt < B * T; bt++) { pos[bt] = bt % T; }
    rope_rotate(a, &plain, INFINITY, pos, T, B, T, C, NH, 1);
    double e = 0;
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        for (int c = 0; c < 2 * C; c++) { // q and k: rope's rotation of pair c/2 within its head
            int k = (c % hs) / 2;
            real* p = r + (size_t)bt * 3 * C + c - c % 2;
            double th = t * pow(10000.0, -2.0 * k / hs);
            double want = c % 2 == 0 ? p[0] * cos(th) - p[1] * sin(th) : p[0] * sin(th) + p[1] * cos(th);
            e = fmax(e, fabs(a[(size_t)bt * 3 * C + c] - want));
        }
    }
    check(e < 1e-5, "scale base gamma = inf: q, k rotated exactly as rope", e, 1e-5);
    for (size_t i = 0; i < n; i++) { a[i] = r[i]; }
    rope_rotate(a, &plain, XPOS_SCALE_BASE, pos, T, B, T, C, NH, 1);
    rope_rotate(a, &plain, XPOS_SCALE_BASE, pos, T, B, T, C, NH, -1); // the transpose of the same map
    double moved = 0;
    for (size_t i = 0; i < n; i++) { moved = fmax(moved, fabs(a[i] - r[i])); }
    check(moved > 1e-3, "gamma = 512: forward then backward map is not the identity (decay)", moved, 1e-3);
    free(a); free(r);

    GPT2Config cfg = tiny_config(16); // trained at 16: w/2 = 8
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 5);
    perturb_parameters(&model, 0.1f, &rng);
    int x[80], y[80];
    random_tokens(x, B * T, cfg.vocab_size, &rng);
    random_tokens(y, B * T, cfg.vocab_size, &rng);
    float l0[80], l1[80];
    gpt2_forward(&model, x, y, B, 16, 0);
    gpt2_token_losses(&model, l0);
    PEEval bca = {PE_EVAL_BCA, 1, 16};
    model.pe_eval = bca;
    gpt2_forward(&model, x, y, B, 16, 0);
    gpt2_token_losses(&model, l1);
    double d = 0;
    for (int i = 0; i < B * 16; i++) { d = fmax(d, fabs(l0[i] - l1[i])); }
    check(d == 0, "BCA at T = the training length: unchanged", d, 0);
    gpt2_forward(&model, x, y, B, T, 1); // training forward: every layer's activations kept
    for (int l = 0; l < cfg.num_layers; l++) {
        double da = attention_vs_reference(&model, l, pe_ref_bias, B, T);
        check(da < 1e-5, "BCA at T = 40: attention with the window mask", da, 1e-5);
    }
    gpt2_token_losses(&model, l1);
    model.pe_eval = plain;
    gpt2_forward(&model, x, y, B, T, 0);
    gpt2_token_losses(&model, l0);
    d = 0;
    for (int i = 0; i < B * T; i++) { d = fmax(d, fabs(l0[i] - l1[i])); }
    check(d > 1e-4, "BCA at T = 40 changes the losses", d, 1e-4);
    gpt2_free(&model);
    int lim = xpos_max_length(64);
    double top = -log2(xpos_zeta(0, 64)) * ceil(lim / 2.0) / XPOS_SCALE_BASE, over = -log2(xpos_zeta(0, 64)) * ceil((lim + 2) / 2.0) / XPOS_SCALE_BASE;
    check(top <= XPOS_MAX_LOG2 && over > XPOS_MAX_LOG2 && lim > 32768, "length limit: largest factor <= 2^64, > 32768 tokens", lim, 32768);
    char expect[64];
    snprintf(expect, sizeof(expect), "cannot process T = %d", xpos_max_length(hs) + 1);
    expect_failure("a forward beyond the limit fails with one line", fail_forward_beyond_maxT, NULL, expect);
}

#define PE_TESTS
static void pe_tests(void) { test_xpos(); }

#else
// the frequency tables of the RoPE scaling variants against the values computed by hand
// in the spec (next-encodings.md, sec. 5) for GPT-2 small's head size 64, base 10000
static void test_rope_scaling_tables(void) {
    printf("RoPE scaling: frequency tables for hs = 64 against hand-computed values\n");
    int hs = 64, lo, hi;
    const int lens[3] = {128, 512, 1024}, los[3] = {0, 3, 5}, his[3] = {11, 16, 18};
    const double raw_lo[3] = {-1.57, 3.248, 5.656}, raw_hi[3] = {10.47, 15.289, 17.697};
    int bad = 0;
    double e = 0;
    for (int k = 0; k < 3; k++) {
        yarn_correction_range(hs, lens[k], &lo, &hi);
        bad += lo != los[k] || hi != his[k];
        e = fmax(e, fmax(fabs(yarn_correction_dim(32, hs, lens[k]) - raw_lo[k]), fabs(yarn_correction_dim(1, hs, lens[k]) - raw_hi[k])));
    }
    check(bad == 0, "YaRN ramp ends (lo, hi): L=128 (0, 11), 512 (3, 16), 1024 (5, 18)", bad, 0);
    check(e < 5e-3, "YaRN raw dims: -1.57 10.47, 3.248 15.289, 5.656 17.697", e, 5e-3);
    const double s4[4] = {2, 4, 8, 16};
    const double msc[4] = {1.06931, 1.13863, 1.20794, 1.27726}, logit[4] = {1.14343, 1.29648, 1.45913, 1.63139};
    const double ntk_base[4] = {20452.2, 41829.4, 85550.4, 174969.6};
    double em = 0, el = 0, eb = 0, ep = 0;
    double freq[32], plain[32];
    for (int k = 0; k < 32; k++) { plain[k] = pow(10000.0, -2.0 * k / hs); }
    for (int n = 0; n < 4; n++) {
        PEEval yarn = {PE_EVAL_YARN, s4[n], 512}, ntk = {PE_EVAL_NTK, s4[n], 512}, pi = {PE_EVAL_PI, s4[n], 512};
        double m = rope_frequencies(freq, hs, &yarn, 512);
        em = fmax(em, fabs(m - msc[n]));
        el = fmax(el, fabs(m * m - logit[n]));
        double mn = rope_frequencies(freq, hs, &ntk, 512);
        eb = fmax(eb, fabs(pow(freq[1], -hs / 2.0) - ntk_base[n])); // theta_1 = base^(-2/64)
        eb = fmax(eb, fabs(mn - 1));
        rope_frequencies(freq, hs, &pi, 512);
        for (int k = 0; k < 32; k++) { ep = fmax(ep, fabs(freq[k] * s4[n] / plain[k] - 1)); }
    }
    check(em < 1e-5, "YaRN mscale at s = 2, 4, 8, 16: 1.06931 ... 1.27726", em, 1e-5);
    check(el < 1e-5, "YaRN logit factor mscale^2: 1.14343 ... 1.63139", el, 1e-5);
    check(eb < 0.05, "NTK base 10000 s^(64/62): 20452.2 ... 174969.6", eb, 0.05);
    check(ep < 1e-12, "PI: theta_k / s", ep, 1e-12);
    // YaRN at L = 512, s = 4: pairs up to lo = 3 keep theta, from hi = 16 on theta / 4, a
    // linear blend in between (pair 8: ramp 5/13)
    PEEval y4 = {PE_EVAL_YARN, 4, 512};
    rope_frequencies(freq, hs, &y4, 512);
    double ey = 0;
    for (int k = 0; k < 32; k++) {
        double want = k <= 3 ? plain[k] : (k >= 16 ? plain[k] / 4 : plain[k] * ((k - 3) / 13.0 / 4 + 1 - (k - 3) / 13.0));
        ey = fmax(ey, fabs(freq[k] / want - 1));
    }
    check(ey < 1e-12, "YaRN L=512 s=4: keep theta to pair 3, theta/4 from 16, ramp between", ey, 1e-12);
    // YaRN whose ramp starts beyond the last pair (lo >= hs/2: L >= 2 pi 32 10000^(32/32)...)
    // is RoPE with q and k times mscale
    PEEval far = {PE_EVAL_YARN, 8, 4000000};
    yarn_correction_range(hs, far.train_len, &lo, &hi);
    double mf = rope_frequencies(freq, hs, &far, 512), ef = fabs(mf - yarn_mscale(8));
    for (int k = 0; k < 32; k++) { ef = fmax(ef, fabs(freq[k] / plain[k] - 1)); }
    check(lo >= hs / 2 && ef < 1e-12, "YaRN with lo >= hs/2 is RoPE times mscale (L = 4e6)", ef, 1e-12);
    // dynamic variants: plain up to the training length, the static variant of s = T / L beyond
    const int dyn[3] = {PE_EVAL_DYN_PI, PE_EVAL_DYN_NTK, PE_EVAL_DYN_YARN}, stat[3] = {PE_EVAL_PI, PE_EVAL_NTK, PE_EVAL_YARN};
    double ed = 0;
    for (int v = 0; v < 3; v++) {
        PEEval d = {dyn[v], 99, 512}, st = {stat[v], 4, 512};
        double g[32];
        double m1 = rope_frequencies(freq, hs, &d, 400);
        ed = fmax(ed, fabs(m1 - 1));
        for (int k = 0; k < 32; k++) { ed = fmax(ed, fabs(freq[k] / plain[k] - 1)); }
        double m2 = rope_frequencies(freq, hs, &d, 2048), m3 = rope_frequencies(g, hs, &st, 2048);
        ed = fmax(ed, fabs(m2 - m3));
        for (int k = 0; k < 32; k++) { ed = fmax(ed, fabs(freq[k] / g[k] - 1)); }
    }
    check(ed < 1e-12, "dynamic: plain at T <= L, the static variant of s = T/L beyond", ed, 1e-12);
}

// every scaling variant at scale 1 (static factor 1; dynamic at T <= the training length)

static void test_rope_scaling_at_scale_one(void) {
    printf("RoPE scaling: every variant at scale 1 is plain rope\n");
    int B = 2, T = 24;
    GPT2 model;
    int x[48], y[48];
    float plain[48], scaled[48];
    tiny_model_batch(&model, T, 3, 6, x, y, B, T);
    gpt2_forward(&model, x, y, B, T, 0);
    gpt2_token_losses(&model, plain);
    for (int v = PE_EVAL_PI; v <= PE_EVAL_DYN_YARN; v++) {
        PEEval e = {v, 1.0, T};
        model.pe_eval = e;
        gpt2_forward(&model, x, y, B, T, 0);
        gpt2_token_losses(&model, scaled);
        double d = 0;
        for (int i = 0; i < B * T; i++) { d = fmax(d, fabs(scaled[i] - plain[i])); }
        char what[96];
        snprintf(what, sizeof(what), "%s: token losses equal plain rope's", PE_EVAL_NAMES[v]);
        check(d < 1e-6, what, d, 1e-6);
    }
    PEEval e = {PE_EVAL_YARN, 4.0, T}; // and a real scaling changes them
    model.pe_eval = e;
    gpt2_forward(&model, x, y, B, T, 0);
    gpt2_token_losses(&model, scaled);
    double d = 0;
    for (int i = 0; i < B * T; i++) { d = fmax(d, fabs(scaled[i] - plain[i])); }
    check(d > 1e-4, "yarn at s = 4 changes them", d, 1e-4);
    PEEval dyn = {PE_EVAL_DYN_YARN, 1.0, T / 2}; // T = 2 L: s = 2
    model.pe_eval = dyn;
    gpt2_forward(&model, x, y, B, T, 1); // a training forward keeps every layer's q, k
    for (int l = 0; l < model.config.num_layers; l++) {
        double dq = qkv_vs_reference(&model, l, B, T);
        check(dq < 1e-4, "dynamic-yarn at T = 2L: q, k rotated by the scaled table, x mscale", dq, 1e-4);
    }
    gpt2_free(&model);
}

#define PE_TESTS
static void pe_tests(void) {
    test_rope_scaling_tables();
    test_rope_scaling_at_scale_one();
}
#endif

#endif
