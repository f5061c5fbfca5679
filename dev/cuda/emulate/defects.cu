/*
Defects planted in small kernels and calls, one per case, each of which the emulation must
report (dev/cuda/emulate/defects.sh runs every case and expects its report; part of make
test-cuda-emulate). On a GPU these are races, undefined behaviour or failed calls that
compute-sanitizer or the runtime would report; the emulation reports them with one line
naming the kernel (or the API call), the block, the thread and the address.

  defects CASE      runs one case (it ends with the report and a nonzero exit)
  defects --list    the cases, each with the text its report must contain
  defects --clean   the kernels with none of these defects (the same patterns with their
                    barrier, __syncwarp() or atomics), which must run with no report

Built with the trainer (train_gpt2.cu, bf16) for the cases that go through its cuBLASLt
plans. The CASES table at the end lists them.
*/
#define TESTING
#include "../../../train_gpt2.cu"

// ----------------------------------------------------------------------------
// shared memory: races between warps, cp.async, memory never written in the block

// warp 0 writes, warp 1 reads what it wrote, with no barrier (read-after-write)
__global__ void defect_raw_kernel(float* out) {
    __shared__ float s[32];
    if (threadIdx.x < 32) { s[threadIdx.x] = (float)threadIdx.x; }
    if (threadIdx.x >= 32) { out[threadIdx.x] = s[threadIdx.x - 32]; }
}
// the same race with the reader first: warp 0 reads what warp 1 writes in the same interval
__global__ void defect_raw_reader_first_kernel(float* out) {
    __shared__ float s[64];
    s[threadIdx.x] = 0.0f;
    __syncthreads();
    if (threadIdx.x < 32) { out[threadIdx.x] = s[threadIdx.x + 32]; }
    if (threadIdx.x >= 32) { s[threadIdx.x] = (float)threadIdx.x; }
}
// two warps write the same word in one interval (write-after-write)
__global__ void defect_waw_kernel(float* out) {
    __shared__ float s[1];
    if (threadIdx.x % 32 == 0) { s[0] = (float)threadIdx.x; }
    __syncthreads();
    out[threadIdx.x] = s[0];
}
// warp 0 waits for its cp.async, warp 1 reads the data with no barrier after the wait
__global__ void defect_cp_async_other_warp_kernel(float* out, const float* in) {
    __shared__ __align__(16) float s[128];
    if (threadIdx.x < 32) { cp_async_16(&s[4 * threadIdx.x], &in[4 * threadIdx.x], 16); }
    cp_async_commit();
    cp_async_wait<0>();
    if (threadIdx.x >= 32) { out[threadIdx.x] = s[threadIdx.x - 32]; }
}
// a thread reads its cp.async destination before the wait that covers it
__global__ void defect_cp_async_early_kernel(float* out, const float* in) {
    __shared__ __align__(16) float s[128];
    cp_async_16(&s[4 * threadIdx.x], &in[4 * threadIdx.x], 16);
    cp_async_commit();
    out[threadIdx.x] = s[4 * threadIdx.x];
    cp_async_wait<0>();
}
// static shared memory that only block 0 writes: the other blocks read what no thread of
// theirs wrote (on a GPU, whatever the last block on that SM left)
__global__ void defect_stale_shared_kernel(float* out) {
    __shared__ float s[32];
    if (blockIdx.x == 0) { s[threadIdx.x] = 1.0f; }
    __syncthreads();
    out[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];
}
// dynamic shared memory read before any write
__global__ void defect_dynamic_unwritten_kernel(float* out) {
    float* s = (float*)DYNAMIC_SMEM;
    out[threadIdx.x] = s[threadIdx.x];
}
// dynamic shared memory beyond the launch's size
__global__ void defect_dynamic_overflow_kernel(float* out) {
    float* s = (float*)DYNAMIC_SMEM;
    s[threadIdx.x + 32] = 1.0f;
    out[threadIdx.x] = 0.0f;
}

