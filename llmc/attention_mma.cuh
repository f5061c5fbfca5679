/*
Causal attention with the positional bias computed on the fly, on tensor cores:
FlashAttention-2's algorithm with bf16 q, k, v, out and dout, fp32 scores, softmax
statistics and gradients in registers, mma.sync m16n8k16 (llmc/mma.cuh), ldmatrix, and
cp.async double buffering. The bf16 trainer's attention (llmc/attention_bias.cuh holds the
fp32 kernels and the hook interface, which these kernels share: pe_bias_row once per
query row, pe_bias and pe_bias_backward_warp per pair, pe_bias_flush at the end of a
backward block). Head sizes 32, 64, 128.

Layout of the work. A warp owns 16 rows of the block's tile and computes with the
fragment layouts of mma.m16n8k16 (PTX ISA, dev/cuda/emulate/mma.h): in an accumulator of
16 x 8 scores, lane (g = lane / 4, tig = lane % 4) holds rows g and g + 8, columns 2 tig
and 2 tig + 1. So every pair (i, j) of a tile belongs to exactly one thread, which adds
the bias to the fp32 score in its registers: the bias, its exp and its gradient are
computed once per pair. The four lanes of a quad (same g) share a row: row maxima and
sums are reduced over the quad with two shuffles.

  forward   block = 64 query rows (16 per warp); key tiles of 64 stream through shared
            memory, two stages (cp.async of tile j + 1 while tile j is used); Q stays in
            shared memory and is read into A fragments for each tile (kept in registers, its
            16 registers at HS = 64 would make the forward spill at the 128 registers of 4
            blocks per SM). S = Q K^T (K rows give the B fragments by ldmatrix),
            online softmax per row (running max m and sum l, one rescale of O per tile),
            P rounded to bf16 becomes the A fragment of O += P V directly from the
            accumulator layout (V by ldmatrix.trans). Writes out and lse_i = m + log(l)
            (+ r.shift, the row constant the bias left out).
  backward  two kernels, each recomputing p_ij = exp(s_ij / sqrt(HS) + b(i, j) - lse_i):
            (the A fragments of Q, dO, K and V are read from shared memory for each tile
            and product, not kept in registers across the pass: at HS = 128 the dq pass
            then fits its registers without spilling)
            dq pass   (block = 64 query rows, key tiles of 64 (32 at HS = 128)):
                      D_i = dout_i . out_i, dS = P o (dO V^T - D), dQ = dS K / sqrt(HS),
                      and the row side of the bias gradient
            dk/dv pass (FlashAttention-2's backward, key blocks outer: block = 64 keys,
                      query tiles of 64 (32 at HS = 128), two stages): S^T = K Q^T,
                      dP^T = V dO^T, dV += P^T dO, dK += dS^T Q / sqrt(HS), and the column
                      side of the bias gradient
            dQ has its own pass instead of atomics from the dk/dv pass: every gradient has
            one writer and the result is deterministic, at the price of recomputing S and
            dP (7 matrix products instead of FlashAttention-2's 5). The bias gradients
            are summed per thread over the pass (the column sums of dS for CABLE, the
            parameter gradients of t5, kerple, fire) and reduced once per block.
  masking   tiles above the diagonal are never visited; in the tiles that cross it (and
            past T) a pair is computed only where j <= i < T, otherwise its score is -inf
            (p = 0) and the bias is not evaluated. Rows of q, k, v, dout past T are
            zero-filled by cp.async.

Shared memory rows are HS bf16 values with their 16-byte chunks permuted by the row
(smem_index: chunk ^ (row % 8), or ^ (row / 2 % 4) for HS = 32), so that the eight rows
an ldmatrix reads fall into different banks. Dynamic shared memory at HS = 64: 40 KiB
(forward), 48 KiB (dq), about 52 KiB (dk/dv, with the query rows' numbers).

Rounding: q, k, v, dout are bf16 already; P and dS are rounded to bf16 for the second
matrix product (as FlashAttention-2 does), everything else (S, dP, the softmax, the bias,
its gradients, the accumulators of O, dQ, dK, dV) is fp32.
*/
#ifndef LLMC_ATTENTION_MMA_CUH
#define LLMC_ATTENTION_MMA_CUH

#include "mma.cuh"

