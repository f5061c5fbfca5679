/*
The tensor-core instructions of llmc/mma.cuh checked against their definition in the PTX
ISA, with one warp:
  - ldmatrix .x1, .x2, .x4, with and without .trans, of a 16x16 matrix whose elements
    are their own index (r * 16 + c, exact in bf16): every lane's registers must hold the
    elements the PTX ISA's fragment layout names
  - mma m16n8k16 (bf16 in, fp32 accumulate) with A loaded by ldmatrix.x4, B by ldmatrix.x2
    from B^T (n rows of k) and by ldmatrix.x2.trans from B (k rows of n), C from its
    fragment layout: D = A B + C against the product in double (the bf16 products are
    exact, so only the final rounding to fp32 separates them: relative error below 1e-6)
  - cp.async: data arrives after cp.async.wait_group, including the zero-fill of a
    partial copy, and wait_group 1 completes the older of two groups (a read before the
    wait that covers a copy is undefined on a GPU; the emulation reports it, see
    dev/cuda/emulate/defects.cu)

  make -C dev/cuda mma_check && ./dev/cuda/mma_check          (a GPU: checks the hardware)
  make build/emulate/mma_check && build/emulate/mma_check    (the CPU emulation)
*/
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "../../llmc/cuda_common.cuh"
#include "../../llmc/mma.cuh"

typedef __nv_bfloat16 bf16;

// out_frag: [lane][variant][register], variants: x4, x4.trans, x2, x2.trans, x1, x1.trans
#define NVARIANTS 6
struct MmaCheck {
    float d_bt[32][4];   // D through B^T and ldmatrix.x2
    float d_b[32][4];    // D through B and ldmatrix.x2.trans
    uint32_t frag[32][NVARIANTS][4];
    unsigned char older_group[32][16]; // the even lanes' cp.async destinations after wait_group 1
    unsigned char after_wait[32][16];
};

__global__ void mma_check_kernel(MmaCheck* out, const bf16* A, const bf16* Bt, const bf16* B, const float* C, const bf16* M,
                                 const unsigned char* src) {
    __shared__ __align__(16) bf16 As[16][16];
    __shared__ __align__(16) bf16 Bts[8][16];
    __shared__ __align__(16) bf16 Bs[16][8];
    __shared__ __align__(16) bf16 Ms[16][16];
    __shared__ __align__(16) unsigned char copies[32][16];
    int lane = threadIdx.x, g = lane / 4, tig = lane % 4;
    for (int e = lane; e < 256; e += 32) { As[e / 16][e % 16] = A[e]; Ms[e / 16][e % 16] = M[e]; }
    for (int e = lane; e < 128; e += 32) { Bts[e / 16][e % 16] = Bt[e]; Bs[e / 8][e % 8] = B[e]; }
    __syncthreads();

    // fragments: matrix m of an .x4 is rows 8 (m % 2).., columns 8 (m / 2).. of M
    const bf16* row4 = &Ms[(lane % 8) + 8 * ((lane / 8) % 2)][8 * (lane / 16)];
    uint32_t r4[4], r2[2], r1[1];
    ldmatrix_x4<false>(r4, row4);
    for (int m = 0; m < 4; m++) { out->frag[lane][0][m] = r4[m]; }
    ldmatrix_x4<true>(r4, row4);
    for (int m = 0; m < 4; m++) { out->frag[lane][1][m] = r4[m]; }
    ldmatrix_x2<false>(r2, row4);
    for (int m = 0; m < 2; m++) { out->frag[lane][2][m] = r2[m]; }
    ldmatrix_x2<true>(r2, row4);
    for (int m = 0; m < 2; m++) { out->frag[lane][3][m] = r2[m]; }
    ldmatrix_x1<false>(r1, row4);
    out->frag[lane][4][0] = r1[0];
    ldmatrix_x1<true>(r1, row4);
    out->frag[lane][5][0] = r1[0];

    // D = A B + C, B given as B^T (rows n, columns k) and as B (rows k, columns n)
    uint32_t a[4], b[2];
    ldmatrix_x4<false>(a, &As[(lane % 8) + 8 * ((lane / 8) % 2)][8 * (lane / 16)]);
    float acc[4];
    for (int e = 0; e < 4; e++) { acc[e] = C[(g + 8 * (e / 2)) * 8 + 2 * tig + e % 2]; }
    ldmatrix_x2<false>(b, &Bts[lane % 8][8 * ((lane / 8) % 2)]);
    mma_bf16_16816(acc, a, b);
    for (int e = 0; e < 4; e++) { out->d_bt[lane][e] = acc[e]; }
    for (int e = 0; e < 4; e++) { acc[e] = C[(g + 8 * (e / 2)) * 8 + 2 * tig + e % 2]; }
    ldmatrix_x2<true>(b, &Bs[(lane % 8) + 8 * ((lane / 8) % 2)][0]);
    mma_bf16_16816(acc, a, b);
    for (int e = 0; e < 4; e++) { out->d_b[lane][e] = acc[e]; }

    // cp.async: two groups (even lanes, then odd lanes; lane 5 copies only 8 bytes)
    if (lane % 2 == 0) { cp_async_16(copies[lane], src + 16 * lane, 16); }
    cp_async_commit();
    if (lane % 2 == 1) { cp_async_16(copies[lane], src + 16 * lane, lane == 5 ? 8 : 16); }
    cp_async_commit();
    cp_async_wait<1>(); // the even lanes' group is complete
    if (lane % 2 == 0) { for (int e = 0; e < 16; e++) { out->older_group[lane][e] = copies[lane][e]; } }
    cp_async_wait<0>();
    __syncthreads();
    for (int e = 0; e < 16; e++) { out->after_wait[(lane + 1) % 32][e] = copies[(lane + 1) % 32][e]; }
}

