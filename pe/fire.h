/*
fire (Li et al. 2024), as the FIRE class of the DAPE repository (whose numbers the papers
report): a learned function of the normalized distance,

    b(i, j) = f(psi(i - j) / (psi(max(L, i)) + eps)),   psi(x) = log(|c| x + 1)

with the query position i counted from 0, f an MLP 1 -> 32 (ReLU) -> NH shared by the heads
of a layer, c learned (starts at 0.1), and the threshold L = |l| L0 learning its multiplier
l (starts at 1) of the fixed L0 = maxT // 2 (the training length halved). The MLP starts as
PyTorch's default Linear init, U(+-1/sqrt(fan_in)). Revision 1 (revision 0 normalized by
psi(max(L, i + 1)) and learned L in tokens).
*/
#if PE_PART == PE_PART_DEFINITION

#define FIRE_HIDDEN 32
#define FIRE_INIT_C 0.1f
#define FIRE_INIT_L 1.0f // the multiplier l of the threshold L = |l| L0
#define FIRE_EPS 1e-6f

#define PE_TENSORS(X) \
    X(FIRE_W1, fire_w1, 1, L * FIRE_HIDDEN,      fill_uniform(p, n, -1.0f, 1.0f, rng)) \
    X(FIRE_B1, fire_b1, 0, L * FIRE_HIDDEN,      fill_uniform(p, n, -1.0f, 1.0f, rng)) \
    X(FIRE_W2, fire_w2, 1, L * NH * FIRE_HIDDEN, fill_uniform(p, n, -1.0f / sqrtf(FIRE_HIDDEN), 1.0f / sqrtf(FIRE_HIDDEN), rng)) \
    X(FIRE_B2, fire_b2, 0, L * NH,               fill_uniform(p, n, -1.0f / sqrtf(FIRE_HIDDEN), 1.0f / sqrtf(FIRE_HIDDEN), rng)) \
    X(FIRE_C,  fire_c,  0, L,                    fill_const(p, n, FIRE_INIT_C)) \
    X(FIRE_L,  fire_L,  0, L,                    fill_const(p, n, FIRE_INIT_L))

#elif PE_PART == PE_PART_CPU

