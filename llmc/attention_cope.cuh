/*
Causal attention with CoPE's contextual positions (train_gpt2.c's CoPE block is the
definition, which this computes), forward and backward, fp32 on CUDA cores in both builds
(bf16 inputs are read and converted), no T x T tensor. For query i, key j <= i of head h,
s_ij = q_i.k_j / sqrt(HS):

  p_ij = min(sum_{t=j..i} sigmoid(s_it), P - 1)         key j's position: a suffix sum of the row
  e_ij = q_i.((1 - w) E[f] + w E[c]),  f = floor(p_ij), c = ceil(p_ij), w = p_ij - f
  logit_ij = s_ij + e_ij / sqrt(HS)

with E (P, HS) the layer's embeddings (shared by the heads). CoPE's term depends on the
scores of the whole row, which no bias hook of llmc/attention_bias.cuh can see; these
kernels keep the fp32 kernels' layout (a thread owns ATT_DPT of a row's HS dimensions, HS /
ATT_DPT consecutive lanes share a row, key tiles of ATT_BK in shared memory, the helpers of
attention_bias.cuh) and walk the keys in an order that has the sums they need:

  forward    block = ATT_BQ query rows of one (b, h); key tiles DESCENDING from the diagonal,
             each row keeping the running sum of its gates (the positions of the tile's keys
             follow from it, key by key down the tile), and the two rows of E around each
             position read and interpolated (E is small and read through the caches); online
             softmax (attention_softmax_tile), out and lse_i
  backward   one kernel, block = COPE_BQ query rows (query-tile outer): the gradient of a gate
             needs the PREFIX sum over j of dpos_ij = dA_ij (q_i.E[c] - q_i.E[f]) / sqrt(HS)
             (a gate enters the positions of every key below it), while the positions are
             suffix sums, so
               sweep 1, key tiles down: the sum of each row's gates above each tile (carry)
               sweep 2, key tiles up: per tile, keys down from the carry (the positions,
                 logits, P_ij, dA_ij, dpos_ij, dq's embedding path, dz), then keys up with the
                 running prefix sum of dpos: ds_ij = dA_ij + dg_ij g (1 - g) and dq's score path;
                 the tile's dk, dv summed over the block's rows in shared memory and added to
                 an fp32 buffer with atomics (as FlashAttention-2 accumulates dq)
             dz_i[u] (dL/d(q_i.E[u])) of every row goes to an fp32 scratch row of P values;
             at the end of the block dE[u] += sum over its rows of dz_i[u] q_i (atomics, one
             per element per block). The scratch holds the rows of one launch: the blocks are
             launched in groups that fit COPE_DZ_FLOATS (64 MiB), so its size does not grow
             with T x P.

Positions are summed in the same order as train_gpt2.c's (keys i down to 0, one gate at a
time) in every pass, so each pass sees the same positions. Atomics make the backward's sums
(dk, dv, dE) run-to-run different in the last bits, as FlashAttention-2's dq.

Shared memory: forward 2 ATT_BK HS floats (16 KiB at HS = 64); backward (cope_smem_layout)
2 ATT_BK HS + 2 COPE_BQ HS + 4 COPE_BQ (ATT_BK + 1) + COPE_BQ (T / ATT_BK + 1) floats: 89 KiB
at HS = 64, T = 1024 (the carries grow with T, 8 KiB per 1024 tokens).

Layouts as llmc/attention_bias.cuh: qkv (B, T, 3C), out and dout (B, T, C), lse (B, NH, T).
*/
#ifndef LLMC_ATTENTION_COPE_CUH
#define LLMC_ATTENTION_COPE_CUH

#include "cuda_common.cuh"
#include "attention_bias.cuh"

#define COPE_BQ 64                   // query rows per backward block
#define COPE_DZ_FLOATS (16u << 20)   // the dz scratch: 64 MiB of rows of P floats at most

// one layer of CoPE as the kernels see it
struct CopeLayer {
    const floatX* E; // (P, HS) the layer's embeddings
    float* dE;       // (P, HS) their gradient (fp32, added to)
    float* dkv;      // (B, T, 2C) fp32 scratch of the backward: dk, dv
    float* dz;       // (dz_rows, P) fp32 scratch of the backward: dz of the rows of one launch
    int P;           // positions: maxT + 1
    int dz_rows;     // rows of dz: a multiple of COPE_BQ
};

__device__ __forceinline__ float cope_sigmoid(float s) { return 1.0f / (1.0f + expf(-s)); }

