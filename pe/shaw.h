/*
shaw: relative position representations (Shaw, Uszkoreit and Vaswani 2018) as tensor2tensor,
the authors' framework, computes them (tensorflow/tensor2tensor @ bafdc1b,
tensor2tensor/layers/common_attention.py: dot_product_attention_relative :1739-1827). Per layer
two learned tables of head-size vectors, a^K and a^V, one row per clipped distance, shared by
the layer's heads (:1691-1702: a [2k + 1, depth] variable each, depth the head size); for
head h, query i and key j <= i at positions pos_i, pos_j:

    r(i, j) = min(pos_i - pos_j, k)                                   the table's row
    e_ij    = (q_i / sqrt(hs)) . (k_j + a^K[r(i, j)])                 both terms scaled (:4702, :1812)
    z_i     = sum_j softmax_j(e_ij) (v_j + a^V[r(i, j)])              (:1827)

No absolute position embedding (transformer_relative: pos = None). The official index is
clip(j - i, -k, k) + k (:1670-1688) into 2k + 1 rows; a causal model only ever reads its rows
0..k (j <= i), row k - r for distance r, so the tables here keep those k + 1 rows, row r for
distance r: every distance >= k reads row k, so any length beyond training, 16k tokens too,
reads rows it was trained on. Distances are of positions (positions as data: randomized,
given), the official range(length) where none are given.

k (-ak, checkpoint word 19): 16 by default, the paper's; tensor2tensor's transformer_relative
sets 20. The value table is optional (-av 0, word 20: keys only, a model without a^V, the
common usage since; the paper's ablation has it too): a^V on by default, as the paper's
main setting. Initialization as tensor2tensor's global initializer (t2t_model.py:320-321,
transformer_base's uniform_unit_scaling, gain 1, optimize.py:395-397): variance scaling over
fan_avg = (2k + 1 + hs) / 2 of the official [2k + 1, hs] shape, uniform, U(-lim, lim) with
lim = sqrt(3 / fan_avg). Weight decay: the project's rule (a matrix per layer decays);
tensor2tensor's transformer_base has none at all.

The term is no bias b(i, j) (it reads q_i, and a^V changes the output), so shaw computes its
own attention (PE_ATTENTION) on both paths, without a T x T tensor: per query row the key term
is the vector g[r] = q_i . a^K[r] / sqrt(hs) of k + 1 dot products, gathered by row; the value
term is c[r] = the probabilities of the row summed by row, then z_i += sum_r c[r] a^V[r].
Backward, with dO_i the output's gradient and D_i = dO_i . z_i:

    dP_ij = dO_i . (v_j + a^V[r])        ds_ij = P_ij (dP_ij - D_i)
    G_i[r] = sum over the keys of row r of ds_ij,   c_i[r] likewise of P_ij
    dq_i = sum_j ds_ij k_j / sqrt(hs) + sum_r G_i[r] a^K[r] / sqrt(hs)
    dk_j = sum_i ds_ij q_i / sqrt(hs),   dv_j = sum_i P_ij dO_i
    da^K[r] = sum_i G_i[r] q_i / sqrt(hs),   da^V[r] = sum_i c_i[r] dO_i
*/
#if PE_PART == PE_PART_DEFINITION

// tensorflow's variance_scaling_initializer (scale 1, fan_avg, uniform) of the official
// [2k + 1, hs] table, for the k + 1 rows kept
static void shaw_fill(float* p, size_t n, const GPT2Config* cfg, uint64_t* rng) {
    float fan_avg = (2.0f * cfg->shaw_k + 1 + (float)(cfg->channels / cfg->num_heads)) / 2;
    float lim = sqrtf(3.0f / fan_avg);
    fill_uniform(p, n, -lim, lim, rng);
}
// a^K and a^V, (L, k + 1, hs): row r of layer l at (l (k + 1) + r) hs; a^V absent keys-only
#define PE_TENSORS(X) \
    X(SHAW_AK, shaw_ak, 1, L * (cfg->shaw_k + 1) * (C / NH), shaw_fill(p, n, cfg, rng)) \
    X(SHAW_AV, shaw_av, 1, cfg->shaw_values ? L * (cfg->shaw_k + 1) * (C / NH) : 0, shaw_fill(p, n, cfg, rng))