#define PE_BIAS
#define PE_BIAS_GRAD
#define PE_BH_GRADS (3 * FIRE_HIDDEN + 3) // per (slot, head): w1, b1, this head's w2 row, b2, c, l
typedef struct { const real* w1; const real* b1; const real* w2; const real* b2; real c; real l; real L0; real* dbh; int NH; } PEBias;
typedef struct { int h, i; } PERow;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    pb->NH = NH;
    pb->w1 = model->params.fire_w1 + (size_t)l * FIRE_HIDDEN;
    pb->b1 = model->params.fire_b1 + (size_t)l * FIRE_HIDDEN;
    pb->w2 = model->params.fire_w2 + (size_t)l * NH * FIRE_HIDDEN;
    pb->b2 = model->params.fire_b2 + (size_t)l * NH;
    pb->c = model->params.fire_c[l];
    pb->l = model->params.fire_L[l];
    pb->L0 = (real)(model->config.max_seq_len / 2);
    pb->dbh = model->pe_dbh;
    if (backward) { memset(pb->dbh, 0, (size_t)B * NH * PE_BH_GRADS * sizeof(real)); }
}
static inline PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { PERow r = {h, i}; return r; }
// the MLP's input u = psi(i - j) / (psi(max(L, i)) + eps); also returns psi's two values and max(L, i)
static inline real fire_input(const PEBias* pb, int i, int j, real* psi_num, real* psi_den, real* lpos) {
    real c = fabs(pb->c);
    real L = fabs(pb->l) * pb->L0;
    *lpos = L > i ? L : (real)i;
    *psi_num = log(c * (i - j) + 1);
    *psi_den = log(c * *lpos + 1) + (real)FIRE_EPS;
    return *psi_num / *psi_den;
}
static inline real pe_bias(const PEBias* pb, const PERow* r, int j) {
    real pn, pd, lp;
    real u = fire_input(pb, r->i, j, &pn, &pd, &lp);
    const real* w2 = pb->w2 + r->h * FIRE_HIDDEN;
    real out = pb->b2[r->h];
    for (int k = 0; k < FIRE_HIDDEN; k++) {
        real hid = pb->w1[k] * u + pb->b1[k];
        if (hid > 0) { out += w2[k] * hid; }
    }
    return out;
}
static inline void pe_bias_backward(PEBias* pb, int slot, const PERow* r, int j, real ds) {
    int i = r->i;
    real pn, pd, lp;
    real u = fire_input(pb, i, j, &pn, &pd, &lp);
    const real* w2 = pb->w2 + r->h * FIRE_HIDDEN;
    real* d = pb->dbh + ((size_t)slot * pb->NH + r->h) * PE_BH_GRADS;
    real* dw1 = d;
    real* db1 = d + FIRE_HIDDEN;
    real* dw2 = d + 2 * FIRE_HIDDEN;
    real du = 0;
    for (int k = 0; k < FIRE_HIDDEN; k++) {
        real hid = pb->w1[k] * u + pb->b1[k];
        if (hid > 0) {
            dw2[k] += ds * hid;
            real dhid = ds * w2[k];
            dw1[k] += dhid * u;
            db1[k] += dhid;
            du += dhid * pb->w1[k];
        }
    }
    d[3 * FIRE_HIDDEN] += ds; // b2
    // u = pn / pd with pn = log(|c| n + 1), pd = log(|c| lp + 1) + eps
    real c = fabs(pb->c), sc = pb->c >= 0 ? 1 : -1;
    real n = (real)(i - j);
    real dpn = du / pd, dpd = -du * pn / (pd * pd);
    real dc = dpn * n / (c * n + 1) + dpd * lp / (c * lp + 1);
    d[3 * FIRE_HIDDEN + 1] += dc * sc;
    if (fabs(pb->l) * pb->L0 > i) { // the threshold is active: lp = |l| L0
        real sl = pb->l >= 0 ? 1 : -1;
        d[3 * FIRE_HIDDEN + 2] += dpd * c / (c * lp + 1) * pb->L0 * sl;
    }
}
#define PE_BIAS_REDUCE
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int slots) {
    int NH = pb->NH;
    real* dw1 = model->grads.fire_w1 + (size_t)l * FIRE_HIDDEN;
    real* db1 = model->grads.fire_b1 + (size_t)l * FIRE_HIDDEN;
    real* dw2 = model->grads.fire_w2 + (size_t)l * NH * FIRE_HIDDEN;
    real* db2 = model->grads.fire_b2 + (size_t)l * NH;
    for (int b = 0; b < slots; b++) {
        for (int h = 0; h < NH; h++) {
            const real* d = pb->dbh + ((size_t)b * NH + h) * PE_BH_GRADS;
            for (int k = 0; k < FIRE_HIDDEN; k++) {
                dw1[k] += d[k];
                db1[k] += d[FIRE_HIDDEN + k];
                dw2[h * FIRE_HIDDEN + k] += d[2 * FIRE_HIDDEN + k];
            }
            db2[h] += d[3 * FIRE_HIDDEN];
            model->grads.fire_c[l] += d[3 * FIRE_HIDDEN + 1];
            model->grads.fire_L[l] += d[3 * FIRE_HIDDEN + 2];
        }
    }
}

#elif PE_PART == PE_PART_CUDA

