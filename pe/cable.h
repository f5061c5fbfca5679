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

#endif