#define MMA_WARPS 4
#define MMA_THREADS (MMA_WARPS * WARP_SIZE)
#define MMA_BR 64 // query rows per block (forward, dq pass)
#define MMA_BC 64 // keys per tile (forward)

// PE::rp_fwd_min_blocks, where an encoding has it: the minimum of resident blocks per SM of the
// forward of its instance at randomized positions (PEPositions) at HS = 64 (0: none)
template<class PE, class = void> struct RpFwdMinBlocks { static constexpr int value = 0; };
template<class PE> struct RpFwdMinBlocks<PEPositions<PE>, std::void_t<decltype(PE::rp_fwd_min_blocks)>> {
    static constexpr int value = PE::rp_fwd_min_blocks;
};

// tile sizes of the backward passes: at HS = 128 the accumulators of a 16 x 64 tile of S and
// dP would not fit beside dQ (dK, dV) in registers
template<int HS> struct MmaTiles {
    static constexpr int DQ_BC = HS == 128 ? 32 : 64;    // keys per tile, dq pass
    static constexpr int KV_BR = HS == 128 ? 32 : 64;    // query rows per tile, dk/dv pass
    // the forward's minimum of resident blocks per SM for ptxas (__launch_bounds__; 0: none):
    // at HS = 32, left to itself, ptxas (nvcc 13.0) aimed at 5 blocks of 128 threads (96
    // registers) and spilled for cable_nw and cable_v1; 4 blocks allow 128 registers. At HS =
    // 64 an encoding may set one for its instance at randomized positions (RpFwdMinBlocks)
    template<class PE> static constexpr int fwd_min_blocks() { return HS == 32 ? 4 : HS == 64 ? RpFwdMinBlocks<PE>::value : 0; }
    // the dk/dv pass's minimum for ptxas: at HS = 32 fire's (a per_lane PEGrad) was capped
    // at 168 registers (3 blocks) and spilled; 2 blocks allow 255
    template<class PE> static constexpr int kv_min_blocks() { return HS == 32 && GradPerLane<PEGradOf<PE>>::value ? 2 : 0; }
};

// element (r, c) of a shared-memory tile of rows of HS bf16 values
template<int HS>
__device__ __forceinline__ int smem_index(int r, int c) {
    constexpr int CHUNKS = HS / 8;
    int x = CHUNKS >= 8 ? (r & 7) : ((r >> 1) & (CHUNKS - 1));
    return r * HS + (((c >> 3) ^ x) << 3) + (c & 7);
}

// rows [r0, r0 + R) of one head's q, k, v (column `col` of rows of length ld) into a
// shared-memory tile with cp.async, 16 bytes per copy; rows at or past T are zeros
template<int HS, int R>
__device__ __forceinline__ void load_tile_async(floatX* dst, const floatX* src, int b, int r0, int T, int ld, int col) {
    constexpr int CHUNKS = HS / 8;
    for (int id = threadIdx.x; id < R * CHUNKS; id += MMA_THREADS) {
        int r = id / CHUNKS, c = (id % CHUNKS) * 8;
        int t = r0 + r;
        const floatX* from = src + ((size_t)b * T + (t < T ? t : 0)) * ld + col + c;
        cp_async_16(dst + smem_index<HS>(r, c), from, t < T ? 16 : 0);
    }
}

// A fragment (16 x 16) of rows m0.. and columns k0.. of a row-major tile
template<int HS>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const floatX* tile, int m0, int k0, int lane) {
    ldmatrix_x4<false>(a, tile + smem_index<HS>(m0 + (lane % 8) + 8 * ((lane / 8) % 2), k0 + 8 * (lane / 16)));
}

// B fragments of the n-tiles n0 (b[0], b[1]) and n0 + 8 (b[2], b[3]), k-step k0, from a tile
// whose rows are the n index (B[k][n] = tile[n][k]: K or V for S = Q K^T, dP = dO V^T)
template<int HS>
__device__ __forceinline__ void load_b_rows_n(uint32_t (&b)[4], const floatX* tile, int n0, int k0, int lane) {
    ldmatrix_x4<false>(b, tile + smem_index<HS>(n0 + (lane % 8) + 8 * (lane / 16), k0 + 8 * ((lane / 8) % 2)));
}

