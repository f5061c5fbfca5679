/*
GPT-2 training on the CPU, in fp32 (or fp64 for the gradient checks), with the
positional encoding chosen at compile time: the readable reference of every
encoding, forward and backward. The CUDA trainer (train_gpt2.cu) computes the same
thing fast, and a test holds the two equal.

Build and run:  make train_gpt2 PE=cable && ./train_gpt2
The encodings are tabled in the README; each lives in one marked section below
("positional encodings"), with the same function names in train_gpt2.cu.

Memory: attention is computed one query row at a time and keeps only each row's
log-sum-exp for the backward pass, and the classifier works on chunks of rows, so no
T x T and no (B*T, vocab) tensor ever exists; in evaluation only one layer's
activations are kept. A small model evaluates 16k-token windows in well under 1 GiB.
*/
#include <math.h>
#include <tgmath.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef USE_BLAS
#include <cblas.h>
#endif
#include <sys/resource.h>
#include "llmc/utils.h"
#include "llmc/pe.h"
#include "llmc/model.h"
#include "llmc/dataloader.h"
#include "llmc/multiprocess.h"

// The CPU path computes in `real`: float for training; the gradient checks build the
// very same code with -DREAL_DOUBLE so that finite differences are exact to ~1e-9.
#ifdef REAL_DOUBLE
typedef double real;
#define cblas_gemm cblas_dgemm
#else
typedef float real;
#define cblas_gemm cblas_sgemm
#endif

// rows of the classifier processed at once (bounds the logits scratch to CLASSIFIER_CHUNK x Vp)
#define CLASSIFIER_CHUNK 256

// ----------------------------------------------------------------------------
// the model's tensors: parameters (the checkpoint layout, llmc/model.h) and activations

typedef struct {
    real* wte;      // (Vp, C) token embeddings, also the classifier (tied)
    real* wpe;      // (maxT, C) learned position embeddings (PE learned only)
    real* ln1w;     // (L, C)
    real* ln1b;     // (L, C)
    real* qkvw;     // (L, 3C, C)
    real* qkvb;     // (L, 3C)
    real* attprojw; // (L, C, C)
    real* attprojb; // (L, C)
    real* ln2w;     // (L, C)
    real* ln2b;     // (L, C)
    real* fcw;      // (L, 4C, C)
    real* fcb;      // (L, 4C)
    real* fcprojw;  // (L, C, 4C)
    real* fcprojb;  // (L, C)
    real* lnfw;     // (C)
    real* lnfb;     // (C)
    real* cable_wb; // (L, NH, C) CABLE increment layer
    real* cable_bb; // (L, NH)
    real* cable_ww; // (L, NH, C) CABLE v2 weight layer (cable only)
    real* cable_bw; // (L, NH)
    real* t5_table; // (L, NH, 32)
    real* kerple_r1; // (L, NH)
    real* kerple_r2; // (L, NH)
    real* fire_w1;  // (L, 32) FIRE MLP, input 1 -> 32
    real* fire_b1;  // (L, 32)
    real* fire_w2;  // (L, NH, 32) 32 -> NH
    real* fire_b2;  // (L, NH)
    real* fire_c;   // (L)
    real* fire_L;   // (L) the threshold's multiplier l: L = |l| * maxT // 2
    real* kpower_a; // (L, NH) Kerple-power
    real* kpower_p; // (L, NH)
    real* cope_e;   // (L, P, hs) CoPE: the embedding of each position u, P = maxT + 1
    real* txl_wr;   // (L, C, C) Transformer-XL: W_r, the projection of the sinusoids
    real* txl_rw;   // (L, NH, hs) its content bias r_w
    real* txl_rr;   // (L, NH, hs) its position bias r_r
    real* dape_w1;  // (L, D, Cin, k) DAPE's first convolution (llmc/dape.h), Cin = NH or 2 NH
    real* dape_b1;  // (L, D)
    real* dape_w2;  // (L, NH, D, k) its second convolution
    real* dape_b2;  // (L, NH)
} ParameterTensors;

// points the tensors of `params` into one allocation, in checkpoint order
static void point_parameters(ParameterTensors* params, real* memory, const size_t* sizes) {
    real** ptrs[NUM_PARAMETER_TENSORS] = {
        &params->wte, &params->wpe, &params->ln1w, &params->ln1b, &params->qkvw, &params->qkvb,
        &params->attprojw, &params->attprojb, &params->ln2w, &params->ln2b, &params->fcw, &params->fcb,
        &params->fcprojw, &params->fcprojb, &params->lnfw, &params->lnfb,
        &params->cable_wb, &params->cable_bb, &params->cable_ww, &params->cable_bw,
        &params->t5_table, &params->kerple_r1, &params->kerple_r2,
        &params->fire_w1, &params->fire_b1, &params->fire_w2, &params->fire_b2, &params->fire_c, &params->fire_L,
        &params->kpower_a, &params->kpower_p, &params->cope_e,
        &params->txl_wr, &params->txl_rw, &params->txl_rr,
        &params->dape_w1, &params->dape_b1, &params->dape_w2, &params->dape_b2,
    };
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        *(ptrs[i]) = memory;
        memory += sizes[i];
    }
}

// Activations for a capacity of N = B*T tokens and NL stored layers: NL = L when
// training (the backward pass needs every layer), NL = 1 in evaluation (each layer
// overwrites the last). Per-layer tensors are indexed with a stride of N tokens.
#define NUM_ACTIVATION_TENSORS 23
typedef struct {
    real* encoded;   // (N, C) token + position embeddings
    real* ln1;       // (NL, N, C)
    real* ln1_mean;  // (NL, N)
    real* ln1_rstd;  // (NL, N)
    real* qkv;       // (NL, N, 3C) q and k after the PE's rotation (rope)
    real* atty;      // (NL, N, C)
    real* att_lse;   // (NL, B, NH, T) log-sum-exp of each attention row, for the backward pass
    real* attproj;   // (NL, N, C)
    real* residual2; // (NL, N, C)
    real* ln2;       // (NL, N, C)
    real* ln2_mean;  // (NL, N)
    real* ln2_rstd;  // (NL, N)
    real* fch;       // (NL, N, 4C)
    real* fch_gelu;  // (NL, N, 4C)
    real* fcproj;    // (NL, N, C)
    real* residual3; // (NL, N, C)
    real* lnf;       // (N, C)
    real* lnf_mean;  // (N)
    real* lnf_rstd;  // (N)
    real* losses;    // (N) per-token cross-entropy
    real* pe_a;      // (NL, N, NH) CABLE: increment pre-activation x W_b + b_b
    real* pe_s;      // (NL, N, NH) CABLE: S, cumulative sum of the increments
    real* pe_w;      // (NL, N, NH) cable: the per-token weight w = x W_w + b_w
} ActivationTensors;

typedef struct {
    ActivationTensors t;
    real* memory;
    size_t num;      // total elements
} ActivationSet;

static void fill_in_activation_sizes(size_t* sizes, const GPT2Config* cfg, size_t N, size_t NL) {
    size_t C = cfg->channels, NH = cfg->num_heads;
    int cable = cfg->pe == PE_ID_CABLE_V1 || cfg->pe == PE_ID_CABLE_NW || cfg->pe == PE_ID_CABLE || cfg->pe == PE_ID_KCABLE;
    sizes[0] = N * C;          // encoded
    sizes[1] = NL * N * C;     // ln1
    sizes[2] = NL * N;         // ln1_mean
    sizes[3] = NL * N;         // ln1_rstd
    sizes[4] = NL * N * 3 * C; // qkv
    sizes[5] = NL * N * C;     // atty
    sizes[6] = NL * N * NH;    // att_lse
    sizes[7] = NL * N * C;     // attproj
    sizes[8] = NL * N * C;     // residual2
    sizes[9] = NL * N * C;     // ln2
    sizes[10] = NL * N;        // ln2_mean
    sizes[11] = NL * N;        // ln2_rstd
    sizes[12] = NL * N * 4 * C; // fch
    sizes[13] = NL * N * 4 * C; // fch_gelu
    sizes[14] = NL * N * C;    // fcproj
    sizes[15] = NL * N * C;    // residual3
    sizes[16] = N * C;         // lnf
    sizes[17] = N;             // lnf_mean
    sizes[18] = N;             // lnf_rstd
    sizes[19] = N;             // losses
    sizes[20] = cable ? NL * N * NH : 0; // pe_a
    sizes[21] = cable ? NL * N * NH : 0; // pe_s
    sizes[22] = cfg->pe == PE_ID_CABLE ? NL * N * NH : 0; // pe_w
}

static void activation_set_alloc(ActivationSet* a, const GPT2Config* cfg, size_t N, size_t NL) {
    size_t sizes[NUM_ACTIVATION_TENSORS];
    fill_in_activation_sizes(sizes, cfg, N, NL);
    a->num = 0;
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) { a->num += sizes[i]; }
    a->memory = (real*)calloc_check(a->num, sizeof(real));
    real** ptrs[NUM_ACTIVATION_TENSORS] = {
        &a->t.encoded, &a->t.ln1, &a->t.ln1_mean, &a->t.ln1_rstd, &a->t.qkv, &a->t.atty, &a->t.att_lse,
        &a->t.attproj, &a->t.residual2, &a->t.ln2, &a->t.ln2_mean, &a->t.ln2_rstd, &a->t.fch, &a->t.fch_gelu,
        &a->t.fcproj, &a->t.residual3, &a->t.lnf, &a->t.lnf_mean, &a->t.lnf_rstd, &a->t.losses, &a->t.pe_a, &a->t.pe_s, &a->t.pe_w,
    };
    real* p = a->memory;
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) { *(ptrs[i]) = p; p += sizes[i]; }
}

typedef struct {
    GPT2Config config;
    // parameters, their gradients, and the AdamW moments (allocated at the first update)
    ParameterTensors params;
    size_t param_sizes[NUM_PARAMETER_TENSORS];
    real* params_memory;
    size_t num_parameters;
    ParameterTensors grads;
    real* grads_memory;
    real* m_memory;
    real* v_memory;
    // activations and their gradients (the latter only when training)
    ActivationSet acts;
    ActivationSet grads_acts;
    size_t acts_N;        // capacity in tokens, acts_B * acts_T: the stride of per-layer tensors
    int acts_B;           // largest batch the buffers allow
    int acts_T;           // longest sequence the buffers allow
    int acts_layers;      // layers stored: L when training, 1 in evaluation
    real* logits;         // (CLASSIFIER_CHUNK, Vp) classifier scratch
    real* att_scratch;    // (threads, att_scratch_len) one attention row per thread
    size_t att_scratch_len; // pe_attention_scratch: the row workspace of one thread
    real* pe_dbh;         // (B or DAPE's slots, NH, PE_BH_GRADS) per-(batch, head) PE parameter gradients
    struct DapeWork* dape; // DAPE's per-thread row workspaces (the DAPE section)
    int dape_edge_exact;  // DAPE: PyTorch's zero padding past the sequence's end (llmc/dape.h)
    real* alibi_slopes;   // (NH)
    real* pe_table;       // sandwich: (NH, pe_table_len) the bias of each head and distance;
    int pe_table_len;     // txl: (pe_table_len, C) the sinusoids R_n of each distance
    real* pe_rel;         // txl: (acts_T, C) the layer's projected sinusoids P
    real* pe_drel;        // txl: (acts_B, acts_T + 2, C) per batch row: dP, then dr_w, dr_r
    PEEval pe_eval;       // the evaluation variant in effect (llmc/pe.h; zeros: plain)
    uint64_t rp_key;      // randomized positions: the key of the next forward pass's draw (the driver's)
    int* rp_pos;          // (draws, acts_T) the positions of the last forward pass: a draw, or 0..T-1
    int rp_span;          // their range: the draws' L, or T
    // the last forward pass
    int batch_size;
    int seq_len;
    int* inputs;
    int* targets;
    real mean_loss;       // -1 when no targets were given
} GPT2;

// ----------------------------------------------------------------------------
// the layers, forward and backward

// encoder_forward: looks up each token's embedding (the position, if any, is added by the PE)
void encoder_forward(real* out, const int* inp, const real* wte, int B, int T, int C) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        memcpy(out + (size_t)bt * C, wte + (size_t)inp[bt] * C, C * sizeof(real));
    }
}

// encoder_backward: scatters the embedding gradients back to the rows of the used tokens
// (serial: two positions may hold the same token)
void encoder_backward(real* dwte, const real* dout, const int* inp, int B, int T, int C) {
    for (int bt = 0; bt < B * T; bt++) {
        real* d = dwte + (size_t)inp[bt] * C;
        const real* g = dout + (size_t)bt * C;
        for (int c = 0; c < C; c++) { d[c] += g[c]; }
    }
}

// layernorm_forward: normalizes each row to zero mean and unit variance, then scales and
// shifts; keeps mean and 1/std for the backward pass
void layernorm_forward(real* out, real* mean, real* rstd, const real* inp, const real* weight,
                       const real* bias, int N, int C) {
    const real eps = 1e-5;
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const real* x = inp + (size_t)n * C;
        real m = 0;
        for (int i = 0; i < C; i++) { m += x[i]; }
        m /= C;
        real v = 0;
        for (int i = 0; i < C; i++) { real d = x[i] - m; v += d * d; }
        v /= C;
        real s = 1 / sqrt(v + eps);
        real* o = out + (size_t)n * C;
        for (int i = 0; i < C; i++) { o[i] = (x[i] - m) * s * weight[i] + bias[i]; }
        mean[n] = m;
        rstd[n] = s;
    }
}