// lanes of one warp: two lanes write one word with no __syncwarp() (write-after-write)
__global__ void defect_lane_waw_kernel(float* out) {
    __shared__ float s[32];
    s[threadIdx.x] = 0.0f;
    __syncthreads();
    if (threadIdx.x < 2) { s[0] = (float)threadIdx.x; }
    __syncthreads();
    out[threadIdx.x] = s[0];
}
// lane 1 reads what lane 0 wrote with no __syncwarp() (read-after-write)
__global__ void defect_lane_raw_kernel(float* out) {
    __shared__ float s[32];
    s[threadIdx.x] = (float)threadIdx.x;
    out[threadIdx.x] = s[threadIdx.x > 0 ? threadIdx.x - 1 : 0];
}
// lane 1 overwrites a word lane 0 read, with no __syncwarp() between (write-after-read)
__global__ void defect_lane_war_kernel(float* out) {
    __shared__ float s[32];
    s[threadIdx.x] = (float)threadIdx.x;
    __syncwarp();
    out[threadIdx.x] = s[(threadIdx.x + 1) % 32];
    s[threadIdx.x] = 0.0f;
}
// a shuffle orders no memory: lane 1 reads lane 0's write after a shuffle, with no __syncwarp()
__global__ void defect_lane_shuffle_kernel(float* out) {
    __shared__ float s[32];
    s[threadIdx.x] = (float)threadIdx.x;
    float v = __shfl_xor_sync(0xffffffffu, s[threadIdx.x], 1);
    out[threadIdx.x] = v + s[threadIdx.x > 0 ? threadIdx.x - 1 : 0];
}
// lane 1 reads the data of lane 0's cp.async after lane 0's wait, with no __syncwarp()
__global__ void defect_lane_cp_async_kernel(float* out, const float* in) {
    __shared__ __align__(16) float s[128];
    cp_async_16(&s[4 * threadIdx.x], &in[4 * threadIdx.x], 16);
    cp_async_commit();
    cp_async_wait<0>();
    out[threadIdx.x] = s[4 * (threadIdx.x > 0 ? threadIdx.x - 1 : 0)];
}

// ----------------------------------------------------------------------------
// warp collectives and barriers

// half the warp has exited when the other half shuffles with a full mask
__global__ void defect_shfl_exited_kernel(float* out) {
    if (threadIdx.x >= 16) { return; }
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (float)threadIdx.x, 1);
}
// the mask names lanes that wait at a barrier instead
__global__ void defect_shfl_absent_kernel(float* out) {
    float v = (float)threadIdx.x;
    if (threadIdx.x < 16) { v = __shfl_xor_sync(0xffffffffu, v, 1); }
    __syncthreads();
    out[threadIdx.x] = v;
}
// a lane calls with a mask that leaves it out
__global__ void defect_shfl_not_self_kernel(float* out) {
    out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, (float)threadIdx.x, 1);
}
// a lane shuffles from a lane outside the mask
__global__ void defect_shfl_source_kernel(float* out) {
    float v = (float)threadIdx.x;
    if (threadIdx.x < 16) { v = __shfl_xor_sync(0x0000ffffu, v, 16); }
    out[threadIdx.x] = v;
}
// __syncthreads() after a quarter of the block has returned
__global__ void defect_partial_barrier_kernel(float* out) {
    if (threadIdx.x >= 48) { return; }
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}
// __syncthreads() in divergent code: the block's warps wait at two different barriers
__global__ void defect_divergent_barrier_kernel(float* out) {
    if (threadIdx.x < 32) {
        out[threadIdx.x] = 1.0f;
        __syncthreads();
    } else {
        out[threadIdx.x] = 2.0f;
        __syncthreads();
    }
}

// ----------------------------------------------------------------------------
// global memory

__global__ void defect_write_kernel(float* p, int i) { if (threadIdx.x == 0) { p[i] = 1.0f; } }
__global__ void defect_read_kernel(float* out, const float* p, int i) { if (threadIdx.x == 0) { out[0] = p[i]; } }
// each block takes the next place with an atomic and writes its number there: no race, and
// the result is the order in which the blocks ran
__global__ void block_order_kernel(int* counter, int* order) {
    if (threadIdx.x == 0) { order[atomicAdd(counter, 1)] = (int)blockIdx.x; }
}
// every block writes the same word (write-after-write between blocks)
__global__ void defect_global_blocks_waw_kernel(float* out) {
    if (threadIdx.x == 0) { out[0] = (float)blockIdx.x; }
}
// each block shifts its neighbour's value into its own: a read of a word another block of
// the launch writes (read-after-write in one order of the blocks, write-after-read in the other)
__global__ void defect_global_blocks_shift_kernel(float* x) {
    if (threadIdx.x == 0) { x[blockIdx.x] = x[blockIdx.x + 1]; }
}
// warp 1 reads what warp 0 wrote to global memory with no __syncthreads() between
__global__ void defect_global_warps_raw_kernel(float* x) {
    if (threadIdx.x < 32) { x[threadIdx.x] = 1.0f; }
    else { x[threadIdx.x] = x[threadIdx.x - 32]; }
}
// warp 1 overwrites what warp 0 read, with no __syncthreads() between
__global__ void defect_global_warps_war_kernel(float* x, float* out) {
    if (threadIdx.x < 32) { out[threadIdx.x] = x[threadIdx.x + 32]; }
    else { x[threadIdx.x] = 2.0f; }
}

// ----------------------------------------------------------------------------
// the same patterns without their defect: these must run with no report

