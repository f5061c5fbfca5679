/*
A stand-in for the CUDA runtime that runs the CUDA path on a CPU (dev/cuda/Makefile: make
emulate PE=<name>; make -C ../.. test-cuda-emulate), as strict as the real runtime and
compute-sanitizer: what would fail or be undefined on a GPU is reported, with one line on
stderr beginning "emu:" and a nonzero exit, naming the kernel (or the API call), the block,
the thread and the address, as racecheck, synccheck and memcheck would.

This file: the CUDA language surface (built-in variables, qualifiers), device memory, the
runtime API with its streams, and the reports. emu_kernel.h runs the kernels (threads as
fibers, warp-collective operations, barriers, shared memory and its checks), mma.h the
tensor-core and asynchronous-copy instructions, cublasLt.h the matmuls.

Device memory. cudaMalloc hands out pages of one reserved range of addresses, each
allocation followed by unmapped guard pages, addresses never reused; a new allocation
holds 0xff bytes (NaN in fp32 and bf16). Outside device work (copies, memsets, kernels,
cuBLASLt) device pages are not even readable, so host code that dereferences a device
pointer is reported. Copies check their kind and that they stay inside one allocation.
Kernels are compiled with -fsanitize=kernel-address, whose hooks (emu_kernel.h) see every
load and store of a kernel: global accesses must lie inside a live allocation (device
memory, or pinned host memory as the GPU reaches it), the thread's own stack is its local
memory, __constant__ memory is read-only, anything else is host memory and reported.

Streams. Launches, asynchronous copies and memsets, cuBLASLt calls and event records are
queued per stream and run only when the host waits for them (cudaStreamSynchronize,
cudaEventSynchronize, cudaDeviceSynchronize, a synchronous cudaMemcpy, cudaFree), with
the legacy default stream's ordering (it waits for every blocking stream, and they for
it). So a missing synchronization shows: a queued copy into pinned memory has not
happened, and its pages are unreadable until it has (the host's read is reported); the
pinned source of a queued copy is read-only until the copy has run. Copies to or from
pageable host memory behave as the runtime documents (the source is staged at the call;
a copy to pageable memory waits for its stream).

Launch configuration as the runtime checks it: more than 1024 threads per block, grid.y
or grid.z above 65535, grid.x above 2^31 - 1, a zero dimension (cudaErrorInvalidConfiguration);
dynamic shared memory above 48 KiB without cudaFuncSetAttribute, or above the device's
opt-in limit minus the kernel's static shared memory (cudaErrorInvalidValue). Blocks run
one after another in a seeded random order (EMU_BLOCK_ORDER=random (default), forward or
reverse; EMU_SEED, default 1), so that a result that depends on the order of blocks shows.

The device: EMU_ARCH=sm_90 (default: 227 KiB of shared memory per block at most) or sm_80
(163 KiB). EMU_DEVICES=1 (default), 0 (cudaGetDeviceCount fails with cudaErrorNoDevice),
no-driver (cudaErrorInsufficientDriver, cudaDriverGetVersion gives 0: no driver installed)
or old-driver (cudaErrorInsufficientDriver with a driver older than the runtime): how the
programs handle a machine without a usable GPU.
*/
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <cstdarg>
#include <cmath>
#include <vector>
#include <deque>
#include <algorithm>
#include <sys/mman.h>
#include <signal.h>
#include <unistd.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif
using std::min; using std::max;

// ----------------------------------------------------------------------------
// the language surface

#define CUDA_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
// the emulation's own code: never instrumented (only the kernels' accesses are checked)
#define EMU_NOCHECK __attribute__((no_sanitize_address))
// what kernels may read besides device, shared and local memory: the built-in variables
// and __constant__ memory, each in a section of its own (read-only for kernels)
#define EMU_BUILTIN __attribute__((section("emu_builtin")))
#define __constant__ __attribute__((section("emu_constant")))
extern "C" char __start_emu_builtin[] __attribute__((weak)), __stop_emu_builtin[] __attribute__((weak));
extern "C" char __start_emu_constant[] __attribute__((weak)), __stop_emu_constant[] __attribute__((weak));

struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
struct uint3 { unsigned x, y, z; };
struct float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static uint3 threadIdx EMU_BUILTIN, blockIdx EMU_BUILTIN;
static dim3 blockDim EMU_BUILTIN, gridDim EMU_BUILTIN;
static unsigned char* emu_dynamic_smem EMU_BUILTIN; // the block's dynamic shared memory
#define EMU_DYNAMIC_SMEM emu_dynamic_smem

// the runtime's types, with the real headers' values (enums.cpp compares them)
enum cudaError {
    cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidSymbol = 13, cudaErrorInvalidDevicePointer = 17, cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInsufficientDriver = 35, cudaErrorNoDevice = 100, cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400, cudaErrorNotReady = 600,
};
typedef cudaError cudaError_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
struct EmuStream;
struct EmuEvent;
typedef EmuStream* cudaStream_t;
typedef EmuEvent* cudaEvent_t;
struct cudaDeviceProp { char name[256]; int major, minor; size_t sharedMemPerBlock, sharedMemPerBlockOptin; int maxThreadsPerBlock; };

// ----------------------------------------------------------------------------
// the emulation's own data: a growable array of plain structs whose accessors are
// EMU_NOCHECK and inline (g++ keeps instrumented library functions out of line in
// EMU_NOCHECK code, where they would count as the kernel's accesses)