// The row's denominator and the row constants of the gradients of c and l are computed once per row
// (PERow); the MLP is evaluated per pair inside the attention kernels (FIRE costs more than
// the other biases). Gradient (column side): the pairs of a warp are staged in shared
// memory and lane k sums hidden unit k's gradients over them (no per-thread array of the
// 99 parameters).
#define PE_BIAS
#define PE_BIAS_GRAD
#define PE_BIAS_WARP
#define PE_BIAS_REDUCE
#define PE_PAR_N (3 * FIRE_HIDDEN + 3) // w1, b1, this head's w2 row, b2, c, l
static_assert(FIRE_HIDDEN == WARP_SIZE, "fire: a hidden unit per lane");
// lane k's sums for hidden unit k over the pairs where it is active (dw1, db1 with w2[h][k]
// folded in, dc and dl with w2[h][k] w1[k]); db2: this thread's own pairs
struct PEGrad { float dw1, db1, dw2, dc, dl, db2; static constexpr bool per_lane = true; };
struct PEBias {
    // the tensor-core forward at randomized positions, HS = 64: ptxas (nvcc 13.0) held it to
    // 128 registers for 4 blocks per SM and spilled 24 bytes; 3 blocks allow 168
    static constexpr int rp_fwd_min_blocks = 3;
    const floatX* w1; const floatX* b1; const floatX* w2; const floatX* b2; const floatX* c; const floatX* l; float L0;
    float* partials;
};
// query row i of head h: |c|; pd = psi(max(L, i)) + eps; u's derivatives in |c| and |l|
// are du/d|c| = n / ((|c| n + 1) pd) - u rho and du/d|l| = -u kappa (kappa = 0 while L <= i)
struct PERow { int i, h; float pd, rho, kappa, shift; };
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    pb->w1 = model->params.fire_w1 + (size_t)l * FIRE_HIDDEN;
    pb->b1 = model->params.fire_b1 + (size_t)l * FIRE_HIDDEN;
    pb->w2 = model->params.fire_w2 + (size_t)l * NH * FIRE_HIDDEN;
    pb->b2 = model->params.fire_b2 + (size_t)l * NH;
    pb->c = model->params.fire_c + l;
    pb->l = model->params.fire_L + l;
    pb->L0 = (float)(model->config.max_seq_len / 2);
    pb->partials = model->gs.pe_partials;
}
__device__ __forceinline__ PERow pe_bias_row(const PEBias* pb, int b, int h, int i) {
    float c = fabsf((float)pb->c[0]);
    float L = fabsf((float)pb->l[0]) * pb->L0;
    float lp = L > i ? L : (float)i;
    float pd = logf(c * lp + 1.0f) + FIRE_EPS;
    float rho = lp / ((c * lp + 1.0f) * pd);
    float kappa = L > i ? c * pb->L0 / ((c * lp + 1.0f) * pd) : 0.0f;
    return {i, h, pd, rho, kappa, 0.0f};
}
// the MLP's input u = psi(i - j) / pd
__device__ __forceinline__ float fire_input(const PEBias* pb, const PERow* r, int j) { return logf(fabsf((float)pb->c[0]) * (r->i - j) + 1.0f) / r->pd; }
__device__ __forceinline__ float pe_bias(const PEBias* pb, const PERow* r, int j) {
    float u = fire_input(pb, r, j);
    const floatX* w2 = pb->w2 + r->h * FIRE_HIDDEN;
    float out = (float)pb->b2[r->h];
    #pragma unroll 2 // the weights from memory in each pair's loop, not all kept in registers
    for (int k = 0; k < FIRE_HIDDEN; k++) {
        float hid = (float)pb->w1[k] * u + (float)pb->b1[k];
        if (hid > 0.0f) { out += (float)w2[k] * hid; }
    }
    return out;
}
__device__ __forceinline__ void pe_bias_backward_warp(const PEBias* pb, PEGrad* g, int side, const PERow* r, int j, float ds, bool valid) {
    if (side != PE_SIDE_COL) { return; }
    // each lane's pair in two rounds of 8 bytes (the fp32 dk/dv kernel at HS = 128 has 4 KiB
    // of static shared memory left): (u, ds), then (ds du/d|c|, ds du/d|l|)
    __shared__ float2 stage[PE_WARP_THREADS];
    float u = 0.0f, d = 0.0f, dc = 0.0f, dl = 0.0f;
    if (valid) {
        float n = (float)(r->i - j), c = fabsf((float)pb->c[0]);
        u = fire_input(pb, r, j);
        d = ds;
        dc = ds * (n / ((c * n + 1.0f) * r->pd) - u * r->rho);
        dl = -ds * u * r->kappa;
        g->db2 += ds;
    }
    int k = threadIdx.x % WARP_SIZE, first = threadIdx.x - k;
    stage[threadIdx.x] = make_float2(u, d);
    __syncwarp();
    float w1 = (float)pb->w1[k], b1 = (float)pb->b1[k], w2 = (float)pb->w2[r->h * FIRE_HIDDEN + k];
    float su = 0.0f, sds = 0.0f, shid = 0.0f, sc = 0.0f, sl = 0.0f;
    unsigned active = 0; // the pairs where unit k is active
    #pragma unroll 1
    for (int l = 0; l < WARP_SIZE; l++) {
        float2 v = stage[first + l];
        float hid = w1 * v.x + b1;
        if (hid > 0.0f) { su += v.y * v.x; sds += v.y; shid += v.y * hid; active |= 1u << l; }
    }
    __syncwarp();
    stage[threadIdx.x] = make_float2(dc, dl);
    __syncwarp();
    #pragma unroll 1
    for (int l = 0; l < WARP_SIZE; l++) {
        if ((active >> l) & 1u) { float2 v = stage[first + l]; sc += v.x; sl += v.y; }
    }
    g->dw1 += w2 * su;
    g->db1 += w2 * sds;
    g->dw2 += shid;
    g->dc += w2 * w1 * sc;
    g->dl += w2 * w1 * sl;
    __syncwarp(); // the stage is rewritten by the next pair
}
// the partial in the order of PE_PAR_N: w1, b1, w2 (lane k holds unit k), b2, c, l; the
// signs of c and l applied (the MLP sees |c| and |l|)
__device__ __forceinline__ void pe_bias_flush(const PEBias* pb, PEGrad* g, int side, int b, int h, int t, bool valid, int slot) {
    int k = threadIdx.x % WARP_SIZE;
    float sc = (float)pb->c[0] >= 0.0f ? 1.0f : -1.0f, sl = (float)pb->l[0] >= 0.0f ? 1.0f : -1.0f;
    flush_lane_partials(pb->partials, PE_PAR_N, side, slot, [&](int q) {
        if (q < 3 * FIRE_HIDDEN) { return q % FIRE_HIDDEN != k ? 0.0f : q < FIRE_HIDDEN ? g->dw1 : q < 2 * FIRE_HIDDEN ? g->db1 : g->dw2; }
        return q == 3 * FIRE_HIDDEN ? g->db2 : q == 3 * FIRE_HIDDEN + 1 ? g->dc * sc : g->dl * sl;
    });
}
// fire_bias_reduce_kernel: one thread per accumulator sums the partials of every (b, key block), per head for
// the head's own w2 row and b2, over the heads as well for the shared w1, b1, c, L
__global__ void fire_bias_reduce_kernel(float* dw1, float* db1, float* dw2, float* db2, float* dc, float* dL,
                                        const float* partials, int B, int NH, int blocks) {
    int q = threadIdx.x;
    if (q >= PE_PAR_N) { return; }
    float total = 0.0f;
    for (int h = 0; h < NH; h++) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) {
            for (int kb = 0; kb < blocks; kb++) { s += partials[(((size_t)b * NH + h) * blocks + kb) * PE_PAR_N + q]; }
        }
        if (q >= 2 * FIRE_HIDDEN && q < 3 * FIRE_HIDDEN) { dw2[h * FIRE_HIDDEN + q - 2 * FIRE_HIDDEN] += s; }
        else if (q == 3 * FIRE_HIDDEN) { db2[h] += s; }
        else { total += s; }
    }
    if (q < FIRE_HIDDEN) { dw1[q] += total; }
    else if (q < 2 * FIRE_HIDDEN) { db1[q - FIRE_HIDDEN] += total; }
    else if (q == 3 * FIRE_HIDDEN + 1) { dc[0] += total; }
    else if (q == 3 * FIRE_HIDDEN + 2) { dL[0] += total; }
}
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) {
    int NH = model->config.num_heads;
    TensorSet<float>* g = &model->grads;
    fire_bias_reduce_kernel<<<1, 128, 0, ctx.stream>>>(g->fire_w1 + (size_t)l * FIRE_HIDDEN, g->fire_b1 + (size_t)l * FIRE_HIDDEN,
        g->fire_w2 + (size_t)l * NH * FIRE_HIDDEN, g->fire_b2 + (size_t)l * NH, g->fire_c + l, g->fire_L + l,
        pb->partials, B, NH, CEIL_DIV(model->seq_len, ATT_KV_BK));
    cudaCheckLaunch("fire_bias_reduce_kernel");
}

