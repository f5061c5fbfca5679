/*
CABLE (the method at the centre of this project; papers/cable-v1.md, cable-v2.txt) and its
variants, one family: each token adds a learned, context-dependent increment per head,
d_t = -g(x_t W_b + b_b) (x = the attention block's input after ln_1), S_t = d_1 + ... + d_t
(S in full precision: bf16 cannot hold a sum of 16k increments), and the bias is made of S:

    cable_v1  g = softplus   b(i, j) = S_i - S_j          (the released code)
    cable_nw  g = ReLU       b(i, j) = S_i - S_j          (CABLE v2 without weights)
    cable     g = ReLU       b(i, j) = w_i (S_i - S_j),   w_i = x_i W_w + b_w (CABLE v2)
    kcable    g = ReLU       b(i, j) = -log(1 + (S_i - S_j)^2)   (kernelized)

With every increment equal to -m the bias is ALiBi's -m (i - j). Initialized so that at
step 0 every increment is softplus(0) = log 2 and w = 1, the released code's starting
point: W_b, W_w ~ N(0, 0.02), b_b = 0 (cable_v1) or log 2 (the ReLU variants), b_w = 1.
A term that depends only on the query row (S_i, w_i S_i) cancels in the softmax. In the
backward pass the attention turns the score gradients into dS (column and row sums) and,
for cable, dw (row sums); pe_layer_backward then runs the reverse cumulative sum and the
two small linear layers backward.
*/
#if PE_PART == PE_PART_DEFINITION

#define CABLE_INIT_INCREMENT 0.69314718f // softplus(0) = log 2

#if PE_IS(CABLE)
#define PE_TENSORS(X) \
    X(CABLE_WB, cable_wb, 1, L * NH * C, fill_normal(p, n, 0.02f, rng)) \
    X(CABLE_BB, cable_bb, 0, L * NH,     fill_const(p, n, CABLE_INIT_INCREMENT)) \
    X(CABLE_WW, cable_ww, 1, L * NH * C, fill_normal(p, n, 0.02f, rng)) \
    X(CABLE_BW, cable_bw, 0, L * NH,     fill_const(p, n, 1.0f))
#define PE_TOKEN_ACTS 3 // per layer, token and head: the increment's pre-activation a, S, w
#else
#define PE_TENSORS(X) \
    X(CABLE_WB, cable_wb, 1, L * NH * C, fill_normal(p, n, 0.02f, rng)) \
    X(CABLE_BB, cable_bb, 0, L * NH,     fill_const(p, n, PE_IS(CABLE_V1) ? 0.0f : CABLE_INIT_INCREMENT))
#define PE_TOKEN_ACTS 2 // a and S
#endif

// g(a), the (positive) size of the step, and g'(a)
PE_FN real cable_increment(real a) {
#if PE_IS(CABLE_V1)
    return a > 20 ? a : log1p(exp(a));
#else
    return a > 0 ? a : 0;
#endif
}
PE_FN real cable_increment_grad(real a) {
#if PE_IS(CABLE_V1)
    return 1 / (1 + exp(-a));
#else
    return a > 0 ? 1 : 0;
#endif
}

#elif PE_PART == PE_PART_CPU

#define PE_LAYER
#define PE_BIAS
#define PE_BIAS_GRAD
typedef struct { const real* S; const real* w; real* dS; real* dw; int T; int NH; } PEBias;
typedef struct { int b, h, i; } PERow;

static void pe_layer_forward(GPT2* model, int l, int B, int T) {
    GPT2Config* cfg = &model->config;
    int C = cfg->channels, NH = cfg->num_heads;
    size_t N = model->acts_N, slot = layer_slot(model, l);
    const real* ln1 = model->acts.t.ln1 + slot * N * C;
    real* a = model->acts.t.pe_a + slot * N * NH;
    real* S = model->acts.t.pe_s + slot * N * NH;
    matmul_forward(a, ln1, model->params.cable_wb + (size_t)l * NH * C, model->params.cable_bb + (size_t)l * NH, B * T, C, NH);
#if PE_IS(CABLE)
    real* w = model->acts.t.pe_w + slot * N * NH;
    matmul_forward(w, ln1, model->params.cable_ww + (size_t)l * NH * C, model->params.cable_bw + (size_t)l * NH, B * T, C, NH);
#endif
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            real s = 0;
            for (int t = 0; t < T; t++) {
                size_t idx = ((size_t)b * T + t) * NH + h;
                s -= cable_increment(a[idx]);
                S[idx] = s;
            }
        }
    }
}

