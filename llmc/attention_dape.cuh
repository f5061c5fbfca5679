/*
Causal attention with DAPE's logits (pe/dape.h; the definition is its CPU part, which
this computes): for query row i, every head at once,

  x_i[c] = (s[0..H)[c], b[0..H)[c]) for 0 <= c <= i, 0 for c > i     (Cin = 2H, or H without a bias)
  h_i[c] = LReLU(b1 + sum_t W1[:, :, t] x_i[c + t - p])      for 0 <= c < e_i, 0 elsewhere
  a_i[h][c] = s + b + b2[h] + sum_t W2[h, :, t] . h_i[c + t - p]   for c <= i,  softmax over c <= i

with s = q.k / sqrt(HS) (after rope's rotation) and b the base encoding's bias, from the
trainer's hooks as in llmc/attention_bias.cuh (the row form; b = pe_bias + r.shift, the
row's constant that the plain kernels leave to the softmax):
  PERow pe_bias_row(const PE* pb, int b, int h, int i)
  float pe_bias(const PE* pb, const PERow* r, int j)
  void pe_bias_backward_warp(const PE* pb, PEGrad* g, int side, const PERow* r, int j, float ds, bool valid)
  void pe_bias_flush(const PE* pb, PEGrad* g, int side, int b, int h, int t, bool valid, int slot)
(only the PE_SIDE_COL side: DAPE's bases have parameter gradients, no per-token ones).

Tiling: a block holds DAPE_BR query rows of one batch row with ALL their heads (the
convolution mixes the heads) and walks the key columns in tiles of DAPE_BC. Everything
a tile needs lives in shared memory, in fp32 (CUDA cores), recomputed per tile with a
halo of columns on each side: the logits of columns [c0, c0 + BC) need the hidden values
on [c0 - p, c0 + BC + p), which need x on [c0 - 2p, c0 + BC + 2p).

  forward    grid (query tiles, B): online softmax over the key tiles, out and lse
  backward   two kernels recomputing each tile from q, k, lse and D = dout . out:
             dq pass (grid (query tiles, B)): dq, W1, b1, W2, b2 (a partial per block,
                 summed by dape_params_reduce_kernel) and the base's parameters (one
                 pe_bias_flush per head: block partials that pe_bias_reduce sums)
             dk/dv pass (grid (key tiles, B)): every query tile at or below the key
                 tile's diagonal; dk, dv accumulate in an fp32 buffer the block owns
             the backward tile has a halo of 4p: dx on [c0, c0 + BC) needs dz on +-p,
             which needs dA on +-2p, whose logits need h on +-3p, which needs x on +-4p.
             A hidden (or output) column belongs to the tile that contains it: no
             parameter gradient is counted twice. No atomics: deterministic.

Shared memory (fp32): the layer's weights, x, h, the logits, and in the backward dA, dz,
dx, plus the rows' accumulators: about 80 KiB (forward) to 140 KiB (dq pass) for GPT-2
small (H = 12, D = 32, k = 3); dape_check_smem refuses what the GPU cannot hold.
*/
#ifndef LLMC_ATTENTION_DAPE_CUH
#define LLMC_ATTENTION_DAPE_CUH

#include "cuda_common.cuh"
// DAPE (pe/dape.h): included with the model (llmc/model.h)

#define DAPE_BR 8        // query rows per block
#define DAPE_BC 16       // key columns per tile
#define DAPE_THREADS 256
// the kernels' __launch_bounds__ minimum of blocks per SM: 1 lets ptxas use the registers it
// needs; left to itself (nvcc 13.0) it held the dq and dk/dv passes of the instance at
// randomized positions to 48 registers and spilled (alibi, fire). A block's 80-140 KiB of
// shared memory leaves room for at most two per SM anyway.
#define DAPE_MIN_BLOCKS 1
static_assert(DAPE_BR * DAPE_BC % 32 == 0, "the base's gradient: whole warps of a tile's pairs");

// one layer's DAPE: weights in the checkpoint layouts W1 (D, Cin, K), W2 (NH, D, K)
struct DapeParams {
    const floatX* w1; const floatX* b1; const floatX* w2; const floatX* b2;
    int K, D, Cin, NH, HS, edge_exact;
};

enum { DAPE_FORWARD = 0, DAPE_BACKWARD_Q = 1, DAPE_BACKWARD_KV = 2 };

// the number of DAPE's parameters of one layer, in the order of a block's partial:
// W1, b1, W2, b2 (checkpoint layouts)
__host__ __device__ inline int dape_num_params(const DapeParams& dp) {
    return dp.K * dp.Cin * dp.D + dp.D + dp.K * dp.D * dp.NH + dp.NH;
}

