/*
Causal attention with an additive positional bias computed on the fly, forward and
backward, flash-attention style: no T x T tensor (scores, probabilities or bias) ever
exists in memory. Two families of kernels share the interface below: the fp32 kernels
of this file (the fp32 build, compared tightly with the CPU path) and the tensor-core
kernels of llmc/attention_mma.cuh (the bf16 build); attention_forward/backward at the end
pick the build's.

The bias b(i, j) of query i and key j in head h comes from the positional encoding's
hooks (the CUDA part of its file pe/<file>.h; docs/adding-an-encoding.md), found by
argument-dependent lookup on the bias type PE (the encoding's PEBias):

  PERow pe_bias_row(const PE* pb, int b, int h, int i)
      what the bias needs of query row i, computed once per row (a head's slope, r1 and
      r2, its row of the T5 table, CABLE's S_i and w_i); r.shift is a constant of the row
      left out of pe_bias because it cancels in the softmax (CABLE's w_i S_i, else 0): the
      kernels store lse_i = m_i + log(l_i) + r.shift, the true log-sum-exp, and subtract
      it again in the backward
  float pe_bias(const PE* pb, const PERow* r, int j)
      b(i, j) - r.shift
  void pe_bias_backward(const PE* pb, PEGrad* g, int side, const PERow* r, int j, float ds)
      accumulates dL/dbias(i, j) = ds into the thread's accumulators g: side PE_SIDE_ROW is
      called by the thread that owns query i (the dq pass), side PE_SIDE_COL by the thread
      that owns key j (the dk/dv pass); each pair is seen once from each side
  void pe_bias_backward_warp(const PE* pb, PEGrad* g, int side, const PERow* r, int j, float ds, bool valid)
      what the kernels call: pe_bias_backward of the pair where valid, called by every lane of
      a warp at once on the column side; an encoding whose column side reduces over the warp
      (t5, fire) keeps the lane's share of the reduction in g and marks PEGrad per_lane
  void pe_bias_flush(const PE* pb, PEGrad* g, int side, int b, int h, int t, bool valid, int slot)
      called once by every thread at the end of a backward kernel, with the sums of the
      pairs of its token t (valid: t is one, and < T): writes per-token gradients, or
      reduces parameter gradients over the block into a per-block partial (slot), summed
      later by the trainer (deterministic, no atomics)

PEGrad is a struct of floats (empty for a bias without gradients). With randomized
positions (llmc/pe.h) the trainer hands the kernels PEPositions<PEBias> (below): the same
hooks, called with the tokens' positions instead of their indices.

Layouts: qkv (B, T, 3C) with q, k, v of head h at columns h*HS, C + h*HS, 2C + h*HS;
out and dout (B, T, C); lse and D (B, NH, T) in fp32.

The fp32 kernels. A thread owns one row (a query in the forward and the dq pass, a key in
the dk/dv pass) and ATT_DPT = 16 of its HS dimensions, so HS / 16 consecutive threads
share a row and combine their partial dot products with shuffles; HS = 32, 64, 128 are
compiled. Dimension group g of part p is the float4 number g * parts + p of the row, so
the parts of a row read different shared-memory banks. The other side of the pairs
streams through shared memory in tiles (converted to fp32 once per block); the threads of
a row share out the evaluation of its biases for a tile (attention_bias_tile), so each
pair's bias is evaluated once:

  forward    block = 64 query rows of one (b, h); key tiles of 32; online softmax
             with one rescale per tile; keeps lse_i per row
  backward   two kernels, each recomputing p_ij = exp(s_ij + b(i, j) - lse_i) from q, k, lse:
             dq pass   (block = 64 query rows, key tiles of 32): D_i = dout_i . out_i,
                       dq_i = sum_j ds_ij k_j / sqrt(HS), row side of the bias gradient
             dkdv pass (block = 64 keys, query tiles of 32): dv_j = sum_i p_ij dout_i,
                       dk_j = sum_i ds_ij q_i / sqrt(HS), column side of the bias gradient
             with ds_ij = p_ij (dout_i . v_j - D_i). Two passes cost two extra dot
             products per pair over a fused kernel but need no atomics: every gradient
             has one writer, and the row and column sums of ds that the CABLE encodings
             need are plain per-thread sums.
  causality  tiles entirely above the diagonal are never visited; in the diagonal tiles
             masked pairs are dropped by value, so every lane reaches every shuffle.

Memory: besides the inputs and outputs, lse and D (B*NH*T floats each) and about 41 KiB of
shared memory per block at most (HS = 128).
*/
#ifndef LLMC_ATTENTION_BIAS_CUH
#define LLMC_ATTENTION_BIAS_CUH

