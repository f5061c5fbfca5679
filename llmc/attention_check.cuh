/*
The attention kernels alone, forward and backward, against a CPU reference computed
row by row in double from the encodings' definitions (written out again here, not
taken from the trainer): shared by test_gpt2.cu and dev/cuda/attention_bias.cu, which
include train_gpt2.cu first. A one-layer model of the given shape supplies the
encoding's parameters; q, k, v, the output gradient and CABLE's S and w are random.

Compared: the output and the log-sum-exp, dq, dk, dv, and the bias gradients (CABLE's
dS and, for cable, dw; the parameter gradients of every bias with parameters, tensor by
tensor; txl's dP, the gradient of its projected sinusoids, and those of r_w and r_r; shaw's
da^K and da^V: its key term q_i . a^K[r] / sqrt(hs) enters as a bias that reads q_i, its
value term a^V[r] is added to v_j, both written out again here from pe/shaw.h). The
bias of an encoding that is a function of positions (and its parameters) comes from its
file's PE_PART_REF, written again in double from the definition: pe_ref_pos_bias and, for
a bias with parameters (PE_PAR_N > 0, which must have it), its gradient pe_ref_pos_bias_grad
(test_gpt2's gradient check holds that one to central differences of the bias). A shape with rp_len
> 0 runs the bias encodings that have randomized positions (PE_BIAS_OF_POSITIONS), and shaw,
at the trainer's draw of T positions from [0, rp_len), through the trainer's attention of a
layer (attn_case_run_layer: the kernels read the bias at those positions, PEPositions; shaw's
its table rows). The reference
backward uses the kernel's own stored output for D_i = dout_i . out_i, as the kernel
does, so that bf16 rounding of the output does not enter the comparison of gradients
(and, for the same reason, leaves out the row side of dS for the encodings with
b = w_i (S_i - S_j), which is zero for the exact D_i).

CoPE and complex_order, whose attentions are their own (llmc/attention_cope.cuh,
llmc/attention_complex.cuh), have their own cases at the end (cope_case_check,
complex_case_check): their kernels against their definitions written out again in double.
*/
#ifndef LLMC_ATTENTION_CHECK_CUH
#define LLMC_ATTENTION_CHECK_CUH

#include <omp.h>
#include <algorithm>
#include <vector>

#define PE_PART PE_PART_REF
#include "pe_part.h"
#undef PE_PART
// a tensor of the bias that adds one constant to a whole row of scores: its gradient vanishes
// identically (the file's PE_PART_REF names such tensors; none by default)
#ifndef PE_REF_ROW_CONSTANT
#define PE_REF_ROW_CONSTANT(k) 0
#endif
#if PE_KIND == PE_KIND_BIAS && PE_PAR_N > 0 && !defined(PE_REF_POS_BIAS_GRAD)
#error "a bias with parameter gradients (PE_PAR_N) defines pe_ref_pos_bias_grad in its file's PE_PART_REF (docs/adding-an-encoding.md)"
#endif

typedef struct { int B, T, NH, hs, rp_len; } AttnShape; // rp_len: randomized positions from [0, rp_len) (0: none)
// the encodings whose attention the check runs at randomized positions: the biases of
// positions that take them (not BiPE-ALiBi's own), and shaw's own attention of positions; not in
// a DAPE build, whose pe_attention_forward is the base's attention at the indices (DAPE's own
// attention reads the positions, compared with the CPU path by the whole-model tests)
#define ATTN_CASE_POSITIONS ((PE_BIAS_OF_POSITIONS || PE_KIND == PE_KIND_ATTN) && PE_RP && DAPE_ID == 0)

// the dev/cuda checks' tolerances (relative L2 against the reference): out, lse, dq, dk, dv
// (fp32 outputs; bf16 outputs, and P and dS rounded to bf16 in the tensor-core kernels),
// and the bias or encoding parameter gradients, which stay fp32 in both builds
#if defined(ENABLE_FP32)
#define TOL_OUT 1e-4
#else
#define TOL_OUT 1e-2
#endif
#define TOL_PE 1e-3

typedef void (*AttnForwardFn)(floatX* out, float* lse, const floatX* qkv, const PEBias& pb, int B, int T, int NH, int HS,
                              cudaStream_t stream);
typedef void (*AttnBackwardFn)(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out, const float* lse,
                               const PEBias& pb, int B, int T, int NH, int HS, cudaStream_t stream);

// a one-layer model whose layer-0 activations hold random attention inputs, and host
// copies of exactly what the kernels read
typedef struct {
    AttnShape s;
    GPT2 model;
    float* qkv;     // (B, T, 3C) as the kernels see it (rounded to floatX)
    float* dout;    // (B, T, C)
    float* par;     // the parameters as the kernels see them (device layout)
    float* S;       // (B, T, NH) CABLE
    float* w;       // (B, T, NH) cable
    PERef ref;      // the encoding's parameters as PE_PART_REF's reference reads them
    int* pos;       // (T) the tokens' positions (randomized positions), NULL: the indices
    const int* pos_dev; // the model's device copy
    float* P;       // (T, C) txl: the projected sinusoids as the kernels see them
    float* bias;    // (B, NH, span, span) the bias as the encoding's hooks compute it (attn_bias_table)
    int span;       // its positions: T, or the range of randomized positions
} AttnCase;

// the encodings whose reference bias is written out again from the definition: a bias of
// positions (PE_PART_REF), CABLE's (ref_bias below), the other kinds'; any other encoding's
// reference bias is what its own hooks compute, pair by pair (attn_bias_table): the check
// then holds the kernels' use of the bias (tiles, masking, the row's shift, positions), and
// the CPU tests (test_gpt2.c) hold the formula to its definition
#if defined(PE_REF_POS_BIAS) || PE_KIND != PE_KIND_BIAS || PE_IS(CABLE_V1) || PE_IS(CABLE_NW) || PE_IS(CABLE) || PE_IS(KCABLE)
#define ATTN_REF_WRITTEN 1
#else
#define ATTN_REF_WRITTEN 0
#endif

// attn_bias_table_kernel: b(i, j) + the row's shift for every (b, h) and positions j <= i < span
__global__ void attn_bias_table_kernel(float* out, const PEBias pb, int B, int NH, int span) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)B * NH * span * span) { return; }
    int j = idx % span, i = (idx / span) % span, h = (idx / span / span) % NH, b = (int)(idx / span / span / NH);
    PERow r = pe_bias_row(&pb, b, h, i);
    out[idx] = j <= i ? pe_bias(&pb, &r, j) + r.shift : 0.0f;
}