// floats of the base's gradient accumulators of one lane (PEGrad; none when it is empty)
template<class PE> __host__ __device__ constexpr int dape_grad_floats() {
    return std::is_empty<PEGradOf<PE>>::value ? 0 : (int)(sizeof(PEGradOf<PE>) / sizeof(float));
}

// shared memory of a kernel: pointers into `base` (when not NULL), and the size in floats
struct DapeSmem { float *w1, *b1, *w2, *b2, *x, *hid, *a, *da, *dz, *dx, *row_a, *row_b, *acc, *corr, *params, *pe; };
template<class PE>
__host__ __device__ inline size_t dape_smem_layout(DapeSmem* s, float* base, const DapeParams& dp, int kind) {
    int p = dp.K / 2, bwd = kind != DAPE_FORWARD, C = dp.NH * dp.HS;
    int hx = bwd ? 4 * p : 2 * p, hh = bwd ? 3 * p : p, ha = bwd ? 2 * p : 0;
    size_t sizes[16] = {
        (size_t)dp.K * dp.Cin * dp.D, (size_t)dp.D, (size_t)dp.K * dp.D * dp.NH, (size_t)dp.NH,
        (size_t)DAPE_BR * (DAPE_BC + 2 * hx) * dp.Cin,                  // x
        (size_t)DAPE_BR * (DAPE_BC + 2 * hh) * dp.D,                    // hid
        (size_t)DAPE_BR * (DAPE_BC + 2 * ha) * dp.NH,                   // a: logits, then probabilities
        bwd ? (size_t)DAPE_BR * (DAPE_BC + 4 * p) * dp.NH : 0,          // da
        bwd ? (size_t)DAPE_BR * (DAPE_BC + 2 * p) * dp.D : 0,           // dz
        bwd ? (size_t)DAPE_BR * DAPE_BC * dp.Cin : 0,                   // dx
        (size_t)DAPE_BR * dp.NH, (size_t)DAPE_BR * dp.NH,               // per row and head: m, l / lse, D
        kind == DAPE_BACKWARD_KV ? 0 : (size_t)DAPE_BR * C,             // acc: out / dq of the rows
        kind == DAPE_FORWARD ? (size_t)DAPE_BR * dp.NH : 0,             // corr: the softmax's rescale
        kind == DAPE_BACKWARD_Q ? (size_t)dape_num_params(dp) : 0,      // params: the block's partial
        kind == DAPE_BACKWARD_Q ? (size_t)dp.NH * WARP_SIZE * dape_grad_floats<PE>() : 0, // pe: the base's PEGrad per head and lane
    };
    float** ptrs[16] = {&s->w1, &s->b1, &s->w2, &s->b2, &s->x, &s->hid, &s->a, &s->da, &s->dz, &s->dx,
                        &s->row_a, &s->row_b, &s->acc, &s->corr, &s->params, &s->pe};
    size_t total = 0;
    for (int k = 0; k < 16; k++) {
        if (base != NULL) { *ptrs[k] = base + total; }
        total += (sizes[k] + 3) / 4 * 4; // 16-byte aligned pieces
    }
    return total;
}

__device__ __forceinline__ int dape_hidden_end(const DapeParams& dp, int i, int T) {
    int e = i + dp.K / 2 + 1;
    return dp.edge_exact && e > T ? T : e;
}

__device__ __forceinline__ float dape_lrelu(float v) { return v > 0.0f ? v : DAPE_LRELU_SLOPE * v; }

__device__ void dape_load_weights(const DapeSmem& s, const DapeParams& dp) {
    int n1 = dp.K * dp.Cin * dp.D, n2 = dp.K * dp.D * dp.NH;
    for (int e = threadIdx.x; e < n1; e += blockDim.x) { s.w1[e] = (float)dp.w1[e]; }
    for (int e = threadIdx.x; e < dp.D; e += blockDim.x) { s.b1[e] = (float)dp.b1[e]; }
    for (int e = threadIdx.x; e < n2; e += blockDim.x) { s.w2[e] = (float)dp.w2[e]; }
    for (int e = threadIdx.x; e < dp.NH; e += blockDim.x) { s.b2[e] = (float)dp.b2[e]; }
}

