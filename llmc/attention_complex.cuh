/*
complex_order's attention (pe/complex_order.h; train_gpt2.c's pe_attention_forward/backward
of that file), forward and backward, without a T x T tensor. Per head, with q = q_re + i q_im
and k likewise, the real and the imaginary stream's q and k:

  a_ij = q_re . k_re - q_im . k_im,   b_ij = q_re . k_im + q_im . k_re,   j <= i
  s_ij = sqrt(a_ij^2 + b_ij^2) / sqrt(HS),   p_ij = softmax_j s_ij
  o_re_i = sum_j p_ij v_re_j,   o_im_i = sum_j p_ij v_im_j

one online softmax for both streams' values (the official code runs no second softmax:
pe/complex_order.h). These kernels are the fp32 kernels' design (llmc/attention_bias.cuh: a
thread owns one row, a query or a key, and ATT_DPT = 16 of its HS dimensions; the other side
streams through shared memory in tiles, converted to fp32; online softmax), used by both
builds: the products run on CUDA cores in fp32, q, k, v read in the build's precision. Each
tile holds both streams' rows. Passes, each recomputing p_ij from lse:

  forward   block = 64 query rows, key tiles of 32 (k_re, k_im, v_re, v_im)
  dq pass   D_i = dout_re_i . o_re_i + dout_im_i . o_im_i, then over the keys j <= i:
            ds_ij = p_ij (dout_re_i . v_re_j + dout_im_i . v_im_j - D_i), and with
            m_ij = |a_ij + i b_ij|, da = ds a / (m sqrt(HS)), db = ds b / (m sqrt(HS)) (0 where
            m = 0, where the modulus has no derivative): dq_re_i = sum_j da k_re_j + db k_im_j,
            dq_im_i = sum_j db k_re_j - da k_im_j
  dk/dv     block = 64 keys, query tiles of 32 (q_re, q_im, dout_re, dout_im, lse_i, D_i):
            dk_re_j = sum_i da q_re_i + db q_im_i, dk_im_j = sum_i db q_re_i - da q_im_i,
            dv_re_j = sum_i p_ij dout_re_i, dv_im_j = sum_i p_ij dout_im_i

Every gradient has one writer (no atomics). Shared memory: four tiles of 32 x HS floats, 16
KiB at HS = 32, 32 KiB at 64, 64 KiB at 128 (above the default 48 KiB: the launchers raise
the kernels' limit), and the dk/dv pass's lse and D of its query tile.
*/
#ifndef LLMC_ATTENTION_COMPLEX_CUH
#define LLMC_ATTENTION_COMPLEX_CUH

// a_ij and b_ij of the pair of this thread's row (x_re, x_im: this thread's dimensions) and
// row t of the other side's tiles (y_re, y_im), summed over the row's threads: a = x_re . y_re -
// x_im . y_im, b = x_re . y_im + x_im . y_re (symmetric in the two sides)
template<int HS, int TPR>
__device__ __forceinline__ void complex_parts(float& a, float& b, const float* x_re, const float* x_im, const float* y_re,
                                              const float* y_im, int t, int p) {
    a = row_group_sum<TPR>(attention_dot<HS, TPR>(x_re, y_re, t, p) - attention_dot<HS, TPR>(x_im, y_im, t, p));
    b = row_group_sum<TPR>(attention_dot<HS, TPR>(x_re, y_im, t, p) + attention_dot<HS, TPR>(x_im, y_re, t, p));
}

// the key tile [j0, j0 + ATT_BK) of (b, h): k_re, k_im, v_re, v_im, one after the other from ks
template<int HS>
__device__ __forceinline__ void complex_load_keys(float* ks, const floatX* qkv, const floatX* qkv_im, int b, int h, int j0, int T, int C) {
    const floatX* src[4] = {qkv, qkv_im, qkv, qkv_im};
    for (int t = 0; t < 4; t++) { attention_load_tile<HS>(ks + t * ATT_BK * HS, src[t], b, j0, ATT_BK, T, 3 * C, (1 + t / 2) * C + h * HS); }
}

