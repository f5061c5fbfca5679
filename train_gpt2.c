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

// The CPU path computes in `real` (llmc/pe.h): float, or double for the gradient checks;
// floatX, the CUDA path's name for the type of parameters and activations, is real here
typedef real floatX;
#ifdef REAL_DOUBLE
#define cblas_gemm cblas_dgemm
#else
#define cblas_gemm cblas_sgemm
#endif

// inside a parallel region, this thread's share [*lo, *hi) of [0, n): contiguous slices in
// thread order, so that work split this way sums in the same order on any number of threads
static inline void thread_slice(size_t n, size_t* lo, size_t* hi) {
    size_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    *lo = n * t / nt;
    *hi = n * (t + 1) / nt;
}

// rows of the classifier processed at once (bounds the logits scratch to CLASSIFIER_CHUNK x Vp)
#define CLASSIFIER_CHUNK 256

// ----------------------------------------------------------------------------
// the model's tensors: parameters (the checkpoint layout, llmc/model.h) and activations

// a pointer per tensor of llmc/model.h's PARAMETER_TENSORS (GPT-2's, the encoding's, DAPE's)
#define P_FIELD_(NAME, field, decay, size, init) real* field;
typedef struct { PARAMETER_TENSORS(P_FIELD_) } ParameterTensors;

// points the tensors of `params` into one allocation, in checkpoint order
static void point_parameters(ParameterTensors* params, real* memory, const size_t* sizes) {
#define P_POINT_(NAME, field, decay, size, init) params->field = memory; memory += sizes[P_##NAME];
    PARAMETER_TENSORS(P_POINT_)
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
    real* pe_a;      // (NL, N, NH) the encoding's per-token, per-head values (PE_TOKEN_ACTS of them;
    real* pe_s;      // (NL, N, NH) CABLE: the increment's pre-activation x W_b + b_b, S the cumulative
    real* pe_w;      // (NL, N, NH) sum of the increments, and cable's weight w = x W_w + b_w)
} ActivationTensors;

typedef struct {
    ActivationTensors t;
    real* memory;
} ActivationSet;

static void fill_in_activation_sizes(size_t* sizes, const GPT2Config* cfg, size_t N, size_t NL) {
    size_t C = cfg->channels, NH = cfg->num_heads;
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
    sizes[20] = PE_TOKEN_ACTS >= 1 ? NL * N * NH : 0; // pe_a
    sizes[21] = PE_TOKEN_ACTS >= 2 ? NL * N * NH : 0; // pe_s
    sizes[22] = PE_TOKEN_ACTS >= 3 ? NL * N * NH : 0; // pe_w
}

static void activation_set_alloc(ActivationSet* a, const GPT2Config* cfg, size_t N, size_t NL) {
    size_t sizes[NUM_ACTIVATION_TENSORS];
    fill_in_activation_sizes(sizes, cfg, N, NL);
    size_t num = 0;
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) { num += sizes[i]; }
    a->memory = (real*)calloc_check(num, sizeof(real));
    real** ptrs[NUM_ACTIVATION_TENSORS] = {
        &a->t.encoded, &a->t.ln1, &a->t.ln1_mean, &a->t.ln1_rstd, &a->t.qkv, &a->t.atty, &a->t.att_lse,
        &a->t.attproj, &a->t.residual2, &a->t.ln2, &a->t.ln2_mean, &a->t.ln2_rstd, &a->t.fch, &a->t.fch_gelu,
        &a->t.fcproj, &a->t.residual3, &a->t.lnf, &a->t.lnf_mean, &a->t.lnf_rstd, &a->t.losses, &a->t.pe_a, &a->t.pe_s, &a->t.pe_w,
    };
    real* p = a->memory;
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) { *(ptrs[i]) = p; p += sizes[i]; }
}

// zeroes what a pass over n tokens uses of a set of capacity N (n <= N): each tensor's first
// n tokens of every stored layer, each thread a slice of each (a batch's length buckets run
// passes smaller than the buffers)
static void activation_set_clear(ActivationSet* a, const GPT2Config* cfg, size_t N, size_t NL, size_t n) {
    size_t width[NUM_ACTIVATION_TENSORS], layered[NUM_ACTIVATION_TENSORS];
    fill_in_activation_sizes(width, cfg, 1, 1);   // per token and layer
    fill_in_activation_sizes(layered, cfg, 1, 2); // twice that where stored per layer
    #pragma omp parallel
    {
        real* p = a->memory;
        for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) {
            size_t layers = layered[i] > width[i] ? NL : 1, lo, hi;
            thread_slice(n * width[i], &lo, &hi);
            for (size_t l = 0; l < layers; l++) { memset(p + l * N * width[i] + lo, 0, (hi - lo) * sizeof(real)); }
            p += layers * N * width[i];
        }
    }
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
    // activations and their gradients (the latter only when training); a second residual
    // stream's (PE_STREAMS 2: complex's imaginary part) in acts2, grads_acts2
    ActivationSet acts;
    ActivationSet grads_acts;
    ActivationSet acts2;
    ActivationSet grads_acts2;
    size_t acts_N;        // capacity in tokens, acts_B * acts_T: the stride of per-layer tensors
    int acts_B;           // largest batch the buffers allow
    int acts_T;           // longest sequence the buffers allow
    int acts_layers;      // layers stored: L when training, 1 in evaluation
    real* logits;         // (CLASSIFIER_CHUNK, Vp) classifier scratch
    real* att_scratch;    // (threads, att_scratch_len) one attention row per thread
    size_t att_scratch_len; // pe_attention_scratch: the row workspace of one thread
    real* pe_dbh;         // (B or DAPE's slots, NH, PE_BH_GRADS) per-(batch, head) PE parameter gradients
    struct DapeWork* dape; // DAPE's per-thread row workspaces (the DAPE section)
    int dape_edge_exact;  // DAPE: PyTorch's zero padding past the sequence's end (pe/dape.h)
    real* alibi_slopes;   // (NH)
    real* pe_table;       // sandwich: (NH, pe_table_len) the bias of each head and distance;
    int pe_table_len;     // txl: (pe_table_len, C) the sinusoids R_n of each distance
    real* pe_rel;         // txl: (acts_T, C) the layer's projected sinusoids P
    real* pe_lnf;         // complex_order: (acts_N, C) lnf of the real stream (a.lnf holds the classifier's input)
    real* pe_drel;        // txl: (acts_B, acts_T + 2, C) per batch row: dP, then dr_w, dr_r
    struct PEState* pe_state; // the encoding's own state across passes (floater: its ODE's solutions; pe_free)
    PEEval pe_eval;       // the evaluation variant in effect (llmc/pe.h; zeros: plain)
    const int* pos_in;    // (B, T) the positions given for the next forward passes (NULL: none; llmc/pe.h)
    uint64_t rp_key;      // randomized positions: the key of the next forward pass's draw (the driver's)
    int rp_draw_len;      // drawn positions per draw (the forward pass takes the first T): the driver's
                          // batch length while it runs the batch's rows in length buckets; 0: T
    int* positions;       // (draws, acts_B, acts_T) the positions of the last forward pass (pe_positions)
    int pos_span;         // their range: the largest given + 1, the draws' L, or T
    // the last forward pass
    int training;         // a training pass (dloss given: CAPE's augmented positions, pe/sinusoidal.h)
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