// x[r][u][ch] for the columns col = c0 - hx + u, u < BC + 2 hx, of row i = r0 + r: the
// scores, then the biases, of every head; 0 where col < 0, col > i or i >= T
template<class PE>
__device__ void dape_tile_inputs(float* x, int hx, const floatX* qkv, const PE& pb, const DapeParams& dp,
                                 int b, int r0, int c0, int T) {
    int W = DAPE_BC + 2 * hx, NH = dp.NH, HS = dp.HS, C = NH * HS, Cin = dp.Cin;
    float scale = 1.0f / sqrtf((float)HS);
    for (int idx = threadIdx.x; idx < DAPE_BR * W * NH; idx += blockDim.x) {
        int h = idx % NH, u = (idx / NH) % W, r = idx / (NH * W);
        int i = r0 + r, col = c0 - hx + u;
        float sv = 0.0f, bv = 0.0f;
        if (i < T && col >= 0 && col <= i) {
            const floatX* q = qkv + ((size_t)b * T + i) * 3 * C + h * HS;
            const floatX* k = qkv + ((size_t)b * T + col) * 3 * C + C + h * HS;
            float dot = 0.0f;
            for (int e = 0; e < HS; e++) { dot += (float)q[e] * (float)k[e]; }
            sv = dot * scale;
            if (Cin == 2 * NH) { // the whole bias: the row's shift does not cancel here
                PERowOf<PE> pr = pe_bias_row(&pb, b, h, i);
                bv = pe_bias(&pb, &pr, col) + pr.shift;
            }
        }
        float* xr = x + ((size_t)r * W + u) * Cin;
        xr[h] = sv;
        if (Cin == 2 * NH) { xr[NH + h] = bv; }
    }
}

// hid[r][u][d] = LReLU(b1 + sum_t W1[:, :, t] x[col + t - p]) for the hidden columns
// col = c0 - hh + u, u < BC + 2 hh, where 0 <= col < e_i; 0 elsewhere. x starts p columns
// further left (hx = hh + p), so column col + t - p of x is its entry u + t.
__device__ void dape_tile_hidden(float* hid, int hh, const float* x, const DapeSmem& s, const DapeParams& dp,
                                 int r0, int c0, int T) {
    int W = DAPE_BC + 2 * hh, Wx = W + 2 * (dp.K / 2), D = dp.D, Cin = dp.Cin, K = dp.K;
    for (int idx = threadIdx.x; idx < DAPE_BR * W * D; idx += blockDim.x) {
        int d = idx % D, u = (idx / D) % W, r = idx / (D * W);
        int i = r0 + r, col = c0 - hh + u;
        float z = 0.0f;
        if (i < T && col >= 0 && col < dape_hidden_end(dp, i, T)) {
            z = s.b1[d];
            for (int t = 0; t < K; t++) {
                const float* xr = x + ((size_t)r * Wx + u + t) * Cin;
                const float* w = s.w1 + (size_t)d * Cin * K + t;
                for (int ch = 0; ch < Cin; ch++) { z += w[ch * K] * xr[ch]; }
            }
            z = dape_lrelu(z);
        }
        hid[((size_t)r * W + u) * D + d] = z;
    }
}

// a[r][u][h] = s + b + b2 + sum_t W2[h, :, t] . hid[col + t - p] for the columns
// col = c0 - ha + u, u < BC + 2 ha, with 0 <= col <= i; -inf elsewhere (hh = ha + p, hx = ha + 2p)
__device__ void dape_tile_logits(float* a, int ha, const float* hid, const float* x, const DapeSmem& s,
                                 const DapeParams& dp, int r0, int c0, int T) {
    int p = dp.K / 2, W = DAPE_BC + 2 * ha, Wh = W + 2 * p, Wx = W + 4 * p;
    int NH = dp.NH, D = dp.D, K = dp.K, Cin = dp.Cin;
    for (int idx = threadIdx.x; idx < DAPE_BR * W * NH; idx += blockDim.x) {
        int h = idx % NH, u = (idx / NH) % W, r = idx / (NH * W);
        int i = r0 + r, col = c0 - ha + u;
        float v = -INFINITY;
        if (i < T && col >= 0 && col <= i) {
            v = s.b2[h];
            for (int t = 0; t < K; t++) {
                const float* hr = hid + ((size_t)r * Wh + u + t) * D;
                const float* w = s.w2 + (size_t)h * D * K + t;
                for (int d = 0; d < D; d++) { v += w[d * K] * hr[d]; }
            }
            const float* xr = x + ((size_t)r * Wx + u + 2 * p) * Cin;
            v += Cin == 2 * NH ? xr[h] + xr[NH + h] : xr[h];
        }
        a[((size_t)r * W + u) * NH + h] = v;
    }
}

// ----------------------------------------------------------------------------
// forward

