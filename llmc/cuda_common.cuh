/*
CUDA helpers shared by the CUDA trainer, its test and the dev/cuda kernels: the
precision switch (floatX), checked CUDA / cuBLAS calls that fail through fatal() with
one clear line, device allocations that are tracked (current and peak bytes, the
number the trainer reports as its memory), and the warp / block reductions the
kernels use.

Precision: built with -DENABLE_FP32 everything is fp32 (the build that is compared
tightly with the CPU path); otherwise (-DENABLE_BF16, the default) activations and
the weights the kernels read are bf16, with fp32 master weights, gradients and
optimizer state.
*/
#ifndef LLMC_CUDA_COMMON_CUH
#define LLMC_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include "utils.h"

// ----------------------------------------------------------------------------
// precision

#if defined(ENABLE_FP32)
typedef float floatX;
#define PRECISION_NAME "fp32"
#define CUBLAS_LOWP CUDA_R_32F
#else
#ifndef ENABLE_BF16
#define ENABLE_BF16
#endif
typedef __nv_bfloat16 floatX;
#define PRECISION_NAME "bf16"
#define CUBLAS_LOWP CUDA_R_16BF
#endif

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#define WARP_SIZE 32

// the dynamic shared memory of a block (the third launch parameter), 16-byte aligned
#if defined(CUDA_EMULATION)
#define DYNAMIC_SMEM EMU_DYNAMIC_SMEM
#else
extern __shared__ __align__(16) unsigned char dynamic_smem[];
#define DYNAMIC_SMEM dynamic_smem
#endif

// ----------------------------------------------------------------------------
// checked calls: every failure is one line naming the call and the place

static void cuda_check_(cudaError_t err, const char* what, const char* file, int line) {
    if (err != cudaSuccess) { fatal("CUDA error '%s' in %s (%s:%d)", cudaGetErrorString(err), what, file, line); }
}
#define cudaCheck(call) cuda_check_((call), #call, __FILE__, __LINE__)
// after every kernel launch: launch errors (bad configuration) surface here, at their kernel
#define cudaCheckLaunch(name) cuda_check_(cudaGetLastError(), name, __FILE__, __LINE__)

// the CUDA devices this process can use: 0 where there are none (cudaErrorNoDevice, or no
// NVIDIA driver installed at all, which the runtime reports as cudaErrorInsufficientDriver
// with driver version 0); any other failure, a driver older than the runtime among them,
// is fatal with the runtime's message
static int cuda_device_count(void) {
    int count = 0, driver = -1;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaErrorNoDevice) { return 0; }
    if (err == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0) { return 0; }
    cuda_check_(err, "cudaGetDeviceCount", __FILE__, __LINE__);
    return count;
}

static void cublas_check_(cublasStatus_t st, const char* what, const char* file, int line) {
    if (st != CUBLAS_STATUS_SUCCESS) { fatal("cuBLAS error %d in %s (%s:%d)", (int)st, what, file, line); }
}
#define cublasCheck(call) cublas_check_((call), #call, __FILE__, __LINE__)

// ----------------------------------------------------------------------------
// tracked device memory: every allocation of the model goes through here, so that
// the trainer can report its peak and an out-of-memory error names what and how much

#define CUDA_MAX_ALLOCS 128
typedef struct { void* ptr; size_t bytes; } CudaAlloc;
static CudaAlloc cuda_allocs[CUDA_MAX_ALLOCS];
static size_t cuda_bytes_now = 0;
static size_t cuda_bytes_peak = 0;

static void* cuda_malloc(size_t bytes, const char* what) {
    void* p = NULL;
    if (bytes == 0) { return NULL; }
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError(); // clear the sticky-free error state before asking for the numbers
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        fatal("out of GPU memory allocating %.1f MiB for %s (the model holds %.1f MiB; %.1f of %.1f MiB free on the device)",
              bytes / 1048576.0, what, cuda_bytes_now / 1048576.0, free_b / 1048576.0, total_b / 1048576.0);
    }
    cuda_check_(err, what, __FILE__, __LINE__);
    int slot = -1;
    for (int i = 0; i < CUDA_MAX_ALLOCS; i++) { if (cuda_allocs[i].ptr == NULL) { slot = i; break; } }
    if (slot < 0) { fatal("too many device allocations (raise CUDA_MAX_ALLOCS)"); }
    cuda_allocs[slot].ptr = p;
    cuda_allocs[slot].bytes = bytes;
    cuda_bytes_now += bytes;
    if (cuda_bytes_now > cuda_bytes_peak) { cuda_bytes_peak = cuda_bytes_now; }
    return p;
}

// frees a tracked allocation and clears the pointer (NULL is fine)
template<class T>
static void cuda_free(T** p) {
    if (*p == NULL) { return; }
    for (int i = 0; i < CUDA_MAX_ALLOCS; i++) {
        if (cuda_allocs[i].ptr == (void*)*p) {
            cuda_bytes_now -= cuda_allocs[i].bytes;
            cuda_allocs[i].ptr = NULL;
            cuda_allocs[i].bytes = 0;
            break;
        }
    }
    cudaCheck(cudaFree((void*)*p));
    *p = NULL;
}

// ----------------------------------------------------------------------------
// reductions

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) { v += __shfl_xor_sync(0xffffffffu, v, off); }
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) { v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off)); }
    return v;
}

// sum (or max) over the whole block, returned to every thread; every thread of the
// block must call it (it synchronizes). blockDim.x must be a multiple of 32.
template<bool IS_MAX>
__device__ float block_reduce(float v) {
    __shared__ float partial[32];
    __shared__ float result;
    int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, warps = blockDim.x / WARP_SIZE;
    v = IS_MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) { partial[warp] = v; }
    __syncthreads();
    if (warp == 0) {
        float w = lane < warps ? partial[lane] : (IS_MAX ? -INFINITY : 0.0f);
        w = IS_MAX ? warp_max(w) : warp_sum(w);
        if (lane == 0) { result = w; }
    }
    __syncthreads();
    return result;
}
__device__ __forceinline__ float block_sum(float v) { return block_reduce<false>(v); }
__device__ __forceinline__ float block_max(float v) { return block_reduce<true>(v); }

// exclusive prefix sum over the block of one value per thread, in thread order (the sum of
// the values of the threads before this one), and the block's total in *total; every
// thread must call it, once per kernel. blockDim.x must be a multiple of 32.
__device__ float block_exclusive_sum(float v, float* total) {
    __shared__ float warp_totals[32];
    int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, warps = blockDim.x / WARP_SIZE;
    float incl = v; // inclusive scan within the warp
    for (int off = 1; off < WARP_SIZE; off <<= 1) {
        float u = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) { incl += u; }
    }
    float excl = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) { excl = 0.0f; }
    if (lane == WARP_SIZE - 1) { warp_totals[warp] = incl; }
    __syncthreads();
    if (warp == 0) { // inclusive scan of the warps' totals
        float t = lane < warps ? warp_totals[lane] : 0.0f;
        for (int off = 1; off < WARP_SIZE; off <<= 1) {
            float u = __shfl_up_sync(0xffffffffu, t, off);
            if (lane >= off) { t += u; }
        }
        if (lane < warps) { warp_totals[lane] = t; }
    }
    __syncthreads();
    *total = warp_totals[warps - 1];
    return warp > 0 ? warp_totals[warp - 1] + excl : excl;
}

#endif // LLMC_CUDA_COMMON_CUH
