/*
Kernels in the CPU emulation (included by cuda_runtime.h): every CUDA thread of a block is a
fiber on one core, and every load and store a kernel makes is checked.

Scheduling. The warps of a block run one after the other: every lane of warp 0 runs until
it reaches a warp-collective operation (a shuffle, __syncwarp, mma, ldmatrix) or
__syncthreads() or returns; a collective runs for its lanes once every lane its mask names
has arrived (so it reads memory as the hardware does, before any lane goes on); then warp
1, and so on. A barrier is released once every thread of the block waits at it. Blocks
run in a seeded random order (cuda_runtime.h).

Checks, each reported on one line naming the kernel, block, thread and address:
  - global memory (cuda_runtime.h): inside a live allocation, never host memory; the
    thread's own stack is its local memory, __constant__ memory is read-only
  - shared memory, per byte: the last writer (thread, barrier interval, warp-sync time),
    the last readers of the interval, and whether a cp.async is in flight into it. A read of
    a byte another warp wrote in the same barrier interval, a write of a byte another warp
    read or wrote in it (racecheck's hazards in either order of the warps; the data of a
    cp.async counts as written by its thread when it waits for it); the same between two
    lanes of one warp with no __syncwarp() both took part in between (shuffles, votes, mma
    and ldmatrix order no memory: on a GPU they are no fences); a read or write of a cp.async
    destination before the wait that covers it, a read of bytes never written in this
    block (static and dynamic shared memory alike), and an access outside the block's
    shared memory
  - global memory, per 2 bytes, within a launch: a read or write of what another block of
    the launch wrote, a write of what another block read (seen in the order the blocks
    run: the random order shows either), and the same between warps of one block in one
    barrier interval; atomics race only with plain accesses
  - a shuffle or __syncwarp whose mask does not name the calling lane, names a lane that
    has exited, is not in the warp, waits at __syncthreads() or gives another mask, or
    reads a lane outside the mask; mma and ldmatrix need all 32 lanes
  - __syncthreads() reached by only part of the block (others have exited), or at different
    places in the code (divergent barriers), and lanes of a warp that wait at different
    collectives forever
  - static shared memory above 48 KiB, or with the dynamic shared memory above the
    device's limit per block

The accesses are seen through -fsanitize=kernel-address (g++ instruments every load and
store with a call to __asan_{load,store}N_noabort, defined below); the emulation's own code
is EMU_NOCHECK. The fiber switch is a few instructions of x86-64 assembly (callee-saved
registers and the stack pointer), ucontext elsewhere.
*/
#pragma once
#include <type_traits>
#include <utility>

// a type-erased callable: a kernel's body, a queued piece of device work
struct EmuCall { void (*call)(void*); void (*destroy)(void*); void* obj; };
template<class F> EMU_NOCHECK static void emu_call_run(void* p) { (*(F*)p)(); }
template<class F> EMU_NOCHECK static void emu_call_free(void* p) { delete (F*)p; }
template<class F> EMU_NOCHECK static EmuCall emu_call(F&& f) {
    typedef typename std::decay<F>::type D;
    return {emu_call_run<D>, emu_call_free<D>, new D(std::forward<F>(f))};
}
// a queued kernel launch
struct EmuLaunch { const char* name; const void* func; dim3 grid; unsigned threads; size_t smem; EmuCall body; };

// ---- fibers: every thread of a block has its own stack; barriers and warp-collective
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
    const char* what;                         // its name, for reports
    uint32_t mask;                            // the lanes taking part
    const void* addr;                         // ldmatrix: this lane's row address
    uint32_t u[8];                            // mma: A (4) and B (2) registers; shuffle: the value's bits, the argument
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
    const char* bar_file;        // while in F_WAIT_BLOCK: where its __syncthreads() is
    unsigned bar_line;
    EmuVec<EmuCopy> copies;      // cp.async not yet waited for
    int committed;               // cp.async groups committed so far
};
#if defined(__x86_64__)
static void* emu_sched_sp;
#else
static ucontext_t emu_sched;
#endif
static EmuVec<EmuFiber> emu_fibers;
static EmuVec<char*> emu_stacks;
static const EmuCall* emu_body;
static int emu_warp_base; // the first thread of the warp whose collective runs
#define EMU_STACK (256 * 1024)

