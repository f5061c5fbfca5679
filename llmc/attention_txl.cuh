/*
Transformer-XL's relative attention (PE=txl, train_gpt2.c "txl": the DAPE repository's
RelativePositionalEncodingLayer), forward and backward, without a T x T tensor:

  s_ij = ((q_i + r_w) . k_j + (q_i + r_r) . P[i - j]) / sqrt(HS),  j <= i

for one head, with P (T, C) = R W_r^T the projected sinusoids of each distance (head h's
HS columns; computed by the trainer with one matmul per layer) and r_w, r_r (HS) the
head's biases. The second term depends on q_i and on the distance, not on a bias of the
pair: the official code computes it for every (i, key) as a T x T matrix and moves each
row's entries into place with a rel-shift. Here each block keeps the band of P's rows that
its tile of pairs needs in shared memory and reads row i - j of it directly, so the term
costs one more HS-long dot product per pair, and its gradient with respect to P (a sum
over the pairs of each distance) has a pass of its own, with blocks of distances.

These kernels are the fp32 kernels' design (llmc/attention_bias.cuh: a thread owns one row,
a query, key or distance, and ATT_DPT = 16 of its HS dimensions; the other side streams
through shared memory in tiles, converted to fp32; online softmax), used by both builds:
the products run on CUDA cores in fp32, q, k, v, P read in the build's precision. Tensor
cores would need the band product and its skew (a 16 x 80 product per 16 x 64 tile of pairs
and a gather of each row's diagonal through shared memory) in all four passes; see
docs/cuda.md. Passes, each recomputing p_ij from lse:

  forward   block = 64 query rows, key tiles of 32, P's band of 95 distances per tile
  dq pass   dq_i = sum_j ds_ij (k_j + P[i - j]) / sqrt(HS), D_i; and per block the sums over
            its rows of both parts, the gradients of r_w (sum_j ds_ij k_j / sqrt(HS)) and of
            r_r (sum_j ds_ij P[i - j] / sqrt(HS))
  dk/dv     block = 64 keys, query tiles of 32: dv_j = sum_i p_ij dout_i,
            dk_j = sum_i ds_ij (q_i + r_w) / sqrt(HS)
  dP pass   block = 64 distances n of one head, over every row of the batch and the query
            tiles from i = n: dP[n] = sum_i ds_{i, i-n} (q_i + r_r) / sqrt(HS), written once
            (deterministic, no atomics), in the build's precision for the weight-gradient
            matmul dW_r = dP^T R

Shared memory: the band tiles' rows are HS + 4 floats apart, so that the threads of a warp,
which read different rows of a band, fall into different banks. At HS = 64: 41 KiB
(forward, dq), 42 KiB (dk/dv), 67 KiB (dP); 81, 82 and 131 KiB at HS = 128.
*/
#ifndef LLMC_ATTENTION_TXL_CUH
#define LLMC_ATTENTION_TXL_CUH

#define TXL_BAND (ATT_BQ + ATT_BK - 1) // distances (or keys) a 64 x 32 tile of pairs spans
#define TXL_BLOCK 64                   // distances per block of the dP pass
#define TXL_BQ 32                      // its query tiles

// the parameters of one layer's txl attention
struct TxlArgs {
    const floatX* P;  // (T, C) the projected sinusoids of distance 0..T-1
    const floatX* rw; // (NH, HS) r_w
    const floatX* rr; // (NH, HS) r_r
    floatX* dP;       // (T, C) backward: dL/dP
    float* partials;  // (B, NH, query blocks, 2 HS) backward: per block, the sums for dr_w, dr_r
};

// rows [n0, n0 + R) of a (T, ld) matrix at column col into a shared tile of rows LD apart,
// in fp32: a band of distances (P) or of one batch row's keys; rows outside [0, T) are zeros
template<int HS, int LD>
__device__ void txl_load_band(float* dst, const floatX* src, int n0, int R, int T, int ld, int col) {
    for (int e = threadIdx.x; e < R * HS; e += blockDim.x) {
        int r = e / HS, c = e % HS, n = n0 + r;
        dst[r * LD + c] = n >= 0 && n < T ? (float)src[(size_t)n * ld + col + c] : 0.0f;
    }
}

