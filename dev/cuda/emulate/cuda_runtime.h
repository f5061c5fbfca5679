/*
A stand-in for the CUDA runtime, enough to run the CUDA path (fp32 and bf16 builds) on a
CPU (dev/cuda/Makefile: make emulate PE=<name>, make -C ../.. test-cuda-emulate): device
memory is host memory, streams do nothing, and a kernel launch (rewritten by prepare.py
into emu_launch) runs every thread of a block as a fiber on one core.

Scheduling. The warps of a block run one after the other: every lane of warp 0 runs
until it reaches a warp-collective operation (a shuffle, mma, ldmatrix), the operation
is executed for the whole warp at once, at the moment the last lane arrives (so it reads
memory as the hardware does, before any lane goes on), and the lanes continue, until
all of them wait at __syncthreads() or have returned; then warp 1, and so on. A barrier
is released once every live thread of the block waits at it. So a warp reads what other
warps wrote only after a barrier: a missing __syncthreads() between a write and a read
by another warp shows up as the read of stale data (or of the poison below), and a
divergent barrier or collective is reported as a deadlock.

Poison: cudaMalloc'd memory starts as 0xff bytes (NaN in fp32 and bf16), the dynamic
shared memory of every block too, and the destination of a cp.async holds 0xff bytes
until the issuing thread waits for its group (mma.h). Reading data before it is there
turns results into NaN.

The fiber switch is a few instructions of x86-64 assembly (callee-saved registers and
the stack pointer), ucontext elsewhere. Slow (minutes for the debug-state model) but
exact in what the kernels compute and how they index, tile and synchronize.
*/
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <cmath>
#include <vector>
#include <functional>
#include <algorithm>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif
using std::min; using std::max;
#define CUDA_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
struct uint3 { unsigned x, y, z; };
struct float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static uint3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
enum { cudaErrorInsufficientDriver = 35 }; // the trainer's start-up names it (never returned here)
typedef void* cudaStream_t;
typedef void* cudaEvent_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyHostToHost };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
typedef int cudaDataType_t;
enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
struct cudaDeviceProp { char name[256]; int major, minor; size_t sharedMemPerBlockOptin; };
static inline const char* cudaGetErrorString(cudaError_t) { return "emulated error"; }
static inline cudaError_t cudaGetLastError() { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
static inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) { strcpy(p->name, "emulated"); p->major = 9; p->minor = 0; p->sharedMemPerBlockOptin = 227 * 1024; return cudaSuccess; }
static inline cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = nullptr; return cudaSuccess; }
static inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
static inline cudaError_t cudaMalloc(void** p, size_t n) { *p = malloc(n); memset(*p, 0xff, n); return cudaSuccess; } // NaN-filled
static inline cudaError_t cudaFree(void* p) { free(p); return cudaSuccess; }
static inline cudaError_t cudaMallocHost(void** p, size_t n) { *p = malloc(n); return *p != nullptr || n == 0 ? cudaSuccess : cudaErrorMemoryAllocation; }
static inline cudaError_t cudaFreeHost(void* p) { free(p); return cudaSuccess; }
static inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { memcpy(d, s, n); return cudaSuccess; }
static inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t) { memcpy(d, s, n); return cudaSuccess; }
static inline cudaError_t cudaMemset(void* d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
static inline cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t) { memset(d, v, n); return cudaSuccess; }
static inline cudaError_t cudaMemGetInfo(size_t* f, size_t* t) { *f = 1ull << 34; *t = 1ull << 35; return cudaSuccess; }
template<class T> static cudaError_t cudaMemcpyToSymbol(T& sym, const void* src, size_t n) { memcpy(&sym, src, n); return cudaSuccess; }
template<class F> static cudaError_t cudaFuncSetAttribute(F*, cudaFuncAttribute, int) { return cudaSuccess; }
// the emulation has no compiled image: a kernel's static shared memory is not counted, its
// code is sm_90's
struct cudaFuncAttributes { size_t sharedSizeBytes; int binaryVersion, ptxVersion; };
template<class F> static cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, F*) { *a = {0, 90, 90}; return cudaSuccess; }
static inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = nullptr; return cudaSuccess; }
static inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
static inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
static inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) { *ms = 0.0f; return cudaSuccess; }
// one core runs every thread: atomics are plain adds
template<class T> static inline T atomicAdd(T* a, T v) { T old = *a; *a += v; return old; }
[[noreturn]] static void emu_fail(const char* msg) { fprintf(stderr, "emu: %s (block %u %u %u, thread %u)\n", msg, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x); abort(); }

// ---- fibers: every CUDA thread of a block has its own stack; barriers and warp-collective
// operations switch back to the scheduler
#if defined(__x86_64__)
// emu_switch(save, load): saves the callee-saved registers on the current stack and its
// stack pointer in *save, then continues on the stack `load` (the System V ABI: the
// caller has saved everything else)
extern "C" void emu_switch(void** save, void* load);
asm(".text\n.globl emu_switch\n.type emu_switch,@function\nemu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n  ret\n"
    ".size emu_switch, .-emu_switch\n");
