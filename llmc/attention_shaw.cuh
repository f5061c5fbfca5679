/*
shaw's attention (PE=shaw, pe/shaw.h: Shaw et al. 2018 as tensor2tensor computes it), forward
and backward, without a T x T tensor:

  e_ij = (q_i . k_j + q_i . a^K[r]) / sqrt(HS),   z_i = sum_j softmax_j(e_ij) (v_j + a^V[r]),
  r = r(i, j) = min(pos_i - pos_j, k),   j <= i

for one head, with a^K, a^V (k + 1, HS) the layer's tables, shared by its heads (a^V absent
keys-only). The key term of a query row is the vector g[r] = q_i . a^K[r] / sqrt(HS) of k + 1
dot products, computed once per row and kept in shared memory, each pair gathering its row's
entry; the value term keeps per query row k + 1 sums c[r] of the row's probabilities by table
row, rescaled with the running maximum as the output is (the online softmax's extra:
attention_softmax_tile), and adds sum_r c[r] a^V[r] / l at the end. Beyond the training
length every distance >= k reads row k: nothing grows with T but the loops.

These kernels are the fp32 kernels' design (llmc/attention_bias.cuh: a thread owns one row,
a query or a key, and ATT_DPT = 16 of its HS dimensions; the other side streams through shared
memory in tiles, converted to fp32; online softmax), used by both builds, as txl's: the
products run on CUDA cores in fp32, q, k, v, a^K, a^V read in the build's precision. A
tensor-core version would do the k + 1 dot products of a tile's rows as one small product
(16 rows x (k + 1) x HS per warp) and gather them into the accumulator layout: not written.

A row's sums by table row: those of the rows r < k (at most one key each where positions
differ) are owned by the row's thread r % TPR, in shared memory; row k, where every key from
distance k on falls, by the row's threads in turns, key jj by thread jj % TPR in a register,
summed over the row at the end: every sum has one writer and a fixed order (deterministic).

  forward   block = 64 query rows, key tiles of 32 (with their positions): g, then the
            online softmax keeping c
  dq pass   block = 64 query rows: D_i = dO_i . z_i, g and e[r] = dO_i . a^V[r]; per pair p_ij
            from lse, ds_ij = p_ij (dO_i . v_j + e[r] - D_i); dq_i = sum_j ds_ij k_j / sqrt(HS) +
            sum_r G[r] a^K[r] / sqrt(HS) with G, c the sums of ds and p by table row; the
            block's sums over its rows of G_i[r] q_i / sqrt(HS) (da^K) and of c_i[r] dO_i
            (da^V) into its partial, which the trainer sums (no atomics)
  dk/dv     block = 64 keys, query tiles of 32 with their rows' g and e: dv_j = sum_i p_ij
            dO_i, dk_j = sum_i ds_ij q_i / sqrt(HS)

Shared memory at HS = 64 and k = 16: 25 KiB (forward), 33 KiB (dq), 21 KiB (dk/dv); each
grows by 0.5, 1 and 0.25 KiB per unit of k (a k whose need exceeds what the GPU allows per
block is one clear error).
*/
#ifndef LLMC_ATTENTION_SHAW_CUH
#define LLMC_ATTENTION_SHAW_CUH

static_assert(ATT_BQ == 2 * ATT_BK, "the dq pass stages its 64 rows in the two key tiles' space");

// the parameters of one layer's shaw attention
struct ShawArgs {
    const floatX* aK; // (k + 1, HS) a^K: row r of distance r, row k of every distance >= k
    const floatX* aV; // (k + 1, HS) a^V; NULL: keys only
    const int* pos;   // (B, T) the tokens' positions; NULL: the indices
    float* partials;  // backward: per (b, h, query block) the block's sums for da^K, then da^V ((k + 1) HS each)
    int k;            // the clipping distance
};

// the positions of tokens [t0, t0 + n) of batch row b into shared memory (a token past the
// row's end, of pairs the kernels drop, takes the last's)
__device__ __forceinline__ void shaw_load_positions(int* dst, const ShawArgs& a, int b, int t0, int n, int T) {
    for (int e = threadIdx.x; e < n; e += blockDim.x) {
        int t = min(t0 + e, T - 1);
        dst[e] = a.pos != NULL ? a.pos[(size_t)b * T + t] : t;
    }
}

