/*
A stand-in for cuBLASLt (the CPU emulation, cuda_runtime.h), as strict as the real library
(the enum values are the real header's: enums.cpp compares them):

  D = alpha op(A) op(B) + beta C, column-major, with the epilogues BIAS (bias added to each
  column), GELU_AUX (the pre-activation kept in the aux buffer, GELU's tanh approximation
  applied) and GELU_AUX_BIAS, as plain loops with fp32 sums. The bias and aux buffers are
  in D's type (the library's default). The library leaves GELU's approximation open:
  EMU_GELU=approx replaces tanh by a different approximation, one whose relative error is
  the PTX ISA's bound for tanh.approx.f32 (2^-11), to show that the tests' tolerances hold
  for any.

  cublasLtMatmulDescSetAttribute, cublasLtMatmulPreferenceSetAttribute: sizeInBytes must be
  the attribute's type's size (int32_t, uint32_t, int64_t, uint64_t or a pointer), else
  CUBLAS_STATUS_INVALID_VALUE.
  cublasLtMatmulAlgoGetHeuristic: no algorithm (CUBLAS_STATUS_NOT_SUPPORTED, 0 results) for
  a compute and scale type pair or (A, B, C, D) types outside cublasLtMatmul's table (here:
  CUBLAS_COMPUTE_32F with CUDA_R_32F scale; A = B in fp32, bf16 or fp16; C = D in A's type
  or fp32 (fp32 A: fp32 only)), an epilogue the emulation does not know, a BIAS epilogue
  without a bias pointer, an AUX epilogue without an aux pointer or with AUX_LD below D's
  rows or not a multiple of 8; shapes that do not agree are CUBLAS_STATUS_INVALID_VALUE.
  The algorithm found remembers the alignments it was chosen for (the preferences for A,
  B, C, D; the bias and aux pointers as set then), and needs min(1 MiB, the preference's
  maximum) of workspace.
  cublasLtMatmul: CUBLAS_STATUS_INVALID_VALUE for an algorithm of other types or another
  epilogue, a pointer less aligned than the algorithm was chosen for, a workspace smaller
  than it needs (or not 256-byte aligned, or not device memory). Each matrix, the bias
  and the aux buffer must lie inside a device allocation (else a report, as memcheck would
  give for the library's kernel). The call is queued on its stream; it writes over the
  workspace it was given.
*/
#pragma once
#include <cstdint>
#include "cublas_v2.h"
#include "cuda_bf16.h"

struct EmuLtContext { int live; };
typedef EmuLtContext* cublasLtHandle_t;
struct EmuDesc {
    int compute, scale, ta = 0, tb = 0, epi = 1;
    const void* bias = nullptr;
    void* aux = nullptr;
    int64_t aux_ld = 0;
};
struct EmuLayout { int type; uint64_t rows, cols; int64_t ld; };
struct EmuPref { uint64_t workspace = 0; uint32_t align[4] = {256, 256, 256, 256}; };
typedef EmuDesc* cublasLtMatmulDesc_t;
typedef EmuLayout* cublasLtMatrixLayout_t;
typedef EmuPref* cublasLtMatmulPreference_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;
typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4, CUBLASLT_EPILOGUE_GELU = 32, CUBLASLT_EPILOGUE_GELU_AUX = 160,
    CUBLASLT_EPILOGUE_GELU_BIAS = 36, CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 164,
} cublasLtEpilogue_t;
typedef enum {
    CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0, CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1, CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4, CUBLASLT_MATMUL_DESC_EPILOGUE = 7, CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
} cublasLtMatmulDescAttributes_t;
typedef enum {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
} cublasLtMatmulPreferenceAttributes_t;

static EmuVec<EmuLtContext*> emu_lt_handles; // every handle made, live or destroyed
EMU_NOCHECK static cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
    if (emu_no_device() != cudaSuccess) { return CUBLAS_STATUS_NOT_INITIALIZED; }
    *h = new EmuLtContext{1};
    emu_lt_handles.push_back(*h);
    return CUBLAS_STATUS_SUCCESS;
}
EMU_NOCHECK static bool emu_lt_ok(cublasLtHandle_t h) { return std::find(emu_lt_handles.begin(), emu_lt_handles.end(), h) != emu_lt_handles.end() && h->live; }
EMU_NOCHECK static cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    if (!emu_lt_ok(h)) { return CUBLAS_STATUS_NOT_INITIALIZED; }
    h->live = 0;
    return CUBLAS_STATUS_SUCCESS;
}
EMU_NOCHECK static cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute, cudaDataType_t scale) {
    *d = new EmuDesc();
    (*d)->compute = compute;
    (*d)->scale = scale;
    return CUBLAS_STATUS_SUCCESS;
}
EMU_NOCHECK static cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { delete d; return CUBLAS_STATUS_SUCCESS; }