// ---- shared memory of the block: dynamic shared memory at the start, the static
// __shared__ variables (prepare.py turns each declaration into emu_shared) at the end;
// per byte, the shadow state the checks keep
#define EMU_SMEM_CAP (228 * 1024)
struct EmuShadow {
    uint32_t w_epoch, r_epoch;        // barrier intervals of the last write and the last reads
    uint32_t w_sync, q_sync[2];       // the warp-sync time (emu_sync_time) of the last write, and of the reads of q_tid
    uint16_t w_tid, r_tid, r_tid2;    // the last writer; a reader of r_epoch, and one of another warp (r_multi)
    uint16_t q_tid[2];                // the last two threads that read in r_epoch (lanes: their order by __syncwarp)
    uint16_t p_tid;                   // the thread whose cp.async is in flight into the byte
    uint8_t r_multi, pending;
};
static unsigned char* emu_smem;
static EmuShadow* emu_shadow;
static size_t emu_dynamic_bytes, emu_static_lo = EMU_SMEM_CAP, emu_static_bytes;
static uint32_t emu_epoch = 1, emu_epoch0 = 1; // the current barrier interval, the block's first
struct EmuSite { const void* key; size_t offset; };
static EmuVec<EmuSite> emu_sites;

// a static __shared__ variable of the running kernel: the same bytes for every thread of
// every block of the launch (key: a static object of the declaration's instantiation)
EMU_NOCHECK static void* emu_shared_static(const void* key, size_t bytes, size_t align) {
    for (const EmuSite& s : emu_sites) { if (s.key == key) { return emu_smem + s.offset; } }
    size_t off = (emu_static_lo - bytes) & ~(align - 1);
    if (EMU_SMEM_CAP - off > 48 * 1024) { emu_fail("%zu bytes of static shared memory: more than 48 KiB, which ptxas refuses", (size_t)(EMU_SMEM_CAP - off)); }
    if (EMU_SMEM_CAP - off + emu_dynamic_bytes > emu_smem_optin()) {
        emu_fail("%zu bytes of static and %zu of dynamic shared memory: above sm_%d's %zu per block, the launch fails",
                 (size_t)(EMU_SMEM_CAP - off), emu_dynamic_bytes, emu_config().sm, emu_smem_optin());
    }
    emu_static_lo = off;
    emu_static_bytes = EMU_SMEM_CAP - off;
    emu_sites.push_back({key, off});
    memset(emu_smem + off, 0xff, bytes);
    return emu_smem + off;
}
template<class T> EMU_NOCHECK static T* emu_shared(const void* key, size_t align) {
    return (T*)emu_shared_static(key, sizeof(T), max(align, alignof(T)));
}

// the address a report gives for offset `off` of the emulated shared memory: the GPU's
// layout, static variables from 0 and the dynamic shared memory after them
EMU_NOCHECK static size_t emu_shared_addr(size_t off) {
    return off >= emu_static_lo ? off - emu_static_lo : off + emu_static_bytes;
}
// lanes of a warp: a __syncwarp() orders the accesses of the lanes of its mask before it with
// theirs after it. Every __syncwarp() gets the next emu_sync_time; per warp, the time of the
// last one with every lane (emu_sync_full), and per pair of lanes, of the last with both
// (emu_sync_pair, for partial masks). An access at time t by lane a is ordered before the
// lane b's at present if they met at a __syncwarp() later than t (or at a barrier: another
// interval). Values from earlier blocks are older than any access of this one.
static uint32_t emu_sync_time = 1;
static uint32_t emu_sync_full[32];
static uint32_t emu_sync_pair[32][32][32];
EMU_NOCHECK static bool emu_lanes_ordered(int a, uint32_t t, int b) {
    int w = a / 32;
    return emu_sync_full[w] > t || emu_sync_pair[w][a % 32][b % 32] > t; // (std::max is instrumented: the kernel's access)
}
// a race between two threads of one warp in the interval: one line naming both
[[noreturn]] EMU_NOCHECK static void emu_lane_race(int tid, const char* rw, size_t at, int other, const char* other_rw, const char* kind) {
    emu_fail_thread(tid, "shared-memory race between lanes of warp %d: %s at shared address 0x%zx, which thread %d (lane %d) %s with no __syncwarp() "
                    "between (%s)", tid / 32, rw, at, other, other % 32, other_rw, kind);
}