// the same from a tile whose rows are the k index (B[k][n] = tile[k][n]: V for O = P V)
template<int HS>
__device__ __forceinline__ void load_b_rows_k(uint32_t (&b)[4], const floatX* tile, int k0, int n0, int lane) {
    ldmatrix_x4<true>(b, tile + smem_index<HS>(k0 + (lane % 8) + 8 * ((lane / 8) % 2), n0 + 8 * (lane / 16)));
}

// acc[n] (16 x 8 tiles n = 0..N-1) += A B over NK k-steps of 16: A fragments a[k], B from
// a tile whose rows are n (ROWS_N) or k, starting at row/column 0
template<int HS, int N, int NK, bool ROWS_N>
__device__ __forceinline__ void mma_tile(float (&acc)[N][4], const uint32_t (&a)[NK][4], const floatX* tile, int lane) {
    #pragma unroll
    for (int n = 0; n < N; n += 2) {
        #pragma unroll
        for (int k = 0; k < NK; k++) {
            uint32_t b[4];
            if constexpr (ROWS_N) { load_b_rows_n<HS>(b, tile, 8 * n, 16 * k, lane); }
            else { load_b_rows_k<HS>(b, tile, 16 * k, 8 * n, lane); }
            mma_bf16_16816(acc[n], a[k], {b[0], b[1]});
            mma_bf16_16816(acc[n + 1], a[k], {b[2], b[3]});
        }
    }
}

// acc (16 x 8 N) += A B^T for the warp's 16 rows of the tile a (A fragments by ldmatrix, read
// for this product only: they are not kept in registers across the tiles) and the rows of b
template<int HS, int N>
__device__ __forceinline__ void mma_rows_tile(float (&acc)[N][4], const floatX* a, const floatX* b, int warp, int lane) {
    constexpr int NK = HS / 16;
    uint32_t af[NK][4];
    #pragma unroll
    for (int k = 0; k < NK; k++) { load_a<HS>(af[k], a, warp * 16, 16 * k, lane); }
    mma_tile<HS, N, NK, true>(acc, af, b, lane);
}

// A fragments (16 rows x 16 N columns) from fp32 accumulators of 16 x 8 tiles (the layout of
// C is that of A's two halves): P or dS rounded to bf16 for the next product
template<int N>
__device__ __forceinline__ void accumulators_to_a(uint32_t (&a)[N / 2][4], const float (&acc)[N][4]) {
    #pragma unroll
    for (int k = 0; k < N / 2; k++) {
        a[k][0] = pack_bf16x2(acc[2 * k][0], acc[2 * k][1]);
        a[k][1] = pack_bf16x2(acc[2 * k][2], acc[2 * k][3]);
        a[k][2] = pack_bf16x2(acc[2 * k + 1][0], acc[2 * k + 1][1]);
        a[k][3] = pack_bf16x2(acc[2 * k + 1][2], acc[2 * k + 1][3]);
    }
}

// writes rows g, g + 8 (row0 + 8 r) of a 16 x (8 N) accumulator, times `scale`, as bf16 into
// rows of length ld (columns col..), the rows before T only
template<int N>
__device__ __forceinline__ void store_rows(floatX* dst, const float (&acc)[N][4], const float (&scale)[2], int b, int row0,
                                           int T, int ld, int col, int lane) {
    #pragma unroll
    for (int r = 0; r < 2; r++) {
        int t = row0 + 8 * r;
        if (t >= T) { continue; }
        floatX* out = dst + ((size_t)b * T + t) * ld + col + 2 * (lane % 4);
        #pragma unroll
        for (int n = 0; n < N; n++) {
            *reinterpret_cast<__nv_bfloat162*>(out + 8 * n) = __floats2bfloat162_rn(acc[n][2 * r] * scale[r], acc[n][2 * r + 1] * scale[r]);
        }
    }
}