// the key tile [j0, j0 + ATT_BK) of head h, batch row b: K and V (attention_load_tile) and the
// keys' positions
template<int HS>
__device__ __forceinline__ void shaw_load_keys(float* ks, float* vs, int* kpos, const floatX* qkv, const ShawArgs& a, int b, int h,
                                               int j0, int T, int C) {
    attention_load_tile<HS>(ks, qkv, b, j0, ATT_BK, T, 3 * C, C + h * HS);
    attention_load_tile<HS>(vs, qkv, b, j0, ATT_BK, T, 3 * C, 2 * C + h * HS);
    shaw_load_positions(kpos, a, b, j0, ATT_BK, T);
}

// the table row of a pair from the positions of its query and key (0 for a key after the
// query: a pair the kernels drop)
__device__ __forceinline__ int shaw_pair_row(const ShawArgs& a, int pos_i, int pos_j) { return shaw_row(max(pos_i - pos_j, 0), a.k); }

// out[r] = scale x . table[r] for the k + 1 rows of a table (HS values of the build's
// precision), x this thread's dimensions of a row: the sums over the row's TPR threads, which
// the row's part 0 writes
template<int TPR>
__device__ void shaw_row_dots(float* out, const float* x, const floatX* table, int K1, float scale, int p) {
    constexpr int HS = TPR * ATT_DPT;
    for (int r = 0; r < K1; r++) {
        float w[ATT_DPT];
        attention_load_row<TPR>(w, table + (size_t)r * HS, p);
        float acc = 0.0f;
        #pragma unroll
        for (int e = 0; e < ATT_DPT; e++) { acc += x[e] * w[e]; }
        acc = row_group_sum<TPR>(acc);
        if (p == 0) { out[r] = acc * scale; }
    }
}

// out[t K1 + r] = scale x_t . table[r] for the R rows x_t of a shared tile (HS apart) and the
// k + 1 rows of a table: a thread per (t, r)
template<int HS>
__device__ void shaw_tile_dots(float* out, const float* x, const floatX* table, int R, int K1, float scale) {
    for (int e = threadIdx.x; e < R * K1; e += blockDim.x) {
        int t = e / K1, r = e % K1;
        float acc = 0.0f;
        for (int d = 0; d < HS; d++) { acc += x[t * HS + d] * (float)table[(size_t)r * HS + d]; }
        out[e] = acc * scale;
    }
}

// y += scale sum_r w_r table[r], this thread's dimensions, with w_r = sums[r] for r < k and
// w_k = last (the row's sums by table row: the value term, dq's key term)
template<int TPR>
__device__ void shaw_rows_axpy(float* y, const float* sums, float last, const floatX* table, int k, float scale, int p) {
    constexpr int HS = TPR * ATT_DPT;
    for (int r = 0; r <= k; r++) {
        float w[ATT_DPT];
        attention_load_row<TPR>(w, table + (size_t)r * HS, p);
        float a = (r < k ? sums[r] : last) * scale;
        #pragma unroll
        for (int e = 0; e < ATT_DPT; e++) { y[e] += a * w[e]; }
    }
}

// the online softmax's extra (attention_softmax_tile): a query row's probabilities summed by
// table row, the rows r < k into the row's shared sums (thread r % TPR owns row r), row k into
// this thread's `far` (keys jj % TPR == p); a key's row from its position in the tile's (kpos)
template<int TPR>
struct ShawSums {
    const ShawArgs& a;
    float* sums;     // the row's k + 1 sums
    float& far;
    const int* kpos; // the key tile's positions
    int pos_i, p;    // the query's position
    __device__ __forceinline__ void rescale(float corr) {
        for (int r = p; r < a.k; r += TPR) { sums[r] *= corr; }
        far *= corr;
    }
    __device__ __forceinline__ void add(int jj, float pij) {
        int r = shaw_pair_row(a, pos_i, kpos[jj]);
        if (r < a.k) {
            if (r % TPR == p) { sums[r] += pij; }
        } else if (jj % TPR == p) {
            far += pij;
        }
    }
};

// writes this thread's dimensions of a row into row `r` of a shared tile (HS apart), as
// attention_load_row holds them
template<int TPR>
__device__ __forceinline__ void shaw_stage_row(float* tile, int r, const float* x, int p) {
    constexpr int HS = TPR * ATT_DPT;
    #pragma unroll
    for (int g = 0; g < ATT_DPT / 4; g++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) { tile[r * HS + 4 * (g * TPR + p) + e] = x[4 * g + e]; }
    }
}

