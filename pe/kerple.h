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

#elif PE_PART == PE_PART_CUDA

// The two parameters' gradients are column sums: each thread's pairs summed in PEGrad, the
// block's threads into a partial per (b, head, key block), the partials into the gradients
// by head_pairs_reduce_kernel.
#define PE_BIAS
#define PE_BIAS_GRAD
#define PE_BIAS_REDUCE
#define PE_PAR_N 2
struct PEGrad { float d[2]; };
struct PEBias { const floatX* p0; const floatX* p1; float* partials; }; // r1, r2 or a, p of the layer
#if PE_IS(KERPLE)
struct PERow { float r1, r2; int i; float shift; };
__device__ __forceinline__ PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { return {(float)pb->p0[h], (float)pb->p1[h], i, 0.0f}; }
__device__ __forceinline__ float pe_bias(const PEBias* pb, const PERow* r, int j) { return kerple_bias(r->r1, r->r2, r->i - j); }
__device__ __forceinline__ void pe_bias_backward(const PEBias* pb, PEGrad* g, int side, const PERow* r, int j, float ds) {
    if (side == PE_SIDE_COL) { kerple_bias_grad(r->r1, r->r2, r->i - j, ds, &g->d[0], &g->d[1]); }
}
#else
struct PERow { int b, h, i; float shift; };
__device__ __forceinline__ PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { return {b, h, i, 0.0f}; }
__device__ __forceinline__ float pe_bias(const PEBias* pb, const PERow* r, int j) {
    return kerple_power_bias((float)pb->p0[r->h], (float)pb->p1[r->h], r->i - j);
}
__device__ __forceinline__ void pe_bias_backward(const PEBias* pb, PEGrad* g, int side, const PERow* r, int j, float ds) {
    if (side == PE_SIDE_COL) { kerple_power_bias_grad((float)pb->p0[r->h], (float)pb->p1[r->h], r->i - j, ds, &g->d[0], &g->d[1]); }
}
#endif
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    pb->p0 = model->params.KERPLE_P0 + (size_t)l * NH;
    pb->p1 = model->params.KERPLE_P1 + (size_t)l * NH;
    pb->partials = model->gs.pe_partials;
}
__device__ __forceinline__ void pe_bias_flush(const PEBias* pb, PEGrad* g, int side, int b, int h, int t, bool valid, int slot) {
    flush_param_partials(pb->partials, g->d, side, slot);
}
// head_pairs_reduce_kernel: one thread per head sums the two
// accumulators of every (b, key block) partial into the head's two gradients
__global__ void head_pairs_reduce_kernel(float* d0, float* d1, const float* partials, int B, int NH, int blocks) {
    int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= NH) { return; }
    float s0 = 0.0f, s1 = 0.0f;
    for (int b = 0; b < B; b++) {
        for (int kb = 0; kb < blocks; kb++) {
            const float* p = partials + (((size_t)b * NH + h) * blocks + kb) * 2;
            s0 += p[0];
            s1 += p[1];
        }
    }
    d0[h] += s0;
    d1[h] += s1;
}
static void pe_reduce_head_pairs(float* d0, float* d1, const float* partials, int B, int NH, int T) {
    head_pairs_reduce_kernel<<<CEIL_DIV(NH, 64), 64, 0, ctx.stream>>>(d0, d1, partials, B, NH, CEIL_DIV(T, ATT_KV_BK));
    cudaCheckLaunch("head_pairs_reduce_kernel");
}

// keeps a constrained parameter tensor in [lo, hi], on this rank's part of the master weights (pe_project)
static void pe_clamp(GPT2* model, int tensor, float lo, float hi) {
    size_t a = model->param_offsets[tensor], z = a + model->param_sizes[tensor];
    if (a < model->shard_lo) { a = model->shard_lo; }
    if (z > model->shard_hi) { z = model->shard_hi; }
    if (a >= z) { return; }
    clamp_kernel<<<CEIL_DIV(z - a, 256), 256, 0, ctx.stream>>>(model->master + (a - model->shard_lo), z - a, lo, hi);
    cudaCheckLaunch("clamp_kernel");
}
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) {
    int NH = model->config.num_heads;
    pe_reduce_head_pairs(model->grads.KERPLE_P0 + (size_t)l * NH, model->grads.KERPLE_P1 + (size_t)l * NH, pb->partials, B, NH, model->seq_len);
}

// the parameters back into their ranges after every update
#define PE_PROJECT
static void pe_project(GPT2* model) {
#if PE_IS(KERPLE)
    pe_clamp(model, P_KERPLE_R1, KERPLE_MIN, INFINITY);
    pe_clamp(model, P_KERPLE_R2, KERPLE_MIN, INFINITY);
#else
    pe_clamp(model, P_KPOWER_A, KERPLE_POWER_MIN, INFINITY);
    pe_clamp(model, P_KPOWER_P, KERPLE_POWER_MIN, KERPLE_POWER_P_MAX);
#endif
}