static void pe_layer_backward(GPT2* model, int l, int B, int T) {
    GPT2Config* cfg = &model->config;
    int C = cfg->channels, NH = cfg->num_heads;
    size_t N = model->acts_N;
    const real* ln1 = model->acts.t.ln1 + (size_t)l * N * C;
    const real* a = model->acts.t.pe_a + (size_t)l * N * NH;
    real* dS = model->grads_acts.t.pe_s + (size_t)l * N * NH;
    real* da = model->grads_acts.t.pe_a + (size_t)l * N * NH;
    real* dln1 = model->grads_acts.t.ln1 + (size_t)l * N * C;
    // S_t = -sum_{k<=t} g(a_k): dL/da_k = -g'(a_k) * sum_{t>=k} dL/dS_t (a reverse cumulative sum)
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            real acc = 0;
            for (int t = T - 1; t >= 0; t--) {
                size_t idx = ((size_t)b * T + t) * NH + h;
                acc += dS[idx];
                da[idx] = -cable_increment_grad(a[idx]) * acc;
            }
        }
    }
    matmul_backward(dln1, model->grads.cable_wb + (size_t)l * NH * C, model->grads.cable_bb + (size_t)l * NH,
                    da, ln1, model->params.cable_wb + (size_t)l * NH * C, B * T, C, NH);
#if PE_IS(CABLE)
    real* dw = model->grads_acts.t.pe_w + (size_t)l * N * NH;
    matmul_backward(dln1, model->grads.cable_ww + (size_t)l * NH * C, model->grads.cable_bw + (size_t)l * NH,
                    dw, ln1, model->params.cable_ww + (size_t)l * NH * C, B * T, C, NH);
#endif
}

static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    size_t N = model->acts_N, slot = layer_slot(model, l);
    pb->T = T;
    pb->NH = NH;
    pb->S = model->acts.t.pe_s + slot * N * NH;
    pb->w = model->acts.t.pe_w + slot * N * NH;
    pb->dS = backward ? model->grads_acts.t.pe_s + (size_t)l * N * NH : NULL;
    pb->dw = backward ? model->grads_acts.t.pe_w + (size_t)l * N * NH : NULL;
}
static inline PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { PERow r = {b, h, i}; return r; }
static inline real pe_bias(const PEBias* pb, const PERow* r, int j) {
    int h = r->h, i = r->i;
    size_t row = (size_t)r->b * pb->T;
    real diff = pb->S[(row + i) * pb->NH + h] - pb->S[(row + j) * pb->NH + h];
#if PE_IS(CABLE)
    return pb->w[(row + i) * pb->NH + h] * diff;
#elif PE_IS(KCABLE)
    return -log(1 + diff * diff);
#else
    return diff;
#endif
}
static inline void pe_bias_backward(PEBias* pb, int slot, const PERow* r, int j, real ds) {
    int h = r->h, i = r->i; // (the CABLE family is no base of DAPE: the slot is the row b)
    size_t row = (size_t)r->b * pb->T;
    size_t si = (row + i) * pb->NH + h, sj = (row + j) * pb->NH + h;
#if PE_IS(CABLE)
    real diff = pb->S[si] - pb->S[sj];
    pb->dw[si] += ds * diff;
    ds *= pb->w[si];
#elif PE_IS(KCABLE)
    real diff = pb->S[si] - pb->S[sj];
    ds *= -2 * diff / (1 + diff * diff);
#endif
    pb->dS[si] += ds;
    pb->dS[sj] -= ds;
}

#elif PE_PART == PE_PART_CUDA

// S (and a, w) stay in fp32. In the backward pass the attention kernels turn the score
// gradients into dS: the dq pass writes the row sums (and, for cable, dw), the dk/dv pass
// subtracts the column sums; pe_layer_backward then runs the reverse cumulative sum and
// the two small linear layers backward.
// In the kernels, PERow keeps S_i, w_i and the (b, h) column of S. For cable, cable_nw and
// cable_v1 the row's constant w_i S_i (S_i) cancels in the softmax and is left out
// (r->shift): pe_bias is -w_i S_j, one multiply-add with the score. In the backward the
// row side of dS, w_i sum_j ds_ij, is zero in exact arithmetic (the same softmax
// invariance) and is left out too, so only kcable has a row part of dS; cable's
// dw_i = sum_j ds_ij (S_i - S_j) is a row sum, kept in the difference form (its terms are
// small where ds is large).
#define PE_LAYER
#define PE_BIAS
#define PE_BIAS_GRAD
#define PE_PAR_N 0
#define PE_LAYER_DLN1 1 // pe_layer_backward writes dln1 first (the qkv backward adds to it)
#define CABLE_SCAN_THREADS 256
struct PEGrad { float dS; float dw; };
struct PEBias { const float* S; const float* w; float* dS; float* dw; int T; int NH; };
struct PERow { const float* S; float Si, wi, shift; }; // S: the (b, h) column of S (stride NH)

