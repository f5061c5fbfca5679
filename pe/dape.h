/*
DAPE: the attention logits as a learned function of the scores and the positional
bias of all heads together (DAPE, NeurIPS 2024, and DAPE V2,
arXiv 2410.04798), a second compile-time switch on top of the positional encoding:

  make train_gpt2 PE=kerple DAPE=1x3      ->  -DPE_KERPLE -DDAPE_KERNEL=3

  DAPE=   variant     checkpoint word 9   logits of row i, key j <= i (all heads at once)
  (none)  -           0                   a = s + b
  mlp     DAPE        1                   a = s + b + W2 LReLU(W1 [s; b] + b1) + b2
  1x3     DAPE_1x3    3                   the same with two 1 x 3 convolutions along the keys
  1x5     DAPE_1x5    5                   (1 x 5)
  1x7     DAPE_1x7    7                   (1 x 7)

The word is the kernel width k: DAPE (v1) is exactly the k = 1 case of the convolution
(the spec's DAPE_1x1 == DAPE), so one implementation serves every variant. The hidden
width D (default 32, `make ... DAPE_D=64`) is checkpoint word 10; it is read from a
checkpoint like the other sizes, DAPE_D only sets it for new models. Bases: nope and
rope (the network sees the H score channels), alibi, kerple and fire (2H channels:
the scores, then the biases). The definition (forward and backward) is this file's CPU part; its CUDA part hands a
layer to the kernels of llmc/attention_dape.cuh. Its parts are included as an encoding's
(llmc/pe.h), after the encoding's own: DAPE calls the base's bias hooks.

DAPE_EDGE_EXACT (default 1, `make ... DAPE_EDGE_EXACT=0`): the hidden values just past
the end of the sequence (columns >= T) are PyTorch's zero padding (1, as the official
code) or computed as if the sequence went on (0: every row independent of T). It
changes only the last k/2 rows of a window; it is a property of the binary, not of the
checkpoint.
*/
#if PE_PART == PE_PART_DEFINITION

#ifdef DAPE_KERNEL
#define DAPE_ID DAPE_KERNEL
#if !PE_DAPE
#error "DAPE runs on the bases of llmc/pe_list.h whose dape column is 1"
#endif
#if DAPE_KERNEL != 1 && DAPE_KERNEL != 3 && DAPE_KERNEL != 5 && DAPE_KERNEL != 7
#error "DAPE_KERNEL must be 1 (mlp), 3, 5 or 7"
#endif
#else
#define DAPE_ID 0
#endif
#ifndef DAPE_WIDTH
#define DAPE_WIDTH 32
#endif
#ifndef DAPE_EDGE_EXACT
#define DAPE_EDGE_EXACT 1
#endif
// DAPE_1xk with PyTorch's edge: a window's last k/2 rows depend on where the window ends, so
// a row cut short would compute them otherwise (the driver's length buckets keep whole rows)
#define DAPE_WINDOW_EDGE (DAPE_ID > 1 && DAPE_EDGE_EXACT)

#define DAPE_MAX_KERNEL 7
#define DAPE_MAX_WIDTH 1024
#define DAPE_LRELU_SLOPE 0.01f // PyTorch's LeakyReLU default

// DAPE's parameter tensors (llmc/model.h's X(NAME, field, decay, size, init), after the
// encoding's): W1 (D, Cin, k) and b1 (D), W2 (NH, D, k) and b2 (NH) per layer; the weights
// decay and the biases do not (GPT-NeoX's rule in the official code)
#define DAPE_TENSORS(X) \
    X(DAPE_W1, dape_w1, 1, L * D * Cin * k,     fill_uniform(p, n, -dape_init_bound(cfg, 0), dape_init_bound(cfg, 0), rng)) \
    X(DAPE_B1, dape_b1, 0, k > 0 ? L * D : 0,  fill_uniform(p, n, -dape_init_bound(cfg, 0), dape_init_bound(cfg, 0), rng)) \
    X(DAPE_W2, dape_w2, 1, L * NH * D * k,    fill_uniform(p, n, -dape_init_bound(cfg, 1), dape_init_bound(cfg, 1), rng)) \
    X(DAPE_B2, dape_b2, 0, k > 0 ? L * NH : 0, fill_uniform(p, n, -dape_init_bound(cfg, 1), dape_init_bound(cfg, 1), rng))

// b2 adds a constant of the head to every score of a row, which the softmax cancels: its
// gradient vanishes identically (the base's own row constants, PE_REF_ROW_CONSTANT, are then
// inputs of DAPE's network and no longer vanish)
#define DAPE_ROW_CONSTANT(k) ((k) == P_DAPE_B2)