// layernorm_backward: gradients of the input (per row, in parallel), then of weight and
// bias (summed over rows)
void layernorm_backward(real* dinp, real* dweight, real* dbias, const real* dout, const real* inp,
                        const real* weight, const real* mean, const real* rstd, int N, int C) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const real* g = dout + (size_t)n * C;
        const real* x = inp + (size_t)n * C;
        real m = mean[n], s = rstd[n];
        real dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int i = 0; i < C; i++) {
            real norm = (x[i] - m) * s;
            real dnorm = weight[i] * g[i];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        real* d = dinp + (size_t)n * C;
        for (int i = 0; i < C; i++) {
            real norm = (x[i] - m) * s;
            d[i] += (weight[i] * g[i] - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
    for (int n = 0; n < N; n++) {
        const real* g = dout + (size_t)n * C;
        const real* x = inp + (size_t)n * C;
        for (int i = 0; i < C; i++) {
            dbias[i] += g[i];
            dweight[i] += (x[i] - mean[n]) * rstd[n] * g[i];
        }
    }
}

// matmul_forward_naive: out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias (OC), plain
// loops; the reference for the BLAS version and the path when built without BLAS
void matmul_forward_naive(real* out, const real* inp, const real* weight, const real* bias, int N, int C, int OC) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const real* x = inp + (size_t)n * C;
        for (int o = 0; o < OC; o++) {
            const real* w = weight + (size_t)o * C;
            real acc = bias != NULL ? bias[o] : 0;
            for (int i = 0; i < C; i++) { acc += x[i] * w[i]; }
            out[(size_t)n * OC + o] = acc;
        }
    }
}

// matmul_backward_naive: dinp += dout @ weight (unless dinp is NULL), dweight += dout^T @
// inp, dbias += column sums of dout; plain loops
void matmul_backward_naive(real* dinp, real* dweight, real* dbias, const real* dout, const real* inp,
                           const real* weight, int N, int C, int OC) {
    #pragma omp parallel for if (dinp != NULL)
    for (int n = 0; n < (dinp != NULL ? N : 0); n++) {
        const real* g = dout + (size_t)n * OC;
        real* d = dinp + (size_t)n * C;
        for (int o = 0; o < OC; o++) {
            const real* w = weight + (size_t)o * C;
            for (int i = 0; i < C; i++) { d[i] += g[o] * w[i]; }
        }
    }
    #pragma omp parallel for
    for (int o = 0; o < OC; o++) {
        real* dw = dweight + (size_t)o * C;
        for (int n = 0; n < N; n++) {
            real g = dout[(size_t)n * OC + o];
            const real* x = inp + (size_t)n * C;
            for (int i = 0; i < C; i++) { dw[i] += g * x[i]; }
            if (dbias != NULL) { dbias[o] += g; }
        }
    }
}

#ifdef USE_BLAS
// matmul_forward: as matmul_forward_naive, through BLAS gemm (the bulk of all the FLOPs)
void matmul_forward(real* out, const real* inp, const real* weight, const real* bias, int N, int C, int OC) {
    cblas_gemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1, inp, C, weight, C, 0, out, OC);
    if (bias != NULL) {
        #pragma omp parallel for
        for (int n = 0; n < N; n++) {
            for (int o = 0; o < OC; o++) { out[(size_t)n * OC + o] += bias[o]; }
        }
    }
}

// matmul_backward: as matmul_backward_naive, through BLAS gemm
void matmul_backward(real* dinp, real* dweight, real* dbias, const real* dout, const real* inp,
                     const real* weight, int N, int C, int OC) {
    if (dinp != NULL) { cblas_gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1, dout, OC, weight, C, 1, dinp, C); }
    cblas_gemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1, dout, OC, inp, C, 1, dweight, C);
    if (dbias != NULL) {
        for (int n = 0; n < N; n++) {
            for (int o = 0; o < OC; o++) { dbias[o] += dout[(size_t)n * OC + o]; }
        }
    }
}
#else
#define matmul_forward matmul_forward_naive
#define matmul_backward matmul_backward_naive
#endif

#define GELU_SCALING_FACTOR 0.7978845608028654 // sqrt(2 / pi)
#define GELU_CUBIC 0.044715

// gelu_forward: GELU, tanh approximation (GPT-2's)
void gelu_forward(real* out, const real* inp, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        real x = inp[i];
        out[i] = (real)0.5 * x * (1 + tanh((real)GELU_SCALING_FACTOR * (x + (real)GELU_CUBIC * x * x * x)));
    }
}

// gelu_backward: derivative of the tanh approximation times the upstream gradient
void gelu_backward(real* dinp, const real* inp, const real* dout, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        real x = inp[i];
        real arg = (real)GELU_SCALING_FACTOR * (x + (real)GELU_CUBIC * x * x * x);
        real th = tanh(arg);
        real sech2 = 1 - th * th;
        real local = (real)0.5 * (1 + th)
                   + x * (real)0.5 * sech2 * (real)GELU_SCALING_FACTOR * (1 + 3 * (real)GELU_CUBIC * x * x);
        dinp[i] += local * dout[i];
    }
}

// residual_forward: out = a + b
void residual_forward(real* out, const real* a, const real* b, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) { out[i] = a[i] + b[i]; }
}

// residual_backward: the gradient flows unchanged into both branches
void residual_backward(real* da, real* db, const real* dout, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) { da[i] += dout[i]; db[i] += dout[i]; }
}

// fused_classifier: logits = lnf @ wte^T, softmax over the V real tokens, cross-entropy
// against the targets; when training (dloss != 0) the logits' gradient
// (softmax - onehot) * dloss / scored goes straight back into dlnf and dwte. A target
// TARGET_UNSCORED (answer-only data) gets no loss and no gradient; `scored` of the N rows
// have a target (all of them on a plain shard). Rows go in chunks, so only
// CLASSIFIER_CHUNK x Vp logits ever exist (a 16k-token evaluation would otherwise need
// 3 GiB of logits).
void fused_classifier(real* losses, real* dlnf, real* dwte, real* logits, const real* lnf, const real* wte,
                      const int* targets, real dloss, int N, int scored, int V, int Vp, int C) {
    for (int r0 = 0; r0 < N; r0 += CLASSIFIER_CHUNK) {
        int n = N - r0 < CLASSIFIER_CHUNK ? N - r0 : CLASSIFIER_CHUNK;
        matmul_forward(logits, lnf + (size_t)r0 * C, wte, NULL, n, C, Vp);
        #pragma omp parallel for
        for (int r = 0; r < n; r++) {
            real* row = logits + (size_t)r * Vp;
            int target = targets[r0 + r];
            if (target == TARGET_UNSCORED) {
                losses[r0 + r] = 0;
                if (dloss != 0) { for (int v = 0; v < Vp; v++) { row[v] = 0; } }
                continue;
            }
            real maxv = -INFINITY;
            for (int v = 0; v < V; v++) { if (row[v] > maxv) { maxv = row[v]; } }
            real target_logit = row[target];
            real sum = 0;
            for (int v = 0; v < V; v++) { row[v] = exp(row[v] - maxv); sum += row[v]; } // one exp per entry
            losses[r0 + r] = maxv + log(sum) - target_logit;
            if (dloss != 0) {
                real scale = dloss / scored;
                for (int v = 0; v < V; v++) { row[v] = row[v] / sum * scale; }
                row[target] -= scale;
                for (int v = V; v < Vp; v++) { row[v] = 0; }
            }
        }
        if (dloss != 0) {
            matmul_backward(dlnf + (size_t)r0 * C, dwte, NULL, logits, lnf + (size_t)r0 * C, wte, n, C, Vp);
        }
    }
}

// ============================================================================
// positional encodings
//
// Everything an encoding does is in its block below. The hooks, with the same names
// in train_gpt2.cu:
//   pe_embed_forward / pe_embed_backward  position embeddings added to the token embeddings
//                                         (the backward runs first and may scale the tokens' gradient)
//   pe_layer_forward / pe_layer_backward  per-layer work between the qkv projection and the
//                                         attention: rope's and xpos's rotation of q and k,
//                                         CABLE's per-token increments and their cumulative sum
//   PEBias, pe_bias_setup, pe_bias, pe_bias_backward, pe_bias_reduce
//                                         the additive attention bias b(i, j) of head h,
//                                         computed on the fly inside the attention kernel
//   pe_project                            keeps constrained parameters in range after an update
//   pe_attention_forward / pe_attention_backward, pe_attention_scratch
//                                         a layer's whole attention, for an encoding whose
//                                         term is no bias b(i, j) (CoPE's depends on the row's
//                                         scores), and its workspace per thread
// model->pe_eval is the evaluation variant in effect (RoPE scaling, xPos's blockwise causal
// attention, plain positions): the driver sets it around its extrapolation evaluation,
// plain otherwise. A block defines PE_EMBED, PE_LAYER, PE_BIAS, PE_ATTENTION for the hooks
// it implements; the others do nothing (defaults after the last block; without PE_ATTENTION
// a layer's attention is attention_forward / attention_backward with the bias hooks).
// PE_BH_GRADS is the number of gradient accumulators each (batch, head) of the attention
// backward needs for the PE's shared parameters (summed afterwards by pe_bias_reduce, so
// threads never race). Positions: an encoding reads the position of token t as
// pe_positions(model, l)[t], which is t itself unless the model was trained with randomized
// positions (llmc/pe.h, -rp L); the attention hands the bias hooks the positions of query and
// key, not their indices.
// ============================================================================

// the activations of layer l (slot 0 in evaluation, when only one layer is stored)
static size_t layer_slot(const GPT2* model, int l) { return model->acts_layers == 1 ? 0 : (size_t)l; }

// ---- randomized positions (llmc/pe.h) ----
// are the positions of this forward pass drawn (a model trained with -rp, not under the
// plainpos evaluation variant)?
static int rp_active(const GPT2* model) {
    return model->config.rp_len > 0 && model->pe_eval.variant != PE_EVAL_PLAINPOS;
}

// the positions of a forward pass over T tokens into model->rp_pos: one draw per layer, or
// one for the embedding (rp_draws), from the model's seed and the driver's key; 0..T-1
// when none are drawn (each draw's row then holds them)
static void pe_positions_draw(GPT2* model, int T) {
    const GPT2Config* c = &model->config;
    int draws = rp_draws(c->pe, c->num_layers);
    for (int d = 0; d < draws; d++) {
        int* pos = model->rp_pos + (size_t)d * T;
        if (rp_active(model)) { rp_draw(pos, T, c->rp_len, (uint64_t)c->rp_seed, model->rp_key, d); }
        else { for (int t = 0; t < T; t++) { pos[t] = t; } }
    }
    model->rp_span = rp_active(model) ? c->rp_len : T;
}

// the positions of the tokens in layer l (or in the embedding, l = 0) of the last forward pass
static const int* pe_positions(const GPT2* model, int l) {
    return model->rp_pos + (size_t)(rp_draws(model->config.pe, model->config.num_layers) > 1 ? l : 0) * model->seq_len;
}
// ---- end of randomized positions ----

// kerple and kerple_power: the attention backward's per-(batch, head) pairs of accumulators
// summed into the two per-head gradient tensors of the layer
static void pe_reduce_head_pairs(real* d0, real* d1, const real* dbh, int B, int NH) {
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            d0[h] += dbh[((size_t)b * NH + h) * 2 + 0];
            d1[h] += dbh[((size_t)b * NH + h) * 2 + 1];
        }
    }
}

// keeps a constrained parameter tensor in [lo, hi] (pe_project)
static void pe_clamp(real* x, size_t n, real lo, real hi) {
    for (size_t i = 0; i < n; i++) { x[i] = x[i] < lo ? lo : (x[i] > hi ? hi : x[i]); }
}

#if defined(PE_LEARNED)
// learned: GPT-2's absolute position embeddings wpe [maxT, C]
#define PE_EMBED
static void pe_embed_forward(GPT2* model, real* out, int B, int T) {
    int C = model->config.channels;
    const real* wpe = model->params.wpe;
    const int* pos = pe_positions(model, 0);
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const real* p = wpe + (size_t)pos[bt % T] * C;
        real* o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) { o[c] += p[c]; }
    }
}
static void pe_embed_backward(GPT2* model, real* dout, int B, int T) {
    int C = model->config.channels;
    real* dwpe = model->grads.wpe;
    const int* pos = pe_positions(model, 0);
    for (int bt = 0; bt < B * T; bt++) {
        real* d = dwpe + (size_t)pos[bt % T] * C;
        const real* g = dout + (size_t)bt * C;
        for (int c = 0; c < C; c++) { d[c] += g[c]; }
    }
}

#elif defined(PE_SINUSOIDAL)
// sinusoidal, as fairseq (the ALiBi paper's baseline): the token embeddings times sqrt(C)
// (embed_scale) plus p[pos] with pos = t + 2 (fairseq counts positions from padding_idx + 1),
// p[pos, k] = sin(pos w_k), p[pos, C/2 + k] = cos(pos w_k), w_k = 10000^(-k / (C/2 - 1)),
// k < C/2 (tensor2tensor's layout; an odd C leaves the last column 0). No parameters: the
// backward only scales the tokens' gradient by sqrt(C).
#define PE_EMBED
static void pe_embed_forward(GPT2* model, real* out, int B, int T) {
    int C = model->config.channels, half = C / 2;
    real scale = sqrt((real)C);
    const int* positions = pe_positions(model, 0);
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        double pos = positions[bt % T] + SINUSOIDAL_FIRST_POS;
        real* o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) { o[c] *= scale; }
        for (int k = 0; k < half; k++) {
            double angle = pos * exp(-k * log(10000.0) / (half - 1));
            o[k] += (real)sin(angle);
            o[half + k] += (real)cos(angle);
        }
    }
}
static void pe_embed_backward(GPT2* model, real* dout, int B, int T) {
    int C = model->config.channels;
    real scale = sqrt((real)C);
    #pragma omp parallel for
    for (size_t i = 0; i < (size_t)B * T * C; i++) { dout[i] *= scale; }
}

