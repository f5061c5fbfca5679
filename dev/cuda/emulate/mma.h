/*
The tensor-core and asynchronous-copy instructions that llmc/mma.cuh wraps, emulated as the
PTX ISA defines them (section "Warp-level matrix multiply-accumulate instructions"), for
the fibers of cuda_runtime.h. Each of mma and ldmatrix is a warp-collective operation:
every lane hands over its operands, and once the last lane of the warp has arrived the
operation runs for all 32 lanes with the documented fragment layouts.

  mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32  D = A B + C, A 16x16, B 16x8, C, D 16x8
    groupID = lane >> 2, tig (threadID_in_group) = lane % 4; register r holds two bf16,
    element 0 in the low 16 bits:
      A: a{0,1} = A[g][2 tig + {0,1}]     (register 0)   a{4,5} = A[g][2 tig + 8 + {0,1}]     (register 2)
         a{2,3} = A[g + 8][2 tig + {0,1}] (register 1)   a{6,7} = A[g + 8][2 tig + 8 + {0,1}] (register 3)
      B: b{0,1} = B[2 tig + {0,1}][g]     (register 0)   b{2,3} = B[2 tig + 8 + {0,1}][g]     (register 1)
      C, D (f32): c{0,1} = C[g][2 tig + {0,1}], c{2,3} = C[g + 8][2 tig + {0,1}]
    Products of bf16 values are exact in fp32; the PTX ISA leaves the order and internal
    precision of the sum to the hardware. Here the 16 products and c are summed in double
    and rounded to fp32 once: exact to half an ulp of fp32, at least as accurate as the
    hardware (whose rounding inside the sum can differ from this by a few fp32 ulps).

  ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16  r[0..num)
    lanes 8m..8m+7 give the 16-byte aligned addresses of rows 0..7 of matrix m (for .x1
    lanes 0-7 only, .x2 lanes 0-15); lane i receives in r[m] the elements (row i / 4,
    columns 2 (i % 4), 2 (i % 4) + 1) of matrix m; with .trans, of its transpose, i.e.
    (rows 2 (i % 4), 2 (i % 4) + 1 of column i / 4) as stored.

  cp.async.{ca,cg}.shared.global [dst], [src], 16[, src-size]; cp.async.commit_group;
  cp.async.wait_group N
    a copy of 16 bytes (zero-filled past src-size) that belongs to the thread's next
    committed group; the source is read at the issue. Until the issuing thread waits for
    its group (wait_group N: every group but the N most recently committed is complete)
    the destination is in flight: any access to it is reported (emu_kernel.h), and it
    holds 0xff bytes. At the wait the data counts as written by the issuing thread, so
    another warp reads it only after a barrier, another lane of its warp after a __syncwarp().

Each instruction is checked as the PTX ISA requires: all 32 lanes take part in mma and
ldmatrix (.sync.aligned), ldmatrix reads 16-byte aligned rows of shared memory (as reads
of the lanes that give them), cp.async copies from global to shared memory with both
addresses aligned to its size.
*/
#pragma once

EMU_NOCHECK static inline float emu_bf16_to_float(uint32_t h) { uint32_t x = (h & 0xffffu) << 16; float f; memcpy(&f, &x, 4); return f; }

// element (r, k) of A, (k, n) of B, from the lanes' registers as laid out above
EMU_NOCHECK static inline double emu_mma_a(EmuLane* const* lanes, int r, int k) {
    uint32_t reg = lanes[(r % 8) * 4 + (k % 8) / 2]->u[(r / 8) + 2 * (k / 8)];
    return emu_bf16_to_float(k % 2 ? reg >> 16 : reg);
}
EMU_NOCHECK static inline double emu_mma_b(EmuLane* const* lanes, int k, int n) {
    uint32_t reg = lanes[n * 4 + (k % 8) / 2]->u[4 + k / 8];
    return emu_bf16_to_float(k % 2 ? reg >> 16 : reg);
}
EMU_NOCHECK static void emu_mma_op(EmuLane* const* lanes, int) {
    for (int l = 0; l < 32; l++) {
        int g = l / 4, tig = l % 4;
        for (int e = 0; e < 4; e++) {
            int r = g + 8 * (e / 2), c = 2 * tig + e % 2;
            double acc = lanes[l]->f[e];
            for (int k = 0; k < 16; k++) { acc += emu_mma_a(lanes, r, k) * emu_mma_b(lanes, k, c); }
            lanes[l]->out_f[e] = (float)acc;
        }
    }
}
EMU_NOCHECK static void emu_mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
    EmuLane lane = {};
    lane.op = emu_mma_op; lane.what = "mma.sync"; lane.mask = 0xffffffffu;
    for (int r = 0; r < 4; r++) { lane.u[r] = a[r]; lane.f[r] = c[r]; }
    lane.u[4] = b[0]; lane.u[5] = b[1];
    emu_warp_collective(&lane);
    for (int r = 0; r < 4; r++) { d[r] = lane.out_f[r]; }
}