// the gradient of s_ij = |a + ib| scale for ds = dL/ds_ij: da, db (0 where the modulus is 0)
__device__ __forceinline__ void complex_score_grad(float& da, float& db, float ds, float a, float b, float scale) {
    float g = ds * scale * complex_inv_abs(sqrtf(a * a + b * b));
    da = g * a;
    db = g * b;
}

// complex_attention_forward_kernel: o_re_i, o_im_i and lse_i for the 64 query rows of this
// block, key tiles of 32 of both streams' keys and values, one online softmax
template<int HS>
__global__ void __launch_bounds__(ATT_BQ * HS / ATT_DPT)
complex_attention_forward_kernel(floatX* out, floatX* out_im, float* lse, const floatX* qkv, const floatX* qkv_im, int T, int NH) {
    constexpr int TPR = HS / ATT_DPT;
    float* ks = (float*)DYNAMIC_SMEM; // the key tile's k_re, k_im, v_re, v_im
    float* kis = ks + ATT_BK * HS;
    float* vs = kis + ATT_BK * HS;
    float* vis = vs + ATT_BK * HS;
    int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * ATT_BQ; // the longest rows first
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR, i = q0 + r;
    int C = NH * HS, C3 = 3 * C;
    int row = i < T ? i : T - 1; // rows past T compute on a valid row and write nothing
    float scale = 1.0f / sqrtf((float)HS);
    float q[ATT_DPT], qi[ATT_DPT], o[ATT_DPT] = {}, oi[ATT_DPT] = {};
    attention_load_row<TPR>(q, qkv + ((size_t)b * T + row) * C3 + h * HS, p);
    attention_load_row<TPR>(qi, qkv_im + ((size_t)b * T + row) * C3 + h * HS, p);
    float m = -INFINITY, l = 0.0f;
    int last_key = min(q0 + ATT_BQ, T) - 1;
    for (int j0 = 0; j0 <= last_key; j0 += ATT_BK) {
        __syncthreads();
        complex_load_keys<HS>(ks, qkv, qkv_im, b, h, j0, T, C);
        __syncthreads();
        float s[ATT_BK];
        float m_new = m;
        #pragma unroll
        for (int jj = 0; jj < ATT_BK; jj++) {
            float ar, ai;
            complex_parts<HS, TPR>(ar, ai, q, qi, ks, kis, jj, p);
            s[jj] = j0 + jj <= i && i < T ? sqrtf(ar * ar + ai * ai) * scale : -INFINITY;
            m_new = fmaxf(m_new, s[jj]);
        }
        if (m_new == -INFINITY) { continue; } // no key yet (a row past T)
        float corr = expf(m - m_new);
        l *= corr;
        #pragma unroll
        for (int e = 0; e < ATT_DPT; e++) { o[e] *= corr; oi[e] *= corr; }
        #pragma unroll
        for (int jj = 0; jj < ATT_BK; jj++) {
            float pij = expf(s[jj] - m_new);
            l += pij;
            attention_axpy<HS, TPR>(o, pij, vs, jj, p);
            attention_axpy<HS, TPR>(oi, pij, vis, jj, p);
        }
        m = m_new;
    }
    if (i < T) {
        attention_store_row<TPR>(out + ((size_t)b * T + i) * C + h * HS, o, 1.0f / l, p);
        attention_store_row<TPR>(out_im + ((size_t)b * T + i) * C + h * HS, oi, 1.0f / l, p);
        if (p == 0) { lse[((size_t)b * NH + h) * T + i] = m + logf(l); }
    }
}

