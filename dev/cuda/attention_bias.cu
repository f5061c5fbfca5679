/*
Causal attention with the positional encoding's bias computed on the fly, forward and
backward, in versions selected on the command line; each is checked against the CPU
reference (llmc/attention_check.cuh: double precision, the bias from the encodings'
definitions) and timed with cudaEvents. The encoding is a compile-time switch, as in
the trainer, whose PE hooks (pe_bias, pe_bias_backward_warp, pe_bias_flush) every version
calls.

  make -C dev/cuda attention_bias PE=cable [PRECISION=FP32]
  ./dev/cuda/attention_bias_cable VERSION [T B NH HS]     (default 1024 2 12 64)
  ./dev/cuda/attention_bias_cable check                    (every shape below, no timing)
  ./dev/cuda/attention_bias_cable time [T B NH HS]         (the trainer's attention of a layer
                                                           timed, with no CPU reference)
  ./dev/cuda/attention_bias_cable launches                 (bf16: the tensor-core and DAPE
                                                           kernels' threads and dynamic shared
                                                           memory, for dev/cuda/resources.py)

version 1  one thread per query row (forward, dq pass) or key (dk/dv pass), every
           operand read from global memory, each row's scores computed twice (max, then
           the exponentials): the simplest correct version
version 2  the fp32 build's kernels (llmc/attention_bias.cuh): 16 head dimensions per
           thread, tiles in shared memory, online softmax, fully masked tiles skipped
version 3  the bf16 build's kernels (llmc/attention_mma.cuh): FlashAttention-2 on tensor
           cores (mma.sync m16n8k16, ldmatrix, cp.async double buffering), the bias added
           to the fp32 scores in registers; bf16 builds only

txl and shaw bring their own kernels (llmc/attention_txl.cuh, llmc/attention_shaw.cuh, fp32 on
CUDA cores in both builds): every version runs them, as the trainer's layer attention does.

`check` runs the trainer's attention of a layer (pe_attention_forward/backward: version 3 in
bf16, 2 in fp32) on lengths that are no multiple of the tiles (T = 200, two heads, two rows
of the batch; T = 77 and 100 at head sizes 32 and 128; T = 77 at randomized positions drawn
from [0, 300) for the bias encodings that have them) and on T = 1024 with one head; in the CPU emulation (make
test-cuda-emulate) this is the test of the tensor-core kernels. Tolerances (relative L2
against the double-precision reference): fp32 1e-4 for out, lse, dq, dk, dv; bf16 1e-2 (the
inputs are exact in bf16; P and dS are rounded to bf16 before their second product and the
outputs to bf16: a few 2^-9 = 2e-3 roundings); the bias gradients, fp32 in both builds, 1e-3.
*/
#define TESTING
#include "../../train_gpt2.cu"
#include "../../llmc/attention_check.cuh"
// these encodings' attention kernels are no bias of the kernels below and have a check of their
// own (cuda.mk's ATTENTION_DEV_OWN); compiled here they would be compared with another function
#if PE_IS(COPE) || PE_IS(COMPLEX_ORDER)
#error "this encoding's attention has its own check: dev/cuda/attention_cope.cu or attention_complex.cu"
#endif

#define NAIVE_BLOCK ATT_KV_BK // threads per block, one row or key each (the flush's slot layout)
#define NAIVE_MAX_HS 128