static float* download_floatX(const floatX* src, size_t n) {
    floatX* tmp = (floatX*)malloc_check(n * sizeof(floatX));
    float* out = (float*)malloc_check(n * sizeof(float));
    cudaCheck(cudaMemcpy(tmp, src, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) { out[i] = (float)tmp[i]; }
    free(tmp);
    return out;
}

static float* download_float(const float* src, size_t n) {
    float* out = (float*)malloc_check(n * sizeof(float));
    cudaCheck(cudaMemcpy(out, src, n * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
}

// random normals rounded to floatX, uploaded; returns the rounded host copy
static float* upload_random(floatX* dst, size_t n, float stddev, uint64_t* rng) {
    float* host = (float*)malloc_check(n * sizeof(float));
    floatX* tmp = (floatX*)malloc_check(n * sizeof(floatX));
    for (size_t i = 0; i < n; i++) { tmp[i] = (floatX)(stddev * random_normal(rng)); host[i] = (float)tmp[i]; }
    cudaCheck(cudaMemcpy(dst, tmp, n * sizeof(floatX), cudaMemcpyHostToDevice));
    free(tmp);
    return host;
}

static void attn_case_setup(AttnCase* c, AttnShape s, uint64_t seed) {
    memset(c, 0, sizeof(*c));
    c->s = s;
    GPT2Config cfg = {};
    cfg.num_layers = 1; cfg.num_heads = s.NH; cfg.channels = s.NH * s.hs;
    cfg.vocab_size = 256; cfg.padded_vocab_size = 256; cfg.max_seq_len = s.T; cfg.pe = PE_ID;
    gpt2_config_set_build(&cfg);
#if ATTN_CASE_POSITIONS
    cfg.rp_len = s.rp_len;
    cfg.rp_seed = (int)seed;
#endif
    GPT2* m = &c->model;
    gpt2_build_from_config(m, &cfg, seed);
    // PE parameters with some weight: a T5 table of unit scale, FIRE's threshold inside the
    // sequence (both regimes of max(L, i)), every value moved off its initialization
    uint64_t rng = random_seed(seed + 1);
    float* p = (float*)malloc_check(m->num_parameters * sizeof(float));
    gpt2_download_params(m, p);
    size_t at = 0;
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        for (size_t i = 0; i < m->param_sizes[k]; i++) {
            float* x = p + at + i;
            if (k < P_PE_BEGIN) { continue; }
#if PE_IS(T5)
            *x = random_normal(&rng);
#elif PE_IS(FIRE)
            *x = k == P_FIRE_L ? 0.6f : *x + 0.1f * random_normal(&rng); // L = 0.6 T/2
#elif PE_IS(KERPLE)
            *x = 0.05f + 0.5f * random_f32(&rng);
#elif PE_IS(KERPLE_POWER)
            *x = k == P_KPOWER_A ? 0.05f + 0.5f * random_f32(&rng) : 0.2f + 1.6f * random_f32(&rng);
#else
            *x += 0.1f * random_normal(&rng);
#endif
        }
        at += m->param_sizes[k];
    }
    gpt2_upload_params(m, p);
    free(p);
    gpt2_ensure_activations(m, s.B, s.T, 1);
    gpt2_ensure_grads(m);
    m->batch_size = s.B;
    m->seq_len = s.T;
    int C = s.NH * s.hs;
    size_t N = (size_t)s.B * s.T;
    c->qkv = upload_random(m->acts.qkv, N * 3 * C, 1.0f, &rng);
    c->dout = upload_random(m->gs.dsmall, N * C, 1.0f, &rng);
    c->par = download_floatX(m->params_memory, m->num_padded);
    const real* tensors[NUM_PARAMETER_TENSORS];
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) { tensors[k] = c->par + m->param_offsets[k]; }
    pe_ref_init(&c->ref, &m->config, m->param_sizes, tensors, 0);
    m->rp_key = rp_key(RP_STREAM_TEST, 6, 0);
    pe_positions_fill(m, NULL, s.B, s.T, 0); // the trainer's draw, shared by the batch and the heads (no tokens)
    c->pos_dev = pe_positions(m, 0);
    if (c->pos_dev != NULL) {
        c->pos = (int*)malloc_check(s.T * sizeof(int));
        memcpy(c->pos, m->pos_host, s.T * sizeof(int));
    }
    if (m->acts.pe_s != NULL) { // S: a random walk with increments -softplus(N(0, 1)); w around 1
        c->S = (float*)malloc_check(N * s.NH * sizeof(float));
        c->w = (float*)malloc_check(N * s.NH * sizeof(float));
        for (int b = 0; b < s.B; b++) {
            for (int h = 0; h < s.NH; h++) {
                float acc = 0.0f;
                for (int t = 0; t < s.T; t++) {
                    size_t idx = ((size_t)b * s.T + t) * s.NH + h;
                    acc -= log1pf(expf(random_normal(&rng)));
                    c->S[idx] = acc;
                    c->w[idx] = 0.5f + random_f32(&rng);
                }
            }
        }
        cudaCheck(cudaMemcpy(m->acts.pe_s, c->S, N * s.NH * sizeof(float), cudaMemcpyHostToDevice));
        if (m->acts.pe_w != NULL) { cudaCheck(cudaMemcpy(m->acts.pe_w, c->w, N * s.NH * sizeof(float), cudaMemcpyHostToDevice)); }
    }
#if !ATTN_REF_WRITTEN
    c->span = c->pos != NULL ? s.rp_len : s.T;
    size_t n = (size_t)s.B * s.NH * c->span * c->span;
    float* table = (float*)cuda_malloc(n * sizeof(float), "the bias table");
    PEBias pb;
    pe_bias_setup(&pb, m, 0, s.B, s.T, 0);
    attn_bias_table_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(table, pb, s.B, s.NH, c->span);
    cudaCheckLaunch("attn_bias_table_kernel");
    c->bias = download_float(table, n);
    cuda_free((void**)&table);
#endif
}

static void attn_case_free(AttnCase* c) {
    gpt2_free(&c->model);
    pe_ref_free(&c->ref);
    free(c->qkv); free(c->dout); free(c->par); free(c->S); free(c->w); free(c->pos); free(c->P); free(c->bias);
}

// one forward and one backward pass of the given kernels on the case's inputs, at the indices
static void attn_case_run(AttnCase* c, AttnForwardFn fwd, AttnBackwardFn bwd) {
    GPT2* m = &c->model;
    AttnShape s = c->s;
    PEBias pb;
    pe_bias_setup(&pb, m, 0, s.B, s.T, 0);
    fwd(m->acts.atty, m->acts.att_lse, m->acts.qkv, pb, s.B, s.T, s.NH, s.hs, ctx.stream);
    gpt2_zero_grad(m);
    pe_bias_setup(&pb, m, 0, s.B, s.T, 1);
    bwd(m->gs.dbig, m->gs.att_D, m->gs.dsmall, m->acts.qkv, m->acts.atty, m->acts.att_lse, pb, s.B, s.T, s.NH, s.hs, ctx.stream);
    pe_bias_reduce(&pb, m, 0, s.B);
    cudaCheck(cudaStreamSynchronize(ctx.stream));
}

// the same with the trainer's attention of layer 0 (pe_attention_forward/backward: its
// kernels, positions and parameter gradients; txl's own kernels)
static void attn_case_run_layer(AttnCase* c) {
    GPT2* m = &c->model;
    AttnShape s = c->s;
    pe_attention_forward(m, 0, m->acts.atty, m->acts.att_lse, m->acts.qkv, s.B, s.T);
    gpt2_zero_grad(m);
    pe_attention_backward(m, 0, m->gs.dbig, m->gs.dsmall, m->acts.qkv, m->acts.atty, m->acts.att_lse, s.B, s.T);
    cudaCheck(cudaStreamSynchronize(ctx.stream));
#if PE_IS(TXL)
    free(c->P);
    c->P = download_floatX(m->acts.pe_rel, (size_t)s.T * s.NH * s.hs);
#endif
}

// ----------------------------------------------------------------------------
// the reference: each encoding's bias and its gradient, from the definitions (docs/encodings.md)

// the parameter gradients of the reference, one vector: the encoding's tensors of the
// (one-layer) model in checkpoint order (PE_PART_REF's gradient; shaw's da^K, da^V); txl's:
// dr_w, dr_r, then dP (T, C)
static int ref_pe_params(const GPT2* m) {
#if defined(PE_REF_POS_BIAS_GRAD) || PE_IS(SHAW)
    int n = 0;
    for (int k = P_PE_BEGIN; k < P_PE_END; k++) { n += (int)m->param_sizes[k]; }
    return n;
#elif PE_IS(TXL)
    return (int)(m->param_sizes[P_TXL_RW] + m->param_sizes[P_TXL_RR] + (size_t)m->seq_len * m->config.channels);
#else
    (void)m;
    return 0;
#endif
}

static double ref_par(const AttnCase* c, int tensor, int i) { return c->par[c->model.param_offsets[tensor] + i]; }

// the position of token t: drawn, or t itself
static int ref_pos(const AttnCase* c, int t) { return c->pos != NULL ? c->pos[t] : t; }

#if PE_IS(SHAW)
// shaw's table row of query i and key j (pe/shaw.h: min(pos_i - pos_j, k)), and its tables
static int ref_shaw_row(const AttnCase* c, int i, int j) {
    int d = ref_pos(c, i) - ref_pos(c, j);
    return d < c->model.config.shaw_k ? d : c->model.config.shaw_k;
}
static double ref_shaw_ak(const AttnCase* c, int r, int e) { return ref_par(c, P_SHAW_AK, r * c->s.hs + e); }
static double ref_shaw_av(const AttnCase* c, int r, int e) {
    return c->model.config.shaw_values ? ref_par(c, P_SHAW_AV, r * c->s.hs + e) : 0.0;
}
#endif

// the bias of query i and key j (their indices; the bias of positions at their positions)
static double ref_bias(const AttnCase* c, int b, int h, int i, int j) {
    (void)c; (void)b; (void)h; (void)i; (void)j;
#if defined(PE_REF_POS_BIAS)
    return pe_ref_pos_bias(&c->ref, h, ref_pos(c, i), ref_pos(c, j));
#elif PE_IS(SHAW)
    // the key term q_i . a^K[r] / sqrt(hs); the attention adds q_i . k_j / sqrt(hs)
    int hs = c->s.hs, C = c->s.NH * hs;
    const float* q = c->qkv + ((size_t)b * c->s.T + i) * 3 * C + h * hs;
    double sum = 0;
    for (int e = 0; e < hs; e++) { sum += q[e] * ref_shaw_ak(c, ref_shaw_row(c, i, j), e); }
    return sum / sqrt((double)hs);
#elif PE_IS(TXL)
    // (r_w . k_j + (q_i + r_r) . P_h[i - j]) / sqrt(hs); the attention adds q_i . k_j / sqrt(hs)
    int hs = c->s.hs, C = c->s.NH * hs;
    const float* q = c->qkv + ((size_t)b * c->s.T + i) * 3 * C + h * hs;
    const float* k = q + (size_t)(j - i) * 3 * C + C;
    const float* P = c->P + (size_t)(i - j) * C + h * hs;
    double sum = 0;
    for (int e = 0; e < hs; e++) { sum += ref_par(c, P_TXL_RW, h * hs + e) * k[e] + ((double)q[e] + ref_par(c, P_TXL_RR, h * hs + e)) * P[e]; }
    return sum / sqrt((double)hs);
#elif PE_IS(CABLE_V1) || PE_IS(CABLE_NW) || PE_IS(CABLE) || PE_IS(KCABLE)
    int NH = c->s.NH;
    size_t si = ((size_t)b * c->s.T + i) * NH + h, sj = ((size_t)b * c->s.T + j) * NH + h;
    double diff = (double)c->S[si] - c->S[sj];
#if PE_IS(CABLE)
    return c->w[si] * diff;
#elif PE_IS(KCABLE)
    return -log(1 + diff * diff);
#else
    return diff;
#endif
#elif !ATTN_REF_WRITTEN
    return c->bias[(((size_t)b * c->s.NH + h) * c->span + ref_pos(c, i)) * c->span + ref_pos(c, j)];
#else
    return 0.0;
#endif
}

// what the encoding adds to value j in query i's output, element e: shaw's a^V[r] (0 for the others)
static double ref_value(const AttnCase* c, int i, int j, int e) {
    (void)c; (void)i; (void)j; (void)e;
#if PE_IS(SHAW)
    return ref_shaw_av(c, ref_shaw_row(c, i, j), e);
#else
    return 0.0;
#endif
}

// dL/d(bias inputs) of one pair, given ds = dL/db(i, j): the row side (query i) adds to dS_i
// and dw_i (txl, shaw: dq_i in dqkv), the column side (key j) to dS_j and the bias parameters
// (dpe, see ref_pe_params; txl: and dk_j)
static void ref_bias_backward(const AttnCase* c, int side, int b, int h, int i, int j, double ds, double* dS, double* dw, double* dpe,
                              double* dqkv) {
    (void)c; (void)side; (void)b; (void)h; (void)i; (void)j; (void)ds; (void)dS; (void)dw; (void)dpe; (void)dqkv;
#if defined(PE_REF_POS_BIAS_GRAD)
    if (side == PE_SIDE_COL) { // the parameters' gradients: each tensor's share of dpe, in checkpoint order
        double* d[P_PE_END - P_PE_BEGIN + 1];
        for (int k = P_PE_BEGIN; k < P_PE_END; k++) { d[k - P_PE_BEGIN] = dpe; dpe += c->model.param_sizes[k]; }
        pe_ref_pos_bias_grad(&c->ref, h, ref_pos(c, i), ref_pos(c, j), ds, d);
    }
#elif PE_IS(SHAW)
    int hs = c->s.hs, C = c->s.NH * hs, r = ref_shaw_row(c, i, j);
    double g = ds / sqrt((double)hs);
    const float* q = c->qkv + ((size_t)b * c->s.T + i) * 3 * C + h * hs;
    for (int e = 0; e < hs; e++) {
        if (side == PE_SIDE_ROW) { dqkv[((size_t)b * c->s.T + i) * 3 * C + h * hs + e] += g * ref_shaw_ak(c, r, e); }
        if (side == PE_SIDE_COL) { dpe[r * hs + e] += g * q[e]; } // da^K, the first of dpe
    }
#elif PE_IS(TXL)
    int hs = c->s.hs, C = c->s.NH * hs;
    double g = ds / sqrt((double)hs);
    const float* q = c->qkv + ((size_t)b * c->s.T + i) * 3 * C + h * hs;
    const float* k = c->qkv + ((size_t)b * c->s.T + j) * 3 * C + C + h * hs;
    const float* P = c->P + (size_t)(i - j) * C + h * hs;
    double* drw = dpe + h * hs;
    double* drr = dpe + C + h * hs;
    double* dP = dpe + 2 * C + (size_t)(i - j) * C + h * hs;
    for (int e = 0; e < hs; e++) {
        if (side == PE_SIDE_ROW) { dqkv[((size_t)b * c->s.T + i) * 3 * C + h * hs + e] += g * P[e]; }
        if (side == PE_SIDE_COL) {
            double rw = ref_par(c, P_TXL_RW, h * hs + e), rr = ref_par(c, P_TXL_RR, h * hs + e);
            dqkv[((size_t)b * c->s.T + j) * 3 * C + C + h * hs + e] += g * rw;
            drw[e] += g * k[e];
            drr[e] += g * P[e];
            dP[e] += g * (q[e] + rr);
        }
    }
#elif PE_IS(CABLE_V1) || PE_IS(CABLE_NW) || PE_IS(CABLE) || PE_IS(KCABLE)
    int NH = c->s.NH;
    size_t si = ((size_t)b * c->s.T + i) * NH + h, sj = ((size_t)b * c->s.T + j) * NH + h;
    double diff = (double)c->S[si] - c->S[sj];
#if PE_IS(CABLE)
    if (side == PE_SIDE_ROW) { dw[si] += ds * diff; }
    ds *= c->w[si];
#elif PE_IS(KCABLE)
    ds *= -2 * diff / (1 + diff * diff);
#endif
#if PE_IS(KCABLE)
    if (side == PE_SIDE_ROW) { dS[si] += ds; }
#endif
    // the row side of dS of b = w_i (S_i - S_j) is w_i sum_j ds_ij, zero for the exact D_i (a
    // constant added to a row leaves the softmax unchanged); with the kernel's D_i it would
    // only be the rounding of the kernel's output, so it is left out, as the kernels do
    if (side == PE_SIDE_COL) { dS[sj] -= ds; }
#endif
}

// the column side of the value term's gradient of one pair, given p_ij: shaw's da^V[r] +=
// p_ij dout_i (dpe after da^K); nothing for the others
static void ref_value_backward(const AttnCase* c, int b, int h, int i, int j, double pij, double* dpe) {
    (void)c; (void)b; (void)h; (void)i; (void)j; (void)pij; (void)dpe;
#if PE_IS(SHAW)
    int hs = c->s.hs, K1 = c->model.config.shaw_k + 1, r = ref_shaw_row(c, i, j);
    const float* g = c->dout + ((size_t)b * c->s.T + i) * c->s.NH * hs + h * hs;
    for (int e = 0; e < hs && c->model.config.shaw_values; e++) { dpe[(size_t)(K1 + r) * hs + e] += pij * g[e]; }
#endif
}

// the reference output and lse, then dqkv and the bias gradients, in double; rows and
// columns in parallel (each pass recomputes the probabilities, as the kernels do)
typedef struct { double* out; double* lse; double* dqkv; double* dS; double* dw; double* dpe; int npe; } AttnRef;

static void attn_reference(const AttnCase* c, const float* gpu_out, AttnRef* r) {
    AttnShape s = c->s;
    int B = s.B, T = s.T, NH = s.NH, hs = s.hs, C = NH * hs, C3 = 3 * C;
    size_t N = (size_t)B * T;
    double scale = 1.0 / sqrt((double)hs);
    r->npe = ref_pe_params(&c->model);
    r->out = (double*)calloc_check(N * C, sizeof(double));
    r->lse = (double*)calloc_check(N * NH, sizeof(double));
    r->dqkv = (double*)calloc_check(N * C3, sizeof(double));
    r->dS = (double*)calloc_check(N * NH, sizeof(double));
    r->dw = (double*)calloc_check(N * NH, sizeof(double));
    r->dpe = (double*)calloc_check(r->npe + 1, sizeof(double));
    const float* x = c->qkv;
    #define Q(b, t, h) (x + ((size_t)(b) * T + (t)) * C3 + (h) * hs)
    #define K(b, t, h) (x + ((size_t)(b) * T + (t)) * C3 + C + (h) * hs)
    #define V(b, t, h) (x + ((size_t)(b) * T + (t)) * C3 + 2 * C + (h) * hs)
    #define G(b, t, h) (c->dout + ((size_t)(b) * T + (t)) * C + (h) * hs)
    // forward, one row at a time: scores, max, sum, output and lse
    #pragma omp parallel
    {
        double* p = (double*)malloc_check(T * sizeof(double));
        #pragma omp for collapse(3) schedule(dynamic, 16)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int i = 0; i < T; i++) {
                    double m = -INFINITY;
                    for (int j = 0; j <= i; j++) {
                        double dot = 0;
                        for (int e = 0; e < hs; e++) { dot += (double)Q(b, i, h)[e] * K(b, j, h)[e]; }
                        p[j] = dot * scale + ref_bias(c, b, h, i, j);
                        m = fmax(m, p[j]);
                    }
                    double sum = 0;
                    for (int j = 0; j <= i; j++) { p[j] = exp(p[j] - m); sum += p[j]; }
                    double* o = r->out + ((size_t)b * T + i) * C + h * hs;
                    for (int j = 0; j <= i; j++) {
                        for (int e = 0; e < hs; e++) { o[e] += p[j] / sum * (V(b, j, h)[e] + ref_value(c, i, j, e)); }
                    }
                    r->lse[((size_t)b * NH + h) * T + i] = m + log(sum);
                }
            }
        }
        free(p);
    }
    // backward: D_i = dout_i . out_i (the kernel's stored output), then the probability
    // and score gradient of pair (i, j)
    double* D = (double*)calloc_check(N * NH, sizeof(double));
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int i = 0; i < T; i++) {
                double d = 0;
                for (int e = 0; e < hs; e++) { d += (double)G(b, i, h)[e] * gpu_out[((size_t)b * T + i) * C + h * hs + e]; }
                D[((size_t)b * NH + h) * T + i] = d;
            }
        }
    }
    #define PAIR(b, h, i, j, pij, dsij) \
        double dot_ = 0, dp_ = 0; \
        for (int e = 0; e < hs; e++) { \
            dot_ += (double)Q(b, i, h)[e] * K(b, j, h)[e]; \
            dp_ += (double)G(b, i, h)[e] * (V(b, j, h)[e] + ref_value(c, i, j, e)); \
        } \
        size_t bhi_ = ((size_t)(b) * NH + (h)) * T + (i); \
        double pij = exp(dot_ * scale + ref_bias(c, b, h, i, j) - r->lse[bhi_]); \
        double dsij = pij * (dp_ - D[bhi_]);
    // rows: dq and the row side of the bias gradient
    #pragma omp parallel for collapse(3) schedule(dynamic, 16)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int i = 0; i < T; i++) {
                double* dq = r->dqkv + ((size_t)b * T + i) * C3 + h * hs;
                for (int j = 0; j <= i; j++) {
                    PAIR(b, h, i, j, pij, ds)
                    (void)pij;
                    for (int e = 0; e < hs; e++) { dq[e] += ds * scale * K(b, j, h)[e]; }
                    ref_bias_backward(c, PE_SIDE_ROW, b, h, i, j, ds, r->dS, r->dw, r->dpe, r->dqkv);
                }
            }
        }
    }
    // columns: dk, dv and the column side (the parameters: a reduction over all pairs)
    double* dpe = r->dpe;
    #pragma omp parallel for collapse(3) schedule(dynamic, 16) reduction(+:dpe[:r->npe + 1])
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int j = 0; j < T; j++) {
                double* dk = r->dqkv + ((size_t)b * T + j) * C3 + C + h * hs;
                double* dv = dk + C;
                for (int i = j; i < T; i++) {
                    PAIR(b, h, i, j, pij, ds)
                    for (int e = 0; e < hs; e++) { dk[e] += ds * scale * Q(b, i, h)[e]; dv[e] += pij * G(b, i, h)[e]; }
                    ref_bias_backward(c, PE_SIDE_COL, b, h, i, j, ds, r->dS, r->dw, dpe, r->dqkv);
                    ref_value_backward(c, b, h, i, j, pij, dpe);
                }
            }
        }
    }
    #undef PAIR
    free(D);
    #undef Q
    #undef K
    #undef V
    #undef G
}