// position_embed_forward: adds to each token's embedding the row of a table of positions
// (learned's wpe, BiPE's within-segment table) at its position pos[bt]; the backward is
// encoder_backward's scatter into the table's rows
void position_embed_forward(real* out, const real* table, const int* pos, int N, int C) {
    #pragma omp parallel for
    for (int bt = 0; bt < N; bt++) {
        const real* p = table + (size_t)pos[bt] * C;
        real* o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) { o[c] += p[c]; }
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
        #pragma omp simd reduction(+:m)
        for (int i = 0; i < C; i++) { m += x[i]; }
        m /= C;
        real v = 0;
        #pragma omp simd reduction(+:v)
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
        #pragma omp simd reduction(+:dnorm_mean, dnorm_norm_mean)
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
    #pragma omp parallel
    {
        size_t i0, i1; // each thread a slice of the channels
        thread_slice(C, &i0, &i1);
        for (int n = 0; n < N; n++) {
            const real* g = dout + (size_t)n * C;
            const real* x = inp + (size_t)n * C;
            for (size_t i = i0; i < i1; i++) {
                dbias[i] += g[i];
                dweight[i] += (x[i] - mean[n]) * rstd[n] * g[i];
            }
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
// gemm_rows: rows [m0, m1) of the row-major BLAS gemm out (M, N) = op(A) op(B) + beta out.
// The matmuls below split their rows among the OpenMP threads, one gemm each (inside a
// parallel region OpenBLAS runs on the calling thread): OpenBLAS itself keeps products of a
// small model's sizes on one thread (a 736 x 192 x 64 product runs no faster on two).
static void gemm_rows(int transA, int transB, size_t m0, size_t m1, int N, int K, const real* A, int lda,
                      const real* B, int ldb, real beta, real* out, int ldo) {
    if (m1 <= m0) { return; }
    cblas_gemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, (int)(m1 - m0), N, K,
               1, transA ? A + m0 : A + m0 * lda, lda, B, ldb, beta, out + m0 * ldo, ldo);
}

// matmul_forward: as matmul_forward_naive, through BLAS gemm (the bulk of all the FLOPs),
// each thread a slice of the rows: the bias written first and the product added to it (a
// gemm with beta 0 would clear the rows itself first)
void matmul_forward(real* out, const real* inp, const real* weight, const real* bias, int N, int C, int OC) {
    #pragma omp parallel
    {
        size_t n0, n1;
        thread_slice(N, &n0, &n1);
        if (bias != NULL) {
            for (size_t n = n0; n < n1; n++) {
                for (int o = 0; o < OC; o++) { out[n * OC + o] = bias[o]; }
            }
        }
        gemm_rows(0, 1, n0, n1, OC, C, inp, C, weight, C, bias != NULL ? 1 : 0, out, OC);
    }
}

// matmul_backward: as matmul_backward_naive, through BLAS gemm: each thread a slice of
// dinp's rows, then a slice of dweight's rows and the same columns of dbias
void matmul_backward(real* dinp, real* dweight, real* dbias, const real* dout, const real* inp,
                     const real* weight, int N, int C, int OC) {
    #pragma omp parallel
    {
        size_t lo, hi;
        if (dinp != NULL) {
            thread_slice(N, &lo, &hi);
            gemm_rows(0, 0, lo, hi, C, OC, dout, OC, weight, C, 1, dinp, C);
        }
        thread_slice(OC, &lo, &hi);
        gemm_rows(1, 0, lo, hi, C, N, dout, OC, inp, C, 1, dweight, C);
        if (dbias != NULL) {
            for (int n = 0; n < N; n++) {
                for (size_t o = lo; o < hi; o++) { dbias[o] += dout[(size_t)n * OC + o]; }
            }
        }
    }
}
#else
#define matmul_forward matmul_forward_naive
#define matmul_backward matmul_backward_naive
#endif

// exp_vec: e^x as a function the compiler can vectorize (libm's expf is called one value at a
// time): x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, Cody and Waite's reduction), e^r
// by Cephes' degree-7 polynomial, times 2^n built in the exponent bits (in two halves, so
// that no power overflows before the product does). Within 1.01 ulp of the exact value
// wherever that is a normal float (measured over every float; test_gpt2.c checks every
// 127th), 0 where expf is 0, inf where expf overflows, NaN for NaN. The fp64 build calls exp.
#ifdef REAL_DOUBLE
static inline real exp_vec(real x) { return exp(x); }
#else
static inline float exp_vec(float x) {
    float xc = x > -104.0f ? (x < 89.0f ? x : 89.0f) : -104.0f; // a NaN becomes -104 here, and is returned below
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; // round(x log2 e): 1.5 2^23
    float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * (r * r) + r + 1.0f;
    int32_t ni = (int32_t)n, n1 = ni >> 1, n2 = ni - n1;
    int32_t bits1 = (n1 + 127) << 23, bits2 = (n2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &bits1, sizeof(float));
    memcpy(&s2, &bits2, sizeof(float));
    y = y * s1 * s2;
    return x > 88.72283935546875f ? INFINITY : (x == x ? y : x);
}
#endif

#define GELU_SCALING_FACTOR 0.7978845608028654 // sqrt(2 / pi)
#define GELU_CUBIC 0.044715

// gelu_forward: GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh(u)) with
// u = sqrt(2/pi) (x + 0.044715 x^3), written as x sigmoid(2u) (1 + tanh(u) = 2 sigmoid(2u)):
// the same function with one exp instead of a tanh (a third of a small model's step otherwise),
// and that exp vectorized (exp_vec)
void gelu_forward(real* out, const real* inp, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        real x = inp[i];
        real u = (real)GELU_SCALING_FACTOR * (x + (real)GELU_CUBIC * x * x * x);
        out[i] = x / (1 + exp_vec(-2 * u));
    }
}

// gelu_backward: d/dx [x s] = s + 2 x s (1 - s) du/dx with s = sigmoid(2u) (the forward's
// form; 2 s (1 - s) = 0.5 sech^2(u)), times the upstream gradient
void gelu_backward(real* dinp, const real* inp, const real* dout, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        real x = inp[i];
        real u = (real)GELU_SCALING_FACTOR * (x + (real)GELU_CUBIC * x * x * x);
        real s = 1 / (1 + exp_vec(-2 * u));
        real du = (real)GELU_SCALING_FACTOR * (1 + 3 * (real)GELU_CUBIC * x * x);
        dinp[i] += (s + 2 * x * s * (1 - s) * du) * dout[i];
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
// CLASSIFIER_CHUNK x V logits ever exist (a 16k-token evaluation would otherwise need
// 3 GiB of logits); only wte's V real rows enter (its padding rows get no gradient).
void fused_classifier(real* losses, real* dlnf, real* dwte, real* logits, const real* lnf, const real* wte,
                      const int* targets, real dloss, int N, int scored, int V, int C) {
    for (int r0 = 0; r0 < N; r0 += CLASSIFIER_CHUNK) {
        int n = N - r0 < CLASSIFIER_CHUNK ? N - r0 : CLASSIFIER_CHUNK;
        matmul_forward(logits, lnf + (size_t)r0 * C, wte, NULL, n, C, V);
        #pragma omp parallel for
        for (int r = 0; r < n; r++) {
            real* row = logits + (size_t)r * V;
            int target = targets[r0 + r];
            if (target == TARGET_UNSCORED) {
                losses[r0 + r] = 0;
                if (dloss != 0) { for (int v = 0; v < V; v++) { row[v] = 0; } }
                continue;
            }
            real maxv = -INFINITY;
            for (int v = 0; v < V; v++) { if (row[v] > maxv) { maxv = row[v]; } }
            real target_logit = row[target];
            for (int v = 0; v < V; v++) { row[v] = exp_vec(row[v] - maxv); } // one exp per entry
            double sum = 0; // in double: a float sum of 50k terms, one at a time, is off by 1e-3 in the loss
            for (int v = 0; v < V; v++) { sum += row[v]; }
            losses[r0 + r] = maxv + log(sum) - target_logit;
            if (dloss != 0) {
                real scale = dloss / scored;
                for (int v = 0; v < V; v++) { row[v] = row[v] / sum * scale; }
                row[target] -= scale;
            }
        }
        if (dloss != 0) {
            matmul_backward(dlnf + (size_t)r0 * C, dwte, NULL, logits, lnf + (size_t)r0 * C, wte, n, C, V);
        }
    }
}

// ============================================================================
// the transformer block of one residual stream: GPT-2's, and an encoding's second stream
// (PE_STREAMS 2: complex's imaginary part, with weights of its own) runs it again; the
// attention between the two halves couples the streams

// the activations of layer l (slot 0 in evaluation, when only one layer is stored)
static size_t layer_slot(const GPT2* model, int l) { return model->acts_layers == 1 ? 0 : (size_t)l; }

// a block's weights at one layer (or their gradients: the same pointers into model->grads)
typedef struct {
    real *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} BlockParams;

// layer l's block of the tensors whose first layer's are w (each tensor holds every layer's
// values consecutively, in GPT-2's shapes)
static BlockParams block_layer(BlockParams w, int l, int C) {
    size_t c = C, o = (size_t)l;
    BlockParams at = {w.ln1w + o * c, w.ln1b + o * c, w.qkvw + o * 3 * c * c, w.qkvb + o * 3 * c,
                      w.attprojw + o * c * c, w.attprojb + o * c, w.ln2w + o * c, w.ln2b + o * c,
                      w.fcw + o * 4 * c * c, w.fcb + o * 4 * c, w.fcprojw + o * c * 4 * c, w.fcprojb + o * c};
    return at;
}

// GPT-2's block of layer l in t (the parameters or their gradients)
static BlockParams gpt2_block(const ParameterTensors* t, int l, int C) {
    BlockParams w = {t->ln1w, t->ln1b, t->qkvw, t->qkvb, t->attprojw, t->attprojb, t->ln2w, t->ln2b, t->fcw, t->fcb, t->fcprojw, t->fcprojb};
    return block_layer(w, l, C);
}

// the stream entering layer l in a stream's activations (or their gradients): the
// embeddings, or layer l-1's output (in evaluation the same slot as layer l's, read before
// it is overwritten)
static real* block_input(const GPT2* model, const ActivationTensors* a, int l) {
    return l == 0 ? a->encoded : a->residual3 + layer_slot(model, l - 1) * model->acts_N * model->config.channels;
}

// block_qkv_forward: ln1 and the qkv projection of the stream's input, into layer slot s
static void block_qkv_forward(ActivationTensors* a, size_t s, size_t N, const real* input, const BlockParams* w, int BT, int C) {
    layernorm_forward(a->ln1 + s * N * C, a->ln1_mean + s * N, a->ln1_rstd + s * N, input, w->ln1w, w->ln1b, BT, C);
    matmul_forward(a->qkv + s * N * 3 * C, a->ln1 + s * N * C, w->qkvw, w->qkvb, BT, C, 3 * C);
}

// block_output_forward: the block after its attention (atty): the projection and its
// residual, ln2, the MLP and its residual, into residual3 of slot s
static void block_output_forward(ActivationTensors* a, size_t s, size_t N, const real* input, const BlockParams* w, int BT, int C) {
    matmul_forward(a->attproj + s * N * C, a->atty + s * N * C, w->attprojw, w->attprojb, BT, C, C);
    residual_forward(a->residual2 + s * N * C, input, a->attproj + s * N * C, (size_t)BT * C);
    layernorm_forward(a->ln2 + s * N * C, a->ln2_mean + s * N, a->ln2_rstd + s * N, a->residual2 + s * N * C, w->ln2w, w->ln2b, BT, C);
    matmul_forward(a->fch + s * N * 4 * C, a->ln2 + s * N * C, w->fcw, w->fcb, BT, C, 4 * C);
    gelu_forward(a->fch_gelu + s * N * 4 * C, a->fch + s * N * 4 * C, (size_t)BT * 4 * C);
    matmul_forward(a->fcproj + s * N * C, a->fch_gelu + s * N * 4 * C, w->fcprojw, w->fcprojb, BT, 4 * C, C);
    residual_forward(a->residual3 + s * N * C, a->residual2 + s * N * C, a->fcproj + s * N * C, (size_t)BT * C);
}

// block_output_backward: from d residual3 of layer l back to d atty, adding into d input
// and the gradients g (training: every layer stored, slot l)
static void block_output_backward(const ActivationTensors* a, ActivationTensors* d, real* dinput, size_t l, size_t N,
                                  const BlockParams* w, const BlockParams* g, int BT, int C) {
    size_t o = l * N;
    matmul_backward(d->fch_gelu + o * 4 * C, g->fcprojw, g->fcprojb, d->residual3 + o * C, a->fch_gelu + o * 4 * C, w->fcprojw, BT, 4 * C, C);
    gelu_backward(d->fch + o * 4 * C, a->fch + o * 4 * C, d->fch_gelu + o * 4 * C, (size_t)BT * 4 * C);
    matmul_backward(d->ln2 + o * C, g->fcw, g->fcb, d->fch + o * 4 * C, a->ln2 + o * C, w->fcw, BT, C, 4 * C);
    // residual3 = residual2 + fcproj, residual2 = input + attproj
    residual_backward(d->residual2 + o * C, d->fcproj + o * C, d->residual3 + o * C, (size_t)BT * C);
    layernorm_backward(d->residual2 + o * C, g->ln2w, g->ln2b, d->ln2 + o * C, a->residual2 + o * C, w->ln2w,
                       a->ln2_mean + o, a->ln2_rstd + o, BT, C);
    residual_backward(dinput, d->attproj + o * C, d->residual2 + o * C, (size_t)BT * C);
    matmul_backward(d->atty + o * C, g->attprojw, g->attprojb, d->attproj + o * C, a->atty + o * C, w->attprojw, BT, C, C);
}

// block_qkv_backward: from d qkv of layer l back into d input and the gradients g
static void block_qkv_backward(const ActivationTensors* a, ActivationTensors* d, const real* input, real* dinput, size_t l,
                               size_t N, const BlockParams* w, const BlockParams* g, int BT, int C) {
    size_t o = l * N;
    matmul_backward(d->ln1 + o * C, g->qkvw, g->qkvb, d->qkv + o * 3 * C, a->ln1 + o * C, w->qkvw, BT, C, 3 * C);
    layernorm_backward(dinput, g->ln1w, g->ln1b, d->ln1 + o * C, input, w->ln1w, a->ln1_mean + o, a->ln1_rstd + o, BT, C);
}

// ============================================================================
// positional encodings
//
// The encoding this binary is built for lives in its own file, pe/<file>.h (llmc/pe_list.h
// names it), whose CPU part is included below. Its hooks, with the same names in
// train_gpt2.cu (docs/adding-an-encoding.md says what each does and when it is called):
//   pe_embed_forward / pe_embed_backward  position embeddings added to the token embeddings
//                                         (the backward runs first and may scale the tokens'
//                                         gradient): PE_EMBED
//   pe_layer_forward / pe_layer_backward  per-layer work between the qkv projection and the
//                                         attention (rope's rotation, CABLE's increments): PE_LAYER
//   PEBias, PERow, pe_bias_setup, pe_bias_row, pe_bias
//                                         the additive attention bias b(i, j): its state for
//                                         a layer, for a query row, and its value for a key: PE_BIAS
//   pe_bias_backward, PE_BH_GRADS         dL/db(i, j) into the encoding's gradients, or into
//                                         PE_BH_GRADS accumulators per (slot, head) (no two
//                                         threads share one): PE_BIAS_GRAD
//   pe_bias_reduce                        those accumulators summed into the parameters'
//                                         gradients after the layer: PE_BIAS_REDUCE
//   pe_project                            keeps constrained parameters in range after an update
//   pe_attention_forward / pe_attention_backward, pe_attention_scratch
//                                         a layer's whole attention, for an encoding whose
//                                         term is no bias b(i, j) (CoPE's depends on the row's
//                                         scores): PE_ATTENTION
//   pe_alloc_activations                  buffers of its own, made with the activations:
//                                         PE_ALLOC_ACTIVATIONS
//   pe_stream_block, pe_output_forward / pe_output_backward
//                                         a second residual stream (PE_STREAMS 2, complex_order's
//                                         imaginary part): the weights of its block at a layer
//                                         (the trainer runs the block once per stream, in
//                                         acts and acts2), and the classifier's input made of
//                                         both streams' last layer (after lnf; its backward
//                                         before lnf's)
//   pe_after_update, pe_resume_bytes, pe_resume_save, pe_resume_load, pe_free, pe_reach
//                                         the encoding's own state across passes and a range of the
//                                         parameters' (llmc/pe_state.h, which holds their defaults)
// A hook the file does not define does nothing (the defaults after the include; without
// PE_ATTENTION a layer's attention is attention_forward / attention_backward with the bias
// hooks). model->pe_eval is the evaluation variant in effect (RoPE scaling, xPos's blockwise
// causal attention, plain positions): the driver sets it around its extrapolation evaluation,
// plain otherwise. Positions: an encoding reads the position of token t of row b as
// pe_positions(model, l)[b T + t], which is t itself unless positions were given
// (model->pos_in) or drawn (randomized positions, -rp L; llmc/pe.h); the attention hands the
// bias hooks the positions of query and key, not their indices.
// ============================================================================

// ---- randomized positions (llmc/pe.h) ----
// are the positions of this forward pass drawn (a model trained with -rp, not under the
// plainpos evaluation variant)?
static int rp_active(const GPT2* model) {
    return model->config.rp_len > 0 && model->pe_eval.variant != PE_EVAL_PLAINPOS;
}

// the positions of a forward pass over B x T tokens into model->positions (pe_positions_make):
// the given ones, or one draw per layer or one for the embedding (rp_draws) from the model's
// seed and the driver's key, or 0..T-1; then the encoding's own (pe_positions_own: SHAPE's
// offsets, which differ in training; BiPE's segments, of the tokens)
static void pe_positions_fill(GPT2* model, const int* tokens, int B, int T, int training) {
    const GPT2Config* c = &model->config;
    int draws = rp_draws(c->pe, c->num_layers);
    model->pos_span = pe_positions_make(model->positions, model->pos_in, draws, B, T, rp_active(model) ? c->rp_len : 0,
                                        model->rp_draw_len, (uint64_t)c->rp_seed, model->rp_key);
    model->pos_span = pe_positions_own(c, model->positions, tokens, draws, B, T, model->pos_span, training, model->rp_key);
}

// the positions (B, T) of the tokens in layer l (or in the embedding, l = 0) of the last forward pass
static const int* pe_positions(const GPT2* model, int l) {
    size_t BT = (size_t)model->batch_size * model->seq_len;
    return model->positions + (size_t)(rp_draws(model->config.pe, model->config.num_layers) > 1 ? l : 0) * BT;
}
// ---- end of randomized positions ----

#define PE_PART PE_PART_CPU
#include "llmc/pe_part.h"
#undef PE_PART

// the hooks the encoding's file leaves out
#ifndef PE_EMBED
static void pe_embed_forward(GPT2* model, floatX* out, int B, int T) {}
static void pe_embed_backward(GPT2* model, floatX* dout, int B, int T) {}
#endif
#ifndef PE_LAYER
static void pe_layer_forward(GPT2* model, int l, int B, int T) {}
static void pe_layer_backward(GPT2* model, int l, int B, int T) {}
#endif
#ifndef PE_BIAS
typedef struct { int unused; } PEBias;
typedef struct { int unused; } PERow;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {}
static inline PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { PERow r = {0}; return r; }
static inline real pe_bias(const PEBias* pb, const PERow* r, int j) { return 0; }
#endif
#ifndef PE_BH_GRADS
#define PE_BH_GRADS 0
#endif
#ifndef PE_BIAS_GRAD
static inline void pe_bias_backward(PEBias* pb, int slot, const PERow* r, int j, real ds) {}
#endif
#ifndef PE_BIAS_REDUCE
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int slots) {}
#endif
#ifndef PE_PROJECT
static void pe_project(GPT2* model) {}
#endif
#ifndef PE_ALLOC_ACTIVATIONS
static void pe_alloc_activations(GPT2* model, int B, int T, int training) {}
#endif
#if PE_STREAMS == 1
static void pe_output_forward(GPT2* model, int B, int T) {}
static void pe_output_backward(GPT2* model, int B, int T) {}
#endif

// the activations of residual stream st (0: GPT-2's; 1: PE_STREAMS' second), or their gradients
static ActivationTensors* stream_acts(GPT2* model, int st, int grads) {
    ActivationSet* set = st == 0 ? (grads ? &model->grads_acts : &model->acts) : (grads ? &model->grads_acts2 : &model->acts2);
    return &set->t;
}

// the block of residual stream st at layer l, in the parameters or (grads) their gradients
static BlockParams stream_block(GPT2* model, int st, int l, int grads) {
    ParameterTensors* t = grads ? &model->grads : &model->params;
#if PE_STREAMS > 1
    if (st > 0) { return pe_stream_block(model, t, l); }
#endif
    return gpt2_block(t, l, model->config.channels);
}
#include "llmc/pe_state.h" // pe_after_update, pe_resume_*, pe_free, pe_reach

// ============================================================================
// attention

// attention_row_accumulate: o[c] += sum_{j < n} w[j] x_j[c] with x_j = x + j * stride (one
// head's keys or values of a row's keys), four keys at a time: o is read and written once per
// four, since its chain of adds is the critical path of a long row
static void attention_row_accumulate(real* o, const real* w, const real* x, size_t stride, int n, int hs) {
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        const real* x0 = x + j * stride;
        const real* x1 = x0 + stride;
        const real* x2 = x1 + stride;
        const real* x3 = x2 + stride;
        #pragma omp simd
        for (int c = 0; c < hs; c++) { o[c] += w[j] * x0[c] + w[j + 1] * x1[c] + w[j + 2] * x2[c] + w[j + 3] * x3[c]; }
    }
    for (; j < n; j++) {
        const real* xj = x + j * stride;
        #pragma omp simd
        for (int c = 0; c < hs; c++) { o[c] += w[j] * xj[c]; }
    }
}