// this thread's ATT_DPT dimensions of one head's vector (attention_load_row's layout)
template<int TPR>
__device__ __forceinline__ void txl_load_vec(float* x, const floatX* v, int p) { attention_load_row<TPR>(x, v, p); }

// partial dot product of rows a (of a tile of rows HS apart) and b (of a band, LD apart)
// over this thread's dimensions
template<int HS, int TPR, int LD>
__device__ __forceinline__ float txl_dot_rows(const float* a, int ra, const float* band, int rb, int p) {
    const float4* x = reinterpret_cast<const float4*>(a + ra * HS);
    const float4* y = reinterpret_cast<const float4*>(band + rb * LD);
    float acc = 0.0f;
    #pragma unroll
    for (int g = 0; g < ATT_DPT / 4; g++) {
        float4 u = x[g * TPR + p], w = y[g * TPR + p];
        acc += u.x * w.x + u.y * w.y + u.z * w.z + u.w * w.w;
    }
    return acc;
}

// the per-row numbers of one batch row's query tile [i0, i0 + R): lse_i, D_i (0 past T)
__device__ __forceinline__ void txl_load_rows(float* lses, float* Ds, const float* lse_bh, const float* D_bh, int i0, int R, int T) {
    for (int e = threadIdx.x; e < R; e += blockDim.x) {
        lses[e] = i0 + e < T ? lse_bh[i0 + e] : 0.0f;
        Ds[e] = i0 + e < T ? D_bh[i0 + e] : 0.0f;
    }
}

// query row i's two operands, this thread's dimensions: q_i + r_w (with the keys) and
// q_i + r_r (with P)
template<int TPR>
__device__ __forceinline__ void txl_load_query(float* qw, float* qr, const floatX* q, const TxlArgs& a, int h, int p) {
    constexpr int HS = TPR * ATT_DPT;
    float rw[ATT_DPT];
    attention_load_row<TPR>(qw, q, p);
    txl_load_vec<TPR>(rw, a.rw + h * HS, p);
    txl_load_vec<TPR>(qr, a.rr + h * HS, p);
    #pragma unroll
    for (int e = 0; e < ATT_DPT; e++) { qr[e] += qw[e]; qw[e] += rw[e]; }
}

// the key tile [j0, j0 + ATT_BK) of a block of query rows from q0: K and V, and P's band of
// the tile's distances (i - j from q0 - j0 - ATT_BK + 1)
template<int HS, int LD>
__device__ __forceinline__ void txl_load_keys(float* ks, float* vs, float* ps, const floatX* qkv, const TxlArgs& a, int b, int h,
                                              int q0, int j0, int T, int C) {
    attention_load_tile<HS>(ks, qkv, b, j0, ATT_BK, T, 3 * C, C + h * HS);
    attention_load_tile<HS>(vs, qkv, b, j0, ATT_BK, T, 3 * C, 2 * C + h * HS);
    txl_load_band<HS, LD>(ps, a.P, q0 - j0 - (ATT_BK - 1), TXL_BAND, T, C, h * HS);
}

// writes x + a v (v: one head's vector, this thread's dimensions) into dst: the r_w or r_r
// part of a gradient, summed as a scalar over the pairs
template<int TPR>
__device__ __forceinline__ void txl_store_plus(floatX* dst, float* x, float a, const floatX* v, int p) {
    float w[ATT_DPT];
    txl_load_vec<TPR>(w, v, p);
    #pragma unroll
    for (int e = 0; e < ATT_DPT; e++) { x[e] += a * w[e]; }
    attention_store_row<TPR>(dst, x, 1.0f, p);
}