static inline int dape_variant_known(int k) { return k == 0 || k == 1 || k == 3 || k == 5 || k == 7; }

// the bases DAPE runs on (llmc/pe_list.h); those with a bias feed it as H more input channels
static inline int dape_base_supported(int pe) { return pe >= 0 && pe < PE_NUM_IDS && PE_INFO[pe].dape; }
static inline int dape_in_channels(int pe, int NH) { return (PE_INFO[pe].kind == PE_KIND_BIAS ? 2 : 1) * NH; }

// the value of make's DAPE= for a variant: "mlp", "1x3", ...
static inline const char* dape_make_name(int k) {
    static const char* const names[DAPE_MAX_KERNEL + 1] = {"", "mlp", "?", "1x3", "?", "1x5", "?", "1x7"};
    return k >= 0 && k <= DAPE_MAX_KERNEL ? names[k] : "?";
}

// The name of a combination, as in the binaries' names and the extrapolation CSV:
// "kerple", "kerple_dapemlp", "kerple_dape1x3". Rotates over four buffers, so that one
// message can name two combinations.
static inline const char* model_label(int pe, int dape) {
    static char buf[4][64];
    static int next = 0;
    char* out = buf[next];
    next = (next + 1) % 4;
    if (dape == 0) { snprintf(out, 64, "%s", pe_name(pe)); }
    else { snprintf(out, 64, "%s_dape%s", pe_name(pe), dape_make_name(dape)); }
    return out;
}

#elif PE_PART == PE_PART_CPU