// cable_scan_forward_kernel: one block per (b, h), each thread a segment of the T tokens:
// adds the small layers' biases, then S_t = -(g(a_1) + ... + g(a_t)) in fp32 as a parallel
// scan (the segments' sums, their exclusive prefix sum over the block, the segments again)
__global__ void __launch_bounds__(CABLE_SCAN_THREADS)
cable_scan_forward_kernel(float* a, float* S, float* w, const floatX* bb, const floatX* bw, int T, int NH) {
    int b = blockIdx.x / NH, h = blockIdx.x % NH;
    int per = CEIL_DIV(T, CABLE_SCAN_THREADS);
    int t0 = min(T, (int)threadIdx.x * per), t1 = min(T, t0 + per);
    size_t base = (size_t)b * T * NH + h;
    float bias_a = (float)bb[h], local = 0.0f;
    for (int t = t0; t < t1; t++) {
        size_t idx = base + (size_t)t * NH;
        float x = a[idx] + bias_a;
        a[idx] = x;
        S[idx] = cable_increment(x); // the increment, until the second pass
        local += S[idx];
    }
    float total;
    float s = -block_exclusive_sum(local, &total);
    for (int t = t0; t < t1; t++) {
        size_t idx = base + (size_t)t * NH;
        s -= S[idx];
        S[idx] = s;
    }
#if PE_IS(CABLE)
    float bias_w = (float)bw[h];
    for (int t = t0; t < t1; t++) { w[base + (size_t)t * NH] += bias_w; }
#endif
}

// cable_scan_backward_kernel: one block per (b, h), a segment of tokens per thread: the
// reverse cumulative sum dL/da_t = -g'(a_t) * sum_{t' >= t} dL/dS_t' (the segments' sums,
// the sum of the segments after each, the segments again backwards), written as a matmul input
__global__ void __launch_bounds__(CABLE_SCAN_THREADS)
cable_scan_backward_kernel(floatX* da, const float* dS, const float* a, int T, int NH) {
    int b = blockIdx.x / NH, h = blockIdx.x % NH;
    int per = CEIL_DIV(T, CABLE_SCAN_THREADS);
    int t0 = min(T, (int)threadIdx.x * per), t1 = min(T, t0 + per);
    size_t base = (size_t)b * T * NH + h;
    float local = 0.0f;
    for (int t = t0; t < t1; t++) { local += dS[base + (size_t)t * NH]; }
    float total;
    float before = block_exclusive_sum(local, &total);
    float acc = total - before - local; // the segments after this one
    for (int t = t1 - 1; t >= t0; t--) {
        size_t idx = base + (size_t)t * NH;
        acc += dS[idx];
        da[idx] = (floatX)(-cable_increment_grad(a[idx]) * acc);
    }
}

static void pe_layer_forward(GPT2* model, int l, int B, int T) {
    GPT2Config* cfg = &model->config;
    int C = cfg->channels, NH = cfg->num_heads;
    size_t slot = layer_slot(model, l);
    const floatX* ln1 = model->acts.ln1 + slot * model->acts_N * C;
    float* a = model->acts.pe_a + slot * model->pe_stride;
    float* S = model->acts.pe_s + slot * model->pe_stride;
    float* w = model->acts.pe_w + slot * model->pe_stride;
    const floatX* bw = NULL; // cable's weight layer's bias (the others have none)
    matmul_cublaslt(a, 1, model->params.cable_wb + (size_t)l * NH * C, ln1, NULL, NH, B * T, C, 1, 0, 0, NULL);
#if PE_IS(CABLE)
    matmul_cublaslt(w, 1, model->params.cable_ww + (size_t)l * NH * C, ln1, NULL, NH, B * T, C, 1, 0, 0, NULL);
    bw = model->params.cable_bw + (size_t)l * NH;
#endif
    cable_scan_forward_kernel<<<B * NH, CABLE_SCAN_THREADS, 0, ctx.stream>>>(a, S, w, model->params.cable_bb + (size_t)l * NH, bw, T, NH);
    cudaCheckLaunch("cable_scan_forward_kernel");
}