static void attn_reference_free(AttnRef* r) {
    free(r->out); free(r->lse); free(r->dqkv); free(r->dS); free(r->dw); free(r->dpe);
}

// milliseconds per call of fn, averaged over `reps` calls after one warm-up call (the
// dev/cuda timing loops)
#if !defined(ENABLE_FP32)
// the launch sizes of DAPE's kernels, which every bf16 trainer compiles with its encoding's
// hooks, for dev/cuda/resources.py (`launches`): at GPT-2 small's shape (12 heads of 64,
// D = DAPE_WIDTH, k = 3)
static void print_dape_launches() {
    DapeParams dp = {};
    dp.K = 3; dp.D = DAPE_WIDTH; dp.NH = 12; dp.HS = 64; dp.Cin = dape_in_channels(PE_ID, dp.NH);
    const char* names[3] = {"dape_attention_forward_kernel", "dape_attention_backward_q_kernel", "dape_attention_backward_kv_kernel"};
    const int kinds[3] = {DAPE_FORWARD, DAPE_BACKWARD_Q, DAPE_BACKWARD_KV};
    for (int k = 0; k < 3; k++) {
        printf("%s - %d %zu\n", names[k], DAPE_THREADS, dape_smem_layout<PEBias>(NULL, NULL, dp, kinds[k]) * sizeof(float));
    }
}
#endif