// the row of the tables of a key at distance d >= 0 from its query: d itself up to k, then k
PE_FN int shaw_row(int d, int k) { return d < k ? d : k; }

#elif PE_PART == PE_PART_CPU

#define PE_ATTENTION

// of the attention section (train_gpt2.c), which comes after this part
static int attention_padded_T(int T);
static size_t attention_scratch_len(int hs, int T, int backward);
static void attention_keys_transposed(real* kt, const real* qkv, int which, int b, int h, int T, int C, int hs);
static void attention_row_dots(real* s, const real* x, const real* kt, int i, int T, int hs);
static void attention_row_accumulate(real* o, const real* w, const real* x, size_t stride, int n, int hs);
static real attention_row_output(real* o, real* a, const real* qkv, int b, int h, int i, int T, int C, int hs);

// a thread's workspace: per row the key term g and, in the backward, e[r] = dO_i . a^V[r] (k + 1
// each), the sums by row G (of ds) and c (of the probabilities); the thread's share of da^K
// and da^V ((k + 1) hs each); then the plain attention's (attention_scratch_len): the row's
// logits s (in the backward p, then dp) and the head's keys (and values) transposed
typedef struct { real* g; real* e; real* G; real* c; real* dAK; real* dAV; real* s; real* dp; real* kt; real* vt; } ShawRow;

static size_t pe_attention_scratch(const GPT2Config* cfg, int B, int T, int training) {
    size_t hs = cfg->channels / cfg->num_heads, K1 = cfg->shaw_k + 1;
    return (4 + 2 * hs) * K1 + attention_scratch_len((int)hs, T, training);
}

static ShawRow shaw_workspace(const GPT2* model, int thread) {
    int hs = model->config.channels / model->config.num_heads, K1 = model->config.shaw_k + 1, Tp = attention_padded_T(model->acts_T);
    ShawRow w;
    w.g = model->att_scratch + (size_t)thread * model->att_scratch_len;
    w.e = w.g + K1;
    w.G = w.e + K1;
    w.c = w.G + K1;
    w.dAK = w.c + K1;
    w.dAV = w.dAK + (size_t)K1 * hs;
    w.s = w.dAV + (size_t)K1 * hs;
    w.dp = w.s + Tp; // the backward's: attention_backward's layout
    w.kt = model->grads_acts.memory != NULL ? w.dp + Tp : w.dp;
    w.vt = w.kt + (size_t)hs * Tp;
    return w;
}

// layer l's share of a table: a^K (value 0), or a^V (value 1; NULL keys only)
static real* shaw_table(const GPT2* model, real* table, int value, int l) {
    const GPT2Config* c = &model->config;
    return value && !c->shaw_values ? NULL : table + (size_t)l * (c->shaw_k + 1) * (c->channels / c->num_heads);
}

// shaw_row_logits: the logits s[j], j <= i, of query row i of a head at positions pos (the
// row's): q_i . k_j / sqrt(hs) (the head's keys transposed in kt) plus the key term g[r(i, j)],
// where g[r] = q_i . a^K[r] / sqrt(hs), the k + 1 dot products of the row
static void shaw_row_logits(real* s, real* g, const real* q, const real* kt, const real* aK, const int* pos, int i, int T, int hs, int k) {
    real scale = 1 / sqrt((real)hs);
    for (int r = 0; r <= k; r++) {
        real dot = 0;
        for (int c = 0; c < hs; c++) { dot += q[c] * aK[(size_t)r * hs + c]; }
        g[r] = dot * scale;
    }
    attention_row_dots(s, q, kt, i, T, hs);
    for (int j = 0; j <= i; j++) { s[j] = s[j] * scale + g[shaw_row(pos[i] - pos[j], k)]; }
}

// shaw_row_sums: out[r] = the sum of x[j] over the keys j <= i of row i whose table row is r
static void shaw_row_sums(real* out, const real* x, const int* pos, int i, int k) {
    for (int r = 0; r <= k; r++) { out[r] = 0; }
    for (int j = 0; j <= i; j++) { out[shaw_row(pos[i] - pos[j], k)] += x[j]; }
}

