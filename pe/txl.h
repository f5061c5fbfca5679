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

#elif PE_PART == PE_PART_CUDA

// Its second term depends on q_i, so on the GPU it is no bias b(i, j): its own kernels
// (llmc/attention_txl.cuh, fp32 on CUDA cores in both builds) read the rows of P a tile
// needs. Each layer's attention first computes P (R, computed in double on the host and
// grown as longer sequences come, times W_r^T: one matmul); the backward turns dP into
// dW_r = dP^T R and sums the dq pass's partials into dr_w and dr_r.
#include "../llmc/attention_txl.cuh"
#define PE_ATTENTION
#define PE_REL_BUFFERS 1 // acts.pe_rel, P of the layer, and gs.pe_drel, dL/dP: (T, C) each
// the backward's scratch in floats: the dq pass's partials, dr_w and dr_r of a head per
// (b, h, query block)
static size_t pe_attention_scratch(const GPT2Config* cfg, int B, int T, int training) {
    return (size_t)txl_q_blocks(B, T, cfg->num_heads) * 2 * (cfg->channels / cfg->num_heads);
}
// layer l's txl as the kernels see it, after computing its P for T positions
static TxlArgs txl_layer(GPT2* model, int l, int T) {
    int C = model->config.channels;
    if (model->pe_rel_len < T) { // R_n for n < T
        floatX* host = (floatX*)malloc_check((size_t)T * C * sizeof(floatX));
        for (int n = 0; n < T; n++) {
            for (int k = 0; k < C / 2; k++) {
                double angle = txl_angle(n, k, C);
                host[(size_t)n * C + k] = (floatX)(float)sin(angle);
                host[(size_t)n * C + C / 2 + k] = (floatX)(float)cos(angle);
            }
        }
        pe_table_upload((void**)&model->pe_rel_table, host, (size_t)T * C * sizeof(floatX), "the txl sinusoids");
        free(host);
        model->pe_rel_len = T;
    }
    matmul_forward(model->acts.pe_rel, model->pe_rel_table, model->params.txl_wr + (size_t)l * C * C, NULL, T, C, C, NULL);
    TxlArgs a;
    a.P = model->acts.pe_rel;
    a.rw = model->params.txl_rw + (size_t)l * C;
    a.rr = model->params.txl_rr + (size_t)l * C;
    a.dP = model->gs.pe_drel;
    a.partials = model->gs.pe_scratch;
    return a;
}
static void pe_attention_forward(GPT2* model, int l, floatX* out, float* lse, const floatX* qkv, int B, int T) {
    const GPT2Config* cfg = &model->config;
    txl_attention_forward(out, lse, qkv, txl_layer(model, l, T), B, T, cfg->num_heads, cfg->channels / cfg->num_heads,
                          ctx.prop.sharedMemPerBlockOptin, ctx.stream);
}
// txl_bias_reduce_kernel: one thread per (head, dimension) of r_w and r_r sums the dq pass's
// partials over the batch and the query blocks
__global__ void txl_bias_reduce_kernel(float* drw, float* drr, const float* partials, int B, int NH, int HS, int blocks) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= NH * HS) { return; }
    int h = idx / HS, d = idx % HS;
    float sw = 0.0f, sr = 0.0f;
    for (int b = 0; b < B; b++) {
        for (int qb = 0; qb < blocks; qb++) {
            const float* part = partials + (((size_t)b * NH + h) * blocks + qb) * 2 * HS;
            sw += part[d];
            sr += part[HS + d];
        }
    }
    drw[idx] += sw;
    drr[idx] += sr;
}
// dqkv written in full; dW_r, dr_w and dr_r of layer l added (P recomputed first)
static void pe_attention_backward(GPT2* model, int l, floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                                  const float* lse, int B, int T) {
    int C = model->config.channels, NH = model->config.num_heads;
    TxlArgs a = txl_layer(model, l, T);
    txl_attention_backward(dqkv, model->gs.att_D, dout, qkv, out, lse, a, B, T, NH, C / NH, ctx.prop.sharedMemPerBlockOptin, ctx.stream);
    // P = R W_r^T: dW_r += dP^T R
    matmul_backward(NULL, model->grads.txl_wr + (size_t)l * C * C, NULL, NULL, a.dP, model->pe_rel_table, NULL, T, C, C, 0);
    txl_bias_reduce_kernel<<<CEIL_DIV(C, 256), 256, 0, ctx.stream>>>(model->grads.txl_rw + (size_t)l * C, model->grads.txl_rr + (size_t)l * C,
                                                                      a.partials, B, NH, C / NH, CEIL_DIV(T, ATT_BQ));
    cudaCheckLaunch("txl_bias_reduce_kernel");
}