template<class T> struct EmuVec {
    T* p = nullptr;
    size_t n = 0, cap = 0;
    EMU_NOCHECK T& operator[](size_t i) { return p[i]; }
    EMU_NOCHECK T* begin() { return p; }
    EMU_NOCHECK T* end() { return p + n; }
    EMU_NOCHECK size_t size() const { return n; }
    EMU_NOCHECK T& back() { return p[n - 1]; }
    EMU_NOCHECK void clear() { n = 0; }
    EMU_NOCHECK void resize(size_t m) {
        if (m > cap) { cap = max(m, 2 * cap); p = (T*)realloc((void*)p, cap * sizeof(T)); }
        if (m > n) { memset((void*)(p + n), 0, (m - n) * sizeof(T)); }
        n = m;
    }
    EMU_NOCHECK void push_back(const T& x) { resize(n + 1); p[n - 1] = x; }
};

// a kernel's thread is running (the access hooks check its loads and stores; a report
// turns them off, its library calls are not the kernel's), and its stack
struct EmuRunning { int active; uintptr_t stack_lo; };
static EmuRunning emu_k = {0, 0};

// ----------------------------------------------------------------------------
// the emulated device (environment) and the reports

struct EmuConfig {
    int devices;      // EMU_DEVICES: 1 one device, 0 none, -1 no driver installed, -2 a driver older than the runtime
    int sm;           // EMU_ARCH: 80 or 90
    int block_order;  // EMU_BLOCK_ORDER: 0 random, 1 forward, 2 reverse
    uint64_t seed;    // EMU_SEED
};
[[noreturn]] EMU_NOCHECK static void emu_exit() { fflush(stdout); fflush(stderr); _exit(1); }
EMU_NOCHECK static const EmuConfig& emu_config() {
    static EmuConfig c;
    static bool read = false;
    if (!read) {
        read = true;
        const char* d = getenv("EMU_DEVICES");
        const char* a = getenv("EMU_ARCH");
        const char* o = getenv("EMU_BLOCK_ORDER");
        const char* s = getenv("EMU_SEED");
        c.devices = !d || !strcmp(d, "1") ? 1 : !strcmp(d, "0") ? 0 : !strcmp(d, "no-driver") ? -1 : !strcmp(d, "old-driver") ? -2 : 9;
        c.sm = !a || !strcmp(a, "sm_90") ? 90 : !strcmp(a, "sm_80") ? 80 : 0;
        c.block_order = !o || !strcmp(o, "random") ? 0 : !strcmp(o, "forward") ? 1 : !strcmp(o, "reverse") ? 2 : 9;
        c.seed = s ? strtoull(s, nullptr, 10) : 1;
        if (c.devices == 9 || c.sm == 0 || c.block_order == 9) {
            fprintf(stderr, "emu: EMU_DEVICES must be 1, 0, no-driver or old-driver; EMU_ARCH sm_90 or sm_80; EMU_BLOCK_ORDER random, forward or reverse\n");
            emu_exit();
        }
    }
    return c;
}
EMU_NOCHECK static size_t emu_smem_optin() { return emu_config().sm == 90 ? 227 * 1024 : 163 * 1024; }

// the kernel being run and its thread: the context of a report
struct EmuContext {
    const char* kernel;  // NULL outside kernels
    int thread;          // -1 in the scheduler (a report names its thread itself)
};
static EmuContext emu_ctx = {nullptr, -1};

// one line on stderr and exit: "emu: <what> (kernel K, block (x, y, z), thread (t, 0, 0))"
[[noreturn]] EMU_NOCHECK static void emu_vreport(int thread, const char* fmt, va_list ap) {
    emu_k.active = 0;
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (emu_ctx.kernel != nullptr) {
        fprintf(stderr, "emu: %s (kernel %s, block (%u, %u, %u), thread (%d, 0, 0))\n", msg, emu_ctx.kernel,
                blockIdx.x, blockIdx.y, blockIdx.z, thread);
    } else {
        fprintf(stderr, "emu: %s\n", msg);
    }
    emu_exit();
}
// a defect in the running kernel, by its current thread (or outside kernels)
[[noreturn]] EMU_NOCHECK static void emu_fail(const char* fmt, ...) {
    va_list ap; va_start(ap, fmt); emu_vreport(emu_ctx.thread, fmt, ap);
}
// a defect found by the scheduler, naming the thread
[[noreturn]] EMU_NOCHECK static void emu_fail_thread(int thread, const char* fmt, ...) {
    va_list ap; va_start(ap, fmt); emu_vreport(thread, fmt, ap);
}
// a rejected API call: the explanation on stderr, and the error code the real library returns
EMU_NOCHECK static void emu_api_note(const char* api, const char* fmt, ...) {
    char msg[1024];
    va_list ap; va_start(ap, fmt); vsnprintf(msg, sizeof(msg), fmt, ap); va_end(ap);
    fprintf(stderr, "emu: %s: %s\n", api, msg);
}

// ----------------------------------------------------------------------------
// device memory: one reserved range of addresses; allocations start on a page, are
// followed by guard pages, and are never reused, so that use after free shows