// lanes exchange through shared memory with __syncwarp() between (a partial mask for two of
// them), and read each other's cp.async data after their waits and a __syncwarp()
__global__ void clean_lanes_kernel(float* out, const float* in) {
    __shared__ __align__(16) float s[160];
    s[threadIdx.x] = (float)threadIdx.x;
    __syncwarp();
    float v = s[(threadIdx.x + 31) % 32];
    __syncwarp();
    s[threadIdx.x] = v;
    if (threadIdx.x < 2) {
        if (threadIdx.x == 0) { s[32] = 1.0f; }
        __syncwarp(0x3u);
        v += s[32];
    }
    __syncwarp();
    cp_async_16(&s[32 + 4 * threadIdx.x], &in[4 * threadIdx.x], 16);
    cp_async_commit();
    cp_async_wait<0>();
    __syncwarp();
    out[threadIdx.x] = v + s[32 + (4 * threadIdx.x + 5) % 128];
}
// blocks add to one word with atomics and update their own words in place; warps exchange
// through global memory with a barrier between
__global__ void clean_global_kernel(float* sum, float* x, float* y) {
    atomicAdd(sum, 1.0f);
    float* mine = x + blockIdx.x * 64;
    mine[threadIdx.x] += 1.0f;
    __syncthreads();
    y[blockIdx.x * 64 + threadIdx.x] = mine[63 - threadIdx.x];
}

// ----------------------------------------------------------------------------
// the cases

static float* dev_floats(size_t n) {
    float* p;
    cudaCheck(cudaMalloc((void**)&p, n * sizeof(float)));
    cudaCheck(cudaMemset(p, 0, n * sizeof(float)));
    return p;
}

static void case_raw() { defect_raw_kernel<<<1, 64>>>(dev_floats(64)); cudaCheck(cudaDeviceSynchronize()); }
static void case_raw_reader_first() { defect_raw_reader_first_kernel<<<1, 64>>>(dev_floats(64)); cudaCheck(cudaDeviceSynchronize()); }
static void case_waw() { defect_waw_kernel<<<1, 64>>>(dev_floats(64)); cudaCheck(cudaDeviceSynchronize()); }
static void case_cp_async_other_warp() { defect_cp_async_other_warp_kernel<<<1, 64>>>(dev_floats(64), dev_floats(128)); cudaCheck(cudaDeviceSynchronize()); }
static void case_cp_async_early() { defect_cp_async_early_kernel<<<1, 32>>>(dev_floats(32), dev_floats(128)); cudaCheck(cudaDeviceSynchronize()); }
static void case_stale_shared() { defect_stale_shared_kernel<<<4, 32>>>(dev_floats(128)); cudaCheck(cudaDeviceSynchronize()); }
static void case_dynamic_unwritten() { defect_dynamic_unwritten_kernel<<<1, 32, 128>>>(dev_floats(32)); cudaCheck(cudaDeviceSynchronize()); }
static void case_dynamic_overflow() { defect_dynamic_overflow_kernel<<<1, 32, 128>>>(dev_floats(32)); cudaCheck(cudaDeviceSynchronize()); }
static void case_shfl_exited() { defect_shfl_exited_kernel<<<1, 32>>>(dev_floats(32)); cudaCheck(cudaDeviceSynchronize()); }
static void case_shfl_absent() { defect_shfl_absent_kernel<<<1, 32>>>(dev_floats(32)); cudaCheck(cudaDeviceSynchronize()); }
static void case_shfl_not_self() { defect_shfl_not_self_kernel<<<1, 32>>>(dev_floats(32)); cudaCheck(cudaDeviceSynchronize()); }
static void case_shfl_source() { defect_shfl_source_kernel<<<1, 32>>>(dev_floats(32)); cudaCheck(cudaDeviceSynchronize()); }
static void case_partial_barrier() { defect_partial_barrier_kernel<<<1, 64>>>(dev_floats(64)); cudaCheck(cudaDeviceSynchronize()); }
static void case_divergent_barrier() { defect_divergent_barrier_kernel<<<1, 64>>>(dev_floats(64)); cudaCheck(cudaDeviceSynchronize()); }
static void case_lane_waw() { defect_lane_waw_kernel<<<1, 32>>>(dev_floats(32)); cudaCheck(cudaDeviceSynchronize()); }
static void case_lane_raw() { defect_lane_raw_kernel<<<1, 32>>>(dev_floats(32)); cudaCheck(cudaDeviceSynchronize()); }
static void case_lane_war() { defect_lane_war_kernel<<<1, 32>>>(dev_floats(32)); cudaCheck(cudaDeviceSynchronize()); }
static void case_lane_shuffle() { defect_lane_shuffle_kernel<<<1, 32>>>(dev_floats(32)); cudaCheck(cudaDeviceSynchronize()); }
static void case_lane_cp_async() { defect_lane_cp_async_kernel<<<1, 32>>>(dev_floats(32), dev_floats(128)); cudaCheck(cudaDeviceSynchronize()); }
static void case_global_blocks_waw() { defect_global_blocks_waw_kernel<<<8, 32>>>(dev_floats(1)); cudaCheck(cudaDeviceSynchronize()); }
static void case_global_blocks_shift() { defect_global_blocks_shift_kernel<<<64, 32>>>(dev_floats(65)); cudaCheck(cudaDeviceSynchronize()); }
static void case_global_warps_raw() { defect_global_warps_raw_kernel<<<1, 64>>>(dev_floats(64)); cudaCheck(cudaDeviceSynchronize()); }
static void case_global_warps_war() { defect_global_warps_war_kernel<<<1, 64>>>(dev_floats(64), dev_floats(32)); cudaCheck(cudaDeviceSynchronize()); }
static void clean_lanes() { clean_lanes_kernel<<<1, 32>>>(dev_floats(32), dev_floats(128)); cudaCheck(cudaDeviceSynchronize()); }
static void clean_global() { clean_global_kernel<<<16, 64>>>(dev_floats(1), dev_floats(16 * 64), dev_floats(16 * 64)); cudaCheck(cudaDeviceSynchronize()); }
static void case_global_past_end() { defect_write_kernel<<<1, 32>>>(dev_floats(100), 100); cudaCheck(cudaDeviceSynchronize()); }
static void case_global_before_start() { defect_read_kernel<<<1, 32>>>(dev_floats(1), dev_floats(100), -1); cudaCheck(cudaDeviceSynchronize()); }
static void case_use_after_free() {
    float* p = dev_floats(100);
    cudaCheck(cudaFree(p));
    defect_write_kernel<<<1, 32>>>(p, 0);
    cudaCheck(cudaDeviceSynchronize());
}
static void case_host_memory() {
    static float host[100];
    defect_write_kernel<<<1, 32>>>(host, 0);
    cudaCheck(cudaDeviceSynchronize());
}