// part[r HS + d] = scale sum over the block's ATT_BQ rows t of w[t K1 + r] x[t HS + d]: the
// block's share of a table's gradient (w: its rows' sums by table row, x: its rows' vectors)
template<int HS>
__device__ void shaw_block_table_sums(float* part, const float* w, const float* x, int K1, float scale) {
    for (int e = threadIdx.x; e < K1 * HS; e += blockDim.x) {
        int r = e / HS, d = e % HS;
        float sum = 0.0f;
        for (int t = 0; t < ATT_BQ; t++) { sum += w[t * K1 + r] * x[t * HS + d]; }
        part[e] = sum * scale;
    }
}

// ----------------------------------------------------------------------------
// kernels

// shaw_forward_kernel: z_i = sum_j softmax_j(e_ij) (v_j + a^V[r]) over j <= i for the 64 query
// rows of this block, and lse_i; key tiles of 32
template<int HS>
__global__ void __launch_bounds__(ATT_BQ * HS / ATT_DPT)
shaw_forward_kernel(floatX* out, float* lse, const floatX* qkv, const ShawArgs a, int T, int NH) {
    constexpr int TPR = HS / ATT_DPT;
    int K1 = a.k + 1;
    float* ks = (float*)DYNAMIC_SMEM;
    float* vs = ks + ATT_BK * HS;
    float* gs = vs + ATT_BK * HS;         // (ATT_BQ, K1) each row's key term
    float* cs = gs + ATT_BQ * K1;         // (ATT_BQ, K1) each row's probabilities by table row (rows < k)
    int* kpos = (int*)(cs + ATT_BQ * K1); // the key tile's positions
    int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * ATT_BQ; // the longest rows first
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR, i = q0 + r;
    int C = NH * HS, C3 = 3 * C;
    int row = i < T ? i : T - 1; // rows past T compute on a valid row and write nothing
    float scale = 1.0f / sqrtf((float)HS);
    float q[ATT_DPT], o[ATT_DPT] = {};
    attention_load_row<TPR>(q, qkv + ((size_t)b * T + row) * C3 + h * HS, p);
    float* g = gs + r * K1;
    float* c = cs + r * K1;
    shaw_row_dots<TPR>(g, q, a.aK, K1, scale, p);
    for (int e = p; e < K1; e += TPR) { c[e] = 0.0f; }
    int pos_i = a.pos != NULL ? a.pos[(size_t)b * T + row] : row;
    float m = -INFINITY, l = 0.0f, far = 0.0f;
    int last_key = min(q0 + ATT_BQ, T) - 1;
    for (int j0 = 0; j0 <= last_key; j0 += ATT_BK) {
        __syncthreads();
        shaw_load_keys<HS>(ks, vs, kpos, qkv, a, b, h, j0, T, C);
        __syncthreads();
        float s[ATT_BK];
        #pragma unroll
        for (int jj = 0; jj < ATT_BK; jj++) {
            float dot = row_group_sum<TPR>(attention_dot<HS, TPR>(q, ks, jj, p));
            int j = j0 + jj;
            s[jj] = j <= i && i < T ? dot * scale + g[shaw_pair_row(a, pos_i, kpos[jj])] : -INFINITY;
        }
        attention_softmax_tile<HS, TPR>(s, m, l, o, vs, p, ShawSums<TPR>{a, c, far, kpos, pos_i, p});
    }
    if (a.aV != NULL) {
        far = row_group_sum<TPR>(far);
        __syncwarp(); // the row's sums of its other threads (a row's threads are lanes of one warp)
        shaw_rows_axpy<TPR>(o, c, far, a.aV, a.k, 1.0f, p);
    }
    if (i < T) {
        attention_store_row<TPR>(out + ((size_t)b * T + i) * C + h * HS, o, 1.0f / l, p);
        if (p == 0) { lse[((size_t)b * NH + h) * T + i] = m + logf(l); }
    }
}