// an access of n bytes at offset `off` of the block's shared memory by thread tid
EMU_NOCHECK static void emu_shared_access(size_t off, size_t n, bool write, int tid) {
    const char* rw = write ? "write" : "read";
    if (!(off + n <= emu_dynamic_bytes || (off >= emu_static_lo && off + n <= EMU_SMEM_CAP))) {
        emu_fail_thread(tid, "invalid shared %s of %zu bytes at shared address 0x%zx: past the end of the block's %zu bytes of dynamic shared memory",
                        rw, n, emu_shared_addr(off), emu_dynamic_bytes);
    }
    int warp = tid / 32;
    size_t unwritten = 0;
    for (size_t k = 0; k < n; k++) {
        EmuShadow& e = emu_shadow[off + k];
        size_t at = emu_shared_addr(off + k);
        if (e.pending) {
            emu_fail_thread(tid, "shared-memory %s at shared address 0x%zx, the destination of a cp.async by thread %d still in flight: "
                            "before the cp.async.wait_group that covers it", rw, at, e.p_tid);
        }
        if (e.w_epoch < emu_epoch0) { unwritten++; }
        // the last write by another lane of this warp, not ordered before this access
        bool lane_w = e.w_epoch == emu_epoch && e.w_tid != tid && e.w_tid / 32 == warp && !emu_lanes_ordered(e.w_tid, e.w_sync, tid);
        if (write) {
            if (e.w_epoch == emu_epoch && e.w_tid / 32 != warp) {
                emu_fail_thread(tid, "shared-memory race: write at shared address 0x%zx, which thread %d (warp %d) wrote with no __syncthreads() "
                                "between (write-after-write)", at, e.w_tid, e.w_tid / 32);
            }
            if (e.r_epoch == emu_epoch && (e.r_tid / 32 != warp || e.r_multi)) {
                int other = e.r_tid / 32 != warp ? e.r_tid : e.r_tid2;
                emu_fail_thread(tid, "shared-memory race: write at shared address 0x%zx, which thread %d (warp %d) read with no __syncthreads() "
                                "between (write-after-read)", at, other, other / 32);
            }
            if (lane_w) { emu_lane_race(tid, "write", at, e.w_tid, "wrote", "write-after-write"); }
            for (int q = 0; e.r_epoch == emu_epoch && q < 2; q++) {
                int r = e.q_tid[q];
                if (r != 0xffff && r != tid && r / 32 == warp && !emu_lanes_ordered(r, e.q_sync[q], tid)) {
                    emu_lane_race(tid, "write", at, r, "read", "write-after-read");
                }
            }
            e.w_epoch = emu_epoch;
            e.w_tid = (uint16_t)tid;
            e.w_sync = emu_sync_time;
        } else {
            if (e.w_epoch == emu_epoch && e.w_tid / 32 != warp) {
                emu_fail_thread(tid, "shared-memory race: read at shared address 0x%zx, which thread %d (warp %d) wrote with no __syncthreads() "
                                "between (read-after-write)", at, e.w_tid, e.w_tid / 32);
            }
            if (lane_w) { emu_lane_race(tid, "read", at, e.w_tid, "wrote", "read-after-write"); }
            if (e.r_epoch != emu_epoch) {
                e.r_epoch = emu_epoch; e.r_tid = (uint16_t)tid; e.r_multi = 0;
                e.q_tid[0] = (uint16_t)tid; e.q_sync[0] = emu_sync_time; e.q_tid[1] = 0xffff;
                continue;
            }
            if (!e.r_multi && e.r_tid / 32 != warp) { e.r_multi = 1; e.r_tid2 = (uint16_t)tid; }
            if (e.q_tid[0] != tid) { e.q_tid[1] = e.q_tid[0]; e.q_sync[1] = e.q_sync[0]; e.q_tid[0] = (uint16_t)tid; }
            e.q_sync[0] = emu_sync_time;
        }
    }
    // a read of bytes none of which this block has written yet: never written, or written
    // later in this barrier interval by another warp (padding inside a struct that is read
    // whole is written in part, and passes)
    if (!write && unwritten == n) {
        emu_fail_thread(tid, "shared-memory read of %zu bytes at shared address 0x%zx that no thread of this block has written before "
                        "(never, or another warp later with no __syncthreads() between)", n, emu_shared_addr(off));
    }
}