// attention_row_output: the softmax of a row of logits a[0..i] of head h (a becomes the
// probabilities) and the row's output o = sum_j p_j v_j; returns the row's log-sum-exp.
// qkv is (B, T, 3C) with q, k, v side by side.
static real attention_row_output(real* o, real* a, const real* qkv, int b, int h, int i, int T, int C, int hs) {
    real maxv = -INFINITY;
    for (int j = 0; j <= i; j++) { if (a[j] > maxv) { maxv = a[j]; } }
    real sum = 0;
    #pragma omp simd reduction(+:sum)
    for (int j = 0; j <= i; j++) { a[j] = exp_vec(a[j] - maxv); sum += a[j]; }
    for (int j = 0; j <= i; j++) { a[j] /= sum; }
    for (int c = 0; c < hs; c++) { o[c] = 0; }
    attention_row_accumulate(o, a, qkv + (size_t)b * T * 3 * C + 2 * C + h * hs, 3 * (size_t)C, i + 1, hs);
    return maxv + log(sum);
}

// keys scored at once: one AVX-512 vector of floats. Heads' keys are kept transposed with
// T rounded up to a whole number of blocks (attention_padded_T), the padding zero.
#define ATT_KEYS_BLOCK 16
static int attention_padded_T(int T) { return (T + ATT_KEYS_BLOCK - 1) / ATT_KEYS_BLOCK * ATT_KEYS_BLOCK; }