#include <type_traits>
#include "cuda_common.cuh"

// whether a PEGrad holds its lane's share of a warp's reduction (static constexpr bool
// per_lane = true): the kernels then keep it with its lane
template<class G, class = void> struct GradPerLane { static constexpr bool value = false; };
template<class G> struct GradPerLane<G, std::void_t<decltype(G::per_lane)>> { static constexpr bool value = G::per_lane; };

#define ATT_DPT 16   // head dimensions per thread
#define ATT_BQ 64    // query rows per block (forward, dq pass)
#define ATT_BK 32    // keys per shared-memory tile (forward, dq pass)
#define ATT_KV_BK 64 // keys per block (dk/dv pass)
#define ATT_KV_BQ 32 // query rows per shared-memory tile (dk/dv pass)
#define PE_SIDE_ROW 0
#define PE_SIDE_COL 1

// The encoding's per-row state of the bias (PERow: what pe_bias_row returns) and its gradient
// accumulators (PEGrad), as dependent types: the kernels are defined before the encoding's
// hooks, which are found where the kernels are instantiated (pe_grad_of is declared with the
// trainer's defaults)
template<class PE> using PERowOf = decltype(pe_bias_row(static_cast<const PE*>(nullptr), 0, 0, 0));
template<class PE> using PEGradOf = decltype(pe_grad_of(static_cast<const PE*>(nullptr)));

// An encoding's bias at the tokens' positions: the hooks of PE, called with the positions of
// query i and key j of batch row b, pos[b T + i] and pos[b T + j] (given or drawn, llmc/model.h);
// a second instance of the kernels, so that those with PE itself, at the indices, stay as
// they are. Its row (PEPosRow) is the encoding's, with where row b's positions start. Positions
// only enter the bias: masking and the per-token gradients of pe_bias_flush stay with the
// tokens. Positions never decrease along a row, so pos_j <= pos_i wherever j <= i.
template<class PE>
struct PEPositions {
    PE pe;
    const int* pos; // (B, T) device
    int T;
};
template<class PE>
struct PEPosRow {
    PERowOf<PE> r;
    int at;      // row b's first position: pos + b T
    float shift; // the encoding's row's
};
template<class PE>
PEGradOf<PE> pe_grad_of(const PEPositions<PE>*);
// the position of key j of the row (a key past the row's end, which the kernels hand to the
// hooks of pairs they then drop, reads the row's last)
template<class PE>
__device__ __forceinline__ int pe_position(const PEPositions<PE>* w, const PEPosRow<PE>* r, int j) { return w->pos[r->at + min(j, w->T - 1)]; }
template<class PE>
__device__ __forceinline__ PEPosRow<PE> pe_bias_row(const PEPositions<PE>* w, int b, int h, int i) {
    PERowOf<PE> r = pe_bias_row(&w->pe, b, h, w->pos[b * w->T + min(i, w->T - 1)]);
    return {r, b * w->T, r.shift};
}
template<class PE>
__device__ __forceinline__ float pe_bias(const PEPositions<PE>* w, const PEPosRow<PE>* r, int j) { return pe_bias(&w->pe, &r->r, pe_position(w, r, j)); }
template<class PE>
__device__ __forceinline__ void pe_bias_backward_warp(const PEPositions<PE>* w, PEGradOf<PE>* g, int side, const PEPosRow<PE>* r, int j,
                                                      float ds, bool valid) {
    pe_bias_backward_warp(&w->pe, g, side, &r->r, pe_position(w, r, j), ds, valid);
}
template<class PE>
__device__ __forceinline__ void pe_bias_flush(const PEPositions<PE>* w, PEGradOf<PE>* g, int side, int b, int h, int t, bool valid, int slot) {
    pe_bias_flush(&w->pe, g, side, b, h, t, valid, slot);
}

// sum over the HS / ATT_DPT threads that share a row (consecutive lanes)
template<int TPR>
__device__ __forceinline__ float row_group_sum(float v) {
    for (int off = 1; off < TPR; off <<= 1) { v += __shfl_xor_sync(0xffffffffu, v, off); }
    return v;
}