// the per-row bias-gradient accumulators acc[r] (rows g, g + 8) summed over the quad that
// shares the rows: lane tig 0 ends with row g's sum, tig 1 with row g + 8's, the others with
// zeros, so that each thread flushes one token (PEGrad is a struct of floats); a per_lane
// PEGrad stays with its lane
template<class G>
__device__ __forceinline__ G quad_gather(const G (&acc)[2], int tig) {
    constexpr int N = sizeof(G) / sizeof(float);
    G out = {};
    if constexpr (GradPerLane<G>::value) { // the lane's own share (t5, fire): its two rows added
        float v[2][N], o[N];
        memcpy(v[0], &acc[0], sizeof(G));
        memcpy(v[1], &acc[1], sizeof(G));
        #pragma unroll
        for (int k = 0; k < N; k++) { o[k] = v[0][k] + v[1][k]; }
        memcpy(&out, o, sizeof(G));
    } else if constexpr (N > 0) {
        float v[2][N], o[N];
        memcpy(v[0], &acc[0], sizeof(G));
        memcpy(v[1], &acc[1], sizeof(G));
        #pragma unroll
        for (int k = 0; k < N; k++) {
            float s0 = v[0][k], s1 = v[1][k];
            s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
            s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
            s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
            s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
            o[k] = tig == 0 ? s0 : tig == 1 ? s1 : 0.0f;
        }
        memcpy(&out, o, sizeof(G));
    }
    return out;
}

__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// ----------------------------------------------------------------------------
// kernels

// attention_forward_mma_kernel: out_i = softmax_j(q_i.k_j / sqrt(HS) + b(i, j)) v over j <= i
// for the 64 query rows of this block, and lse_i
template<int HS, class PE>
__global__ void __launch_bounds__(MMA_THREADS, MmaTiles<HS>::template fwd_min_blocks<PE>())
attention_forward_mma_kernel(floatX* out, float* lse, const floatX* qkv, const PE pb, int T, int NH) {
    constexpr int NS = MMA_BC / 8, NO = HS / 8;
    floatX* sq = reinterpret_cast<floatX*>(DYNAMIC_SMEM);
    floatX* skv = sq + MMA_BR * HS; // stage s: K at skv + 2 s BC HS, V after it
    int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * MMA_BR; // the longest rows first
    int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE, g = lane / 4, tig = lane % 4;
    int C = NH * HS, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    int ntiles = CEIL_DIV(min(q0 + MMA_BR, T), MMA_BC);
    load_tile_async<HS, MMA_BR>(sq, qkv, b, q0, T, C3, h * HS);
    load_tile_async<HS, MMA_BC>(skv, qkv, b, 0, T, C3, C + h * HS);
    load_tile_async<HS, MMA_BC>(skv + MMA_BC * HS, qkv, b, 0, T, C3, 2 * C + h * HS);
    cp_async_commit();

    int row0 = q0 + warp * 16 + g; // this thread's rows: row0 and row0 + 8
    PERowOf<PE> pr[2];
    float m[2], l[2];
    #pragma unroll
    for (int r = 0; r < 2; r++) { pr[r] = pe_bias_row(&pb, b, h, min(row0 + 8 * r, T - 1)); m[r] = -INFINITY; l[r] = 0.0f; }
    float o[NO][4] = {};
    for (int jt = 0; jt < ntiles; jt++) {
        if (jt + 1 < ntiles) { // the next tile into the other stage
            floatX* next = skv + ((jt + 1) % 2) * 2 * MMA_BC * HS;
            load_tile_async<HS, MMA_BC>(next, qkv, b, (jt + 1) * MMA_BC, T, C3, C + h * HS);
            load_tile_async<HS, MMA_BC>(next + MMA_BC * HS, qkv, b, (jt + 1) * MMA_BC, T, C3, 2 * C + h * HS);
        }
        cp_async_commit();
        cp_async_wait<1>(); // tile jt (and Q) have landed, for this thread's copies
        __syncthreads();    // tile jt visible to every warp
        const floatX* sk = skv + (jt % 2) * 2 * MMA_BC * HS;
        const floatX* sv = sk + MMA_BC * HS;
        float s[NS][4] = {};
        mma_rows_tile<HS, NS>(s, sq, sk, warp, lane); // Q's A fragments read for every tile
        // scores with the bias, masked; the tile's row maxima
        int j0 = jt * MMA_BC;
        bool full = j0 + MMA_BC - 1 <= q0 + warp * 16 && q0 + warp * 16 + 15 < T;
        float mx[2] = {m[0], m[1]};
        #pragma unroll
        for (int n = 0; n < NS; n++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                int i = row0 + 8 * (e / 2), j = j0 + 8 * n + 2 * tig + e % 2;
                if (full || (j <= i && i < T)) { s[n][e] = s[n][e] * scale + pe_bias(&pb, &pr[e / 2], j); }
                else { s[n][e] = -INFINITY; }
                mx[e / 2] = fmaxf(mx[e / 2], s[n][e]);
            }
        }
        // online softmax: rescale O and l by exp(m_old - m_new), p = exp(s - m_new)
        float base[2], corr[2];
        #pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = quad_max(mx[r]);
            base[r] = mx[r] == -INFINITY ? 0.0f : mx[r]; // a row with no key yet (past T)
            corr[r] = expf(m[r] - base[r]);
            m[r] = mx[r];
            l[r] *= corr[r];
        }
        #pragma unroll
        for (int n = 0; n < NO; n++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) { o[n][e] *= corr[e / 2]; }
        }
        #pragma unroll
        for (int n = 0; n < NS; n++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                s[n][e] = expf(s[n][e] - base[e / 2]);
                l[e / 2] += s[n][e];
            }
        }
        uint32_t pa[NS / 2][4];
        accumulators_to_a<NS>(pa, s);
        mma_tile<HS, NO, NS / 2, false>(o, pa, sv, lane);
        __syncthreads(); // every warp is done with stage jt % 2 before it is refilled
    }
    float inv[2];
    #pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] = quad_sum(l[r]);
        inv[r] = 1.0f / l[r];
        int i = row0 + 8 * r;
        if (i < T && tig == 0) { lse[((size_t)b * NH + h) * T + i] = m[r] + logf(l[r]) + pr[r].shift; }
    }
    store_rows<NO>(out, o, inv, b, row0, T, C, h * HS, lane);
}