#elif defined(PE_ROPE) || defined(PE_XPOS)
// rope: rotate each pair (2k, 2k+1) of q and k by the angle pos * theta_k, theta_k =
// 10000^(-2k/hs), in every layer; the backward rotates the gradients back (the transpose
// of a rotation). At evaluation a RoPE scaling variant (-rs; llmc/pe.h rope_frequencies)
// changes theta_k and multiplies q and k by YaRN's mscale.
// xpos (torchscale): rope, then pair k of q at position t times zeta_k^(n/gamma) and of k
// times zeta_k^(-n/gamma), n = t - ceil(T/2), zeta_k = (2k + 0.4 hs) / (1.4 hs), gamma =
// 512: q.k gains zeta_k^((i-j)/gamma), a decay with distance, strongest at high
// frequencies (the centre cancels). With -xb 1, blockwise causal attention beyond the
// training length w: query i sees keys from (floor(i / (w/2)) - 1) * (w/2) on.
#define PE_LAYER
#if defined(PE_XPOS)
#define XPOS_GAMMA XPOS_SCALE_BASE
#else
#define XPOS_GAMMA INFINITY // rope is xpos without the decay: zeta^(n / inf) = 1
#endif
// rotates (direction 1) or rotates back (-1) q and k of every token, token t at position
// pos[t] (of a range of `span` positions: xpos's centre), with the frequencies of the
// evaluation variant e and xPos's decay of scale base gamma
static void rope_rotate(real* qkv, const PEEval* e, double gamma, const int* pos, int span, int B, int T, int C, int NH,
                        int direction) {
    int hs = C / NH;
    double inv_freq[hs / 2];
    double mscale = rope_frequencies(inv_freq, hs, e, T);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            real* row = qkv + ((size_t)b * T + t) * 3 * C;
            for (int k = 0; 2 * k < hs; k++) {
                double angle = pos[t] * inv_freq[k];
                real cs = (real)cos(angle), sn = (real)(direction * sin(angle));
                double z = pow(xpos_zeta(k, hs), (pos[t] - (span + 1) / 2) / gamma);
                double f[2] = {mscale * z, mscale / z}; // the factors of q and k
                for (int part = 0; part < 2; part++) { // q, then k
                    for (int h = 0; h < NH; h++) {
                        real* x = row + part * C + h * hs + 2 * k;
                        real x0 = x[0], x1 = x[1];
                        x[0] = (real)f[part] * (x0 * cs - x1 * sn);
                        x[1] = (real)f[part] * (x0 * sn + x1 * cs);
                    }
                }
            }
        }
    }
}
static void pe_layer_forward(GPT2* model, int l, int B, int T) {
    GPT2Config* c = &model->config;
    rope_rotate(model->acts.t.qkv + layer_slot(model, l) * model->acts_N * 3 * c->channels, &model->pe_eval, XPOS_GAMMA,
                pe_positions(model, l), model->rp_span, B, T, c->channels, c->num_heads, 1);
}
static void pe_layer_backward(GPT2* model, int l, int B, int T) {
    GPT2Config* c = &model->config;
    rope_rotate(model->grads_acts.t.qkv + (size_t)l * model->acts_N * 3 * c->channels, &model->pe_eval, XPOS_GAMMA,
                pe_positions(model, l), model->rp_span, B, T, c->channels, c->num_heads, -1);
}
#if defined(PE_XPOS)
#define PE_BIAS
#define PE_BH_GRADS 0
typedef struct { int half; } PEBias; // the BCA block size w/2; 0: every key j <= i
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    (void)l; (void)B; (void)backward;
    const PEEval* e = &model->pe_eval;
    pb->half = e->variant == PE_EVAL_BCA && T > e->train_len ? e->train_len / 2 : 0;
}
static inline real pe_bias(const PEBias* pb, int b, int h, int i, int j) {
    (void)b; (void)h;
    return pb->half > 0 && j < (i / pb->half - 1) * pb->half ? PE_MASKED_BIAS : 0;
}
static inline void pe_bias_backward(PEBias* pb, int b, int h, int i, int j, real ds) {
    (void)pb; (void)b; (void)h; (void)i; (void)j; (void)ds;
}
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) { (void)pb; (void)model; (void)l; (void)B; }
#endif

#elif defined(PE_NOPE)
// nope: no position information at all (causal masking alone)

#elif defined(PE_ALIBI)
// alibi: b(i, j) = -m_h (i - j), fixed head slopes m_h (llmc/pe.h), not scaled by 1/sqrt(hs)
#define PE_BIAS
#define PE_BH_GRADS 0
typedef struct { const real* slopes; } PEBias;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    (void)l; (void)B; (void)T; (void)backward;
    pb->slopes = model->alibi_slopes;
}
static inline real pe_bias(const PEBias* pb, int b, int h, int i, int j) {
    (void)b;
    return -pb->slopes[h] * (i - j);
}
static inline void pe_bias_backward(PEBias* pb, int b, int h, int i, int j, real ds) {
    (void)pb; (void)b; (void)h; (void)i; (void)j; (void)ds;
}
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) { (void)pb; (void)model; (void)l; (void)B; }

#elif defined(PE_T5)
// t5: a learned scalar per head and distance bucket, b(i, j) = table[h][bucket(i - j)]
#define PE_BIAS
#define PE_BH_GRADS T5_NUM_BUCKETS
typedef struct { const real* table; real* dbh; int NH; int bucket[T5_MAX_DISTANCE]; } PEBias;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    (void)T;
    pb->NH = NH;
    pb->table = model->params.t5_table + (size_t)l * NH * T5_NUM_BUCKETS;
    pb->dbh = model->pe_dbh;
    for (int n = 0; n < T5_MAX_DISTANCE; n++) { pb->bucket[n] = t5_bucket(n); }
    if (backward) { memset(pb->dbh, 0, (size_t)B * NH * PE_BH_GRADS * sizeof(real)); }
}
static inline int pe_t5_bucket(const PEBias* pb, int n) { return n < T5_MAX_DISTANCE ? pb->bucket[n] : T5_NUM_BUCKETS - 1; }
static inline real pe_bias(const PEBias* pb, int b, int h, int i, int j) {
    (void)b;
    return pb->table[h * T5_NUM_BUCKETS + pe_t5_bucket(pb, i - j)];
}
static inline void pe_bias_backward(PEBias* pb, int b, int h, int i, int j, real ds) {
    pb->dbh[((size_t)b * pb->NH + h) * PE_BH_GRADS + pe_t5_bucket(pb, i - j)] += ds;
}
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) {
    int NH = pb->NH;
    real* dtable = model->grads.t5_table + (size_t)l * NH * T5_NUM_BUCKETS;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int k = 0; k < T5_NUM_BUCKETS; k++) { dtable[h * T5_NUM_BUCKETS + k] += pb->dbh[((size_t)b * NH + h) * PE_BH_GRADS + k]; }
        }
    }
}

#elif defined(PE_KERPLE)
// kerple (logarithmic): b(i, j) = -r1_h log(1 + r2_h (i - j)), r1, r2 learned and kept >= 0.01
#define PE_BIAS
#define PE_BH_GRADS 2
typedef struct { const real* r1; const real* r2; real* dbh; int NH; } PEBias;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    (void)T;
    pb->NH = NH;
    pb->r1 = model->params.kerple_r1 + (size_t)l * NH;
    pb->r2 = model->params.kerple_r2 + (size_t)l * NH;
    pb->dbh = model->pe_dbh;
    if (backward) { memset(pb->dbh, 0, (size_t)B * NH * PE_BH_GRADS * sizeof(real)); }
}
static inline real pe_bias(const PEBias* pb, int b, int h, int i, int j) {
    (void)b;
    return -pb->r1[h] * log(1 + pb->r2[h] * (i - j));
}
static inline void pe_bias_backward(PEBias* pb, int b, int h, int i, int j, real ds) {
    real n = (real)(i - j);
    real* d = pb->dbh + ((size_t)b * pb->NH + h) * PE_BH_GRADS;
    d[0] -= ds * log(1 + pb->r2[h] * n);
    d[1] -= ds * pb->r1[h] * n / (1 + pb->r2[h] * n);
}
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) {
    pe_reduce_head_pairs(model->grads.kerple_r1 + (size_t)l * pb->NH, model->grads.kerple_r2 + (size_t)l * pb->NH, pb->dbh, B, pb->NH);
}
#define PE_PROJECT
static void pe_project(GPT2* model) {
    pe_clamp(model->params.kerple_r1, model->param_sizes[P_KERPLE_R1], KERPLE_MIN, INFINITY);
    pe_clamp(model->params.kerple_r2, model->param_sizes[P_KERPLE_R2], KERPLE_MIN, INFINITY);
}

#elif defined(PE_FIRE)
// fire (the FIRE class of the DAPE repo, as its numbers): b(i, j) = f(psi(i - j) /
// (psi(max(L, i)) + eps)) with the query position i counted from 0, psi(x) = log(|c| x + 1),
// f an MLP 1 -> 32 (ReLU) -> NH shared by the heads of a layer; c is learned, and the
// threshold L = |l| * L0 learns its multiplier l (starts at 1) of the fixed L0 = maxT // 2
// (the training length halved).
#define PE_BIAS
#define PE_BH_GRADS (3 * FIRE_HIDDEN + 3) // w1, b1, this head's w2 row, b2, c, l
typedef struct { const real* w1; const real* b1; const real* w2; const real* b2; real c; real l; real L0; real* dbh; int NH; } PEBias;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    (void)T;
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
// the MLP's input u = psi(i - j) / (psi(max(L, i)) + eps); also returns psi's two values and max(L, i)
static inline real fire_input(const PEBias* pb, int i, int j, real* psi_num, real* psi_den, real* lpos) {
    real c = fabs(pb->c);
    real L = fabs(pb->l) * pb->L0;
    *lpos = L > i ? L : (real)i;
    *psi_num = log(c * (i - j) + 1);
    *psi_den = log(c * *lpos + 1) + (real)FIRE_EPS;
    return *psi_num / *psi_den;
}
static inline real pe_bias(const PEBias* pb, int b, int h, int i, int j) {
    (void)b;
    real pn, pd, lp;
    real u = fire_input(pb, i, j, &pn, &pd, &lp);
    const real* w2 = pb->w2 + h * FIRE_HIDDEN;
    real out = pb->b2[h];
    for (int k = 0; k < FIRE_HIDDEN; k++) {
        real hid = pb->w1[k] * u + pb->b1[k];
        if (hid > 0) { out += w2[k] * hid; }
    }
    return out;
}
static inline void pe_bias_backward(PEBias* pb, int b, int h, int i, int j, real ds) {
    real pn, pd, lp;
    real u = fire_input(pb, i, j, &pn, &pd, &lp);
    const real* w2 = pb->w2 + h * FIRE_HIDDEN;
    real* d = pb->dbh + ((size_t)b * pb->NH + h) * PE_BH_GRADS;
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
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) {
    int NH = pb->NH;
    real* dw1 = model->grads.fire_w1 + (size_t)l * FIRE_HIDDEN;
    real* db1 = model->grads.fire_b1 + (size_t)l * FIRE_HIDDEN;
    real* dw2 = model->grads.fire_w2 + (size_t)l * NH * FIRE_HIDDEN;
    real* db2 = model->grads.fire_b2 + (size_t)l * NH;
    for (int b = 0; b < B; b++) {
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

#elif defined(PE_SANDWICH)
// sandwich (NeMo's code; no learned parameters): b(i, j) = (sum_{k=1}^{hs/2} cos((i - j)
// 10000^(-2k/hs)) - hs/2) / (8 (h + 1) / NH), the inner products of sinusoidal embeddings
// (d' = hs) as a bias that decays with distance: 0 on the diagonal, never positive. It
// depends on the head and the distance only: a table [NH][len] of it, computed in double
// and grown as longer sequences come.
#define PE_BIAS
#define PE_BH_GRADS 0
typedef struct { const real* table; int len; } PEBias;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    (void)l; (void)B; (void)backward;
    int NH = model->config.num_heads, hs = model->config.channels / NH;
    int len = T > model->rp_span ? T : model->rp_span; // distances below the positions' range
    if (model->pe_table_len < len) {
        free(model->pe_table);
        model->pe_table = (real*)malloc_check((size_t)NH * len * sizeof(real));
        for (int h = 0; h < NH; h++) {
            for (int n = 0; n < len; n++) { model->pe_table[(size_t)h * len + n] = (real)(sandwich_sum(n, hs) / sandwich_head_scale(h, NH)); }
        }
        model->pe_table_len = len;
    }
    pb->table = model->pe_table;
    pb->len = model->pe_table_len;
}
static inline real pe_bias(const PEBias* pb, int b, int h, int i, int j) {
    (void)b;
    return pb->table[(size_t)h * pb->len + i - j];
}
static inline void pe_bias_backward(PEBias* pb, int b, int h, int i, int j, real ds) {
    (void)pb; (void)b; (void)h; (void)i; (void)j; (void)ds;
}
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) { (void)pb; (void)model; (void)l; (void)B; }