// the median milliseconds of one call of fn, measured as triton.testing.do_bench measures
// PyTorch's side (dev/cuda/sdpa_bench.py): each call between two events of its own, after a
// write of 256 MB that leaves the L2 cold; at least 50 ms of warm-up, then at least 100 ms of
// calls (and 10), their number from the warm-up's last call. The emulation has no clock (its
// events read 0 ms) and no cache: 2 warm-up calls and 10 timed ones, no flush.
template<class F>
static float time_ms(F fn) {
#if defined(CUDA_EMULATION)
    const size_t flush_bytes = 0;
#else
    const size_t flush_bytes = (size_t)256 << 20;
#endif
    void* flush = NULL;
    if (flush_bytes > 0) { cudaCheck(cudaMalloc(&flush, flush_bytes)); }
    std::vector<cudaEvent_t> start, stop;
    auto calls = [&](int n) { // n calls, each timed on its own; their milliseconds
        while ((int)start.size() < n) {
            start.push_back(NULL); stop.push_back(NULL);
            cudaCheck(cudaEventCreate(&start.back()));
            cudaCheck(cudaEventCreate(&stop.back()));
        }
        for (int i = 0; i < n; i++) {
            if (flush != NULL) { cudaCheck(cudaMemsetAsync(flush, i & 255, flush_bytes, ctx.stream)); }
            cudaCheck(cudaEventRecord(start[i], ctx.stream));
            fn();
            cudaCheck(cudaEventRecord(stop[i], ctx.stream));
        }
        cudaCheck(cudaEventSynchronize(stop[n - 1]));
        std::vector<float> ms(n);
        for (int i = 0; i < n; i++) { cudaCheck(cudaEventElapsedTime(&ms[i], start[i], stop[i])); }
        return ms;
    };
    float warm = 0.0f, last = 0.0f;
    for (int n = 0; n < 2 || (warm < 50.0f && last > 0.0f); n++) {
        last = calls(1)[0];
        warm += last;
    }
    int reps = last > 0.0f ? (int)fmin(fmax(ceil(100.0f / last), 10.0), 100000.0) : 10;
    std::vector<float> ms = calls(reps);
    std::sort(ms.begin(), ms.end());
    for (size_t i = 0; i < start.size(); i++) {
        cudaCheck(cudaEventDestroy(start[i]));
        cudaCheck(cudaEventDestroy(stop[i]));
    }
    if (flush != NULL) { cudaCheck(cudaFree(flush)); }
    return reps % 2 == 1 ? ms[reps / 2] : 0.5f * (ms[reps / 2 - 1] + ms[reps / 2]);
}