// attention_backward_q_mma_kernel: for the 64 query rows of this block, D_i = dout_i . out_i
// (kept for the dk/dv pass), then over the keys j <= i: p_ij from lse, dS = P o (dO V^T - D),
// dQ = dS K / sqrt(HS); hands ds_ij to the row side of the bias gradient
template<int HS, class PE>
__global__ void __launch_bounds__(MMA_THREADS)
attention_backward_q_mma_kernel(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out,
                                const float* lse, const PE pb, int T, int NH) {
    constexpr int BC = MmaTiles<HS>::DQ_BC;
    constexpr int NS = BC / 8, NO = HS / 8;
    floatX* sq = reinterpret_cast<floatX*>(DYNAMIC_SMEM);
    floatX* sdo = sq + MMA_BR * HS;
    floatX* skv = sdo + MMA_BR * HS;
    float* sD = reinterpret_cast<float*>(skv + 2 * 2 * BC * HS);
    int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * MMA_BR;
    int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE, g = lane / 4, tig = lane % 4;
    int C = NH * HS, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    int ntiles = CEIL_DIV(min(q0 + MMA_BR, T), BC);
    load_tile_async<HS, MMA_BR>(sq, qkv, b, q0, T, C3, h * HS);
    load_tile_async<HS, MMA_BR>(sdo, dout, b, q0, T, C, h * HS);
    load_tile_async<HS, BC>(skv, qkv, b, 0, T, C3, C + h * HS);
    load_tile_async<HS, BC>(skv + BC * HS, qkv, b, 0, T, C3, 2 * C + h * HS);
    cp_async_commit();
    { // D_i: two threads per row, each half of the head
        int r = threadIdx.x / 2, part = threadIdx.x % 2, i = q0 + r;
        float d = 0.0f;
        if (i < T) {
            const floatX* go = dout + ((size_t)b * T + i) * C + h * HS + part * HS / 2;
            const floatX* oo = out + ((size_t)b * T + i) * C + h * HS + part * HS / 2;
            for (int e = 0; e < HS / 2; e++) { d += (float)go[e] * (float)oo[e]; }
        }
        d += __shfl_xor_sync(0xffffffffu, d, 1);
        if (part == 0) {
            sD[r] = d;
            if (i < T) { D[((size_t)b * NH + h) * T + i] = d; }
        }
    }

    int row0 = q0 + warp * 16 + g;
    PERowOf<PE> pr[2];
    float rlse[2]; // lse_i - r.shift
    #pragma unroll
    for (int r = 0; r < 2; r++) {
        int i = min(row0 + 8 * r, T - 1);
        pr[r] = pe_bias_row(&pb, b, h, i);
        rlse[r] = lse[((size_t)b * NH + h) * T + i] - pr[r].shift;
    }
    float dq[NO][4] = {};
    float Di[2];
    PEGradOf<PE> acc[2] = {};
    for (int jt = 0; jt < ntiles; jt++) {
        if (jt + 1 < ntiles) {
            floatX* next = skv + ((jt + 1) % 2) * 2 * BC * HS;
            load_tile_async<HS, BC>(next, qkv, b, (jt + 1) * BC, T, C3, C + h * HS);
            load_tile_async<HS, BC>(next + BC * HS, qkv, b, (jt + 1) * BC, T, C3, 2 * C + h * HS);
        }
        cp_async_commit();
        cp_async_wait<1>(); // key tile jt (and Q, dO) have landed, for this thread's copies
        __syncthreads();    // key tile jt (and Q, dO, D) visible to every warp
        const floatX* sk = skv + (jt % 2) * 2 * BC * HS;
        const floatX* sv = sk + BC * HS;
        if (jt == 0) {
            Di[0] = sD[warp * 16 + g];
            Di[1] = sD[warp * 16 + g + 8];
        }
        // Q's, then dO's A fragments, read from shared memory for every tile and one at a time:
        // fewer registers live than both kept for the pass
        float s[NS][4] = {}, dp[NS][4] = {};
        mma_rows_tile<HS, NS>(s, sq, sk, warp, lane);
        mma_rows_tile<HS, NS>(dp, sdo, sv, warp, lane);
        int j0 = jt * BC;
        bool full = j0 + BC - 1 <= q0 + warp * 16 && q0 + warp * 16 + 15 < T;
        #pragma unroll
        for (int n = 0; n < NS; n++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                int r = e / 2, i = row0 + 8 * r, j = j0 + 8 * n + 2 * tig + e % 2;
                bool valid = full || (j <= i && i < T);
                float ds = 0.0f;
                if (valid) {
                    float p = expf(s[n][e] * scale + pe_bias(&pb, &pr[r], j) - rlse[r]);
                    ds = p * (dp[n][e] - Di[r]);
                }
                pe_bias_backward_warp(&pb, &acc[r], PE_SIDE_ROW, &pr[r], j, ds, valid);
                s[n][e] = ds;
            }
        }
        uint32_t dsa[NS / 2][4];
        accumulators_to_a<NS>(dsa, s);
        mma_tile<HS, NO, NS / 2, false>(dq, dsa, sk, lane);
        __syncthreads(); // every warp is done with key stage jt % 2 before it is refilled
    }
    const float scales[2] = {scale, scale};
    store_rows<NO>(dqkv, dq, scales, b, row0, T, C3, h * HS, lane);
    int t = row0 + 8 * tig; // tig 0: row0, tig 1: row0 + 8 (quad_gather)
    PEGradOf<PE> mine = quad_gather(acc, tig);
    pe_bias_flush(&pb, &mine, PE_SIDE_ROW, b, h, t, tig < 2 && t < T, 0);
}

