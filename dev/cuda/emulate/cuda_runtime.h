/*
A stand-in for the CUDA runtime, enough to run the CUDA path's fp32 build on a CPU
(dev/cuda/Makefile: make emulate PE=<name>): device memory is host memory, streams do
nothing, and a kernel launch (rewritten by prepare.py into emu_launch) runs every
thread of a block as a fiber (ucontext) on one core: __syncthreads and warp shuffles
switch back to a scheduler that releases a barrier once every live thread of the block
(or lanes of the warp) waits at it, and reports a divergent barrier as a deadlock.
Kernels without barriers run thread after thread, without fibers. Slow (minutes for
the debug-state model) but exact in what the kernels compute and how they index.
*/
#pragma once
#include <ucontext.h>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <cmath>
#include <vector>
#include <functional>
#include <algorithm>
using std::min; using std::max;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __shared__ static
#define __constant__
#define __align__(n) __attribute__((aligned(n)))
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
struct uint3 { unsigned x, y, z; };
struct float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
static inline float2 make_float2(float x, float y) { return {x, y}; }
static uint3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
typedef void* cudaStream_t;
typedef void* cudaEvent_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyHostToHost };
typedef int cudaDataType_t;
enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
struct cudaDeviceProp { char name[256]; int major, minor; size_t sharedMemPerBlockOptin; };
static inline const char* cudaGetErrorString(cudaError_t) { return "emulated error"; }
static inline cudaError_t cudaGetLastError() { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
static inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) { strcpy(p->name, "emulated"); p->major = 9; p->minor = 0; p->sharedMemPerBlockOptin = 227 * 1024; return cudaSuccess; }
// dynamic shared memory: one buffer, shared by the fibers of the block that runs (blocks run one after another)
static __attribute__((aligned(16))) char emu_dynamic_shared[227 * 1024];
#define DYNAMIC_SHARED(type, name) type* name = (type*)emu_dynamic_shared
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
template<class F> static cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }
static inline cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = nullptr; return cudaSuccess; }
static inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
static inline cudaError_t cudaMalloc(void** p, size_t n) { *p = malloc(n); memset(*p, 0xff, n); return cudaSuccess; } // NaN-filled
static inline cudaError_t cudaFree(void* p) { free(p); return cudaSuccess; }
static inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { memcpy(d, s, n); return cudaSuccess; }
static inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t) { memcpy(d, s, n); return cudaSuccess; }
static inline cudaError_t cudaMemset(void* d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
static inline cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t) { memset(d, v, n); return cudaSuccess; }
static inline cudaError_t cudaMemGetInfo(size_t* f, size_t* t) { *f = 1ull << 34; *t = 1ull << 35; return cudaSuccess; }
template<class T> static cudaError_t cudaMemcpyToSymbol(T& sym, const void* src, size_t n) { memcpy(&sym, src, n); return cudaSuccess; }
static inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = nullptr; return cudaSuccess; }
static inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
static inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
static inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) { *ms = 0.0f; return cudaSuccess; }
// one core runs every thread: atomics are plain adds
template<class T> static inline T atomicAdd(T* a, T v) { T old = *a; *a += v; return old; }