// relative L2 error ||x - ref|| / ||ref|| and the largest absolute difference; prints one
// line and returns 1 if the error exceeds tol
static int attn_compare(const char* what, const float* x, const double* ref, size_t n, double tol) {
    double num = 0, den = 0, maxd = 0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
        if (fabs(d) > maxd || d != d) { maxd = fabs(d); }
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    int bad = !(rel <= tol);
    printf("  %-34s rel L2 %.2e  max abs %.2e  %s (tolerance %.0e)\n", what, rel, maxd, bad ? "FAIL" : "ok  ", tol);
    return bad;
}

// compares the case's GPU results with the reference; returns the number of failures
static int attn_case_compare(AttnCase* c, double tol_out, double tol_pe) {
    GPT2* m = &c->model;
    AttnShape s = c->s;
    int C = s.NH * s.hs;
    size_t N = (size_t)s.B * s.T;
    float* out = download_floatX(m->acts.atty, N * C);
    float* lse = download_float(m->acts.att_lse, N * s.NH);
    float* dqkv = download_floatX(m->gs.dbig, N * 3 * C);
    AttnRef r;
    attn_reference(c, out, &r);
    int fails = 0;
    fails += attn_compare("out", out, r.out, N * C, tol_out);
    fails += attn_compare("lse", lse, r.lse, N * s.NH, tol_out);
    fails += attn_compare("dq, dk, dv", dqkv, r.dqkv, N * 3 * C, tol_out);
    if (m->gs.pe_dS != NULL) {
        float* dS = download_float(m->gs.pe_dS, N * s.NH);
        fails += attn_compare("CABLE dS", dS, r.dS, N * s.NH, tol_pe);
        free(dS);
    }
    if (m->gs.pe_dw != NULL) {
        float* dw = download_float(m->gs.pe_dw, N * s.NH);
        fails += attn_compare("cable dw", dw, r.dw, N * s.NH, tol_pe);
        free(dw);
    }
#if PE_IS(TXL)
    { // dr_w, dr_r from the parameter gradients, dP (the kernels' output, in the build's precision)
        float* g = download_float(m->grads_memory, m->num_padded);
        float* dP = download_floatX(m->gs.pe_drel, (size_t)s.T * C);
        fails += attn_compare("txl dr_w", g + m->param_offsets[P_TXL_RW], r.dpe, C, tol_pe);
        fails += attn_compare("txl dr_r", g + m->param_offsets[P_TXL_RR], r.dpe + C, C, tol_pe);
        fails += attn_compare("txl dP", dP, r.dpe + 2 * C, (size_t)s.T * C, tol_out);
        free(g);
        free(dP);
    }
#else
    if (r.npe > 0) { // each tensor on its own (a small gradient is not hidden among larger ones)
        float* g = download_float(m->grads_memory, m->num_padded);
        double largest = 0;
        for (int e = 0; e < r.npe; e++) { largest = fmax(largest, fabs(r.dpe[e])); }
        const double* ref = r.dpe;
        for (int k = P_PE_BEGIN; k < P_PE_END; k++) {
            const float* x = g + m->param_offsets[k];
            char what[64];
            snprintf(what, sizeof(what), "d %s", PARAM_NAMES[k]);
            // a gradient that vanishes identically: both sides hold the rounding of the kernel's
            // output, which enters through D_i; equal where that rounding is the larger (bf16),
            // else within tol_pe of the largest parameter gradient
            double maxd = 0;
            for (size_t e = 0; e < m->param_sizes[k] && PE_REF_ROW_CONSTANT(k); e++) { maxd = fmax(maxd, fabs(x[e] - ref[e])); }
            if (PE_REF_ROW_CONSTANT(k) && maxd <= tol_pe * largest) {
                printf("  %-34s vanishes identically: max abs difference %.2e  ok   (bound %.2e: %.0e of the largest)\n", what, maxd,
                       tol_pe * largest, tol_pe);
            } else {
                fails += attn_compare(what, x, ref, m->param_sizes[k], tol_pe);
            }
            ref += m->param_sizes[k];
        }
        free(g);
    }
#endif
    attn_reference_free(&r);
    free(out); free(lse); free(dqkv);
    return fails;
}