// shaw_backward_q_kernel: for the 64 query rows of this block, D_i = dO_i . z_i, then over the
// keys j <= i: ds_ij = p_ij (dO_i . v_j + e[r] - D_i), dq_i = sum_j ds_ij k_j / sqrt(HS) + sum_r
// G[r] a^K[r] / sqrt(HS); the block's sums over its rows for da^K and da^V go to its partial
template<int HS>
__global__ void __launch_bounds__(ATT_BQ * HS / ATT_DPT)
shaw_backward_q_kernel(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out, const float* lse,
                       const ShawArgs a, int T, int NH) {
    constexpr int TPR = HS / ATT_DPT;
    int K1 = a.k + 1;
    float* ks = (float*)DYNAMIC_SMEM;
    float* vs = ks + ATT_BK * HS;
    float* gs = vs + ATT_BK * HS;         // (ATT_BQ, K1) each row's key term
    float* es = gs + ATT_BQ * K1;         // (ATT_BQ, K1) dO_i . a^V[r]
    float* Gs = es + ATT_BQ * K1;         // (ATT_BQ, K1) each row's ds by table row
    float* cs = Gs + ATT_BQ * K1;         // (ATT_BQ, K1) each row's p by table row
    int* kpos = (int*)(cs + ATT_BQ * K1); // the key tile's positions
    int b = blockIdx.z, h = blockIdx.y, qt = gridDim.x - 1 - blockIdx.x, q0 = qt * ATT_BQ;
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR, i = q0 + r;
    int C = NH * HS, C3 = 3 * C;
    int row = i < T ? i : T - 1;
    float scale = 1.0f / sqrtf((float)HS);
    float q[ATT_DPT], gd[ATT_DPT], dq[ATT_DPT] = {};
    attention_load_row<TPR>(q, qkv + ((size_t)b * T + row) * C3 + h * HS, p);
    float Di = attention_row_delta<TPR>(gd, dout + ((size_t)b * T + row) * C + h * HS, out + ((size_t)b * T + row) * C + h * HS, p);
    size_t lse_idx = ((size_t)b * NH + h) * T + row;
    if (i < T && p == 0) { D[lse_idx] = Di; }
    float row_lse = lse[lse_idx];
    float* g = gs + r * K1;
    float* e = es + r * K1;
    float* G = Gs + r * K1;
    float* c = cs + r * K1;
    shaw_row_dots<TPR>(g, q, a.aK, K1, scale, p);
    if (a.aV != NULL) { shaw_row_dots<TPR>(e, gd, a.aV, K1, 1.0f, p); }
    for (int t = p; t < K1; t += TPR) {
        G[t] = 0.0f;
        c[t] = 0.0f;
        if (a.aV == NULL) { e[t] = 0.0f; }
    }
    int pos_i = a.pos != NULL ? a.pos[(size_t)b * T + row] : row;
    float G_far = 0.0f, c_far = 0.0f; // this thread's share of row k's sums
    int last_key = min(q0 + ATT_BQ, T) - 1;
    for (int j0 = 0; j0 <= last_key; j0 += ATT_BK) {
        __syncthreads();
        shaw_load_keys<HS>(ks, vs, kpos, qkv, a, b, h, j0, T, C);
        __syncthreads();
        #pragma unroll 4
        for (int jj = 0; jj < ATT_BK; jj++) {
            float dot = row_group_sum<TPR>(attention_dot<HS, TPR>(q, ks, jj, p));
            float dp = row_group_sum<TPR>(attention_dot<HS, TPR>(gd, vs, jj, p));
            int j = j0 + jj, rr = shaw_pair_row(a, pos_i, kpos[jj]);
            if (j <= i && i < T) {
                float pij = expf(dot * scale + g[rr] - row_lse);
                float ds = pij * (dp + e[rr] - Di);
                attention_axpy<HS, TPR>(dq, ds * scale, ks, jj, p);
                if (rr < a.k) {
                    if (rr % TPR == p) { G[rr] += ds; c[rr] += pij; }
                } else if (jj % TPR == p) {
                    G_far += ds;
                    c_far += pij;
                }
            }
        }
    }
    G_far = row_group_sum<TPR>(G_far);
    c_far = row_group_sum<TPR>(c_far);
    __syncwarp(); // the row's sums of its other threads
    shaw_rows_axpy<TPR>(dq, G, G_far, a.aK, a.k, scale, p);
    if (i < T) { attention_store_row<TPR>(dqkv + ((size_t)b * T + i) * C3 + h * HS, dq, 1.0f, p); }
    // the block's sums over its rows (a row past T has no pairs: its sums are 0)
    if (p == 0) { G[a.k] = G_far; c[a.k] = c_far; }
    float* part = a.partials + ((size_t)(b * NH + h) * gridDim.x + qt) * (a.aV != NULL ? 2 : 1) * K1 * HS;
    __syncthreads();
    shaw_stage_row<TPR>(ks, r, q, p); // the rows' q in the key tiles' space
    __syncthreads();
    shaw_block_table_sums<HS>(part, Gs, ks, K1, scale);
    if (a.aV == NULL) { return; }
    __syncthreads();
    shaw_stage_row<TPR>(ks, r, gd, p); // then their dO
    __syncthreads();
    shaw_block_table_sums<HS>(part + K1 * HS, cs, ks, K1, 1.0f);
}