#define EMU_PAGE 4096ull
#define EMU_REGION (256ull << 30)
#define EMU_GUARD (16 * EMU_PAGE)
enum { EMU_DEVICE = 1, EMU_PINNED = 2 };
// race: per 2 bytes of the allocation, the last write and the last read of the running launch
// (emu_kernel.h: emu_global_race), made at a kernel's first access; race_launch: per page, the
// launch whose accesses race holds (older: none)
struct EmuAlloc { uintptr_t base; size_t bytes, span; int kind, live, guarded; uint32_t* race; uint32_t* race_launch; };
static EmuVec<EmuAlloc> emu_allocs;
static uintptr_t emu_region, emu_region_top;
static uint32_t* emu_page_owner;      // per page of the region: index + 1 of its allocation, 0 none
static bool emu_device_open = false;  // device pages readable and writable (device work running)
static size_t emu_device_bytes = 0;   // live device allocations
EMU_NOCHECK static void emu_segv(int, siginfo_t*, void*);

EMU_NOCHECK static void emu_region_init() {
    if (emu_region != 0) { return; }
    void* r = mmap(nullptr, EMU_REGION, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void* t = mmap(nullptr, EMU_REGION / EMU_PAGE * sizeof(uint32_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED || t == MAP_FAILED) { fprintf(stderr, "emu: cannot reserve address space for device memory\n"); emu_exit(); }
    emu_region = emu_region_top = (uintptr_t)r;
    emu_page_owner = (uint32_t*)t;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = emu_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, nullptr);
}

// the allocation that holds address a (its index), or -1
EMU_NOCHECK static int emu_alloc_index(uintptr_t a) {
    if (a - emu_region >= EMU_REGION || emu_region == 0) { return -1; }
    return (int)emu_page_owner[(a - emu_region) / EMU_PAGE] - 1;
}

EMU_NOCHECK static void* emu_alloc(size_t n, int kind) {
    emu_region_init();
    size_t span = (n + EMU_PAGE - 1) / EMU_PAGE * EMU_PAGE;
    if (emu_region_top + span + EMU_GUARD > emu_region + EMU_REGION) { return nullptr; }
    uintptr_t base = emu_region_top;
    emu_region_top += span + EMU_GUARD;
    mprotect((void*)base, span, PROT_READ | PROT_WRITE);
    memset((void*)base, 0xff, span);
    if (kind == EMU_DEVICE && !emu_device_open) { mprotect((void*)base, span, PROT_NONE); }
    emu_allocs.push_back({base, n, span, kind, 1, 0});
    for (uintptr_t p = base; p < base + span; p += EMU_PAGE) { emu_page_owner[(p - emu_region) / EMU_PAGE] = (uint32_t)emu_allocs.size(); }
    if (kind == EMU_DEVICE) { emu_device_bytes += n; }
    return (void*)base;
}

// opens device memory to the host's emulation code while device work runs, closes it after
EMU_NOCHECK static void emu_device_window(bool open) {
    if (open == emu_device_open) { return; }
    for (const EmuAlloc& a : emu_allocs) {
        if (a.live && a.kind == EMU_DEVICE) { mprotect((void*)a.base, a.span, open ? PROT_READ | PROT_WRITE : PROT_NONE); }
    }
    emu_device_open = open;
}

// where [a, a + n) lies, for reports: "12 bytes past the end of an allocation of 1024 bytes at 0x..."
EMU_NOCHECK static void emu_describe(uintptr_t a, size_t n, char* out, size_t len) {
    int i = emu_alloc_index(a);
    if (i >= 0 && !emu_allocs[i].live) {
        snprintf(out, len, "inside an allocation of %zu bytes at %p that was freed", emu_allocs[i].bytes, (void*)emu_allocs[i].base);
    } else if (i >= 0 && a + n > emu_allocs[i].base + emu_allocs[i].bytes) {
        const EmuAlloc& al = emu_allocs[i];
        snprintf(out, len, "%zu bytes past the end of an allocation of %zu bytes at %p", (size_t)(a + n - al.base - al.bytes), al.bytes, (void*)al.base);
    } else if (i >= 0) {
        snprintf(out, len, "inside an allocation of %zu bytes at %p", emu_allocs[i].bytes, (void*)emu_allocs[i].base);
    } else if (a - emu_region < EMU_REGION && emu_region != 0) {
        // a guard page: the nearest allocation, before or after it
        const EmuAlloc *before = nullptr, *after = nullptr;
        for (EmuAlloc& al : emu_allocs) {
            if (al.base <= a) { before = &al; } else if (after == nullptr) { after = &al; }
        }
        if (after != nullptr && (before == nullptr || after->base - a < a - before->base - before->bytes)) {
            snprintf(out, len, "%zu bytes before the start of the nearest allocation, %zu bytes at %p%s", (size_t)(after->base - a),
                     after->bytes, (void*)after->base, after->live ? "" : " (freed)");
        } else if (before != nullptr) {
            snprintf(out, len, "%zu bytes after the end of the nearest allocation, %zu bytes at %p%s", (size_t)(a - before->base - before->bytes),
                     before->bytes, (void*)before->base, before->live ? "" : " (freed)");
        } else {
            snprintf(out, len, "outside every allocation");
        }
    } else {
        snprintf(out, len, "host memory, not allocated by cudaMalloc");
    }
}

// [p, p + n) inside one live allocation of the given kinds (EMU_DEVICE | EMU_PINNED)?
EMU_NOCHECK static bool emu_inside(const void* p, size_t n, int kinds) {
    int i = emu_alloc_index((uintptr_t)p);
    if (i < 0) { return false; }
    const EmuAlloc& a = emu_allocs[i];
    return a.live && (a.kind & kinds) && (uintptr_t)p + n <= a.base + a.bytes;
}
// outside the device region entirely: ordinary (pageable) host memory
EMU_NOCHECK static bool emu_pageable(const void* p) { return emu_region == 0 || (uintptr_t)p - emu_region >= EMU_REGION; }

EMU_NOCHECK static void emu_global_race(EmuAlloc& al, uintptr_t a, size_t n, bool write, bool atomic);
// a kernel's global access: inside a live allocation, device memory or pinned host memory, and
// no race with another block or warp of the launch (emu_global_race)
EMU_NOCHECK static void emu_check_global(uintptr_t a, size_t n, bool write, bool atomic = false) {
    int i = emu_alloc_index(a);
    if (i >= 0 && emu_allocs[i].live && a + n <= emu_allocs[i].base + emu_allocs[i].bytes) { emu_global_race(emu_allocs[i], a, n, write, atomic); return; }
    emu_k.active = 0;
    char where[256];
    emu_describe(a, n, where, sizeof(where));
    emu_fail("invalid global %s of %zu bytes at %p: %s", write ? "write" : "read", n, (void*)a, where);
}

// ----------------------------------------------------------------------------
// the kernels (fibers, shared memory, warp-collective operations, barriers)

#include "emu_kernel.h"

// ----------------------------------------------------------------------------
// streams: work queued per stream, run when the host waits for it

struct EmuStream { int live; };
struct EmuEvent { int live, recorded, done; uint64_t seq; };
// one piece of queued device work; `host` is the pinned host memory it reads (HtoD) or
// writes (DtoH), guarded until it has run
struct EmuOp {
    EmuStream* stream;  // nullptr: the legacy default stream
    uint64_t seq;       // the order of queueing
    EmuCall run;
    const void* host;
    size_t host_bytes;
    int host_write;
};
static std::deque<EmuOp> emu_queue;
static uint64_t emu_queued = 0;
static cudaError_t emu_last_error = cudaSuccess; // the launch error cudaGetLastError returns

// the pinned pages of queued copies: read-only while a copy still reads them, unreadable
// while a copy will write them (only whole pages: a partial page stays open)
EMU_NOCHECK static void emu_guard_pinned(bool on) {
    for (EmuAlloc& a : emu_allocs) {
        if (a.kind == EMU_PINNED && a.live && a.guarded) { mprotect((void*)a.base, a.span, PROT_READ | PROT_WRITE); a.guarded = 0; }
    }
    if (!on) { return; }
    for (const EmuOp& op : emu_queue) {
        if (op.host == nullptr) { continue; }
        uintptr_t lo = ((uintptr_t)op.host + EMU_PAGE - 1) / EMU_PAGE * EMU_PAGE;
        uintptr_t hi = ((uintptr_t)op.host + op.host_bytes) / EMU_PAGE * EMU_PAGE;
        if (hi > lo) { mprotect((void*)lo, hi - lo, op.host_write ? PROT_NONE : PROT_READ); }
        emu_allocs[emu_alloc_index((uintptr_t)op.host)].guarded = 1;
    }
}

// runs the queued work up to and including emu_queue[target], with what it waits for:
// earlier work of its stream, and with the legacy default stream, every earlier op of the
// default stream for a blocking stream's op, and every earlier op for a default-stream op
EMU_NOCHECK static void emu_run_queue(long target) {
    if (target < 0) { return; }
    std::vector<char> need(target + 1, 0);
    std::vector<EmuStream*> streams;
    bool all_before = false, defaults_before = false; // every earlier op is needed; every earlier default-stream op
    for (long i = target; i >= 0; i--) {
        EmuStream* s = emu_queue[i].stream;
        bool n = all_before || i == target || std::find(streams.begin(), streams.end(), s) != streams.end() || (s == nullptr && defaults_before);
        if (!n) { continue; }
        need[i] = 1;
        if (std::find(streams.begin(), streams.end(), s) == streams.end()) { streams.push_back(s); }
        if (s == nullptr) { all_before = true; } else { defaults_before = true; }
    }
    std::vector<EmuOp> run;
    std::deque<EmuOp> keep;
    for (long i = 0; i < (long)emu_queue.size(); i++) {
        if (i <= target && need[i]) { run.push_back(emu_queue[i]); } else { keep.push_back(emu_queue[i]); }
    }
    emu_queue.swap(keep);
    emu_guard_pinned(false);
    emu_device_window(true);
    for (EmuOp& op : run) { op.run.call(op.run.obj); op.run.destroy(op.run.obj); }
    emu_device_window(false);
    emu_guard_pinned(true);
}
// the host waits for a stream's work (all of it: stream == EMU_ALL_STREAMS)
#define EMU_ALL_STREAMS ((EmuStream*)~(uintptr_t)0)
EMU_NOCHECK static void emu_sync(EmuStream* stream) {
    long target = -1;
    for (long i = 0; i < (long)emu_queue.size(); i++) {
        if (stream == EMU_ALL_STREAMS || emu_queue[i].stream == stream) { target = i; }
    }
    emu_run_queue(target);
}
// queues work on a stream; `host`: the pinned memory it reads or writes, guarded until it
// runs; returns its place in the order of queueing
template<class F>
EMU_NOCHECK static uint64_t emu_enqueue(EmuStream* stream, F&& fn, const void* host = nullptr, size_t host_bytes = 0, int host_write = 0) {
    emu_queue.push_back({stream, ++emu_queued, emu_call(std::forward<F>(fn)), host, host_bytes, host_write});
    if (host != nullptr) { emu_guard_pinned(true); }
    return emu_queued;
}

// the host touched memory it may not: a device page, or pinned memory a queued copy uses
EMU_NOCHECK static void emu_segv(int, siginfo_t* si, void*) {
    uintptr_t a = (uintptr_t)si->si_addr;
    if (emu_region == 0 || a - emu_region >= EMU_REGION) { signal(SIGSEGV, SIG_DFL); return; } // not ours: the default action
    int i = emu_alloc_index(a);
    char where[256];
    emu_describe(a, 1, where, sizeof(where));
    if (i >= 0 && emu_allocs[i].live && emu_allocs[i].kind == EMU_PINNED) {
        const char* use = "reads";
        for (const EmuOp& op : emu_queue) { if (op.host != nullptr && emu_alloc_index((uintptr_t)op.host) == i && op.host_write) { use = "writes"; } }
        fprintf(stderr, "emu: host access to pinned memory at %p (%s) that a cudaMemcpyAsync queued on its stream still %s: "
                "synchronize the stream (or an event after the copy) first\n", (void*)a, where, use);
    } else if (i >= 0 && emu_allocs[i].live) {
        fprintf(stderr, "emu: host access to device memory at %p (%s): the host reaches device memory only through cudaMemcpy\n", (void*)a, where);
    } else {
        fprintf(stderr, "emu: host access to %p: %s\n", (void*)a, where);
    }
    emu_exit();
}

// ----------------------------------------------------------------------------
// the runtime API

EMU_NOCHECK static const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorInvalidSymbol: return "invalid device symbol";
        case cudaErrorInvalidDevicePointer: return "invalid device pointer";
        case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
        case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
        case cudaErrorNoDevice: return "no CUDA-capable device is detected";
        case cudaErrorInvalidDevice: return "invalid device ordinal";
        case cudaErrorInvalidResourceHandle: return "invalid resource handle";
        case cudaErrorNotReady: return "device not ready";
    }
    return "unrecognized error code";
}
// without a usable device every call fails as cudaGetDeviceCount does
EMU_NOCHECK static cudaError_t emu_no_device() {
    int d = emu_config().devices;
    return d == 1 ? cudaSuccess : d == 0 ? cudaErrorNoDevice : cudaErrorInsufficientDriver;
}
EMU_NOCHECK static cudaError_t cudaGetDeviceCount(int* n) {
    if (emu_config().devices >= 0) { *n = emu_config().devices; }
    return emu_no_device();
}
EMU_NOCHECK static cudaError_t cudaDriverGetVersion(int* v) { *v = emu_config().devices == -1 ? 0 : emu_config().devices == -2 ? 12020 : 13000; return cudaSuccess; }
EMU_NOCHECK static cudaError_t cudaRuntimeGetVersion(int* v) { *v = 13000; return cudaSuccess; }
EMU_NOCHECK static cudaError_t cudaGetLastError() {
    cudaError_t e = emu_last_error;
    emu_last_error = cudaSuccess;
    return e != cudaSuccess ? e : emu_no_device();
}
EMU_NOCHECK static cudaError_t cudaSetDevice(int d) {
    if (emu_no_device() != cudaSuccess) { return emu_no_device(); }
    return d == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}