#if PE_IS(COPE)
// ----------------------------------------------------------------------------
// CoPE: its kernels (llmc/attention_cope.cuh) against the definition (train_gpt2.c's CoPE
// block) in double but for the positions: the position of key j is the sum of the gates of the
// keys j..i, summed in fp32 from key i down as the kernels do; the gradient of the gate of key t
// is the sum of dpos_ij over j <= t. q, k, v and dout are random; E has P = T / 4 + 1 rows (the
// far keys' positions clamp), E[u] = a + (2u / P) b + 0.005 r_u with a, b, r_u of N(0, 1)
// entries: CoPE's gradient jumps where a position crosses an integer, by dA (z[n+1] - 2 z[n] +
// z[n-1]) (the second difference of z = q.E; the official code's too). Positions summed in
// double landed on the other side of an integer than the kernels' now and then (a GPU measured
// dq, dk, dv 3.4e-4 off at T = 1024 in fp32); E's second differences are kept small as well, so
// that the dot products' own rounding cannot do it either, while a wrong row of E or a wrong
// weight is far outside the tolerance. The whole-path comparisons with the CPU path
// (test_gpt2cu reference) use E of irregular unit-scale entries on short sequences. The
// reference takes D_i from the kernel's stored output, as the kernel does.
// dz_rows: the rows of the backward's dz scratch (a multiple of COPE_BQ; smaller than the
// shape's rows makes the backward run in several launches). timed: the kernels' time, too.
// Returns the failures.
static int cope_case_check(AttnShape s, uint64_t seed, int dz_rows, double tol_out, double tol_pe, int timed) {
    int B = s.B, T = s.T, NH = s.NH, hs = s.hs, C = NH * hs, C3 = 3 * C, P = T / 4 + 1;
    size_t N = (size_t)B * T;
    printf("CoPE attention kernels (%s): B=%d T=%d NH=%d hs=%d P=%d, dz scratch of %d rows\n", PRECISION_NAME, B, T, NH, hs, P, dz_rows);
    cuda_context_init();
    uint64_t rng = random_seed(seed);
    floatX* qkv_d = (floatX*)cuda_malloc(N * C3 * sizeof(floatX), "qkv");
    floatX* dout_d = (floatX*)cuda_malloc(N * C * sizeof(floatX), "dout");
    floatX* E_d = (floatX*)cuda_malloc((size_t)P * hs * sizeof(floatX), "E");
    floatX* out_d = (floatX*)cuda_malloc(N * C * sizeof(floatX), "out");
    floatX* dqkv_d = (floatX*)cuda_malloc(N * C3 * sizeof(floatX), "dqkv");
    float* lse_d = (float*)cuda_malloc(N * NH * sizeof(float), "lse");
    float* dE_d = (float*)cuda_malloc((size_t)P * hs * sizeof(float), "dE");
    float* dkv_d = (float*)cuda_malloc(N * 2 * C * sizeof(float), "dkv");
    float* dz_d = (float*)cuda_malloc((size_t)dz_rows * P * sizeof(float), "dz");
    float* x = upload_random(qkv_d, N * C3, 1.0f, &rng);
    float* g = upload_random(dout_d, N * C, 1.0f, &rng);
    float* E = (float*)malloc_check((size_t)P * hs * sizeof(float));
    floatX* Ex = (floatX*)malloc_check((size_t)P * hs * sizeof(floatX));
    for (int e = 0; e < hs; e++) { E[e] = random_normal(&rng); E[hs + e] = random_normal(&rng); } // a, b
    for (int u = P - 1; u >= 0; u--) {
        for (int e = 0; e < hs; e++) {
            Ex[(size_t)u * hs + e] = (floatX)(0.5f * E[e] + 2.0f * u / P * E[hs + e] + 0.005f * random_normal(&rng));
        }
    }
    for (size_t e = 0; e < (size_t)P * hs; e++) { E[e] = (float)Ex[e]; }
    cudaCheck(cudaMemcpy(E_d, Ex, (size_t)P * hs * sizeof(floatX), cudaMemcpyHostToDevice));
    free(Ex);
    cudaCheck(cudaMemset(dE_d, 0, (size_t)P * hs * sizeof(float)));
    CopeLayer cl = {E_d, dE_d, dkv_d, dz_d, P, dz_rows};
    cope_attention_forward(out_d, lse_d, qkv_d, cl, B, T, NH, hs, ctx.stream);
    cope_attention_backward(dqkv_d, dout_d, qkv_d, out_d, lse_d, cl, B, T, NH, hs, ctx.prop.sharedMemPerBlockOptin, ctx.stream);
    cudaCheck(cudaStreamSynchronize(ctx.stream));
    if (timed) { // after the checked run: dE has its gradient
        float ms_f = time_ms([&]() { cope_attention_forward(out_d, lse_d, qkv_d, cl, B, T, NH, hs, ctx.stream); });
        float ms_b = time_ms([&]() {
            cope_attention_backward(dqkv_d, dout_d, qkv_d, out_d, lse_d, cl, B, T, NH, hs, ctx.prop.sharedMemPerBlockOptin, ctx.stream);
        });
        cudaCheck(cudaMemset(dE_d, 0, (size_t)P * hs * sizeof(float)));
        cope_attention_backward(dqkv_d, dout_d, qkv_d, out_d, lse_d, cl, B, T, NH, hs, ctx.prop.sharedMemPerBlockOptin, ctx.stream);
        cudaCheck(cudaStreamSynchronize(ctx.stream));
        printf("  forward  %8.3f ms\n  backward %8.3f ms\n", ms_f, ms_b);
    }
    float* out = download_floatX(out_d, N * C);
    float* lse = download_float(lse_d, N * NH);
    float* dqkv = download_floatX(dqkv_d, N * C3);
    float* dE = download_float(dE_d, (size_t)P * hs);
    double* r_out = (double*)calloc_check(N * C, sizeof(double));
    double* r_lse = (double*)calloc_check(N * NH, sizeof(double));
    double* r_dqkv = (double*)calloc_check(N * C3, sizeof(double));
    double* r_dE = (double*)calloc_check((size_t)P * hs, sizeof(double));
    double scale = 1.0 / sqrt((double)hs);
    for (int b = 0; b < B; b++) { // one (b, h) after the other: dk, dv and dE are sums over rows
        for (int h = 0; h < NH; h++) {
            #pragma omp parallel
            {
                double* sc = (double*)malloc_check((size_t)T * sizeof(double));
                double* pos = (double*)malloc_check((size_t)T * sizeof(double));
                double* pr = (double*)malloc_check((size_t)T * sizeof(double));
                double* da = (double*)malloc_check((size_t)T * sizeof(double));
                double* dpos = (double*)malloc_check((size_t)T * sizeof(double));
                double* z = (double*)malloc_check((size_t)P * sizeof(double));
                double* dz = (double*)malloc_check((size_t)P * sizeof(double));
                double* dE_t = (double*)calloc_check((size_t)P * hs, sizeof(double));
                double* dkv_t = (double*)calloc_check((size_t)T * 2 * hs, sizeof(double));
                #pragma omp for schedule(dynamic, 8)
                for (int i = 0; i < T; i++) {
                    const float* q = x + ((size_t)b * T + i) * C3 + h * hs;
                    const float* gi = g + ((size_t)b * T + i) * C + h * hs;
                    for (int j = 0; j <= i; j++) {
                        double dot = 0;
                        for (int e = 0; e < hs; e++) { dot += (double)q[e] * x[((size_t)b * T + j) * C3 + C + h * hs + e]; }
                        sc[j] = dot * scale;
                    }
                    // the positions as the kernels (and train_gpt2.c, and the official code)
                    // sum them: the gates in fp32, keys i down to j. The embedding's floor, ceil
                    // and clamp are kinks: summed in double, a position near an integer can land
                    // on the other side (dq, dk, dv 3e-4 off at T = 1024 in fp32; 5e-7 so)
                    float fsum = 0.0f;
                    for (int j = i; j >= 0; j--) {
                        fsum += (float)(1 / (1 + exp(-sc[j])));
                        pos[j] = fmin((double)fsum, P - 1);
                    }
                    for (int u = 0; u < P; u++) {
                        double dot = 0;
                        for (int e = 0; e < hs; e++) { dot += (double)q[e] * E[(size_t)u * hs + e]; }
                        z[u] = dot;
                        dz[u] = 0;
                    }
                    double m = -INFINITY, sum = 0;
                    for (int j = 0; j <= i; j++) {
                        double f = floor(pos[j]), w = pos[j] - f;
                        pr[j] = sc[j] + ((1 - w) * z[(int)f] + w * z[(int)ceil(pos[j])]) * scale;
                        m = fmax(m, pr[j]);
                    }
                    for (int j = 0; j <= i; j++) { pr[j] = exp(pr[j] - m); sum += pr[j]; }
                    r_lse[((size_t)b * NH + h) * T + i] = m + log(sum);
                    double* o = r_out + ((size_t)b * T + i) * C + h * hs;
                    double D = 0;
                    for (int e = 0; e < hs; e++) { D += (double)gi[e] * out[((size_t)b * T + i) * C + h * hs + e]; }
                    for (int j = 0; j <= i; j++) {
                        pr[j] /= sum;
                        const float* v = x + ((size_t)b * T + j) * C3 + 2 * C + h * hs;
                        double dp = 0;
                        for (int e = 0; e < hs; e++) { o[e] += pr[j] * v[e]; dp += (double)gi[e] * v[e]; }
                        da[j] = pr[j] * (dp - D);
                        double f = floor(pos[j]), c = ceil(pos[j]), w = pos[j] - f;
                        dz[(int)f] += da[j] * (1 - w) * scale;
                        dz[(int)c] += da[j] * w * scale;
                        dpos[j] = da[j] * (z[(int)c] - z[(int)f]) * scale;
                    }
                    double* dq = r_dqkv + ((size_t)b * T + i) * C3 + h * hs;
                    for (int t = 0; t <= i; t++) {
                        double dgate = 0;
                        for (int j = 0; j <= t; j++) { dgate += dpos[j]; }
                        double gate = 1 / (1 + exp(-sc[t]));
                        double ds = da[t] + dgate * gate * (1 - gate);
                        for (int e = 0; e < hs; e++) {
                            dq[e] += ds * scale * x[((size_t)b * T + t) * C3 + C + h * hs + e];
                            dkv_t[(size_t)t * 2 * hs + e] += ds * scale * q[e];
                            dkv_t[(size_t)t * 2 * hs + hs + e] += pr[t] * gi[e];
                        }
                    }
                    for (int u = 0; u < P; u++) {
                        for (int e = 0; e < hs; e++) { dq[e] += dz[u] * E[(size_t)u * hs + e]; dE_t[(size_t)u * hs + e] += dz[u] * q[e]; }
                    }
                }
                #pragma omp critical
                {
                    for (size_t e = 0; e < (size_t)P * hs; e++) { r_dE[e] += dE_t[e]; }
                    for (int t = 0; t < T; t++) {
                        for (int e = 0; e < hs; e++) {
                            r_dqkv[((size_t)b * T + t) * C3 + C + h * hs + e] += dkv_t[(size_t)t * 2 * hs + e];
                            r_dqkv[((size_t)b * T + t) * C3 + 2 * C + h * hs + e] += dkv_t[(size_t)t * 2 * hs + hs + e];
                        }
                    }
                }
                free(sc); free(pos); free(pr); free(da); free(dpos); free(z); free(dz); free(dE_t); free(dkv_t);
            }
        }
    }
    int fails = 0;
    fails += attn_compare("out", out, r_out, N * C, tol_out);
    fails += attn_compare("lse", lse, r_lse, N * NH, tol_out);
    fails += attn_compare("dq, dk, dv", dqkv, r_dqkv, N * C3, tol_out);
    fails += attn_compare("dE", dE, r_dE, (size_t)P * hs, tol_pe);
    free(out); free(lse); free(dqkv); free(dE); free(x); free(g); free(E);
    free(r_out); free(r_lse); free(r_dqkv); free(r_dE);
    cuda_free(&qkv_d); cuda_free(&dout_d); cuda_free(&E_d); cuda_free(&out_d); cuda_free(&dqkv_d);
    cuda_free(&lse_d); cuda_free(&dE_d); cuda_free(&dkv_d); cuda_free(&dz_d);
    return fails;
}
#endif