// c[r] = v . band[r] for the R rows of a band (v: HS values of the build's precision)
template<int HS, int LD>
__device__ void txl_band_dots(float* c, const float* band, const floatX* v, int R) {
    for (int r = threadIdx.x; r < R; r += blockDim.x) {
        float acc = 0.0f;
        for (int e = 0; e < HS; e++) { acc += (float)v[e] * band[r * LD + e]; }
        c[r] = acc;
    }
}

// ----------------------------------------------------------------------------
// kernels

// txl_forward_kernel: out_i = softmax_j(s_ij) v over j <= i for the 64 query rows of this
// block, and lse_i; key tiles of 32 with P's rows of their distances (i - j from q0 - j0 - 31)
template<int HS>
__global__ void __launch_bounds__(ATT_BQ * HS / ATT_DPT)
txl_forward_kernel(floatX* out, float* lse, const floatX* qkv, const TxlArgs a, int T, int NH) {
    constexpr int TPR = HS / ATT_DPT, LD = HS + 4;
    float* ks = (float*)DYNAMIC_SMEM;
    float* vs = ks + ATT_BK * HS;
    float* ps = vs + ATT_BK * HS; // TXL_BAND rows of LD
    int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * ATT_BQ; // the longest rows first
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR, i = q0 + r;
    int C = NH * HS, C3 = 3 * C;
    int row = i < T ? i : T - 1; // rows past T compute on a valid row and write nothing
    float scale = 1.0f / sqrtf((float)HS);
    float qw[ATT_DPT], qr[ATT_DPT], o[ATT_DPT] = {};
    txl_load_query<TPR>(qw, qr, qkv + ((size_t)b * T + row) * C3 + h * HS, a, h, p);
    float m = -INFINITY, l = 0.0f;
    int last_key = min(q0 + ATT_BQ, T) - 1;
    for (int j0 = 0; j0 <= last_key; j0 += ATT_BK) {
        __syncthreads();
        txl_load_keys<HS, LD>(ks, vs, ps, qkv, a, b, h, q0, j0, T, C);
        __syncthreads();
        float s[ATT_BK];
        #pragma unroll
        for (int jj = 0; jj < ATT_BK; jj++) {
            // P's row of distance i - j is band row r - jj + ATT_BK - 1
            float dot = row_group_sum<TPR>(attention_dot<HS, TPR>(qw, ks, jj, p)
                                           + attention_dot<HS, TPR, LD>(qr, ps, r - jj + ATT_BK - 1, p));
            int j = j0 + jj;
            s[jj] = j <= i && i < T ? dot * scale : -INFINITY;
        }
        attention_softmax_tile<HS, TPR>(s, m, l, o, vs, p);
    }
    if (i < T) {
        attention_store_row<TPR>(out + ((size_t)b * T + i) * C + h * HS, o, 1.0f / l, p);
        if (p == 0) { lse[((size_t)b * NH + h) * T + i] = m + logf(l); }
    }
}