EMU_NOCHECK static cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
    if (emu_no_device() != cudaSuccess) { return emu_no_device(); }
    if (d != 0) { return cudaErrorInvalidDevice; }
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "emulated sm_%d", emu_config().sm);
    p->major = emu_config().sm / 10;
    p->minor = 0;
    p->sharedMemPerBlock = 48 * 1024;
    p->sharedMemPerBlockOptin = emu_smem_optin();
    p->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}
EMU_NOCHECK static cudaError_t cudaMemGetInfo(size_t* free_b, size_t* total_b) {
    *total_b = 80ull << 30;
    *free_b = *total_b - min(emu_device_bytes, *total_b);
    return emu_no_device();
}

static EmuVec<EmuStream*> emu_streams;
EMU_NOCHECK static bool emu_stream_ok(cudaStream_t s) { return s == nullptr || (std::find(emu_streams.begin(), emu_streams.end(), s) != emu_streams.end() && s->live); }
EMU_NOCHECK static cudaError_t cudaStreamCreate(cudaStream_t* s) {
    if (emu_no_device() != cudaSuccess) { return emu_no_device(); }
    *s = new EmuStream{1};
    emu_streams.push_back(*s);
    return cudaSuccess;
}
EMU_NOCHECK static cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (!emu_stream_ok(s)) { emu_api_note("cudaStreamSynchronize", "%p is not a live stream", (void*)s); return cudaErrorInvalidResourceHandle; }
    emu_sync(s);
    return cudaSuccess;
}
EMU_NOCHECK static cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (s == nullptr || !emu_stream_ok(s)) { emu_api_note("cudaStreamDestroy", "%p is not a live stream", (void*)s); return cudaErrorInvalidResourceHandle; }
    emu_sync(s); // its queued work completes first, as on the GPU
    s->live = 0;
    return cudaSuccess;
}
EMU_NOCHECK static cudaError_t cudaDeviceSynchronize() { emu_sync(EMU_ALL_STREAMS); return emu_no_device(); }