// loads rows [r0, r0 + R) of one head's q, k or v (column offset `col` in a row of C3)
// into shared memory as fp32 (R x HS, row-major); rows at or beyond T are zeros
template<int HS>
__device__ void attention_load_tile(float* dst, const floatX* src, int b, int r0, int R, int T, int C3, int col) {
    for (int e = threadIdx.x; e < R * HS; e += blockDim.x) {
        int r = e / HS, c = e % HS;
        int t = r0 + r;
        dst[e] = t < T ? (float)src[((size_t)b * T + t) * C3 + col + c] : 0.0f;
    }
}

// loads this thread's ATT_DPT dimensions (part p of TPR) of a row of HS values
template<int TPR>
__device__ __forceinline__ void attention_load_row(float* x, const floatX* src, int p) {
    #pragma unroll
    for (int g = 0; g < ATT_DPT / 4; g++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) { x[4 * g + e] = (float)src[4 * (g * TPR + p) + e]; }
    }
}

template<int TPR>
__device__ __forceinline__ void attention_store_row(floatX* dst, const float* x, float scale, int p) {
    #pragma unroll
    for (int g = 0; g < ATT_DPT / 4; g++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) { dst[4 * (g * TPR + p) + e] = (floatX)(x[4 * g + e] * scale); }
    }
}

// the backward's D_i = dout_i . out_i, summed over the row's TPR threads; g keeps this
// thread's part of dout_i
template<int TPR>
__device__ __forceinline__ float attention_row_delta(float* g, const floatX* dout_row, const floatX* out_row, int p) {
    float o[ATT_DPT];
    attention_load_row<TPR>(g, dout_row, p);
    attention_load_row<TPR>(o, out_row, p);
    float Di = 0.0f;
    #pragma unroll
    for (int k = 0; k < ATT_DPT; k++) { Di += g[k] * o[k]; }
    return row_group_sum<TPR>(Di);
}

// partial dot product of this thread's dimensions with row `r` of a shared-memory tile
// (rows LD floats apart)
template<int HS, int TPR, int LD = HS>
__device__ __forceinline__ float attention_dot(const float* x, const float* tile, int r, int p) {
    const float4* row = reinterpret_cast<const float4*>(tile + r * LD);
    float acc = 0.0f;
    #pragma unroll
    for (int g = 0; g < ATT_DPT / 4; g++) {
        float4 k = row[g * TPR + p];
        acc += x[4 * g] * k.x + x[4 * g + 1] * k.y + x[4 * g + 2] * k.z + x[4 * g + 3] * k.w;
    }
    return acc;
}

// y += a * (row `r` of a shared-memory tile, rows LD floats apart), this thread's dimensions
template<int HS, int TPR, int LD = HS>
__device__ __forceinline__ void attention_axpy(float* y, float a, const float* tile, int r, int p) {
    const float4* row = reinterpret_cast<const float4*>(tile + r * LD);
    #pragma unroll
    for (int g = 0; g < ATT_DPT / 4; g++) {
        float4 v = row[g * TPR + p];
        y[4 * g] += a * v.x; y[4 * g + 1] += a * v.y; y[4 * g + 2] += a * v.z; y[4 * g + 3] += a * v.w;
    }
}

// what an online-softmax step does besides the output and the running sum: nothing; an
// attention of its own may keep more of each tile's probabilities (shaw's sums by table row,
// llmc/attention_shaw.cuh): rescale(corr) with the output, add(jj, p) for each key jj
struct SoftmaxPlain {
    __device__ __forceinline__ void rescale(float corr) {}
    __device__ __forceinline__ void add(int jj, float pij) {}
};

// one tile of the online softmax: with the tile's scores s (-inf where masked), the running
// maximum m and sum l move to the tile's, o is rescaled and gains the probabilities times the
// tile's values (rows of vs), and so does what `extra` keeps; nothing while every score so far
// is -inf (a row past T)
template<int HS, int TPR, int BK, class Extra = SoftmaxPlain>
__device__ __forceinline__ void attention_softmax_tile(const float (&s)[BK], float& m, float& l, float* o, const float* vs, int p,
                                                       Extra extra = Extra()) {
    float m_new = m;
    #pragma unroll
    for (int jj = 0; jj < BK; jj++) { m_new = fmaxf(m_new, s[jj]); }
    if (m_new == -INFINITY) { return; }
    float corr = expf(m - m_new);
    l *= corr;
    #pragma unroll
    for (int k = 0; k < ATT_DPT; k++) { o[k] *= corr; }
    extra.rescale(corr);
    #pragma unroll
    for (int jj = 0; jj < BK; jj++) {
        float pij = expf(s[jj] - m_new);
        l += pij;
        attention_axpy<HS, TPR>(o, pij, vs, jj, p);
        extra.add(jj, pij);
    }
    m = m_new;
}