// every load and store of a kernel's thread: its stack (local memory), shared memory,
// global memory, the built-in variables and __constant__ memory (read-only)
EMU_NOCHECK static void emu_access(uintptr_t a, size_t n, bool write) {
    if (a - emu_k.stack_lo < EMU_STACK) { return; }
    if (a - (uintptr_t)emu_smem < EMU_SMEM_CAP) { emu_shared_access(a - (uintptr_t)emu_smem, n, write, emu_ctx.thread); return; }
    if (a - emu_region < EMU_REGION) { emu_check_global(a, n, write); return; }
    bool builtin = a - (uintptr_t)__start_emu_builtin < (uintptr_t)(__stop_emu_builtin - __start_emu_builtin);
    bool constant = a - (uintptr_t)__start_emu_constant < (uintptr_t)(__stop_emu_constant - __start_emu_constant);
    if (builtin || constant) {
        if (write) { emu_fail("write of %zu bytes at %p: %s", n, (void*)a, builtin ? "a built-in variable" : "__constant__ memory, read-only in kernels"); }
        return;
    }
    emu_fail("invalid global %s of %zu bytes at %p: host memory, not allocated by cudaMalloc", write ? "write" : "read", n, (void*)a);
}
#if defined(EMU_CHECK_ACCESS)
extern "C" {
#define EMU_HOOK(n) \
    EMU_NOCHECK void __asan_load##n##_noabort(uintptr_t a) { if (emu_k.active) { emu_access(a, n, false); } } \
    EMU_NOCHECK void __asan_store##n##_noabort(uintptr_t a) { if (emu_k.active) { emu_access(a, n, true); } }
EMU_HOOK(1) EMU_HOOK(2) EMU_HOOK(4) EMU_HOOK(8) EMU_HOOK(16)
EMU_NOCHECK void __asan_loadN_noabort(uintptr_t a, size_t n) { if (emu_k.active) { emu_access(a, n, false); } }
EMU_NOCHECK void __asan_storeN_noabort(uintptr_t a, size_t n) { if (emu_k.active) { emu_access(a, n, true); } }
EMU_NOCHECK void __asan_handle_no_return() {}
EMU_NOCHECK void __asan_before_dynamic_init(const char*) {}
EMU_NOCHECK void __asan_after_dynamic_init() {}
}
#endif
// an atomic in global memory (shared-memory atomics are not emulated)
EMU_NOCHECK static void emu_check_atomic(uintptr_t a, size_t n) {
    if (!emu_k.active) { emu_fail("an atomic outside a kernel"); }
    if (a - (uintptr_t)emu_smem < EMU_SMEM_CAP) { emu_fail("a shared-memory atomic at %p: not emulated", (void*)a); }
    emu_check_global(a, n, true, true);
}

