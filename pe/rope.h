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

// rotates (direction 1) or rotates back (-1) q and k of every token, token t at position
// pos[t] (of a range of `span` positions: xpos's centre), with the frequencies of the
// evaluation variant e and xPos's decay of scale base gamma
static void rope_rotate(real* qkv, const PEEval* e, double gamma, const int* pos, int span, int B, int T, int C, int NH,
                        int direction) {
    int hs = C / NH;
    double inv_freq[hs / 2];
    double mscale = rope_frequencies(inv_freq, hs, e, T);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            real* row = qkv + ((size_t)b * T + t) * 3 * C;
            for (int k = 0; 2 * k < hs; k++) {
                double angle = pos[t] * inv_freq[k];
                real cs = (real)cos(angle), sn = (real)(direction * sin(angle));
                double z = pow(xpos_zeta(k, hs), (pos[t] - (span + 1) / 2) / gamma);
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
                pe_positions(model, l), model->rp_span, B, T, c->channels, c->num_heads, 1);
}
static void pe_layer_backward(GPT2* model, int l, int B, int T) {
    GPT2Config* c = &model->config;
    rope_rotate(model->grads_acts.t.qkv + (size_t)l * model->acts_N * 3 * c->channels, &model->pe_eval, XPOS_GAMMA,
                pe_positions(model, l), model->rp_span, B, T, c->channels, c->num_heads, -1);
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
static inline real pe_bias(const PEBias* pb, const PERow* r, int j) {
    return pb->half > 0 && j < (r->i / pb->half - 1) * pb->half ? PE_MASKED_BIAS : 0;
}
#endif

#endif