#elif PE_PART == PE_PART_REF

// -r1 log(1 + r2 n) or -a n^p of the distance n = i - j, and their derivatives in the head's two
// parameters (n^p's in p taken as 0 at n = 0, as PyTorch's pow)
#define PE_REF_POS_BIAS
#define PE_REF_POS_BIAS_GRAD
#if PE_IS(KERPLE)
static double pe_ref_pos_bias(const PERef* r, int h, int i, int j) {
    return -PE_AT(r->par, KERPLE_R1)[h] * log(1 + PE_AT(r->par, KERPLE_R2)[h] * (i - j));
}
static void pe_ref_pos_bias_grad(const PERef* r, int h, int i, int j, double ds, double* const* d) {
    double r1 = PE_AT(r->par, KERPLE_R1)[h], r2 = PE_AT(r->par, KERPLE_R2)[h], n = i - j;
    PE_AT(d, KERPLE_R1)[h] -= ds * log(1 + r2 * n);
    PE_AT(d, KERPLE_R2)[h] -= ds * r1 * n / (1 + r2 * n);
}
#else
static double pe_ref_pos_bias(const PERef* r, int h, int i, int j) {
    return -PE_AT(r->par, KPOWER_A)[h] * pow((double)(i - j), PE_AT(r->par, KPOWER_P)[h]);
}
static void pe_ref_pos_bias_grad(const PERef* r, int h, int i, int j, double ds, double* const* d) {
    if (i == j) { return; }
    double a = PE_AT(r->par, KPOWER_A)[h], np = pow((double)(i - j), PE_AT(r->par, KPOWER_P)[h]);
    PE_AT(d, KPOWER_A)[h] -= ds * np;
    PE_AT(d, KPOWER_P)[h] -= ds * a * np * log((double)(i - j));
}
#endif

#elif PE_PART == PE_PART_TEST

#if PE_IS(KERPLE_POWER)
#define PE_TESTS
static void pe_tests(void) {
    printf("kerple_power: the clamps after an update (a >= 0.01, 0.01 <= p <= 2)\n");
    GPT2Config kc = tiny_config(16);
    GPT2 km;
    gpt2_build_from_config(&km, &kc, 2);
    km.params.kpower_a[0] = -1; km.params.kpower_a[1] = 0.5f;
    km.params.kpower_p[0] = 5; km.params.kpower_p[1] = -1; km.params.kpower_p[2] = 1.5f;
    pe_project(&km);
    int clamped = km.params.kpower_a[0] == KERPLE_POWER_MIN && km.params.kpower_a[1] == 0.5f && km.params.kpower_p[0] == 2
               && km.params.kpower_p[1] == KERPLE_POWER_MIN && km.params.kpower_p[2] == 1.5f;
    check(clamped, "a: -1 -> 0.01, 0.5 kept; p: 5 -> 2, -1 -> 0.01, 1.5 kept", !clamped, 0);
    gpt2_free(&km);
}

// the bias of one pair against its finite differences in a and p (fp64 build)
#define PE_TEST_GRADIENTS
static void pe_test_gradients(GPT2* model, int B, int T) {
    // the bias of one pair against its finite differences in a and p, at distances 0 (where
    // n^p has no derivative in p that PyTorch would not call 0), 1 (log 1 = 0), 2 and 7
    printf("kerple_power: d bias / d a, d bias / d p of single pairs (fp64)\n");
    const double eps = 1e-5, atol = 1e-8, rtol = 1e-5;
    PEBias pb;
    pe_bias_setup(&pb, model, 0, B, T, 1);
    const int dist[4] = {0, 1, 2, 7};
    double worst = 0;
    for (int n = 0; n < 4; n++) {
        memset(model->pe_dbh, 0, 2 * sizeof(real));
        PERow r = pe_bias_row(&pb, 0, 0, 9);
        pe_bias_backward(&pb, 0, &r, 9 - dist[n], 1.0);
        for (int q = 0; q < 2; q++) {
            real* par = q == 0 ? &model->params.kpower_a[0] : &model->params.kpower_p[0];
            real keep = *par;
            *par = keep + eps;
            double bp = pe_bias(&pb, &r, 9 - dist[n]);
            *par = keep - eps;
            double bm = pe_bias(&pb, &r, 9 - dist[n]);
            *par = keep;
            double fd = (bp - bm) / (2 * eps);
            worst = fmax(worst, fabs(fd - model->pe_dbh[q]) / (atol / rtol + fabs(fd)));
            if (!isfinite(model->pe_dbh[q])) { worst = INFINITY; }
        }
    }
    check(worst <= rtol, "distances 0, 1, 2, 7: max rel error", worst, rtol);
}
#endif

#endif