// shaw_backward_kv_kernel: for the 64 keys of this block, over the queries i >= j:
// dv_j = sum_i p_ij dO_i, dk_j = sum_i ds_ij q_i / sqrt(HS), with each query tile's rows' g and
// e (computed per tile). Needs D.
template<int HS>
__global__ void __launch_bounds__(ATT_KV_BK * HS / ATT_DPT, 128 / HS)
shaw_backward_kv_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse, const float* D, const ShawArgs a,
                        int T, int NH) {
    constexpr int TPR = HS / ATT_DPT;
    int K1 = a.k + 1;
    float* qs = (float*)DYNAMIC_SMEM;
    float* gts = qs + ATT_KV_BQ * HS;          // the tile's dO
    float* lses = gts + ATT_KV_BQ * HS;
    float* Ds = lses + ATT_KV_BQ;
    float* gs = Ds + ATT_KV_BQ;                // (ATT_KV_BQ, K1) the tile's rows' key terms
    float* es = gs + ATT_KV_BQ * K1;           // (ATT_KV_BQ, K1) dO_i . a^V[r]
    int* qpos = (int*)(es + ATT_KV_BQ * K1);   // the tile's positions
    int b = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * ATT_KV_BK;
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR, j = k0 + r;
    int C = NH * HS, C3 = 3 * C;
    int col = j < T ? j : T - 1;
    float scale = 1.0f / sqrtf((float)HS);
    float k[ATT_DPT], v[ATT_DPT], dk[ATT_DPT] = {}, dv[ATT_DPT] = {};
    attention_load_row<TPR>(k, qkv + ((size_t)b * T + col) * C3 + C + h * HS, p);
    attention_load_row<TPR>(v, qkv + ((size_t)b * T + col) * C3 + 2 * C + h * HS, p);
    int pos_j = a.pos != NULL ? a.pos[(size_t)b * T + col] : col;
    const float* lse_bh = lse + ((size_t)b * NH + h) * T;
    const float* D_bh = D + ((size_t)b * NH + h) * T;
    for (int i0 = k0; i0 < T; i0 += ATT_KV_BQ) { // ATT_KV_BK is a multiple of ATT_KV_BQ
        __syncthreads();
        attention_load_tile<HS>(qs, qkv, b, i0, ATT_KV_BQ, T, C3, h * HS);
        attention_load_tile<HS>(gts, dout, b, i0, ATT_KV_BQ, T, C, h * HS);
        for (int t = threadIdx.x; t < ATT_KV_BQ; t += blockDim.x) {
            lses[t] = i0 + t < T ? lse_bh[i0 + t] : 0.0f;
            Ds[t] = i0 + t < T ? D_bh[i0 + t] : 0.0f;
        }
        shaw_load_positions(qpos, a, b, i0, ATT_KV_BQ, T);
        __syncthreads();
        shaw_tile_dots<HS>(gs, qs, a.aK, ATT_KV_BQ, K1, scale);
        if (a.aV != NULL) { shaw_tile_dots<HS>(es, gts, a.aV, ATT_KV_BQ, K1, 1.0f); }
        __syncthreads();
        #pragma unroll 4
        for (int ii = 0; ii < ATT_KV_BQ; ii++) {
            float dot = row_group_sum<TPR>(attention_dot<HS, TPR>(k, qs, ii, p));
            float dp = row_group_sum<TPR>(attention_dot<HS, TPR>(v, gts, ii, p));
            int i = i0 + ii, rr = shaw_pair_row(a, qpos[ii], pos_j);
            if (j <= i && i < T) {
                float pij = expf(dot * scale + gs[ii * K1 + rr] - lses[ii]);
                float ds = pij * (dp + (a.aV != NULL ? es[ii * K1 + rr] : 0.0f) - Ds[ii]);
                attention_axpy<HS, TPR>(dv, pij, gts, ii, p);
                attention_axpy<HS, TPR>(dk, ds * scale, qs, ii, p);
            }
        }
    }
    if (j < T) {
        floatX* dst = dqkv + ((size_t)b * T + j) * C3 + h * HS;
        attention_store_row<TPR>(dst + C, dk, 1.0f, p);
        attention_store_row<TPR>(dst + 2 * C, dv, 1.0f, p);
    }
}