// shaw's attention of layer l: out (B, T, C) and lse (B, NH, T) from qkv (B, T, 3C), one (b, h)
// per thread, row by row: the logits, the softmax and sum_j p_j v_j (attention_row_output),
// then the value term sum_r c[r] a^V[r]
static void pe_attention_forward(GPT2* model, int l, real* out, real* lse, const real* qkv, int B, int T) {
    int C = model->config.channels, NH = model->config.num_heads, hs = C / NH, k = model->config.shaw_k;
    const real* aK = shaw_table(model, model->params.shaw_ak, 0, l);
    const real* aV = shaw_table(model, model->params.shaw_av, 1, l);
    const int* positions = pe_positions(model, l);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            ShawRow w = shaw_workspace(model, omp_get_thread_num());
            const int* pos = positions + (size_t)b * T;
            attention_keys_transposed(w.kt, qkv, 1, b, h, T, C, hs);
            for (int i = 0; i < T; i++) {
                real* o = out + ((size_t)b * T + i) * C + h * hs;
                shaw_row_logits(w.s, w.g, qkv + ((size_t)b * T + i) * 3 * C + h * hs, w.kt, aK, pos, i, T, hs, k);
                lse[((size_t)b * NH + h) * T + i] = attention_row_output(o, w.s, qkv, b, h, i, T, C, hs);
                if (aV == NULL) { continue; }
                shaw_row_sums(w.c, w.s, pos, i, k);
                attention_row_accumulate(o, w.c, aV, hs, k + 1, hs);
            }
        }
    }
}

// the backward pass of layer l (the formulas above), each row's probabilities recomputed from
// q, k and lse: dqkv, and da^K, da^V summed per thread, then over the threads in their order
// (the same sum every time)
static void pe_attention_backward(GPT2* model, int l, real* dqkv, const real* dout, const real* qkv, const real* out,
                                  const real* lse, int B, int T) {
    int C = model->config.channels, NH = model->config.num_heads, hs = C / NH, C3 = 3 * C, k = model->config.shaw_k, K1 = k + 1;
    real scale = 1 / sqrt((real)hs);
    const real* aK = shaw_table(model, model->params.shaw_ak, 0, l);
    const real* aV = shaw_table(model, model->params.shaw_av, 1, l);
    const int* positions = pe_positions(model, l);
    #pragma omp parallel
    {
        ShawRow w = shaw_workspace(model, omp_get_thread_num());
        memset(w.dAK, 0, 2 * (size_t)K1 * hs * sizeof(real));
        #pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                const int* pos = positions + (size_t)b * T;
                attention_keys_transposed(w.kt, qkv, 1, b, h, T, C, hs);
                attention_keys_transposed(w.vt, qkv, 2, b, h, T, C, hs);
                for (int i = 0; i < T; i++) {
                    const real* q = qkv + ((size_t)b * T + i) * C3 + h * hs;
                    const real* g = dout + ((size_t)b * T + i) * C + h * hs;
                    const real* o = out + ((size_t)b * T + i) * C + h * hs;
                    real* dq = dqkv + ((size_t)b * T + i) * C3 + h * hs;
                    real row_lse = lse[((size_t)b * NH + h) * T + i];
                    real D = 0;
                    #pragma omp simd reduction(+:D)
                    for (int c = 0; c < hs; c++) { D += g[c] * o[c]; }
                    real* p = w.s;
                    shaw_row_logits(p, w.g, q, w.kt, aK, pos, i, T, hs, k);
                    attention_row_dots(w.dp, g, w.vt, i, T, hs);
                    for (int r = 0; r <= k && aV != NULL; r++) { // e[r] = dO_i . a^V[r]
                        real dot = 0;
                        for (int c = 0; c < hs; c++) { dot += g[c] * aV[(size_t)r * hs + c]; }
                        w.e[r] = dot;
                    }
                    #pragma omp simd
                    for (int j = 0; j <= i; j++) { p[j] = exp_vec(p[j] - row_lse); }
                    for (int j = 0; j <= i && aV != NULL; j++) { w.dp[j] += w.e[shaw_row(pos[i] - pos[j], k)]; } // dO_i . (v_j + a^V[r])
                    #pragma omp simd
                    for (int j = 0; j <= i; j++) { w.dp[j] = p[j] * (w.dp[j] - D); } // ds_ij
                    shaw_row_sums(w.G, w.dp, pos, i, k);
                    shaw_row_sums(w.c, p, pos, i, k);
                    for (int j = 0; j <= i; j++) {
                        real* dk = dqkv + ((size_t)b * T + j) * C3 + C + h * hs;
                        real* dv = dk + C;
                        w.dp[j] *= scale;
                        #pragma omp simd
                        for (int c = 0; c < hs; c++) { dk[c] += w.dp[j] * q[c]; dv[c] += p[j] * g[c]; }
                    }
                    attention_row_accumulate(dq, w.dp, qkv + (size_t)b * T * C3 + C + h * hs, C3, i + 1, hs);
                    for (int r = 0; r <= k; r++) {
                        w.G[r] *= scale;
                        for (int c = 0; c < hs; c++) { w.dAK[(size_t)r * hs + c] += w.G[r] * q[c]; }
                        for (int c = 0; c < hs && aV != NULL; c++) { w.dAV[(size_t)r * hs + c] += w.c[r] * g[c]; }
                    }
                    attention_row_accumulate(dq, w.G, aK, hs, K1, hs);
                }
            }
        }
        int threads = omp_get_num_threads();
        real* dAK = shaw_table(model, model->grads.shaw_ak, 0, l);
        real* dAV = shaw_table(model, model->grads.shaw_av, 1, l);
        #pragma omp for schedule(static)
        for (size_t e = 0; e < (size_t)K1 * hs; e++) {
            for (int t = 0; t < threads; t++) {
                ShawRow tw = shaw_workspace(model, t);
                dAK[e] += tw.dAK[e];
                if (dAV != NULL) { dAV[e] += tw.dAV[e]; }
            }
        }
    }
}