#elif defined(PE_KERPLE_POWER)
// kerple_power (Kerple's power variant): b(i, j) = -a_h (i - j)^p_h, a and p learned per
// layer and head, kept at a >= 0.01 and 0.01 <= p <= 2 (the Kerple code's clamps). The
// gradients d/da = -n^p and d/dp = -a n^p log n are 0 at n = 0 (as PyTorch's pow).
#define PE_BIAS
#define PE_BH_GRADS 2
typedef struct { const real* a; const real* p; real* dbh; int NH; } PEBias;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    (void)T;
    pb->NH = NH;
    pb->a = model->params.kpower_a + (size_t)l * NH;
    pb->p = model->params.kpower_p + (size_t)l * NH;
    pb->dbh = model->pe_dbh;
    if (backward) { memset(pb->dbh, 0, (size_t)B * NH * PE_BH_GRADS * sizeof(real)); }
}
static inline real pe_bias(const PEBias* pb, int b, int h, int i, int j) {
    (void)b;
    return i == j ? 0 : -pb->a[h] * pow((real)(i - j), pb->p[h]);
}
static inline void pe_bias_backward(PEBias* pb, int b, int h, int i, int j, real ds) {
    if (i == j) { return; }
    real n = (real)(i - j), np = pow(n, pb->p[h]);
    real* d = pb->dbh + ((size_t)b * pb->NH + h) * PE_BH_GRADS;
    d[0] -= ds * np;
    d[1] -= ds * pb->a[h] * np * log(n);
}
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) {
    pe_reduce_head_pairs(model->grads.kpower_a + (size_t)l * pb->NH, model->grads.kpower_p + (size_t)l * pb->NH, pb->dbh, B, pb->NH);
}
#define PE_PROJECT
static void pe_project(GPT2* model) {
    pe_clamp(model->params.kpower_a, model->param_sizes[P_KPOWER_A], KERPLE_POWER_MIN, INFINITY);
    pe_clamp(model->params.kpower_p, model->param_sizes[P_KPOWER_P], KERPLE_POWER_MIN, KERPLE_POWER_P_MAX);
}

#elif defined(PE_TXL)
// txl: Transformer-XL's relative encoding as the DAPE repository computes it (its
// RelativePositionalEncodingLayer, with the layer's 1/sqrt(hs)): the scores of head h are
//   s_ij = ((q_i + r_w) . k_j + (q_i + r_r) . P_h[i - j]) / sqrt(hs)
// with r_w, r_r learned per layer and head (hs values each), and P[n] = W_r R_n the
// projection (W_r: C x C, no bias, per layer) of the sinusoids of distance n,
// R_n[k] = sin(n w_k), R_n[C/2 + k] = cos(n w_k), w_k = 10000^(-2k/C) over the model's
// width C; P_h is head h's hs columns of P. No position embedding. The attention's own
// q_i . k_j / sqrt(hs) is the first term's; the rest is the bias, which reads q_i and k_j
// from the layer's qkv (the positions are the tokens': txl takes no -rp):
//   b(i, j) = (r_w . k_j + (q_i + r_r) . P_h[i - j]) / sqrt(hs)
// The official code computes the second term for every (i, key) as a T x T matrix and
// moves row i's entries into place with a rel-shift; here row i - j of P (T x C,
// recomputed per layer from W_r by pe_bias_setup) is read directly. Backward, with
// g = ds_ij / sqrt(hs): dk_j += g r_w, dq_i += g P_h[i - j], dP_h[i - j] += g (q_i + r_r),
// dr_w += g k_j, dr_r += g P_h[i - j], into per-batch-row buffers (pe_drel: each (b, h) is
// one thread's); pe_bias_reduce sums them over the batch and turns dP into dW_r = dP^T R.
#define PE_BIAS
#define PE_BH_GRADS 0
typedef struct {
    const real* qkv; real* dqkv; const real* P; real* dP; const real* rw; const real* rr;
    int T, C, hs; real scale;
} PEBias;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int C = model->config.channels, NH = model->config.num_heads;
    if (model->pe_table_len < T) { // R_n for n < T, computed in double
        free(model->pe_table);
        model->pe_table = (real*)malloc_check((size_t)T * C * sizeof(real));
        for (int n = 0; n < T; n++) {
            for (int k = 0; k < C / 2; k++) {
                double angle = n * pow(10000.0, -2.0 * k / C);
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
static inline real pe_bias(const PEBias* pb, int b, int h, int i, int j) {
    const real* q = pb->qkv + ((size_t)b * pb->T + i) * 3 * pb->C + h * pb->hs;
    const real* k = pb->qkv + ((size_t)b * pb->T + j) * 3 * pb->C + pb->C + h * pb->hs;
    const real* p = pb->P + (size_t)(i - j) * pb->C + h * pb->hs;
    const real* rw = pb->rw + h * pb->hs;
    const real* rr = pb->rr + h * pb->hs;
    real s = 0;
    for (int c = 0; c < pb->hs; c++) { s += rw[c] * k[c] + (q[c] + rr[c]) * p[c]; }
    return s * pb->scale;
}
static inline void pe_bias_backward(PEBias* pb, int b, int h, int i, int j, real ds) {
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
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) {
    int T = pb->T, C = pb->C;
    real* sum = pb->dP; // batch row 0 collects the others
    for (int b = 1; b < B; b++) {
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

#elif defined(PE_CABLE_FAMILY)
// CABLE: each token adds a learned, context-dependent increment d_t = -g(x_t W_b + b_b)
// per head (x = the attention block's input after ln_1), S_t = d_1 + ... + d_t, and the
// bias is made of S:
//   cable_v1  g = softplus           b(i, j) = S_i - S_j         (the released code)
//   cable_nw  g = ReLU               b(i, j) = S_i - S_j         (CABLE v2 without weights)
//   cable     g = ReLU               b(i, j) = w_i (S_i - S_j),  w_i = x_i W_w + b_w
//   kcable    g = ReLU               b(i, j) = -log(1 + (S_i - S_j)^2)
// With every increment equal to -m the bias is ALiBi's -m (i - j). S stays in full
// precision. In the backward pass the attention kernel turns the score gradients into
// dS (column and row sums) and, for cable, dw (row sums); pe_layer_backward then runs
// the reverse cumulative sum and the two small linear layers backward.
#define PE_LAYER
#define PE_BIAS
#define PE_BH_GRADS 0
typedef struct { const real* S; const real* w; real* dS; real* dw; int T; int NH; } PEBias;

static inline real cable_increment(real a) { // g(a), the (positive) size of the step
#if defined(PE_CABLE_V1)
    return a > 20 ? a : log1p(exp(a));
#else
    return a > 0 ? a : 0;
#endif
}
static inline real cable_increment_grad(real a) { // g'(a)
#if defined(PE_CABLE_V1)
    return 1 / (1 + exp(-a));
#else
    return a > 0 ? 1 : 0;
#endif
}

static void pe_layer_forward(GPT2* model, int l, int B, int T) {
    GPT2Config* cfg = &model->config;
    int C = cfg->channels, NH = cfg->num_heads;
    size_t N = model->acts_N, slot = layer_slot(model, l);
    const real* ln1 = model->acts.t.ln1 + slot * N * C;
    real* a = model->acts.t.pe_a + slot * N * NH;
    real* S = model->acts.t.pe_s + slot * N * NH;
    matmul_forward(a, ln1, model->params.cable_wb + (size_t)l * NH * C, model->params.cable_bb + (size_t)l * NH, B * T, C, NH);
#if defined(PE_CABLE)
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
#if defined(PE_CABLE)
    real* dw = model->grads_acts.t.pe_w + (size_t)l * N * NH;
    matmul_backward(dln1, model->grads.cable_ww + (size_t)l * NH * C, model->grads.cable_bw + (size_t)l * NH,
                    dw, ln1, model->params.cable_ww + (size_t)l * NH * C, B * T, C, NH);
#endif
}

static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    size_t N = model->acts_N, slot = layer_slot(model, l);
    (void)B;
    pb->T = T;
    pb->NH = NH;
    pb->S = model->acts.t.pe_s + slot * N * NH;
    pb->w = model->acts.t.pe_w + slot * N * NH;
    pb->dS = backward ? model->grads_acts.t.pe_s + (size_t)l * N * NH : NULL;
    pb->dw = backward ? model->grads_acts.t.pe_w + (size_t)l * N * NH : NULL;
}
static inline real pe_bias(const PEBias* pb, int b, int h, int i, int j) {
    size_t row = (size_t)b * pb->T;
    real diff = pb->S[(row + i) * pb->NH + h] - pb->S[(row + j) * pb->NH + h];
#if defined(PE_CABLE)
    return pb->w[(row + i) * pb->NH + h] * diff;
#elif defined(PE_KCABLE)
    return -log(1 + diff * diff);
#else
    return diff;
#endif
}
static inline void pe_bias_backward(PEBias* pb, int b, int h, int i, int j, real ds) {
    size_t row = (size_t)b * pb->T;
    size_t si = (row + i) * pb->NH + h, sj = (row + j) * pb->NH + h;
#if defined(PE_CABLE)
    real diff = pb->S[si] - pb->S[sj];
    pb->dw[si] += ds * diff;
    ds *= pb->w[si];
#elif defined(PE_KCABLE)
    real diff = pb->S[si] - pb->S[sj];
    ds *= -2 * diff / (1 + diff * diff);
#endif
    pb->dS[si] += ds;
    pb->dS[sj] -= ds;
}
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) { (void)pb; (void)model; (void)l; (void)B; }

#elif defined(PE_COPE)
// cope (contextual position encoding, Golovneva et al. 2024), as the official code
// (facebookresearch/RAM, projects/cope/src/cope/context_position.py): the position of a key
// counts the gates that the query opens for the keys from it up to the query. Per head,
// query i, key j <= i, s_ij = q_i.k_j / sqrt(hs):
//   g_it = sigmoid(s_it)                              the gate of key t (none beyond i)
//   p_ij = min(g_ij + g_i,j+1 + ... + g_ii, P - 1)   key j's position, a suffix sum of the row
//   z_i[u] = q_i.E[u]                                 E [P, hs] per layer, shared by the heads
//   e_ij = (1 - w) z_i[f] + w z_i[c],                 f = floor(p_ij), c = ceil(p_ij), w = p_ij - f
//   logit_ij = s_ij + e_ij / sqrt(hs)                 (the official default divides the sum)
// E starts at zero (CoPE starts as NoPE); P = maxT + 1 (llmc/pe.h cope_positions), so beyond
// the training length the far keys share E[P - 1]. The term depends on the scores of the
// whole row, so it is no bias b(i, j): CoPE computes its own attention (PE_ATTENTION), one
// query row at a time in two passes, keys i down to 0 for the scores and the running sum of
// the gates (the positions), then the logits from z_i[0 .. ceil(p_i0)]: no T x T tensor.
// The backward pass recomputes a row and, with dA_ij = dL/dlogit_ij (p_ij (dout_i.v_j - D_i)):
//   dz_i[f] += dA_ij (1 - w) / sqrt(hs),  dz_i[c] += dA_ij w / sqrt(hs)
//   dpos_ij = dA_ij (z_i[c] - z_i[f]) / sqrt(hs)   (0 where p is clamped, as f = c = P - 1
//                                                   there; floor and ceil have no gradient)
//   dg_it = dpos_i0 + ... + dpos_it                 (key t's gate is in every p_ij with j <= t:
//                                                   a prefix sum)
//   ds_ij = dA_ij + dg_ij g_ij (1 - g_ij),  then dq, dk, dv as plain attention
//   dq_i += sum_u dz_i[u] E[u],  dE[u] += dz_i[u] q_i (summed over every row)
#define PE_ATTENTION
// a thread's workspace for one row: s the scores, a the logits (then the probabilities),
// pos the positions (then their gradients dpos), z; backward: da (dA), dz, and the thread's
// accumulator of dE (P x hs), summed over the threads at the end of the layer
typedef struct { real* s; real* a; real* pos; real* z; real* da; real* dz; real* dE; } CopeRow;

static size_t pe_attention_scratch(const GPT2Config* cfg, int T, int training) {
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
#endif

// defaults: the hooks an encoding does not define do nothing
#ifndef PE_EMBED
static void pe_embed_forward(GPT2* model, real* out, int B, int T) { (void)model; (void)out; (void)B; (void)T; }
static void pe_embed_backward(GPT2* model, real* dout, int B, int T) { (void)model; (void)dout; (void)B; (void)T; }
#endif
#ifndef PE_LAYER
static void pe_layer_forward(GPT2* model, int l, int B, int T) { (void)model; (void)l; (void)B; (void)T; }
static void pe_layer_backward(GPT2* model, int l, int B, int T) { (void)model; (void)l; (void)B; (void)T; }
#endif
#ifndef PE_BIAS
#define PE_BH_GRADS 0
typedef struct { int unused; } PEBias;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    (void)pb; (void)model; (void)l; (void)B; (void)T; (void)backward;
}
static inline real pe_bias(const PEBias* pb, int b, int h, int i, int j) { (void)pb; (void)b; (void)h; (void)i; (void)j; return 0; }
static inline void pe_bias_backward(PEBias* pb, int b, int h, int i, int j, real ds) {
    (void)pb; (void)b; (void)h; (void)i; (void)j; (void)ds;
}
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) { (void)pb; (void)model; (void)l; (void)B; }
#endif
#ifndef PE_PROJECT
static void pe_project(GPT2* model) { (void)model; }
#endif

// ============================================================================
// attention

// attention_row_output: the softmax of a row of logits a[0..i] of head h (a becomes the
// unnormalized probabilities) and the row's output o = sum_j p_j v_j; returns the row's
// log-sum-exp. qkv is (B, T, 3C) with q, k, v side by side.
static real attention_row_output(real* o, real* a, const real* qkv, int b, int h, int i, int T, int C, int hs) {
    real maxv = -INFINITY;
    for (int j = 0; j <= i; j++) { if (a[j] > maxv) { maxv = a[j]; } }
    real sum = 0;
    for (int j = 0; j <= i; j++) { a[j] = exp(a[j] - maxv); sum += a[j]; }
    for (int c = 0; c < hs; c++) { o[c] = 0; }
    for (int j = 0; j <= i; j++) {
        const real* v = qkv + ((size_t)b * T + j) * 3 * C + 2 * C + h * hs;
        real p = a[j] / sum;
        #pragma omp simd
        for (int c = 0; c < hs; c++) { o[c] += p * v[c]; }
    }
    return maxv + log(sum);
}

// attention_forward: causal multi-head attention with the PE's additive bias,
// softmax(q.k / sqrt(hs) + b(i, j)) v, one query row at a time so that only one row of
// scores (per thread) ever exists; each row's log-sum-exp is kept for the backward pass.
// qkv is (B, T, 3C) with q, k, v side by side, out is (B, T, C), lse is (B, NH, T); the
// bias is that of the tokens' positions pos (pe_positions).
void attention_forward(real* out, real* lse, const real* qkv, const PEBias* pb, const int* pos, real* scratch,
                       int B, int T, int C, int NH) {
    int C3 = 3 * C, hs = C / NH;
    real scale = 1 / sqrt((real)hs);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            real* s = scratch + (size_t)omp_get_thread_num() * T;
            for (int i = 0; i < T; i++) {
                const real* q = qkv + ((size_t)b * T + i) * C3 + h * hs;
                for (int j = 0; j <= i; j++) {
                    const real* k = qkv + ((size_t)b * T + j) * C3 + C + h * hs;
                    real dot = 0;
                    #pragma omp simd reduction(+:dot)
                    for (int c = 0; c < hs; c++) { dot += q[c] * k[c]; }
                    s[j] = dot * scale + pe_bias(pb, b, h, pos[i], pos[j]);
                }
                lse[((size_t)b * NH + h) * T + i] = attention_row_output(out + ((size_t)b * T + i) * C + h * hs, s, qkv, b, h, i, T, C, hs);
            }
        }
    }
}