// races in global memory within a launch. Per 2 bytes of an allocation (EmuAlloc::race), two
// words: the last write (its barrier interval, counted from the launch's first, its warp, and
// whether it was an atomic) and the last read (interval, warp, and whether another block read
// it too (EMU_RACE_BLOCKS) or another warp in that interval (EMU_RACE_WARPS)). Blocks run one
// after another, so an interval before the block's first belongs to another block of the launch.
#define EMU_RACE_INTERVAL 0x1ffffffu
#define EMU_RACE_ATOMIC (1u << 30)
#define EMU_RACE_BLOCKS (1u << 30)
#define EMU_RACE_WARPS (1u << 31)
static uint32_t emu_launch_serial, emu_launch_epoch; // the running launch, and emu_epoch before its first block
EMU_NOCHECK static void emu_global_race(EmuAlloc& al, uintptr_t a, size_t n, bool write, bool atomic) {
    uint32_t now = emu_epoch - emu_launch_epoch, first = emu_epoch0 - emu_launch_epoch; // intervals of the launch, from 1
    if (now > EMU_RACE_INTERVAL) { return; } // a launch of more than 2^25 intervals: not tracked
    if (al.race == nullptr) {
        void* m = mmap(nullptr, al.span * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) { emu_fail("no memory for the race checks of an allocation of %zu bytes", al.bytes); }
        al.race = (uint32_t*)m;
        al.race_launch = (uint32_t*)calloc(al.span / EMU_PAGE, sizeof(uint32_t));
    }
    int tid = emu_ctx.thread, warp = tid / 32;
    size_t u0 = (a - al.base) / 2, u1 = (a + n - 1 - al.base) / 2;
    for (size_t page = u0 * 2 / EMU_PAGE; page <= u1 * 2 / EMU_PAGE; page++) {
        if (al.race_launch[page] != emu_launch_serial) { // the page's words are from an earlier launch
            memset(al.race + page * EMU_PAGE, 0, EMU_PAGE * 4);
            al.race_launch[page] = emu_launch_serial;
        }
    }
    uint32_t mine = now | (uint32_t)warp << 25;
    for (size_t u = u0; u <= u1; u++) {
        uint32_t& w = al.race[2 * u];
        uint32_t& r = al.race[2 * u + 1];
        // the common case: this warp again, in the same interval, with nothing else since
        if (write ? w == (mine | (atomic ? EMU_RACE_ATOMIC : 0)) && r == 0 : w == 0 && (r & ~(EMU_RACE_BLOCKS | EMU_RACE_WARPS)) == mine) { continue; }
        uint32_t wi = w & EMU_RACE_INTERVAL, ri = r & EMU_RACE_INTERVAL;
        const char* rw = write ? "write" : "read";
        void* at = (void*)(al.base + 2 * u);
        bool both_atomic = atomic && (w & EMU_RACE_ATOMIC);
        if (wi != 0 && !both_atomic) {
            const char* kind = write ? "write-after-write" : "read-after-write";
            if (wi < first) { emu_fail("global-memory race: %s at %p, which another block of this launch wrote (%s; blocks run in any order)", rw, at, kind); }
            if (wi == now && (int)(w >> 25 & 31) != warp) {
                emu_fail("global-memory race: %s at %p, which warp %d of this block wrote with no __syncthreads() between (%s)", rw, at, (int)(w >> 25 & 31), kind);
            }
        }
        if (write) {
            if (ri != 0 && (ri < first || (r & EMU_RACE_BLOCKS))) {
                emu_fail("global-memory race: write at %p, which another block of this launch read (write-after-read; blocks run in any order)", at);
            }
            if (ri == now && ((int)(r >> 25 & 31) != warp || (r & EMU_RACE_WARPS))) {
                emu_fail("global-memory race: write at %p, which another warp of this block read with no __syncthreads() between (write-after-read)", at);
            }
            w = mine | (atomic ? EMU_RACE_ATOMIC : 0);
        } else {
            uint32_t flags = 0;
            if (ri != 0 && (ri < first || (r & EMU_RACE_BLOCKS))) { flags |= EMU_RACE_BLOCKS; }
            if (ri == now && ((int)(r >> 25 & 31) != warp || (r & EMU_RACE_WARPS))) { flags |= EMU_RACE_WARPS; }
            r = mine | flags;
        }
    }
}