// complex_attention_backward_q_kernel: for the 64 query rows of this block, D_i (kept for the
// dk/dv pass), then over the keys j <= i: dq_re_i and dq_im_i (formulas above)
template<int HS>
__global__ void __launch_bounds__(ATT_BQ * HS / ATT_DPT)
complex_attention_backward_q_kernel(floatX* dqkv, floatX* dqkv_im, float* D, const floatX* dout, const floatX* dout_im, const floatX* qkv,
                                    const floatX* qkv_im, const floatX* out, const floatX* out_im, const float* lse, int T, int NH) {
    constexpr int TPR = HS / ATT_DPT;
    float* ks = (float*)DYNAMIC_SMEM; // the key tile's k_re, k_im, v_re, v_im
    float* kis = ks + ATT_BK * HS;
    float* vs = kis + ATT_BK * HS;
    float* vis = vs + ATT_BK * HS;
    int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * ATT_BQ;
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR, i = q0 + r;
    int C = NH * HS, C3 = 3 * C;
    int row = i < T ? i : T - 1;
    float scale = 1.0f / sqrtf((float)HS);
    float q[ATT_DPT], qi[ATT_DPT], g[ATT_DPT], gi[ATT_DPT], dq[ATT_DPT] = {}, dqi[ATT_DPT] = {};
    size_t at = ((size_t)b * T + row) * C + h * HS;
    attention_load_row<TPR>(q, qkv + ((size_t)b * T + row) * C3 + h * HS, p);
    attention_load_row<TPR>(qi, qkv_im + ((size_t)b * T + row) * C3 + h * HS, p);
    float Di = attention_row_delta<TPR>(g, dout + at, out + at, p) + attention_row_delta<TPR>(gi, dout_im + at, out_im + at, p);
    size_t lse_idx = ((size_t)b * NH + h) * T + row;
    if (i < T && p == 0) { D[lse_idx] = Di; }
    float row_lse = lse[lse_idx];
    int last_key = min(q0 + ATT_BQ, T) - 1;
    for (int j0 = 0; j0 <= last_key; j0 += ATT_BK) {
        __syncthreads();
        complex_load_keys<HS>(ks, qkv, qkv_im, b, h, j0, T, C);
        __syncthreads();
        #pragma unroll 4
        for (int jj = 0; jj < ATT_BK; jj++) {
            float ar, ai;
            complex_parts<HS, TPR>(ar, ai, q, qi, ks, kis, jj, p);
            float dp = row_group_sum<TPR>(attention_dot<HS, TPR>(g, vs, jj, p) + attention_dot<HS, TPR>(gi, vis, jj, p));
            if (j0 + jj <= i && i < T) {
                float ds = expf(sqrtf(ar * ar + ai * ai) * scale - row_lse) * (dp - Di), da, db;
                complex_score_grad(da, db, ds, ar, ai, scale);
                attention_axpy<HS, TPR>(dq, da, ks, jj, p);
                attention_axpy<HS, TPR>(dq, db, kis, jj, p);
                attention_axpy<HS, TPR>(dqi, db, ks, jj, p);
                attention_axpy<HS, TPR>(dqi, -da, kis, jj, p);
            }
        }
    }
    if (i < T) {
        attention_store_row<TPR>(dqkv + ((size_t)b * T + i) * C3 + h * HS, dq, 1.0f, p);
        attention_store_row<TPR>(dqkv_im + ((size_t)b * T + i) * C3 + h * HS, dqi, 1.0f, p);
    }
}