// an attribute's value, when sizeInBytes is its type's size
EMU_NOCHECK static bool emu_lt_size(const char* api, int attr, size_t got, size_t want) {
    if (got == want) { return true; }
    emu_api_note(api, "attribute %d takes %zu bytes, not %zu", attr, want, got);
    return false;
}
EMU_NOCHECK static cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void* v, size_t n) {
    const char* api = "cublasLtMatmulDescSetAttribute";
    switch (a) {
        case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: if (!emu_lt_size(api, a, n, sizeof(int32_t))) { break; } d->compute = *(const int32_t*)v; return CUBLAS_STATUS_SUCCESS;
        case CUBLASLT_MATMUL_DESC_SCALE_TYPE: if (!emu_lt_size(api, a, n, sizeof(int32_t))) { break; } d->scale = *(const int32_t*)v; return CUBLAS_STATUS_SUCCESS;
        case CUBLASLT_MATMUL_DESC_TRANSA: if (!emu_lt_size(api, a, n, sizeof(int32_t))) { break; } d->ta = *(const int32_t*)v; return CUBLAS_STATUS_SUCCESS;
        case CUBLASLT_MATMUL_DESC_TRANSB: if (!emu_lt_size(api, a, n, sizeof(int32_t))) { break; } d->tb = *(const int32_t*)v; return CUBLAS_STATUS_SUCCESS;
        case CUBLASLT_MATMUL_DESC_EPILOGUE: if (!emu_lt_size(api, a, n, sizeof(uint32_t))) { break; } d->epi = (int)*(const uint32_t*)v; return CUBLAS_STATUS_SUCCESS;
        case CUBLASLT_MATMUL_DESC_BIAS_POINTER: if (!emu_lt_size(api, a, n, sizeof(void*))) { break; } d->bias = *(const void* const*)v; return CUBLAS_STATUS_SUCCESS;
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: if (!emu_lt_size(api, a, n, sizeof(void*))) { break; } d->aux = *(void* const*)v; return CUBLAS_STATUS_SUCCESS;
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: if (!emu_lt_size(api, a, n, sizeof(int64_t))) { break; } d->aux_ld = *(const int64_t*)v; return CUBLAS_STATUS_SUCCESS;
        default: emu_api_note(api, "attribute %d is not emulated", (int)a);
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}
EMU_NOCHECK static cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld) {
    if (ld < (int64_t)rows) { emu_api_note("cublasLtMatrixLayoutCreate", "leading dimension %lld below the %llu rows", (long long)ld, (unsigned long long)rows); return CUBLAS_STATUS_INVALID_VALUE; }
    *l = new EmuLayout{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
EMU_NOCHECK static cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { delete l; return CUBLAS_STATUS_SUCCESS; }
EMU_NOCHECK static cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) { *p = new EmuPref(); return CUBLAS_STATUS_SUCCESS; }
EMU_NOCHECK static cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { delete p; return CUBLAS_STATUS_SUCCESS; }
EMU_NOCHECK static cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, const void* v, size_t n) {
    const char* api = "cublasLtMatmulPreferenceSetAttribute";
    if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
        if (!emu_lt_size(api, a, n, sizeof(uint64_t))) { return CUBLAS_STATUS_INVALID_VALUE; }
        p->workspace = *(const uint64_t*)v;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (a >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
        if (!emu_lt_size(api, a, n, sizeof(uint32_t))) { return CUBLAS_STATUS_INVALID_VALUE; }
        uint32_t al = *(const uint32_t*)v;
        if (al == 0 || (al & (al - 1)) != 0) { emu_api_note(api, "alignment %u is not a power of two", al); return CUBLAS_STATUS_INVALID_VALUE; }
        p->align[a - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = al;
        return CUBLAS_STATUS_SUCCESS;
    }
    emu_api_note(api, "attribute %d is not emulated", (int)a);
    return CUBLAS_STATUS_INVALID_VALUE;
}

// what an algorithm was chosen for (cublasLtMatmulAlgo_t's data)
enum { EMU_ALGO_MAGIC = 0x656d756c74616c67ull };
struct EmuAlgo { uint64_t magic; int32_t types[4], epi; uint32_t align[6]; uint64_t workspace; };
static_assert(sizeof(EmuAlgo) <= sizeof(cublasLtMatmulAlgo_t), "the algorithm fits the library's opaque type");
EMU_NOCHECK static inline int emu_elt(int type) { return type == CUDA_R_32F ? 4 : 2; }
// the alignment of a pointer, up to 256
EMU_NOCHECK static inline uint32_t emu_align_of(const void* p) { uint32_t a = 1; while (a < 256 && (uintptr_t)p % (2 * a) == 0) { a *= 2; } return a; }
EMU_NOCHECK static inline bool emu_epi_bias(int e) { return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
EMU_NOCHECK static inline bool emu_epi_gelu(int e) { return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
EMU_NOCHECK static inline bool emu_epi_aux(int e) { return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }

// the shapes and types of a matmul: CUBLAS_STATUS_SUCCESS, INVALID_VALUE (shapes) or
// NOT_SUPPORTED (types, epilogue), with a note
EMU_NOCHECK static cublasStatus_t emu_lt_check(const char* api, const EmuDesc* d, const EmuLayout* la, const EmuLayout* lb, const EmuLayout* lc, const EmuLayout* ld) {
    if (d == nullptr || la == nullptr || lb == nullptr || lc == nullptr || ld == nullptr) { emu_api_note(api, "a descriptor or layout is NULL"); return CUBLAS_STATUS_INVALID_VALUE; }
    uint64_t m = ld->rows, n = ld->cols, k = d->ta ? la->rows : la->cols;
    if ((d->ta ? la->cols : la->rows) != m || (d->tb ? lb->rows : lb->cols) != n || (d->tb ? lb->cols : lb->rows) != k || lc->rows != m || lc->cols != n) {
        emu_api_note(api, "shapes do not agree: op(A) %llux%llu, op(B) %llux%llu, C %llux%llu, D %llux%llu", (unsigned long long)(d->ta ? la->cols : la->rows),
                     (unsigned long long)k, (unsigned long long)(d->tb ? lb->cols : lb->rows), (unsigned long long)(d->tb ? lb->rows : lb->cols),
                     (unsigned long long)lc->rows, (unsigned long long)lc->cols, (unsigned long long)m, (unsigned long long)n);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    bool pair = (d->compute == CUBLAS_COMPUTE_32F || d->compute == CUBLAS_COMPUTE_32F_FAST_16BF || d->compute == CUBLAS_COMPUTE_32F_FAST_TF32) && d->scale == CUDA_R_32F;
    if (!pair) { emu_api_note(api, "compute type %d with scale type %d is not in cublasLtMatmul's table", d->compute, d->scale); return CUBLAS_STATUS_NOT_SUPPORTED; }
    int ta = la->type, tc = lc->type;
    bool types = ta == lb->type && tc == ld->type && (ta == CUDA_R_16BF || ta == CUDA_R_16F || ta == CUDA_R_32F) && (tc == ta || tc == CUDA_R_32F);
    if (!types) { emu_api_note(api, "types A %d, B %d, C %d, D %d are not in cublasLtMatmul's table", ta, lb->type, tc, ld->type); return CUBLAS_STATUS_NOT_SUPPORTED; }
    if (d->epi != CUBLASLT_EPILOGUE_DEFAULT && !emu_epi_bias(d->epi) && !emu_epi_gelu(d->epi)) { emu_api_note(api, "epilogue %d is not emulated", d->epi); return CUBLAS_STATUS_NOT_SUPPORTED; }
    return CUBLAS_STATUS_SUCCESS;
}

EMU_NOCHECK static cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t la,
    cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld, cublasLtMatmulPreference_t p, int requested,
    cublasLtMatmulHeuristicResult_t* results, int* found) {
    const char* api = "cublasLtMatmulAlgoGetHeuristic";
    *found = 0;
    if (!emu_lt_ok(h)) { return CUBLAS_STATUS_NOT_INITIALIZED; }
    if (p == nullptr || requested < 1) { emu_api_note(api, "no preference, or no result asked for"); return CUBLAS_STATUS_INVALID_VALUE; }
    cublasStatus_t st = emu_lt_check(api, d, la, lb, lc, ld);
    if (st != CUBLAS_STATUS_SUCCESS) { return st; }
    const char* none = nullptr;
    if (emu_epi_bias(d->epi) && d->bias == nullptr) { none = "a BIAS epilogue without a bias pointer"; }
    else if (emu_epi_aux(d->epi) && d->aux == nullptr) { none = "an AUX epilogue without an aux pointer"; }
    else if (emu_epi_aux(d->epi) && (d->aux_ld < (int64_t)ld->rows || d->aux_ld % 8 != 0)) { none = "AUX_LD below D's rows or not a multiple of 8"; }
    if (none != nullptr) { emu_api_note(api, "no algorithm: %s", none); return CUBLAS_STATUS_NOT_SUPPORTED; }
    EmuAlgo a = {};
    a.magic = EMU_ALGO_MAGIC;
    a.types[0] = la->type; a.types[1] = lb->type; a.types[2] = lc->type; a.types[3] = ld->type;
    a.epi = d->epi;
    for (int i = 0; i < 4; i++) { a.align[i] = p->align[i]; }
    a.align[4] = emu_epi_bias(d->epi) ? emu_align_of(d->bias) : 1;
    a.align[5] = emu_epi_aux(d->epi) ? emu_align_of(d->aux) : 1;
    a.workspace = min(p->workspace, (uint64_t)1 << 20);
    memset(&results[0], 0, sizeof(results[0]));
    memcpy(results[0].algo.data, &a, sizeof(a));
    results[0].workspaceSize = a.workspace;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *found = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// the extent of a column-major matrix (or vector) inside one device allocation, or a report
EMU_NOCHECK static void emu_lt_extent(const char* what, const void* p, uint64_t rows, uint64_t cols, int64_t ld, int type) {
    size_t bytes = (size_t)(ld * (int64_t)(cols - 1) + (int64_t)rows) * emu_elt(type);
    if (emu_inside(p, bytes, EMU_DEVICE)) { return; }
    char where[256];
    emu_describe((uintptr_t)p, bytes, where, sizeof(where));
    emu_fail("cublasLtMatmul: %s of %zu bytes at %p is not inside one device allocation (%s)", what, bytes, p, where);
}

// GELU, tanh approximation (GPT-2's); EMU_GELU=approx: tanh with the relative error of
// tanh.approx.f32's bound (2^-11) towards zero
EMU_NOCHECK static float emu_gelu(float v) {
    static int approx = -1;
    if (approx < 0) {
        const char* g = getenv("EMU_GELU");
        approx = g != nullptr && strcmp(g, "approx") == 0;
        if (g != nullptr && !approx && strcmp(g, "tanh") != 0) { fprintf(stderr, "emu: EMU_GELU must be tanh or approx\n"); emu_exit(); }
    }
    float t = tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v));
    if (approx) { t *= 1.0f - 1.0f / 2048.0f; }
    return 0.5f * v * (1.0f + t);
}

// one queued matmul, run when its stream does: op(A) as m rows of k and op(B) as n rows of
// k (contiguous), then dot products in fp32, then the epilogue
struct EmuLtCall {
    EmuDesc d;
    EmuLayout la, lb, lc, ld;
    const void *A, *B, *C;
    void* D;
    float alpha, beta;
    void* workspace;
    uint64_t workspace_bytes;
};
EMU_NOCHECK static inline float emu_lt_get(const void* x, int type, uint64_t p) {
    return type == CUDA_R_16BF ? (float)((const __nv_bfloat16*)x)[p] : ((const float*)x)[p];
}
EMU_NOCHECK static inline void emu_lt_put(void* x, int type, uint64_t p, float v) {
    if (type == CUDA_R_16BF) { ((__nv_bfloat16*)x)[p] = __nv_bfloat16(v); } else { ((float*)x)[p] = v; }
}
EMU_NOCHECK static void emu_lt_run(const EmuLtCall& c) {
    uint64_t m = c.ld.rows, n = c.ld.cols, k = c.d.ta ? c.la.rows : c.la.cols;
    float* at = (float*)malloc((m * k + n * k + m * n) * sizeof(float) + 1);
    float* bt = at + m * k;
    float* out = bt + n * k;
    for (uint64_t i = 0; i < m; i++) for (uint64_t p = 0; p < k; p++) at[i * k + p] = emu_lt_get(c.A, c.la.type, c.d.ta ? p + i * c.la.ld : i + p * c.la.ld);
    for (uint64_t j = 0; j < n; j++) for (uint64_t p = 0; p < k; p++) bt[j * k + p] = emu_lt_get(c.B, c.lb.type, c.d.tb ? j + p * c.lb.ld : p + j * c.lb.ld);
    #pragma omp parallel for schedule(static)
    for (uint64_t j = 0; j < n; j++) {
        for (uint64_t i = 0; i < m; i++) {
            const float* x = &at[i * k];
            const float* y = &bt[j * k];
            float acc = 0;
            #pragma omp simd reduction(+:acc)
            for (uint64_t p = 0; p < k; p++) acc += x[p] * y[p];
            out[i + j * m] = c.alpha * acc + (c.beta != 0 ? c.beta * emu_lt_get(c.C, c.lc.type, i + j * c.lc.ld) : 0.0f);
        }
    }
    if (c.workspace_bytes > 0) { memset(c.workspace, 0xff, c.workspace_bytes); } // the library's scratch
    for (uint64_t j = 0; j < n; j++) {
        for (uint64_t i = 0; i < m; i++) {
            float v = out[i + j * m];
            if (emu_epi_bias(c.d.epi)) { v += emu_lt_get(c.d.bias, c.ld.type, i); }
            if (emu_epi_aux(c.d.epi)) { emu_lt_put(c.d.aux, c.ld.type, i + j * c.d.aux_ld, v); }
            if (emu_epi_gelu(c.d.epi)) { v = emu_gelu(v); }
            emu_lt_put(c.D, c.ld.type, i + j * c.ld.ld, v);
        }
    }
    free(at);
}

EMU_NOCHECK static cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void* alpha, const void* A, cublasLtMatrixLayout_t la,
    const void* B, cublasLtMatrixLayout_t lb, const void* beta, const void* C, cublasLtMatrixLayout_t lc, void* D, cublasLtMatrixLayout_t ldd,
    const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    const char* api = "cublasLtMatmul";
    if (!emu_lt_ok(h)) { return CUBLAS_STATUS_NOT_INITIALIZED; }
    cublasStatus_t st = emu_lt_check(api, d, la, lb, lc, ldd);
    if (st != CUBLAS_STATUS_SUCCESS) { return st; }
    EmuAlgo a;
    memcpy(&a, algo->data, sizeof(a));
    if (a.magic != EMU_ALGO_MAGIC || a.types[0] != la->type || a.types[1] != lb->type || a.types[2] != lc->type || a.types[3] != ldd->type || a.epi != d->epi) {
        emu_api_note(api, "the algorithm was not found for these types and this epilogue");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const void* ptrs[6] = {A, B, C, D, emu_epi_bias(d->epi) ? d->bias : nullptr, emu_epi_aux(d->epi) ? d->aux : nullptr};
    const char* names[6] = {"A", "B", "C", "D", "the bias", "the aux buffer"};
    for (int i = 0; i < 6; i++) {
        if (emu_align_of(ptrs[i]) < a.align[i]) {
            emu_api_note(api, "%s at %p is %u-byte aligned; the algorithm was chosen for %u-byte alignment", names[i], ptrs[i], emu_align_of(ptrs[i]), a.align[i]);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    if (workspace_bytes < a.workspace || (a.workspace > 0 && (workspace == nullptr || (uintptr_t)workspace % 256 != 0 || !emu_inside(workspace, a.workspace, EMU_DEVICE)))) {
        emu_api_note(api, "workspace of %zu bytes at %p: the algorithm needs %llu bytes of 256-byte aligned device memory", workspace_bytes, workspace, (unsigned long long)a.workspace);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!emu_stream_ok(stream)) { emu_api_note(api, "%p is not a live stream", (void*)stream); return CUBLAS_STATUS_INVALID_VALUE; }
    uint64_t m = ldd->rows, n = ldd->cols;
    emu_lt_extent("A", A, la->rows, la->cols, la->ld, la->type);
    emu_lt_extent("B", B, lb->rows, lb->cols, lb->ld, lb->type);
    emu_lt_extent("C", C, lc->rows, lc->cols, lc->ld, lc->type);
    emu_lt_extent("D", D, ldd->rows, ldd->cols, ldd->ld, ldd->type);
    if (emu_epi_bias(d->epi)) { emu_lt_extent("the bias", d->bias, m, 1, (int64_t)m, ldd->type); }
    if (emu_epi_aux(d->epi)) { emu_lt_extent("the aux buffer", d->aux, m, n, d->aux_ld, ldd->type); }
    // what the call is: read now (the descriptors, alpha and beta), run when its stream does
    EmuLtCall call = {*d, *la, *lb, *lc, *ldd, A, B, C, D, *(const float*)alpha, *(const float*)beta, workspace, a.workspace};
    emu_enqueue(stream, [call]() EMU_NOCHECK { emu_lt_run(call); });
    return CUBLAS_STATUS_SUCCESS;
}