// one thread's scratch for attention_forward (a row of scores and the head's keys
// transposed) or attention_backward (the same twice: scores and dout . v, keys and values)
static size_t attention_scratch_len(int hs, int T, int backward) {
    return (size_t)(backward ? 2 : 1) * (hs + 1) * attention_padded_T(T);
}

// attention_keys_transposed: head h's keys (which = 1; values: 2) of batch row b as an
// (hs, Tp) matrix kt[c * Tp + j] = k_j[c], zero for j >= T, so that a row's scores are
// computed a block of keys at a time (sum_c q_c kt[c][j]) with no horizontal sums
static void attention_keys_transposed(real* kt, const real* qkv, int which, int b, int h, int T, int C, int hs) {
    int Tp = attention_padded_T(T);
    const real* k = qkv + (size_t)b * T * 3 * C + which * C + h * hs;
    for (int c = 0; c < hs; c++) {
        real* row = kt + (size_t)c * Tp;
        for (int j = 0; j < T; j++) { row[j] = k[(size_t)j * 3 * C + c]; }
        for (int j = T; j < Tp; j++) { row[j] = 0; }
    }
}

// attention_row_dots: s[j] = x . kt[.][j] for the keys j <= i of a transposed head, in
// whole blocks (s has room for Tp; the entries past i are left for the caller to ignore)
static void attention_row_dots(real* s, const real* x, const real* kt, int i, int T, int hs) {
    int Tp = attention_padded_T(T);
    for (int jb = 0; jb <= i; jb += ATT_KEYS_BLOCK) {
        real acc[ATT_KEYS_BLOCK] = {0};
        for (int c = 0; c < hs; c++) {
            const real* kc = kt + (size_t)c * Tp + jb;
            for (int jj = 0; jj < ATT_KEYS_BLOCK; jj++) { acc[jj] += x[c] * kc[jj]; }
        }
        for (int jj = 0; jj < ATT_KEYS_BLOCK; jj++) { s[jb + jj] = acc[jj]; }
    }
}