static void pe_layer_backward(GPT2* model, int l, int B, int T) {
    GPT2Config* cfg = &model->config;
    int C = cfg->channels, NH = cfg->num_heads;
    const floatX* ln1 = model->acts.ln1 + (size_t)l * model->acts_N * C;
    const float* a = model->acts.pe_a + (size_t)l * model->pe_stride;
    GradScratch* gs = &model->gs;
    cable_scan_backward_kernel<<<B * NH, CABLE_SCAN_THREADS, 0, ctx.stream>>>(gs->pe_dx, gs->pe_dS, a, T, NH);
    cudaCheckLaunch("cable_scan_backward_kernel");
    // dln1 is written here first (the qkv backward adds to it: PE_LAYER_DLN1)
    matmul_backward(gs->dsmall, model->grads.cable_wb + (size_t)l * NH * C, model->grads.cable_bb + (size_t)l * NH,
                    model->partials, gs->pe_dx, ln1, model->params.cable_wb + (size_t)l * NH * C, B * T, C, NH, 0);
#if PE_IS(CABLE)
    floatX_from_float(gs->pe_dx, gs->pe_dw, (size_t)B * T * NH);
    matmul_backward(gs->dsmall, model->grads.cable_ww + (size_t)l * NH * C, model->grads.cable_bw + (size_t)l * NH,
                    model->partials, gs->pe_dx, ln1, model->params.cable_ww + (size_t)l * NH * C, B * T, C, NH, 1);
#endif
}

static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    size_t slot = layer_slot(model, l);
    pb->T = T;
    pb->NH = model->config.num_heads;
    pb->S = model->acts.pe_s + slot * model->pe_stride;
    pb->w = model->acts.pe_w != NULL ? model->acts.pe_w + slot * model->pe_stride : NULL;
    pb->dS = backward ? model->gs.pe_dS : NULL;
    pb->dw = backward ? model->gs.pe_dw : NULL;
}
__device__ __forceinline__ PERow pe_bias_row(const PEBias* pb, int b, int h, int i) {
    const float* S = pb->S + (size_t)b * pb->T * pb->NH + h;
    float Si = S[(size_t)i * pb->NH];
#if PE_IS(CABLE)
    float wi = pb->w[((size_t)b * pb->T + i) * pb->NH + h];
    return {S, Si, wi, wi * Si};
#elif PE_IS(KCABLE)
    return {S, Si, 1.0f, 0.0f};
#else
    return {S, Si, 1.0f, Si};
#endif
}
// b(i, j) - r->shift: -w_i S_j (cable), -S_j (cable_nw, cable_v1), -log(1 + (S_i - S_j)^2) (kcable)
__device__ __forceinline__ float pe_bias(const PEBias* pb, const PERow* r, int j) {
    float Sj = r->S[(size_t)j * pb->NH];
#if PE_IS(KCABLE)
    float diff = r->Si - Sj;
    return -logf(1.0f + diff * diff);
#else
    return -r->wi * Sj;
#endif
}
// row side: dw_i += ds (S_i - S_j) (cable), dS_i += ds k'(S_i - S_j) (kcable, k(x) = -log(1 + x^2));
// column side: dS_j -= ds db/d(S_i - S_j) (w_i, 1, or k')
__device__ __forceinline__ void pe_bias_backward(const PEBias* pb, PEGrad* g, int side, const PERow* r, int j, float ds) {
#if PE_IS(CABLE)
    float diff = r->Si - r->S[(size_t)j * pb->NH];
    if (side == PE_SIDE_ROW) { g->dw += ds * diff; } else { g->dS -= ds * r->wi; }
#elif PE_IS(KCABLE)
    float diff = r->Si - r->S[(size_t)j * pb->NH];
    float d = ds * (-2.0f * diff / (1.0f + diff * diff));
    if (side == PE_SIDE_ROW) { g->dS += d; } else { g->dS -= d; }
#else
    if (side == PE_SIDE_COL) { g->dS -= ds; }
#endif
}
// the dq pass writes dS (and dw) of its query tokens; the dk/dv pass, which runs after it,
// adds the column part to dS of its key tokens
__device__ __forceinline__ void pe_bias_flush(const PEBias* pb, PEGrad* g, int side, int b, int h, int t, bool valid, int slot) {
    if (!valid) { return; }
    size_t idx = ((size_t)b * pb->T + t) * pb->NH + h;
    if (side == PE_SIDE_ROW) {
        pb->dS[idx] = g->dS;
#if PE_IS(CABLE)
        pb->dw[idx] = g->dw;
#endif
    } else {
        pb->dS[idx] += g->dS;
    }
}