// this thread's ATT_DPT dimensions (attention_load_row's layout) of the embedding of a
// position p in [0, P - 1], (1 - w) E[f] + w E[c], into eh, and of E[c] - E[f] into ed
template<int HS, int TPR>
__device__ __forceinline__ void cope_embedding(float* eh, float* ed, const floatX* E, float p, int part) {
    float f = floorf(p), w = p - f;
    const floatX* ef = E + (size_t)f * HS;
    const floatX* ec = E + (size_t)ceilf(p) * HS;
    #pragma unroll
    for (int g = 0; g < ATT_DPT / 4; g++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            int d = 4 * (g * TPR + part) + e;
            float a = (float)ef[d], c = (float)ec[d];
            eh[4 * g + e] = a + w * (c - a);
            ed[4 * g + e] = c - a;
        }
    }
}

// the dot product of this thread's dimensions of x and y (registers)
__device__ __forceinline__ float cope_dot(const float* x, const float* y) {
    float acc = 0.0f;
    #pragma unroll
    for (int k = 0; k < ATT_DPT; k++) { acc += x[k] * y[k]; }
    return acc;
}

// ----------------------------------------------------------------------------
// forward

// cope_attention_forward_kernel: out_i = sum_j softmax_j(logit_ij) v_j over j <= i for the
// ATT_BQ query rows of this block, the key tiles from the diagonal down, each row's gates
// summed key by key into the positions; writes lse_i for the backward.
template<int HS>
__global__ void __launch_bounds__(ATT_BQ * HS / ATT_DPT)
cope_attention_forward_kernel(floatX* out, float* lse, const floatX* qkv, const CopeLayer cl, int T, int NH) {
    constexpr int TPR = HS / ATT_DPT;
    __shared__ __align__(16) float ks[ATT_BK * HS];
    __shared__ __align__(16) float vs[ATT_BK * HS];
    int b = blockIdx.z, h = blockIdx.y;
    int qt = gridDim.x - 1 - blockIdx.x; // the longest rows first
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR;
    int i = qt * ATT_BQ + r;
    int C = NH * HS, C3 = 3 * C;
    int row = i < T ? i : T - 1; // rows past T compute on a valid row and write nothing
    float scale = 1.0f / sqrtf((float)HS), last_pos = (float)(cl.P - 1);
    float q[ATT_DPT], o[ATT_DPT], eh[ATT_DPT], ed[ATT_DPT];
    attention_load_row<TPR>(q, qkv + ((size_t)b * T + row) * C3 + h * HS, p);
    #pragma unroll
    for (int k = 0; k < ATT_DPT; k++) { o[k] = 0.0f; }
    float m = -INFINITY, l = 0.0f, gates = 0.0f; // gates: the sum of the gates of the keys done
    int last_key = min(qt * ATT_BQ + ATT_BQ, T) - 1;
    for (int j0 = last_key / ATT_BK * ATT_BK; j0 >= 0; j0 -= ATT_BK) {
        __syncthreads();
        attention_load_tile<HS>(ks, qkv, b, j0, ATT_BK, T, C3, C + h * HS);
        attention_load_tile<HS>(vs, qkv, b, j0, ATT_BK, T, C3, 2 * C + h * HS);
        __syncthreads();
        float s[ATT_BK];
        #pragma unroll
        for (int jj = ATT_BK - 1; jj >= 0; jj--) {
            bool in = j0 + jj <= i && i < T;
            float sc = row_group_sum<TPR>(attention_dot<HS, TPR>(q, ks, jj, p)) * scale;
            gates += in ? cope_sigmoid(sc) : 0.0f;
            cope_embedding<HS, TPR>(eh, ed, cl.E, fminf(gates, last_pos), p);
            float e = row_group_sum<TPR>(cope_dot(q, eh));
            s[jj] = in ? sc + e * scale : -INFINITY;
        }
        attention_softmax_tile<HS, TPR>(s, m, l, o, vs, p);
    }
    if (i < T) {
        attention_store_row<TPR>(out + ((size_t)b * T + i) * C + h * HS, o, 1.0f / l, p);
        if (p == 0) { lse[((size_t)b * NH + h) * T + i] = m + logf(l); }
    }
}

// ----------------------------------------------------------------------------
// backward