EMU_NOCHECK static void emu_yield(int state) {
    EmuFiber& f = emu_fibers[emu_ctx.thread];
    f.state = state;
#if defined(__x86_64__)
    emu_switch(&f.sp, emu_sched_sp);
#else
    swapcontext(&f.ctx, &emu_sched);
#endif
}
EMU_NOCHECK static void emu_resume(int t) {
    emu_ctx.thread = t;
    threadIdx = {(unsigned)t, 0, 0};
    emu_k.stack_lo = (uintptr_t)emu_stacks[t];
    emu_k.active = 1;
#if defined(__x86_64__)
    emu_switch(&emu_sched_sp, emu_fibers[t].sp);
#else
    swapcontext(&emu_sched, &emu_fibers[t].ctx);
#endif
    emu_k.active = 0;
    emu_ctx.thread = -1;
}
EMU_NOCHECK static void emu_fiber_main() {
    emu_body->call(emu_body->obj);
    emu_yield(F_DONE);
    abort(); // a finished fiber is never resumed
}
EMU_NOCHECK static void emu_fiber_start(int t) {
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

// __syncthreads() knows where it is called (the threads of a block must all wait at the same
// one): the file and line are constants of the call, read by no instrumented code
#define __syncthreads() emu_syncthreads(__FILE__, __LINE__)
EMU_NOCHECK static inline void emu_syncthreads(const char* file, unsigned line) {
    if (!emu_k.active) { emu_fail("__syncthreads() outside a kernel"); }
    emu_fibers[emu_ctx.thread].bar_file = file;
    emu_fibers[emu_ctx.thread].bar_line = line;
    emu_yield(F_WAIT_BLOCK);
}
// a warp-collective operation: waits until every lane of its mask has arrived; the
// scheduler then runs lane->op once for them
EMU_NOCHECK static void emu_warp_collective(EmuLane* lane) {
    if (!emu_k.active) { emu_fail("%s outside a kernel", lane->what); }
    emu_fibers[emu_ctx.thread].lane = lane;
    emu_yield(F_WAIT_WARP);
}
// the shuffles (width 32): the source lane must take part
EMU_NOCHECK static void emu_shfl_take(EmuLane* const* lanes, int n, int l, int src) {
    if (src < 0 || src >= n || lanes[src] == nullptr) {
        emu_fail_thread(emu_warp_base + l, "%s reads lane %d, which is not in its mask 0x%08x", lanes[l]->what, src, lanes[l]->mask);
    }
    lanes[l]->out_u[0] = lanes[src]->u[0];
    lanes[l]->out_u[1] = lanes[src]->u[1];
}
EMU_NOCHECK static void emu_shfl_xor_op(EmuLane* const* lanes, int n) {
    for (int l = 0; l < n; l++) { if (lanes[l] != nullptr) { emu_shfl_take(lanes, n, l, l ^ (int)lanes[l]->u[2]); } }
}
// __shfl_up_sync: lanes below `delta` keep their own value
EMU_NOCHECK static void emu_shfl_up_op(EmuLane* const* lanes, int n) {
    for (int l = 0; l < n; l++) {
        if (lanes[l] != nullptr) { emu_shfl_take(lanes, n, l, l < (int)lanes[l]->u[2] ? l : l - (int)lanes[l]->u[2]); }
    }
}
template<class T>
EMU_NOCHECK static T emu_shuffle(void (*op)(EmuLane* const*, int), const char* what, unsigned mask, T v, int arg, int width) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    if (width != 32) { emu_fail("%s with width %d: only 32 is emulated", what, width); }
    EmuLane lane = {};
    lane.op = op; lane.what = what; lane.mask = mask;
    memcpy(lane.u, &v, sizeof(T));
    lane.u[2] = (uint32_t)arg;
    emu_warp_collective(&lane);
    T r;
    memcpy(&r, lane.out_u, sizeof(T));
    return r;
}
template<class T> EMU_NOCHECK static T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    return emu_shuffle(emu_shfl_xor_op, "__shfl_xor_sync", mask, v, lane_mask, width);
}
template<class T> EMU_NOCHECK static T __shfl_up_sync(unsigned mask, T v, int delta, int width = 32) {
    return emu_shuffle(emu_shfl_up_op, "__shfl_up_sync", mask, v, delta, width);
}
// __syncwarp: the lanes of the mask meet, nothing is exchanged; their accesses before it are
// ordered before those after it (emu_lanes_ordered)
EMU_NOCHECK static void emu_syncwarp_op(EmuLane* const* lanes, int n) {
    uint32_t t = ++emu_sync_time, w = (uint32_t)emu_warp_base / 32;
    bool all = true;
    for (int l = 0; l < n; l++) { all = all && lanes[l] != nullptr; }
    if (all) { emu_sync_full[w] = t; return; }
    for (int a = 0; a < n; a++) {
        for (int b = 0; b < n && lanes[a] != nullptr; b++) { if (lanes[b] != nullptr) { emu_sync_pair[w][a][b] = t; } }
    }
}
EMU_NOCHECK static void __syncwarp(unsigned mask = 0xffffffffu) {
    EmuLane lane = {};
    lane.op = emu_syncwarp_op; lane.what = "__syncwarp"; lane.mask = mask;
    emu_warp_collective(&lane);
}