// attention_forward: causal multi-head attention with the PE's additive bias,
// softmax(q.k / sqrt(hs) + b(i, j)) v, one query row at a time so that only one row of
// scores (per thread) ever exists; each row's log-sum-exp is kept for the backward pass.
// qkv is (B, T, 3C) with q, k, v side by side, out is (B, T, C), lse is (B, NH, T); the
// bias is that of the tokens' positions pos (B, T) (pe_positions). Scratch per thread: a row of
// scores and the head's keys transposed, Tp (hs + 1).
void attention_forward(real* out, real* lse, const real* qkv, const PEBias* pb, const int* pos, real* scratch,
                       int B, int T, int C, int NH) {
    int C3 = 3 * C, hs = C / NH;
    real scale = 1 / sqrt((real)hs);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            real* s = scratch + omp_get_thread_num() * attention_scratch_len(hs, T, 0);
            real* kt = s + attention_padded_T(T);
            const int* pb_pos = pos + (size_t)b * T; // row b's positions
            attention_keys_transposed(kt, qkv, 1, b, h, T, C, hs);
            for (int i = 0; i < T; i++) {
                PERow r = pe_bias_row(pb, b, h, pb_pos[i]);
                attention_row_dots(s, qkv + ((size_t)b * T + i) * C3 + h * hs, kt, i, T, hs);
                for (int j = 0; j <= i; j++) { s[j] = s[j] * scale + pe_bias(pb, &r, pb_pos[j]); }
                lse[((size_t)b * NH + h) * T + i] = attention_row_output(out + ((size_t)b * T + i) * C + h * hs, s, qkv, b, h, i, T, C, hs);
            }
        }
    }
}