static EmuVec<EmuEvent*> emu_events; // every event made, live or destroyed
EMU_NOCHECK static cudaError_t cudaEventCreate(cudaEvent_t* e) {
    if (emu_no_device() != cudaSuccess) { return emu_no_device(); }
    *e = new EmuEvent{1, 0, 0, 0};
    emu_events.push_back(*e);
    return cudaSuccess;
}
EMU_NOCHECK static bool emu_event_ok(cudaEvent_t e) { return std::find(emu_events.begin(), emu_events.end(), e) != emu_events.end() && e->live; }
EMU_NOCHECK static cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!emu_event_ok(e) || !emu_stream_ok(s)) { emu_api_note("cudaEventRecord", "not a live event and stream"); return cudaErrorInvalidResourceHandle; }
    e->recorded = 1;
    e->done = 0;
    e->seq = emu_enqueue(s, [e]() EMU_NOCHECK { e->done = 1; });
    return cudaSuccess;
}
EMU_NOCHECK static cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!emu_event_ok(e)) { emu_api_note("cudaEventSynchronize", "not a live event"); return cudaErrorInvalidResourceHandle; }
    for (long i = 0; i < (long)emu_queue.size(); i++) {
        if (emu_queue[i].seq == e->seq) { emu_run_queue(i); break; }
    }
    return cudaSuccess;
}
EMU_NOCHECK static cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
    if (!emu_event_ok(a) || !emu_event_ok(b)) { emu_api_note("cudaEventElapsedTime", "not live events"); return cudaErrorInvalidResourceHandle; }
    if (!a->done || !b->done) { emu_api_note("cudaEventElapsedTime", "an event has not completed (synchronize it first)"); return cudaErrorNotReady; }
    *ms = 0.0f; // the emulation has no clock
    return cudaSuccess;
}
EMU_NOCHECK static cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!emu_event_ok(e)) { emu_api_note("cudaEventDestroy", "not a live event"); return cudaErrorInvalidResourceHandle; }
    e->live = 0;
    return cudaSuccess;
}