// attention_forward_naive_kernel: one thread per (b, h, query i): the maximum score, then
// the exponentials, their sum and the weighted values, straight from global memory
template<class PE>
__global__ void attention_forward_naive_kernel(floatX* out, float* lse, const floatX* qkv, const PE pb, int T, int NH, int HS) {
    int b = blockIdx.z, h = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T) { return; }
    int C = NH * HS, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    const floatX* q = qkv + ((size_t)b * T + i) * C3 + h * HS;
    PERowOf<PE> pr = pe_bias_row(&pb, b, h, i);
    float m = -INFINITY;
    for (int j = 0; j <= i; j++) {
        const floatX* k = qkv + ((size_t)b * T + j) * C3 + C + h * HS;
        float dot = 0.0f;
        for (int e = 0; e < HS; e++) { dot += (float)q[e] * (float)k[e]; }
        m = fmaxf(m, dot * scale + pe_bias(&pb, &pr, j));
    }
    float acc[NAIVE_MAX_HS];
    for (int e = 0; e < HS; e++) { acc[e] = 0.0f; }
    float l = 0.0f;
    for (int j = 0; j <= i; j++) {
        const floatX* k = qkv + ((size_t)b * T + j) * C3 + C + h * HS;
        const floatX* v = k + C;
        float dot = 0.0f;
        for (int e = 0; e < HS; e++) { dot += (float)q[e] * (float)k[e]; }
        float p = expf(dot * scale + pe_bias(&pb, &pr, j) - m);
        l += p;
        for (int e = 0; e < HS; e++) { acc[e] += p * (float)v[e]; }
    }
    floatX* o = out + ((size_t)b * T + i) * C + h * HS;
    for (int e = 0; e < HS; e++) { o[e] = (floatX)(acc[e] / l); }
    lse[((size_t)b * NH + h) * T + i] = m + logf(l) + pr.shift;
}

// attention_backward_q_naive_kernel: one thread per query i: D_i, then dq_i and the row side
// of the bias gradient over the keys j <= i
template<class PE>
__global__ void attention_backward_q_naive_kernel(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out,
                                                  const float* lse, const PE pb, int T, int NH, int HS) {
    int b = blockIdx.z, h = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x;
    int C = NH * HS, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    PEGradOf<PE> acc = {};
    if (i < T) {
        const floatX* q = qkv + ((size_t)b * T + i) * C3 + h * HS;
        const floatX* g = dout + ((size_t)b * T + i) * C + h * HS;
        const floatX* o = out + ((size_t)b * T + i) * C + h * HS;
        float Di = 0.0f;
        for (int e = 0; e < HS; e++) { Di += (float)g[e] * (float)o[e]; }
        D[((size_t)b * NH + h) * T + i] = Di;
        PERowOf<PE> pr = pe_bias_row(&pb, b, h, i);
        float row_lse = lse[((size_t)b * NH + h) * T + i] - pr.shift;
        float dq[NAIVE_MAX_HS];
        for (int e = 0; e < HS; e++) { dq[e] = 0.0f; }
        for (int j = 0; j <= i; j++) {
            const floatX* k = qkv + ((size_t)b * T + j) * C3 + C + h * HS;
            const floatX* v = k + C;
            float dot = 0.0f, dp = 0.0f;
            for (int e = 0; e < HS; e++) { dot += (float)q[e] * (float)k[e]; dp += (float)g[e] * (float)v[e]; }
            float p = expf(dot * scale + pe_bias(&pb, &pr, j) - row_lse);
            float ds = p * (dp - Di);
            for (int e = 0; e < HS; e++) { dq[e] += ds * scale * (float)k[e]; }
            pe_bias_backward_warp(&pb, &acc, PE_SIDE_ROW, &pr, j, ds, true);
        }
        floatX* dst = dqkv + ((size_t)b * T + i) * C3 + h * HS;
        for (int e = 0; e < HS; e++) { dst[e] = (floatX)dq[e]; }
    }
    pe_bias_flush(&pb, &acc, PE_SIDE_ROW, b, h, i, i < T, 0);
}