// attention_backward: recomputes each row's probabilities from q, k and the saved
// log-sum-exp (no stored attention matrix), then with D_i = dout_i . out_i:
// ds_ij = p_ij (dout_i . v_j - D_i), dq_i += ds_ij k_j / sqrt(hs), dk_j += ds_ij q_i / sqrt(hs),
// dv_j += p_ij dout_i, and hands ds_ij to the PE's bias backward. Each (b, h) is one
// thread's, so the accumulations never race.
void attention_backward(real* dqkv, const real* dout, const real* qkv, const real* out, const real* lse,
                        PEBias* pb, const int* pos, int B, int T, int C, int NH) {
    int C3 = 3 * C, hs = C / NH;
    real scale = 1 / sqrt((real)hs);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int i = 0; i < T; i++) {
                const real* q = qkv + ((size_t)b * T + i) * C3 + h * hs;
                const real* g = dout + ((size_t)b * T + i) * C + h * hs;
                const real* o = out + ((size_t)b * T + i) * C + h * hs;
                real* dq = dqkv + ((size_t)b * T + i) * C3 + h * hs;
                real row_lse = lse[((size_t)b * NH + h) * T + i];
                real D = 0;
                for (int c = 0; c < hs; c++) { D += g[c] * o[c]; }
                for (int j = 0; j <= i; j++) {
                    const real* k = qkv + ((size_t)b * T + j) * C3 + C + h * hs;
                    const real* v = qkv + ((size_t)b * T + j) * C3 + 2 * C + h * hs;
                    real* dk = dqkv + ((size_t)b * T + j) * C3 + C + h * hs;
                    real* dv = dqkv + ((size_t)b * T + j) * C3 + 2 * C + h * hs;
                    real dot = 0, dp = 0;
                    #pragma omp simd reduction(+:dot, dp)
                    for (int c = 0; c < hs; c++) { dot += q[c] * k[c]; dp += g[c] * v[c]; }
                    real p = exp(dot * scale + pe_bias(pb, b, h, pos[i], pos[j]) - row_lse);
                    real ds = p * (dp - D);
                    #pragma omp simd
                    for (int c = 0; c < hs; c++) {
                        dq[c] += ds * scale * k[c];
                        dk[c] += ds * scale * q[c];
                        dv[c] += p * g[c];
                    }
                    pe_bias_backward(pb, b, h, pos[i], pos[j], ds);
                }
            }
        }
    }
}

#ifndef PE_ATTENTION
// a layer's attention for every encoding but CoPE (PE_ATTENTION): the two functions above,
// the bias through the encoding's hooks; one row of scores per thread
static size_t pe_attention_scratch(const GPT2Config* cfg, int T, int training) { (void)cfg; (void)training; return T; }
static void pe_attention_forward(GPT2* model, int l, real* out, real* lse, const real* qkv, int B, int T) {
    PEBias pb;
    pe_bias_setup(&pb, model, l, B, T, 0);
    attention_forward(out, lse, qkv, &pb, pe_positions(model, l), model->att_scratch, B, T, model->config.channels, model->config.num_heads);
}
static void pe_attention_backward(GPT2* model, int l, real* dqkv, const real* dout, const real* qkv, const real* out,
                                  const real* lse, int B, int T) {
    PEBias pb;
    pe_bias_setup(&pb, model, l, B, T, 1);
    attention_backward(dqkv, dout, qkv, out, lse, &pb, pe_positions(model, l), B, T, model->config.channels, model->config.num_heads);
    pe_bias_reduce(&pb, model, l, B);
}
#endif

// ============================================================================
// DAPE (llmc/dape.h): the logits of all heads as a learned function of the scores and
// biases of all heads, at the same key (DAPE) or at the key and its neighbours
// (DAPE_1xk), exactly as the official code computes them. For query row i, with k the
// kernel width, p = k / 2, s[h][c] = q_i.k_c / sqrt(hs) of head h (after rope's
// rotation) and b[h][c] the base encoding's bias (pe_bias; no channel for nope, rope):
//
//   x_i[c] = (s[0..H)[c], b[0..H)[c])   for 0 <= c <= i; 0 for c > i: the future is
//            zeroed BEFORE the convolution, so nothing at j > i reaches row i
//   h_i[c] = LReLU(b1 + sum_t W1[:, :, t] x_i[c + t - p])          for 0 <= c < e_i
//   a_i[h][c] = s[h][c] + b[h][c] + b2[h] + sum_t W2[h, :, t] . h_i[c + t - p]   for c <= i
//
// with h_i = 0 outside [0, e_i) and a causal softmax over c <= i per head. The hidden
// values just past the diagonal (i < c <= i + p) are not zero: they see x_i[c - p..i].
// e_i = min(i + p + 1, T) as PyTorch's zero padding at the end of the sequence
// (DAPE_EDGE_EXACT = 1, the official code: the last p rows of a window differ), or
// i + p + 1 (0: as if the sequence went on). k = 1 is DAPE (v1), an MLP per (i, j).
//
// One query row at a time with all its heads (loop order b, i, then h), in a workspace
// per thread of O((H + D) x row length): no T x T tensor. The backward pass recomputes a
// row from q, k and the saved log-sum-exp (per row i, with dA = p (dp - D) as usual):
//   dW2[:, :, t] += dA[c] (x) h_i[c + t - p],  dh_i[c'] = sum_t W2[:, :, t]^T dA[c' - t + p]
//   dz = dh * LReLU'(z),  dW1[:, :, t] += dz[c'] (x) x_i[c' + t - p],  dx_i[c] = sum_t W1^T dz
//   ds[h][c] = dA[h][c] + dx_i[c][h],  db[h][c] = dA[h][c] + dx_i[c][H + h]
// ds goes into dq (the row's own) and into dk and dv (into the thread's own buffers, summed
// at the end: no races); db goes to the base's parameters through pe_bias_backward. Each
// tap of a convolution is a small matrix product over the row's columns (dape_gemm), with
// the weights transposed per tap.
// ============================================================================

// one layer's DAPE weights, transposed: w1r[(t Cin + ch) D + d] = W1[d][ch][t] and
// w2r[(t D + d) NH + h] = W2[h][d][t] (checkpoint layouts (D, Cin, k) and (NH, D, k))
typedef struct {
    int K, p, D, Cin, NH, hs, bias, edge_exact; // bias: the base has a bias channel per head
    real* w1r;       // (K Cin, D)
    const real* b1;  // (D)
    real* w2r;       // (K D, NH)
    const real* b2;  // (NH)
} DapeLayer;

// a thread's row workspace (row length up to T) and its parameter-gradient accumulators
typedef struct {
    real* x;    // (T, Cin) scores, then biases, of each key
    real* hid;  // (T + p, D) the hidden values after the LReLU
    real* a;    // (T, NH) logits, then probabilities
    real* da;   // (T, NH) gradient of the logits
    real* dhid; // (T + p, D)
    real* dx;   // (T, Cin)
    real* m;    // (2 NH) per-head running values of the softmax
    real* dw1;  // (K Cin, D) like w1r
    real* db1;  // (D)
    real* dw2;  // (K D, NH) like w2r
    real* db2;  // (NH)
} DapeRow;

struct DapeWork {
    DapeLayer layer;   // the layer being computed (weights transposed into w1r, w2r)
    DapeRow* rows;     // one per thread
    int threads;
    int slot_spread;   // a thread's accumulator slot for the base's parameters is thread * spread
    real* dkv;         // (threads, B, T, 2C) each thread's dk, dv (backward), summed at the end
    real* memory;
};

// copies a layer's weights (checkpoint layout) into dl, transposed into w1r, w2r
static void dape_layer_init(DapeLayer* dl, const real* w1, const real* b1, const real* w2, const real* b2,
                            int K, int D, int Cin, int NH, int hs, int edge_exact, real* w1r, real* w2r) {
    dl->K = K; dl->p = K / 2; dl->D = D; dl->Cin = Cin; dl->NH = NH; dl->hs = hs;
    dl->bias = Cin == 2 * NH;
    dl->edge_exact = edge_exact;
    dl->w1r = w1r; dl->b1 = b1; dl->w2r = w2r; dl->b2 = b2;
    for (int d = 0; d < D; d++) {
        for (int ch = 0; ch < Cin; ch++) {
            for (int t = 0; t < K; t++) { w1r[((size_t)t * Cin + ch) * D + d] = w1[((size_t)d * Cin + ch) * K + t]; }
        }
    }
    for (int h = 0; h < NH; h++) {
        for (int d = 0; d < D; d++) {
            for (int t = 0; t < K; t++) { w2r[((size_t)t * D + d) * NH + h] = w2[((size_t)h * D + d) * K + t]; }
        }
    }
}

// the hidden columns of row i are 0 .. dape_hidden_end - 1
static inline int dape_hidden_end(const DapeLayer* dl, int i, int T) {
    int e = i + dl->p + 1;
    return dl->edge_exact && e > T ? T : e;
}

// c (M, N) += op(a) (M, K) op(b) (K, N), row-major with leading dimensions, op = transpose
// where ta / tb: each tap of the convolutions is such a small product (BLAS when built with it)
static void dape_gemm(int ta, int tb, int M, int N, int K, const real* a, int lda, const real* b, int ldb, real* c, int ldc) {
    if (M <= 0 || N <= 0 || K <= 0) { return; }
#ifdef USE_BLAS
    cblas_gemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1, a, lda, b, ldb, 1, c, ldc);
#else
    for (int m = 0; m < M; m++) {
        for (int k = 0; k < K; k++) {
            real av = ta ? a[(size_t)k * lda + m] : a[(size_t)m * lda + k];
            for (int n = 0; n < N; n++) { c[(size_t)m * ldc + n] += av * (tb ? b[(size_t)n * ldb + k] : b[(size_t)k * ldb + n]); }
        }
    }
#endif
}

// the output columns [*lo, *hi] of tap t whose input column (c + t - p) lies in [0, last]
static inline void dape_tap_range(int t, int p, int out_last, int in_last, int* lo, int* hi) {
    *lo = p - t > 0 ? p - t : 0;
    *hi = in_last + p - t < out_last ? in_last + p - t : out_last;
}