// the backward kernel's dynamic shared memory: pointers into `base` (when not NULL), and
// the size in floats. Per pair of the tile (row r, key jj, stride ATT_BK + 1): da (dA,
// then ds), dpos, gg = g (1 - g), pr = P_ij; per row: carry (the sum of its gates above
// each key tile), top (the ceiling of its largest position)
struct CopeSmem { float *ks, *vs, *qs, *gs, *da, *dpos, *gg, *pr, *carry, *top; };
__host__ __device__ inline size_t cope_smem_layout(CopeSmem* s, float* base, int HS, int T) {
    size_t pairs = (size_t)COPE_BQ * (ATT_BK + 1);
    size_t sizes[10] = {
        (size_t)ATT_BK * HS, (size_t)ATT_BK * HS, (size_t)COPE_BQ * HS, (size_t)COPE_BQ * HS,
        pairs, pairs, pairs, pairs, (size_t)COPE_BQ * CEIL_DIV(T, ATT_BK), COPE_BQ,
    };
    float** ptrs[10] = {&s->ks, &s->vs, &s->qs, &s->gs, &s->da, &s->dpos, &s->gg, &s->pr, &s->carry, &s->top};
    size_t total = 0;
    for (int k = 0; k < 10; k++) {
        if (base != NULL) { *ptrs[k] = base + total; }
        total += (sizes[k] + 3) / 4 * 4; // 16-byte aligned pieces
    }
    return total;
}

// this thread's dimensions of a row (attention_load_row's layout) into a shared row of HS floats
template<int TPR>
__device__ __forceinline__ void cope_store_row(float* dst, const float* x, int p) {
    #pragma unroll
    for (int g = 0; g < ATT_DPT / 4; g++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) { dst[4 * (g * TPR + p) + e] = x[4 * g + e]; }
    }
}