// txl_backward_q_kernel: for the 64 query rows of this block, D_i = dout_i . out_i, then
// over the keys j <= i: ds_ij = p_ij (dout_i . v_j - D_i), dq_i = sum_j ds_ij (k_j + P[i - j])
// / sqrt(HS); the block's sums over its rows of the two parts go to its partial (dr_w, dr_r)
template<int HS>
__global__ void __launch_bounds__(ATT_BQ * HS / ATT_DPT)
txl_backward_q_kernel(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out, const float* lse,
                      const TxlArgs a, int T, int NH) {
    constexpr int TPR = HS / ATT_DPT, LD = HS + 4;
    float* ks = (float*)DYNAMIC_SMEM;
    float* vs = ks + ATT_BK * HS;
    float* ps = vs + ATT_BK * HS;
    int b = blockIdx.z, h = blockIdx.y, qt = gridDim.x - 1 - blockIdx.x, q0 = qt * ATT_BQ;
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR, i = q0 + r;
    int C = NH * HS, C3 = 3 * C;
    int row = i < T ? i : T - 1;
    float scale = 1.0f / sqrtf((float)HS);
    float qw[ATT_DPT], qr[ATT_DPT], g[ATT_DPT], dqc[ATT_DPT] = {}, dqp[ATT_DPT] = {};
    txl_load_query<TPR>(qw, qr, qkv + ((size_t)b * T + row) * C3 + h * HS, a, h, p);
    float Di = attention_row_delta<TPR>(g, dout + ((size_t)b * T + row) * C + h * HS, out + ((size_t)b * T + row) * C + h * HS, p);
    size_t lse_idx = ((size_t)b * NH + h) * T + row;
    if (i < T && p == 0) { D[lse_idx] = Di; }
    float row_lse = lse[lse_idx];
    int last_key = min(q0 + ATT_BQ, T) - 1;
    for (int j0 = 0; j0 <= last_key; j0 += ATT_BK) {
        __syncthreads();
        txl_load_keys<HS, LD>(ks, vs, ps, qkv, a, b, h, q0, j0, T, C);
        __syncthreads();
        #pragma unroll 4
        for (int jj = 0; jj < ATT_BK; jj++) {
            int n = r - jj + ATT_BK - 1; // band row of distance i - j
            float dot = row_group_sum<TPR>(attention_dot<HS, TPR>(qw, ks, jj, p) + attention_dot<HS, TPR, LD>(qr, ps, n, p));
            float dp = row_group_sum<TPR>(attention_dot<HS, TPR>(g, vs, jj, p));
            int j = j0 + jj;
            if (j <= i && i < T) {
                float ds = expf(dot * scale - row_lse) * (dp - Di) * scale;
                attention_axpy<HS, TPR>(dqc, ds, ks, jj, p);
                attention_axpy<HS, TPR, LD>(dqp, ds, ps, n, p);
            }
        }
    }
    float dq[ATT_DPT];
    #pragma unroll
    for (int e = 0; e < ATT_DPT; e++) { dq[e] = dqc[e] + dqp[e]; }
    if (i < T) { attention_store_row<TPR>(dqkv + ((size_t)b * T + i) * C3 + h * HS, dq, 1.0f, p); }
    // the block's sums over its rows: rows in shared memory, then a thread per dimension
    __syncthreads();
    float* red = ks; // (2, ATT_BQ, HS): the content parts, then the position parts
    #pragma unroll
    for (int gq = 0; gq < ATT_DPT / 4; gq++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            int d = 4 * (gq * TPR + p) + e;
            red[r * HS + d] = dqc[4 * gq + e];
            red[(ATT_BQ + r) * HS + d] = dqp[4 * gq + e];
        }
    }
    __syncthreads();
    float* part = a.partials + (((size_t)b * NH + h) * gridDim.x + qt) * 2 * HS;
    for (int c = threadIdx.x; c < 2 * HS; c += blockDim.x) {
        float sum = 0.0f;
        for (int rr = 0; rr < ATT_BQ; rr++) { sum += red[((c / HS) * ATT_BQ + rr) * HS + c % HS]; }
        part[c] = sum;
    }
}