// dape_row_logits: the logits a[c][h], c = 0..i, of query row i of batch row b, every
// head; leaves x and hid in the workspace for the backward pass. Reads nothing of the
// workspace beyond what this row wrote (no key column > i enters).
static void dape_row_logits(DapeRow* w, const DapeLayer* dl, const real* qkv, const PEBias* pb, int b, int i, int T) {
    int NH = dl->NH, hs = dl->hs, C = NH * hs, Cin = dl->Cin, D = dl->D, K = dl->K, p = dl->p;
    real scale = 1 / sqrt((real)hs);
    const real* q = qkv + ((size_t)b * T + i) * 3 * C;
    for (int c = 0; c <= i; c++) {
        const real* k = qkv + ((size_t)b * T + c) * 3 * C + C;
        real* x = w->x + (size_t)c * Cin;
        for (int h = 0; h < NH; h++) {
            real dot = 0;
            #pragma omp simd reduction(+:dot)
            for (int e = 0; e < hs; e++) { dot += q[h * hs + e] * k[h * hs + e]; }
            x[h] = dot * scale;
            if (dl->bias) { x[NH + h] = pe_bias(pb, b, h, i, c); }
        }
    }
    // the first convolution, tap by tap, over the columns whose input lies in [0, i]; the LReLU
    int e_end = dape_hidden_end(dl, i, T), lo, hi;
    for (int c = 0; c < e_end; c++) {
        for (int d = 0; d < D; d++) { w->hid[(size_t)c * D + d] = dl->b1[d]; }
    }
    for (int t = 0; t < K; t++) {
        dape_tap_range(t, p, e_end - 1, i, &lo, &hi);
        dape_gemm(0, 0, hi - lo + 1, D, Cin, w->x + (size_t)(lo + t - p) * Cin, Cin, dl->w1r + (size_t)t * Cin * D, D,
                  w->hid + (size_t)lo * D, D);
    }
    for (size_t e = 0; e < (size_t)e_end * D; e++) { w->hid[e] = w->hid[e] > 0 ? w->hid[e] : (real)DAPE_LRELU_SLOPE * w->hid[e]; }
    // the second convolution over the hidden columns in [0, e_end), then the residual s + b
    for (int c = 0; c <= i; c++) {
        for (int h = 0; h < NH; h++) { w->a[(size_t)c * NH + h] = dl->b2[h]; }
    }
    for (int t = 0; t < K; t++) {
        dape_tap_range(t, p, i, e_end - 1, &lo, &hi);
        dape_gemm(0, 0, hi - lo + 1, NH, D, w->hid + (size_t)(lo + t - p) * D, D, dl->w2r + (size_t)t * D * NH, NH,
                  w->a + (size_t)lo * NH, NH);
    }
    for (int c = 0; c <= i; c++) {
        const real* x = w->x + (size_t)c * Cin;
        real* ac = w->a + (size_t)c * NH;
        for (int h = 0; h < NH; h++) { ac[h] += dl->bias ? x[h] + x[NH + h] : x[h]; }
    }
}

// dape_row_forward: query row i of batch row b, every head: the softmax of its logits
// over c <= i, out_i = sum_c p_c v_c per head, and each head's log-sum-exp
static void dape_row_forward(real* out, real* lse, DapeRow* w, const DapeLayer* dl, const real* qkv, const PEBias* pb,
                             int b, int i, int T) {
    int NH = dl->NH, hs = dl->hs, C = NH * hs;
    dape_row_logits(w, dl, qkv, pb, b, i, T);
    real* maxv = w->m;
    real* sum = w->m + NH;
    for (int h = 0; h < NH; h++) { maxv[h] = -INFINITY; sum[h] = 0; }
    for (int c = 0; c <= i; c++) {
        for (int h = 0; h < NH; h++) { maxv[h] = fmax(maxv[h], w->a[c * NH + h]); }
    }
    for (int c = 0; c <= i; c++) {
        for (int h = 0; h < NH; h++) { w->a[c * NH + h] = exp(w->a[c * NH + h] - maxv[h]); sum[h] += w->a[c * NH + h]; }
    }
    real* o = out + ((size_t)b * T + i) * C;
    for (int e = 0; e < C; e++) { o[e] = 0; }
    for (int c = 0; c <= i; c++) {
        const real* v = qkv + ((size_t)b * T + c) * 3 * C + 2 * C;
        for (int h = 0; h < NH; h++) {
            real pc = w->a[c * NH + h] / sum[h];
            #pragma omp simd
            for (int e = 0; e < hs; e++) { o[h * hs + e] += pc * v[h * hs + e]; }
        }
    }
    for (int h = 0; h < NH; h++) { lse[((size_t)b * NH + h) * T + i] = maxv[h] + log(sum[h]); }
}

// dape_row_backward: the backward pass of query row i of batch row b: recomputes the row,
// then the gradients of its logits, back through the two convolutions into the thread's
// W1, b1, W2, b2 accumulators, the base's parameters (pe_bias_backward into accumulator
// slot `slot`), dq_i (the row's own) and dk, dv of its keys into the thread's dkv (B, T, 2C).
static void dape_row_backward(real* dqkv, real* dkv, DapeRow* w, const DapeLayer* dl, const real* dout,
                              const real* qkv, const real* out, const real* lse, PEBias* pb, int slot, int b, int i, int T) {
    int NH = dl->NH, hs = dl->hs, C = NH * hs, Cin = dl->Cin, D = dl->D, K = dl->K, p = dl->p;
    real scale = 1 / sqrt((real)hs);
    dape_row_logits(w, dl, qkv, pb, b, i, T);
    // dA = p (dout . v - dout . out) per head
    const real* g = dout + ((size_t)b * T + i) * C;
    const real* o = out + ((size_t)b * T + i) * C;
    real* Dh = w->m;
    for (int h = 0; h < NH; h++) {
        real acc = 0;
        for (int e = 0; e < hs; e++) { acc += g[h * hs + e] * o[h * hs + e]; }
        Dh[h] = acc;
    }
    for (int c = 0; c <= i; c++) {
        const real* v = qkv + ((size_t)b * T + c) * 3 * C + 2 * C;
        for (int h = 0; h < NH; h++) {
            real dp = 0;
            #pragma omp simd reduction(+:dp)
            for (int e = 0; e < hs; e++) { dp += g[h * hs + e] * v[h * hs + e]; }
            real pc = exp(w->a[c * NH + h] - lse[((size_t)b * NH + h) * T + i]);
            w->a[c * NH + h] = pc; // the logits, used up, become the probabilities
            w->da[c * NH + h] = pc * (dp - Dh[h]);
        }
    }
    // the second convolution, tap by tap: dW2 += h^T dA, dh += dA W2^T; db2 += dA
    int e_end = dape_hidden_end(dl, i, T), lo, hi;
    memset(w->dhid, 0, (size_t)e_end * D * sizeof(real));
    for (int t = 0; t < K; t++) {
        dape_tap_range(t, p, i, e_end - 1, &lo, &hi);
        dape_gemm(1, 0, D, NH, hi - lo + 1, w->hid + (size_t)(lo + t - p) * D, D, w->da + (size_t)lo * NH, NH,
                  w->dw2 + (size_t)t * D * NH, NH);
        dape_gemm(0, 1, hi - lo + 1, D, NH, w->da + (size_t)lo * NH, NH, dl->w2r + (size_t)t * D * NH, NH,
                  w->dhid + (size_t)(lo + t - p) * D, D);
    }
    for (int c = 0; c <= i; c++) {
        for (int h = 0; h < NH; h++) { w->db2[h] += w->da[(size_t)c * NH + h]; }
    }
    // through the LReLU (h > 0 exactly where z > 0); db1 += dz
    for (int c = 0; c < e_end; c++) {
        real* gc = w->dhid + (size_t)c * D;
        const real* hc = w->hid + (size_t)c * D;
        for (int d = 0; d < D; d++) { gc[d] *= hc[d] > 0 ? 1 : (real)DAPE_LRELU_SLOPE; w->db1[d] += gc[d]; }
    }
    // the first convolution, tap by tap: dW1 += x^T dz, dx += dz W1^T (inputs in [0, i] only)
    memset(w->dx, 0, (size_t)(i + 1) * Cin * sizeof(real));
    for (int t = 0; t < K; t++) {
        dape_tap_range(t, p, e_end - 1, i, &lo, &hi);
        dape_gemm(1, 0, Cin, D, hi - lo + 1, w->x + (size_t)(lo + t - p) * Cin, Cin, w->dhid + (size_t)lo * D, D,
                  w->dw1 + (size_t)t * Cin * D, D);
        dape_gemm(0, 1, hi - lo + 1, Cin, D, w->dhid + (size_t)lo * D, D, dl->w1r + (size_t)t * Cin * D, D,
                  w->dx + (size_t)(lo + t - p) * Cin, Cin);
    }
    // the residual: the scores' and the biases' gradients; then as plain attention
    // dq_i += ds k_c / sqrt(hs), dk_c += ds q_i / sqrt(hs), dv_c += p dout_i
    const real* q = qkv + ((size_t)b * T + i) * 3 * C;
    real* dq = dqkv + ((size_t)b * T + i) * 3 * C;
    for (int c = 0; c <= i; c++) {
        const real* k = qkv + ((size_t)b * T + c) * 3 * C + C;
        real* dk = dkv + ((size_t)b * T + c) * 2 * C;
        real* dv = dk + C;
        const real* dxc = w->dx + (size_t)c * Cin;
        for (int h = 0; h < NH; h++) {
            real ds = w->da[c * NH + h] + dxc[h], pc = w->a[c * NH + h];
            if (dl->bias) { pe_bias_backward(pb, slot, h, i, c, w->da[c * NH + h] + dxc[NH + h]); }
            #pragma omp simd
            for (int e = 0; e < hs; e++) {
                dq[h * hs + e] += ds * scale * k[h * hs + e];
                dk[h * hs + e] += ds * scale * q[h * hs + e];
                dv[h * hs + e] += pc * g[h * hs + e];
            }
        }
    }
}

// dape_attention_forward: causal attention with DAPE's logits, one query row at a time
// with all its heads, the longest rows first; out (B, T, C), lse (B, NH, T)
void dape_attention_forward(real* out, real* lse, const real* qkv, const PEBias* pb, struct DapeWork* dw, int B, int T) {
    #pragma omp parallel for schedule(dynamic, 1)
    for (int r = 0; r < B * T; r++) {
        int b = r / T, i = T - 1 - r % T;
        dape_row_forward(out, lse, &dw->rows[omp_get_thread_num()], &dw->layer, qkv, pb, b, i, T);
    }
}

// dape_attention_backward: every query row on its own (dape_row_backward), the longest
// first, each thread accumulating dk and dv in its own buffer, which are then summed into
// dqkv (two barriers in all). The base's parameter gradients go to the thread's
// accumulator slot, spread so that no two threads share a cache line (pe_bias_reduce sums
// every slot; DAPE's bases have biases that do not depend on the batch row).
void dape_attention_backward(real* dqkv, const real* dout, const real* qkv, const real* out, const real* lse,
                             PEBias* pb, struct DapeWork* dw, int B, int T) {
    int C = dw->layer.NH * dw->layer.hs;
    size_t n = (size_t)B * T * 2 * C;
    #pragma omp parallel
    {
        int thread = omp_get_thread_num();
        real* dkv = dw->dkv + thread * n;
        memset(dkv, 0, n * sizeof(real));
        #pragma omp for schedule(dynamic, 1)
        for (int r = 0; r < B * T; r++) {
            int b = r / T, i = T - 1 - r % T;
            dape_row_backward(dqkv, dkv, &dw->rows[thread], &dw->layer, dout, qkv, out, lse, pb,
                              thread * dw->slot_spread, b, i, T);
        }
        #pragma omp for schedule(static)
        for (int bt = 0; bt < B * T; bt++) {
            real* dk = dqkv + (size_t)bt * 3 * C + C;
            for (int u = 0; u < dw->threads; u++) {
                const real* src = dw->dkv + u * n + (size_t)bt * 2 * C;
                for (int e = 0; e < 2 * C; e++) { dk[e] += src[e]; }
            }
        }
    }
}

// the workspace for B x T tokens: per thread a row workspace, and when training its
// gradients, the parameter-gradient accumulators and the thread's dk, dv buffer
static struct DapeWork* dape_work_alloc(const GPT2Config* cfg, int B, int T, int training) {
    int NH = cfg->num_heads, K = cfg->dape, p = K / 2, D = cfg->dape_width, Cin = dape_in_channels(cfg->pe, NH);
    struct DapeWork* dw = (struct DapeWork*)calloc_check(1, sizeof(struct DapeWork));
    dw->threads = omp_get_max_threads();
    dw->slot_spread = 1 + 64 / (NH * PE_BH_GRADS * (int)sizeof(real) + 1);
    size_t tr = training ? 1 : 0;
    size_t per_row = ((size_t)T * Cin + (size_t)(T + p) * D + (size_t)T * NH) * (1 + tr) + 2 * NH
                   + tr * ((size_t)K * Cin * D + D + (size_t)K * D * NH + NH);
    size_t dkv = tr * (size_t)B * T * 2 * cfg->channels;
    size_t total = (size_t)K * Cin * D + (size_t)K * D * NH + dw->threads * (per_row + dkv);
    dw->memory = (real*)calloc_check(total, sizeof(real));
    dw->rows = (DapeRow*)calloc_check(dw->threads, sizeof(DapeRow));
    real* m = dw->memory;
    dw->layer.w1r = m; m += (size_t)K * Cin * D;
    dw->layer.w2r = m; m += (size_t)K * D * NH;
    for (int t = 0; t < dw->threads; t++) {
        DapeRow* w = &dw->rows[t];
        w->x = m; m += (size_t)T * Cin;
        w->hid = m; m += (size_t)(T + p) * D;
        w->a = m; m += (size_t)T * NH;
        w->m = m; m += 2 * NH;
        if (!training) { continue; }
        w->dx = m; m += (size_t)T * Cin;
        w->dhid = m; m += (size_t)(T + p) * D;
        w->da = m; m += (size_t)T * NH;
        w->dw1 = m; m += (size_t)K * Cin * D;
        w->db1 = m; m += D;
        w->dw2 = m; m += (size_t)K * D * NH;
        w->db2 = m; m += NH;
    }
    dw->dkv = m;
    return dw;
}

