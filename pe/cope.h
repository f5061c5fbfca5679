/*
cope (contextual position encoding, Golovneva et al. 2024), as the official code
(facebookresearch/RAM, projects/cope/src/cope/context_position.py): the position of a key
counts the gates that the query opens for the keys from it up to the query. Per head,
query i, key j <= i, s_ij = q_i.k_j / sqrt(hs):
  g_it = sigmoid(s_it)                              the gate of key t (none beyond i)
  p_ij = min(g_ij + g_i,j+1 + ... + g_ii, P - 1)   key j's position, a suffix sum of the row
  z_i[u] = q_i.E[u]                                 E [P, hs] per layer, shared by the heads
  e_ij = (1 - w) z_i[f] + w z_i[c],                 f = floor(p_ij), c = ceil(p_ij), w = p_ij - f
  logit_ij = s_ij + e_ij / sqrt(hs)                 (the official default divides the sum)
E starts at zero (CoPE starts as NoPE); P = maxT + 1 (cope_positions below), so beyond
the training length the far keys share E[P - 1]. The term depends on the scores of the
whole row, so it is no bias b(i, j): CoPE computes its own attention (PE_ATTENTION), one
query row at a time in two passes, keys i down to 0 for the scores and the running sum of
the gates (the positions), then the logits from z_i[0 .. ceil(p_i0)]: no T x T tensor.
The backward pass recomputes a row and, with dA_ij = dL/dlogit_ij (p_ij (dout_i.v_j - D_i)):
  dz_i[f] += dA_ij (1 - w) / sqrt(hs),  dz_i[c] += dA_ij w / sqrt(hs)
  dpos_ij = dA_ij (z_i[c] - z_i[f]) / sqrt(hs)   (0 where p is clamped, as f = c = P - 1
                                                  there; floor and ceil have no gradient)
  dg_it = dpos_i0 + ... + dpos_it                 (key t's gate is in every p_ij with j <= t:
                                                  a prefix sum)
  ds_ij = dA_ij + dg_ij g_ij (1 - g_ij),  then dq, dk, dv as plain attention
  dq_i += sum_u dz_i[u] E[u],  dE[u] += dz_i[u] q_i (summed over every row)
*/
#if PE_PART == PE_PART_DEFINITION

// CoPE's number of positions P: the training length + 1 (the official default, block size + 1:
// a position counts gates, from 0 to the row's length). maxT is header word 2 of the
// checkpoint (the training length), so a longer evaluation uses the trained P: positions
// beyond P - 1 share E[P - 1].
static inline int cope_positions(int maxT) { return maxT + 1; }

// E (L, P, hs), zeros: CoPE starts as NoPE. It decays as a matrix per layer, by this
// project's rule; the official trainer's default is Adam without weight decay (facebookresearch/RAM,
// projects/cope trainer.py: the optimizer's default and run.sh)
#define PE_TENSORS(X) \
    X(COPE_E, cope_e, 1, L * cope_positions((int)maxT) * (C / NH), fill_const(p, n, 0.0f))

#elif PE_PART == PE_PART_CPU

#define PE_ATTENTION
// a thread's workspace for one row: s the scores, a the logits (then the probabilities),
// pos the positions (then their gradients dpos), z; backward: da (dA), dz, and the thread's
// accumulator of dE (P x hs), summed over the threads at the end of the layer
typedef struct { real* s; real* a; real* pos; real* z; real* da; real* dz; real* dE; } CopeRow;

static size_t pe_attention_scratch(const GPT2Config* cfg, int B, int T, int training) {
    size_t P = cope_positions(cfg->max_seq_len), hs = cfg->channels / cfg->num_heads;
    return 3 * (size_t)T + P + (training ? (size_t)T + P + P * hs : 0);
}

// the workspace of thread `thread` (rows up to the activations' capacity acts_T)
static CopeRow cope_row_workspace(const GPT2* model, int thread) {
    int T = model->acts_T, P = cope_positions(model->config.max_seq_len);
    CopeRow w;
    w.s = model->att_scratch + (size_t)thread * model->att_scratch_len;
    w.a = w.s + T;
    w.pos = w.a + T;
    w.z = w.pos + T;
    w.da = w.z + P; // the backward's, within the workspace only when training
    w.dz = w.da + T;
    w.dE = w.dz + P;
    return w;
}