// txl_backward_kv_kernel: for the 64 keys of this block, over the queries i >= j:
// dv_j = sum_i p_ij dout_i, dk_j = sum_i ds_ij (q_i + r_w) / sqrt(HS); P's band per query
// tile (i - j from i0 - k0 - 63) and r_r . P[n] of each of its rows. Needs D.
template<int HS>
__global__ void __launch_bounds__(ATT_KV_BK * HS / ATT_DPT)
txl_backward_kv_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse, const float* D,
                       const TxlArgs a, int T, int NH) {
    constexpr int TPR = HS / ATT_DPT, LD = HS + 4;
    float* qs = (float*)DYNAMIC_SMEM;
    float* gs = qs + ATT_KV_BQ * HS;
    float* ps = gs + ATT_KV_BQ * HS; // TXL_BAND rows of LD
    float* cr = ps + TXL_BAND * LD;  // r_r . P[n] of each band row
    float* lses = cr + TXL_BAND;
    float* Ds = lses + ATT_KV_BQ;
    int b = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * ATT_KV_BK;
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR, j = k0 + r;
    int C = NH * HS, C3 = 3 * C;
    int col = j < T ? j : T - 1;
    float scale = 1.0f / sqrtf((float)HS);
    float k[ATT_DPT], v[ATT_DPT], dk[ATT_DPT], dv[ATT_DPT];
    attention_load_row<TPR>(k, qkv + ((size_t)b * T + col) * C3 + C + h * HS, p);
    attention_load_row<TPR>(v, qkv + ((size_t)b * T + col) * C3 + 2 * C + h * HS, p);
    txl_load_vec<TPR>(dk, a.rw + h * HS, p);
    float kw = 0.0f; // r_w . k_j
    #pragma unroll
    for (int e = 0; e < ATT_DPT; e++) { kw += dk[e] * k[e]; dk[e] = 0.0f; dv[e] = 0.0f; }
    kw = row_group_sum<TPR>(kw);
    float sds = 0.0f; // sum_i ds_ij / sqrt(HS), for the r_w part of dk
    const float* lse_bh = lse + ((size_t)b * NH + h) * T;
    const float* D_bh = D + ((size_t)b * NH + h) * T;
    for (int i0 = k0; i0 < T; i0 += ATT_KV_BQ) { // ATT_KV_BK is a multiple of ATT_KV_BQ
        __syncthreads();
        attention_load_tile<HS>(qs, qkv, b, i0, ATT_KV_BQ, T, C3, h * HS);
        attention_load_tile<HS>(gs, dout, b, i0, ATT_KV_BQ, T, C, h * HS);
        txl_load_band<HS, LD>(ps, a.P, i0 - k0 - (ATT_KV_BK - 1), TXL_BAND, T, C, h * HS);
        txl_load_rows(lses, Ds, lse_bh, D_bh, i0, ATT_KV_BQ, T);
        __syncthreads();
        txl_band_dots<HS, LD>(cr, ps, a.rr + h * HS, TXL_BAND);
        __syncthreads();
        #pragma unroll 4
        for (int ii = 0; ii < ATT_KV_BQ; ii++) {
            int n = ii - r + ATT_KV_BK - 1; // band row of distance i - j
            float dot = row_group_sum<TPR>(attention_dot<HS, TPR>(k, qs, ii, p) + txl_dot_rows<HS, TPR, LD>(qs, ii, ps, n, p))
                      + kw + cr[n];
            float dp = row_group_sum<TPR>(attention_dot<HS, TPR>(v, gs, ii, p));
            int i = i0 + ii;
            if (j <= i && i < T) {
                float pij = expf(dot * scale - lses[ii]);
                float ds = pij * (dp - Ds[ii]) * scale;
                attention_axpy<HS, TPR>(dv, pij, gs, ii, p);
                attention_axpy<HS, TPR>(dk, ds, qs, ii, p);
                sds += ds;
            }
        }
    }
    if (j < T) {
        floatX* dst = dqkv + ((size_t)b * T + j) * C3 + h * HS;
        txl_store_plus<TPR>(dst + C, dk, sds, a.rw + h * HS, p);
        attention_store_row<TPR>(dst + 2 * C, dv, 1.0f, p);
    }
}