// complex_attention_backward_kv_kernel: for the 64 keys of this block, over the queries i >= j:
// dk_re_j, dk_im_j, dv_re_j, dv_im_j (formulas above). Needs D.
template<int HS>
__global__ void __launch_bounds__(ATT_KV_BK * HS / ATT_DPT)
complex_attention_backward_kv_kernel(floatX* dqkv, floatX* dqkv_im, const floatX* dout, const floatX* dout_im, const floatX* qkv,
                                     const floatX* qkv_im, const float* lse, const float* D, int T, int NH) {
    constexpr int TPR = HS / ATT_DPT;
    float* qs = (float*)DYNAMIC_SMEM;
    float* qis = qs + ATT_KV_BQ * HS;
    float* gs = qis + ATT_KV_BQ * HS;
    float* gis = gs + ATT_KV_BQ * HS;
    float* lses = gis + ATT_KV_BQ * HS;
    float* Ds = lses + ATT_KV_BQ;
    int b = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * ATT_KV_BK;
    int r = threadIdx.x / TPR, p = threadIdx.x % TPR, j = k0 + r;
    int C = NH * HS, C3 = 3 * C;
    int col = j < T ? j : T - 1;
    float scale = 1.0f / sqrtf((float)HS);
    float k[ATT_DPT], ki[ATT_DPT], v[ATT_DPT], vi[ATT_DPT], dk[ATT_DPT] = {}, dki[ATT_DPT] = {}, dv[ATT_DPT] = {}, dvi[ATT_DPT] = {};
    const floatX* key = qkv + ((size_t)b * T + col) * C3 + h * HS;
    const floatX* key_im = qkv_im + ((size_t)b * T + col) * C3 + h * HS;
    attention_load_row<TPR>(k, key + C, p);
    attention_load_row<TPR>(ki, key_im + C, p);
    attention_load_row<TPR>(v, key + 2 * C, p);
    attention_load_row<TPR>(vi, key_im + 2 * C, p);
    const float* lse_bh = lse + ((size_t)b * NH + h) * T;
    const float* D_bh = D + ((size_t)b * NH + h) * T;
    for (int i0 = k0; i0 < T; i0 += ATT_KV_BQ) { // ATT_KV_BK is a multiple of ATT_KV_BQ
        __syncthreads();
        attention_load_tile<HS>(qs, qkv, b, i0, ATT_KV_BQ, T, C3, h * HS);
        attention_load_tile<HS>(qis, qkv_im, b, i0, ATT_KV_BQ, T, C3, h * HS);
        attention_load_tile<HS>(gs, dout, b, i0, ATT_KV_BQ, T, C, h * HS);
        attention_load_tile<HS>(gis, dout_im, b, i0, ATT_KV_BQ, T, C, h * HS);
        for (int e = threadIdx.x; e < ATT_KV_BQ; e += blockDim.x) {
            lses[e] = i0 + e < T ? lse_bh[i0 + e] : 0.0f;
            Ds[e] = i0 + e < T ? D_bh[i0 + e] : 0.0f;
        }
        __syncthreads();
        #pragma unroll 4
        for (int ii = 0; ii < ATT_KV_BQ; ii++) {
            float ar, ai;
            complex_parts<HS, TPR>(ar, ai, k, ki, qs, qis, ii, p);
            float dp = row_group_sum<TPR>(attention_dot<HS, TPR>(v, gs, ii, p) + attention_dot<HS, TPR>(vi, gis, ii, p));
            int i = i0 + ii;
            if (j <= i && i < T) {
                float pij = expf(sqrtf(ar * ar + ai * ai) * scale - lses[ii]), da, db;
                complex_score_grad(da, db, pij * (dp - Ds[ii]), ar, ai, scale);
                attention_axpy<HS, TPR>(dv, pij, gs, ii, p);
                attention_axpy<HS, TPR>(dvi, pij, gis, ii, p);
                attention_axpy<HS, TPR>(dk, da, qs, ii, p);
                attention_axpy<HS, TPR>(dk, db, qis, ii, p);
                attention_axpy<HS, TPR>(dki, db, qs, ii, p);
                attention_axpy<HS, TPR>(dki, -da, qis, ii, p);
            }
        }
    }
    if (j < T) {
        floatX* dst = dqkv + ((size_t)b * T + j) * C3 + h * HS;
        floatX* dst_im = dqkv_im + ((size_t)b * T + j) * C3 + h * HS;
        attention_store_row<TPR>(dst + C, dk, 1.0f, p);
        attention_store_row<TPR>(dst_im + C, dki, 1.0f, p);
        attention_store_row<TPR>(dst + 2 * C, dv, 1.0f, p);
        attention_store_row<TPR>(dst_im + 2 * C, dvi, 1.0f, p);
    }
}

// ----------------------------------------------------------------------------
// launchers

// the kernels' dynamic shared memory: four tiles of rows (and the dk/dv pass's lse and D)
template<int HS> constexpr size_t complex_forward_smem() { return 4 * ATT_BK * HS * sizeof(float); }
template<int HS> constexpr size_t complex_backward_kv_smem() { return (4 * ATT_KV_BQ * HS + 2 * ATT_KV_BQ) * sizeof(float); }