// cope_row_logits: the logits a[j], j <= i, of query row i of (b, h), and s, pos, z in the
// workspace; returns U = ceil(p_i0), the largest position's ceiling (z holds z[0..U])
static int cope_row_logits(CopeRow* w, const real* qkv, const real* E, int P, int b, int h, int i, int T, int C, int hs) {
    real scale = 1 / sqrt((real)hs);
    const real* q = qkv + ((size_t)b * T + i) * 3 * C + h * hs;
    // pass 1, keys i down to 0: the scores, and the gates summed into the positions
    real sum = 0;
    for (int j = i; j >= 0; j--) {
        const real* k = qkv + ((size_t)b * T + j) * 3 * C + C + h * hs;
        real dot = 0;
        #pragma omp simd reduction(+:dot)
        for (int c = 0; c < hs; c++) { dot += q[c] * k[c]; }
        w->s[j] = dot * scale;
        sum += 1 / (1 + exp(-w->s[j]));
        w->pos[j] = sum < P - 1 ? sum : P - 1;
    }
    // pass 2: z_u = q.E[u] up to the largest position, then each key's interpolation
    int U = (int)ceil(w->pos[0]);
    for (int u = 0; u <= U; u++) {
        const real* e = E + (size_t)u * hs;
        real dot = 0;
        #pragma omp simd reduction(+:dot)
        for (int c = 0; c < hs; c++) { dot += q[c] * e[c]; }
        w->z[u] = dot;
    }
    for (int j = 0; j <= i; j++) {
        int f = (int)floor(w->pos[j]), c = (int)ceil(w->pos[j]);
        real wt = w->pos[j] - f;
        w->a[j] = w->s[j] + ((1 - wt) * w->z[f] + wt * w->z[c]) * scale;
    }
    return U;
}

// cope_row_backward: the backward pass of query row i of (b, h) (formulas above): dq_i, and
// dk, dv of its keys (the (b, h)'s thread owns them), and the thread's dE accumulator
static void cope_row_backward(CopeRow* w, real* dqkv, const real* dout, const real* qkv, const real* out, const real* lse,
                              const real* E, int P, int b, int h, int i, int T, int C, int NH) {
    int hs = C / NH, C3 = 3 * C;
    real scale = 1 / sqrt((real)hs);
    int U = cope_row_logits(w, qkv, E, P, b, h, i, T, C, hs);
    const real* q = qkv + ((size_t)b * T + i) * C3 + h * hs;
    const real* g = dout + ((size_t)b * T + i) * C + h * hs;
    const real* o = out + ((size_t)b * T + i) * C + h * hs;
    real row_lse = lse[((size_t)b * NH + h) * T + i];
    real D = 0;
    for (int c = 0; c < hs; c++) { D += g[c] * o[c]; }
    // per key: the probability, dA, the two gradients of z it feeds, and dpos (in pos)
    for (int u = 0; u <= U; u++) { w->dz[u] = 0; }
    for (int j = 0; j <= i; j++) {
        const real* v = qkv + ((size_t)b * T + j) * C3 + 2 * C + h * hs;
        real dp = 0;
        #pragma omp simd reduction(+:dp)
        for (int c = 0; c < hs; c++) { dp += g[c] * v[c]; }
        real p = exp(w->a[j] - row_lse);
        real da = p * (dp - D);
        int f = (int)floor(w->pos[j]), c = (int)ceil(w->pos[j]);
        real wt = w->pos[j] - f;
        w->dz[f] += da * (1 - wt) * scale;
        w->dz[c] += da * wt * scale;
        w->pos[j] = da * (w->z[c] - w->z[f]) * scale;
        w->a[j] = p;
        w->da[j] = da;
    }
    // the gates' gradient, a prefix sum of dpos; ds, then as plain attention
    real* dq = dqkv + ((size_t)b * T + i) * C3 + h * hs;
    real dg = 0;
    for (int j = 0; j <= i; j++) {
        dg += w->pos[j];
        real gate = 1 / (1 + exp(-w->s[j]));
        real ds = w->da[j] + dg * gate * (1 - gate);
        const real* k = qkv + ((size_t)b * T + j) * C3 + C + h * hs;
        real* dk = dqkv + ((size_t)b * T + j) * C3 + C + h * hs;
        real* dv = dk + C;
        #pragma omp simd
        for (int c = 0; c < hs; c++) {
            dq[c] += ds * scale * k[c];
            dk[c] += ds * scale * q[c];
            dv[c] += w->a[j] * g[c];
        }
    }
    // E's path: dq_i += sum_u dz_u E[u], dE[u] += dz_u q_i
    for (int u = 0; u <= U; u++) {
        const real* e = E + (size_t)u * hs;
        real* de = w->dE + (size_t)u * hs;
        #pragma omp simd
        for (int c = 0; c < hs; c++) { dq[c] += w->dz[u] * e[c]; de[c] += w->dz[u] * q[c]; }
    }
}