// cope_attention_backward_kernel: for the COPE_BQ query rows of work item item0 + blockIdx.x
// ((b, h, query tile), the longest rows first): dq (written), dk and dv (added to cl.dkv),
// dE (added to cl.dE), from q, k, v, dout, out and lse; the rows' dz in cl.dz rows
// blockIdx.x * COPE_BQ + r.
template<int HS>
__global__ void __launch_bounds__(COPE_BQ * HS / ATT_DPT)
cope_attention_backward_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out, const float* lse,
                               const CopeLayer cl, int T, int NH, int item0) {
    constexpr int TPR = HS / ATT_DPT, W = ATT_BK + 1;
    CopeSmem sm;
    cope_smem_layout(&sm, (float*)DYNAMIC_SMEM, HS, T);
    int tiles = CEIL_DIV(T, COPE_BQ), item = item0 + blockIdx.x;
    int qt = tiles - 1 - item % tiles, h = (item / tiles) % NH, b = item / (tiles * NH);
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR;
    int i = qt * COPE_BQ + r;
    int C = NH * HS, C3 = 3 * C, P = cl.P, ktiles = CEIL_DIV(T, ATT_BK);
    int row = i < T ? i : T - 1;
    float scale = 1.0f / sqrtf((float)HS), last_pos = (float)(P - 1);
    float* dz = cl.dz + ((size_t)blockIdx.x * COPE_BQ + r) * P;
    float q[ATT_DPT], g[ATT_DPT], dq[ATT_DPT] = {}, eh[ATT_DPT], ed[ATT_DPT];
    attention_load_row<TPR>(q, qkv + ((size_t)b * T + row) * C3 + h * HS, p);
    float Di = attention_row_delta<TPR>(g, dout + ((size_t)b * T + row) * C + h * HS, out + ((size_t)b * T + row) * C + h * HS, p);
    cope_store_row<TPR>(sm.qs + r * HS, q, p);
    cope_store_row<TPR>(sm.gs + r * HS, g, p);
    float row_lse = lse[((size_t)b * NH + h) * T + row];
    int top_tile = (min(qt * COPE_BQ + COPE_BQ, T) - 1) / ATT_BK;

    // sweep 1, key tiles down from the diagonal: each row's sum of the gates above each tile
    float gates = 0.0f;
    for (int t = top_tile; t >= 0; t--) {
        __syncthreads();
        attention_load_tile<HS>(sm.ks, qkv, b, t * ATT_BK, ATT_BK, T, C3, C + h * HS);
        __syncthreads();
        if (p == 0) { sm.carry[r * ktiles + t] = gates; }
        for (int jj = ATT_BK - 1; jj >= 0; jj--) {
            float sc = row_group_sum<TPR>(attention_dot<HS, TPR>(q, sm.ks, jj, p)) * scale;
            gates += t * ATT_BK + jj <= i && i < T ? cope_sigmoid(sc) : 0.0f;
        }
    }
    int top = (int)ceilf(fminf(gates, last_pos)); // dz of this row lives on [0, top]
    for (int u = p; u <= top; u += TPR) { dz[u] = 0.0f; }
    if (p == 0) { sm.top[r] = (float)top; }

    // sweep 2, key tiles up from 0, the prefix sum dg of dpos carried along
    float dg = 0.0f;
    for (int t = 0; t <= top_tile; t++) {
        int j0 = t * ATT_BK;
        __syncthreads();
        attention_load_tile<HS>(sm.ks, qkv, b, j0, ATT_BK, T, C3, C + h * HS);
        attention_load_tile<HS>(sm.vs, qkv, b, j0, ATT_BK, T, C3, 2 * C + h * HS);
        __syncthreads();
        // keys down the tile: positions, P, dA, dpos; dq's embedding path, dz
        float pos = sm.carry[r * ktiles + t];
        for (int jj = ATT_BK - 1; jj >= 0; jj--) {
            bool in = j0 + jj <= i && i < T;
            float sc = row_group_sum<TPR>(attention_dot<HS, TPR>(q, sm.ks, jj, p)) * scale;
            float dp = row_group_sum<TPR>(attention_dot<HS, TPR>(g, sm.vs, jj, p));
            float gate = cope_sigmoid(sc);
            pos += in ? gate : 0.0f;
            float pc = fminf(pos, last_pos);
            cope_embedding<HS, TPR>(eh, ed, cl.E, pc, p);
            float e = row_group_sum<TPR>(cope_dot(q, eh));
            float dd = row_group_sum<TPR>(cope_dot(q, ed));
            float pij = in ? expf(sc + e * scale - row_lse) : 0.0f;
            float da = pij * (dp - Di);
            #pragma unroll
            for (int k = 0; k < ATT_DPT; k++) { dq[k] += da * scale * eh[k]; }
            if (p == 0) {
                float f = floorf(pc), w = pc - f;
                if (in) { dz[(int)f] += da * (1.0f - w) * scale; dz[(int)ceilf(pc)] += da * w * scale; }
                sm.da[r * W + jj] = da;
                sm.dpos[r * W + jj] = da * dd * scale;
                sm.gg[r * W + jj] = in ? gate * (1.0f - gate) : 0.0f;
                sm.pr[r * W + jj] = pij;
            }
        }
        __syncwarp(); // the row's lanes read what its lane 0 wrote
        // keys up the tile: dg, ds (into da), dq's score path
        for (int jj = 0; jj < ATT_BK; jj++) {
            dg += sm.dpos[r * W + jj];
            float ds = sm.da[r * W + jj] + dg * sm.gg[r * W + jj];
            attention_axpy<HS, TPR>(dq, ds * scale, sm.ks, jj, p);
            __syncwarp(); // every lane has read da before lane 0 overwrites it
            if (p == 0) { sm.da[r * W + jj] = ds; }
        }
        __syncthreads();
        // the tile's dk, dv: sums over the block's rows, added to dkv
        for (int e = threadIdx.x; e < ATT_BK * HS; e += blockDim.x) {
            int jj = e / HS, d = e % HS, j = j0 + jj;
            if (j >= T) { continue; }
            float gk = 0.0f, gv = 0.0f;
            for (int rr = 0; rr < COPE_BQ; rr++) {
                gk += sm.da[rr * W + jj] * sm.qs[rr * HS + d];
                gv += sm.pr[rr * W + jj] * sm.gs[rr * HS + d];
            }
            float* dst = cl.dkv + ((size_t)b * T + j) * 2 * C + h * HS + d;
            if (gk != 0.0f) { atomicAdd(dst, gk * scale); }
            if (gv != 0.0f) { atomicAdd(dst + C, gv); }
        }
    }
    if (i < T) { attention_store_row<TPR>(dqkv + ((size_t)b * T + i) * C3 + h * HS, dq, 1.0f, p); }

    // dE[u] += sum over the block's rows of dz_i[u] q_i, for u up to the rows' largest top
    __syncthreads();
    int umax = 0;
    for (int rr = 0; rr < COPE_BQ; rr++) { umax = max(umax, qt * COPE_BQ + rr < T ? (int)sm.top[rr] : 0); }
    for (int e = threadIdx.x; e < (umax + 1) * HS; e += blockDim.x) {
        int u = e / HS, d = e % HS;
        float acc = 0.0f;
        for (int rr = 0; rr < COPE_BQ; rr++) {
            if (qt * COPE_BQ + rr < T && u <= (int)sm.top[rr]) { acc += cl.dz[((size_t)blockIdx.x * COPE_BQ + rr) * P + u] * sm.qs[rr * HS + d]; }
        }
        if (acc != 0.0f) { atomicAdd(&cl.dE[(size_t)u * HS + d], acc); }
    }
}