// ldmatrix: u[0] = number of matrices, u[1] = transposed
EMU_NOCHECK static inline uint16_t emu_b16_at(const void* row, int col) { uint16_t v; memcpy(&v, (const unsigned char*)row + 2 * col, 2); return v; }
EMU_NOCHECK static void emu_ldmatrix_op(EmuLane* const* lanes, int) {
    for (int l = 0; l < 32; l++) {
        if (lanes[l]->u[0] != lanes[0]->u[0] || lanes[l]->u[1] != lanes[0]->u[1]) {
            emu_fail_thread(emu_warp_base + l, "ldmatrix with other qualifiers than lane 0's in one warp");
        }
    }
    int num = (int)lanes[0]->u[0], trans = (int)lanes[0]->u[1];
    for (int l = 0; l < 8 * num; l++) {
        uintptr_t a = (uintptr_t)lanes[l]->addr;
        if (a % 16 != 0) { emu_fail_thread(emu_warp_base + l, "ldmatrix row address %p not 16-byte aligned", (void*)a); }
        if (a - (uintptr_t)emu_smem >= EMU_SMEM_CAP) { emu_fail_thread(emu_warp_base + l, "ldmatrix row address %p is not in shared memory", (void*)a); }
        emu_shared_access(a - (uintptr_t)emu_smem, 16, false, emu_warp_base + l);
    }
    for (int l = 0; l < 32; l++) {
        for (int m = 0; m < num; m++) {
            uint16_t lo, hi;
            if (!trans) {
                const void* row = lanes[8 * m + l / 4]->addr;
                lo = emu_b16_at(row, 2 * (l % 4));
                hi = emu_b16_at(row, 2 * (l % 4) + 1);
            } else {
                lo = emu_b16_at(lanes[8 * m + 2 * (l % 4)]->addr, l / 4);
                hi = emu_b16_at(lanes[8 * m + 2 * (l % 4) + 1]->addr, l / 4);
            }
            lanes[l]->out_u[m] = (uint32_t)lo | ((uint32_t)hi << 16);
        }
    }
}
EMU_NOCHECK static void emu_ldmatrix(uint32_t* r, int num, bool trans, const void* addr) {
    EmuLane lane = {};
    lane.op = emu_ldmatrix_op; lane.what = "ldmatrix"; lane.mask = 0xffffffffu;
    lane.addr = addr;
    lane.u[0] = (uint32_t)num;
    lane.u[1] = trans;
    emu_warp_collective(&lane);
    for (int m = 0; m < num; m++) { r[m] = lane.out_u[m]; }
}

// cp.async: the copy is kept by the issuing fiber until it waits for its group; its
// destination is in flight until then
EMU_NOCHECK static void emu_cp_async(void* dst, const void* src, int bytes, int src_bytes) {
    if (!emu_k.active) { emu_fail("cp.async outside a kernel"); }
    if ((uintptr_t)dst % bytes != 0 || (uintptr_t)src % bytes != 0) { emu_fail("cp.async addresses %p, %p not aligned to its %d bytes", dst, src, bytes); }
    uintptr_t off = (uintptr_t)dst - (uintptr_t)emu_smem;
    if (off >= EMU_SMEM_CAP) { emu_fail("cp.async destination %p is not in shared memory", dst); }
    if (src_bytes > 0) { emu_check_global((uintptr_t)src, (size_t)min(src_bytes, bytes), false); }
    int t = emu_ctx.thread;
    emu_shared_access(off, (size_t)bytes, true, t);
    for (int k = 0; k < bytes; k++) { emu_shadow[off + k].pending = 1; emu_shadow[off + k].p_tid = (uint16_t)t; }
    EmuFiber& f = emu_fibers[t];
    EmuCopy c;
    c.dst = (unsigned char*)dst;
    c.bytes = bytes;
    c.group = f.committed;
    memset(c.data, 0, sizeof(c.data));
    if (src_bytes > 0) { memcpy(c.data, src, (size_t)min(src_bytes, bytes)); }
    memset(dst, 0xff, (size_t)bytes);
    f.copies.push_back(c);
}
EMU_NOCHECK static void emu_cp_async_commit() { emu_fibers[emu_ctx.thread].committed++; }
// the copies of every group but the `pending` most recent land, written by this thread now
EMU_NOCHECK static void emu_cp_async_wait(int pending) {
    int t = emu_ctx.thread;
    EmuFiber& f = emu_fibers[t];
    int done_below = f.committed - pending; // groups before this one are complete
    size_t kept = 0;
    for (size_t i = 0; i < f.copies.size(); i++) {
        const EmuCopy c = f.copies[i];
        if (c.group >= done_below) { f.copies[kept++] = c; continue; }
        memcpy(c.dst, c.data, (size_t)c.bytes);
        for (int k = 0; k < c.bytes; k++) {
            EmuShadow& e = emu_shadow[c.dst - emu_smem + k];
            e.pending = 0;
            e.w_epoch = emu_epoch;
            e.w_tid = (uint16_t)t;
            e.w_sync = emu_sync_time;
        }
    }
    f.copies.resize(kept);
}
