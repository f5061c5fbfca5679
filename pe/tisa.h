/*
tisa (Wennberg & Henter 2021), as the official module (ulmewennberg/tisa, model/tisa.py): per
layer and head, a sum of R = 5 radial basis functions of the relative distance, learned,

    b(i, j) = f_h(i - j - 1),   f_h(r) = sum_k a_kh exp(-|c_kh| (mu_kh - r)^2)

with the official Toeplitz gather's offset r = i - j - 1 (tisa.py:41-59: the diagonal takes
f(-1), the previous token f(0); r = i - j is the same model with every mu_kh one larger). The
three tensors are the official module's offsets mu, amplitudes a and sharpness c, each [R, NH]
per layer (tisa.py:12-20), initialized as it does (tisa.py:91-103): mu ~ N(0, 5^2),
a ~ N(0.1, 0.01^2), c ~ N(0.1, 0.01^2); no weight decay (they are no matrices). The official
code is the module alone: here it is added to every layer's scores q.k/sqrt(hs), with
parameters of its own in each layer, and no absolute embedding (docs/encodings.md).
Gradients, with d = mu - r and e = exp(-|c| d^2): db/da = e, db/dmu = -2 |c| a d e,
db/dc = -sgn(c) a d^2 e (sgn(0) = 0, as PyTorch's abs).
*/
#if PE_PART == PE_PART_DEFINITION

#define TISA_KERNELS 5 // R, the official module's num_kernels

// N(mean, std^2): the official initialization of each tensor
static void tisa_fill(float* p, size_t n, float mean, float std, uint64_t* rng) {
    fill_normal(p, n, std, rng);
    for (size_t i = 0; i < n; i++) { p[i] += mean; }
}
// the three tensors, (L, R, NH): kernel k of head h at k NH + h in a layer's share
#define PE_TENSORS(X) \
    X(TISA_MU, tisa_mu, 0, L * TISA_KERNELS * NH, tisa_fill(p, n, 0.0f, 5.0f, rng)) \
    X(TISA_A,  tisa_a,  0, L * TISA_KERNELS * NH, tisa_fill(p, n, 0.1f, 0.01f, rng)) \
    X(TISA_C,  tisa_c,  0, L * TISA_KERNELS * NH, tisa_fill(p, n, 0.1f, 0.01f, rng))

// a basis function at offset r, without its amplitude: exp(-|c| (mu - r)^2)
PE_FN real tisa_rbf(real mu, real c, real r) { return exp(-fabs(c) * (mu - r) * (mu - r)); }
// PyTorch's sign, the derivative of |c|
PE_FN real tisa_sign(real c) { return (real)((c > 0) - (c < 0)); }

#elif PE_PART == PE_PART_CPU

#define PE_BIAS
#define PE_BIAS_GRAD
#define PE_BIAS_REDUCE
#define PE_BH_GRADS (3 * TISA_KERNELS) // per (slot, head): d mu, d a, d c of each kernel
typedef struct { const real* mu; const real* a; const real* c; real* dbh; int NH; } PEBias; // the layer's shares
typedef struct { int h, i; } PERow;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    size_t at = (size_t)l * TISA_KERNELS * NH;
    pb->NH = NH;
    pb->mu = model->params.tisa_mu + at;
    pb->a = model->params.tisa_a + at;
    pb->c = model->params.tisa_c + at;
    pb->dbh = model->pe_dbh;
    if (backward) { memset(pb->dbh, 0, (size_t)B * NH * PE_BH_GRADS * sizeof(real)); }
}
static inline PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { PERow r = {h, i}; return r; }
static inline real pe_bias(const PEBias* pb, const PERow* r, int j) {
    real sum = 0, off = (real)(r->i - j - 1);
    for (int k = 0; k < TISA_KERNELS; k++) {
        int at = k * pb->NH + r->h;
        sum += pb->a[at] * tisa_rbf(pb->mu[at], pb->c[at], off);
    }
    return sum;
}
// ds into the (slot, head)'s accumulators: d mu_k, d a_k, d c_k
static inline void pe_bias_backward(PEBias* pb, int slot, const PERow* r, int j, real ds) {
    real* g = pb->dbh + ((size_t)slot * pb->NH + r->h) * PE_BH_GRADS;
    real off = (real)(r->i - j - 1);
    for (int k = 0; k < TISA_KERNELS; k++) {
        int at = k * pb->NH + r->h;
        real d = pb->mu[at] - off, e = tisa_rbf(pb->mu[at], pb->c[at], off);
        g[k] -= ds * 2 * fabs(pb->c[at]) * d * pb->a[at] * e;
        g[TISA_KERNELS + k] += ds * e;
        g[2 * TISA_KERNELS + k] -= ds * tisa_sign(pb->c[at]) * d * d * pb->a[at] * e;
    }
}
// the (slot, head) accumulators summed into the layer's three tensors
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int slots) {
    int NH = pb->NH;
    size_t at = (size_t)l * TISA_KERNELS * NH;
    real* d[3] = {model->grads.tisa_mu + at, model->grads.tisa_a + at, model->grads.tisa_c + at};
    for (int b = 0; b < slots; b++) {
        for (int h = 0; h < NH; h++) {
            const real* g = pb->dbh + ((size_t)b * NH + h) * PE_BH_GRADS;
            for (int q = 0; q < PE_BH_GRADS; q++) { d[q / TISA_KERNELS][(q % TISA_KERNELS) * NH + h] += g[q]; }
        }
    }
}