// the biases of query row i for the keys j0.. j0 + ATT_BK - 1 into its row of a shared tile,
// shared out among the TPR threads of the row (part p takes keys p, p + TPR, ...), so that
// each pair's bias is evaluated once; masked pairs get 0
template<int TPR, class PE, class Row>
__device__ __forceinline__ void attention_bias_tile(float* bias_row, const PE& pb, const Row& pr, int i, int j0, int T, int p) {
    for (int jj = p; jj < ATT_BK; jj += TPR) {
        int j = j0 + jj;
        bias_row[jj] = j <= i && i < T ? pe_bias(&pb, &pr, j) : 0.0f;
    }
}

// ----------------------------------------------------------------------------
// kernels

// attention_forward_kernel: out_i = sum_j softmax_j(q_i.k_j / sqrt(HS) + b(i, j)) v_j over
// j <= i, for the 64 query rows of this block, streaming the keys in tiles of 32 with an
// online softmax (running max m, running sum l); writes lse_i = m + log(l) for the backward.
template<int HS, class PE>
__global__ void __launch_bounds__(ATT_BQ * HS / ATT_DPT)
attention_forward_kernel(floatX* out, float* lse, const floatX* qkv, const PE pb, int T, int NH) {
    constexpr int TPR = HS / ATT_DPT;
    __shared__ __align__(16) float ks[ATT_BK * HS];
    __shared__ __align__(16) float vs[ATT_BK * HS];
    __shared__ float bias[ATT_BQ][ATT_BK + 1];
    int b = blockIdx.z, h = blockIdx.y;
    int qt = gridDim.x - 1 - blockIdx.x; // the longest rows first
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR;
    int i = qt * ATT_BQ + r;
    int C = NH * HS, C3 = 3 * C;
    int row = i < T ? i : T - 1; // rows past T compute on a valid row and write nothing
    float scale = 1.0f / sqrtf((float)HS);
    PERowOf<PE> pr = pe_bias_row(&pb, b, h, row);
    float q[ATT_DPT], o[ATT_DPT];
    attention_load_row<TPR>(q, qkv + ((size_t)b * T + row) * C3 + h * HS, p);
    #pragma unroll
    for (int k = 0; k < ATT_DPT; k++) { o[k] = 0.0f; }
    float m = -INFINITY, l = 0.0f;
    int last_key = min(qt * ATT_BQ + ATT_BQ, T) - 1;
    for (int j0 = 0; j0 <= last_key; j0 += ATT_BK) {
        __syncthreads();
        attention_load_tile<HS>(ks, qkv, b, j0, ATT_BK, T, C3, C + h * HS);
        attention_load_tile<HS>(vs, qkv, b, j0, ATT_BK, T, C3, 2 * C + h * HS);
        attention_bias_tile<TPR>(bias[r], pb, pr, i, j0, T, p);
        __syncthreads();
        float s[ATT_BK];
        #pragma unroll
        for (int jj = 0; jj < ATT_BK; jj++) {
            float dot = row_group_sum<TPR>(attention_dot<HS, TPR>(q, ks, jj, p));
            int j = j0 + jj;
            s[jj] = j <= i && i < T ? dot * scale + bias[r][jj] : -INFINITY;
        }
        attention_softmax_tile<HS, TPR>(s, m, l, o, vs, p);
    }
    if (i < T) {
        attention_store_row<TPR>(out + ((size_t)b * T + i) * C + h * HS, o, 1.0f / l, p);
        if (p == 0) { lse[((size_t)b * NH + h) * T + i] = m + logf(l) + pr.shift; }
    }
}