// txl_backward_p_kernel: for the 64 distances n of this block in head h, summed over the
// batch: dP[n] = sum_i ds_{i, i-n} (q_i + r_r) / sqrt(HS) over the queries i >= n; per query
// tile [i0, i0 + 32) the keys j = i - n are a band from i0 - n0 - 63, with r_w . k_j of each
template<int HS>
__global__ void __launch_bounds__(TXL_BLOCK * HS / ATT_DPT)
txl_backward_p_kernel(const floatX* dout, const floatX* qkv, const float* lse, const float* D, const TxlArgs a, int B, int T, int NH) {
    constexpr int TPR = HS / ATT_DPT, LD = HS + 4;
    float* qs = (float*)DYNAMIC_SMEM;
    float* gs = qs + TXL_BQ * HS;
    float* ksb = gs + TXL_BQ * HS;   // TXL_BAND key rows of LD
    float* vsb = ksb + TXL_BAND * LD;
    float* kw = vsb + TXL_BAND * LD; // r_w . k_j of each band row
    float* lses = kw + TXL_BAND;
    float* Ds = lses + TXL_BQ;
    int h = blockIdx.y, n0 = blockIdx.x * TXL_BLOCK;
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR, n = n0 + r;
    int C = NH * HS, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    float pn[ATT_DPT], dpn[ATT_DPT];
    attention_load_row<TPR>(pn, a.P + (size_t)(n < T ? n : T - 1) * C + h * HS, p);
    txl_load_vec<TPR>(dpn, a.rr + h * HS, p);
    float cn = 0.0f; // r_r . P[n]
    #pragma unroll
    for (int e = 0; e < ATT_DPT; e++) { cn += dpn[e] * pn[e]; dpn[e] = 0.0f; }
    cn = row_group_sum<TPR>(cn);
    float sds = 0.0f; // sum ds / sqrt(HS), for the r_r part
    for (int b = 0; b < B; b++) {
        const float* lse_bh = lse + ((size_t)b * NH + h) * T;
        const float* D_bh = D + ((size_t)b * NH + h) * T;
        for (int i0 = n0; i0 < T; i0 += TXL_BQ) { // TXL_BLOCK is a multiple of TXL_BQ
            __syncthreads();
            attention_load_tile<HS>(qs, qkv, b, i0, TXL_BQ, T, C3, h * HS);
            attention_load_tile<HS>(gs, dout, b, i0, TXL_BQ, T, C, h * HS);
            int key0 = i0 - n0 - (TXL_BLOCK - 1);
            txl_load_band<HS, LD>(ksb, qkv + (size_t)b * T * C3, key0, TXL_BAND, T, C3, C + h * HS);
            txl_load_band<HS, LD>(vsb, qkv + (size_t)b * T * C3, key0, TXL_BAND, T, C3, 2 * C + h * HS);
            txl_load_rows(lses, Ds, lse_bh, D_bh, i0, TXL_BQ, T);
            __syncthreads();
            txl_band_dots<HS, LD>(kw, ksb, a.rw + h * HS, TXL_BAND);
            __syncthreads();
            #pragma unroll 4
            for (int ii = 0; ii < TXL_BQ; ii++) {
                int kb = ii - r + TXL_BLOCK - 1, i = i0 + ii, j = i - n; // key j is band row kb
                float dot = row_group_sum<TPR>(txl_dot_rows<HS, TPR, LD>(qs, ii, ksb, kb, p) + attention_dot<HS, TPR>(pn, qs, ii, p))
                          + kw[kb] + cn;
                float dp = row_group_sum<TPR>(txl_dot_rows<HS, TPR, LD>(gs, ii, vsb, kb, p));
                if (j >= 0 && i < T && n < T) {
                    float ds = expf(dot * scale - lses[ii]) * (dp - Ds[ii]) * scale;
                    attention_axpy<HS, TPR>(dpn, ds, qs, ii, p);
                    sds += ds;
                }
            }
        }
    }
    if (n < T) { txl_store_plus<TPR>(a.dP + (size_t)n * C + h * HS, dpn, sds, a.rr + h * HS, p); }
}

// ----------------------------------------------------------------------------
// launchers

template<int HS> constexpr size_t txl_forward_smem() { return (2 * ATT_BK * HS + TXL_BAND * (HS + 4)) * sizeof(float); }
template<int HS> constexpr size_t txl_backward_kv_smem() {
    return (2 * ATT_KV_BQ * HS + TXL_BAND * (HS + 4) + TXL_BAND + 2 * ATT_KV_BQ) * sizeof(float);
}
template<int HS> constexpr size_t txl_backward_p_smem() {
    return (2 * TXL_BQ * HS + 2 * TXL_BAND * (HS + 4) + TXL_BAND + 2 * TXL_BQ) * sizeof(float);
}