// attention_backward_kv_naive_kernel: one thread per key j: dk_j, dv_j and the column side of
// the bias gradient over the queries i >= j (needs D from the dq pass); the threads of a block
// walk the queries together, from the block's first key on (pe_bias_backward_warp)
template<class PE>
__global__ void attention_backward_kv_naive_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse,
                                                   const float* D, const PE pb, int T, int NH, int HS) {
    int b = blockIdx.z, h = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    int C = NH * HS, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)HS);
    PEGradOf<PE> acc = {};
    const floatX* k = qkv + ((size_t)b * T + min(j, T - 1)) * C3 + C + h * HS;
    const floatX* v = k + C;
    float dk[NAIVE_MAX_HS], dv[NAIVE_MAX_HS];
    for (int e = 0; e < HS; e++) { dk[e] = 0.0f; dv[e] = 0.0f; }
    for (int i = blockIdx.x * blockDim.x; i < T; i++) {
        bool valid = j <= i;
        float ds = 0.0f;
        PERowOf<PE> pr = pe_bias_row(&pb, b, h, i);
        if (valid) {
            const floatX* q = qkv + ((size_t)b * T + i) * C3 + h * HS;
            const floatX* g = dout + ((size_t)b * T + i) * C + h * HS;
            float dot = 0.0f, dp = 0.0f;
            for (int e = 0; e < HS; e++) { dot += (float)q[e] * (float)k[e]; dp += (float)g[e] * (float)v[e]; }
            float p = expf(dot * scale + pe_bias(&pb, &pr, j) - (lse[((size_t)b * NH + h) * T + i] - pr.shift));
            ds = p * (dp - D[((size_t)b * NH + h) * T + i]);
            for (int e = 0; e < HS; e++) { dv[e] += p * (float)g[e]; dk[e] += ds * scale * (float)q[e]; }
        }
        pe_bias_backward_warp(&pb, &acc, PE_SIDE_COL, &pr, min(j, T - 1), ds, valid);
    }
    if (j < T) {
        floatX* dst = dqkv + ((size_t)b * T + j) * C3 + h * HS;
        for (int e = 0; e < HS; e++) { dst[C + e] = (floatX)dk[e]; dst[2 * C + e] = (floatX)dv[e]; }
    }
    pe_bias_flush(&pb, &acc, PE_SIDE_COL, b, h, j, j < T, (b * NH + h) * gridDim.x + blockIdx.x);
}

static void attention_forward_naive(floatX* out, float* lse, const floatX* qkv, const PEBias& pb, int B, int T, int NH, int HS,
                                    cudaStream_t stream) {
    dim3 grid(CEIL_DIV(T, NAIVE_BLOCK), NH, B);
    attention_forward_naive_kernel<PEBias><<<grid, NAIVE_BLOCK, 0, stream>>>(out, lse, qkv, pb, T, NH, HS);
    cudaCheckLaunch("attention_forward_naive_kernel");
}

static void attention_backward_naive(floatX* dqkv, float* D, const floatX* dout, const floatX* qkv, const floatX* out, const float* lse,
                                     const PEBias& pb, int B, int T, int NH, int HS, cudaStream_t stream) {
    dim3 grid(CEIL_DIV(T, NAIVE_BLOCK), NH, B);
    attention_backward_q_naive_kernel<PEBias><<<grid, NAIVE_BLOCK, 0, stream>>>(dqkv, D, dout, qkv, out, lse, pb, T, NH, HS);
    cudaCheckLaunch("attention_backward_q_naive_kernel");
    attention_backward_kv_naive_kernel<PEBias><<<grid, NAIVE_BLOCK, 0, stream>>>(dqkv, dout, qkv, lse, D, pb, T, NH, HS);
    cudaCheckLaunch("attention_backward_kv_naive_kernel");
}

// what a case does: compare the kernels with the CPU reference, time them, or both
enum { CASE_CHECK = 1, CASE_TIME = 2 };