// cope_dkv_store_kernel: the fp32 dk, dv of the backward into dqkv's k and v columns
__global__ void cope_dkv_store_kernel(floatX* dqkv, const float* dkv, size_t N, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= N * 2 * C) { return; }
    size_t t = idx / (2 * C);
    dqkv[t * 3 * C + C + idx % (2 * C)] = (floatX)dkv[idx];
}

// ----------------------------------------------------------------------------
// launchers

// the dz scratch's rows for B x T tokens of NH heads with P positions: every row, or as
// many whole blocks as COPE_DZ_FLOATS holds (at least one)
static inline int cope_dz_rows(int B, int T, int NH, int P) {
    size_t all = (size_t)B * NH * CEIL_DIV(T, COPE_BQ) * COPE_BQ;
    size_t fit = (size_t)COPE_DZ_FLOATS / P / COPE_BQ * COPE_BQ;
    if (fit < COPE_BQ) { fit = COPE_BQ; }
    return (int)(all < fit ? all : fit);
}

// out (B, T, C) and lse (B, NH, T) from qkv (B, T, 3C)
static void cope_attention_forward(floatX* out, float* lse, const floatX* qkv, const CopeLayer& cl, int B, int T, int NH, int HS,
                                   cudaStream_t stream) {
    dim3 grid(CEIL_DIV(T, ATT_BQ), NH, B);
    attention_for_head_size(HS, [&](auto hs) {
        constexpr int size = decltype(hs)::value;
        cope_attention_forward_kernel<size><<<grid, ATT_BQ * size / ATT_DPT, 0, stream>>>(out, lse, qkv, cl, T, NH);
    });
    cudaCheckLaunch("cope_attention_forward_kernel");
}

template<int HS>
static void cope_attention_backward_hs(floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out, const float* lse,
                                       const CopeLayer& cl, int B, int T, int NH, size_t smem_limit, cudaStream_t stream) {
    size_t smem = cope_smem_layout(NULL, NULL, HS, T) * sizeof(float);
    if (smem > smem_limit) {
        fatal("CoPE's attention backward needs %.1f KiB of shared memory per block at T = %d (head size %d), this GPU allows %.1f KiB",
              smem / 1024.0, T, HS, smem_limit / 1024.0);
    }
    cudaCheck(cudaFuncSetAttribute(cope_attention_backward_kernel<HS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int items = B * NH * CEIL_DIV(T, COPE_BQ), per_launch = cl.dz_rows / COPE_BQ;
    for (int item0 = 0; item0 < items; item0 += per_launch) {
        int n = items - item0 < per_launch ? items - item0 : per_launch;
        cope_attention_backward_kernel<HS><<<n, COPE_BQ * HS / ATT_DPT, smem, stream>>>(dqkv, dout, qkv, out, lse, cl, T, NH, item0);
        cudaCheckLaunch("cope_attention_backward_kernel");
    }
}

// dqkv (B, T, 3C), written in full, and E's gradient added to cl.dE; cl.dkv and cl.dz are
// scratch; smem_limit: the device's opt-in maximum of shared memory per block
static void cope_attention_backward(floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out, const float* lse,
                                    const CopeLayer& cl, int B, int T, int NH, int HS, size_t smem_limit, cudaStream_t stream) {
    size_t N = (size_t)B * T;
    cudaCheck(cudaMemsetAsync(cl.dkv, 0, N * 2 * NH * HS * sizeof(float), stream));
    attention_for_head_size(HS, [&](auto hs) {
        cope_attention_backward_hs<decltype(hs)::value>(dqkv, dout, qkv, out, lse, cl, B, T, NH, smem_limit, stream);
    });
    cope_dkv_store_kernel<<<(unsigned)CEIL_DIV(N * 2 * NH * HS, 256), 256, 0, stream>>>(dqkv, cl.dkv, N, NH * HS);
    cudaCheckLaunch("cope_dkv_store_kernel");
}

#endif // LLMC_ATTENTION_COPE_CUH