static int failures = 0;
static void check(int ok, const char* what) {
    printf("  %-72s %s\n", what, ok ? "ok" : "FAIL");
    if (!ok) { failures++; }
}
static float bf(bf16 x) { return (float)x; }
static uint32_t pair_bits(bf16 lo, bf16 hi) {
    uint16_t l, h;
    memcpy(&l, &lo, 2);
    memcpy(&h, &hi, 2);
    return (uint32_t)l | ((uint32_t)h << 16);
}

int main() {
    if (cuda_device_count() == 0) { printf("mma_check: no CUDA device, skipped\n"); return 0; }
    bf16 A[256], Bt[128], B[128], M[256];
    float C[128];
    unsigned char src[512];
    uint32_t s = 12345;
    for (int i = 0; i < 256; i++) {
        s = s * 1664525u + 1013904223u;
        A[i] = bf16((float)((int)(s >> 24) - 128) / 64.0f);
        M[i] = bf16((float)i);
    }
    for (int i = 0; i < 128; i++) {
        s = s * 1664525u + 1013904223u;
        B[i] = bf16((float)((int)(s >> 24) - 128) / 32.0f); // B[k][n], k = i / 8
        s = s * 1664525u + 1013904223u;
        C[i] = (float)((int)(s >> 20) - 2048) / 256.0f;
    }
    for (int k = 0; k < 16; k++) { for (int n = 0; n < 8; n++) { Bt[n * 16 + k] = B[k * 8 + n]; } }
    for (int i = 0; i < 512; i++) { src[i] = (unsigned char)(i * 7 + 3); }
    MmaCheck* d_out;
    bf16 *d_A, *d_Bt, *d_B, *d_M;
    float* d_C;
    unsigned char* d_src;
    cudaMalloc((void**)&d_out, sizeof(MmaCheck));
    cudaMalloc((void**)&d_A, sizeof(A)); cudaMalloc((void**)&d_Bt, sizeof(Bt)); cudaMalloc((void**)&d_B, sizeof(B));
    cudaMalloc((void**)&d_M, sizeof(M)); cudaMalloc((void**)&d_C, sizeof(C)); cudaMalloc((void**)&d_src, sizeof(src));
    cudaMemcpy(d_A, A, sizeof(A), cudaMemcpyHostToDevice); cudaMemcpy(d_Bt, Bt, sizeof(Bt), cudaMemcpyHostToDevice);
    cudaMemcpy(d_B, B, sizeof(B), cudaMemcpyHostToDevice); cudaMemcpy(d_M, M, sizeof(M), cudaMemcpyHostToDevice);
    cudaMemcpy(d_C, C, sizeof(C), cudaMemcpyHostToDevice); cudaMemcpy(d_src, src, sizeof(src), cudaMemcpyHostToDevice);
    mma_check_kernel<<<1, 32>>>(d_out, d_A, d_Bt, d_B, d_C, d_M, d_src);
    if (cudaDeviceSynchronize() != cudaSuccess) { printf("mma_check: kernel failed: %s\n", cudaGetErrorString(cudaGetLastError())); return 1; }
    MmaCheck* out = (MmaCheck*)malloc(sizeof(MmaCheck));
    cudaMemcpy(out, d_out, sizeof(MmaCheck), cudaMemcpyDeviceToHost);
    printf("mma_check (%s)\n",
#if defined(CUDA_EMULATION)
           "the CPU emulation"
#else
           "GPU"
#endif
    );

    // ldmatrix: lane i, matrix m (rows 8 (m % 2).., columns 8 (m / 2)..); r[m] = (row i / 4, columns
    // 2 (i % 4), +1), or with .trans (rows 2 (i % 4), +1 of column i / 4)
    const int nums[NVARIANTS] = {4, 4, 2, 2, 1, 1};
    const char* names[NVARIANTS] = {"x4", "x4.trans", "x2", "x2.trans", "x1", "x1.trans"};
    for (int v = 0; v < NVARIANTS; v++) {
        int bad = 0;
        for (int i = 0; i < 32; i++) {
            for (int m = 0; m < nums[v]; m++) {
                int r0 = 8 * (m % 2), c0 = 8 * (m / 2);
                uint32_t want = v % 2 == 0 ? pair_bits(M[(r0 + i / 4) * 16 + c0 + 2 * (i % 4)], M[(r0 + i / 4) * 16 + c0 + 2 * (i % 4) + 1])
                                           : pair_bits(M[(r0 + 2 * (i % 4)) * 16 + c0 + i / 4], M[(r0 + 2 * (i % 4) + 1) * 16 + c0 + i / 4]);
                bad += out->frag[i][v][m] != want;
            }
        }
        char what[128];
        snprintf(what, sizeof(what), "ldmatrix.%s: every lane holds the PTX ISA's elements (%d wrong)", names[v], bad);
        check(bad == 0, what);
    }

    // mma: D = A B + C in double, against the fragments of D (row g (+8), columns 2 tig + (0, 1))
    for (int variant = 0; variant < 2; variant++) {
        double num = 0, den = 0;
        for (int i = 0; i < 32; i++) {
            for (int e = 0; e < 4; e++) {
                int r = i / 4 + 8 * (e / 2), c = 2 * (i % 4) + e % 2;
                double ref = C[r * 8 + c];
                for (int k = 0; k < 16; k++) { ref += (double)bf(A[r * 16 + k]) * bf(B[k * 8 + c]); }
                double d = (variant == 0 ? out->d_bt[i][e] : out->d_b[i][e]) - ref;
                num += d * d;
                den += ref * ref;
            }
        }
        double rel = sqrt(num / den);
        char what[128];
        snprintf(what, sizeof(what), "mma m16n8k16 bf16, B by ldmatrix.x2%s: D = A B + C (rel err %.1e, tol 1e-6)",
                 variant == 0 ? " from B^T" : ".trans from B", rel);
        check(rel <= 1e-6, what);
    }

    // cp.async
    int bad = 0;
    for (int l = 0; l < 32; l++) {
        for (int e = 0; e < 16; e++) { bad += out->after_wait[l][e] != (l == 5 && e >= 8 ? 0 : src[16 * l + e]); }
    }
    check(bad == 0, "cp.async: the data (zero-filled past src-size) after wait_group 0 and a barrier");
    bad = 0;
    for (int l = 0; l < 32; l += 2) {
        for (int e = 0; e < 16; e++) { bad += out->older_group[l][e] != src[16 * l + e]; }
    }
    check(bad == 0, "cp.async: wait_group 1 completes the older group (the even lanes' copies)");
    printf("%s\n", failures == 0 ? "ok" : "FAILED");
    return failures == 0 ? 0 : 1;
}