EMU_NOCHECK static cudaError_t cudaMalloc(void** p, size_t n) {
    if (emu_no_device() != cudaSuccess) { return emu_no_device(); }
    *p = nullptr;
    if (n == 0) { return cudaSuccess; }
    *p = emu_alloc(n, EMU_DEVICE);
    return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
EMU_NOCHECK static cudaError_t cudaMallocHost(void** p, size_t n) {
    if (emu_no_device() != cudaSuccess) { return emu_no_device(); }
    *p = n == 0 ? nullptr : emu_alloc(n, EMU_PINNED);
    return *p != nullptr || n == 0 ? cudaSuccess : cudaErrorMemoryAllocation;
}
// cudaFree and cudaFreeHost wait for all device work, as the runtime does
EMU_NOCHECK static cudaError_t emu_free(void* p, int kind, const char* api) {
    if (p == nullptr) { return cudaSuccess; }
    emu_sync(EMU_ALL_STREAMS);
    int i = emu_alloc_index((uintptr_t)p);
    if (i < 0 || emu_allocs[i].base != (uintptr_t)p || emu_allocs[i].kind != kind || !emu_allocs[i].live) {
        char where[256];
        emu_describe((uintptr_t)p, 1, where, sizeof(where));
        emu_api_note(api, "%p was not returned by %s or is freed already (%s)", p, kind == EMU_DEVICE ? "cudaMalloc" : "cudaMallocHost", where);
        return kind == EMU_DEVICE ? cudaErrorInvalidDevicePointer : cudaErrorInvalidValue;
    }
    EmuAlloc& a = emu_allocs[i];
    mprotect((void*)a.base, a.span, PROT_NONE);
    a.live = 0;
    if (a.race != nullptr) { munmap(a.race, a.span * 4); free(a.race_launch); a.race = a.race_launch = nullptr; }
    if (kind == EMU_DEVICE) { emu_device_bytes -= a.bytes; }
    return cudaSuccess;
}
EMU_NOCHECK static cudaError_t cudaFree(void* p) { return emu_free(p, EMU_DEVICE, "cudaFree"); }
EMU_NOCHECK static cudaError_t cudaFreeHost(void* p) { return emu_free(p, EMU_PINNED, "cudaFreeHost"); }

// checks a copy's kind against where its pointers lie, and its bounds
EMU_NOCHECK static cudaError_t emu_check_copy(const char* api, void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
    if (emu_no_device() != cudaSuccess) { return emu_no_device(); }
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDeviceToDevice) { emu_api_note(api, "copy kind %d is not one of the four directions", (int)kind); return cudaErrorInvalidMemcpyDirection; }
    if (n == 0) { return cudaSuccess; }
    const void* ends[2] = {dst, src};
    const char* names[2] = {"destination", "source"};
    bool device[2] = {kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice, kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice};
    for (int k = 0; k < 2; k++) {
        const char* kname = kind == cudaMemcpyHostToDevice ? "cudaMemcpyHostToDevice" : kind == cudaMemcpyDeviceToHost ? "cudaMemcpyDeviceToHost"
                          : kind == cudaMemcpyDeviceToDevice ? "cudaMemcpyDeviceToDevice" : "cudaMemcpyHostToHost";
        char where[256];
        emu_describe((uintptr_t)ends[k], n, where, sizeof(where));
        if (device[k] && !emu_inside(ends[k], n, EMU_DEVICE)) {
            emu_api_note(api, "%s of %zu bytes at %p (%s) is not inside one device allocation, as %s needs", names[k], n, ends[k], where, kname);
            return cudaErrorInvalidValue;
        }
        if (!device[k] && !emu_pageable(ends[k]) && !emu_inside(ends[k], n, EMU_PINNED)) {
            emu_api_note(api, "%s of %zu bytes at %p (%s) is not host memory, as %s needs", names[k], n, ends[k], where, kname);
            return cudaErrorInvalidValue;
        }
    }
    return cudaSuccess;
}
// the copy itself, as device work
EMU_NOCHECK static void emu_copy_now(void* dst, const void* src, size_t n) {
    bool open = emu_device_open;
    emu_device_window(true);
    memmove(dst, src, n);
    emu_device_window(open);
}
EMU_NOCHECK static cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
    cudaError_t e = emu_check_copy("cudaMemcpyAsync", dst, src, n, kind);
    if (e != cudaSuccess || n == 0) { return e; }
    if (!emu_stream_ok(s)) { emu_api_note("cudaMemcpyAsync", "%p is not a live stream", (void*)s); return cudaErrorInvalidResourceHandle; }
    bool to_host = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost;
    bool from_host = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost;
    if (to_host && emu_pageable(dst)) { // pageable destination: the copy waits for its stream
        emu_sync(s);
        emu_copy_now(dst, src, n);
        return cudaSuccess;
    }
    if (from_host && emu_pageable(src)) { // pageable source: staged at the call
        std::vector<unsigned char> staged((const unsigned char*)src, (const unsigned char*)src + n);
        emu_enqueue(s, [dst, staged]() EMU_NOCHECK { memcpy(dst, staged.data(), staged.size()); });
        return cudaSuccess;
    }
    const void* pinned = to_host ? dst : from_host ? src : nullptr;
    emu_enqueue(s, [dst, src, n]() EMU_NOCHECK { memmove(dst, src, n); }, pinned, n, to_host);
    return cudaSuccess;
}
// a synchronous copy: device to device is queued on the default stream; with host memory
// it waits for all device work first
EMU_NOCHECK static cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
    cudaError_t e = emu_check_copy("cudaMemcpy", dst, src, n, kind);
    if (e != cudaSuccess || n == 0) { return e; }
    if (kind == cudaMemcpyDeviceToDevice) { return cudaMemcpyAsync(dst, src, n, kind, nullptr); }
    emu_sync(EMU_ALL_STREAMS);
    emu_copy_now(dst, src, n);
    return cudaSuccess;
}
EMU_NOCHECK static cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t s) {
    if (emu_no_device() != cudaSuccess) { return emu_no_device(); }
    if (n == 0) { return cudaSuccess; }
    if (!emu_inside(p, n, EMU_DEVICE)) {
        char where[256];
        emu_describe((uintptr_t)p, n, where, sizeof(where));
        emu_api_note("cudaMemset", "%zu bytes at %p are not inside one device allocation (%s)", n, p, where);
        return cudaErrorInvalidValue;
    }
    if (!emu_stream_ok(s)) { emu_api_note("cudaMemsetAsync", "%p is not a live stream", (void*)s); return cudaErrorInvalidResourceHandle; }
    emu_enqueue(s, [p, v, n]() EMU_NOCHECK { memset(p, v, n); });
    return cudaSuccess;
}
EMU_NOCHECK static cudaError_t cudaMemset(void* p, int v, size_t n) { return cudaMemsetAsync(p, v, n, nullptr); }
template<class T>
EMU_NOCHECK static cudaError_t cudaMemcpyToSymbol(T& sym, const void* src, size_t n, size_t offset = 0) {
    if (emu_no_device() != cudaSuccess) { return emu_no_device(); }
    if ((char*)&sym < __start_emu_constant || (char*)&sym >= __stop_emu_constant) { emu_api_note("cudaMemcpyToSymbol", "the symbol is not __constant__"); return cudaErrorInvalidSymbol; }
    if (offset + n > sizeof(T)) { emu_api_note("cudaMemcpyToSymbol", "%zu bytes at offset %zu do not fit the symbol's %zu", n, offset, sizeof(T)); return cudaErrorInvalidValue; }
    emu_sync(EMU_ALL_STREAMS);
    memcpy((char*)&sym + offset, src, n);
    return cudaSuccess;
}