// attention_backward: recomputes each row's probabilities from q, k and the saved
// log-sum-exp (no stored attention matrix), then with D_i = dout_i . out_i:
// ds_ij = p_ij (dout_i . v_j - D_i), dq_i += ds_ij k_j / sqrt(hs), dk_j += ds_ij q_i / sqrt(hs),
// dv_j += p_ij dout_i, and hands ds_ij to the PE's bias backward. Each (b, h) is one
// thread's, so the accumulations never race. A row's logits and dout_i . v_j are computed
// as the forward's, side by side over the keys; scratch per thread 2 Tp (hs + 1).
void attention_backward(real* dqkv, const real* dout, const real* qkv, const real* out, const real* lse,
                        PEBias* pb, const int* pos, real* scratch, int B, int T, int C, int NH) {
    int C3 = 3 * C, hs = C / NH;
    real scale = 1 / sqrt((real)hs);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            int Tp = attention_padded_T(T);
            real* p = scratch + omp_get_thread_num() * attention_scratch_len(hs, T, 1);
            real* dp = p + Tp;
            real* kt = dp + Tp;
            real* vt = kt + (size_t)hs * Tp;
            const int* pb_pos = pos + (size_t)b * T; // row b's positions
            attention_keys_transposed(kt, qkv, 1, b, h, T, C, hs);
            attention_keys_transposed(vt, qkv, 2, b, h, T, C, hs);
            for (int i = 0; i < T; i++) {
                const real* q = qkv + ((size_t)b * T + i) * C3 + h * hs;
                const real* g = dout + ((size_t)b * T + i) * C + h * hs;
                const real* o = out + ((size_t)b * T + i) * C + h * hs;
                real* dq = dqkv + ((size_t)b * T + i) * C3 + h * hs;
                real row_lse = lse[((size_t)b * NH + h) * T + i];
                real D = 0;
                #pragma omp simd reduction(+:D)
                for (int c = 0; c < hs; c++) { D += g[c] * o[c]; }
                PERow r = pe_bias_row(pb, b, h, pb_pos[i]);
                attention_row_dots(p, q, kt, i, T, hs);
                attention_row_dots(dp, g, vt, i, T, hs);
                for (int j = 0; j <= i; j++) { p[j] = p[j] * scale + pe_bias(pb, &r, pb_pos[j]) - row_lse; }
                #pragma omp simd
                for (int j = 0; j <= i; j++) { p[j] = exp_vec(p[j]); }
                for (int j = 0; j <= i; j++) { // ds_ij, and into the PE's gradients
                    dp[j] = p[j] * (dp[j] - D);
                    pe_bias_backward(pb, b, &r, pb_pos[j], dp[j]);
                    dp[j] *= scale;
                }
                for (int j = 0; j <= i; j++) {
                    real* dk = dqkv + ((size_t)b * T + j) * C3 + C + h * hs;
                    real* dv = dqkv + ((size_t)b * T + j) * C3 + 2 * C + h * hs;
                    #pragma omp simd
                    for (int c = 0; c < hs; c++) {
                        dk[c] += dp[j] * q[c];
                        dv[c] += p[j] * g[c];
                    }
                }
                attention_row_accumulate(dq, dp, qkv + (size_t)b * T * C3 + C + h * hs, C3, i + 1, hs);
            }
        }
    }
}

#ifndef PE_ATTENTION
// a layer's attention for every encoding but those with their own (PE_ATTENTION: CoPE, shaw, complex_order):
// the two functions above, the bias through the encoding's hooks; per thread a row of scores and the head's keys
// transposed (and a row of dout . v and the values in training)
static size_t pe_attention_scratch(const GPT2Config* cfg, int B, int T, int training) {
    return attention_scratch_len(cfg->channels / cfg->num_heads, T, training);
}
static void pe_attention_forward(GPT2* model, int l, real* out, real* lse, const real* qkv, int B, int T) {
    PEBias pb;
    pe_bias_setup(&pb, model, l, B, T, 0);
    attention_forward(out, lse, qkv, &pb, pe_positions(model, l), model->att_scratch, B, T, model->config.channels, model->config.num_heads);
}
static void pe_attention_backward(GPT2* model, int l, real* dqkv, const real* dout, const real* qkv, const real* out,
                                  const real* lse, int B, int T) {
    PEBias pb;
    pe_bias_setup(&pb, model, l, B, T, 1);
    attention_backward(dqkv, dout, qkv, out, lse, &pb, pe_positions(model, l), model->att_scratch, B, T, model->config.channels, model->config.num_heads);
    pe_bias_reduce(&pb, model, l, B);
}
#endif

// ============================================================================
// DAPE (pe/dape.h), the second compile-time switch: the logits of all heads as a learned
// function of the scores and the base encoding's bias, through the hooks above

#define PE_PART PE_PART_CPU
#include "pe/dape.h"
#undef PE_PART

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