// launch configurations the runtime refuses (cudaCheckLaunch turns them into one line)
static void case_grid_y() { defect_write_kernel<<<dim3(1, 65536), 32>>>(dev_floats(1), 0); cudaCheckLaunch("defect_write_kernel"); }
static void case_grid_x() { defect_write_kernel<<<dim3(2147483648u), 32>>>(dev_floats(1), 0); cudaCheckLaunch("defect_write_kernel"); }
static void case_zero_grid() { defect_write_kernel<<<0, 32>>>(dev_floats(1), 0); cudaCheckLaunch("defect_write_kernel"); }
static void case_block_1025() { defect_write_kernel<<<1, 1025>>>(dev_floats(1), 0); cudaCheckLaunch("defect_write_kernel"); }
static void case_smem_no_attribute() { defect_dynamic_unwritten_kernel<<<1, 32, 48 * 1024 + 16>>>(dev_floats(32)); cudaCheckLaunch("defect_dynamic_unwritten_kernel"); }
static void case_smem_attribute_too_big() {
    cudaCheck(cudaFuncSetAttribute(defect_dynamic_unwritten_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024));
}
// within the attribute, but with the kernel's static shared memory over the device's limit
__global__ void defect_static_and_dynamic_kernel(float* out) {
    __shared__ float s[8192]; // 32 KiB
    float* d = (float*)DYNAMIC_SMEM;
    s[threadIdx.x] = 1.0f;
    d[threadIdx.x] = s[threadIdx.x];
    out[threadIdx.x] = d[threadIdx.x];
}
static void case_smem_static_plus_dynamic() {
    size_t dyn = 200 * 1024;
    cudaCheck(cudaFuncSetAttribute(defect_static_and_dynamic_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn));
    defect_static_and_dynamic_kernel<<<1, 32, dyn>>>(dev_floats(32));
    cudaCheckLaunch("defect_static_and_dynamic_kernel");
    cudaCheck(cudaDeviceSynchronize());
}

// copies: their kind, their bounds
static void case_copy_kind() {
    float host[16] = {};
    cudaCheck(cudaMemcpy(host, host + 8, 8 * sizeof(float), cudaMemcpyHostToDevice));
}
static void case_copy_bounds() {
    float* d = dev_floats(100);
    float host[200];
    cudaCheck(cudaMemcpy(host, d, sizeof(host), cudaMemcpyDeviceToHost));
}
static void case_memset_bounds() { cudaCheck(cudaMemset(dev_floats(100), 0, 101 * sizeof(float))); }