// attention_backward_q_kernel: for the 64 query rows of this block, D_i = dout_i . out_i
// (kept for the dk/dv pass), then over the keys j <= i: p_ij from lse, ds_ij = p_ij
// (dout_i . v_j - D_i), dq_i = sum_j ds_ij k_j / sqrt(HS); hands ds_ij to the row side of
// the bias gradient.
template<int HS, class PE>
__global__ void __launch_bounds__(ATT_BQ * HS / ATT_DPT)
attention_backward_q_kernel(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out,
                            const float* lse, const PE pb, int T, int NH) {
    constexpr int TPR = HS / ATT_DPT;
    __shared__ __align__(16) float ks[ATT_BK * HS];
    __shared__ __align__(16) float vs[ATT_BK * HS];
    __shared__ float bias[ATT_BQ][ATT_BK + 1];
    int b = blockIdx.z, h = blockIdx.y;
    int qt = gridDim.x - 1 - blockIdx.x;
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR;
    int i = qt * ATT_BQ + r;
    int C = NH * HS, C3 = 3 * C;
    int row = i < T ? i : T - 1;
    float scale = 1.0f / sqrtf((float)HS);
    float q[ATT_DPT], g[ATT_DPT], dq[ATT_DPT] = {};
    attention_load_row<TPR>(q, qkv + ((size_t)b * T + row) * C3 + h * HS, p);
    float Di = attention_row_delta<TPR>(g, dout + ((size_t)b * T + row) * C + h * HS, out + ((size_t)b * T + row) * C + h * HS, p);
    size_t lse_idx = ((size_t)b * NH + h) * T + row;
    if (i < T && p == 0) { D[lse_idx] = Di; }
    PERowOf<PE> pr = pe_bias_row(&pb, b, h, row);
    float row_lse = lse[lse_idx] - pr.shift;
    PEGradOf<PE> acc = {};
    int last_key = min(qt * ATT_BQ + ATT_BQ, T) - 1;
    for (int j0 = 0; j0 <= last_key; j0 += ATT_BK) {
        __syncthreads();
        attention_load_tile<HS>(ks, qkv, b, j0, ATT_BK, T, C3, C + h * HS);
        attention_load_tile<HS>(vs, qkv, b, j0, ATT_BK, T, C3, 2 * C + h * HS);
        attention_bias_tile<TPR>(bias[r], pb, pr, i, j0, T, p);
        __syncthreads();
        #pragma unroll 4
        for (int jj = 0; jj < ATT_BK; jj++) {
            float dot = row_group_sum<TPR>(attention_dot<HS, TPR>(q, ks, jj, p));
            float dp = row_group_sum<TPR>(attention_dot<HS, TPR>(g, vs, jj, p));
            int j = j0 + jj;
            if (j <= i && i < T) {
                float pij = expf(dot * scale + bias[r][jj] - row_lse);
                float ds = pij * (dp - Di);
                attention_axpy<HS, TPR>(dq, ds * scale, ks, jj, p);
                if (p == 0) { pe_bias_backward_warp(&pb, &acc, PE_SIDE_ROW, &pr, j, ds, true); }
            }
        }
    }
    if (i < T) { attention_store_row<TPR>(dqkv + ((size_t)b * T + i) * C3 + h * HS, dq, 1.0f, p); }
    pe_bias_flush(&pb, &acc, PE_SIDE_ROW, b, h, i, i < T && p == 0, 0);
}