// the two streams' attention inputs and outputs of one layer
struct ComplexArgs {
    const floatX* qkv_im;  // (B, T, 3C) the imaginary stream's q, k, v
    floatX* out_im;        // (B, T, C) forward: its output
    const floatX* dout_im; // (B, T, C) backward: its output's gradient
    floatX* dqkv_im;       // (B, T, 3C) backward: its q, k, v's gradients
};

template<int HS>
static void complex_attention_forward_hs(floatX* out, float* lse, const floatX* qkv, const ComplexArgs& a, int B, int T, int NH,
                                         size_t smem_limit, cudaStream_t stream) {
    constexpr size_t smem = complex_forward_smem<HS>();
    attention_allow_smem(complex_attention_forward_kernel<HS>, smem, smem_limit, "complex_order attention (forward)");
    dim3 grid(CEIL_DIV(T, ATT_BQ), NH, B);
    complex_attention_forward_kernel<HS><<<grid, ATT_BQ * HS / ATT_DPT, smem, stream>>>(out, a.out_im, lse, qkv, a.qkv_im, T, NH);
    cudaCheckLaunch("complex_attention_forward_kernel");
}

template<int HS>
static void complex_attention_backward_hs(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out,
                                          const floatX* out_im, const float* lse, const ComplexArgs& a, int B, int T, int NH,
                                          size_t smem_limit, cudaStream_t stream) {
    constexpr size_t smem_q = complex_forward_smem<HS>(), smem_kv = complex_backward_kv_smem<HS>();
    attention_allow_smem(complex_attention_backward_q_kernel<HS>, smem_q, smem_limit, "complex_order attention (dq pass)");
    attention_allow_smem(complex_attention_backward_kv_kernel<HS>, smem_kv, smem_limit, "complex_order attention (dk/dv pass)");
    dim3 grid_q(CEIL_DIV(T, ATT_BQ), NH, B);
    complex_attention_backward_q_kernel<HS><<<grid_q, ATT_BQ * HS / ATT_DPT, smem_q, stream>>>(
        dqkv, a.dqkv_im, D, dout, a.dout_im, qkv, a.qkv_im, out, out_im, lse, T, NH);
    cudaCheckLaunch("complex_attention_backward_q_kernel");
    dim3 grid_kv(CEIL_DIV(T, ATT_KV_BK), NH, B);
    complex_attention_backward_kv_kernel<HS><<<grid_kv, ATT_KV_BK * HS / ATT_DPT, smem_kv, stream>>>(
        dqkv, a.dqkv_im, dout, a.dout_im, qkv, a.qkv_im, lse, D, T, NH);
    cudaCheckLaunch("complex_attention_backward_kv_kernel");
}

// out (B, T, C), a.out_im and lse (B, NH, T) from qkv (B, T, 3C) and a.qkv_im
static void complex_attention_forward(floatX* out, float* lse, const floatX* qkv, const ComplexArgs& a, int B, int T, int NH, int HS,
                                      size_t smem_limit, cudaStream_t stream) {
    attention_for_head_size(HS, [&](auto hs) { complex_attention_forward_hs<decltype(hs)::value>(out, lse, qkv, a, B, T, NH, smem_limit, stream); });
}

// dqkv and a.dqkv_im (B, T, 3C) written in full from dout, a.dout_im and the forward's out,
// out_im, lse; D (B, NH, T) is scratch
static void complex_attention_backward(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out, const floatX* out_im,
                                       const float* lse, const ComplexArgs& a, int B, int T, int NH, int HS, size_t smem_limit,
                                       cudaStream_t stream) {
    attention_for_head_size(HS, [&](auto hs) { complex_attention_backward_hs<decltype(hs)::value>(dqkv, D, dout, qkv, out, out_im, lse, a, B, T, NH, smem_limit, stream); });
}

#endif // LLMC_ATTENTION_COMPLEX_CUH