// streams: the host reads a queued copy's destination, or writes its source, before the
// stream is synchronized; the host dereferences a device pointer
// a pinned buffer of 4096 floats with a copy from or to it queued on a stream that the host
// has not synchronized
static float* queued_pinned_copy(cudaMemcpyKind kind) {
    cuda_context_init();
    size_t n = 4096;
    float* d = dev_floats(n);
    float* h;
    cudaCheck(cudaMallocHost((void**)&h, n * sizeof(float)));
    if (kind == cudaMemcpyDeviceToHost) { cudaCheck(cudaMemcpyAsync(h, d, n * sizeof(float), kind, ctx.stream)); }
    else { cudaCheck(cudaMemcpyAsync(d, h, n * sizeof(float), kind, ctx.stream)); }
    return h;
}
static void case_missing_sync_read() { printf("%f\n", queued_pinned_copy(cudaMemcpyDeviceToHost)[1024]); }
static void case_missing_sync_write() { queued_pinned_copy(cudaMemcpyHostToDevice)[1024] = 1.0f; }
static void case_host_deref() {
    float* d = dev_floats(16);
    printf("%f\n", d[3]);
}

// the order of blocks: prints the first blocks to run
static void case_block_order() {
    int* x;
    cudaCheck(cudaMalloc((void**)&x, 65 * sizeof(int)));
    cudaCheck(cudaMemset(x, 0, 65 * sizeof(int)));
    block_order_kernel<<<64, 32>>>(x, x + 1);
    int h[65];
    cudaCheck(cudaMemcpy(h, x, sizeof(h), cudaMemcpyDeviceToHost));
    printf("blocks ran in the order %d %d %d %d ...\n", h[1], h[2], h[3], h[4]);
    exit(0);
}

// cuBLASLt as strict as the library: its calls through the trainer's checks, and the
// trainer's own matmul (the plan's heuristic finds no algorithm)
struct LtCase {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulPreference_t pref;
    floatX *a, *b, *d, *bias;
};
static LtCase lt_case(int m, int n, int k) {
    cuda_context_init();
    LtCase c;
    cublasCheck(cublasLtMatmulDescCreate(&c.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasCheck(cublasLtMatrixLayoutCreate(&c.la, CUBLAS_LOWP, m, k, m));
    cublasCheck(cublasLtMatrixLayoutCreate(&c.lb, CUBLAS_LOWP, k, n, k));
    cublasCheck(cublasLtMatrixLayoutCreate(&c.ld, CUBLAS_LOWP, m, n, m));
    cublasCheck(cublasLtMatmulPreferenceCreate(&c.pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ctx.workspace_size, sizeof(ctx.workspace_size)));
    c.a = (floatX*)dev_floats(m * k + 64); c.b = (floatX*)dev_floats(k * n + 64); c.d = (floatX*)dev_floats(m * n + 64);
    c.bias = (floatX*)dev_floats(m + 64);
    return c;
}
static cublasLtMatmulAlgo_t lt_heuristic(LtCase& c) {
    cublasLtMatmulHeuristicResult_t r;
    int found = 0;
    cublasCheck(cublasLtMatmulAlgoGetHeuristic(ctx.lt, c.op, c.la, c.lb, c.ld, c.ld, c.pref, 1, &r, &found));
    if (found == 0) { fatal("no algorithm"); }
    return r.algo;
}
static void lt_matmul(LtCase& c, const cublasLtMatmulAlgo_t& algo, const floatX* a, size_t workspace) {
    float alpha = 1.0f, beta = 0.0f;
    cublasCheck(cublasLtMatmul(ctx.lt, c.op, &alpha, a, c.la, c.b, c.lb, &beta, c.d, c.ld, c.d, c.ld, &algo, ctx.workspace, workspace, ctx.stream));
    cudaCheck(cudaStreamSynchronize(ctx.stream));
}
static void case_lt_attribute_size() {
    LtCase c = lt_case(16, 16, 16);
    int ld = 16; // AUX_LD is an int64_t
    cublasCheck(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
}
static void case_lt_bias_pointer() {
    LtCase c = lt_case(16, 16, 16);
    cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
    cublasCheck(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)));
    lt_heuristic(c);
}
static void case_lt_types() {
    LtCase c = lt_case(16, 16, 16);
    cublasCheck(cublasLtMatrixLayoutDestroy(c.lb));
    cublasCheck(cublasLtMatrixLayoutCreate(&c.lb, CUDA_R_16F, 16, 16, 16));
    lt_heuristic(c);
}
static void case_lt_scale_type() {
    LtCase c = lt_case(16, 16, 16);
    cublasCheck(cublasLtMatmulDescDestroy(c.op));
    cublasCheck(cublasLtMatmulDescCreate(&c.op, CUBLAS_COMPUTE_32F, CUDA_R_16BF));
    lt_heuristic(c);
}
static void case_lt_alignment() {
    LtCase c = lt_case(16, 16, 16); // preferences: 256-byte alignment (the default)
    cublasLtMatmulAlgo_t algo = lt_heuristic(c);
    lt_matmul(c, algo, c.a + 8, ctx.workspace_size);
}
static void case_lt_bias_alignment() {
    LtCase c = lt_case(16, 16, 16);
    cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
    cublasCheck(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)));
    cublasCheck(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias, sizeof(c.bias)));
    cublasLtMatmulAlgo_t algo = lt_heuristic(c);
    floatX* moved = c.bias + 8; // a later call's bias, 16 bytes off
    cublasCheck(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &moved, sizeof(moved)));
    lt_matmul(c, algo, c.a, ctx.workspace_size);
}
static void case_lt_workspace() {
    LtCase c = lt_case(16, 16, 16);
    cublasLtMatmulAlgo_t algo = lt_heuristic(c);
    lt_matmul(c, algo, c.a, 1024);
}
static void case_lt_bounds() {
    LtCase c = lt_case(16, 16, 16);
    cublasLtMatrixLayoutDestroy(c.lb);
    cublasCheck(cublasLtMatrixLayoutCreate(&c.lb, CUBLAS_LOWP, 16, 256, 16));
    cublasCheck(cublasLtMatrixLayoutDestroy(c.ld));
    cublasCheck(cublasLtMatrixLayoutCreate(&c.ld, CUBLAS_LOWP, 16, 256, 16));
    lt_matmul(c, lt_heuristic(c), c.a, ctx.workspace_size);
}
// the trainer's GELU matmul with m = 12 rows: AUX_LD = 12 is no multiple of 8
static void case_lt_trainer_aux_ld() {
    cuda_context_init();
    floatX* x = (floatX*)dev_floats(1024);
    matmul_forward(x, x, x, NULL, 8, 16, 12, x + 512);
}