// attention_backward_kv_mma_kernel: for the 64 keys of this block (16 per warp), over the
// query tiles from the diagonal on: S^T = K Q^T, dP^T = V dO^T, P^T from lse, dS^T, then
// dV += P^T dO and dK += dS^T Q / sqrt(HS); hands ds_ij to the column side of the bias
// gradient. Needs D from attention_backward_q_mma_kernel.
template<int HS, class PE>
__global__ void __launch_bounds__(MMA_THREADS, MmaTiles<HS>::template kv_min_blocks<PE>())
attention_backward_kv_mma_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse, const float* D,
                                 const PE pb, int T, int NH) {
    constexpr int BR = MmaTiles<HS>::KV_BR;
    constexpr int NS = BR / 8, NO = HS / 8;
    floatX* sk = reinterpret_cast<floatX*>(DYNAMIC_SMEM);
    floatX* sv = sk + ATT_KV_BK * HS;
    floatX* sqg = sv + ATT_KV_BK * HS; // stage s: Q at sqg + 2 s BR HS, dO after it
    float* srow = reinterpret_cast<float*>(sqg + 2 * 2 * BR * HS); // stage s: lse_i - shift, D_i
    PERowOf<PE>* sr = reinterpret_cast<PERowOf<PE>*>(srow + 2 * 2 * BR); // stage s: the PERow of each query
    int b = blockIdx.z, h = blockIdx.y, kt = blockIdx.x, k0 = kt * ATT_KV_BK;
    int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE, g = lane / 4, tig = lane % 4;
    int C = NH * HS, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    int ntiles = CEIL_DIV(T - k0, BR); // query tiles from i0 = k0 (the diagonal) on
    const float* lse_bh = lse + ((size_t)b * NH + h) * T;
    const float* D_bh = D + ((size_t)b * NH + h) * T;
    // query tile it into stage it % 2: Q and dO by cp.async, the per-row numbers by the threads
    auto load_queries = [&](int it) {
        int i0 = k0 + it * BR, st = it % 2;
        load_tile_async<HS, BR>(sqg + st * 2 * BR * HS, qkv, b, i0, T, C3, h * HS);
        load_tile_async<HS, BR>(sqg + st * 2 * BR * HS + BR * HS, dout, b, i0, T, C, h * HS);
        for (int r = threadIdx.x; r < BR; r += MMA_THREADS) {
            int i = min(i0 + r, T - 1);
            PERowOf<PE> row = pe_bias_row(&pb, b, h, i);
            sr[st * BR + r] = row;
            srow[st * 2 * BR + r] = lse_bh[i] - row.shift;
            srow[st * 2 * BR + BR + r] = D_bh[i];
        }
    };
    load_tile_async<HS, ATT_KV_BK>(sk, qkv, b, k0, T, C3, C + h * HS);
    load_tile_async<HS, ATT_KV_BK>(sv, qkv, b, k0, T, C3, 2 * C + h * HS);
    load_queries(0);
    cp_async_commit();

    int col0 = k0 + warp * 16 + g; // this thread's keys: col0 and col0 + 8
    float dk[NO][4] = {}, dv[NO][4] = {};
    PEGradOf<PE> acc[2] = {};
    for (int it = 0; it < ntiles; it++) {
        if (it + 1 < ntiles) { load_queries(it + 1); }
        cp_async_commit();
        cp_async_wait<1>(); // query tile it (and K, V) have landed, for this thread's copies
        __syncthreads();    // query tile it (and K, V, the rows' numbers) visible to every warp
        int i0 = k0 + it * BR, st = it % 2;
        const floatX* sq = sqg + st * 2 * BR * HS;
        const floatX* sg = sq + BR * HS;
        const float* rlse = srow + st * 2 * BR;
        const float* rD = rlse + BR;
        const PERowOf<PE>* rows = sr + st * BR;
        float s[NS][4] = {}, dp[NS][4] = {};
        mma_rows_tile<HS, NS>(s, sk, sq, warp, lane);  // S^T: rows keys, columns queries
        mma_rows_tile<HS, NS>(dp, sv, sg, warp, lane); // dP^T
        bool full = i0 >= k0 + warp * 16 + 15 && i0 + BR - 1 < T;
        #pragma unroll
        for (int n = 0; n < NS; n++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                int r = e / 2, j = col0 + 8 * r, ii = 8 * n + 2 * tig + e % 2, i = i0 + ii;
                bool valid = full || (j <= i && i < T);
                float p = 0.0f, ds = 0.0f;
                if (valid) {
                    p = expf(s[n][e] * scale + pe_bias(&pb, &rows[ii], j) - rlse[ii]);
                    ds = p * (dp[n][e] - rD[ii]);
                }
                pe_bias_backward_warp(&pb, &acc[r], PE_SIDE_COL, &rows[ii], j, ds, valid);
                s[n][e] = p;
                dp[n][e] = ds;
            }
        }
        uint32_t pa[NS / 2][4], dsa[NS / 2][4];
        accumulators_to_a<NS>(pa, s);
        accumulators_to_a<NS>(dsa, dp);
        mma_tile<HS, NO, NS / 2, false>(dv, pa, sg, lane);
        mma_tile<HS, NO, NS / 2, false>(dk, dsa, sq, lane);
        __syncthreads(); // every warp is done with query stage it % 2 before it is refilled
    }
    const float ones[2] = {1.0f, 1.0f}, scales[2] = {scale, scale};
    store_rows<NO>(dqkv, dk, scales, b, col0, T, C3, C + h * HS, lane);
    store_rows<NO>(dqkv, dv, ones, b, col0, T, C3, 2 * C + h * HS, lane);
    int t = col0 + 8 * tig; // tig 0: col0, tig 1: col0 + 8 (quad_gather)
    PEGradOf<PE> mine = quad_gather(acc, tig);
    pe_bias_flush(&pb, &mine, PE_SIDE_COL, b, h, t, tig < 2 && t < T, (b * NH + h) * gridDim.x + kt);
}