// ============================================================================
// DAPE: the logits of all heads as a learned function of the scores and
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
// head, the base's bias at the tokens' positions pos (B, T; pe_positions); leaves x and hid
// in the workspace for the backward pass. Reads nothing of the workspace beyond what this
// row wrote (no key column > i enters).
static void dape_row_logits(DapeRow* w, const DapeLayer* dl, const real* qkv, const PEBias* pb, const int* pos, int b, int i, int T) {
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
            if (dl->bias) { PERow r = pe_bias_row(pb, b, h, pos[(size_t)b * T + i]); x[NH + h] = pe_bias(pb, &r, pos[(size_t)b * T + c]); }
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
                             const int* pos, int b, int i, int T) {
    int NH = dl->NH, hs = dl->hs, C = NH * hs;
    dape_row_logits(w, dl, qkv, pb, pos, b, i, T);
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
                              const real* qkv, const real* out, const real* lse, PEBias* pb, const int* pos, int slot, int b, int i, int T) {
    int NH = dl->NH, hs = dl->hs, C = NH * hs, Cin = dl->Cin, D = dl->D, K = dl->K, p = dl->p;
    real scale = 1 / sqrt((real)hs);
    dape_row_logits(w, dl, qkv, pb, pos, b, i, T);
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
            if (dl->bias) {
                PERow r = pe_bias_row(pb, b, h, pos[(size_t)b * T + i]);
                pe_bias_backward(pb, slot, &r, pos[(size_t)b * T + c], w->da[c * NH + h] + dxc[NH + h]);
            }
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
// with all its heads, the longest rows first, the base's bias at the positions pos (B, T);
// out (B, T, C), lse (B, NH, T)
void dape_attention_forward(real* out, real* lse, const real* qkv, const PEBias* pb, const int* pos, struct DapeWork* dw, int B, int T) {
    #pragma omp parallel for schedule(dynamic, 1)
    for (int r = 0; r < B * T; r++) {
        int b = r / T, i = T - 1 - r % T;
        dape_row_forward(out, lse, &dw->rows[omp_get_thread_num()], &dw->layer, qkv, pb, pos, b, i, T);
    }
}

// dape_attention_backward: every query row on its own (dape_row_backward), the longest
// first, each thread accumulating dk and dv in its own buffer, which are then summed into
// dqkv (two barriers in all). The base's parameter gradients go to the thread's
// accumulator slot, spread so that no two threads share a cache line (pe_bias_reduce sums
// every slot; DAPE's bases have biases that do not depend on the batch row).
void dape_attention_backward(real* dqkv, const real* dout, const real* qkv, const real* out, const real* lse,
                             PEBias* pb, const int* pos, struct DapeWork* dw, int B, int T) {
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
            dape_row_backward(dqkv, dkv, &dw->rows[thread], &dw->layer, dout, qkv, out, lse, pb, pos,
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

#elif PE_PART == PE_PART_CUDA

// ============================================================================
// DAPE (the kernels in llmc/attention_dape.cuh, the definition in this file's CPU part): with DAPE on, every layer's attention is
// dape_attention_forward / dape_attention_backward (all heads of a query tile per block),
// the base's bias entering through the same PE hooks. This section hands the kernels a
// layer's weights and sums the parameter gradients.
// ============================================================================

// layer l's DAPE weights and shape
static DapeParams dape_layer(const GPT2* model, int l) {
    const GPT2Config* cfg = &model->config;
    DapeParams dp;
    dp.K = cfg->dape; dp.D = cfg->dape_width; dp.NH = cfg->num_heads; dp.HS = cfg->channels / cfg->num_heads;
    dp.Cin = dape_in_channels(cfg->pe, cfg->num_heads);
    dp.edge_exact = DAPE_EDGE_EXACT;
    dp.w1 = model->params.dape_w1 + (size_t)l * dp.D * dp.Cin * dp.K;
    dp.b1 = model->params.dape_b1 + (size_t)l * dp.D;
    dp.w2 = model->params.dape_w2 + (size_t)l * dp.NH * dp.D * dp.K;
    dp.b2 = model->params.dape_b2 + (size_t)l * dp.NH;
    return dp;
}

// The base's parameter gradients come from the dq pass as block partials in
// pe_bias_reduce's layout, (b, h, key block) with attention_kv_blocks' key blocks per
// (b, h): the DAPE blocks are numbered as if kv_blocks of them made one batch row, so
// pe_bias_reduce over dape_pe_rows "batch rows" sums every block's partial (the slots
// past the last block are zeroed first). The buffer holds one such batch row more than the
// capacity needs: a shorter T can round up to one more.
static int dape_kv_blocks(int T) { return attention_kv_blocks(1, T, 1); }
static int dape_pe_rows(int B, int T) { return CEIL_DIV(dape_query_blocks(B, T), dape_kv_blocks(T)); }
static size_t dape_pe_slots(int B, int T, int NH) { return (size_t)dape_pe_rows(B, T) * NH * dape_kv_blocks(T); }

// The base's bias at the tokens' positions where they are given or drawn (a base that takes
// positions: PEPositions, llmc/attention_bias.cuh, a second instance of the kernels, compiled
// for the bases of DAPE only), else at the indices
static void dape_forward(GPT2* model, int l, floatX* out, float* lse, const floatX* qkv, const PEBias& pb, int B, int T) {
#if PE_BIAS_OF_POSITIONS && PE_DAPE
    const int* pos = pe_positions(model, l);
    if (pos != NULL) {
        dape_attention_forward(out, lse, qkv, PEPositions<PEBias>{pb, pos, T}, dape_layer(model, l), B, T, ctx.prop.sharedMemPerBlockOptin,
                               ctx.stream);
        return;
    }
#endif
    dape_attention_forward(out, lse, qkv, pb, dape_layer(model, l), B, T, ctx.prop.sharedMemPerBlockOptin, ctx.stream);
}

// dqkv written in full; DAPE's and the base's parameter gradients added
static void dape_backward(GPT2* model, int l, floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                          const float* lse, PEBias* pb, int B, int T) {
    DapeParams dp = dape_layer(model, l);
    GradScratch* gs = &model->gs;
    TensorSet<float>* g = &model->grads;
    int NH = model->config.num_heads;
    if (PE_PAR_N > 0) { cudaCheck(cudaMemsetAsync(gs->pe_partials, 0, dape_pe_slots(B, T, NH) * PE_PAR_N * sizeof(float), ctx.stream)); }
    float* dw1 = g->dape_w1 + (size_t)l * dp.D * dp.Cin * dp.K;
    float* db1 = g->dape_b1 + (size_t)l * dp.D;
    float* dw2 = g->dape_w2 + (size_t)l * NH * dp.D * dp.K;
    float* db2 = g->dape_b2 + (size_t)l * NH;
    size_t smem = ctx.prop.sharedMemPerBlockOptin;
#if PE_BIAS_OF_POSITIONS && PE_DAPE
    const int* pos = pe_positions(model, l);
    if (pos != NULL) {
        dape_attention_backward(dqkv, gs->att_D, gs->att_dkv, gs->dape_partials, dw1, db1, dw2, db2, dout, qkv, out, lse,
                                PEPositions<PEBias>{*pb, pos, T}, dp, B, T, dape_kv_blocks(T), smem, ctx.stream);
        pe_bias_reduce(pb, model, l, dape_pe_rows(B, T));
        return;
    }
#endif
    dape_attention_backward(dqkv, gs->att_D, gs->att_dkv, gs->dape_partials, dw1, db1, dw2, db2, dout, qkv, out, lse, *pb, dp, B, T,
                            dape_kv_blocks(T), smem, ctx.stream);
    pe_bias_reduce(pb, model, l, dape_pe_rows(B, T));
}

#endif