// real attention_row_output(...): the softmax and output of a row of logits (attention section)
static real attention_row_output(real* o, real* a, const real* qkv, int b, int h, int i, int T, int C, int hs);

// CoPE's attention of layer l: out (B, T, C) and lse (B, NH, T) from qkv (B, T, 3C), one
// (b, h) per thread, row by row
static void pe_attention_forward(GPT2* model, int l, real* out, real* lse, const real* qkv, int B, int T) {
    int C = model->config.channels, NH = model->config.num_heads, hs = C / NH;
    int P = cope_positions(model->config.max_seq_len);
    const real* E = model->params.cope_e + (size_t)l * P * hs;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            CopeRow w = cope_row_workspace(model, omp_get_thread_num());
            for (int i = 0; i < T; i++) {
                cope_row_logits(&w, qkv, E, P, b, h, i, T, C, hs);
                lse[((size_t)b * NH + h) * T + i] = attention_row_output(out + ((size_t)b * T + i) * C + h * hs, w.a, qkv, b, h, i, T, C, hs);
            }
        }
    }
}

// the backward pass of layer l: dqkv, and E's gradient from the threads' accumulators,
// summed in the order of the threads (the same sum every time)
static void pe_attention_backward(GPT2* model, int l, real* dqkv, const real* dout, const real* qkv, const real* out,
                                  const real* lse, int B, int T) {
    int C = model->config.channels, NH = model->config.num_heads, hs = C / NH;
    int P = cope_positions(model->config.max_seq_len);
    const real* E = model->params.cope_e + (size_t)l * P * hs;
    real* dE = model->grads.cope_e + (size_t)l * P * hs;
    #pragma omp parallel
    {
        CopeRow w = cope_row_workspace(model, omp_get_thread_num());
        memset(w.dE, 0, (size_t)P * hs * sizeof(real));
        #pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int i = 0; i < T; i++) { cope_row_backward(&w, dqkv, dout, qkv, out, lse, E, P, b, h, i, T, C, NH); }
            }
        }
        int threads = omp_get_num_threads();
        #pragma omp for schedule(static)
        for (size_t e = 0; e < (size_t)P * hs; e++) {
            for (int t = 0; t < threads; t++) { dE[e] += cope_row_workspace(model, t).dE[e]; }
        }
    }
}

#elif PE_PART == PE_PART_CUDA

// its own attention kernels (llmc/attention_cope.cuh), fp32 on CUDA cores in both builds
#include "../llmc/attention_cope.cuh"
#define PE_ATTENTION
#define PE_ATT_DKV 1 // gs.att_dkv: dk, dv in fp32
// the backward's dz scratch in floats (the dk, dv one is att_dkv)
static size_t pe_attention_scratch(const GPT2Config* cfg, int B, int T, int training) {
    int P = cope_positions(cfg->max_seq_len);
    return (size_t)cope_dz_rows(B, T, cfg->num_heads, P) * P;
}
// layer l's CoPE as the kernels see it (the scratch is the backward's)
static CopeLayer cope_layer(const GPT2* model, int l) {
    const GPT2Config* cfg = &model->config;
    int P = cope_positions(cfg->max_seq_len), hs = cfg->channels / cfg->num_heads;
    CopeLayer cl;
    cl.E = model->params.cope_e + (size_t)l * P * hs;
    cl.dE = model->grads.cope_e != NULL ? model->grads.cope_e + (size_t)l * P * hs : NULL;
    cl.dkv = model->gs.att_dkv;
    cl.dz = model->gs.pe_scratch;
    cl.P = P;
    cl.dz_rows = cope_dz_rows(model->acts_B, model->acts_T, cfg->num_heads, P);
    return cl;
}
static void pe_attention_forward(GPT2* model, int l, floatX* out, float* lse, const floatX* qkv, int B, int T) {
    const GPT2Config* cfg = &model->config;
    cope_attention_forward(out, lse, qkv, cope_layer(model, l), B, T, cfg->num_heads, cfg->channels / cfg->num_heads, ctx.stream);
}
static void pe_attention_backward(GPT2* model, int l, floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                                  const float* lse, int B, int T) {
    const GPT2Config* cfg = &model->config;
    cope_attention_backward(dqkv, dout, qkv, out, lse, cope_layer(model, l), B, T, cfg->num_heads, cfg->channels / cfg->num_heads,
                            ctx.prop.sharedMemPerBlockOptin, ctx.stream);
}

#elif PE_PART == PE_PART_TEST