// dynamic shared memory a kernel may use (cudaFuncSetAttribute), and the static shared
// memory it was seen to declare, by kernel
struct EmuFuncSmem { const void* func; size_t dynamic_max, static_bytes; };
static EmuVec<EmuFuncSmem> emu_func_smem;
EMU_NOCHECK static EmuFuncSmem& emu_func(const void* f) {
    for (EmuFuncSmem& s : emu_func_smem) { if (s.func == f) { return s; } }
    emu_func_smem.push_back({f, 48 * 1024, 0});
    return emu_func_smem.back();
}
template<class F>
EMU_NOCHECK static cudaError_t cudaFuncSetAttribute(F* func, cudaFuncAttribute attr, int value) {
    if (emu_no_device() != cudaSuccess) { return emu_no_device(); }
    EmuFuncSmem& s = emu_func((const void*)func);
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) { emu_api_note("cudaFuncSetAttribute", "attribute %d is not emulated", (int)attr); return cudaErrorInvalidValue; }
    if (value < 0 || (size_t)value + s.static_bytes > emu_smem_optin()) {
        emu_api_note("cudaFuncSetAttribute", "%d bytes of dynamic shared memory: the sm_%d limit is %zu bytes per block, less the kernel's %zu of static shared memory",
                     value, emu_config().sm, emu_smem_optin(), s.static_bytes);
        return cudaErrorInvalidValue;
    }
    s.dynamic_max = (size_t)value;
    return cudaSuccess;
}