static void dape_work_free(struct DapeWork* dw) {
    if (dw == NULL) { return; }
    free(dw->memory);
    free(dw->rows);
    free(dw);
}

// layer l's weights into the workspace (transposed), and when backward its gradient
// accumulators zeroed
static void dape_layer_setup(GPT2* model, int l, int backward) {
    GPT2Config* cfg = &model->config;
    struct DapeWork* dw = model->dape;
    int NH = cfg->num_heads, K = cfg->dape, D = cfg->dape_width, Cin = dape_in_channels(cfg->pe, NH);
    ParameterTensors* p = &model->params;
    dape_layer_init(&dw->layer, p->dape_w1 + (size_t)l * D * Cin * K, p->dape_b1 + (size_t)l * D,
                    p->dape_w2 + (size_t)l * NH * D * K, p->dape_b2 + (size_t)l * NH, K, D, Cin, NH,
                    cfg->channels / NH, model->dape_edge_exact, dw->layer.w1r, dw->layer.w2r);
    if (!backward) { return; }
    for (int t = 0; t < dw->threads; t++) {
        DapeRow* w = &dw->rows[t];
        memset(w->dw1, 0, (size_t)K * Cin * D * sizeof(real));
        memset(w->db1, 0, D * sizeof(real));
        memset(w->dw2, 0, (size_t)K * D * NH * sizeof(real));
        memset(w->db2, 0, NH * sizeof(real));
    }
}

// the threads' gradient accumulators of layer l, summed and transposed back into the
// checkpoint layout of the parameter gradients
static void dape_layer_reduce(GPT2* model, int l) {
    GPT2Config* cfg = &model->config;
    struct DapeWork* dw = model->dape;
    int NH = cfg->num_heads, K = cfg->dape, D = cfg->dape_width, Cin = dape_in_channels(cfg->pe, NH);
    ParameterTensors* g = &model->grads;
    real* dw1 = g->dape_w1 + (size_t)l * D * Cin * K;
    real* db1 = g->dape_b1 + (size_t)l * D;
    real* dw2 = g->dape_w2 + (size_t)l * NH * D * K;
    real* db2 = g->dape_b2 + (size_t)l * NH;
    for (int t = 0; t < dw->threads; t++) {
        const DapeRow* w = &dw->rows[t];
        for (int d = 0; d < D; d++) {
            db1[d] += w->db1[d];
            for (int ch = 0; ch < Cin; ch++) {
                for (int k = 0; k < K; k++) { dw1[((size_t)d * Cin + ch) * K + k] += w->dw1[((size_t)k * Cin + ch) * D + d]; }
            }
        }
        for (int h = 0; h < NH; h++) {
            db2[h] += w->db2[h];
            for (int d = 0; d < D; d++) {
                for (int k = 0; k < K; k++) { dw2[((size_t)h * D + d) * K + k] += w->dw2[((size_t)k * D + d) * NH + h]; }
            }
        }
    }
}

// ============================================================================
// the model

static void gpt2_allocate(GPT2* model) {
    model->dape_edge_exact = DAPE_EDGE_EXACT;
    fill_in_parameter_sizes(model->param_sizes, &model->config);
    model->num_parameters = count_parameters(&model->config);
    model->params_memory = (real*)malloc_check(model->num_parameters * sizeof(real));
    point_parameters(&model->params, model->params_memory, model->param_sizes);
    model->alibi_slopes = (real*)malloc_check(model->config.num_heads * sizeof(real));
    float* slopes = (float*)malloc_check(model->config.num_heads * sizeof(float));
    alibi_slopes(slopes, model->config.num_heads);
    for (int h = 0; h < model->config.num_heads; h++) { model->alibi_slopes[h] = slopes[h]; }
    free(slopes);
}

// builds a freshly initialized model (llmc/model.h: gpt2_init_params) for a configuration
void gpt2_build_from_config(GPT2* model, const GPT2Config* cfg, uint64_t seed) {
    memset(model, 0, sizeof(*model));
    model->config = *cfg;
    gpt2_config_check(cfg, "model configuration");
    if (cfg->pe != PE_ID || cfg->dape != DAPE_ID) {
        fatal("configuration asks for PE '%s' but this binary was built with PE '%s'", model_label(cfg->pe, cfg->dape), model_label(PE_ID, DAPE_ID));
    }
    gpt2_allocate(model);
    float* init = (float*)malloc_check(model->num_parameters * sizeof(float));
    gpt2_init_params(init, cfg, seed);
    for (size_t i = 0; i < model->num_parameters; i++) { model->params_memory[i] = init[i]; }
    free(init);
    model->mean_loss = -1;
}

// loads a checkpoint (fp32 or bf16) after validating its header, size and PE
void gpt2_build_from_checkpoint(GPT2* model, const char* path) {
    memset(model, 0, sizeof(*model));
    int version;
    FILE* f = checkpoint_open(path, &model->config, &version);
    gpt2_allocate(model);
    size_t n = model->num_parameters;
    if (version == CHECKPOINT_FP32) {
        float* buf = (float*)malloc_check(n * sizeof(float));
        fread_check(buf, sizeof(float), n, f, path);
        for (size_t i = 0; i < n; i++) { model->params_memory[i] = buf[i]; }
        free(buf);
    } else {
        uint16_t* buf = (uint16_t*)malloc_check(n * sizeof(uint16_t));
        fread_check(buf, sizeof(uint16_t), n, f, path);
        for (size_t i = 0; i < n; i++) { model->params_memory[i] = bf16_to_float(buf[i]); }
        free(buf);
    }
    fclose(f);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(model->params_memory[i])) { fatal("%s holds a non-finite parameter (index %zu)", path, i); }
    }
    model->mean_loss = -1;
}

// writes the parameters in fp32 (checkpoint version 3), crash-safely
void gpt2_save_checkpoint(const GPT2* model, const char* path) {
    int header[256];
    checkpoint_header_fill(header, &model->config, CHECKPOINT_FP32);
    AtomicFile af;
    atomic_open(&af, path);
    atomic_write(&af, header, sizeof(int), 256);
    float* buf = (float*)malloc_check(model->num_parameters * sizeof(float));
    for (size_t i = 0; i < model->num_parameters; i++) { buf[i] = (float)model->params_memory[i]; }
    atomic_write(&af, buf, sizeof(float), model->num_parameters);
    free(buf);
    atomic_commit(&af);
}

// (re)allocates activations for B x T tokens: every layer when training, one otherwise
static void gpt2_ensure_activations(GPT2* model, int B, int T, int training) {
    size_t N = (size_t)B * T;
    int layers = training ? model->config.num_layers : 1;
    int fits = model->acts.memory != NULL && B <= model->acts_B && T <= model->acts_T
            && (!training || model->grads_acts.memory != NULL);
    if (fits) { return; }
    free(model->acts.memory);
    free(model->grads_acts.memory);
    free(model->att_scratch);
    free(model->pe_dbh);
    dape_work_free(model->dape);
    free(model->logits);
    free(model->inputs);
    free(model->targets);
    free(model->rp_pos);
    free(model->pe_rel);
    free(model->pe_drel);
    memset(&model->grads_acts, 0, sizeof(model->grads_acts));
    activation_set_alloc(&model->acts, &model->config, N, layers);
    if (training) { activation_set_alloc(&model->grads_acts, &model->config, N, layers); }
    model->acts_N = N;
    model->acts_B = B;
    model->acts_T = T;
    model->acts_layers = layers;
    model->att_scratch_len = pe_attention_scratch(&model->config, T, training);
    model->att_scratch = (real*)malloc_check((size_t)omp_get_max_threads() * model->att_scratch_len * sizeof(real));
    model->dape = model->config.dape != 0 ? dape_work_alloc(&model->config, B, T, training) : NULL;
    size_t slots = model->dape != NULL ? (size_t)model->dape->threads * model->dape->slot_spread : 0; // DAPE's
    if (slots < (size_t)B) { slots = B; }
    model->pe_dbh = (real*)malloc_check((slots * model->config.num_heads * PE_BH_GRADS + 1) * sizeof(real));
    model->logits = (real*)malloc_check((size_t)CLASSIFIER_CHUNK * model->config.padded_vocab_size * sizeof(real));
    model->inputs = (int*)malloc_check(N * sizeof(int));
    model->targets = (int*)malloc_check(N * sizeof(int));
    model->rp_pos = (int*)malloc_check((size_t)rp_draws(model->config.pe, model->config.num_layers) * T * sizeof(int));
    int txl = model->config.pe == PE_ID_TXL;
    size_t C = model->config.channels;
    model->pe_rel = txl ? (real*)malloc_check((size_t)T * C * sizeof(real)) : NULL;
    model->pe_drel = txl && training ? (real*)malloc_check((size_t)B * (T + 2) * C * sizeof(real)) : NULL;
}

// allocates the parameter gradients on first use (evaluation never needs them)
static void gpt2_ensure_grads(GPT2* model) {
    if (model->grads_memory == NULL) {
        model->grads_memory = (real*)calloc_check(model->num_parameters, sizeof(real));
        point_parameters(&model->grads, model->grads_memory, model->param_sizes);
    }
}

// longest sequence the model can process: learned embeddings stop at maxT, xPos where its
// scale factors would leave the range of fp32 (llmc/pe.h: xpos_max_length), randomized
// positions at their range L (T of them are drawn from it)
int gpt2_max_length(const GPT2* model) {
    const GPT2Config* c = &model->config;
    int most = INT32_MAX;
    if (c->pe == PE_ID_LEARNED) { most = c->max_seq_len; }
    if (c->pe == PE_ID_XPOS) { most = xpos_max_length(c->channels / c->num_heads); }
    return rp_active(model) && c->rp_len < most ? c->rp_len : most;
}

// Forward pass over B x T tokens. With targets, computes the per-token losses and their
// mean over the scored targets (those not TARGET_UNSCORED: every one of a plain shard).
// dloss is d(objective)/d(mean loss): nonzero when training, and then the
// classifier's backward runs here (fused_classifier) and gpt2_backward continues it.
void gpt2_forward(GPT2* model, const int* inputs, const int* targets, int B, int T, real dloss) {
    GPT2Config* cfg = &model->config;
    int V = cfg->vocab_size, Vp = cfg->padded_vocab_size, L = cfg->num_layers, NH = cfg->num_heads, C = cfg->channels;
    if (T > gpt2_max_length(model)) {
        if (rp_active(model)) { fatal("randomized positions: T = %d tokens cannot be drawn from the range [0, %d) (-rp)", T, cfg->rp_len); }
        if (cfg->pe == PE_ID_LEARNED) { fatal("PE learned cannot process T = %d tokens: its position table ends at maxT = %d", T, cfg->max_seq_len); }
        fatal("PE %s cannot process T = %d tokens: its scale factors leave the floating-point range beyond %d", pe_name(cfg->pe), T, gpt2_max_length(model));
    }
    int scored = 0;
    for (int i = 0; i < B * T; i++) {
        if (inputs[i] < 0 || inputs[i] >= V || (targets != NULL && (targets[i] < TARGET_UNSCORED || targets[i] >= V))) {
            fatal("token id out of range [0, %d) at position %d of the batch", V, i);
        }
        scored += targets != NULL && targets[i] != TARGET_UNSCORED;
    }
    int training = dloss != 0;
    gpt2_ensure_activations(model, B, T, training);
    if (training) { gpt2_ensure_grads(model); }
    model->batch_size = B;
    model->seq_len = T;
    pe_positions_draw(model, T);
    memcpy(model->inputs, inputs, (size_t)B * T * sizeof(int));
    if (targets != NULL) { memcpy(model->targets, targets, (size_t)B * T * sizeof(int)); }
    if (training) { memset(model->grads_acts.memory, 0, model->grads_acts.num * sizeof(real)); }

    ParameterTensors p = model->params;
    ActivationTensors a = model->acts.t;
    size_t N = model->acts_N;
    encoder_forward(a.encoded, inputs, p.wte, B, T, C);
    pe_embed_forward(model, a.encoded, B, T);
    for (int l = 0; l < L; l++) {
        size_t s = layer_slot(model, l);
        // the residual stream entering layer l: the embeddings, or layer l-1's output
        // (in evaluation that is the same slot, read before it is overwritten)
        real* residual = l == 0 ? a.encoded : a.residual3 + layer_slot(model, l - 1) * N * C;
        real* l_ln1 = a.ln1 + s * N * C;
        real* l_qkv = a.qkv + s * N * 3 * C;
        real* l_atty = a.atty + s * N * C;
        real* l_residual2 = a.residual2 + s * N * C;
        real* l_ln2 = a.ln2 + s * N * C;
        real* l_fch = a.fch + s * N * 4 * C;
        real* l_fch_gelu = a.fch_gelu + s * N * 4 * C;
        layernorm_forward(l_ln1, a.ln1_mean + s * N, a.ln1_rstd + s * N, residual,
                          p.ln1w + (size_t)l * C, p.ln1b + (size_t)l * C, B * T, C);
        matmul_forward(l_qkv, l_ln1, p.qkvw + (size_t)l * 3 * C * C, p.qkvb + (size_t)l * 3 * C, B * T, C, 3 * C);
        pe_layer_forward(model, l, B, T);
        if (cfg->dape != 0) {
            PEBias pb;
            pe_bias_setup(&pb, model, l, B, T, 0);
            dape_layer_setup(model, l, 0);
            dape_attention_forward(l_atty, a.att_lse + s * N * NH, l_qkv, &pb, model->dape, B, T);
        } else {
            pe_attention_forward(model, l, l_atty, a.att_lse + s * N * NH, l_qkv, B, T);
        }
        matmul_forward(a.attproj + s * N * C, l_atty, p.attprojw + (size_t)l * C * C, p.attprojb + (size_t)l * C, B * T, C, C);
        residual_forward(l_residual2, residual, a.attproj + s * N * C, (size_t)B * T * C);
        layernorm_forward(l_ln2, a.ln2_mean + s * N, a.ln2_rstd + s * N, l_residual2,
                          p.ln2w + (size_t)l * C, p.ln2b + (size_t)l * C, B * T, C);
        matmul_forward(l_fch, l_ln2, p.fcw + (size_t)l * 4 * C * C, p.fcb + (size_t)l * 4 * C, B * T, C, 4 * C);
        gelu_forward(l_fch_gelu, l_fch, (size_t)B * T * 4 * C);
        matmul_forward(a.fcproj + s * N * C, l_fch_gelu, p.fcprojw + (size_t)l * C * 4 * C, p.fcprojb + (size_t)l * C, B * T, 4 * C, C);
        residual_forward(a.residual3 + s * N * C, l_residual2, a.fcproj + s * N * C, (size_t)B * T * C);
    }
    real* last = a.residual3 + layer_slot(model, L - 1) * N * C;
    layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, last, p.lnfw, p.lnfb, B * T, C);
    if (targets == NULL) { model->mean_loss = -1; return; }
    fused_classifier(a.losses, training ? model->grads_acts.t.lnf : NULL, training ? model->grads.wte : NULL,
                     model->logits, a.lnf, p.wte, targets, dloss, B * T, scored, V, Vp, C);
    real sum = 0;
    for (int i = 0; i < B * T; i++) { sum += a.losses[i]; }
    model->mean_loss = scored > 0 ? sum / scored : 0;
}