#elif PE_PART == PE_PART_CUDA

// its own kernels (llmc/attention_shaw.cuh), fp32 on CUDA cores in both builds; a^K, a^V read
// in the build's precision, their gradients summed in fp32 from the dq pass's per-block partials
#include "../llmc/attention_shaw.cuh"
#define PE_ATTENTION
// the backward's scratch in floats: the dq pass's partials, the sums for da^K (and da^V) of a
// head per (b, h, query block)
static size_t pe_attention_scratch(const GPT2Config* cfg, int B, int T, int training) {
    return (size_t)shaw_q_blocks(B, T, cfg->num_heads) * (1 + cfg->shaw_values) * (cfg->shaw_k + 1) * (cfg->channels / cfg->num_heads);
}
// layer l's shaw as the kernels see it (the partials are the backward's)
static ShawArgs shaw_layer(GPT2* model, int l) {
    const GPT2Config* c = &model->config;
    size_t n = (size_t)(c->shaw_k + 1) * (c->channels / c->num_heads);
    ShawArgs a;
    a.aK = model->params.shaw_ak + l * n;
    a.aV = c->shaw_values ? model->params.shaw_av + l * n : NULL;
    a.pos = pe_positions(model, l);
    a.partials = model->gs.pe_scratch;
    a.k = c->shaw_k;
    return a;
}
static void pe_attention_forward(GPT2* model, int l, floatX* out, float* lse, const floatX* qkv, int B, int T) {
    const GPT2Config* c = &model->config;
    shaw_attention_forward(out, lse, qkv, shaw_layer(model, l), B, T, c->num_heads, c->channels / c->num_heads,
                           ctx.prop.sharedMemPerBlockOptin, ctx.stream);
}
// dqkv written in full; da^K, da^V of layer l added: the dq pass's partials summed over the
// batch, the heads and the query blocks in a fixed order
static void pe_attention_backward(GPT2* model, int l, floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                                  const float* lse, int B, int T) {
    const GPT2Config* c = &model->config;
    int NH = c->num_heads, n = (c->shaw_k + 1) * (c->channels / NH), per = (1 + c->shaw_values) * n;
    ShawArgs a = shaw_layer(model, l);
    shaw_attention_backward(dqkv, model->gs.att_D, dout, qkv, out, lse, a, B, T, NH, c->channels / NH, ctx.prop.sharedMemPerBlockOptin,
                            ctx.stream);
    partials_reduce(model->grads.shaw_ak + (size_t)l * n, a.partials, shaw_q_blocks(B, T, NH), per, n);
    if (c->shaw_values) { partials_reduce(model->grads.shaw_av + (size_t)l * n, a.partials + n, shaw_q_blocks(B, T, NH), per, n); }
}