#elif PE_PART == PE_PART_CUDA

// The bias: the R basis functions evaluated per pair inside the attention kernels. Gradient
// (column side): the pairs of a warp are staged in shared memory and lane k < R sums kernel k's
// three moments over them, S0 = sum ds e, S1 = sum ds e d, S2 = sum ds e d^2 (d = mu - r,
// e = exp(-|c| d^2)); the flush turns them into d a = S0, d mu = -2 |c| a S1,
// d c = -sgn(c) a S2 (3 accumulators a thread instead of 3R: the dk/dv kernel's registers)
#define PE_BIAS
#define PE_BIAS_GRAD
#define PE_BIAS_WARP
#define PE_BIAS_REDUCE
#define PE_PAR_N (3 * TISA_KERNELS) // mu, a, c of each kernel
static_assert(TISA_KERNELS <= WARP_SIZE, "tisa: a kernel per lane");
struct PEGrad { float s0, s1, s2; static constexpr bool per_lane = true; }; // lane k < R: kernel k's moments
struct PEBias { const floatX* mu; const floatX* a; const floatX* c; int NH; float* partials; }; // the layer's shares
struct PERow { int h, i; float shift; };
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    size_t at = (size_t)l * TISA_KERNELS * NH;
    pb->mu = model->params.tisa_mu + at;
    pb->a = model->params.tisa_a + at;
    pb->c = model->params.tisa_c + at;
    pb->NH = NH;
    pb->partials = model->gs.pe_partials;
}
__device__ __forceinline__ PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { return {h, i, 0.0f}; }
__device__ __forceinline__ float pe_bias(const PEBias* pb, const PERow* r, int j) {
    float sum = 0.0f, off = (float)(r->i - j - 1);
    #pragma unroll
    for (int k = 0; k < TISA_KERNELS; k++) {
        int at = k * pb->NH + r->h;
        sum += (float)pb->a[at] * tisa_rbf((float)pb->mu[at], (float)pb->c[at], off);
    }
    return sum;
}
__device__ __forceinline__ void pe_bias_backward_warp(const PEBias* pb, PEGrad* g, int side, const PERow* r, int j, float ds, bool valid) {
    if (side != PE_SIDE_COL) { return; }
    __shared__ float2 stage[PE_WARP_THREADS]; // (r, ds) of each lane's pair, ds = 0 if not valid
    int lane = threadIdx.x % WARP_SIZE, first = threadIdx.x - lane;
    stage[threadIdx.x] = make_float2((float)(r->i - j - 1), valid ? ds : 0.0f);
    __syncwarp();
    if (lane < TISA_KERNELS) {
        int at = lane * pb->NH + r->h;
        float mu = (float)pb->mu[at], c = (float)pb->c[at];
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
        #pragma unroll 1
        for (int l = 0; l < WARP_SIZE; l++) {
            float2 v = stage[first + l];
            float d = mu - v.x, e = v.y * tisa_rbf(mu, c, v.x);
            s0 += e;
            s1 += e * d;
            s2 += e * d * d;
        }
        g->s0 += s0;
        g->s1 += s1;
        g->s2 += s2;
    }
    __syncwarp(); // the stage is rewritten by the next pair
}
// the partial in the order of PE_PAR_N: mu, a, c of kernels 0..R-1 (lane k holds kernel k)
__device__ __forceinline__ void pe_bias_flush(const PEBias* pb, PEGrad* g, int side, int b, int h, int t, bool valid, int slot) {
    int lane = threadIdx.x % WARP_SIZE;
    float a = 0.0f, c = 0.0f;
    if (lane < TISA_KERNELS) { a = (float)pb->a[lane * pb->NH + h]; c = (float)pb->c[lane * pb->NH + h]; }
    flush_lane_partials(pb->partials, PE_PAR_N, side, slot, [&](int q) {
        if (q % TISA_KERNELS != lane) { return 0.0f; }
        int tensor = q / TISA_KERNELS;
        return tensor == 0 ? -2.0f * fabsf(c) * a * g->s1 : tensor == 1 ? g->s0 : -tisa_sign(c) * a * g->s2;
    });
}
// tisa_bias_reduce_kernel: one thread per (accumulator q, head h) sums the partials of every
// (b, key block) into its tensor's element (kernel q % R, head h)
__global__ void tisa_bias_reduce_kernel(float* dmu, float* da, float* dc, const float* partials, int B, int NH, int blocks) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= NH * PE_PAR_N) { return; }
    int h = idx / PE_PAR_N, q = idx % PE_PAR_N;
    float s = 0.0f;
    for (int b = 0; b < B; b++) {
        for (int kb = 0; kb < blocks; kb++) { s += partials[(((size_t)b * NH + h) * blocks + kb) * PE_PAR_N + q]; }
    }
    float* d = q < TISA_KERNELS ? dmu : q < 2 * TISA_KERNELS ? da : dc;
    d[(q % TISA_KERNELS) * NH + h] += s;
}
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) {
    int NH = model->config.num_heads;
    size_t at = (size_t)l * TISA_KERNELS * NH;
    tisa_bias_reduce_kernel<<<CEIL_DIV(NH * PE_PAR_N, 128), 128, 0, ctx.stream>>>(model->grads.tisa_mu + at, model->grads.tisa_a + at,
        model->grads.tisa_c + at, pb->partials, B, NH, CEIL_DIV(model->seq_len, ATT_KV_BK));
    cudaCheckLaunch("tisa_bias_reduce_kernel");
}