// ---- fibers: every CUDA thread of a block is a ucontext; barriers switch to the scheduler
enum { F_READY, F_WAIT_BLOCK, F_WAIT_WARP, F_DONE };
struct EmuFiber { ucontext_t ctx; int state; int shfl; };
static ucontext_t emu_sched;
static std::vector<EmuFiber> emu_fibers;
static std::vector<char*> emu_stacks;
static int emu_cur;
static bool emu_in_fiber = false;
static const std::function<void()>* emu_fn;
static double emu_slots[2][1024];
#define EMU_STACK (256 * 1024)
static void emu_entry() { (*emu_fn)(); emu_fibers[emu_cur].state = F_DONE; swapcontext(&emu_fibers[emu_cur].ctx, &emu_sched); }
static inline void __syncthreads() { if (!emu_in_fiber) { fprintf(stderr, "emu: barrier outside a fiber kernel\n"); abort(); } emu_fibers[emu_cur].state = F_WAIT_BLOCK; swapcontext(&emu_fibers[emu_cur].ctx, &emu_sched); }
template<class T> static T __shfl_xor_sync(unsigned, T v, int off) {
    if (!emu_in_fiber) { fprintf(stderr, "emu: shuffle outside a fiber kernel\n"); abort(); }
    int t = emu_cur, c = emu_fibers[t].shfl++ & 1;
    emu_slots[c][t] = (double)v;
    emu_fibers[t].state = F_WAIT_WARP;
    swapcontext(&emu_fibers[t].ctx, &emu_sched);
    return (T)emu_slots[c][t ^ off];
}
static void emu_launch(const char* name, dim3 grid, dim3 block, const std::function<void()>& fn) {
    unsigned n = block.x * block.y * block.z;
    // kernels without barriers or shuffles: every thread straight through, no fibers
    if (!strstr(name, "attention") && !strstr(name, "layernorm_forward") && !strstr(name, "layernorm_backward_kernel")
        && !strstr(name, "fused_classifier") && !strstr(name, "global_norm")) {
        gridDim = grid; blockDim = block;
        for (unsigned bz = 0; bz < grid.z; bz++) for (unsigned by = 0; by < grid.y; by++) for (unsigned bx = 0; bx < grid.x; bx++) {
            blockIdx = {bx, by, bz};
            for (unsigned t = 0; t < n; t++) { threadIdx = {t, 0, 0}; fn(); }
        }
        return;
    }
    if (block.y != 1 || block.z != 1 || n > 1024 || n == 0) { fprintf(stderr, "emu: unsupported block\n"); abort(); }
    gridDim = grid; blockDim = block; emu_fn = &fn; emu_in_fiber = true;
    while (emu_stacks.size() < n) { emu_stacks.push_back((char*)malloc(EMU_STACK)); }
    emu_fibers.resize(n);
    for (unsigned bz = 0; bz < grid.z; bz++) for (unsigned by = 0; by < grid.y; by++) for (unsigned bx = 0; bx < grid.x; bx++) {
        blockIdx = {bx, by, bz};
        for (unsigned t = 0; t < n; t++) {
            EmuFiber& f = emu_fibers[t];
            getcontext(&f.ctx);
            f.ctx.uc_stack.ss_sp = emu_stacks[t]; f.ctx.uc_stack.ss_size = EMU_STACK; f.ctx.uc_link = nullptr;
            makecontext(&f.ctx, emu_entry, 0);
            f.state = F_READY; f.shfl = 0;
        }
        for (;;) {
            bool any = false;
            for (unsigned t = 0; t < n; t++) {
                if (emu_fibers[t].state != F_READY) continue;
                any = true; emu_cur = t; threadIdx = {t, 0, 0};
                swapcontext(&emu_sched, &emu_fibers[t].ctx);
            }
            // warp barriers: all live lanes of a warp waiting
            bool released = false;
            for (unsigned w = 0; w * 32 < n; w++) {
                int waiting = 0, live = 0;
                for (unsigned t = w * 32; t < std::min(n, w * 32 + 32); t++) { int s = emu_fibers[t].state; if (s != F_DONE) live++; if (s == F_WAIT_WARP) waiting++; }
                if (live > 0 && waiting == live) { for (unsigned t = w * 32; t < std::min(n, w * 32 + 32); t++) if (emu_fibers[t].state == F_WAIT_WARP) emu_fibers[t].state = F_READY; released = true; }
            }
            int live = 0, wb = 0;
            for (unsigned t = 0; t < n; t++) { int s = emu_fibers[t].state; if (s != F_DONE) live++; if (s == F_WAIT_BLOCK) wb++; }
            if (live == 0) break;
            if (wb == live) { for (unsigned t = 0; t < n; t++) if (emu_fibers[t].state == F_WAIT_BLOCK) emu_fibers[t].state = F_READY; released = true; }
            if (!any && !released) { fprintf(stderr, "emu: deadlock (divergent barrier) in block %u %u %u\n", bx, by, bz); abort(); }
        }
    }
    emu_in_fiber = false;
}
