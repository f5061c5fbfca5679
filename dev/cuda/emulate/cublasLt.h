// a stand-in for cuBLASLt: column-major D = alpha op(A) op(B) + beta C, with the bias and GELU
// (tanh approximation, pre-activation kept in the aux buffer) epilogues, as plain loops with
// fp32 sums; matrices in fp32 or bf16 (the layout's type), the bias and aux buffers in D's type
// (cuBLASLt's defaults)
#pragma once
#include <cstdint>
#include "cublas_v2.h"
#include "cuda_bf16.h"
typedef void* cublasLtHandle_t;
struct EmuDesc { int ta = 0, tb = 0, epi = 0; const void* bias = nullptr; void* aux = nullptr; int64_t aux_ld = 0; };
struct EmuLayout { int type; uint64_t rows, cols; int64_t ld; };
typedef EmuDesc* cublasLtMatmulDesc_t;
typedef EmuLayout* cublasLtMatrixLayout_t;
typedef void* cublasLtMatmulPreference_t;
struct cublasLtMatmulAlgo_t { int dummy; };
struct cublasLtMatmulHeuristicResult_t { cublasLtMatmulAlgo_t algo; };
typedef int cublasLtEpilogue_t;
enum { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4, CUBLASLT_EPILOGUE_GELU_AUX = 160, CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 164 };
typedef int cublasLtMatmulDescAttributes_t;
typedef int cublasLtMatmulPreferenceAttributes_t;
enum { CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4, CUBLASLT_MATMUL_DESC_EPILOGUE = 7, CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
       CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 10, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 11 };
enum { CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
       CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8 };
static inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) { *h = nullptr; return 0; }
static inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return 0; }
static inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, int, int) { *d = new EmuDesc(); return 0; }
static inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { delete d; return 0; }
static inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, int a, const void* v, size_t) {
    switch (a) {
        case CUBLASLT_MATMUL_DESC_TRANSA: d->ta = *(const int*)v; break;
        case CUBLASLT_MATMUL_DESC_TRANSB: d->tb = *(const int*)v; break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE: d->epi = *(const int*)v; break;
        case CUBLASLT_MATMUL_DESC_BIAS_POINTER: d->bias = *(const void* const*)v; break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: d->aux = *(void* const*)v; break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: d->aux_ld = *(const int64_t*)v; break;
        default: return 1;
    }
    return 0;
}
static inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, int type, uint64_t rows, uint64_t cols, int64_t ld) {
    if (ld < (int64_t)rows) return 7;
    *l = new EmuLayout{type, rows, cols, ld}; return 0;
}
static inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { delete l; return 0; }
static inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) { *p = nullptr; return 0; }
static inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t) { return 0; }
static inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, int, const void*, size_t) { return 0; }
static inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
    cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t*, int* found) { *found = 1; return 0; }
static inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void* alpha, const void* A, cublasLtMatrixLayout_t la,
    const void* B, cublasLtMatrixLayout_t lb, const void* beta, const void* C, cublasLtMatrixLayout_t lc, void* D, cublasLtMatrixLayout_t ldd,
    const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t) {
    uint64_t m = ldd->rows, n = ldd->cols, k = d->ta ? la->rows : la->cols;
    // shapes must agree
    if ((d->ta ? la->cols : la->rows) != m || (d->tb ? lb->rows : lb->cols) != n || (d->tb ? lb->cols : lb->rows) != k || lc->rows != m || lc->cols != n) {
        fprintf(stderr, "emu cublasLtMatmul: inconsistent shapes m=%lu n=%lu k=%lu\n", m, n, k); abort(); }
    if (C != D) { fprintf(stderr, "emu: C != D\n"); abort(); }
    if (la->type != lb->type) { fprintf(stderr, "emu cublasLtMatmul: A and B of different types\n"); abort(); }
    // element p of a buffer of the given type, and stores into one
    auto get = [](const void* x, int type, uint64_t p) -> float {
        return type == CUDA_R_16BF ? (float)((const __nv_bfloat16*)x)[p] : ((const float*)x)[p];
    };
    auto put = [](void* x, int type, uint64_t p, float v) {
        if (type == CUDA_R_16BF) { ((__nv_bfloat16*)x)[p] = __nv_bfloat16(v); } else { ((float*)x)[p] = v; }
    };
    int dt = ldd->type;
    float al = *(const float*)alpha, be = *(const float*)beta;
    // op(A) as m rows of k, op(B) as n rows of k (contiguous), then dot products
    std::vector<float> at(m * k), bt(n * k);
    for (uint64_t i = 0; i < m; i++) for (uint64_t p = 0; p < k; p++) at[i * k + p] = get(A, la->type, d->ta ? p + i * la->ld : i + p * la->ld);
    for (uint64_t j = 0; j < n; j++) for (uint64_t p = 0; p < k; p++) bt[j * k + p] = get(B, lb->type, d->tb ? j + p * lb->ld : p + j * lb->ld);
    #pragma omp parallel for schedule(static)
    for (uint64_t j = 0; j < n; j++) {
        for (uint64_t i = 0; i < m; i++) {
            const float* x = &at[i * k]; const float* y = &bt[j * k];
            float acc = 0;
            #pragma omp simd reduction(+:acc)
            for (uint64_t p = 0; p < k; p++) acc += x[p] * y[p];
            float v = al * acc + (be != 0 ? be * get(D, dt, i + j * ldd->ld) : 0.0f);
            if (d->epi == CUBLASLT_EPILOGUE_BIAS || d->epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) v += get(d->bias, dt, i);
            if (d->epi == CUBLASLT_EPILOGUE_GELU_AUX || d->epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
                put(d->aux, dt, i + j * d->aux_ld, v);
                v = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
            }
            put(D, dt, i + j * ldd->ld, v);
        }
    }
    return 0;
}
