/*
txl: Transformer-XL's relative encoding (Dai et al. 2019) as the DAPE repository computes
it (its RelativePositionalEncodingLayer, with the layer's 1/sqrt(hs)): the scores of head
h are

    s_ij = ((q_i + r_w) . k_j + (q_i + r_r) . P_h[i - j]) / sqrt(hs)

with r_w, r_r learned per layer and head (hs values each, N(0, 0.02)), and P[n] = W_r R_n
the projection (W_r: C x C, no bias, per layer, PyTorch's default Linear init) of the
sinusoids of distance n, R_n[k] = sin(n w_k), R_n[C/2 + k] = cos(n w_k), w_k =
10000^(-2k/C) over the model's width C; P_h is head h's hs columns of P. No position
embedding. The official code computes the second term for every (i, key) as a T x T matrix
and moves row i's entries into place with a rel-shift; here row i - j of P (T x C,
recomputed per layer from W_r) is read directly.

Its kind is ATTN: the CUDA path runs its own kernels (llmc/attention_txl.cuh); the CPU path
writes it as a bias that reads q_i and k_j from the layer's qkv (the attention's own
q_i . k_j / sqrt(hs) is the first term's; the positions are the tokens': txl takes no -rp):

    b(i, j) = (r_w . k_j + (q_i + r_r) . P_h[i - j]) / sqrt(hs)

Backward, with g = ds_ij / sqrt(hs): dk_j += g r_w, dq_i += g P_h[i - j], dP_h[i - j] +=
g (q_i + r_r), dr_w += g k_j, dr_r += g P_h[i - j], into per-batch-row buffers (pe_drel:
each (b, h) is one thread's); pe_bias_reduce sums them over the batch and turns dP into
dW_r = dP^T R.
*/
#if PE_PART == PE_PART_DEFINITION

#define PE_TENSORS(X) \
    X(TXL_WR, txl_wr, 1, L * C * C, fill_uniform(p, n, -1.0f / sqrtf((float)cfg->channels), 1.0f / sqrtf((float)cfg->channels), rng)) \
    X(TXL_RW, txl_rw, 1, L * C,     fill_normal(p, n, 0.02f, rng)) \
    X(TXL_RR, txl_rr, 1, L * C,     fill_normal(p, n, 0.02f, rng))

#define PE_CONFIG_CHECK
static void pe_config_check(const GPT2Config* c, const char* what) {
    if (c->channels % 2 != 0) { fatal("%s: txl needs an even number of channels, got %d", what, c->channels); } // C/2 sinusoid pairs
}

// the angle of R_n's sinusoid k < C/2 (in double in both paths)
PE_FN double txl_angle(int n, int k, int C) { return n * pow(10000.0, -2.0 * k / C); }

#elif PE_PART == PE_PART_CPU

// the layer's projected sinusoids P (T, C), and per batch row dP (T, C) then dr_w, dr_r (C each)
#define PE_ALLOC_ACTIVATIONS
static void pe_alloc_activations(GPT2* model, int B, int T, int training) {
    size_t C = model->config.channels;
    model->pe_rel = (real*)malloc_check((size_t)T * C * sizeof(real));
    model->pe_drel = training ? (real*)malloc_check((size_t)B * (T + 2) * C * sizeof(real)) : NULL;
}