// a kernel's attributes: its static shared memory as the emulation has seen it declared (0
// before its first launch), its code the emulated architecture's
struct cudaFuncAttributes { size_t sharedSizeBytes; int binaryVersion, ptxVersion; };
template<class F>
EMU_NOCHECK static cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, F* func) {
    if (emu_no_device() != cudaSuccess) { return emu_no_device(); }
    EmuFuncSmem& s = emu_func((const void*)func);
    *a = {s.static_bytes, emu_config().sm, emu_config().sm};
    return cudaSuccess;
}

// a kernel launch (prepare.py rewrites name<<<grid, block, smem, stream>>>(args) into this,
// with the arguments evaluated at the launch): the configuration is checked now, as the
// runtime does (an error goes to cudaGetLastError), and the kernel is queued on its stream
template<class F>
EMU_NOCHECK static void emu_launch(const char* name, const void* func, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, F&& fn) {
    cudaError_t err = emu_no_device();
    uint64_t threads = (uint64_t)block.x * block.y * block.z;
    EmuFuncSmem& fs = emu_func(func);
    if (err != cudaSuccess) {
    } else if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0) {
        emu_api_note(name, "launch with a zero dimension: grid (%u, %u, %u), block (%u, %u, %u)", grid.x, grid.y, grid.z, block.x, block.y, block.z);
        err = cudaErrorInvalidConfiguration;
    } else if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        emu_api_note(name, "grid (%u, %u, %u) beyond the limits (2^31 - 1, 65535, 65535)", grid.x, grid.y, grid.z);
        err = cudaErrorInvalidConfiguration;
    } else if (threads > 1024 || block.z > 64) {
        emu_api_note(name, "block (%u, %u, %u): more than 1024 threads (or z above 64)", block.x, block.y, block.z);
        err = cudaErrorInvalidConfiguration;
    } else if (smem > fs.dynamic_max) {
        emu_api_note(name, "%zu bytes of dynamic shared memory, above the kernel's limit of %zu (48 KiB unless cudaFuncSetAttribute raised it)", smem, fs.dynamic_max);
        err = cudaErrorInvalidValue;
    } else if (smem + fs.static_bytes > emu_smem_optin()) {
        emu_api_note(name, "%zu bytes of dynamic and %zu of static shared memory, above sm_%d's %zu per block", smem, fs.static_bytes, emu_config().sm, emu_smem_optin());
        err = cudaErrorInvalidValue;
    } else if (!emu_stream_ok(stream)) {
        emu_api_note(name, "launch on %p, not a live stream", (void*)stream);
        err = cudaErrorInvalidResourceHandle;
    }
    if (err != cudaSuccess) { emu_last_error = err; return; }
    if (block.y != 1 || block.z != 1) { fprintf(stderr, "emu: %s: the emulation runs 1-D blocks only\n", name); emu_exit(); }
    EmuLaunch L = {name, func, grid, block.x, smem, emu_call(std::forward<F>(fn))};
    emu_enqueue(stream, [L]() EMU_NOCHECK {
        emu_run_kernel(L);
        EmuFuncSmem& s = emu_func(L.func);
        s.static_bytes = max(s.static_bytes, emu_static_bytes);
        L.body.destroy(L.body.obj);
    });
}

// atomics: blocks run one at a time, so an atomic is a checked plain operation
template<class T>
EMU_NOCHECK static T atomicAdd(T* a, T v) {
    emu_check_atomic((uintptr_t)a, sizeof(T));
    T old = *a;
    *a = old + v;
    return old;
}

// Planted sign flips (dev/cuda/emulate/trainers.sh): prepare.py puts a call of this at the end
// of the CUDA trainer's backward pass; with EMU_FLIP_GRAD naming parameter tensors (a comma-
// separated list), each one's gradient is negated there, as a sign error in the code that
// computes it would leave it (the whole-trainer comparison with the CPU path, tensor by tensor,
// must then fail on each of their lines: every gradient is complete here, so one flip changes
// no other tensor's); unset, nothing happens. grads: the fp32 gradients, offsets and sizes of
// the n tensors named by names.
static void emu_flip_gradient(float* grads, const size_t* offsets, const size_t* sizes, const char* const* names, int n) {
    const char* list = getenv("EMU_FLIP_GRAD");
    if (list == NULL) { return; }
    for (const char* name = list; *name != '\0';) {
        size_t len = strcspn(name, ",");
        int k = 0;
        while (k < n && !(strlen(names[k]) == len && strncmp(names[k], name, len) == 0)) { k++; }
        if (k == n) {
            fprintf(stderr, "emu: EMU_FLIP_GRAD=%s: '%.*s' names no parameter tensor of this model\n", list, (int)len, name);
            emu_exit();
        }
        float* host = (float*)malloc(sizes[k] * sizeof(float) + 1);
        cudaMemcpy(host, grads + offsets[k], sizes[k] * sizeof(float), cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < sizes[k]; i++) { host[i] = -host[i]; }
        cudaMemcpy(grads + offsets[k], host, sizes[k] * sizeof(float), cudaMemcpyHostToDevice);
        free(host);
        name += len + (name[len] == ',');
    }
}

#include "mma.h"