// attention_backward_kv_kernel: for the 64 keys of this block, over the queries i >= j:
// dv_j = sum_i p_ij dout_i, dk_j = sum_i ds_ij q_i / sqrt(HS); hands ds_ij to the column
// side of the bias gradient. Needs D from attention_backward_q_kernel.
template<int HS, class PE>
__global__ void __launch_bounds__(ATT_KV_BK * HS / ATT_DPT)
attention_backward_kv_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse, const float* D,
                             const PE pb, int T, int NH) {
    constexpr int TPR = HS / ATT_DPT;
    __shared__ __align__(16) float qs[ATT_KV_BQ * HS];
    __shared__ __align__(16) float gs[ATT_KV_BQ * HS];
    __shared__ float lses[ATT_KV_BQ]; // lse_i - r.shift
    __shared__ float Ds[ATT_KV_BQ];
    __shared__ PERowOf<PE> rows[ATT_KV_BQ];
    __shared__ float bias[ATT_KV_BK][ATT_KV_BQ + 1]; // [key][query]
    int b = blockIdx.z, h = blockIdx.y, kt = blockIdx.x;
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR;
    int j = kt * ATT_KV_BK + r;
    int C = NH * HS, C3 = 3 * C;
    int col = j < T ? j : T - 1;
    float scale = 1.0f / sqrtf((float)HS);
    float k[ATT_DPT], v[ATT_DPT], dk[ATT_DPT], dv[ATT_DPT];
    attention_load_row<TPR>(k, qkv + ((size_t)b * T + col) * C3 + C + h * HS, p);
    attention_load_row<TPR>(v, qkv + ((size_t)b * T + col) * C3 + 2 * C + h * HS, p);
    #pragma unroll
    for (int e = 0; e < ATT_DPT; e++) { dk[e] = 0.0f; dv[e] = 0.0f; }
    PEGradOf<PE> acc = {};
    const float* lse_bh = lse + ((size_t)b * NH + h) * T;
    const float* D_bh = D + ((size_t)b * NH + h) * T;
    for (int i0 = kt * ATT_KV_BK; i0 < T; i0 += ATT_KV_BQ) { // ATT_KV_BK is a multiple of ATT_KV_BQ
        __syncthreads();
        attention_load_tile<HS>(qs, qkv, b, i0, ATT_KV_BQ, T, C3, h * HS);
        attention_load_tile<HS>(gs, dout, b, i0, ATT_KV_BQ, T, C, h * HS);
        for (int e = threadIdx.x; e < ATT_KV_BQ; e += blockDim.x) {
            rows[e] = pe_bias_row(&pb, b, h, min(i0 + e, T - 1));
            lses[e] = i0 + e < T ? lse_bh[i0 + e] - rows[e].shift : 0.0f;
            Ds[e] = i0 + e < T ? D_bh[i0 + e] : 0.0f;
        }
        __syncthreads();
        // this thread's share of its key's biases (the rows' numbers are in shared memory now)
        for (int ii = p; ii < ATT_KV_BQ; ii += TPR) { bias[r][ii] = j <= i0 + ii && i0 + ii < T ? pe_bias(&pb, &rows[ii], j) : 0.0f; }
        __syncwarp(); // the TPR threads of a key are lanes of one warp
        #pragma unroll 4
        for (int ii = 0; ii < ATT_KV_BQ; ii++) {
            float dot = row_group_sum<TPR>(attention_dot<HS, TPR>(k, qs, ii, p));
            float dp = row_group_sum<TPR>(attention_dot<HS, TPR>(v, gs, ii, p));
            int i = i0 + ii;
            bool valid = j <= i && i < T;
            float ds = 0.0f;
            if (valid) {
                float pij = expf(dot * scale + bias[r][ii] - lses[ii]);
                ds = pij * (dp - Ds[ii]);
                attention_axpy<HS, TPR>(dv, pij, gs, ii, p);
                attention_axpy<HS, TPR>(dk, ds * scale, qs, ii, p);
            }
            pe_bias_backward_warp(&pb, &acc, PE_SIDE_COL, &rows[ii], j, ds, valid && p == 0);
        }
    }
    if (j < T) {
        floatX* dst = dqkv + ((size_t)b * T + j) * C3 + h * HS;
        attention_store_row<TPR>(dst + C, dk, 1.0f, p);
        attention_store_row<TPR>(dst + 2 * C, dv, 1.0f, p);
    }
    pe_bias_flush(&pb, &acc, PE_SIDE_COL, b, h, j, j < T && p == 0, ((b * NH + h) * gridDim.x + kt));
}

// ----------------------------------------------------------------------------
// launchers