#elif PE_PART == PE_PART_REF

// the official module's score of offset r = i - j - 1, written again in double, and its
// gradient in the head's three parameters of each kernel
#define PE_REF_POS_BIAS
#define PE_REF_POS_BIAS_GRAD
static double pe_ref_pos_bias(const PERef* r, int h, int i, int j) {
    double sum = 0;
    for (int k = 0; k < 5; k++) {
        int at = k * r->NH + h;
        double d = PE_AT(r->par, TISA_MU)[at] - (i - j - 1);
        sum += PE_AT(r->par, TISA_A)[at] * exp(-fabs(PE_AT(r->par, TISA_C)[at]) * d * d);
    }
    return sum;
}
static void pe_ref_pos_bias_grad(const PERef* r, int h, int i, int j, double ds, double* const* d) {
    for (int k = 0; k < 5; k++) {
        int at = k * r->NH + h;
        double a = PE_AT(r->par, TISA_A)[at], c = PE_AT(r->par, TISA_C)[at], x = PE_AT(r->par, TISA_MU)[at] - (i - j - 1);
        double e = exp(-fabs(c) * x * x);
        PE_AT(d, TISA_MU)[at] += ds * a * e * (-2 * fabs(c) * x);
        PE_AT(d, TISA_A)[at] += ds * e;
        PE_AT(d, TISA_C)[at] += ds * a * e * (-x * x) * (c > 0 ? 1 : c < 0 ? -1 : 0);
    }
}

#elif PE_PART == PE_PART_TEST

// the gradient check's parameters: offsets within the tests' distances (0 .. T - 1), so that
// every basis function has weight in the scores (the initialization's N(0, 25) puts some far
// outside a short sequence, where their gradients vanish)
#define PE_TEST_PARAMS
static void pe_test_params(GPT2* model, uint64_t* rng) {
    size_t n = model->param_sizes[P_TISA_MU];
    for (size_t e = 0; e < n; e++) { model->params.tisa_mu[e] = (real)(12.0 * random_f32(rng) - 1.0); }
}

// a = 0: no bias, the attention of nope
#define PE_TESTS
static void pe_tests(void) {
    printf("identity: tisa with every amplitude 0 is nope\n");
    int B = 2, T = 24;
    int x[48], y[48];
    GPT2 model;
    tiny_model_batch(&model, T, 3, 4, x, y, B, T);
    memset(model.params.tisa_a, 0, model.param_sizes[P_TISA_A] * sizeof(real));
    gpt2_forward(&model, x, y, B, T, 1); // training: every layer's activations kept
    double worst = 0;
    for (int l = 0; l < model.config.num_layers; l++) { worst = fmax(worst, attention_vs_reference(&model, l, no_bias, B, T)); }
    check(worst < 1e-6, "every layer's attention against causal attention without a bias", worst, 1e-6);
    gpt2_free(&model);
}

#endif