#elif PE_PART == PE_PART_TEST

// tensor2tensor's dot_product_attention_relative (common_attention.py:1739-1827) at layer l on
// explicit T x T matrices in double, each (b, h): the relative index idx_ij = clip(pos_j - pos_i,
// -k, k) + k (_generate_relative_positions_matrix :1670-1688) into tables of 2k + 1 rows, row
// idx = this model's row k - idx (the rows k + 1..2k, keys after the query, only meet masked
// pairs: zeros here); logits = q~ k^T + q~ a^K[idx]^T with q~ = q / sqrt(hs) (_relative_attention_inner
// :1705-1736, :1812; q scaled at :4702), the causal mask, the softmax, z = W v + W a^V[idx]
// (:1827; keys only: W v). Returns the largest difference to the model's attention output.
#define PE_REF_ATTENTION
static double pe_ref_attention(GPT2* model, int l, int B, int T) {
    int C = model->config.channels, NH = model->config.num_heads, hs = C / NH, k = model->config.shaw_k, V = 2 * k + 1;
    const real* qkv = model->acts.t.qkv + (size_t)l * model->acts_N * 3 * C;
    const real* out = model->acts.t.atty + (size_t)l * model->acts_N * C;
    double* tK = (double*)calloc_check((size_t)V * hs, sizeof(double));
    double* tV = (double*)calloc_check((size_t)V * hs, sizeof(double));
    for (int idx = 0; idx <= k; idx++) {
        for (int c = 0; c < hs; c++) {
            tK[idx * hs + c] = model->params.shaw_ak[((size_t)l * (k + 1) + k - idx) * hs + c];
            tV[idx * hs + c] = model->config.shaw_values ? model->params.shaw_av[((size_t)l * (k + 1) + k - idx) * hs + c] : 0;
        }
    }
    double* logits = (double*)malloc_check((size_t)T * T * sizeof(double));
    double maxdiff = 0;
    for (int b = 0; b < B; b++) {
        const int* pos = pe_positions(model, l) + (size_t)b * T;
        for (int h = 0; h < NH; h++) {
            #define SHAW_REF_X(t, which) (qkv + ((size_t)b * T + (t)) * 3 * C + (which) * C + h * hs)
            for (int i = 0; i < T; i++) {
                double m = -INFINITY, sum = 0;
                for (int j = 0; j < T; j++) {
                    int d = pos[j] - pos[i], idx = (d < -k ? -k : d > k ? k : d) + k;
                    double e = 0;
                    for (int c = 0; c < hs; c++) { e += SHAW_REF_X(i, 0)[c] / sqrt((double)hs) * (SHAW_REF_X(j, 1)[c] + tK[idx * hs + c]); }
                    logits[(size_t)i * T + j] = j <= i ? e : -INFINITY;
                    m = fmax(m, logits[(size_t)i * T + j]);
                }
                for (int j = 0; j < T; j++) { sum += exp(logits[(size_t)i * T + j] - m); }
                for (int c = 0; c < hs; c++) {
                    double z = 0;
                    for (int j = 0; j <= i; j++) {
                        int d = pos[j] - pos[i], idx = (d < -k ? -k : d) + k;
                        z += exp(logits[(size_t)i * T + j] - m) / sum * (SHAW_REF_X(j, 2)[c] + tV[idx * hs + c]);
                    }
                    maxdiff = fmax(maxdiff, fabs(z - out[((size_t)b * T + i) * C + h * hs + c]));
                }
            }
            #undef SHAW_REF_X
        }
    }
    free(tK); free(tV); free(logits);
    return maxdiff;
}

// the encoding's own option as a test variant: keys (the key table alone, no a^V)
#define PE_TEST_VARIANTS "keys"
static int pe_test_option(GPT2Config* cfg, const char* word) {
    if (strcmp(word, "keys") != 0) { return 0; }
    cfg->shaw_values = 0;
    return 1;
}

