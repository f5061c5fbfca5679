/*
The tensor-core instructions the attention kernels use, one small function each: on the
GPU an inline PTX instruction, in the CPU emulation (dev/cuda/emulate, which defines
CUDA_EMULATION) the emulated instruction of dev/cuda/emulate/mma.h, where the fragment
layouts are written out. Needs sm_80 or newer.

  mma_bf16_16816(acc, a, b)     acc += A B: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
                                (A 16x16 in 4 registers, B 16x8 in 2, acc 16x8 in 4 floats)
  ldmatrix_x1/x2/x4<TRANS>(r, p)  ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16: lanes
                                8m..8m+7 give the row addresses of matrix m, r[m] gets this
                                lane's two elements of it
  cp_async_16(dst, src, n)      cp.async.cg.shared.global: 16 bytes, of which the first n
                                are read from src and the rest are zeros
  cp_async_commit()             cp.async.commit_group
  cp_async_wait<N>()            cp.async.wait_group N: all but the N most recent groups done
  pack_bf16x2(lo, hi)           two floats rounded to bf16 in one register (lo in the low half)
*/
#ifndef LLMC_MMA_CUH
#define LLMC_MMA_CUH

#include <stdint.h>
#include <string.h>
#include <cuda_bf16.h>

__device__ __forceinline__ void mma_bf16_16816(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(CUDA_EMULATION)
    emu_mma_bf16_16816(acc, a, b, acc);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

#if !defined(CUDA_EMULATION)
__device__ __forceinline__ uint32_t smem_address(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
#endif

template<bool TRANS>
__device__ __forceinline__ void ldmatrix_x1(uint32_t (&r)[1], const void* row) {
#if defined(CUDA_EMULATION)
    emu_ldmatrix(r, 1, TRANS, row);
#else
    if constexpr (TRANS) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(smem_address(row)));
    } else {
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(smem_address(row)));
    }
#endif
}

template<bool TRANS>
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* row) {
#if defined(CUDA_EMULATION)
    emu_ldmatrix(r, 2, TRANS, row);
#else
    if constexpr (TRANS) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(smem_address(row)));
    } else {
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(smem_address(row)));
    }
#endif
}

template<bool TRANS>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#if defined(CUDA_EMULATION)
    emu_ldmatrix(r, 4, TRANS, row);
#else
    if constexpr (TRANS) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_address(row)));
    } else {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_address(row)));
    }
#endif
}

__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes) {
#if defined(CUDA_EMULATION)
    emu_cp_async(dst, src, 16, src_bytes);
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(smem_address(dst)), "l"(src), "r"(src_bytes) : "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(CUDA_EMULATION)
    emu_cp_async_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template<int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(CUDA_EMULATION)
    emu_cp_async_wait(N);
#else
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
#endif
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t r;
    memcpy(&r, &v, sizeof(r));
    return r;
}

#endif // LLMC_MMA_CUH