// number of per-block partials the dq pass writes: one per (b, h, query block)
static inline int txl_q_blocks(int B, int T, int NH) { return B * NH * CEIL_DIV(T, ATT_BQ); }

template<int HS>
static void txl_attention_forward_hs(floatX* out, float* lse, const floatX* qkv, const TxlArgs& a, int B, int T, int NH,
                                     size_t smem_limit, cudaStream_t stream) {
    constexpr size_t smem = txl_forward_smem<HS>();
    attention_allow_smem(txl_forward_kernel<HS>, smem, smem_limit, "txl attention (forward)");
    dim3 grid(CEIL_DIV(T, ATT_BQ), NH, B);
    txl_forward_kernel<HS><<<grid, ATT_BQ * HS / ATT_DPT, smem, stream>>>(out, lse, qkv, a, T, NH);
    cudaCheckLaunch("txl_forward_kernel");
}

template<int HS>
static void txl_attention_backward_hs(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out,
                                      const float* lse, const TxlArgs& a, int B, int T, int NH, size_t smem_limit, cudaStream_t stream) {
    constexpr size_t smem_q = txl_forward_smem<HS>(), smem_kv = txl_backward_kv_smem<HS>(), smem_p = txl_backward_p_smem<HS>();
    attention_allow_smem(txl_backward_q_kernel<HS>, smem_q, smem_limit, "txl attention (dq pass)");
    attention_allow_smem(txl_backward_kv_kernel<HS>, smem_kv, smem_limit, "txl attention (dk/dv pass)");
    attention_allow_smem(txl_backward_p_kernel<HS>, smem_p, smem_limit, "txl attention (dP pass)");
    dim3 grid_q(CEIL_DIV(T, ATT_BQ), NH, B);
    txl_backward_q_kernel<HS><<<grid_q, ATT_BQ * HS / ATT_DPT, smem_q, stream>>>(dqkv, D, dout, qkv, out, lse, a, T, NH);
    cudaCheckLaunch("txl_backward_q_kernel");
    dim3 grid_kv(CEIL_DIV(T, ATT_KV_BK), NH, B);
    txl_backward_kv_kernel<HS><<<grid_kv, ATT_KV_BK * HS / ATT_DPT, smem_kv, stream>>>(dqkv, dout, qkv, lse, D, a, T, NH);
    cudaCheckLaunch("txl_backward_kv_kernel");
    dim3 grid_p(CEIL_DIV(T, TXL_BLOCK), NH);
    txl_backward_p_kernel<HS><<<grid_p, TXL_BLOCK * HS / ATT_DPT, smem_p, stream>>>(dout, qkv, lse, D, a, B, T, NH);
    cudaCheckLaunch("txl_backward_p_kernel");
}

// out (B, T, C) and lse (B, NH, T) from qkv (B, T, 3C) and the layer's txl parameters
static void txl_attention_forward(floatX* out, float* lse, const floatX* qkv, const TxlArgs& a, int B, int T, int NH, int HS,
                                  size_t smem_limit, cudaStream_t stream) {
    attention_for_head_size(HS, [&](auto hs) {
        txl_attention_forward_hs<decltype(hs)::value>(out, lse, qkv, a, B, T, NH, smem_limit, stream);
    });
}

// dqkv (B, T, 3C) written in full, a.dP (T, C) and a.partials (txl_q_blocks x 2 HS); D (B, NH, T) is scratch
static void txl_attention_backward(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out, const float* lse,
                                   const TxlArgs& a, int B, int T, int NH, int HS, size_t smem_limit, cudaStream_t stream) {
    attention_for_head_size(HS, [&](auto hs) {
        txl_attention_backward_hs<decltype(hs)::value>(dqkv, D, dout, qkv, out, lse, a, B, T, NH, smem_limit, stream);
    });
}

#endif // LLMC_ATTENTION_TXL_CUH