#elif PE_PART == PE_PART_TEST

// Transformer-XL as the DAPE repository's RelativePositionalEncodingLayer computes it
// (positional_embeddings.py:758-789), for row b, head h of layer l, on T x T matrices:
// AC[i][j] = (q_i + r_w) . k_j; BDraw[i][j'] = (q_i + r_r) . (W_r R(T - 1 - j'))_h with
// pos_seq = T-1, ..., 0 and R(n) = [sin(n w), cos(n w)], w_k = 1 / 10000^(2k/C); then
// _rel_shift (:743-756): a zero column prepended, the (T, T + 1) matrix viewed as
// (T + 1, T), its first row dropped, viewed as (T, T). Returns (AC + BD) / sqrt(hs) at (i, j).
static double ref_txl_score(GPT2* model, int l, int b, int h, int i, int j, int T) {
    int C = model->config.channels, NH = model->config.num_heads, hs = C / NH;
    const real* qkv = model->acts.t.qkv + (size_t)l * model->acts_N * 3 * C;
    const real* q = qkv + ((size_t)b * T + i) * 3 * C + h * hs;
    const real* rw = model->params.txl_rw + (size_t)l * C + h * hs;
    const real* rr = model->params.txl_rr + (size_t)l * C + h * hs;
    double ac = 0;
    for (int c = 0; c < hs; c++) { ac += (q[c] + rw[c]) * qkv[((size_t)b * T + j) * 3 * C + C + h * hs + c]; }
    // the shifted matrix's (i, j) is the padded matrix's element at flat index T + i T + j
    size_t f = (size_t)T + (size_t)i * T + j;
    size_t pr = f / (T + 1), pc = f % (T + 1);
    double bd = 0;
    if (pc > 0) { // column 0 is the zero pad
        const real* qr = qkv + ((size_t)b * T + pr) * 3 * C + h * hs;
        double n = T - 1 - (double)(pc - 1); // pos_seq[j'] at j' = pc - 1
        for (int o = 0; o < hs; o++) {
            const real* W = model->params.txl_wr + ((size_t)l * C + h * hs + o) * C;
            double r = 0;
            for (int k = 0; k < C / 2; k++) {
                double inv_freq = 1 / pow(10000.0, 2.0 * k / C);
                r += W[k] * sin(n * inv_freq) + W[C / 2 + k] * cos(n * inv_freq);
            }
            bd += (qr[o] + rr[o]) * r;
        }
    }
    return (ac + bd) / sqrt((double)hs);
}

// the bias: the score less the q_i . k_j / sqrt(hs) that the attention adds itself
#define PE_REF_BIAS
static double pe_ref_bias(GPT2* model, int l, int b, int h, int i, int j, int T) {
    int C = model->config.channels, NH = model->config.num_heads, hs = C / NH;
    const real* qkv = model->acts.t.qkv + (size_t)l * model->acts_N * 3 * C;
    double qk = 0;
    for (int c = 0; c < hs; c++) { qk += qkv[((size_t)b * T + i) * 3 * C + h * hs + c] * qkv[((size_t)b * T + j) * 3 * C + C + h * hs + c]; }
    return ref_txl_score(model, l, b, h, i, j, T) - qk / sqrt((double)hs);
}

#endif