#define PE_BIAS
#define PE_BIAS_GRAD
typedef struct {
    const real* qkv; real* dqkv; const real* P; real* dP; const real* rw; const real* rr;
    int T, C, hs; real scale;
} PEBias;
typedef struct { int b, h, i; } PERow;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int C = model->config.channels, NH = model->config.num_heads;
    if (model->pe_table_len < T) { // R_n for n < T, computed in double
        free(model->pe_table);
        model->pe_table = (real*)malloc_check((size_t)T * C * sizeof(real));
        for (int n = 0; n < T; n++) {
            for (int k = 0; k < C / 2; k++) {
                double angle = txl_angle(n, k, C);
                model->pe_table[(size_t)n * C + k] = (real)sin(angle);
                model->pe_table[(size_t)n * C + C / 2 + k] = (real)cos(angle);
            }
        }
        model->pe_table_len = T;
    }
    matmul_forward(model->pe_rel, model->pe_table, model->params.txl_wr + (size_t)l * C * C, NULL, T, C, C);
    pb->qkv = model->acts.t.qkv + layer_slot(model, l) * model->acts_N * 3 * C;
    pb->dqkv = backward ? model->grads_acts.t.qkv + (size_t)l * model->acts_N * 3 * C : NULL;
    pb->P = model->pe_rel;
    pb->dP = backward ? model->pe_drel : NULL;
    pb->rw = model->params.txl_rw + (size_t)l * C;
    pb->rr = model->params.txl_rr + (size_t)l * C;
    pb->T = T;
    pb->C = C;
    pb->hs = C / NH;
    pb->scale = 1 / sqrt((real)pb->hs);
    if (backward) { memset(pb->dP, 0, (size_t)B * (T + 2) * C * sizeof(real)); }
}
static inline PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { PERow r = {b, h, i}; return r; }
static inline real pe_bias(const PEBias* pb, const PERow* r, int j) {
    int b = r->b, h = r->h, i = r->i;
    const real* q = pb->qkv + ((size_t)b * pb->T + i) * 3 * pb->C + h * pb->hs;
    const real* k = pb->qkv + ((size_t)b * pb->T + j) * 3 * pb->C + pb->C + h * pb->hs;
    const real* p = pb->P + (size_t)(i - j) * pb->C + h * pb->hs;
    const real* rw = pb->rw + h * pb->hs;
    const real* rr = pb->rr + h * pb->hs;
    real s = 0;
    for (int c = 0; c < pb->hs; c++) { s += rw[c] * k[c] + (q[c] + rr[c]) * p[c]; }
    return s * pb->scale;
}
static inline void pe_bias_backward(PEBias* pb, int slot, const PERow* r, int j, real ds) {
    int b = r->b, h = r->h, i = r->i; // (txl is no base of DAPE: the slot is the row b)
    int T = pb->T, C = pb->C, hs = pb->hs;
    real g = ds * pb->scale;
    const real* q = pb->qkv + ((size_t)b * T + i) * 3 * C + h * hs;
    const real* k = pb->qkv + ((size_t)b * T + j) * 3 * C + C + h * hs;
    const real* p = pb->P + (size_t)(i - j) * C + h * hs;
    real* dq = pb->dqkv + ((size_t)b * T + i) * 3 * C + h * hs;
    real* dk = pb->dqkv + ((size_t)b * T + j) * 3 * C + C + h * hs;
    real* dp = pb->dP + ((size_t)b * (T + 2) + i - j) * C + h * hs;
    real* drw = pb->dP + ((size_t)b * (T + 2) + T) * C + h * hs;
    real* drr = drw + C;
    const real* rw = pb->rw + h * hs;
    const real* rr = pb->rr + h * hs;
    for (int c = 0; c < hs; c++) {
        dk[c] += g * rw[c];
        dq[c] += g * p[c];
        dp[c] += g * (q[c] + rr[c]);
        drw[c] += g * k[c];
        drr[c] += g * p[c];
    }
}
#define PE_BIAS_REDUCE
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int slots) {
    int T = pb->T, C = pb->C;
    real* sum = pb->dP; // batch row 0 collects the others
    for (int b = 1; b < slots; b++) {
        const real* d = pb->dP + (size_t)b * (T + 2) * C;
        for (size_t e = 0; e < (size_t)(T + 2) * C; e++) { sum[e] += d[e]; }
    }
    // P = R W_r^T: dW_r += dP^T R
    matmul_backward(NULL, model->grads.txl_wr + (size_t)l * C * C, NULL, sum, model->pe_table, model->params.txl_wr, T, C, C);
    for (int c = 0; c < C; c++) {
        model->grads.txl_rw[(size_t)l * C + c] += sum[(size_t)T * C + c];
        model->grads.txl_rr[(size_t)l * C + c] += sum[(size_t)(T + 1) * C + c];
    }
}

#endif