#endif

// what a lane hands to a warp-collective operation and gets back from it
struct EmuLane {
    void (*op)(EmuLane* const* lanes, int n); // the operation, the same in every lane
    const void* addr;                         // ldmatrix: this lane's row address
    uint32_t u[8];                            // mma: A (4) and B (2) registers; shuffle: the value's bits, the lane mask
    float f[4];                               // mma: C
    uint32_t out_u[4];                        // ldmatrix: the registers; shuffle: the result's bits
    float out_f[4];                           // mma: D
};
enum { F_READY, F_WAIT_BLOCK, F_WAIT_WARP, F_DONE };
struct EmuCopy { unsigned char* dst; unsigned char data[16]; int bytes; int group; }; // a pending cp.async
struct EmuFiber {
#if defined(__x86_64__)
    void* sp;
#else
    ucontext_t ctx;
#endif
    int state;
    EmuLane* lane;               // while in F_WAIT_WARP
    std::vector<EmuCopy> copies; // cp.async not yet waited for
    int committed;               // cp.async groups committed so far
};
#if defined(__x86_64__)
static void* emu_sched_sp;
#else
static ucontext_t emu_sched;
#endif
static std::vector<EmuFiber> emu_fibers;
static std::vector<char*> emu_stacks;
static int emu_cur;
static bool emu_in_fiber = false;
static const std::function<void()>* emu_fn;
static std::vector<unsigned char> emu_dynamic_smem_buf;
static unsigned char* emu_dynamic_smem;
#define EMU_STACK (256 * 1024)

static void emu_yield(int state) {
    EmuFiber& f = emu_fibers[emu_cur];
    f.state = state;
#if defined(__x86_64__)
    emu_switch(&f.sp, emu_sched_sp);
#else
    swapcontext(&f.ctx, &emu_sched);
#endif
}
static void emu_resume(int t) {
    emu_cur = t;
    threadIdx = {(unsigned)t, 0, 0};
#if defined(__x86_64__)
    emu_switch(&emu_sched_sp, emu_fibers[t].sp);
#else
    swapcontext(&emu_sched, &emu_fibers[t].ctx);
#endif
}
static void emu_fiber_main() {
    (*emu_fn)();
    emu_yield(F_DONE);
    abort(); // a finished fiber is never resumed
}
static void emu_fiber_start(int t) {
    EmuFiber& f = emu_fibers[t];
    f.state = F_READY; f.lane = nullptr; f.copies.clear(); f.committed = 0;
#if defined(__x86_64__)
    // the stack as emu_switch leaves it: six callee-saved registers, then the address it
    // returns to (emu_fiber_main, entered with the stack aligned as after a call)
    uintptr_t top = ((uintptr_t)(emu_stacks[t] + EMU_STACK)) & ~(uintptr_t)15;
    void** sp = (void**)top;
    *--sp = nullptr;                    // emu_fiber_main's return address (it never returns)
    *--sp = (void*)&emu_fiber_main;
    for (int r = 0; r < 6; r++) { *--sp = nullptr; }
    f.sp = sp;
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = emu_stacks[t]; f.ctx.uc_stack.ss_size = EMU_STACK; f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, emu_fiber_main, 0);
#endif
}

static inline void __syncthreads() {
    if (!emu_in_fiber) { emu_fail("barrier outside a kernel"); }
    emu_yield(F_WAIT_BLOCK);
}
// a warp-collective operation: waits until every live lane of the warp has arrived; the
// scheduler then runs lane->op once for the whole warp
static void emu_warp_collective(EmuLane* lane) {
    if (!emu_in_fiber) { emu_fail("warp-collective operation outside a kernel"); }
    emu_fibers[emu_cur].lane = lane;
    emu_yield(F_WAIT_WARP);
}
static void emu_shfl_xor_op(EmuLane* const* lanes, int n) {
    for (int l = 0; l < n; l++) {
        if (lanes[l] == nullptr) { continue; }
        int src = l ^ (int)lanes[l]->u[2];
        if (src >= n || lanes[src] == nullptr) { emu_fail("shuffle from a lane that has exited"); }
        lanes[l]->out_u[0] = lanes[src]->u[0];
        lanes[l]->out_u[1] = lanes[src]->u[1];
    }
}
// __shfl_up_sync: lanes below `delta` keep their own value
static void emu_shfl_up_op(EmuLane* const* lanes, int n) {
    for (int l = 0; l < n; l++) {
        if (lanes[l] == nullptr) { continue; }
        int src = l - (int)lanes[l]->u[2];
        if (src < 0) { src = l; }
        if (lanes[src] == nullptr) { emu_fail("shuffle from a lane that has exited"); }
        lanes[l]->out_u[0] = lanes[src]->u[0];
        lanes[l]->out_u[1] = lanes[src]->u[1];
    }
}
template<class T> static T emu_shuffle(void (*op)(EmuLane* const*, int), T v, int arg) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    EmuLane lane = {};
    lane.op = op;
    memcpy(lane.u, &v, sizeof(T));
    lane.u[2] = (uint32_t)arg;
    emu_warp_collective(&lane);
    T r;
    memcpy(&r, lane.out_u, sizeof(T));
    return r;
}
template<class T> static T __shfl_xor_sync(unsigned, T v, int off) { return emu_shuffle(emu_shfl_xor_op, v, off); }
// __syncwarp: every live lane of the warp arrives, nothing is exchanged
static void emu_syncwarp_op(EmuLane* const*, int) {}
static inline void __syncwarp(unsigned = 0xffffffffu) {
    EmuLane lane = {};
    lane.op = emu_syncwarp_op;
    emu_warp_collective(&lane);
}
template<class T> static T __shfl_up_sync(unsigned, T v, int delta) { return emu_shuffle(emu_shfl_up_op, v, delta); }