// ----------------------------------------------------------------------------
// launchers

template<int HS> constexpr size_t mma_forward_smem() { return (size_t)(MMA_BR + 4 * MMA_BC) * HS * sizeof(floatX); }
template<int HS> constexpr size_t mma_backward_q_smem() {
    return (size_t)(2 * MMA_BR + 4 * MmaTiles<HS>::DQ_BC) * HS * sizeof(floatX) + MMA_BR * sizeof(float);
}
template<int HS, class PE> constexpr size_t mma_backward_kv_smem() {
    constexpr int BR = MmaTiles<HS>::KV_BR;
    return (size_t)(2 * ATT_KV_BK + 4 * BR) * HS * sizeof(floatX) + 4 * BR * sizeof(float) + 2 * BR * sizeof(PERowOf<PE>);
}

// allows a kernel its dynamic shared memory beyond the default 48 KiB, once
template<class K>
static void mma_allow_smem(K* kernel, size_t bytes, bool* done) {
    if (!*done) {
        cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
        *done = true;
    }
}

template<int HS, class PE>
static void attention_forward_mma_hs(floatX* out, float* lse, const floatX* qkv, const PE& pb, int B, int T, int NH, cudaStream_t stream) {
    static bool allowed = false;
    constexpr size_t smem = mma_forward_smem<HS>();
    mma_allow_smem(attention_forward_mma_kernel<HS, PE>, smem, &allowed);
    dim3 grid(CEIL_DIV(T, MMA_BR), NH, B);
    attention_forward_mma_kernel<HS, PE><<<grid, MMA_THREADS, smem, stream>>>(out, lse, qkv, pb, T, NH);
    cudaCheckLaunch("attention_forward_mma_kernel");
}