// ----------------------------------------------------------------------------
// launchers

// the kernels' dynamic shared memory for k + 1 = K1 table rows
template<int HS> constexpr size_t shaw_forward_smem(int K1) { return (2 * ATT_BK * HS + 2 * ATT_BQ * K1 + ATT_BK) * sizeof(float); }
template<int HS> constexpr size_t shaw_backward_q_smem(int K1) { return (2 * ATT_BK * HS + 4 * ATT_BQ * K1 + ATT_BK) * sizeof(float); }
template<int HS> constexpr size_t shaw_backward_kv_smem(int K1) {
    return (2 * ATT_KV_BQ * HS + 2 * ATT_KV_BQ + 2 * ATT_KV_BQ * K1 + ATT_KV_BQ) * sizeof(float);
}

// number of per-block partials the dq pass writes: one per (b, h, query block)
static inline int shaw_q_blocks(int B, int T, int NH) { return B * NH * CEIL_DIV(T, ATT_BQ); }

template<int HS>
static void shaw_attention_forward_hs(floatX* out, float* lse, const floatX* qkv, const ShawArgs& a, int B, int T, int NH,
                                      size_t smem_limit, cudaStream_t stream) {
    size_t smem = shaw_forward_smem<HS>(a.k + 1);
    attention_allow_smem(shaw_forward_kernel<HS>, smem, smem_limit, "shaw attention (forward)");
    dim3 grid(CEIL_DIV(T, ATT_BQ), NH, B);
    shaw_forward_kernel<HS><<<grid, ATT_BQ * HS / ATT_DPT, smem, stream>>>(out, lse, qkv, a, T, NH);
    cudaCheckLaunch("shaw_forward_kernel");
}

template<int HS>
static void shaw_attention_backward_hs(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out,
                                       const float* lse, const ShawArgs& a, int B, int T, int NH, size_t smem_limit, cudaStream_t stream) {
    size_t smem_q = shaw_backward_q_smem<HS>(a.k + 1), smem_kv = shaw_backward_kv_smem<HS>(a.k + 1);
    attention_allow_smem(shaw_backward_q_kernel<HS>, smem_q, smem_limit, "shaw attention (dq pass)");
    attention_allow_smem(shaw_backward_kv_kernel<HS>, smem_kv, smem_limit, "shaw attention (dk/dv pass)");
    dim3 grid_q(CEIL_DIV(T, ATT_BQ), NH, B);
    shaw_backward_q_kernel<HS><<<grid_q, ATT_BQ * HS / ATT_DPT, smem_q, stream>>>(dqkv, D, dout, qkv, out, lse, a, T, NH);
    cudaCheckLaunch("shaw_backward_q_kernel");
    dim3 grid_kv(CEIL_DIV(T, ATT_KV_BK), NH, B);
    shaw_backward_kv_kernel<HS><<<grid_kv, ATT_KV_BK * HS / ATT_DPT, smem_kv, stream>>>(dqkv, dout, qkv, lse, D, a, T, NH);
    cudaCheckLaunch("shaw_backward_kv_kernel");
}

// out (B, T, C) and lse (B, NH, T) from qkv (B, T, 3C) and the layer's tables
static void shaw_attention_forward(floatX* out, float* lse, const floatX* qkv, const ShawArgs& a, int B, int T, int NH, int HS,
                                   size_t smem_limit, cudaStream_t stream) {
    attention_for_head_size(HS, [&](auto hs) {
        shaw_attention_forward_hs<decltype(hs)::value>(out, lse, qkv, a, B, T, NH, smem_limit, stream);
    });
}

// dqkv (B, T, 3C) written in full and a.partials (shaw_q_blocks x (1 or 2) (k + 1) HS); D (B, NH, T) is scratch
static void shaw_attention_backward(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out, const float* lse,
                                    const ShawArgs& a, int B, int T, int NH, int HS, size_t smem_limit, cudaStream_t stream) {
    attention_for_head_size(HS, [&](auto hs) {
        shaw_attention_backward_hs<decltype(hs)::value>(dqkv, D, dout, qkv, out, lse, a, B, T, NH, smem_limit, stream);
    });
}

#endif // LLMC_ATTENTION_SHAW_CUH