// (re)allocates activations for B x T tokens: every layer when training, one otherwise; a
// training pass after another gets room for both (the length buckets of a batch take turns)
static void gpt2_ensure_activations(GPT2* model, int B, int T, int training) {
    int layers = training ? model->config.num_layers : 1;
    int fits = model->acts.memory != NULL && B <= model->acts_B && T <= model->acts_T
            && (!training || model->grads_acts.memory != NULL);
    if (fits) { return; }
    if (training && model->grads_acts.memory != NULL) {
        B = B > model->acts_B ? B : model->acts_B;
        T = T > model->acts_T ? T : model->acts_T;
    }
    size_t N = (size_t)B * T;
    free(model->acts.memory);
    free(model->grads_acts.memory);
    free(model->acts2.memory);
    free(model->grads_acts2.memory);
    free(model->att_scratch);
    free(model->pe_dbh);
    dape_work_free(model->dape);
    free(model->logits);
    free(model->inputs);
    free(model->targets);
    free(model->positions);
    free(model->pe_rel);
    free(model->pe_lnf);
    free(model->pe_drel);
    memset(&model->grads_acts, 0, sizeof(model->grads_acts));
    memset(&model->acts2, 0, sizeof(model->acts2));
    memset(&model->grads_acts2, 0, sizeof(model->grads_acts2));
    for (int st = 0; st < PE_STREAMS; st++) {
        activation_set_alloc(st == 0 ? &model->acts : &model->acts2, &model->config, N, layers);
        if (training) { activation_set_alloc(st == 0 ? &model->grads_acts : &model->grads_acts2, &model->config, N, layers); }
    }
    model->acts_N = N;
    model->acts_B = B;
    model->acts_T = T;
    model->acts_layers = layers;
    model->att_scratch_len = pe_attention_scratch(&model->config, B, T, training);
    model->att_scratch = (real*)malloc_check((size_t)omp_get_max_threads() * model->att_scratch_len * sizeof(real));
    model->dape = model->config.dape != 0 ? dape_work_alloc(&model->config, B, T, training) : NULL;
    size_t slots = model->dape != NULL ? (size_t)model->dape->threads * model->dape->slot_spread : 0; // DAPE's
    if (slots < (size_t)B) { slots = B; }
    model->pe_dbh = (real*)malloc_check((slots * model->config.num_heads * PE_BH_GRADS + 1) * sizeof(real));
    model->logits = (real*)malloc_check((size_t)CLASSIFIER_CHUNK * model->config.padded_vocab_size * sizeof(real));
    model->inputs = (int*)malloc_check(N * sizeof(int));
    model->targets = (int*)malloc_check(N * sizeof(int));
    model->positions = (int*)malloc_check((size_t)rp_draws(model->config.pe, model->config.num_layers) * N * sizeof(int));
    model->pe_rel = NULL;
    model->pe_lnf = NULL;
    model->pe_drel = NULL;
    pe_alloc_activations(model, B, T, training);
}

// allocates the parameter gradients on first use (evaluation never needs them)
static void gpt2_ensure_grads(GPT2* model) {
    if (model->grads_memory == NULL) {
        model->grads_memory = (real*)calloc_check(model->num_parameters, sizeof(real));
        point_parameters(&model->grads, model->grads_memory, model->param_sizes);
    }
}

// longest sequence the model can process: the encoding's limit (pe_max_length: learned's
// maxT, xPos's range of fp32), randomized positions' range L (T of them are drawn from it)
int gpt2_max_length(const GPT2* model) {
    const GPT2Config* c = &model->config;
    int most = pe_max_length(c);
    return rp_active(model) && c->rp_len < most ? c->rp_len : most;
}

// can the model process T tokens? Within gpt2_max_length and, for an encoding whose range
// depends on its parameters, within that (pe_reach: floater's positions stay in range)
int gpt2_reaches(GPT2* model, int T) { return T <= gpt2_max_length(model) && pe_reach(model, T); }