template<int HS, class PE>
static void attention_backward_mma_hs(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out,
                                      const float* lse, const PE& pb, int B, int T, int NH, cudaStream_t stream) {
    static bool allowed_q = false, allowed_kv = false;
    constexpr size_t smem_q = mma_backward_q_smem<HS>(), smem_kv = mma_backward_kv_smem<HS, PE>();
    mma_allow_smem(attention_backward_q_mma_kernel<HS, PE>, smem_q, &allowed_q);
    mma_allow_smem(attention_backward_kv_mma_kernel<HS, PE>, smem_kv, &allowed_kv);
    dim3 grid_q(CEIL_DIV(T, MMA_BR), NH, B);
    attention_backward_q_mma_kernel<HS, PE><<<grid_q, MMA_THREADS, smem_q, stream>>>(dqkv, D, dout, qkv, out, lse, pb, T, NH);
    cudaCheckLaunch("attention_backward_q_mma_kernel");
    dim3 grid_kv(CEIL_DIV(T, ATT_KV_BK), NH, B);
    attention_backward_kv_mma_kernel<HS, PE><<<grid_kv, MMA_THREADS, smem_kv, stream>>>(dqkv, dout, qkv, lse, D, pb, T, NH);
    cudaCheckLaunch("attention_backward_kv_mma_kernel");
}

// out (B, T, C) and lse (B, NH, T) from qkv (B, T, 3C)
template<class PE>
static void attention_forward_mma(floatX* out, float* lse, const floatX* qkv, const PE& pb, int B, int T, int NH, int HS, cudaStream_t stream) {
    attention_for_head_size(HS, [&](auto hs) {
        attention_forward_mma_hs<decltype(hs)::value>(out, lse, qkv, pb, B, T, NH, stream);
    });
}

// dqkv (B, T, 3C), written in full, and the bias gradients through the PE's hooks;
// D (B, NH, T) is scratch
template<class PE>
static void attention_backward_mma(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out, const float* lse,
                                   const PE& pb, int B, int T, int NH, int HS, cudaStream_t stream) {
    attention_for_head_size(HS, [&](auto hs) {
        attention_backward_mma_hs<decltype(hs)::value>(dqkv, D, dout, qkv, out, lse, pb, B, T, NH, stream);
    });
}

#endif // LLMC_ATTENTION_MMA_CUH