// dape_attention_forward_kernel: the DAPE_BR query rows of this block, all heads: the key
// tiles in order, each tile's logits from x and h in shared memory, an online softmax per
// (row, head) with one rescale per tile; writes out and lse_i = m + log(l).
template<class PE>
__global__ void __launch_bounds__(DAPE_THREADS, DAPE_MIN_BLOCKS)
dape_attention_forward_kernel(floatX* out, float* lse, const floatX* qkv, const PE pb, const DapeParams dp, int T) {
    float* smem = (float*)DYNAMIC_SMEM;
    DapeSmem s;
    dape_smem_layout<PE>(&s, smem, dp, DAPE_FORWARD);
    int b = blockIdx.y, r0 = (gridDim.x - 1 - blockIdx.x) * DAPE_BR; // the longest rows first
    int NH = dp.NH, HS = dp.HS, C = NH * HS, p = dp.K / 2;
    dape_load_weights(s, dp);
    for (int e = threadIdx.x; e < DAPE_BR * NH; e += blockDim.x) { s.row_a[e] = -INFINITY; s.row_b[e] = 0.0f; }
    for (int e = threadIdx.x; e < DAPE_BR * C; e += blockDim.x) { s.acc[e] = 0.0f; }
    int last = min(r0 + DAPE_BR, T) - 1;
    for (int c0 = 0; c0 <= last; c0 += DAPE_BC) {
        __syncthreads();
        dape_tile_inputs(s.x, 2 * p, qkv, pb, dp, b, r0, c0, T);
        __syncthreads();
        dape_tile_hidden(s.hid, p, s.x, s, dp, r0, c0, T);
        __syncthreads();
        dape_tile_logits(s.a, 0, s.hid, s.x, s, dp, r0, c0, T);
        __syncthreads();
        // per (row, head): the new maximum, the rescale of what came before, the tile's sum
        for (int e = threadIdx.x; e < DAPE_BR * NH; e += blockDim.x) {
            int r = e / NH, h = e % NH;
            float mx = s.row_a[e];
            for (int u = 0; u < DAPE_BC; u++) { mx = fmaxf(mx, s.a[(r * DAPE_BC + u) * NH + h]); }
            float corr = 1.0f, sum = 0.0f;
            if (mx != -INFINITY) {
                corr = expf(s.row_a[e] - mx);
                for (int u = 0; u < DAPE_BC; u++) {
                    float* a = &s.a[(r * DAPE_BC + u) * NH + h];
                    *a = expf(*a - mx);
                    sum += *a;
                }
                s.row_a[e] = mx;
            }
            s.row_b[e] = s.row_b[e] * corr + sum;
            s.corr[e] = corr;
        }
        __syncthreads();
        for (int e = threadIdx.x; e < DAPE_BR * C; e += blockDim.x) {
            int r = e / C, c = e % C, h = c / HS;
            float o = s.acc[e] * s.corr[r * NH + h];
            for (int u = 0; u < DAPE_BC && c0 + u < T; u++) {
                float pu = s.a[(r * DAPE_BC + u) * NH + h];
                if (pu > 0.0f) { o += pu * (float)qkv[((size_t)b * T + c0 + u) * 3 * C + 2 * C + c]; }
            }
            s.acc[e] = o;
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < DAPE_BR * C; e += blockDim.x) {
        int r = e / C, c = e % C, i = r0 + r;
        if (i < T) { out[((size_t)b * T + i) * C + c] = (floatX)(s.acc[e] / s.row_b[r * NH + c / HS]); }
    }
    for (int e = threadIdx.x; e < DAPE_BR * NH; e += blockDim.x) {
        int r = e / NH, h = e % NH, i = r0 + r;
        if (i < T) { lse[((size_t)b * NH + h) * T + i] = s.row_a[e] + logf(s.row_b[e]); }
    }
}

// ----------------------------------------------------------------------------
// backward

// the backward tile of rows [r0, r0 + BR) and key columns [c0, c0 + BC), recomputed into
// shared memory (row_a = the rows' lse, row_b = their D must be loaded): x (halo 4p), hid
// (3p), a = the probabilities P and da = P (dout . v - D) (2p), dz = the gradient of the
// hidden pre-activations (p), and dx (no halo); 0 wherever a column is not in the row.
// Then ds = da + dx[score channel], db = da + dx[bias channel] on [c0, c0 + BC).
template<class PE>
__device__ void dape_tile_backward(const DapeSmem& s, const floatX* qkv, const floatX* dout, const PE& pb,
                                   const DapeParams& dp, int b, int r0, int c0, int T) {
    int p = dp.K / 2, NH = dp.NH, HS = dp.HS, C = NH * HS, D = dp.D, K = dp.K, Cin = dp.Cin;
    int Wa = DAPE_BC + 4 * p, Wz = DAPE_BC + 2 * p, Wh = DAPE_BC + 6 * p;
    dape_tile_inputs(s.x, 4 * p, qkv, pb, dp, b, r0, c0, T);
    __syncthreads();
    dape_tile_hidden(s.hid, 3 * p, s.x, s, dp, r0, c0, T);
    __syncthreads();
    dape_tile_logits(s.a, 2 * p, s.hid, s.x, s, dp, r0, c0, T);
    __syncthreads();
    for (int idx = threadIdx.x; idx < DAPE_BR * Wa * NH; idx += blockDim.x) {
        int h = idx % NH, u = (idx / NH) % Wa, r = idx / (NH * Wa);
        int i = r0 + r, col = c0 - 2 * p + u;
        float pv = 0.0f, dav = 0.0f;
        if (i < T && col >= 0 && col <= i) {
            const floatX* g = dout + ((size_t)b * T + i) * C + h * HS;
            const floatX* v = qkv + ((size_t)b * T + col) * 3 * C + 2 * C + h * HS;
            float dpv = 0.0f;
            for (int e = 0; e < HS; e++) { dpv += (float)g[e] * (float)v[e]; }
            pv = expf(s.a[idx] - s.row_a[r * NH + h]);
            dav = pv * (dpv - s.row_b[r * NH + h]);
        }
        s.a[idx] = pv;
        s.da[idx] = dav;
    }
    __syncthreads();
    // dz of the hidden column c0 - p + u: the output columns it feeds, col - t + p, are da's u - t + 2p
    for (int idx = threadIdx.x; idx < DAPE_BR * Wz * D; idx += blockDim.x) {
        int d = idx % D, u = (idx / D) % Wz, r = idx / (D * Wz);
        int i = r0 + r, col = c0 - p + u;
        float g = 0.0f;
        if (i < T && col >= 0 && col < dape_hidden_end(dp, i, T)) {
            for (int t = 0; t < K; t++) {
                const float* dar = s.da + ((size_t)r * Wa + u - t + 2 * p) * NH;
                const float* w = s.w2 + (size_t)d * K + t;
                for (int h = 0; h < NH; h++) { g += w[(size_t)h * D * K] * dar[h]; }
            }
            g *= s.hid[((size_t)r * Wh + u + 2 * p) * D + d] > 0.0f ? 1.0f : DAPE_LRELU_SLOPE;
        }
        s.dz[idx] = g;
    }
    __syncthreads();
    // dx of the column c0 + u: the hidden columns it feeds, col - t + p, are dz's u - t + 2p
    for (int idx = threadIdx.x; idx < DAPE_BR * DAPE_BC * Cin; idx += blockDim.x) {
        int ch = idx % Cin, u = (idx / Cin) % DAPE_BC, r = idx / (Cin * DAPE_BC);
        int i = r0 + r, col = c0 + u;
        float g = 0.0f;
        if (i < T && col <= i) {
            for (int t = 0; t < K; t++) {
                const float* dzr = s.dz + ((size_t)r * Wz + u - t + 2 * p) * D;
                const float* w = s.w1 + (size_t)ch * K + t;
                for (int d = 0; d < D; d++) { g += w[(size_t)d * Cin * K] * dzr[d]; }
            }
        }
        s.dx[idx] = g;
    }
    __syncthreads();
}

// the score gradient ds and the bias gradient db at (row r, column c0 + u, head h) of the tile
__device__ __forceinline__ float dape_tile_ds(const DapeSmem& s, const DapeParams& dp, int r, int u, int h) {
    int p = dp.K / 2;
    return s.da[((size_t)r * (DAPE_BC + 4 * p) + u + 2 * p) * dp.NH + h] + s.dx[((size_t)r * DAPE_BC + u) * dp.Cin + h];
}
__device__ __forceinline__ float dape_tile_db(const DapeSmem& s, const DapeParams& dp, int r, int u, int h) {
    int p = dp.K / 2;
    return s.da[((size_t)r * (DAPE_BC + 4 * p) + u + 2 * p) * dp.NH + h] + s.dx[((size_t)r * DAPE_BC + u) * dp.Cin + dp.NH + h];
}

// dape_attention_backward_q_kernel: the DAPE_BR query rows of this block, all heads: D_i =
// dout_i . out_i (kept for the dk/dv pass), then every key tile up to the rows' last
// hidden column: dq_i += ds k_c / sqrt(HS), DAPE's parameter gradients of the tile's own
// output and hidden columns (the block's partial), and the base's parameter gradients
// (a warp per head at a time, its lanes over the tile's pairs; one pe_bias_flush per head into
// slot (vb NH + h) kv_blocks + kb, where (vb, kb) numbers the blocks kv_blocks to a virtual
// batch row).
template<class PE>
__global__ void __launch_bounds__(DAPE_THREADS, DAPE_MIN_BLOCKS)
dape_attention_backward_q_kernel(floatX* dqkv, float* Dsum, float* partials, const floatX* dout, const floatX* qkv,
                                 const floatX* out, const float* lse, const PE pb, const DapeParams dp, int T, int kv_blocks) {
    float* smem = (float*)DYNAMIC_SMEM;
    DapeSmem s;
    dape_smem_layout<PE>(&s, smem, dp, DAPE_BACKWARD_Q);
    int b = blockIdx.y, r0 = blockIdx.x * DAPE_BR;
    int NH = dp.NH, HS = dp.HS, C = NH * HS, p = dp.K / 2, D = dp.D, K = dp.K, Cin = dp.Cin;
    int Wa = DAPE_BC + 4 * p, Wz = DAPE_BC + 2 * p, Wh = DAPE_BC + 6 * p, Wx = DAPE_BC + 8 * p;
    int n1 = K * Cin * D, n2 = K * D * NH, np = dape_num_params(dp);
    float scale = 1.0f / sqrtf((float)HS);
    dape_load_weights(s, dp);
    for (int e = threadIdx.x; e < DAPE_BR * NH; e += blockDim.x) {
        int r = e / NH, h = e % NH, i = r0 + r;
        float Di = 0.0f;
        if (i < T) {
            const floatX* g = dout + ((size_t)b * T + i) * C + h * HS;
            const floatX* o = out + ((size_t)b * T + i) * C + h * HS;
            for (int k = 0; k < HS; k++) { Di += (float)g[k] * (float)o[k]; }
            Dsum[((size_t)b * NH + h) * T + i] = Di;
        }
        s.row_a[e] = i < T ? lse[((size_t)b * NH + h) * T + i] : 0.0f;
        s.row_b[e] = Di;
    }
    for (int e = threadIdx.x; e < DAPE_BR * C; e += blockDim.x) { s.acc[e] = 0.0f; }
    for (int e = threadIdx.x; e < np; e += blockDim.x) { s.params[e] = 0.0f; }
    typedef PEGradOf<PE> Grad;
    Grad* pe_acc = reinterpret_cast<Grad*>(s.pe); // [head][lane]
    int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE, warps = blockDim.x / WARP_SIZE;
    if constexpr (dape_grad_floats<PE>() > 0) {
        for (int e = threadIdx.x; e < NH * WARP_SIZE; e += blockDim.x) { pe_acc[e] = Grad{}; }
    }
    int last = min(r0 + DAPE_BR, T) - 1;
    int last_hidden = dape_hidden_end(dp, last, T) - 1;
    for (int c0 = 0; c0 <= last_hidden; c0 += DAPE_BC) {
        __syncthreads();
        dape_tile_backward(s, qkv, dout, pb, dp, b, r0, c0, T);
        for (int e = threadIdx.x; e < DAPE_BR * C; e += blockDim.x) {
            int r = e / C, c = e % C, h = c / HS, i = r0 + r;
            float g = 0.0f;
            for (int u = 0; u < DAPE_BC && c0 + u <= i && i < T; u++) {
                g += dape_tile_ds(s, dp, r, u, h) * (float)qkv[((size_t)b * T + c0 + u) * 3 * C + C + c];
            }
            s.acc[e] += g * scale;
        }
        // W1, b1 from the hidden columns c0 + u (dz's u + p, x's u + t + 3p); W2, b2 from the
        // output columns c0 + u (da's u + 2p, hid's u + t + 2p); zeros stand for columns not in a row
        for (int e = threadIdx.x; e < np; e += blockDim.x) {
            float g = 0.0f;
            for (int r = 0; r < DAPE_BR; r++) {
                for (int u = 0; u < DAPE_BC; u++) {
                    if (e < n1) {
                        int t = e % K, ch = (e / K) % Cin, d = e / (K * Cin);
                        g += s.dz[((size_t)r * Wz + u + p) * D + d] * s.x[((size_t)r * Wx + u + t + 3 * p) * Cin + ch];
                    } else if (e < n1 + D) {
                        g += s.dz[((size_t)r * Wz + u + p) * D + e - n1];
                    } else if (e < n1 + D + n2) {
                        int q = e - n1 - D, t = q % K, d = (q / K) % D, h = q / (K * D);
                        g += s.da[((size_t)r * Wa + u + 2 * p) * NH + h] * s.hid[((size_t)r * Wh + u + t + 2 * p) * D + d];
                    } else {
                        g += s.da[((size_t)r * Wa + u + 2 * p) * NH + e - n1 - D - n2];
                    }
                }
            }
            s.params[e] += g;
        }
        // the base's gradients: warp w takes the heads w, w + warps, ..., its lanes the tile's
        // pairs together (pe_bias_backward_warp); a head's accumulators wait in shared memory
        if constexpr (dape_grad_floats<PE>() > 0) {
            for (int h = warp; h < NH; h += warps) {
                Grad acc = pe_acc[h * WARP_SIZE + lane];
                for (int q = lane; q < DAPE_BR * DAPE_BC; q += WARP_SIZE) {
                    int r = q / DAPE_BC, u = q % DAPE_BC, i = r0 + r, col = c0 + u;
                    bool valid = i < T && col <= i;
                    float db = valid ? dape_tile_db(s, dp, r, u, h) : 0.0f;
                    PERowOf<PE> row = pe_bias_row(&pb, b, h, min(i, T - 1));
                    pe_bias_backward_warp(&pb, &acc, PE_SIDE_COL, &row, min(col, T - 1), db, valid);
                }
                pe_acc[h * WARP_SIZE + lane] = acc;
            }
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < DAPE_BR * C; e += blockDim.x) {
        int r = e / C, c = e % C, i = r0 + r;
        if (i < T) { dqkv[((size_t)b * T + i) * 3 * C + c] = (floatX)s.acc[e]; }
    }
    int block = b * gridDim.x + blockIdx.x;
    for (int e = threadIdx.x; e < np; e += blockDim.x) { partials[(size_t)block * np + e] = s.params[e]; }
    int vb = block / kv_blocks, kb = block % kv_blocks;
    for (int h = 0; h < NH; h++) { // head h's accumulators, on the lanes of warp 0
        Grad mine = {};
        if constexpr (dape_grad_floats<PE>() > 0) { if (warp == 0) { mine = pe_acc[h * WARP_SIZE + lane]; } }
        pe_bias_flush(&pb, &mine, PE_SIDE_COL, b, h, 0, false, (vb * NH + h) * kv_blocks + kb);
    }
}

// dape_attention_backward_kv_kernel: the DAPE_BC keys of this block, all heads: every
// query tile from the one holding the block's first key: dk_c += ds q_i / sqrt(HS),
// dv_c += P dout_i, accumulated in dkv (fp32, the block's own columns), then written to
// dqkv. Needs D from the dq pass.
template<class PE>
__global__ void __launch_bounds__(DAPE_THREADS, DAPE_MIN_BLOCKS)
dape_attention_backward_kv_kernel(floatX* dqkv, float* dkv, const floatX* dout, const floatX* qkv, const float* lse,
                                  const float* Dsum, const PE pb, const DapeParams dp, int T) {
    float* smem = (float*)DYNAMIC_SMEM;
    DapeSmem s;
    dape_smem_layout<PE>(&s, smem, dp, DAPE_BACKWARD_KV);
    int b = blockIdx.y, c0 = blockIdx.x * DAPE_BC;
    int NH = dp.NH, HS = dp.HS, C = NH * HS, p = dp.K / 2;
    float scale = 1.0f / sqrtf((float)HS);
    dape_load_weights(s, dp);
    for (int e = threadIdx.x; e < DAPE_BC * 2 * C; e += blockDim.x) {
        int col = c0 + e / (2 * C);
        if (col < T) { dkv[((size_t)b * T + col) * 2 * C + e % (2 * C)] = 0.0f; }
    }
    for (int r0 = c0 / DAPE_BR * DAPE_BR; r0 < T; r0 += DAPE_BR) {
        __syncthreads();
        for (int e = threadIdx.x; e < DAPE_BR * NH; e += blockDim.x) {
            int r = e / NH, h = e % NH, i = r0 + r;
            s.row_a[e] = i < T ? lse[((size_t)b * NH + h) * T + i] : 0.0f;
            s.row_b[e] = i < T ? Dsum[((size_t)b * NH + h) * T + i] : 0.0f;
        }
        __syncthreads();
        dape_tile_backward(s, qkv, dout, pb, dp, b, r0, c0, T);
        for (int e = threadIdx.x; e < DAPE_BC * C; e += blockDim.x) {
            int u = e / C, c = e % C, h = c / HS, col = c0 + u;
            if (col >= T) { continue; }
            float gk = 0.0f, gv = 0.0f;
            for (int r = 0; r < DAPE_BR; r++) {
                int i = r0 + r;
                if (i >= T || col > i) { continue; }
                gk += dape_tile_ds(s, dp, r, u, h) * (float)qkv[((size_t)b * T + i) * 3 * C + c];
                gv += s.a[((size_t)r * (DAPE_BC + 4 * p) + u + 2 * p) * NH + h] * (float)dout[((size_t)b * T + i) * C + c];
            }
            float* dst = dkv + ((size_t)b * T + col) * 2 * C;
            dst[c] += gk * scale;
            dst[C + c] += gv;
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < DAPE_BC * 2 * C; e += blockDim.x) {
        int col = c0 + e / (2 * C), c = e % (2 * C);
        if (col < T) { dqkv[((size_t)b * T + col) * 3 * C + C + c] = (floatX)dkv[((size_t)b * T + col) * 2 * C + c]; }
    }
}

// dape_params_reduce_kernel: one thread per parameter: the blocks' partials summed, added
// to the layer's gradients (checkpoint layouts)
__global__ void dape_params_reduce_kernel(float* dw1, float* db1, float* dw2, float* db2, const float* partials,
                                          int blocks, int n1, int D, int n2, int NH) {
    int e = blockIdx.x * blockDim.x + threadIdx.x, np = n1 + D + n2 + NH;
    if (e >= np) { return; }
    float sum = 0.0f;
    for (int k = 0; k < blocks; k++) { sum += partials[(size_t)k * np + e]; }
    if (e < n1) { dw1[e] += sum; }
    else if (e < n1 + D) { db1[e - n1] += sum; }
    else if (e < n1 + D + n2) { dw2[e - n1 - D] += sum; }
    else { db2[e - n1 - D - n2] += sum; }
}

// ----------------------------------------------------------------------------
// launchers

static inline int dape_query_blocks(int B, int T) { return B * CEIL_DIV(T, DAPE_BR); }

// the kernel's dynamic shared memory in bytes; a clear error when the GPU has less beside
// the kernel's static shared memory (limit: the device's opt-in maximum per block)
template<class PE, class K>
static size_t dape_check_smem(K* kernel, const DapeParams& dp, int kind, size_t limit) {
    size_t bytes = dape_smem_layout<PE>(NULL, NULL, dp, kind) * sizeof(float);
    cudaFuncAttributes fa;
    cudaCheck(cudaFuncGetAttributes(&fa, kernel));
    if (bytes + fa.sharedSizeBytes > limit) {
        fatal("DAPE attention needs %.1f KiB of shared memory per block (H=%d, D=%d, k=%d; %.1f KiB of it static), this GPU allows %.1f KiB",
              (bytes + fa.sharedSizeBytes) / 1024.0, dp.NH, dp.D, dp.K, fa.sharedSizeBytes / 1024.0, limit / 1024.0);
    }
    return bytes;
}

// out (B, T, C) and lse (B, NH, T) from qkv (B, T, 3C); smem_limit: the device's opt-in maximum
template<class PE>
static void dape_attention_forward(floatX* out, float* lse, const floatX* qkv, const PE& pb, const DapeParams& dp,
                                   int B, int T, size_t smem_limit, cudaStream_t stream) {
    size_t smem = dape_check_smem<PE>(dape_attention_forward_kernel<PE>, dp, DAPE_FORWARD, smem_limit);
    cudaCheck(cudaFuncSetAttribute(dape_attention_forward_kernel<PE>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid(CEIL_DIV(T, DAPE_BR), B);
    dape_attention_forward_kernel<PE><<<grid, DAPE_THREADS, smem, stream>>>(out, lse, qkv, pb, dp, T);
    cudaCheckLaunch("dape_attention_forward_kernel");
}

// dqkv (B, T, 3C), written in full; Dsum (B, NH, T), dkv (B, T, 2C) fp32 and partials
// (dape_query_blocks x dape_num_params) are scratch. DAPE's parameter gradients are added
// to dw1, db1, dw2, db2; the base's go to the PE's partials in the slots described at
// dape_attention_backward_q_kernel (pe_bias_reduce with CEIL_DIV(dape_query_blocks,
// kv_blocks) batch rows sums them; the slots past the last block must be zero).
template<class PE>
static void dape_attention_backward(floatX* dqkv, float* Dsum, float* dkv, float* partials, float* dw1, float* db1,
                                    float* dw2, float* db2, const floatX* dout, const floatX* qkv, const floatX* out,
                                    const float* lse, const PE& pb, const DapeParams& dp, int B, int T, int kv_blocks,
                                    size_t smem_limit, cudaStream_t stream) {
    size_t smem_q = dape_check_smem<PE>(dape_attention_backward_q_kernel<PE>, dp, DAPE_BACKWARD_Q, smem_limit);
    size_t smem_kv = dape_check_smem<PE>(dape_attention_backward_kv_kernel<PE>, dp, DAPE_BACKWARD_KV, smem_limit);
    cudaCheck(cudaFuncSetAttribute(dape_attention_backward_q_kernel<PE>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_q));
    cudaCheck(cudaFuncSetAttribute(dape_attention_backward_kv_kernel<PE>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_kv));
    dim3 grid_q(CEIL_DIV(T, DAPE_BR), B);
    dape_attention_backward_q_kernel<PE><<<grid_q, DAPE_THREADS, smem_q, stream>>>(dqkv, Dsum, partials, dout, qkv, out, lse,
                                                                                   pb, dp, T, kv_blocks);
    cudaCheckLaunch("dape_attention_backward_q_kernel");
    dim3 grid_kv(CEIL_DIV(T, DAPE_BC), B);
    dape_attention_backward_kv_kernel<PE><<<grid_kv, DAPE_THREADS, smem_kv, stream>>>(dqkv, dkv, dout, qkv, lse, Dsum, pb, dp, T);
    cudaCheckLaunch("dape_attention_backward_kv_kernel");
    int n1 = dp.K * dp.Cin * dp.D, n2 = dp.K * dp.D * dp.NH, np = dape_num_params(dp);
    dape_params_reduce_kernel<<<CEIL_DIV(np, 256), 256, 0, stream>>>(dw1, db1, dw2, db2, partials, dape_query_blocks(B, T),
                                                                    n1, dp.D, n2, dp.NH);
    cudaCheckLaunch("dape_params_reduce_kernel");
}

#endif // LLMC_ATTENTION_DAPE_CUH