// runs the warp [w0, w1) of the current block until every lane waits at a barrier or
// has returned, executing its collective operations as they complete
static void emu_run_warp(unsigned w0, unsigned w1) {
    for (;;) {
        bool ran = false;
        for (unsigned t = w0; t < w1; t++) {
            if (emu_fibers[t].state == F_READY) { emu_resume(t); ran = true; }
        }
        int live = 0, at_warp = 0;
        for (unsigned t = w0; t < w1; t++) {
            int s = emu_fibers[t].state;
            live += s != F_DONE;
            at_warp += s == F_WAIT_WARP;
        }
        if (at_warp == 0) { return; }
        if (at_warp != live) {
            if (!ran) { emu_fail("deadlock: lanes of a warp wait at different barriers or collectives"); }
            continue;
        }
        EmuLane* lanes[32] = {};
        void (*op)(EmuLane* const*, int) = nullptr;
        for (unsigned t = w0; t < w1; t++) {
            if (emu_fibers[t].state != F_WAIT_WARP) { continue; }
            lanes[t - w0] = emu_fibers[t].lane;
            if (op == nullptr) { op = emu_fibers[t].lane->op; }
            else if (op != emu_fibers[t].lane->op) { emu_fail("lanes of a warp in different collective operations"); }
        }
        op(lanes, (int)(w1 - w0));
        for (unsigned t = w0; t < w1; t++) {
            if (emu_fibers[t].state == F_WAIT_WARP) { emu_fibers[t].state = F_READY; emu_fibers[t].lane = nullptr; }
        }
    }
}

static void emu_launch(const char* name, dim3 grid, dim3 block, size_t smem, const std::function<void()>& fn) {
    unsigned n = block.x * block.y * block.z;
    if (block.y != 1 || block.z != 1 || n > 1024 || n == 0) { fprintf(stderr, "emu: %s: unsupported block\n", name); abort(); }
    gridDim = grid; blockDim = block; emu_fn = &fn; emu_in_fiber = true;
    while (emu_stacks.size() < n) { emu_stacks.push_back((char*)malloc(EMU_STACK)); }
    emu_fibers.resize(std::max((size_t)n, emu_fibers.size()));
    if (emu_dynamic_smem_buf.size() < smem + 16) { emu_dynamic_smem_buf.resize(smem + 16); }
    emu_dynamic_smem = (unsigned char*)(((uintptr_t)emu_dynamic_smem_buf.data() + 15) & ~(uintptr_t)15);
    for (unsigned bz = 0; bz < grid.z; bz++) for (unsigned by = 0; by < grid.y; by++) for (unsigned bx = 0; bx < grid.x; bx++) {
        blockIdx = {bx, by, bz};
        memset(emu_dynamic_smem, 0xff, smem);
        for (unsigned t = 0; t < n; t++) { emu_fiber_start(t); }
        for (;;) {
            for (unsigned w0 = 0; w0 < n; w0 += 32) { emu_run_warp(w0, std::min(n, w0 + 32)); }
            int live = 0, at_barrier = 0;
            for (unsigned t = 0; t < n; t++) {
                int s = emu_fibers[t].state;
                live += s != F_DONE;
                at_barrier += s == F_WAIT_BLOCK;
            }
            if (live == 0) { break; }
            if (at_barrier != live) { fprintf(stderr, "emu: %s: deadlock in block %u %u %u\n", name, bx, by, bz); abort(); }
            for (unsigned t = 0; t < n; t++) { if (emu_fibers[t].state == F_WAIT_BLOCK) { emu_fibers[t].state = F_READY; } }
        }
    }
    emu_in_fiber = false;
}

// dynamic shared memory of the running block (the launch's third parameter)
#define EMU_DYNAMIC_SMEM emu_dynamic_smem

#include "mma.h"