// the largest difference between the attention outputs of layer l of two models after a forward pass
static double shaw_attention_diff(const GPT2* a, const GPT2* b, int l, int B, int T) {
    const real* x = a->acts.t.atty + (size_t)l * a->acts_N * a->config.channels;
    const real* y = b->acts.t.atty + (size_t)l * b->acts_N * b->config.channels;
    double d = 0;
    for (size_t e = 0; e < (size_t)B * T * a->config.channels; e++) { d = fmax(d, fabs(x[e] - y[e])); }
    return d;
}

// -ak 20 -av 0 given with a checkpoint of k = 16 with a^V: its tables are its parameters
static void fail_shaw_flags(const void* arg) {
    GPT2Config cfg = tiny_config(8);
    TrainArgs a;
    a.shaw_k = *(const int*)arg;
    a.shaw_values = 0;
    shaw_tables_apply(&cfg, &a, 1);
}

// shaw with both tables 0 is nope; a^K of weight is not; with a^V = 0 it is the keys-only model
// of the same a^K (the same parameters but a^V, the last of them); a^V of weight changes that
#define PE_TESTS
static void pe_tests(void) {
    printf("identities: shaw with zero tables is nope; with a^V = 0 it is shaw keys-only\n");
    int B = 2, T = 30; // beyond k = 16: both the rows of distances < k and row k
    GPT2 model, keys;
    int x[60], y[60];
    tiny_model_batch(&model, T, 31, 32, x, y, B, T);
    GPT2Config cfg = model.config;
    cfg.shaw_values = 0;
    gpt2_build_from_config(&keys, &cfg, 31);
    memcpy(keys.params_memory, model.params_memory, keys.num_parameters * sizeof(real));
    real* aK = model.params.shaw_ak;
    real* aV = model.params.shaw_av;
    real* saved = (real*)malloc_check(model.param_sizes[P_SHAW_AK] * sizeof(real));
    memcpy(saved, aK, model.param_sizes[P_SHAW_AK] * sizeof(real));
    memset(aK, 0, model.param_sizes[P_SHAW_AK] * sizeof(real));
    memset(aV, 0, model.param_sizes[P_SHAW_AV] * sizeof(real));
    gpt2_forward(&model, x, y, B, T, 1);
    double d = 0;
    for (int l = 0; l < model.config.num_layers; l++) { d = fmax(d, attention_vs_reference(&model, l, no_bias, B, T)); }
    check(d < 1e-5, "a^K = a^V = 0: attention equals NoPE's", d, 1e-5);
    memcpy(aK, saved, model.param_sizes[P_SHAW_AK] * sizeof(real));
    gpt2_forward(&model, x, y, B, T, 1);
    gpt2_forward(&keys, x, y, B, T, 1);
    d = 0;
    for (int l = 0; l < model.config.num_layers; l++) { d = fmax(d, attention_vs_reference(&model, l, no_bias, B, T)); }
    check(d > 1e-3, "a^K of weight: attention differs from NoPE's", d, 1e-3);
    d = 0;
    for (int l = 0; l < model.config.num_layers; l++) { d = fmax(d, shaw_attention_diff(&model, &keys, l, B, T)); }
    check(d < 1e-6, "a^V = 0: attention equals shaw keys-only's of the same a^K", d, 1e-6);
    gpt2_free(&model);
    tiny_model_batch(&model, T, 31, 32, x, y, B, T);
    memcpy(keys.params_memory, model.params_memory, keys.num_parameters * sizeof(real));
    gpt2_forward(&model, x, y, B, T, 1);
    gpt2_forward(&keys, x, y, B, T, 1);
    d = shaw_attention_diff(&model, &keys, 0, B, T);
    check(d > 1e-3, "a^V of weight: attention differs from keys-only's", d, 1e-3);
    free(saved);
    gpt2_free(&model);
    gpt2_free(&keys);
    printf("shaw's flags -ak, -av and a checkpoint's tables\n");
    int k = 20;
    expect_failure("-ak 20 -av 0 with a checkpoint of k = 16 and a^V", fail_shaw_flags, &k,
                   "the checkpoint's tables have k = 16 and a^V (-av 1), made with the model");
}

#endif