#if PE_IS(COMPLEX_ORDER)
// ----------------------------------------------------------------------------
// complex_order: its kernels (llmc/attention_complex.cuh) against its attention written out
// again in double (pe/complex_order.h's definition): per (b, h) and query row i the parts a,
// b of q_i k_j of the complex q = q_re + i q_im, k likewise (the two streams' random q, k, v
// and output gradients), s_ij = |a + ib| / sqrt(hs), one softmax for both streams' values;
// the backward from ds_ij = p_ij (dout_re . v_re_j + dout_im . v_im_j - D_i), D_i from the
// kernel's stored outputs (as the kernel takes it), through the modulus into both streams'
// q and k. timed: the kernels' time, too. Returns the failures.
static int complex_case_check(AttnShape s, uint64_t seed, double tol_out, int timed) {
    int B = s.B, T = s.T, NH = s.NH, hs = s.hs, C = NH * hs, C3 = 3 * C;
    size_t N = (size_t)B * T;
    printf("complex_order attention kernels (%s): B=%d T=%d NH=%d hs=%d\n", PRECISION_NAME, B, T, NH, hs);
    cuda_context_init();
    uint64_t rng = random_seed(seed);
    floatX *qkv_d[2], *dout_d[2], *out_d[2], *dqkv_d[2];
    float *x[2], *g[2];
    for (int st = 0; st < 2; st++) {
        qkv_d[st] = (floatX*)cuda_malloc(N * C3 * sizeof(floatX), "qkv");
        dout_d[st] = (floatX*)cuda_malloc(N * C * sizeof(floatX), "dout");
        out_d[st] = (floatX*)cuda_malloc(N * C * sizeof(floatX), "out");
        dqkv_d[st] = (floatX*)cuda_malloc(N * C3 * sizeof(floatX), "dqkv");
        x[st] = upload_random(qkv_d[st], N * C3, 1.0f, &rng);
        g[st] = upload_random(dout_d[st], N * C, 1.0f, &rng);
    }
    float* lse_d = (float*)cuda_malloc(N * NH * sizeof(float), "lse");
    float* D_d = (float*)cuda_malloc(N * NH * sizeof(float), "D");
    ComplexArgs fa = {qkv_d[1], out_d[1], NULL, NULL}, ba = {qkv_d[1], NULL, dout_d[1], dqkv_d[1]};
    auto forward = [&]() { complex_attention_forward(out_d[0], lse_d, qkv_d[0], fa, B, T, NH, hs, ctx.prop.sharedMemPerBlockOptin, ctx.stream); };
    auto backward = [&]() {
        complex_attention_backward(dqkv_d[0], D_d, dout_d[0], qkv_d[0], out_d[0], out_d[1], lse_d, ba, B, T, NH, hs,
                                   ctx.prop.sharedMemPerBlockOptin, ctx.stream);
    };
    forward();
    backward();
    cudaCheck(cudaStreamSynchronize(ctx.stream));
    if (timed) { printf("  forward  %8.3f ms\n  backward %8.3f ms\n", time_ms(forward), time_ms(backward)); }
    float *out[2], *dqkv[2];
    for (int st = 0; st < 2; st++) { out[st] = download_floatX(out_d[st], N * C); dqkv[st] = download_floatX(dqkv_d[st], N * C3); }
    float* lse = download_float(lse_d, N * NH);
    double *r_out[2], *r_dqkv[2];
    for (int st = 0; st < 2; st++) {
        r_out[st] = (double*)calloc_check(N * C, sizeof(double));
        r_dqkv[st] = (double*)calloc_check(N * C3, sizeof(double));
    }
    double* r_lse = (double*)calloc_check(N * NH, sizeof(double));
    double scale = 1.0 / sqrt((double)hs);
    for (int b = 0; b < B; b++) { // one (b, h) after the other: dk and dv are sums over rows
        for (int h = 0; h < NH; h++) {
            #pragma omp parallel
            {
                double* ar = (double*)malloc_check((size_t)T * sizeof(double));
                double* ai = (double*)malloc_check((size_t)T * sizeof(double));
                double* pr = (double*)malloc_check((size_t)T * sizeof(double));
                double* dkv_t = (double*)calloc_check((size_t)T * 4 * hs, sizeof(double)); // dk_re, dk_im, dv_re, dv_im
                #pragma omp for schedule(dynamic, 8)
                for (int i = 0; i < T; i++) {
                    const float* q[2] = {x[0] + ((size_t)b * T + i) * C3 + h * hs, x[1] + ((size_t)b * T + i) * C3 + h * hs};
                    const float* gi[2] = {g[0] + ((size_t)b * T + i) * C + h * hs, g[1] + ((size_t)b * T + i) * C + h * hs};
                    double m = -INFINITY, sum = 0, D = 0;
                    for (int j = 0; j <= i; j++) {
                        const float* k[2] = {x[0] + ((size_t)b * T + j) * C3 + C + h * hs, x[1] + ((size_t)b * T + j) * C3 + C + h * hs};
                        ar[j] = ai[j] = 0;
                        for (int e = 0; e < hs; e++) {
                            ar[j] += (double)q[0][e] * k[0][e] - (double)q[1][e] * k[1][e];
                            ai[j] += (double)q[0][e] * k[1][e] + (double)q[1][e] * k[0][e];
                        }
                        pr[j] = sqrt(ar[j] * ar[j] + ai[j] * ai[j]) * scale;
                        m = fmax(m, pr[j]);
                    }
                    for (int j = 0; j <= i; j++) { pr[j] = exp(pr[j] - m); sum += pr[j]; }
                    r_lse[((size_t)b * NH + h) * T + i] = m + log(sum);
                    for (int st = 0; st < 2; st++) {
                        for (int e = 0; e < hs; e++) { D += (double)gi[st][e] * out[st][((size_t)b * T + i) * C + h * hs + e]; }
                    }
                    for (int j = 0; j <= i; j++) {
                        pr[j] /= sum;
                        double dp = 0;
                        for (int st = 0; st < 2; st++) {
                            const float* v = x[st] + ((size_t)b * T + j) * C3 + 2 * C + h * hs;
                            double* o = r_out[st] + ((size_t)b * T + i) * C + h * hs;
                            for (int e = 0; e < hs; e++) { o[e] += pr[j] * v[e]; dp += (double)gi[st][e] * v[e]; }
                        }
                        double mod = sqrt(ar[j] * ar[j] + ai[j] * ai[j]);
                        double gm = mod > 0 ? pr[j] * (dp - D) * scale / mod : 0, da = gm * ar[j], db = gm * ai[j];
                        const float* k[2] = {x[0] + ((size_t)b * T + j) * C3 + C + h * hs, x[1] + ((size_t)b * T + j) * C3 + C + h * hs};
                        double* dq[2] = {r_dqkv[0] + ((size_t)b * T + i) * C3 + h * hs, r_dqkv[1] + ((size_t)b * T + i) * C3 + h * hs};
                        double* dkv = dkv_t + (size_t)j * 4 * hs;
                        for (int e = 0; e < hs; e++) {
                            dq[0][e] += da * k[0][e] + db * k[1][e];
                            dq[1][e] += db * k[0][e] - da * k[1][e];
                            dkv[e] += da * q[0][e] + db * q[1][e];
                            dkv[hs + e] += db * q[0][e] - da * q[1][e];
                            dkv[2 * hs + e] += pr[j] * gi[0][e];
                            dkv[3 * hs + e] += pr[j] * gi[1][e];
                        }
                    }
                }
                #pragma omp critical
                {
                    for (int t = 0; t < T; t++) {
                        for (int st = 0; st < 2; st++) {
                            for (int e = 0; e < hs; e++) {
                                r_dqkv[st][((size_t)b * T + t) * C3 + C + h * hs + e] += dkv_t[(size_t)t * 4 * hs + st * hs + e];
                                r_dqkv[st][((size_t)b * T + t) * C3 + 2 * C + h * hs + e] += dkv_t[(size_t)t * 4 * hs + (2 + st) * hs + e];
                            }
                        }
                    }
                }
                free(ar); free(ai); free(pr); free(dkv_t);
            }
        }
    }
    int fails = 0;
    fails += attn_compare("out (real stream)", out[0], r_out[0], N * C, tol_out);
    fails += attn_compare("out (imaginary stream)", out[1], r_out[1], N * C, tol_out);
    fails += attn_compare("lse", lse, r_lse, N * NH, tol_out);
    fails += attn_compare("dq, dk, dv (real stream)", dqkv[0], r_dqkv[0], N * C3, tol_out);
    fails += attn_compare("dq, dk, dv (imaginary stream)", dqkv[1], r_dqkv[1], N * C3, tol_out);
    for (int st = 0; st < 2; st++) {
        free(out[st]); free(dqkv[st]); free(r_out[st]); free(r_dqkv[st]); free(x[st]); free(g[st]);
        cuda_free(&qkv_d[st]); cuda_free(&dout_d[st]); cuda_free(&out_d[st]); cuda_free(&dqkv_d[st]);
    }
    free(lse); free(r_lse);
    cuda_free(&lse_d); cuda_free(&D_d);
    return fails;
}
#endif

#endif // LLMC_ATTENTION_CHECK_CUH