#elif PE_PART == PE_PART_TEST

// S of head h at layer l, row b, position t, recomputed from ln1
static double ref_cable_S(GPT2* model, int l, int b, int h, int t, int T) {
    int C = model->config.channels, NH = model->config.num_heads;
    const real* W = model->params.cable_wb + ((size_t)l * NH + h) * C;
    double S = 0;
    for (int k = 0; k <= t; k++) {
        const real* x = model->acts.t.ln1 + ((size_t)l * model->acts_N + (size_t)b * T + k) * C;
        double a = model->params.cable_bb[l * NH + h];
        for (int c = 0; c < C; c++) { a += x[c] * W[c]; }
#if PE_IS(CABLE_V1)
        double inc = log(1 + exp(a));
#else
        double inc = a > 0 ? a : 0;
#endif
        S -= inc;
    }
    return S;
}

#define PE_REF_BIAS
static double pe_ref_bias(GPT2* model, int l, int b, int h, int i, int j, int T) {
    double d = ref_cable_S(model, l, b, h, i, T) - ref_cable_S(model, l, b, h, j, T);
#if PE_IS(CABLE)
    int C = model->config.channels, NH = model->config.num_heads;
    const real* x = model->acts.t.ln1 + ((size_t)l * model->acts_N + (size_t)b * T + i) * C;
    double w = model->params.cable_bw[l * NH + h];
    for (int c = 0; c < C; c++) { w += x[c] * model->params.cable_ww[((size_t)l * NH + h) * C + c]; }
    return w * d;
#elif PE_IS(KCABLE)
    return -log(1 + d * d);
#else
    return d;
#endif
}

#if PE_IS(CABLE_NW)
static double alibi_bias_of_this_model(GPT2* model, int l, int b, int h, int i, int j, int T) {
    float slopes[64];
    alibi_slopes(slopes, model->config.num_heads);
    return -(double)slopes[h] * (i - j);
}
#endif
#if PE_IS(CABLE)
static double cable_nw_bias(GPT2* model, int l, int b, int h, int i, int j, int T) {
    return ref_cable_S(model, l, b, h, i, T) - ref_cable_S(model, l, b, h, j, T);
}
#endif

#if PE_IS(CABLE_NW) || PE_IS(CABLE)
// cable_nw with every increment forced to m_h is ALiBi with slopes m_h; cable with w = 1 is cable_nw
#define PE_TESTS
static void pe_tests(void) {
    int B = 2, T = 24;
    GPT2 model;
    int x[48], y[48];
    tiny_model_batch(&model, T, 3, 5, x, y, B, T);
    int NH = model.config.num_heads, L = model.config.num_layers, C = model.config.channels;
#if PE_IS(CABLE_NW)
    printf("identity: cable_nw with every increment forced to m_h is ALiBi with slopes m_h\n");
    float slopes[64];
    alibi_slopes(slopes, NH);
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < NH; h++) {
            for (int c = 0; c < C; c++) { model.params.cable_wb[((size_t)l * NH + h) * C + c] = 0; }
            model.params.cable_bb[l * NH + h] = slopes[h];
        }
    }
    gpt2_forward(&model, x, y, B, T, 1);
    for (int l = 0; l < L; l++) {
        double d = attention_vs_reference(&model, l, alibi_bias_of_this_model, B, T);
        check(d < 1e-5, "attention equals ALiBi's", d, 1e-5);
    }
#else
    printf("identity: cable with w = 1 is cable_nw\n");
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < NH; h++) {
            for (int c = 0; c < C; c++) { model.params.cable_ww[((size_t)l * NH + h) * C + c] = 0; }
            model.params.cable_bw[l * NH + h] = 1;
        }
    }
    gpt2_forward(&model, x, y, B, T, 1);
    for (int l = 0; l < L; l++) {
        double d = attention_vs_reference(&model, l, cable_nw_bias, B, T);
        check(d < 1e-5, "attention equals cable_nw's", d, 1e-5);
    }
#endif
    gpt2_free(&model);
}
#endif

#endif