// one case: the version's kernels (fwd NULL: the trainer's attention of the layer) against
// the CPU reference and/or timed; returns the number of failures
static int run_case(AttnShape s, AttnForwardFn fwd, AttnBackwardFn bwd, int version, int what) {
    if (s.T < 1 || s.B < 1 || s.NH < 1 || !attention_head_size_supported(s.hs)) {
        fatal("bad shape T=%d B=%d NH=%d hs=%d (head sizes 32, 64, 128)", s.T, s.B, s.NH, s.hs);
    }
    AttnCase c;
    attn_case_setup(&c, s, 1);
    printf("attention_bias version %d, PE %s, %s: B=%d T=%d NH=%d hs=%d", version, pe_name(PE_ID), PRECISION_NAME, s.B, s.T, s.NH, s.hs);
    if (c.pos != NULL && c.model.config.rp_len > 0) { printf(", positions drawn from [0, %d)", c.model.config.rp_len); }
    else if (c.pos != NULL) { printf(", positions 0..T-1 as a table (the encoding's own, of no tokens)"); }
    printf("\n");
    int fails = 0;
    if (what & CASE_CHECK) {
        if (fwd != NULL) { attn_case_run(&c, fwd, bwd); } else { attn_case_run_layer(&c); }
        fails = attn_case_compare(&c, TOL_OUT, TOL_PE);
    }
    if (what & CASE_TIME) {
        GPT2* m = &c.model;
        PEBias pf, pbw;
        pe_bias_setup(&pf, m, 0, s.B, s.T, 0);
        pe_bias_setup(&pbw, m, 0, s.B, s.T, 1);
        float ms_f = time_ms([&]() {
            if (fwd == NULL) { pe_attention_forward(m, 0, m->acts.atty, m->acts.att_lse, m->acts.qkv, s.B, s.T); return; }
            fwd(m->acts.atty, m->acts.att_lse, m->acts.qkv, pf, s.B, s.T, s.NH, s.hs, ctx.stream);
        });
        float ms_b = time_ms([&]() {
            if (fwd == NULL) { pe_attention_backward(m, 0, m->gs.dbig, m->gs.dsmall, m->acts.qkv, m->acts.atty, m->acts.att_lse, s.B, s.T); return; }
            bwd(m->gs.dbig, m->gs.att_D, m->gs.dsmall, m->acts.qkv, m->acts.atty, m->acts.att_lse, pbw, s.B, s.T, s.NH, s.hs, ctx.stream);
        });
        // nominal causal flops: forward 2 products of T(T+1)/2 x hs per head, backward 5
        double pairs = (double)s.B * s.NH * s.T * (s.T + 1) / 2.0;
        printf("  forward  %8.3f ms  %6.2f TFLOP/s\n", ms_f, ms_f > 0 ? 4.0 * pairs * s.hs / (ms_f * 1e-3) / 1e12 : 0.0);
        printf("  backward %8.3f ms  %6.2f TFLOP/s\n", ms_b, ms_b > 0 ? 10.0 * pairs * s.hs / (ms_b * 1e-3) / 1e12 : 0.0);
    }
    attn_case_free(&c);
    return fails;
}