#elif PE_PART == PE_PART_REF

// the DAPE repo's FIRE: log(|c x| + 1), normalizer max(i, |l * L0|), L0 = T_train // 2; the
// MLP's input u, and its derivatives in c and l
static double ref_fire_input(const PERef* r, int i, int j, double* du_dc, double* du_dl) {
    double c = PE_AT(r->par, FIRE_C)[0], l = PE_AT(r->par, FIRE_L)[0], L0 = (double)(r->cfg.max_seq_len / 2);
    // the row's side of max(L, i) decided as the model decides it, on the fp32 product (so do
    // the official code and the CPU path): where the threshold lands on a row (T = 1000: 0.6 L0
    // = 300), the product in double would put the row on the other side. L's value stays the
    // double product (the gradient checks difference it in l)
    double n = i - j, L = fabs(l * L0);
    int above = fabsf((float)l) * (float)L0 > (float)i; // L > i
    double lp = above ? L : i;
    double num = log(fabs(c * n) + 1), den = log(fabs(c * lp) + 1) + 1e-6;
    double sc = c >= 0 ? 1 : -1;
    // d num/dc = sign(c) n / (|c| n + 1); d den/dc the same at lp; den depends on l where L > i
    double dnum = sc * n / (fabs(c) * n + 1), dden = sc * lp / (fabs(c) * lp + 1);
    *du_dc = dnum / den - num * dden / (den * den);
    *du_dl = above ? -num / (den * den) * fabs(c) / (fabs(c) * L + 1) * L0 * (l >= 0 ? 1 : -1) : 0;
    return num / den;
}
#define PE_REF_POS_BIAS
#define PE_REF_POS_BIAS_GRAD
// b2 adds a constant to a whole row of a head's scores, which the softmax cancels: its gradient
// vanishes identically (the attention checks bound it instead of comparing it)
#define PE_REF_ROW_CONSTANT(k) ((k) == P_FIRE_B2)
static double pe_ref_pos_bias(const PERef* r, int h, int i, int j) {
    double dc, dl, u = ref_fire_input(r, i, j, &dc, &dl);
    double out = PE_AT(r->par, FIRE_B2)[h];
    for (int k = 0; k < 32; k++) {
        double hid = PE_AT(r->par, FIRE_W1)[k] * u + PE_AT(r->par, FIRE_B1)[k];
        out += PE_AT(r->par, FIRE_W2)[h * 32 + k] * (hid > 0 ? hid : 0);
    }
    return out;
}
static void pe_ref_pos_bias_grad(const PERef* r, int h, int i, int j, double ds, double* const* d) {
    double dc, dl, u = ref_fire_input(r, i, j, &dc, &dl), du = 0;
    for (int k = 0; k < 32; k++) {
        double w1 = PE_AT(r->par, FIRE_W1)[k], w2 = PE_AT(r->par, FIRE_W2)[h * 32 + k];
        double hid = w1 * u + PE_AT(r->par, FIRE_B1)[k];
        if (hid <= 0) { continue; }
        PE_AT(d, FIRE_W2)[h * 32 + k] += ds * hid;
        PE_AT(d, FIRE_W1)[k] += ds * w2 * u;
        PE_AT(d, FIRE_B1)[k] += ds * w2;
        du += ds * w2 * w1;
    }
    PE_AT(d, FIRE_B2)[h] += ds;
    PE_AT(d, FIRE_C)[0] += du * dc;
    PE_AT(d, FIRE_L)[0] += du * dl;
}

#elif PE_PART == PE_PART_TEST

// thresholds L = 0.6 L0 and (through |l|) 1.3 L0 in alternate layers, both within a test's
// sequence: both sides of max(L, i)
#define PE_TEST_PARAMS
static void pe_test_params(GPT2* model, uint64_t* rng) {
    for (int l = 0; l < model->config.num_layers; l++) { model->params.fire_L[l] = l % 2 == 0 ? 0.6f : -1.3f; }
}

#endif