// Forward pass over B x T tokens. With targets, computes the per-token losses and their
// mean over the scored targets (those not TARGET_UNSCORED: every one of a plain shard).
// dloss is d(objective)/d(mean loss): nonzero when training, and then the
// classifier's backward runs here (fused_classifier) and gpt2_backward continues it.
void gpt2_forward(GPT2* model, const int* inputs, const int* targets, int B, int T, real dloss) {
    GPT2Config* cfg = &model->config;
    int V = cfg->vocab_size, L = cfg->num_layers, NH = cfg->num_heads, C = cfg->channels;
    if (T > gpt2_max_length(model)) {
        if (rp_active(model)) { fatal("randomized positions: T = %d tokens cannot be drawn from the range [0, %d) (-rp)", T, cfg->rp_len); }
        fatal("PE %s cannot process T = %d tokens: %s %d", pe_name(cfg->pe), T, PE_LIMIT_REASON, pe_max_length(cfg));
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
    model->training = training;
    pe_positions_fill(model, inputs, B, T, training);
    if (model->pos_span > pe_max_length(cfg)) {
        fatal("PE %s cannot take position %d: %s %d", pe_name(cfg->pe), model->pos_span - 1, PE_LIMIT_REASON, pe_max_length(cfg));
    }
    memcpy(model->inputs, inputs, (size_t)B * T * sizeof(int));
    if (targets != NULL) { memcpy(model->targets, targets, (size_t)B * T * sizeof(int)); }
    for (int st = 0; training && st < PE_STREAMS; st++) {
        activation_set_clear(st == 0 ? &model->grads_acts : &model->grads_acts2, cfg, model->acts_N, model->acts_layers, (size_t)B * T);
    }

    ParameterTensors p = model->params;
    ActivationTensors a = model->acts.t;
    size_t N = model->acts_N;
    encoder_forward(a.encoded, inputs, p.wte, B, T, C);
    pe_embed_forward(model, a.encoded, B, T);
    for (int l = 0; l < L; l++) {
        size_t s = layer_slot(model, l);
        for (int st = 0; st < PE_STREAMS; st++) { // each residual stream's ln1 and qkv
            ActivationTensors* sa = stream_acts(model, st, 0);
            BlockParams w = stream_block(model, st, l, 0);
            block_qkv_forward(sa, s, N, block_input(model, sa, l), &w, B * T, C);
        }
        pe_layer_forward(model, l, B, T);
        real* l_qkv = a.qkv + s * N * 3 * C;
        real* l_atty = a.atty + s * N * C;
        if (cfg->dape != 0) {
            PEBias pb;
            pe_bias_setup(&pb, model, l, B, T, 0);
            dape_layer_setup(model, l, 0);
            dape_attention_forward(l_atty, a.att_lse + s * N * NH, l_qkv, &pb, pe_positions(model, l), model->dape, B, T);
        } else {
            pe_attention_forward(model, l, l_atty, a.att_lse + s * N * NH, l_qkv, B, T);
        }
        for (int st = 0; st < PE_STREAMS; st++) { // each stream's projection, MLP and residuals
            ActivationTensors* sa = stream_acts(model, st, 0);
            BlockParams w = stream_block(model, st, l, 0);
            block_output_forward(sa, s, N, block_input(model, sa, l), &w, B * T, C);
        }
    }
    real* last = a.residual3 + layer_slot(model, L - 1) * N * C;
    layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, last, p.lnfw, p.lnfb, B * T, C);
    pe_output_forward(model, B, T);
    if (targets == NULL) { model->mean_loss = -1; return; }
    fused_classifier(a.losses, training ? model->grads_acts.t.lnf : NULL, training ? model->grads.wte : NULL,
                     model->logits, a.lnf, p.wte, targets, dloss, B * T, scored, V, C);
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
    pe_output_backward(model, B, T); // first: d lnf of the classifier's input made of the streams
    layernorm_backward(d.residual3 + (size_t)(L - 1) * N * C, g.lnfw, g.lnfb, d.lnf, a.residual3 + (size_t)(L - 1) * N * C,
                       p.lnfw, a.lnf_mean, a.lnf_rstd, B * T, C);
    for (int l = L - 1; l >= 0; l--) {
        size_t o = (size_t)l * N;
        for (int st = 0; st < PE_STREAMS; st++) { // each stream from d residual3 down to d atty
            ActivationTensors *sa = stream_acts(model, st, 0), *sd = stream_acts(model, st, 1);
            BlockParams w = stream_block(model, st, l, 0), gw = stream_block(model, st, l, 1);
            block_output_backward(sa, sd, block_input(model, sd, l), (size_t)l, N, &w, &gw, B * T, C);
        }
        if (cfg->dape != 0) { // the base's parameter gradients in one slot per thread
            PEBias pb;
            int slots = model->dape->threads * model->dape->slot_spread;
            pe_bias_setup(&pb, model, l, slots, T, 1);
            dape_layer_setup(model, l, 1);
            dape_attention_backward(d.qkv + o * 3 * C, d.atty + o * C, a.qkv + o * 3 * C, a.atty + o * C,
                                    a.att_lse + o * NH, &pb, pe_positions(model, l), model->dape, B, T);
            dape_layer_reduce(model, l);
            pe_bias_reduce(&pb, model, l, slots);
        } else {
            pe_attention_backward(model, l, d.qkv + o * 3 * C, d.atty + o * C, a.qkv + o * 3 * C, a.atty + o * C, a.att_lse + o * NH, B, T);
        }
        pe_layer_backward(model, l, B, T);
        for (int st = 0; st < PE_STREAMS; st++) { // each stream's qkv and ln1, into d of its input
            ActivationTensors *sa = stream_acts(model, st, 0), *sd = stream_acts(model, st, 1);
            BlockParams w = stream_block(model, st, l, 0), gw = stream_block(model, st, l, 1);
            block_qkv_backward(sa, sd, block_input(model, sa, l), block_input(model, sd, l), (size_t)l, N, &w, &gw, B * T, C);
        }
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
    const real* g = model->grads_memory;
    #pragma omp parallel for num_threads(nthreads) schedule(static, 1)
    for (int t = 0; t < nthreads; t++) {
        size_t end = (t + 1) * chunk < n ? (t + 1) * chunk : n;
        double sum = 0;
        #pragma omp simd reduction(+:sum)
        for (size_t i = t * chunk; i < end; i++) { sum += (double)g[i] * g[i]; }
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
    real* param = model->params_memory;
    real* mom = model->m_memory;
    real* var = model->v_memory;
    const real* grads = model->grads_memory;
    size_t offset = 0;
    #pragma omp parallel firstprivate(offset) // one parallel region; the tensors one after another
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        real wd = PARAM_DECAY[k] ? weight_decay : 0;
        size_t n = model->param_sizes[k];
        #pragma omp for nowait
        for (size_t i = offset; i < offset + n; i++) {
            real grad = grads[i] * grad_scale;
            real m = beta1 * mom[i] + (1 - beta1) * grad;
            real v = beta2 * var[i] + (1 - beta2) * grad * grad;
            mom[i] = m;
            var[i] = v;
            param[i] -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * param[i]);
        }
        offset += n;
    }
    pe_project(model);
    pe_after_update(model);
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
    free(model->acts2.memory);
    free(model->grads_acts2.memory);
    free(model->att_scratch);
    free(model->pe_dbh);
    dape_work_free(model->dape);
    free(model->logits);
    free(model->alibi_slopes);
    free(model->pe_table);
    free(model->inputs);
    free(model->targets);
    free(model->positions);
    free(model->pe_rel);
    free(model->pe_lnf);
    free(model->pe_drel);
    pe_free(model);
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

#ifdef USE_BLAS
// OpenBLAS picks its kernels when it is loaded, by the CPU's model, and the Debian 12 build
// does not know recent ones: on AMD Zen 4 it falls back to its AVX2 kernels, and on a virtual
// machine's unnamed Xeon with AVX-512 to its SSE3 "Prescott" ones (the task model's step
// 40 -> 26 ms on one thread). Where the CPU has AVX-512 (or AVX2 and FMA) and
// OpenBLAS chose kernels for less, we run ourselves again with OPENBLAS_CORETYPE set to the
// kernels the CPU has (SKYLAKEX, HASWELL). A user's own setting is kept.
char* openblas_get_corename(void);
static int blas_core_is(const char* core, const char* const* names) {
    for (int i = 0; names[i] != NULL; i++) {
        if (strcasecmp(core, names[i]) == 0) { return 1; }
    }
    return 0;
}
static void blas_select_kernels(char** argv) {
    static const char* const avx512_cores[] = {"skylakex", "cooperlake", "sapphirerapids", NULL};
    static const char* const avx2_cores[] = {"haswell", "zen", NULL};
    if (getenv("OPENBLAS_CORETYPE") != NULL) { return; }
    const char* core = openblas_get_corename();
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")
              && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const char* want = avx512 && !blas_core_is(core, avx512_cores) ? "SKYLAKEX"
                     : avx2 && !avx512 && !blas_core_is(core, avx2_cores) && !blas_core_is(core, avx512_cores) ? "HASWELL" : NULL;
    if (want != NULL) {
        setenv("OPENBLAS_CORETYPE", want, 1);
        execv("/proc/self/exe", argv); // only returns on failure: then carry on as we are
    }
}

// the run's table row "compute": the threads and the matmuls' kernels
#define TRAINER_COMPUTE(buf, n) snprintf(buf, n, "CPU, %d OpenMP threads, OpenBLAS %s kernels", omp_get_max_threads(), \
                                         openblas_get_corename())
#else
#define TRAINER_COMPUTE(buf, n) snprintf(buf, n, "CPU, %d OpenMP threads, plain loops (no BLAS)", omp_get_max_threads())
#endif

// a training pass's fixed cost in tokens, for the length buckets of masked rows (-lb): on the
// task model (copy rows, 2 cores) costs of 0 to 32 tokens gave the same step times within
// the machine's noise, 128 and more slower ones
#define TRAINER_PASS_TOKENS 32
#define TRAINER_NAME "train_gpt2"
#include "llmc/driver.h"

#ifndef TESTING
int main(int argc, char** argv) {
#ifdef USE_BLAS
    blas_select_kernels(argv);
#endif
    return train_main(argc, argv);
}
#endif