#if !defined(ENABLE_FP32)
// `launches`: threads per block and dynamic shared memory of the bf16 build's attention kernels
// as their launchers ask for them, one line per kernel and head size, for dev/cuda/resources.py
// (beside ptxas's report); txl's and shaw's own kernels in their builds (shaw's at its default
// k), instead of the tensor-core ones
template<int HS>
static void print_mma_launches() {
#if PE_IS(TXL)
    printf("txl_forward_kernel %d %d %zu\n", HS, ATT_BQ * HS / ATT_DPT, txl_forward_smem<HS>());
    printf("txl_backward_q_kernel %d %d %zu\n", HS, ATT_BQ * HS / ATT_DPT, txl_forward_smem<HS>());
    printf("txl_backward_kv_kernel %d %d %zu\n", HS, ATT_KV_BK * HS / ATT_DPT, txl_backward_kv_smem<HS>());
    printf("txl_backward_p_kernel %d %d %zu\n", HS, TXL_BLOCK * HS / ATT_DPT, txl_backward_p_smem<HS>());
#elif PE_IS(SHAW)
    printf("shaw_forward_kernel %d %d %zu\n", HS, ATT_BQ * HS / ATT_DPT, shaw_forward_smem<HS>(SHAW_DEFAULT_K + 1));
    printf("shaw_backward_q_kernel %d %d %zu\n", HS, ATT_BQ * HS / ATT_DPT, shaw_backward_q_smem<HS>(SHAW_DEFAULT_K + 1));
    printf("shaw_backward_kv_kernel %d %d %zu\n", HS, ATT_KV_BK * HS / ATT_DPT, shaw_backward_kv_smem<HS>(SHAW_DEFAULT_K + 1));
#else
    printf("attention_forward_mma_kernel %d %d %zu\n", HS, MMA_THREADS, mma_forward_smem<HS>());
    printf("attention_backward_q_mma_kernel %d %d %zu\n", HS, MMA_THREADS, mma_backward_q_smem<HS>());
    printf("attention_backward_kv_mma_kernel %d %d %zu\n", HS, MMA_THREADS, mma_backward_kv_smem<HS, PEBias>());
#endif
}
static int print_launches() {
    print_mma_launches<32>();
    print_mma_launches<64>();
    print_mma_launches<128>();
    print_dape_launches();
    return 0;
}
#endif

int main(int argc, char** argv) {
#if !defined(ENABLE_FP32)
    if (argc > 1 && strcmp(argv[1], "launches") == 0) { return print_launches(); }
#endif
    if (cuda_device_count() == 0) {
        printf("attention_bias: no CUDA device, skipped\n");
        return 0;
    }
    int check = argc > 1 && strcmp(argv[1], "check") == 0;
    int time_only = argc > 1 && strcmp(argv[1], "time") == 0;
    int version = check || time_only ? (sizeof(floatX) == 2 ? 3 : 2) : argc > 1 ? atoi(argv[1]) : 2;
    AttnForwardFn fwd;
    AttnBackwardFn bwd;
    switch (version) {
#if defined(PE_ATTENTION)
        case 1: case 2: case 3: fwd = NULL; bwd = NULL; break; // the encoding's own kernels
#else
        case 1: fwd = attention_forward_naive; bwd = attention_backward_naive; break;
        case 2: fwd = attention_forward_tiled<PEBias>; bwd = attention_backward_tiled<PEBias>; break;
#if !defined(ENABLE_FP32)
        case 3: fwd = attention_forward_mma<PEBias>; bwd = attention_backward_mma<PEBias>; break;
#endif
#endif
        default: fatal("unknown version %d (1: naive, 2: fp32 tiled, 3: tensor cores, bf16 builds)", version);
    }
    if (check || time_only) { fwd = NULL; bwd = NULL; } // the trainer's attention of a layer
    int fails = 0;
    if (check) {
        const AttnShape shapes[] = {{2, 200, 2, 64, 0}, {1, 1024, 1, 64, 0}, {1, 77, 2, 32, 300}, {1, 100, 1, 128, 0}};
        for (const AttnShape& s : shapes) { fails += run_case(s, fwd, bwd, version, CASE_CHECK); }
    } else {
        AttnShape s = {2, 1024, 12, 64, 0};
        if (argc > 2) { s.T = atoi(argv[2]); }
        if (argc > 3) { s.B = atoi(argv[3]); }
        if (argc > 4) { s.NH = atoi(argv[4]); }
        if (argc > 5) { s.hs = atoi(argv[5]); }
#if defined(CUDA_EMULATION)
        int timing = 0; // the emulation has no clock
#else
        int timing = CASE_TIME;
#endif
        fails = run_case(s, fwd, bwd, version, time_only ? CASE_TIME : CASE_CHECK | timing);
    }
    if (time_only) {
        printf("timed only, not checked\n");
        return 0;
    }
    printf("%s\n", fails == 0 ? "ok" : "FAILED");
    return fails == 0 ? 0 : 1;
}