// runs the warp [w0, w1) of the current block until every lane waits at a barrier or has
// returned, running each collective once all the lanes of its mask have arrived
EMU_NOCHECK static void emu_run_warp(unsigned w0, unsigned w1) {
    int n = (int)(w1 - w0);
    for (;;) {
        for (unsigned t = w0; t < w1; t++) {
            if (emu_fibers[t].state == F_READY) { emu_resume((int)t); }
        }
        bool waiting = false, progress = false;
        for (int l = 0; l < n; l++) {
            EmuFiber& f = emu_fibers[w0 + l];
            if (f.state != F_WAIT_WARP) { continue; }
            waiting = true;
            const EmuLane* L = f.lane;
            if (!(L->mask >> l & 1)) { emu_fail_thread((int)w0 + l, "%s with the mask 0x%08x, which does not name the calling lane %d", L->what, L->mask, l); }
            bool ready = true;
            for (int m = 0; m < 32; m++) {
                if (!(L->mask >> m & 1)) { continue; }
                if (m >= n) { emu_fail_thread((int)w0 + l, "%s: its mask 0x%08x names lane %d, but the warp has %d threads", L->what, L->mask, m, n); }
                const EmuFiber& g = emu_fibers[w0 + m];
                if (g.state == F_DONE) { emu_fail_thread((int)w0 + l, "%s: its mask 0x%08x names lane %d, which has exited", L->what, L->mask, m); }
                if (g.state == F_WAIT_BLOCK) {
                    emu_fail_thread((int)w0 + l, "%s: its mask 0x%08x names lane %d, which waits at __syncthreads() instead", L->what, L->mask, m);
                }
                if (g.state != F_WAIT_WARP || g.lane->op != L->op || g.lane->mask != L->mask) { ready = false; }
            }
            if (!ready) { continue; }
            EmuLane* lanes[32] = {};
            for (int m = 0; m < n; m++) { if (L->mask >> m & 1) { lanes[m] = emu_fibers[w0 + m].lane; } }
            emu_warp_base = (int)w0;
            L->op(lanes, n);
            for (int m = 0; m < n; m++) {
                if (L->mask >> m & 1) { emu_fibers[w0 + m].state = F_READY; emu_fibers[w0 + m].lane = nullptr; }
            }
            progress = true;
        }
        if (!waiting) { return; }
        if (!progress) {
            int a = -1, b = -1;
            for (int l = 0; l < n; l++) {
                if (emu_fibers[w0 + l].state != F_WAIT_WARP) { continue; }
                if (a < 0) { a = l; } else if (b < 0 && (emu_fibers[w0 + l].lane->op != emu_fibers[w0 + a].lane->op || emu_fibers[w0 + l].lane->mask != emu_fibers[w0 + a].lane->mask)) { b = l; }
            }
            const EmuLane* A = emu_fibers[w0 + a].lane;
            const EmuLane* B = emu_fibers[w0 + (b < 0 ? a : b)].lane;
            emu_fail_thread((int)w0 + a, "lanes of a warp wait at different collectives for ever: lane %d at %s (mask 0x%08x), lane %d at %s (mask 0x%08x)",
                            a, A->what, A->mask, b < 0 ? a : b, B->what, B->mask);
        }
    }
}

