/*
rope (Su et al. 2021) and xpos (Sun et al. 2022, torchscale's code), one family: q and k
are rotated by their position in every layer.

rope: each pair (2k, 2k+1) of q and of k at position n is rotated by the angle n theta_k,
theta_k = 10000^(-2k/hs), so that q_i . k_j depends on i - j only; the backward rotates the
gradients back (the transpose of a rotation). At evaluation a RoPE scaling variant (-rs:
PI, NTK-aware, YaRN, static or dynamic; llmc/pe.h's PEEval) changes theta_k and multiplies
q and k by YaRN's mscale (rope_frequencies below, jquesnelle/yarn's scaled_rope code).
The model's frequency table (llmc/pe.h's RopeTable, checkpoint words 15-17; rope only)
changes theta_k in training and at evaluation, in this order: the base (ABF: base^(-2k/hs),
codellama's rope_theta), the scaling variant, Giraffe's truncation at length L (theta_k
kept from 2 pi / L up, 2 pi / (16 L) from 2 pi / (8 L) up, 0 below: abacusai/Long-Context
interpolate.py), Resonance RoPE's rounding (wavelength lambda_k = round(2 pi / theta_k),
theta_k = 2 pi / lambda_k; sheryc/resonance_rope), whose angle is (n mod lambda_k) theta_k
with an exact integer modulus, so that positions n and n + lambda_k rotate alike, bit for bit.

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
static int pe_has_eval_variant(int v) { return v == PE_EVAL_PLAIN || (PE_IS(ROPE) && v <= PE_EVAL_DYN_YARN) || (PE_IS(XPOS) && v == PE_EVAL_BCA); }

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
// find_correction_dim): hs ln(L / (2 pi r)) / (2 ln base), the model's base
static inline double yarn_correction_dim(double r, int hs, int L, double base) {
    return hs * log(L / (r * 2.0 * M_PI)) / (2.0 * log(base));
}

// the ramp's ends lo = max(floor(I(32)), 0), hi = min(ceil(I(1)), hs - 1) (find_correction_range)
static inline void yarn_correction_range(int hs, int L, double base, int* lo, int* hi) {
    int a = (int)floor(yarn_correction_dim(YARN_BETA_FAST, hs, L, base));
    int b = (int)ceil(yarn_correction_dim(YARN_BETA_SLOW, hs, L, base));
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

// Giraffe's truncated basis at length L (truncate_frequency of abacusai/Long-Context,
// interpolate.py:8-11, 35-37): with b = 2 pi / L, theta kept where theta >= b, 2 pi / (16 L)
// where b / 8 <= theta < b, 0 below: every kept wavelength fits in L, the lowest frequencies
// carry no position at all
static inline double rope_truncate(double theta, int L) {
    double b = 2.0 * M_PI / L;
    return theta >= b ? theta : (theta >= b / 8 ? 2.0 * M_PI / (16.0 * L) : 0.0);
}

// The angle of position pos at frequency theta: pos theta, or with Resonance RoPE's integer
// wavelength `period` (0: none) (pos mod period) theta, an exact integer modulus, so that
// pos and pos + period get the same angle bit for bit on both paths (the official code
// repeats its table every period, rotary_resonance.py:30-44); positions are >= 0
PE_FN double rope_angle(int pos, double theta, int period) { return period > 0 ? (pos % period) * theta : pos * theta; }

// RoPE's angular frequencies inv_freq[k], k in [0, hs/2) (radians per position), and their
// integer wavelengths period[k] under resonance (0: none), for the model's table t and the
// variant e in effect in a forward pass over T tokens, in the order base, scaling
// (jquesnelle/yarn's scaled_rope code), truncation, rounding; returns the factor that q and
// k are multiplied by (YaRN's mscale(s), 1 otherwise)
static double rope_frequencies(double* inv_freq, int* period, int hs, const RopeTable* t, const PEEval* e, int T) {
    double s = rope_scale(e, T), base = rope_base(t->base);
    int v = e->variant;
    int lo = 0, hi = 0;
    if (v == PE_EVAL_YARN || v == PE_EVAL_DYN_YARN) { yarn_correction_range(hs, e->train_len, base, &lo, &hi); }
    if (v == PE_EVAL_NTK || v == PE_EVAL_DYN_NTK) { base *= pow(s, hs / (hs - 2.0)); }
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
        if (t->truncate > 0) { theta = rope_truncate(theta, t->truncate); }
        period[k] = 0;
        if (t->resonance && theta > 0) {
            // torch.round's half to even (rint); a wavelength beyond int's positions never repeats
            double lambda = rint(2.0 * M_PI / theta);
            theta = 2.0 * M_PI / lambda;
            period[k] = lambda <= INT32_MAX ? (int)lambda : 0;
        }
        inv_freq[k] = theta;
    }
    return v == PE_EVAL_YARN || v == PE_EVAL_DYN_YARN ? yarn_mscale(s) : 1.0;
}

#elif PE_PART == PE_PART_CPU

// rotates (direction 1) or rotates back (-1) q and k of every token, token t of row b at
// position pos[b T + t] (of a range of `span` positions: xpos's centre), with the frequencies
// of the model's table `table` under the evaluation variant e and xPos's decay of scale base gamma
static void rope_rotate(real* qkv, const RopeTable* table, const PEEval* e, double gamma, const int* pos, int span, int B, int T,
                        int C, int NH, int direction) {
    int hs = C / NH;
    double inv_freq[hs / 2];
    int period[hs / 2];
    double mscale = rope_frequencies(inv_freq, period, hs, table, e, T);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            real* row = qkv + ((size_t)b * T + t) * 3 * C;
            int pt = pos[(size_t)b * T + t];
            for (int k = 0; 2 * k < hs; k++) {
                double angle = rope_angle(pt, inv_freq[k], period[k]);
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
    rope_rotate(model->acts.t.qkv + layer_slot(model, l) * model->acts_N * 3 * c->channels, &c->rope, &model->pe_eval, XPOS_GAMMA,
                pe_positions(model, l), model->pos_span, B, T, c->channels, c->num_heads, 1);
}
static void pe_layer_backward(GPT2* model, int l, int B, int T) {
    GPT2Config* c = &model->config;
    rope_rotate(model->grads_acts.t.qkv + (size_t)l * model->acts_N * 3 * c->channels, &c->rope, &model->pe_eval, XPOS_GAMMA,
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
// double, as the CPU path, for the frequencies that the host computes as the CPU path does
// (rope_frequencies: the model's table under the evaluation variant in effect, YaRN's mscale in
// the factors) and the same angle (rope_angle), and again whenever the positions' range, the
// length, the variant or the model's table changes; a token reads the row of its position
// (given, drawn or its index).
#define PE_LAYER
// theta_k of hs/2 <= 64 pairs and their resonance wavelengths (0: none), by value to the kernel
struct RopeFreq { double f[64]; int period[64]; };
// rope_table_kernel: one thread per (position, pair) computes cos, sin and the q and k
// factors, in double as the CPU path (positions 0..span-1: xpos's centre is the range's)
__global__ void rope_table_kernel(float4* table, RopeFreq freq, double mscale, double gamma, int span, int hs) {
    int half = hs / 2;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= span * half) { return; }
    int pt = idx / half, k = idx % half;
    double angle = rope_angle(pt, freq.f[k], freq.period[k]);
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
    const RopeTable* t = &model->config.rope;
    const RopeTable* had_t = &model->rope_table_options;
    int span = model->pos_span;
    if (model->rope_table_T == T && model->rope_table_span == span && had->variant == e->variant && had->rope_factor == e->rope_factor
        && had->train_len == e->train_len && had_t->base == t->base && had_t->truncate == t->truncate
        && had_t->resonance == t->resonance) { return; }
    int hs = model->config.channels / model->config.num_heads;
    if (model->rope_len < span) {
        cudaCheck(cudaStreamSynchronize(ctx.stream)); // no kernel reads the old table any more
        cuda_free((void**)&model->rope_table);
        model->rope_table = (float4*)cuda_malloc((size_t)span * (hs / 2) * sizeof(float4), "the rope table");
        model->rope_len = span;
    }
    RopeFreq freq;
    double mscale = rope_frequencies(freq.f, freq.period, hs, t, e, T);
    rope_table_kernel<<<CEIL_DIV(span * hs / 2, 256), 256, 0, ctx.stream>>>(model->rope_table, freq, mscale, XPOS_GAMMA, span, hs);
    cudaCheckLaunch("rope_table_kernel");
    model->rope_table_T = T;
    model->rope_table_span = span;
    model->rope_table_eval = *e;
    model->rope_table_options = *t;
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
// in double): rope with the frequencies of the model's table and a scaling variant and
// YaRN's factor (rope_frequencies, whose tables are checked against hand-computed values
// below), the angle of a resonance wavelength by fmod, xpos's decay from torchscale
#define PE_REF_ROTATE
static void pe_ref_rotate(GPT2* model, int l, double* qkv, int pos, int T) {
    int C = model->config.channels, NH = model->config.num_heads, hs = C / NH;
    double freq[2048];
    int period[2048];
    const RopeTable* table = &model->config.rope;
    double mscale = rope_frequencies(freq, period, hs, table, &model->pe_eval, T);
    int plain = (model->pe_eval.variant == PE_EVAL_PLAIN || model->pe_eval.variant == PE_EVAL_BCA)
                && rope_base(table->base) == 10000 && table->truncate == 0 && table->resonance == 0;
    for (int part = 0; part < 2; part++) {
        for (int h = 0; h < NH; h++) {
            for (int k = 0; k < hs / 2; k++) {
                double theta = (period[k] > 0 ? fmod(pos, period[k]) : pos) * (plain ? pow(10000.0, -2.0 * k / hs) : freq[k]);
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

// checks a configuration of this encoding with the frequency table *arg (a bad one exits)
static void fail_rope_table(const void* arg) {
    GPT2Config c = tiny_config(8);
    c.rope = *(const RopeTable*)arg;
    gpt2_config_check(&c, "test");
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
    RopeTable table = {0, 0, 0};
    int pos[80]; // (B, T)
    for (int bt = 0; bt < B * T; bt++) { pos[bt] = bt % T; }
    rope_rotate(a, &table, &plain, INFINITY, pos, T, B, T, C, NH, 1);
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
    rope_rotate(a, &table, &plain, XPOS_SCALE_BASE, pos, T, B, T, C, NH, 1);
    rope_rotate(a, &table, &plain, XPOS_SCALE_BASE, pos, T, B, T, C, NH, -1); // the transpose of the same map
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
    const RopeTable abf = {500000, 0, 0};
    expect_failure("rope's frequency table refused (rope's alone)", fail_rope_table, &abf, "on PE 'xpos' (they exist for rope)");
}

#define PE_TESTS
static void pe_tests(void) { test_xpos(); }

#elif PE_IS(ROPE) // (bipe_rope, which includes this file, has tests of its own: pe/bipe.h)
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
        yarn_correction_range(hs, lens[k], ROPE_BASE, &lo, &hi);
        bad += lo != los[k] || hi != his[k];
        e = fmax(e, fmax(fabs(yarn_correction_dim(32, hs, lens[k], ROPE_BASE) - raw_lo[k]),
                         fabs(yarn_correction_dim(1, hs, lens[k], ROPE_BASE) - raw_hi[k])));
    }
    check(bad == 0, "YaRN ramp ends (lo, hi): L=128 (0, 11), 512 (3, 16), 1024 (5, 18)", bad, 0);
    check(e < 5e-3, "YaRN raw dims: -1.57 10.47, 3.248 15.289, 5.656 17.697", e, 5e-3);
    const double s4[4] = {2, 4, 8, 16};
    const double msc[4] = {1.06931, 1.13863, 1.20794, 1.27726}, logit[4] = {1.14343, 1.29648, 1.45913, 1.63139};
    const double ntk_base[4] = {20452.2, 41829.4, 85550.4, 174969.6};
    double em = 0, el = 0, eb = 0, ep = 0;
    double freq[32], plain[32];
    int period[32];
    const RopeTable table = {0, 0, 0};
    for (int k = 0; k < 32; k++) { plain[k] = pow(10000.0, -2.0 * k / hs); }
    for (int n = 0; n < 4; n++) {
        PEEval yarn = {PE_EVAL_YARN, s4[n], 512}, ntk = {PE_EVAL_NTK, s4[n], 512}, pi = {PE_EVAL_PI, s4[n], 512};
        double m = rope_frequencies(freq, period, hs, &table, &yarn, 512);
        em = fmax(em, fabs(m - msc[n]));
        el = fmax(el, fabs(m * m - logit[n]));
        double mn = rope_frequencies(freq, period, hs, &table, &ntk, 512);
        eb = fmax(eb, fabs(pow(freq[1], -hs / 2.0) - ntk_base[n])); // theta_1 = base^(-2/64)
        eb = fmax(eb, fabs(mn - 1));
        rope_frequencies(freq, period, hs, &table, &pi, 512);
        for (int k = 0; k < 32; k++) { ep = fmax(ep, fabs(freq[k] * s4[n] / plain[k] - 1)); }
    }
    check(em < 1e-5, "YaRN mscale at s = 2, 4, 8, 16: 1.06931 ... 1.27726", em, 1e-5);
    check(el < 1e-5, "YaRN logit factor mscale^2: 1.14343 ... 1.63139", el, 1e-5);
    check(eb < 0.05, "NTK base 10000 s^(64/62): 20452.2 ... 174969.6", eb, 0.05);
    check(ep < 1e-12, "PI: theta_k / s", ep, 1e-12);
    // YaRN at L = 512, s = 4: pairs up to lo = 3 keep theta, from hi = 16 on theta / 4, a
    // linear blend in between (pair 8: ramp 5/13)
    PEEval y4 = {PE_EVAL_YARN, 4, 512};
    rope_frequencies(freq, period, hs, &table, &y4, 512);
    double ey = 0;
    for (int k = 0; k < 32; k++) {
        double want = k <= 3 ? plain[k] : (k >= 16 ? plain[k] / 4 : plain[k] * ((k - 3) / 13.0 / 4 + 1 - (k - 3) / 13.0));
        ey = fmax(ey, fabs(freq[k] / want - 1));
    }
    check(ey < 1e-12, "YaRN L=512 s=4: keep theta to pair 3, theta/4 from 16, ramp between", ey, 1e-12);
    // YaRN whose ramp starts beyond the last pair (lo >= hs/2: L >= 2 pi 32 10000^(32/32)...)
    // is RoPE with q and k times mscale
    PEEval far = {PE_EVAL_YARN, 8, 4000000};
    yarn_correction_range(hs, far.train_len, ROPE_BASE, &lo, &hi);
    double mf = rope_frequencies(freq, period, hs, &table, &far, 512), ef = fabs(mf - yarn_mscale(8));
    for (int k = 0; k < 32; k++) { ef = fmax(ef, fabs(freq[k] / plain[k] - 1)); }
    check(lo >= hs / 2 && ef < 1e-12, "YaRN with lo >= hs/2 is RoPE times mscale (L = 4e6)", ef, 1e-12);
    // dynamic variants: plain up to the training length, the static variant of s = T / L beyond
    const int dyn[3] = {PE_EVAL_DYN_PI, PE_EVAL_DYN_NTK, PE_EVAL_DYN_YARN}, stat[3] = {PE_EVAL_PI, PE_EVAL_NTK, PE_EVAL_YARN};
    double ed = 0;
    for (int v = 0; v < 3; v++) {
        PEEval d = {dyn[v], 99, 512}, st = {stat[v], 4, 512};
        double g[32];
        double m1 = rope_frequencies(freq, period, hs, &table, &d, 400);
        ed = fmax(ed, fabs(m1 - 1));
        for (int k = 0; k < 32; k++) { ed = fmax(ed, fabs(freq[k] / plain[k] - 1)); }
        double m2 = rope_frequencies(freq, period, hs, &table, &d, 2048), m3 = rope_frequencies(g, period, hs, &table, &st, 2048);
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

// RoPE's frequency table for hs = 64, base 10000, against the spec's and the official codes'
// numbers: truncation at L = 1024 keeps pairs 0..17, sets 18..24 to 2 pi / (16 L) = 3.835e-4
// and 25..31 to 0 (the spec's worked example, interpolate.py:35-37); resonance's
// wavelengths are those of the official code in float32 (round(2 pi / inv_freq),
// rotary_resonance.py:24-26), theta_0 = 2 pi / 6; truncation beyond every wavelength and the
// base 10000 given are the plain table bit for bit; YaRN's ramp follows the model's base; the
// steps come in the order base, scaling, truncation, rounding
static void test_rope_table_values(void) {
    printf("RoPE's frequency table: truncation, resonance and base for hs = 64 against the spec's numbers\n");
    const int hs = 64;
    static const int lambda[32] = {6, 8, 11, 15, 20, 26, 35, 47, 63, 84, 112, 149, 199, 265, 353, 471, 628, 838, 1117,
                                   1490, 1987, 2650, 3533, 4712, 6283, 8379, 11173, 14900, 19869, 26496, 35333, 47117};
    double plain[32], freq[32];
    int period[32], none_period[32];
    PEEval e = {PE_EVAL_PLAIN, 1, 512};
    const RopeTable none = {0, 0, 0}, trunc = {0, 1024, 0}, reso = {0, 0, 1};
    const RopeTable same[2] = {{10000, 0, 0}, {0, 1 << 20, 0}}; // the base given, truncation beyond every wavelength
    rope_frequencies(plain, none_period, hs, &none, &e, 512);
    rope_frequencies(freq, period, hs, &trunc, &e, 512);
    int bad = 0;
    for (int k = 0; k < 32; k++) {
        if (k <= 17) { bad += memcmp(&freq[k], &plain[k], sizeof(double)) != 0; }
        else if (k <= 24) { bad += fabs(freq[k] - 3.835e-4) > 5e-8; }
        else { bad += freq[k] != 0; }
        bad += period[k] != 0 || none_period[k] != 0;
    }
    check(bad == 0, "truncation L = 1024: 0..17 kept, 18..24 = 3.835e-4, 25..31 = 0", bad, 0);
    rope_frequencies(freq, period, hs, &reso, &e, 512);
    bad = 0;
    for (int k = 0; k < 32; k++) { bad += period[k] != lambda[k] || freq[k] != 2 * M_PI / lambda[k]; }
    check(bad == 0, "resonance: wavelengths 6, 8, 11, 15, ... 47117, theta_k = 2 pi / them", bad, 0);
    check(fabs(freq[0] - 1.0472) < 5e-5, "resonance: theta_0 = 2 pi / 6 = 1.0472 (plain 1.0)", fabs(freq[0] - 1.0472), 5e-5);
    bad = 0;
    for (int v = 0; v < 2; v++) {
        rope_frequencies(freq, period, hs, &same[v], &e, 512);
        bad += memcmp(freq, plain, sizeof(plain)) != 0 || memcmp(period, none_period, sizeof(period)) != 0;
    }
    check(bad == 0, "base 10000 given, truncation at 2^20: the plain table bit for bit", bad, 0);
    // YaRN at base 500000, L = 512: I(r) = 64 ln(512 / (2 pi r)) / (2 ln 500000), lo =
    // floor(I(32)) = floor(2.279) = 2, hi = ceil(I(1)) = ceil(10.731) = 11
    const RopeTable abf = {500000, 0, 0};
    PEEval y4 = {PE_EVAL_YARN, 4, 512};
    rope_frequencies(freq, period, hs, &abf, &y4, 512);
    double ey = 0;
    for (int k = 0; k < 32; k++) {
        double th = pow(500000.0, -2.0 * k / hs), r = (k - 2) / 9.0;
        double want = k <= 2 ? th : (k >= 11 ? th / 4 : th * (r / 4 + 1 - r));
        ey = fmax(ey, fabs(freq[k] / want - 1));
    }
    check(ey < 1e-12, "YaRN at base 500000, L=512, s=4: ramp from pair 2 to 11", ey, 1e-12);
    // base 500000, PI at s = 4, truncation at 1024, rounding: each step by hand, in that order
    const RopeTable all = {500000, 1024, 1};
    PEEval pi = {PE_EVAL_PI, 4, 512};
    rope_frequencies(freq, period, hs, &all, &pi, 512);
    double b = 2 * M_PI / 1024;
    int other = 0;
    bad = 0;
    for (int k = 0; k < 32; k++) {
        double th = pow(500000.0, -2.0 * k / hs) / 4, raw = th;
        th = th >= b ? th : (th >= b / 8 ? b / 16 : 0);
        double lam = th > 0 ? rint(2 * M_PI / th) : 0;
        bad += period[k] != (int)lam || fabs(freq[k] - (th > 0 ? 2 * M_PI / lam : 0)) > 1e-15;
        double before = raw * 4 >= b ? raw * 4 : (raw * 4 >= b / 8 ? b / 16 : 0); // truncated before the scaling
        other += th != before / 4;
    }
    check(bad == 0, "base 500000, PI s = 4, truncation 1024, rounding, in that order", bad, 0);
    check(other > 0, "(truncation before the scaling would give another table)", other, 1);
}

// a model of head size 16 (the table's three kinds of pairs at T = 40) and a batch
static void rope_table_model(GPT2* model, int* x, int* y, int B, int T) {
    GPT2Config cfg = tiny_config(T);
    cfg.num_heads = 2; cfg.channels = 32;
    gpt2_build_from_config(model, &cfg, 9);
    uint64_t rng = random_seed(12);
    perturb_parameters(model, 0.1f, &rng);
    random_tokens(x, B * T, cfg.vocab_size, &rng);
    random_tokens(y, B * T, cfg.vocab_size, &rng);
}

// the logits of every position of a forward pass over x into out (B T Vp), under table t
static void rope_table_logits(GPT2* model, const RopeTable* t, const int* x, int B, int T, float* out) {
    model->config.rope = *t;
    gpt2_forward(model, x, NULL, B, T, 0);
    for (int bt = 0; bt < B * T; bt++) { gpt2_logits_row(model, bt / T, bt % T, out + (size_t)bt * model->config.padded_vocab_size); }
}

// The table in a model: the base 10000 given, truncation beyond every wavelength and
// resonance off give the plain model's logits bit for bit, each option changes them; q and k
// against the reference rotation under each option and all three with YaRN; under resonance
// positions n and n + lambda_k rotate pair k bit for bit alike (and without it, not); the
// table through a checkpoint (an old file's words 0: the plain table); bad tables refused
static void test_rope_table_model(void) {
    printf("RoPE's frequency table in a model: identities, the reference rotation, resonance's period, checkpoint\n");
    int B = 2, T = 40, x[80], y[80];
    GPT2 model;
    rope_table_model(&model, x, y, B, T);
    size_t n = (size_t)B * T * model.config.padded_vocab_size;
    float* plain = (float*)malloc_check(n * sizeof(float));
    float* got = (float*)malloc_check(n * sizeof(float));
    const RopeTable none = {0, 0, 0};
    rope_table_logits(&model, &none, x, B, T, plain);
    // hs = 16: theta_k = 10000^(-k/8); at L = 100 pairs 0..2 are kept, 3..4 take 2 pi / 1600, 5..7 are 0
    const RopeTable same[2] = {{10000, 0, 0}, {0, 1 << 20, 0}};
    const RopeTable each[4] = {{500000, 0, 0}, {0, 100, 0}, {0, 0, 1}, {500000, 100, 1}};
    const char* same_names[2] = {"base 10000 given", "truncation at 2^20, beyond every wavelength"};
    const char* names[4] = {"base 500000", "truncation at 100", "resonance", "all three"};
    char what[128];
    for (int v = 0; v < 2; v++) {
        rope_table_logits(&model, &same[v], x, B, T, got);
        snprintf(what, sizeof(what), "%s: the plain logits bit for bit", same_names[v]);
        check(memcmp(got, plain, n * sizeof(float)) == 0, what, 0, 0);
    }
    for (int v = 0; v < 4; v++) {
        rope_table_logits(&model, &each[v], x, B, T, got);
        double d = 0;
        for (size_t i = 0; i < n; i++) { d = fmax(d, fabs(got[i] - plain[i])); }
        snprintf(what, sizeof(what), "%s: changes the logits", names[v]);
        check(d > 1e-4, what, d, 1e-4);
        for (int yarn = 0; yarn <= (v == 3); yarn++) {
            PEEval e = {yarn ? PE_EVAL_YARN : PE_EVAL_PLAIN, 2.0, T / 2};
            model.pe_eval = e;
            gpt2_forward(&model, x, y, B, T, 1); // a training forward keeps every layer's q, k
            double dq = 0;
            for (int l = 0; l < model.config.num_layers; l++) { dq = fmax(dq, qkv_vs_reference(&model, l, B, T)); }
            snprintf(what, sizeof(what), "%s%s: q, k against the reference rotation", names[v], yarn ? " with yarn s = 2" : "");
            check(dq < 1e-4, what, dq, 1e-4);
            model.pe_eval.variant = PE_EVAL_PLAIN;
        }
    }
    // resonance's period at head size 64: the angles of positions n and n + lambda_k, and one
    // token rotated at them (rope_rotate, whose table the CUDA path shares), at n = 1000 and at
    // n = 2^30, where n theta_k in double is off by more than float's rounding of cos and sin
    const int hs = 64, starts[2] = {1000, 1 << 30};
    double freq[32];
    int period[32], angles[2] = {0, 0}, bits[2][2] = {{0, 0}, {0, 0}};
    PEEval e = {PE_EVAL_PLAIN, 1, 1};
    for (int r = 0; r <= 1; r++) {
        RopeTable t = {0, 0, r};
        rope_frequencies(freq, period, hs, &t, &e, 1);
        for (int s = 0; s < 2; s++) {
            for (int k = 0; k < hs / 2; k++) {
                int lam = (int)rint(2 * M_PI / freq[k]); // resonance: period[k] itself
                double xa = rope_angle(starts[s], freq[k], period[k]), xb = rope_angle(starts[s] + lam, freq[k], period[k]);
                angles[r] += memcmp(&xa, &xb, sizeof(double)) != 0;
                real a[3 * 64], b[3 * 64];
                for (int c = 0; c < 3 * hs; c++) { a[c] = b[c] = (real)(1 + c % 7) / 7; }
                int pa = starts[s], pb = starts[s] + lam;
                rope_rotate(a, &t, &e, INFINITY, &pa, 1, 1, 1, hs, 1, 1);
                rope_rotate(b, &t, &e, INFINITY, &pb, 1, 1, 1, hs, 1, 1);
                for (int part = 0; part < 2; part++) { bits[r][s] += memcmp(a + part * hs + 2 * k, b + part * hs + 2 * k, 2 * sizeof(real)) != 0; }
            }
        }
    }
    check(angles[1] == 0, "resonance: angles of n and n + lambda_k bit for bit (n = 1000, 2^30)", angles[1], 0);
    check(bits[1][0] + bits[1][1] == 0, "resonance: pair k of q, k rotated alike at n, n + lambda_k (1000, 2^30)", bits[1][0] + bits[1][1], 0);
    check(angles[0] > 0 && bits[0][1] > 0, "(without it, n + round(2 pi / theta_k) rotates otherwise at 2^30)", bits[0][1], 1);
    // through a checkpoint: the three words, and the default base written as 0
    char path[300];
    snprintf(path, sizeof(path), "%s/rope_table.bin", tmpdir);
    int words[2][3], want[2][3] = {{500000, 100, 1}, {0, 0, 0}};
    const RopeTable saved[2] = {{500000, 100, 1}, {10000, 0, 0}};
    int bad = 0;
    for (int v = 0; v < 2; v++) {
        model.config.rope = saved[v];
        gpt2_save_checkpoint(&model, path);
        FILE* f = fopen_check(path, "rb");
        int header[256];
        fread_check(header, sizeof(int), 256, f, path);
        fclose(f);
        memcpy(words[v], &header[15], sizeof(words[v]));
        GPT2 back;
        gpt2_build_from_checkpoint(&back, path);
        bad += memcmp(words[v], want[v], sizeof(words[v])) != 0 || rope_base(back.config.rope.base) != rope_base(saved[v].base)
               || back.config.rope.truncate != saved[v].truncate || back.config.rope.resonance != saved[v].resonance;
        gpt2_free(&back);
    }
    check(bad == 0, "checkpoint words 15-17: 500000 100 1; base 10000 written as 0", bad, 0);
    const RopeTable bad_tables[3] = {{1, 0, 0}, {0, -3, 0}, {0, 0, 2}};
    const char* expect[3] = {"base 1 (0 for 10000, or >= 2)", "truncation length -3", "resonance 2 (0 or 1)"};
    for (int v = 0; v < 3; v++) {
        snprintf(what, sizeof(what), "a bad table refused: %s", expect[v]);
        expect_failure(what, fail_rope_table, &bad_tables[v], expect[v]);
    }
    free(plain); free(got);
    gpt2_free(&model);
}

// rope's frequency table as test variants (test_gpt2.c's parse_test_variant; the gradient
// checks run under each of PE_TEST_VARIANTS, the CUDA path in the emulation too, for rope
// without DAPE: DAPE's builds rotate by the same code): rb ABF's base 500000, rt the
// truncated basis at 4 maxT (at the tests' head sizes 4, 32 and 64 some pairs kept, some at
// 2 pi / (16 L), some 0), rr resonance; returns 0 for another word
#define PE_TEST_VARIANTS (DAPE_ID == 0 ? "rb rt rr rb+rt+rr+yarn" : "")
static int pe_test_option(GPT2Config* cfg, const char* word) {
    if (strcmp(word, "rb") == 0) { cfg->rope.base = 500000; }
    else if (strcmp(word, "rt") == 0) { cfg->rope.truncate = 4 * cfg->max_seq_len; }
    else if (strcmp(word, "rr") == 0) { cfg->rope.resonance = 1; }
    else { return 0; }
    return 1;
}

#define PE_TESTS
static void pe_tests(void) {
    test_rope_scaling_tables();
    test_rope_scaling_at_scale_one();
    test_rope_table_values();
    test_rope_table_model();
}
#endif

#endif