// a kernel's dynamic shared memory beyond the default 48 KiB (the attentions of their own: txl,
// shaw, complex_order); one clear error where the GPU allows less per block
template<class K>
static void attention_allow_smem(K* kernel, size_t bytes, size_t limit, const char* name) {
    if (bytes > limit) { fatal("%s needs %.1f KiB of shared memory per block, this GPU allows %.1f KiB", name, bytes / 1024.0, limit / 1024.0); }
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

// number of per-block partials the dk/dv pass writes for the parameter gradients:
// one per (b, h, key block)
static inline int attention_kv_blocks(int B, int T, int NH) { return B * NH * CEIL_DIV(T, ATT_KV_BK); }

template<int HS, class PE>
static void attention_forward_hs(floatX* out, float* lse, const floatX* qkv, const PE& pb, int B, int T, int NH, cudaStream_t stream) {
    dim3 grid(CEIL_DIV(T, ATT_BQ), NH, B);
    attention_forward_kernel<HS, PE><<<grid, ATT_BQ * HS / ATT_DPT, 0, stream>>>(out, lse, qkv, pb, T, NH);
    cudaCheckLaunch("attention_forward_kernel");
}

template<int HS, class PE>
static void attention_backward_hs(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out,
                                  const float* lse, const PE& pb, int B, int T, int NH, cudaStream_t stream) {
    dim3 grid_q(CEIL_DIV(T, ATT_BQ), NH, B);
    attention_backward_q_kernel<HS, PE><<<grid_q, ATT_BQ * HS / ATT_DPT, 0, stream>>>(dqkv, D, dout, qkv, out, lse, pb, T, NH);
    cudaCheckLaunch("attention_backward_q_kernel");
    dim3 grid_kv(CEIL_DIV(T, ATT_KV_BK), NH, B);
    attention_backward_kv_kernel<HS, PE><<<grid_kv, ATT_KV_BK * HS / ATT_DPT, 0, stream>>>(dqkv, dout, qkv, lse, D, pb, T, NH);
    cudaCheckLaunch("attention_backward_kv_kernel");
}

static inline int attention_head_size_supported(int hs) { return hs == 32 || hs == 64 || hs == 128; }

// f(std::integral_constant<int, HS>()) for the run's head size HS, so that a launcher calls the
// kernels' instance of that size (32, 64 and 128 are compiled); another is one clear error
template<class F>
static void attention_for_head_size(int HS, F f) {
    switch (HS) {
        case 32: f(std::integral_constant<int, 32>()); break;
        case 64: f(std::integral_constant<int, 64>()); break;
        case 128: f(std::integral_constant<int, 128>()); break;
        default: fatal("attention: head size %d is not compiled (32, 64 or 128)", HS);
    }
}

// out (B, T, C) and lse (B, NH, T) from qkv (B, T, 3C)
template<class PE>
static void attention_forward_tiled(floatX* out, float* lse, const floatX* qkv, const PE& pb, int B, int T, int NH, int HS, cudaStream_t stream) {
    attention_for_head_size(HS, [&](auto hs) {
        attention_forward_hs<decltype(hs)::value>(out, lse, qkv, pb, B, T, NH, stream);
    });
}

// dqkv (B, T, 3C), written in full, and the bias gradients through the PE's hooks;
// D (B, NH, T) is scratch
template<class PE>
static void attention_backward_tiled(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out, const float* lse,
                                     const PE& pb, int B, int T, int NH, int HS, cudaStream_t stream) {
    attention_for_head_size(HS, [&](auto hs) {
        attention_backward_hs<decltype(hs)::value>(dqkv, D, dout, qkv, out, lse, pb, B, T, NH, stream);
    });
}

// the trainer's attention: on tensor cores in bf16 (llmc/attention_mma.cuh); the fp32 build,
// which is compared tightly with the CPU path, keeps the fp32 kernels above
#if defined(ENABLE_FP32)
template<class PE>
static void attention_forward(floatX* out, float* lse, const floatX* qkv, const PE& pb, int B, int T, int NH, int HS, cudaStream_t stream) {
    attention_forward_tiled(out, lse, qkv, pb, B, T, NH, HS, stream);
}
template<class PE>
static void attention_backward(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out, const float* lse,
                               const PE& pb, int B, int T, int NH, int HS, cudaStream_t stream) {
    attention_backward_tiled(dqkv, D, dout, qkv, out, lse, pb, B, T, NH, HS, stream);
}
#else
#include "attention_mma.cuh"
template<class PE>
static void attention_forward(floatX* out, float* lse, const floatX* qkv, const PE& pb, int B, int T, int NH, int HS, cudaStream_t stream) {
    attention_forward_mma(out, lse, qkv, pb, B, T, NH, HS, stream);
}
template<class PE>
static void attention_backward(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out, const float* lse,
                               const PE& pb, int B, int T, int NH, int HS, cudaStream_t stream) {
    attention_backward_mma(dqkv, D, dout, qkv, out, lse, pb, B, T, NH, HS, stream);
}
#endif

#endif // LLMC_ATTENTION_BIAS_CUH