void gpt2_zero_grad(GPT2* model) {
    if (model->grads_memory != NULL) { memset(model->grads_memory, 0, model->num_parameters * sizeof(real)); }
}

// Backward pass of the last training forward, continuing from the gradient of lnf that
// the fused classifier left; accumulates into the parameter gradients.
void gpt2_backward(GPT2* model) {
    GPT2Config* cfg = &model->config;
    int B = model->batch_size, T = model->seq_len, L = cfg->num_layers, NH = cfg->num_heads, C = cfg->channels;
    if (model->acts_layers != L || model->mean_loss < 0) { fatal("gpt2_backward needs a training forward pass with targets first"); }
    ParameterTensors p = model->params, g = model->grads;
    ActivationTensors a = model->acts.t, d = model->grads_acts.t;
    size_t N = model->acts_N;
    layernorm_backward(d.residual3 + (size_t)(L - 1) * N * C, g.lnfw, g.lnfb, d.lnf, a.residual3 + (size_t)(L - 1) * N * C,
                       p.lnfw, a.lnf_mean, a.lnf_rstd, B * T, C);
    for (int l = L - 1; l >= 0; l--) {
        size_t o = (size_t)l * N;
        real* residual = l == 0 ? a.encoded : a.residual3 + (o - N) * C;
        real* dresidual = l == 0 ? d.encoded : d.residual3 + (o - N) * C;
        matmul_backward(d.fch_gelu + o * 4 * C, g.fcprojw + (size_t)l * C * 4 * C, g.fcprojb + (size_t)l * C,
                        d.residual3 + o * C, a.fch_gelu + o * 4 * C, p.fcprojw + (size_t)l * C * 4 * C, B * T, 4 * C, C);
        gelu_backward(d.fch + o * 4 * C, a.fch + o * 4 * C, d.fch_gelu + o * 4 * C, (size_t)B * T * 4 * C);
        matmul_backward(d.ln2 + o * C, g.fcw + (size_t)l * 4 * C * C, g.fcb + (size_t)l * 4 * C,
                        d.fch + o * 4 * C, a.ln2 + o * C, p.fcw + (size_t)l * 4 * C * C, B * T, C, 4 * C);
        // the residual stream: residual3 = residual2 + fcproj, residual2 = residual + attproj
        residual_backward(d.residual2 + o * C, d.fcproj + o * C, d.residual3 + o * C, (size_t)B * T * C);
        layernorm_backward(d.residual2 + o * C, g.ln2w + (size_t)l * C, g.ln2b + (size_t)l * C, d.ln2 + o * C,
                           a.residual2 + o * C, p.ln2w + (size_t)l * C, a.ln2_mean + o, a.ln2_rstd + o, B * T, C);
        residual_backward(dresidual, d.attproj + o * C, d.residual2 + o * C, (size_t)B * T * C);
        matmul_backward(d.atty + o * C, g.attprojw + (size_t)l * C * C, g.attprojb + (size_t)l * C,
                        d.attproj + o * C, a.atty + o * C, p.attprojw + (size_t)l * C * C, B * T, C, C);
        if (cfg->dape != 0) { // the base's parameter gradients in one slot per thread
            PEBias pb;
            int slots = model->dape->threads * model->dape->slot_spread;
            pe_bias_setup(&pb, model, l, slots, T, 1);
            dape_layer_setup(model, l, 1);
            dape_attention_backward(d.qkv + o * 3 * C, d.atty + o * C, a.qkv + o * 3 * C, a.atty + o * C,
                                    a.att_lse + o * NH, &pb, model->dape, B, T);
            dape_layer_reduce(model, l);
            pe_bias_reduce(&pb, model, l, slots);
        } else {
            pe_attention_backward(model, l, d.qkv + o * 3 * C, d.atty + o * C, a.qkv + o * 3 * C, a.atty + o * C, a.att_lse + o * NH, B, T);
        }
        pe_layer_backward(model, l, B, T);
        matmul_backward(d.ln1 + o * C, g.qkvw + (size_t)l * 3 * C * C, g.qkvb + (size_t)l * 3 * C,
                        d.qkv + o * 3 * C, a.ln1 + o * C, p.qkvw + (size_t)l * 3 * C * C, B * T, C, 3 * C);
        layernorm_backward(dresidual, g.ln1w + (size_t)l * C, g.ln1b + (size_t)l * C, d.ln1 + o * C,
                           residual, p.ln1w + (size_t)l * C, a.ln1_mean + o, a.ln1_rstd + o, B * T, C);
    }
    pe_embed_backward(model, d.encoded, B, T); // first: it may rescale the tokens' gradient
    encoder_backward(g.wte, d.encoded, model->inputs, B, T, C);
}

// squared L2 norm of all parameter gradients, in double (the sum has millions of terms);
// each thread sums a fixed slice and the slices are added in order, so the result is
// the same bits every time (an OpenMP reduction may combine in any order)
double gpt2_grad_norm_squared(const GPT2* model) {
    double partial[256] = {0};
    int nthreads = omp_get_max_threads() < 256 ? omp_get_max_threads() : 256;
    size_t n = model->num_parameters, chunk = (n + nthreads - 1) / nthreads;
    #pragma omp parallel for num_threads(nthreads) schedule(static, 1)
    for (int t = 0; t < nthreads; t++) {
        size_t end = (t + 1) * chunk < n ? (t + 1) * chunk : n;
        double sum = 0;
        for (size_t i = t * chunk; i < end; i++) { sum += (double)model->grads_memory[i] * model->grads_memory[i]; }
        partial[t] = sum;
    }
    double sum = 0;
    for (int t = 0; t < nthreads; t++) { sum += partial[t]; }
    return sum;
}

// AdamW step t (1-based) at learning rate lr; gradients are multiplied by grad_scale
// first (clipping). Weight decay only on the matrices (llmc/model.h: PARAM_DECAY).
void gpt2_update(GPT2* model, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    if (model->m_memory == NULL) {
        model->m_memory = (real*)calloc_check(model->num_parameters, sizeof(real));
        model->v_memory = (real*)calloc_check(model->num_parameters, sizeof(real));
    }
    real bc1 = 1 - pow(beta1, t), bc2 = 1 - pow(beta2, t);
    size_t offset = 0;
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        real wd = PARAM_DECAY[k] ? weight_decay : 0;
        size_t n = model->param_sizes[k];
        #pragma omp parallel for
        for (size_t i = offset; i < offset + n; i++) {
            real grad = model->grads_memory[i] * grad_scale;
            real m = beta1 * model->m_memory[i] + (1 - beta1) * grad;
            real v = beta2 * model->v_memory[i] + (1 - beta2) * grad * grad;
            model->m_memory[i] = m;
            model->v_memory[i] = v;
            model->params_memory[i] -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * model->params_memory[i]);
        }
        offset += n;
    }
    pe_project(model);
}

// logits over the vocabulary at position t of row b of the last forward pass (sampling)
void gpt2_logits_row(GPT2* model, int b, int t, float* out) {
    int C = model->config.channels, Vp = model->config.padded_vocab_size;
    const real* x = model->acts.t.lnf + ((size_t)b * model->seq_len + t) * C;
    matmul_forward(model->logits, x, model->params.wte, NULL, 1, C, Vp);
    for (int v = 0; v < Vp; v++) { out[v] = (float)model->logits[v]; }
}

// per-token losses of the last forward pass with targets
void gpt2_token_losses(const GPT2* model, float* out) {
    size_t n = (size_t)model->batch_size * model->seq_len;
    for (size_t i = 0; i < n; i++) { out[i] = (float)model->acts.t.losses[i]; }
}

void gpt2_free(GPT2* model) {
    free(model->params_memory);
    free(model->grads_memory);
    free(model->m_memory);
    free(model->v_memory);
    free(model->acts.memory);
    free(model->grads_acts.memory);
    free(model->att_scratch);
    free(model->pe_dbh);
    dape_work_free(model->dape);
    free(model->logits);
    free(model->alibi_slopes);
    free(model->pe_table);
    free(model->inputs);
    free(model->targets);
    free(model->rp_pos);
    free(model->pe_rel);
    free(model->pe_drel);
}

// averages the parameter gradients over the processes (data parallelism)
void gpt2_allreduce_grads(GPT2* model, const MultiProcess* mp) {
    if (mp->world == 1) { return; }
#ifdef REAL_DOUBLE
    mp_allreduce_sum_f64(model->grads_memory, model->num_parameters);
#else
    mp_allreduce_sum_f32(model->grads_memory, model->num_parameters);
#endif
    for (size_t i = 0; i < model->num_parameters; i++) { model->grads_memory[i] /= mp->world; }
}

// the AdamW moments, for the training state file (zeros before the first update)
size_t gpt2_opt_state_size(const GPT2* model) { return model->num_parameters; }

void gpt2_opt_state_get(const GPT2* model, float* m, float* v) {
    for (size_t i = 0; i < model->num_parameters; i++) {
        m[i] = model->m_memory != NULL ? (float)model->m_memory[i] : 0.0f;
        v[i] = model->v_memory != NULL ? (float)model->v_memory[i] : 0.0f;
    }
}

void gpt2_opt_state_set(GPT2* model, const float* m, const float* v) {
    if (model->m_memory == NULL) {
        model->m_memory = (real*)calloc_check(model->num_parameters, sizeof(real));
        model->v_memory = (real*)calloc_check(model->num_parameters, sizeof(real));
    }
    for (size_t i = 0; i < model->num_parameters; i++) { model->m_memory[i] = m[i]; model->v_memory[i] = v[i]; }
}

// peak resident memory of the process so far
double gpt2_peak_memory_mib(const GPT2* model) {
    (void)model;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

// extra text for the step line (the CUDA trainer reports MFU here)
void gpt2_step_info(const GPT2* model, double seconds, long tokens, char* out, size_t n) {
    (void)model; (void)seconds; (void)tokens;
    if (n > 0) { out[0] = '\0'; }
}

// ----------------------------------------------------------------------------
// the program: command line, data, training loop, evaluation (shared with the CUDA trainer)

#define TRAINER_NAME "train_gpt2"
#include "llmc/driver.h"

#ifdef USE_BLAS
// OpenBLAS picks its kernels when it is loaded, and the Debian 12 build does not know
// recent AVX-512 CPUs (e.g. AMD Zen 4: it falls back to its AVX2 "Haswell"/"Zen"
// kernels, half the speed). On such a CPU we run ourselves again with
// OPENBLAS_CORETYPE=SKYLAKEX, the AVX-512 kernels. A user's own setting is kept.
char* openblas_get_corename(void);
static void blas_select_kernels(char** argv) {
    const char* core = openblas_get_corename();
    int avx2_only = strcasecmp(core, "haswell") == 0 || strcasecmp(core, "zen") == 0;
    if (getenv("OPENBLAS_CORETYPE") != NULL || !avx2_only) { return; }
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")
        && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
        setenv("OPENBLAS_CORETYPE", "SKYLAKEX", 1);
        execv("/proc/self/exe", argv); // only returns on failure: then carry on as we are
    }
}
#endif

#ifndef TESTING
int main(int argc, char** argv) {
#ifdef USE_BLAS
    blas_select_kernels(argv);
#endif
    return train_main(argc, argv);
}
#endif