typedef struct { const char* name; void (*run)(void); const char* expect; } DefectCase;
static const DefectCase CASES[] = {
    {"raw", case_raw, "shared-memory race: read at shared address 0x0, which thread 0 (warp 0) wrote with no __syncthreads() between (read-after-write) (kernel defect_raw_kernel, block (0, 0, 0), thread (32, 0, 0))"},
    {"raw_reader_first", case_raw_reader_first, "shared-memory race: write at shared address 0x80, which thread 0 (warp 0) read with no __syncthreads() between (write-after-read) (kernel defect_raw_reader_first_kernel, block (0, 0, 0), thread (32, 0, 0))"},
    {"waw", case_waw, "shared-memory race: write at shared address 0x0, which thread 0 (warp 0) wrote with no __syncthreads() between (write-after-write) (kernel defect_waw_kernel, block (0, 0, 0), thread (32, 0, 0))"},
    {"cp_async_other_warp", case_cp_async_other_warp, "shared-memory race: read at shared address 0x0, which thread 0 (warp 0) wrote with no __syncthreads() between (read-after-write) (kernel defect_cp_async_other_warp_kernel, block (0, 0, 0), thread (32, 0, 0))"},
    {"cp_async_early", case_cp_async_early, "shared-memory read at shared address 0x0, the destination of a cp.async by thread 0 still in flight: before the cp.async.wait_group that covers it (kernel defect_cp_async_early_kernel, block (0, 0, 0), thread (0, 0, 0))"},
    {"stale_shared", case_stale_shared, "shared-memory read of 4 bytes at shared address 0x0 that no thread of this block has written before (never, or another warp later with no __syncthreads() between) (kernel defect_stale_shared_kernel, block (*, 0, 0), thread (0, 0, 0))"},
    {"dynamic_unwritten", case_dynamic_unwritten, "shared-memory read of 4 bytes at shared address 0x0 that no thread of this block has written before (never, or another warp later with no __syncthreads() between) (kernel defect_dynamic_unwritten_kernel, block (0, 0, 0), thread (0, 0, 0))"},
    {"dynamic_overflow", case_dynamic_overflow, "invalid shared write of 4 bytes at shared address 0x80: past the end of the block's 128 bytes of dynamic shared memory (kernel defect_dynamic_overflow_kernel, block (0, 0, 0), thread (0, 0, 0))"},
    {"shfl_exited", case_shfl_exited, "__shfl_xor_sync: its mask 0xffffffff names lane 16, which has exited (kernel defect_shfl_exited_kernel, block (0, 0, 0), thread (0, 0, 0))"},
    {"shfl_absent", case_shfl_absent, "__shfl_xor_sync: its mask 0xffffffff names lane 16, which waits at __syncthreads() instead (kernel defect_shfl_absent_kernel, block (0, 0, 0), thread (0, 0, 0))"},
    {"shfl_not_self", case_shfl_not_self, "__shfl_xor_sync with the mask 0x0000ffff, which does not name the calling lane 16 (kernel defect_shfl_not_self_kernel, block (0, 0, 0), thread (16, 0, 0))"},
    {"shfl_source", case_shfl_source, "__shfl_xor_sync reads lane 16, which is not in its mask 0x0000ffff (kernel defect_shfl_source_kernel, block (0, 0, 0), thread (0, 0, 0))"},
    {"partial_barrier", case_partial_barrier, "__syncthreads() reached by 48 of the block's 64 threads: thread 48 has exited (kernel defect_partial_barrier_kernel, block (0, 0, 0), thread (0, 0, 0))"},
    {"divergent_barrier", case_divergent_barrier, "__syncthreads() in divergent code: thread 0 waits at */defects.cu:*, thread 32 at */defects.cu:* (kernel defect_divergent_barrier_kernel, block (0, 0, 0), thread (0, 0, 0))"},
    {"lane_waw", case_lane_waw, "shared-memory race between lanes of warp 0: write at shared address 0x0, which thread 0 (lane 0) wrote with no __syncwarp() between (write-after-write) (kernel defect_lane_waw_kernel, block (0, 0, 0), thread (1, 0, 0))"},
    {"lane_raw", case_lane_raw, "shared-memory race between lanes of warp 0: read at shared address 0x0, which thread 0 (lane 0) wrote with no __syncwarp() between (read-after-write) (kernel defect_lane_raw_kernel, block (0, 0, 0), thread (1, 0, 0))"},
    {"lane_war", case_lane_war, "shared-memory race between lanes of warp 0: write at shared address 0x4, which thread 0 (lane 0) read with no __syncwarp() between (write-after-read) (kernel defect_lane_war_kernel, block (0, 0, 0), thread (1, 0, 0))"},
    {"lane_shuffle", case_lane_shuffle, "shared-memory race between lanes of warp 0: read at shared address 0x0, which thread 0 (lane 0) wrote with no __syncwarp() between (read-after-write) (kernel defect_lane_shuffle_kernel, block (0, 0, 0), thread (1, 0, 0))"},
    {"lane_cp_async", case_lane_cp_async, "shared-memory race between lanes of warp 0: read at shared address 0x0, which thread 0 (lane 0) wrote with no __syncwarp() between (read-after-write) (kernel defect_lane_cp_async_kernel, block (0, 0, 0), thread (1, 0, 0))"},
    {"global_blocks_waw", case_global_blocks_waw, "global-memory race: write at 0x*, which another block of this launch wrote (write-after-write; blocks run in any order) (kernel defect_global_blocks_waw_kernel, block (*, 0, 0), thread (0, 0, 0))"},
    {"global_blocks_shift", case_global_blocks_shift, "global-memory race: * at 0x*, which another block of this launch * (*; blocks run in any order) (kernel defect_global_blocks_shift_kernel, block (*, 0, 0), thread (0, 0, 0))"},
    {"global_warps_raw", case_global_warps_raw, "global-memory race: read at 0x*, which warp 0 of this block wrote with no __syncthreads() between (read-after-write) (kernel defect_global_warps_raw_kernel, block (0, 0, 0), thread (32, 0, 0))"},
    {"global_warps_war", case_global_warps_war, "global-memory race: write at 0x*, which another warp of this block read with no __syncthreads() between (write-after-read) (kernel defect_global_warps_war_kernel, block (0, 0, 0), thread (32, 0, 0))"},
    {"global_past_end", case_global_past_end, "invalid global write of 4 bytes at 0x*: 4 bytes past the end of an allocation of 400 bytes at 0x* (kernel defect_write_kernel, block (0, 0, 0), thread (0, 0, 0))"},
    {"global_before_start", case_global_before_start, "invalid global read of 4 bytes at 0x*: 4 bytes before the start of the nearest allocation, 400 bytes at 0x* (kernel defect_read_kernel, block (0, 0, 0), thread (0, 0, 0))"},
    {"use_after_free", case_use_after_free, "invalid global write of 4 bytes at 0x*: inside an allocation of 400 bytes at 0x* that was freed (kernel defect_write_kernel, block (0, 0, 0), thread (0, 0, 0))"},
    {"host_memory", case_host_memory, "invalid global write of 4 bytes at 0x*: host memory, not allocated by cudaMalloc (kernel defect_write_kernel, block (0, 0, 0), thread (0, 0, 0))"},
    {"grid_y", case_grid_y, "emu: defect_write_kernel: grid (1, 65536, 1) beyond the limits (2^31 - 1, 65535, 65535)"},
    {"grid_x", case_grid_x, "emu: defect_write_kernel: grid (2147483648, 1, 1) beyond the limits (2^31 - 1, 65535, 65535)"},
    {"zero_grid", case_zero_grid, "emu: defect_write_kernel: launch with a zero dimension: grid (0, 1, 1), block (32, 1, 1)"},
    {"block_1025", case_block_1025, "emu: defect_write_kernel: block (1025, 1, 1): more than 1024 threads (or z above 64)"},
    {"smem_no_attribute", case_smem_no_attribute, "emu: defect_dynamic_unwritten_kernel: 49168 bytes of dynamic shared memory, above the kernel's limit of 49152"},
    {"smem_attribute_too_big", case_smem_attribute_too_big, "emu: cudaFuncSetAttribute: 233472 bytes of dynamic shared memory: the sm_90 limit is 232448 bytes per block"},
    {"smem_static_plus_dynamic", case_smem_static_plus_dynamic, "32768 bytes of static and 204800 of dynamic shared memory: above sm_90's 232448 per block, the launch fails (kernel defect_static_and_dynamic_kernel, block (0, 0, 0), thread (0, 0, 0))"},
    {"copy_kind", case_copy_kind, "emu: cudaMemcpy: destination of 32 bytes at 0x* (host memory, not allocated by cudaMalloc) is not inside one device allocation, as cudaMemcpyHostToDevice needs"},
    {"copy_bounds", case_copy_bounds, "emu: cudaMemcpy: source of 800 bytes at 0x* (400 bytes past the end of an allocation of 400 bytes at 0x*) is not inside one device allocation"},
    {"memset_bounds", case_memset_bounds, "emu: cudaMemset: 404 bytes at 0x* are not inside one device allocation (4 bytes past the end of an allocation of 400 bytes at 0x*)"},
    {"missing_sync_read", case_missing_sync_read, "emu: host access to pinned memory at 0x* (inside an allocation of 16384 bytes at 0x*) that a cudaMemcpyAsync queued on its stream still writes"},
    {"missing_sync_write", case_missing_sync_write, "emu: host access to pinned memory at 0x* (inside an allocation of 16384 bytes at 0x*) that a cudaMemcpyAsync queued on its stream still reads"},
    {"host_deref", case_host_deref, "emu: host access to device memory at 0x* (inside an allocation of 64 bytes at 0x*): the host reaches device memory only through cudaMemcpy"},
    {"lt_attribute_size", case_lt_attribute_size, "emu: cublasLtMatmulDescSetAttribute: attribute 12 takes 8 bytes, not 4"},
    {"lt_bias_pointer", case_lt_bias_pointer, "emu: cublasLtMatmulAlgoGetHeuristic: no algorithm: a BIAS epilogue without a bias pointer"},
    {"lt_types", case_lt_types, "emu: cublasLtMatmulAlgoGetHeuristic: types A 14, B 2, C 14, D 14 are not in cublasLtMatmul's table"},
    {"lt_scale_type", case_lt_scale_type, "emu: cublasLtMatmulAlgoGetHeuristic: compute type 68 with scale type 14 is not in cublasLtMatmul's table"},
    {"lt_alignment", case_lt_alignment, "emu: cublasLtMatmul: A at 0x* is 16-byte aligned; the algorithm was chosen for 256-byte alignment"},
    {"lt_bias_alignment", case_lt_bias_alignment, "emu: cublasLtMatmul: the bias at 0x* is 16-byte aligned; the algorithm was chosen for 256-byte alignment"},
    {"lt_workspace", case_lt_workspace, "emu: cublasLtMatmul: workspace of 1024 bytes at 0x*: the algorithm needs 1048576 bytes of 256-byte aligned device memory"},
    {"lt_bounds", case_lt_bounds, "emu: cublasLtMatmul: B of 8192 bytes at 0x* is not inside one device allocation (6912 bytes past the end of an allocation of 1280 bytes at 0x*)"},
    {"lt_trainer_aux_ld", case_lt_trainer_aux_ld, "emu: cublasLtMatmulAlgoGetHeuristic: no algorithm: AUX_LD below D's rows or not a multiple of 8*cuBLASLt has no algorithm for m=12 n=8 k=16"},
};

// the patterns of the cases above done right: the emulation must report nothing
static const DefectCase CLEAN[] = {
    {"clean_lanes", clean_lanes, ""},
    {"clean_global", clean_global, ""},
};

int main(int argc, char** argv) {
    int n = (int)(sizeof(CASES) / sizeof(CASES[0]));
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < n; i++) { printf("%s\t%s\n", CASES[i].name, CASES[i].expect); }
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--clean") == 0) {
        for (const DefectCase& c : CLEAN) {
            c.run();
            printf("%s: no report\n", c.name);
        }
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "block_order") == 0) { case_block_order(); }
    for (int i = 0; argc == 2 && i < n; i++) {
        if (strcmp(argv[1], CASES[i].name) == 0) {
            CASES[i].run();
            cudaCheck(cudaDeviceSynchronize());
            fprintf(stderr, "defects: %s was not reported\n", CASES[i].name);
            return 0;
        }
    }
    fprintf(stderr, "usage: %s CASE | block_order | --list | --clean\n", argv[0]);
    return 2;
}