// CoPE's tests train at 12 tokens (P = 13), below the lengths they run, so that the far
// keys' positions clamp at P - 1; E (zero at the start) gets values of some weight
#define COPE_TEST_MAXT 12
#define PE_TEST_CONFIG
static void pe_test_config(GPT2Config* cfg) { cfg->max_seq_len = COPE_TEST_MAXT; }
#define PE_TEST_PARAMS
static void pe_test_params(GPT2* model, uint64_t* rng) {
    for (size_t i = 0; i < model->param_sizes[P_COPE_E]; i++) { model->params.cope_e[i] = 0.5 * random_normal(rng); }
}

// the official code: the gates sigmoid(q_i.k_t / sqrt(hs)) of the keys t = j..i summed into
// key j's position, clamped at P - 1 = maxT; q_i.E interpolated between the position's
// floor and ceil, divided by sqrt(hs)
#define PE_REF_BIAS
static double pe_ref_bias(GPT2* model, int l, int b, int h, int i, int j, int T) {
    int NH = model->config.num_heads;
    int C = model->config.channels, hs = C / NH, P = model->config.max_seq_len + 1;
    const real* qkv = model->acts.t.qkv + (size_t)l * model->acts_N * 3 * C;
    const real* q = qkv + ((size_t)b * T + i) * 3 * C + h * hs;
    double pos = 0;
    for (int t = j; t <= i; t++) {
        double dot = 0;
        for (int c = 0; c < hs; c++) { dot += q[c] * qkv[((size_t)b * T + t) * 3 * C + C + h * hs + c]; }
        pos += 1 / (1 + exp(-dot / sqrt((double)hs)));
}
pos = fmin(pos, P - 1);
const real* E = model->params.cope_e + (size_t)l * P * hs;
double zf = 0, zc = 0;
for (int c = 0; c < hs; c++) { zf += q[c] * E[(size_t)floor(pos) * hs + c]; zc += q[c] * E[(size_t)ceil(pos) * hs + c]; }
return ((pos - floor(pos)) * zc + (1 - (pos - floor(pos))) * zf) / sqrt((double)hs);
}

// The piece of a piecewise-smooth loss that the last training forward pass lies on: CoPE's
// loss is smooth except where a position crosses an integer (its interpolation's floor and
// ceil change) or P - 1 (its clamp); the piece is every position's floor and clamp, hashed
// over every layer, row and key
#define PE_LOSS_PIECE
static uint64_t pe_loss_piece(GPT2* model, int B, int T) {
    uint64_t piece = 0;
    int C = model->config.channels, NH = model->config.num_heads, hs = C / NH, P = model->config.max_seq_len + 1;
    for (int l = 0; l < model->config.num_layers; l++) {
        const real* qkv = model->acts.t.qkv + (size_t)l * model->acts_N * 3 * C;
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                for (int i = 0; i < T; i++) {
                    const real* q = qkv + ((size_t)b * T + i) * 3 * C + h * hs;
                    double sum = 0;
                    for (int j = i; j >= 0; j--) {
                        const real* k = qkv + ((size_t)b * T + j) * 3 * C + C + h * hs;
                        double dot = 0;
                        for (int c = 0; c < hs; c++) { dot += q[c] * k[c]; }
                        sum += 1 / (1 + exp(-dot / sqrt((double)hs)));
                        int64_t where = sum >= P - 1 ? -1 : (int64_t)floor(sum);
                        piece = (piece ^ (uint64_t)where) * 0x100000001b3ull; // FNV-1a, one key at a time
                    }
                }
            }
        }
    }
    return piece;
}

// CoPE with E = 0 (its start) is NoPE; with E of weight it is not
#define PE_TESTS
static void pe_tests(void) {
    printf("identity: cope with E = 0 is nope\n");
    int B = 2, T = 30;
    GPT2 model;
    int x[60], y[60];
    uint64_t rng = tiny_model_batch(&model, COPE_TEST_MAXT, 21, 22, x, y, B, T);
    memset(model.params.cope_e, 0, model.param_sizes[P_COPE_E] * sizeof(real));
    gpt2_forward(&model, x, y, B, T, 1);
    double d = 0;
    for (int l = 0; l < model.config.num_layers; l++) { d = fmax(d, attention_vs_reference(&model, l, no_bias, B, T)); }
    check(d < 1e-5, "E = 0: attention equals NoPE's", d, 1e-5);
    pe_test_params(&model, &rng);
    gpt2_forward(&model, x, y, B, T, 1);
    d = 0;
    for (int l = 0; l < model.config.num_layers; l++) { d = fmax(d, attention_vs_reference(&model, l, no_bias, B, T)); }
    check(d > 1e-3, "E of weight: attention differs from NoPE's", d, 1e-3);
    gpt2_free(&model);
}

#endif
