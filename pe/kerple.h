/*
kerple (Chi et al. 2022), its two kernels, with learned parameters per layer and head:

    kerple        (logarithmic)  b(i, j) = -r1_h log(1 + r2_h (i - j))
    kerple_power  (power)        b(i, j) = -a_h (i - j)^p_h

kept at r1, r2 >= 0.01 and at a >= 0.01, 0.01 <= p <= 2 after every update (the Kerple
code's clamps: pe_project). Initialized as the Kerple code: r1 ~ U(0, 2), r2 ~ U(0, 1),
a ~ U(0, 1), p ~ U(0, 2), then clamped. The power kernel's gradients d/da = -n^p and
d/dp = -a n^p log n are 0 at n = 0 (as PyTorch's pow).
*/
#if PE_PART == PE_PART_DEFINITION

#define KERPLE_MIN 0.01f        // r1, r2 >= this
#define KERPLE_POWER_MIN 0.01f  // a, p >= this
#define KERPLE_POWER_P_MAX 2.0f // p <= this

// the two tensors: (r1, r2) or (a, p), each (L, NH)
#if PE_IS(KERPLE)
#define PE_TENSORS(X) \
    X(KERPLE_R1, kerple_r1, 0, L * NH, fill_uniform_clamped(p, n, 0.0f, 2.0f, KERPLE_MIN, INFINITY, rng)) \
    X(KERPLE_R2, kerple_r2, 0, L * NH, fill_uniform_clamped(p, n, 0.0f, 1.0f, KERPLE_MIN, INFINITY, rng))
#define KERPLE_P0 kerple_r1
#define KERPLE_P1 kerple_r2
#else
#define PE_TENSORS(X) \
    X(KPOWER_A, kpower_a, 0, L * NH, fill_uniform_clamped(p, n, 0.0f, 1.0f, KERPLE_POWER_MIN, INFINITY, rng)) \
    X(KPOWER_P, kpower_p, 0, L * NH, fill_uniform_clamped(p, n, 0.0f, 2.0f, KERPLE_POWER_MIN, KERPLE_POWER_P_MAX, rng))
#define KERPLE_P0 kpower_a
#define KERPLE_P1 kpower_p
#endif

// the bias of distance n = i - j, and its gradient ds db/d(parameter) subtracted from the
// two accumulators (the same expressions in both paths)
PE_FN real kerple_bias(real r1, real r2, int n) { return -r1 * log(1 + r2 * n); }
PE_FN void kerple_bias_grad(real r1, real r2, int n, real ds, real* d_r1, real* d_r2) {
    real x = (real)n;
    *d_r1 -= ds * log(1 + r2 * x);
    *d_r2 -= ds * r1 * x / (1 + r2 * x);
}
PE_FN real kerple_power_bias(real a, real p, int n) { return n == 0 ? 0 : -a * pow((real)n, p); }
PE_FN void kerple_power_bias_grad(real a, real p, int n, real ds, real* d_a, real* d_p) {
    if (n == 0) { return; }
    real x = (real)n, xp = pow(x, p);
    *d_a -= ds * xp;
    *d_p -= ds * a * xp * log(x);
}

#elif PE_PART == PE_PART_CPU

#define PE_BIAS
#define PE_BIAS_GRAD
#define PE_BH_GRADS 2 // the two parameters' gradients per (slot, head)
typedef struct { const real* p0; const real* p1; real* dbh; int NH; } PEBias; // r1, r2 or a, p of the layer
typedef struct { int h, i; } PERow;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    pb->NH = NH;
    pb->p0 = model->params.KERPLE_P0 + (size_t)l * NH;
    pb->p1 = model->params.KERPLE_P1 + (size_t)l * NH;
    pb->dbh = model->pe_dbh;
    if (backward) { memset(pb->dbh, 0, (size_t)B * NH * PE_BH_GRADS * sizeof(real)); }
}
static inline PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { PERow r = {h, i}; return r; }
static inline real pe_bias(const PEBias* pb, const PERow* r, int j) {
#if PE_IS(KERPLE)
    return kerple_bias(pb->p0[r->h], pb->p1[r->h], r->i - j);
#else
    return kerple_power_bias(pb->p0[r->h], pb->p1[r->h], r->i - j);
#endif
}
static inline void pe_bias_backward(PEBias* pb, int slot, const PERow* r, int j, real ds) {
    real* d = pb->dbh + ((size_t)slot * pb->NH + r->h) * PE_BH_GRADS;
#if PE_IS(KERPLE)
    kerple_bias_grad(pb->p0[r->h], pb->p1[r->h], r->i - j, ds, &d[0], &d[1]);
#else
    kerple_power_bias_grad(pb->p0[r->h], pb->p1[r->h], r->i - j, ds, &d[0], &d[1]);
#endif
}
#define PE_BIAS_REDUCE
// the per-(slot, head) pairs summed into the layer's two per-head gradient tensors
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int slots) {
    int NH = pb->NH;
    real* d0 = model->grads.KERPLE_P0 + (size_t)l * NH;
    real* d1 = model->grads.KERPLE_P1 + (size_t)l * NH;
    for (int b = 0; b < slots; b++) {
        for (int h = 0; h < NH; h++) {
            d0[h] += pb->dbh[((size_t)b * NH + h) * 2 + 0];
            d1[h] += pb->dbh[((size_t)b * NH + h) * 2 + 1];
        }
    }
}

// the parameters back into their ranges after every update
static void kerple_clamp(real* x, size_t n, real lo, real hi) {
    for (size_t i = 0; i < n; i++) { x[i] = x[i] < lo ? lo : (x[i] > hi ? hi : x[i]); }
}
#define PE_PROJECT
static void pe_project(GPT2* model) {
#if PE_IS(KERPLE)
    kerple_clamp(model->params.kerple_r1, model->param_sizes[P_KERPLE_R1], KERPLE_MIN, INFINITY);
    kerple_clamp(model->params.kerple_r2, model->param_sizes[P_KERPLE_R2], KERPLE_MIN, INFINITY);
#else
    kerple_clamp(model->params.kpower_a, model->param_sizes[P_KPOWER_A], KERPLE_POWER_MIN, INFINITY);
    kerple_clamp(model->params.kpower_p, model->param_sizes[P_KPOWER_P], KERPLE_POWER_MIN, KERPLE_POWER_P_MAX);
#endif
}

#endif