// runs the current block (blockIdx) of n threads to its end
EMU_NOCHECK static void emu_run_block(unsigned n) {
    emu_epoch0 = ++emu_epoch;
    memset(emu_smem, 0xff, emu_dynamic_bytes);
    memset(emu_smem + emu_static_lo, 0xff, EMU_SMEM_CAP - emu_static_lo);
    for (unsigned t = 0; t < n; t++) { emu_fiber_start((int)t); }
    for (;;) {
        for (unsigned w0 = 0; w0 < n; w0 += 32) { emu_run_warp(w0, min(n, w0 + 32)); }
        int waiting = -1, exited = -1;
        unsigned at_barrier = 0;
        for (unsigned t = 0; t < n; t++) {
            if (emu_fibers[t].state == F_WAIT_BLOCK) { at_barrier++; if (waiting < 0) { waiting = (int)t; } }
            else if (exited < 0) { exited = (int)t; }
        }
        if (at_barrier == 0) { break; }
        if (exited >= 0) {
            emu_fail_thread(waiting, "__syncthreads() reached by %u of the block's %u threads: thread %d has exited", at_barrier, n, exited);
        }
        for (unsigned t = 0; t < n; t++) {
            const EmuFiber& a = emu_fibers[waiting];
            const EmuFiber& b = emu_fibers[t];
            if (b.bar_line != a.bar_line || strcmp(b.bar_file, a.bar_file) != 0) {
                emu_fail_thread(waiting, "__syncthreads() in divergent code: thread %d waits at %s:%u, thread %u at %s:%u", waiting, a.bar_file, a.bar_line,
                                t, b.bar_file, b.bar_line);
            }
        }
        ++emu_epoch;
        for (unsigned t = 0; t < n; t++) { emu_fibers[t].state = F_READY; }
    }
    // copies never waited for land by the end of the block
    for (unsigned t = 0; t < n; t++) {
        for (const EmuCopy& c : emu_fibers[t].copies) {
            for (int k = 0; k < c.bytes; k++) { emu_shadow[c.dst - emu_smem + k].pending = 0; }
        }
    }
}

// runs a launch: its blocks in the configured order
EMU_NOCHECK static void emu_run_kernel(const EmuLaunch& L) {
    static uint64_t launches = 0;
    unsigned n = L.threads;
    if (emu_smem == nullptr) {
        emu_smem = (unsigned char*)aligned_alloc(256, EMU_SMEM_CAP);
        emu_shadow = (EmuShadow*)calloc(EMU_SMEM_CAP, sizeof(EmuShadow));
    }
    while (emu_stacks.size() < n) { emu_stacks.push_back((char*)malloc(EMU_STACK)); }
    if (emu_fibers.size() < n) { emu_fibers.resize(n); }
    emu_ctx.kernel = L.name;
    gridDim = L.grid;
    blockDim = dim3(n);
    emu_body = &L.body;
    emu_dynamic_smem = emu_smem;
    emu_dynamic_bytes = L.smem;
    emu_static_lo = EMU_SMEM_CAP;
    emu_static_bytes = 0;
    emu_sites.clear();
    emu_launch_serial++;
    emu_launch_epoch = emu_epoch;
    uint64_t blocks = (uint64_t)L.grid.x * L.grid.y * L.grid.z;
    std::vector<uint64_t> order(blocks);
    for (uint64_t i = 0; i < blocks; i++) { order[i] = i; }
    if (emu_config().block_order == 2) { std::reverse(order.begin(), order.end()); }
    if (emu_config().block_order == 0) { // Fisher-Yates with splitmix64, seeded per launch
        uint64_t s = emu_config().seed * 0x9e3779b97f4a7c15ull + ++launches;
        for (uint64_t i = blocks; i > 1; i--) {
            s += 0x9e3779b97f4a7c15ull;
            uint64_t z = s;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            z ^= z >> 31;
            std::swap(order[i - 1], order[z % i]);
        }
    }
    for (uint64_t id : order) {
        blockIdx = {(unsigned)(id % L.grid.x), (unsigned)(id / L.grid.x % L.grid.y), (unsigned)(id / L.grid.x / L.grid.y)};
        emu_run_block(n);
    }
    emu_ctx.kernel = nullptr;
}
