/*
GPT-2 training on NVIDIA GPUs, with the positional encoding chosen at compile time:
the fast path of the same computation that train_gpt2.c specifies, encoding by
encoding. Same flags, files, step line and evaluation (llmc/driver.h); test_gpt2.cu
holds the two paths equal.

Build and run:  make train_gpt2cu PE=cable && ./train_gpt2cu -e small -b 8 -t 1024
                make train_gpt2cu PE=cable PRECISION=FP32   (everything in fp32)
                mpirun -np 4 ./train_gpt2cu ... [-z 1]      (one GPU per process)

Precision (llmc/cuda_common.cuh): bf16 activations and bf16 copies of the weights for
the kernels, fp32 master weights, gradients and AdamW moments (llm.c's scheme), or
fp32 everywhere with PRECISION=FP32. Checkpoints are always written in fp32 (version
3) from the master weights.

Memory: attention is one fused kernel per direction with the positional bias
computed inside it (llmc/attention_bias.cuh), so no T x T tensor exists; the
classifier works on chunks of CLASSIFIER_CHUNK rows; in evaluation only one layer's
activations are kept; the backward pass keeps gradient buffers for one layer. An
evaluation of 16k-token windows needs memory linear in the length.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llmc/utils.h"
#include "llmc/pe.h"
#include "llmc/model.h"
#include "llmc/dataloader.h"
#include "llmc/multiprocess.h"
#include "llmc/cuda_common.cuh"
#include "llmc/attention_bias.cuh"
#include "llmc/attention_dape.cuh"
#ifdef USE_NCCL
#include <nccl.h>
#endif

// rows of the classifier processed at once: bounds the logits to CLASSIFIER_CHUNK x Vp
#define CLASSIFIER_CHUNK 2048
// parameter tensors start at multiples of this many elements on the device (aligned
// pointers for cuBLASLt); the checkpoint layout has no gaps
#define PARAM_ALIGN 64
// rows chunks of the column sums (bias and layernorm parameter gradients)
#define COLUMN_CHUNKS 64
#define NORM_BLOCKS 256

// ----------------------------------------------------------------------------
// the process's GPU: device, stream, cuBLASLt, and NCCL for multi-process runs

#ifdef USE_NCCL
static void nccl_check_(ncclResult_t r, const char* what, const char* file, int line) {
    if (r != ncclSuccess) { fatal("NCCL error '%s' in %s (%s:%d)", ncclGetErrorString(r), what, file, line); }
}
#define ncclCheck(call) nccl_check_((call), #call, __FILE__, __LINE__)
#endif

typedef struct {
    int initialized;
    int device;
    cudaDeviceProp prop;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void* workspace;
    size_t workspace_size;
    int rank, world;
#ifdef USE_NCCL
    ncclComm_t nccl;
#endif
} CudaContext;
static CudaContext ctx;
// ZeRO stage (-z): the driver checks the flag but keeps it; main() reads it for the model
static int zero_stage_flag = 0;

// arch_probe_kernel: does nothing; cudaFuncGetAttributes on it fails where the binary holds no
// code this GPU runs (machine code of its architecture, or PTX the driver can compile for it)
__global__ void arch_probe_kernel() {}

// the architectures this binary was built for (nvcc's __CUDA_ARCH_LIST__, e.g. 900)
#define CUDA_STR_(x) #x
#define CUDA_STR(x) CUDA_STR_(x)
#if defined(__CUDA_ARCH_LIST__)
#define BUILT_ARCHS CUDA_STR(__CUDA_ARCH_LIST__)
#else
#define BUILT_ARCHS "?"
#endif

static void cuda_context_init(void) {
    if (ctx.initialized) { return; }
    ctx.rank = 0;
    ctx.world = 1;
#ifdef USE_MPI
    int mpi_on = 0;
    MPI_Initialized(&mpi_on);
    if (mpi_on) {
        MPI_Comm_rank(MPI_COMM_WORLD, &ctx.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &ctx.world);
    }
#endif
    int count = cuda_device_count();
    if (count == 0) { fatal("no CUDA device available: the CUDA trainer needs an NVIDIA GPU"); }
    // one GPU per process: the local rank picks it
    const char* local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (local == NULL) { local = getenv("MPI_LOCALRANKID"); }
    if (local == NULL) { local = getenv("SLURM_LOCALID"); }
    ctx.device = (local != NULL ? atoi(local) : ctx.rank) % count;
    cudaCheck(cudaSetDevice(ctx.device));
    cudaCheck(cudaGetDeviceProperties(&ctx.prop, ctx.device));
    if (ctx.prop.major < 8) {
        fatal("GPU %s has compute capability %d.%d; the CUDA trainer needs 8.0 or newer (bf16)",
              ctx.prop.name, ctx.prop.major, ctx.prop.minor);
    }
    cudaFuncAttributes probe;
    if (cudaFuncGetAttributes(&probe, arch_probe_kernel) != cudaSuccess) {
        (void)cudaGetLastError();
        fatal("this binary was built for compute capability %s, which GPU %s (%d.%d) cannot run: rebuild with "
              "make ... CUDA_ARCH=\"-gencode arch=compute_%d%d,code=sm_%d%d\"", BUILT_ARCHS,
              ctx.prop.name, ctx.prop.major, ctx.prop.minor, ctx.prop.major, ctx.prop.minor, ctx.prop.major, ctx.prop.minor);
    }
    cudaCheck(cudaStreamCreate(&ctx.stream));
    cublasCheck(cublasLtCreate(&ctx.lt));
    ctx.workspace_size = 32u << 20;
    ctx.workspace = cuda_malloc(ctx.workspace_size, "the cuBLASLt workspace");
#ifdef USE_NCCL
    if (ctx.world > 1) { // bootstrapped through MPI: rank 0 makes the id, everyone joins
        ncclUniqueId id;
        if (ctx.rank == 0) { ncclCheck(ncclGetUniqueId(&id)); }
        MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
        ncclCheck(ncclCommInitRank(&ctx.nccl, ctx.world, id, ctx.rank));
    }
#endif
    ctx.initialized = 1;
}

static void matmul_plans_free(void);
static void cuda_context_free(void) {
    if (!ctx.initialized) { return; }
    cudaCheck(cudaStreamSynchronize(ctx.stream));
    matmul_plans_free();
#ifdef USE_NCCL
    if (ctx.world > 1) { ncclCheck(ncclCommDestroy(ctx.nccl)); }
#endif
    cuda_free(&ctx.workspace);
    cublasCheck(cublasLtDestroy(ctx.lt));
    cudaCheck(cudaStreamDestroy(ctx.stream));
    ctx.initialized = 0;
}

// ----------------------------------------------------------------------------
// the model's tensors: parameters (the checkpoint layout, llmc/model.h, with each tensor
// aligned on the device) and activations

// a pointer per tensor of llmc/model.h's PARAMETER_TENSORS (GPT-2's, the encoding's, DAPE's)
template<class T>
struct TensorSet {
#define P_FIELD_(NAME, field, decay, size, init) T* field;
    PARAMETER_TENSORS(P_FIELD_)
};

// points the tensors into one allocation at the given element offsets
template<class T>
static void point_parameters(TensorSet<T>* t, T* memory, const size_t* offsets) {
#define P_POINT_(NAME, field, decay, size, init) t->field = memory + offsets[P_##NAME];
    PARAMETER_TENSORS(P_POINT_)
}

// Activations for a capacity of N = B*T tokens and NL stored layers: NL = L when
// training, NL = 1 in evaluation (each layer overwrites the last). Per-layer tensors
// are indexed with a stride of N tokens (pe_stride for the (N, NH) ones).
typedef struct {
    floatX* encoded;   // (N, C) token + position embeddings
    floatX* ln1;       // (NL, N, C)
    float* ln1_mean;   // (NL, N)
    float* ln1_rstd;   // (NL, N)
    floatX* qkv;       // (NL, N, 3C) q and k after the PE's rotation (rope, xpos)
    floatX* atty;      // (NL, N, C)
    float* att_lse;    // (NL, B, NH, T) log-sum-exp of each attention row
    floatX* residual2; // (NL, N, C)
    floatX* ln2;       // (NL, N, C)
    float* ln2_mean;   // (NL, N)
    float* ln2_rstd;   // (NL, N)
    floatX* fch;       // (NL, N, 4C) before GELU
    floatX* fch_gelu;  // (NL, N, 4C)
    floatX* residual3; // (NL, N, C)
    floatX* lnf;       // (N, C)
    float* lnf_mean;   // (N)
    float* lnf_rstd;   // (N)
    float* losses;     // (N) per-token cross-entropy
    float* pe_a;       // (NL, N, NH) CABLE: increment pre-activation x W_b + b_b
    float* pe_s;       // (NL, N, NH) CABLE: S, cumulative sum of the increments (fp32)
    float* pe_w;       // (NL, N, NH) cable: the per-token weight w = x W_w + b_w
    floatX* proj;      // (N, C) an attention or MLP projection before its residual add
    floatX* logits;    // (min(N, CLASSIFIER_CHUNK), Vp) classifier scratch
    floatX* pe_rel;    // (T, C) txl: the layer's projected sinusoids P = R W_r^T
    floatX* pe_lnf;    // (N, C) PE_STREAMS 2 (complex_order): the real stream's lnf (lnf holds the classifier's input)
    int* positions;    // (draws, B, T) the positions of the last forward pass, given or drawn (llmc/model.h)
    int* inputs;       // (N)
    int* targets;      // (N)
} ActivationTensors;

// gradient buffers of the backward pass: one layer's worth, reused layer after layer
typedef struct {
    floatX* dres;      // (N, C) gradient of the residual stream
    floatX* dbig;      // (N, 4C) d fch_gelu, d fch, then d qkv
    floatX* dsmall;    // (N, C) d lnf, d ln2, d atty, d ln1
    float* att_D;      // (B, NH, T) dout . out of each attention row
    float* pe_dS;      // (N, NH) CABLE: dL/dS
    float* pe_dw;      // (N, NH) cable: dL/dw
    floatX* pe_dx;     // (N, NH) CABLE: the small layers' output gradient as a matmul input
    float* pe_partials; // (B * NH * key blocks, PE_PAR_N) per-block PE parameter gradients (DAPE: its slots)
    floatX* pe_drel;   // (T, C) txl: dL/dP
    float* att_dkv;    // (N, 2C) DAPE, CoPE: dk, dv in fp32
    float* pe_scratch; // (pe_attention_scratch) PE_ATTENTION's backward scratch: CoPE's dL/d(q.E) of the rows
                       // of one backward launch (cope_dz_rows, P); txl's per-block dr_w, dr_r partials
    float* dape_partials; // (query blocks, DAPE's parameters of a layer) DAPE: per-block gradients
} GradScratch;

typedef struct {
    GPT2Config config;
    // parameters: bf16 (or fp32) copies for the kernels, fp32 gradients, and this rank's
    // shard of the fp32 master weights and AdamW moments (everything, without ZeRO)
    size_t param_sizes[NUM_PARAMETER_TENSORS];
    size_t param_offsets[NUM_PARAMETER_TENSORS]; // on the device, PARAM_ALIGN-aligned
    size_t num_parameters;  // as in the checkpoint
    size_t num_padded;      // on the device, a multiple of the number of shards
    size_t shard_lo, shard_hi; // this rank's optimizer shard of the device layout
    int sharded;            // ZeRO stage 1 over several processes
    TensorSet<floatX> params;
    floatX* params_memory;
    TensorSet<float> grads;
    float* grads_memory;
    float* master;          // (shard) fp32 master weights
    float* m_memory;        // (shard) AdamW moments, allocated at the first update
    float* v_memory;
    int master_gathered;    // ZeRO: the grads buffer holds every rank's master weights
    // activations and the backward pass's buffers; a second residual stream's (PE_STREAMS 2:
    // complex_order's imaginary part) in acts2 and gs2, which hold only a stream's own tensors
    ActivationTensors acts;
    void* acts_memory;
    GradScratch gs;
    void* gs_memory;
    ActivationTensors acts2;
    void* acts2_memory;
    GradScratch gs2;
    void* gs2_memory;
    size_t acts_N;          // capacity in tokens: the stride of per-layer tensors
    size_t pe_stride;       // stride of per-layer (N, NH) tensors (aligned)
    int acts_B, acts_T, acts_layers;
    float* partials;        // (COLUMN_CHUNKS, 4C) column sums of the bias and layernorm gradients
    double* norm_partials;  // (NORM_BLOCKS)
    float* logits_row;      // (Vp) one row of logits in fp32 (sampling)
    float* alibi_slopes;    // (NH)
    float* pe_table;        // (NH, pe_table_len) sandwich: the bias of each head and distance
    int pe_table_len;
    floatX* pe_rel_table;   // (pe_rel_len, C) txl: the sinusoids R_n of each distance
    int pe_rel_len;
    void* pe_pass;          // (pe_pass_bytes) what the encoding made on the host for the last forward pass
    size_t pe_pass_bytes;   // (pe_pass_upload: CAPE's float positions, BiPE's positions within segments)
    PEEval pe_eval;         // the evaluation variant in effect (llmc/pe.h; zeros: plain)
    const int* pos_in;      // (B, T) the positions given for the next forward passes (NULL: none; llmc/model.h)
    uint64_t rp_key;        // randomized positions: the key of the next forward pass's draw (the driver's)
    int rp_draw_len;        // drawn positions per draw (the forward pass takes the first T): the driver's
                            // batch length while it runs the batch's rows in length buckets; 0: T
    int* pos_host;          // (draws, acts_B, acts_T) the positions on the host, copied to acts.positions
    int pos_kind;           // of the last forward pass: POS_INDICES (no table), POS_DRAWN (shared by the rows), POS_GIVEN
    int pos_span;           // their range: the largest given + 1, the draws' L, or T
    float4* rope_table;     // (rope_len, hs/2) rope, xpos: cos, sin and the q and k factors of positions 0..rope_len-1
    int rope_len;           // its positions, and the length, range, variant and model's table it was computed for (0: none)
    int rope_table_T, rope_table_span;
    PEEval rope_table_eval;
    RopeTable rope_table_options;
    struct PEState* pe_state; // the encoding's own state across passes (floater: its ODE's solutions; pe_free)
    float* host_losses;     // (N) host copy of the last per-token losses (pinned)
    int* host_tokens;       // (2N) pinned staging of the batch's inputs and targets for the copies
    // the last forward pass
    int batch_size;
    int seq_len;
    int training;           // the last forward pass was a training pass (dloss given: CAPE's augmented positions)
    int last_training;      // a training forward with targets: gpt2_backward may follow
    float mean_loss;        // -1 when no targets were given
} GPT2;

// ----------------------------------------------------------------------------
// matmuls through cuBLASLt

// cuBLASLt's descriptors, layouts and chosen algorithm for one kind of matmul, made on its
// first use and kept: the heuristic query costs more than a small matmul. The bias and
// pre-GELU pointers change from call to call and are set on the kept descriptor. The
// algorithm is chosen for the alignments of the first call's pointers (16 to 256 bytes each:
// A, B and D as preferences, the bias and pre-GELU pointers on the descriptor), so each
// pointer's alignment is part of the key and a plan is used only with pointers aligned as
// those it was chosen for.
enum { ALIGN_A, ALIGN_B, ALIGN_D, ALIGN_BIAS, ALIGN_GELU, ALIGN_N };
typedef struct {
    int m, n, k, transA, transB, d_fp32, bias, gelu;
    int align[ALIGN_N];
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} MatmulPlan;
#define MATMUL_PLANS 128
static MatmulPlan matmul_plans[MATMUL_PLANS];
static int matmul_plan_count = 0, matmul_plan_next = 0;

static void matmul_plan_destroy(MatmulPlan* p) {
    cublasCheck(cublasLtMatrixLayoutDestroy(p->la));
    cublasCheck(cublasLtMatrixLayoutDestroy(p->lb));
    cublasCheck(cublasLtMatrixLayoutDestroy(p->ld));
    cublasCheck(cublasLtMatmulDescDestroy(p->op));
}

static void matmul_plans_free(void) {
    for (int i = 0; i < matmul_plan_count; i++) { matmul_plan_destroy(&matmul_plans[i]); }
    matmul_plan_count = 0;
    matmul_plan_next = 0;
}

// the kept plan for this kind of matmul, made (and the oldest one replaced when all
// MATMUL_PLANS are taken) if there is none; the pointers are those of the first call
static MatmulPlan* matmul_plan(int m, int n, int k, int transA, int transB, int d_fp32, const floatX* bias_ptr, floatX* gelu_ptr,
                               const int (&align)[ALIGN_N]) {
    int bias = bias_ptr != NULL, gelu = gelu_ptr != NULL;
    for (int i = 0; i < matmul_plan_count; i++) {
        MatmulPlan* p = &matmul_plans[i];
        if (p->m == m && p->n == n && p->k == k && p->transA == transA && p->transB == transB && p->d_fp32 == d_fp32
            && p->bias == bias && p->gelu == gelu && memcmp(p->align, align, sizeof(align)) == 0) { return p; }
    }
    MatmulPlan* p;
    if (matmul_plan_count < MATMUL_PLANS) { p = &matmul_plans[matmul_plan_count++]; }
    else { p = &matmul_plans[matmul_plan_next]; matmul_plan_next = (matmul_plan_next + 1) % MATMUL_PLANS; matmul_plan_destroy(p); }
    p->m = m; p->n = n; p->k = k; p->transA = transA; p->transB = transB; p->d_fp32 = d_fp32; p->bias = bias; p->gelu = gelu;
    memcpy(p->align, align, sizeof(align));
    cublasCheck(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    cublasCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    cudaDataType_t dtype = d_fp32 ? CUDA_R_32F : CUBLAS_LOWP;
    cublasCheck(transA ? cublasLtMatrixLayoutCreate(&p->la, CUBLAS_LOWP, k, m, k) : cublasLtMatrixLayoutCreate(&p->la, CUBLAS_LOWP, m, k, m));
    cublasCheck(transB ? cublasLtMatrixLayoutCreate(&p->lb, CUBLAS_LOWP, n, k, n) : cublasLtMatrixLayoutCreate(&p->lb, CUBLAS_LOWP, k, n, k));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->ld, dtype, m, n, m));
    cublasLtEpilogue_t epilogue = gelu ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                                       : (bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    cublasCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (bias) { cublasCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr))); }
    if (gelu) {
        int64_t aux_ld = m;
        cublasCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &gelu_ptr, sizeof(gelu_ptr)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    }
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &ctx.workspace_size, sizeof(ctx.workspace_size)));
    const int align_attrs[4] = {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint32_t align_values[4] = {(uint32_t)align[ALIGN_A], (uint32_t)align[ALIGN_B], (uint32_t)align[ALIGN_D], (uint32_t)align[ALIGN_D]}; // C is D
    for (int i = 0; i < 4; i++) {
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, (cublasLtMatmulPreferenceAttributes_t)align_attrs[i], &align_values[i],
                                                         sizeof(align_values[i])));
    }
    cublasLtMatmulHeuristicResult_t heuristic;
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.lt, p->op, p->la, p->lb, p->ld, p->ld, pref, 1, &heuristic, &found);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
        fatal("cuBLASLt has no algorithm for m=%d n=%d k=%d (transA %d transB %d, %s output, bias %d, gelu %d, "
              "alignments A %d B %d D %d bias %d pre-GELU %d bytes; status %d)", m, n, k, transA, transB, d_fp32 ? "fp32" : PRECISION_NAME,
              bias, gelu, align[ALIGN_A], align[ALIGN_B], align[ALIGN_D], align[ALIGN_BIAS], align[ALIGN_GELU], (int)st);
    }
    p->algo = heuristic.algo;
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    return p;
}

// matmul_cublaslt: D (m x n, column-major) = op(A) op(B) [+ bias] [+ D if accumulate],
// optionally through GELU with the pre-activation kept in pre_gelu (the fused epilogues);
// A and B are floatX, D is floatX or fp32 (d_fp32: gradients and fp32 results)
static void matmul_cublaslt(void* d, int d_fp32, const floatX* a, const floatX* b, const floatX* bias,
                            int m, int n, int k, int transA, int transB, int accumulate, floatX* pre_gelu) {
    const void* ptrs[ALIGN_N] = {a, b, d, bias, pre_gelu};
    int align[ALIGN_N];
    for (int i = 0; i < ALIGN_N; i++) { // 16 to 256 bytes; 256 for a pointer not given
        uintptr_t bits = (uintptr_t)ptrs[i];
        if (bits % 16 != 0) { fatal("matmul: cuBLASLt pointers must be 16-byte aligned (m=%d n=%d k=%d)", m, n, k); }
        align[i] = 16;
        while (align[i] < 256 && bits % (2 * align[i]) == 0) { align[i] *= 2; }
    }
    MatmulPlan* p = matmul_plan(m, n, k, transA, transB, d_fp32, bias, pre_gelu, align);
    if (bias != NULL) { cublasCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias))); }
    if (pre_gelu != NULL) {
        cublasCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &pre_gelu, sizeof(pre_gelu)));
    }
    float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasCheck(cublasLtMatmul(ctx.lt, p->op, &alpha, a, p->la, b, p->lb, &beta, d, p->ld, d, p->ld, &p->algo,
                               ctx.workspace, ctx.workspace_size, ctx.stream));
}

// ----------------------------------------------------------------------------
// the layers' kernels, forward and backward

// encoder_forward_kernel: looks up each token's embedding (the position, if any, is added by the PE)
__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte, int N, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * C) { return; }
    size_t bt = idx / C;
    out[idx] = wte[(size_t)inp[bt] * C + idx % C];
}

// position_embed_forward_kernel: one thread per (token, column) adds the row of a table of
// positions (learned's wpe, BiPE's within-segment table) at the token's position (pos (B, T);
// NULL: its index t)
__global__ void position_embed_forward_kernel(floatX* out, const floatX* table, const int* pos, int N, int T, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * C) { return; }
    size_t bt = idx / C;
    out[idx] = (floatX)((float)out[idx] + (float)table[(size_t)(pos != NULL ? pos[bt] : (int)(bt % T)) * C + idx % C]);
}

// position_embed_backward_kernel: positions of each row its own may repeat a row of the table
// anywhere in the batch: one thread per column c adds every token's gradient, in the batch's
// order (deterministic, no atomics)
__global__ void position_embed_backward_kernel(float* dtable, const floatX* dout, const int* pos, int N, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) { return; }
    for (int bt = 0; bt < N; bt++) { dtable[(size_t)pos[bt] * C + c] += (float)dout[(size_t)bt * C + c]; }
}

// encoder_backward_kernel: scatters the embedding gradients into the rows of the used
// tokens (fp32 atomics: two positions may hold the same token; not bitwise deterministic)
__global__ void encoder_backward_kernel(float* dwte, const floatX* dout, const int* inp, int N, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * C) { return; }
    size_t bt = idx / C;
    atomicAdd(dwte + (size_t)inp[bt] * C + idx % C, (float)dout[idx]);
}

// layernorm_forward_kernel: one warp per row: normalizes to zero mean and unit variance
// (two passes, as the CPU path), scales and shifts; keeps mean and 1/std for the backward
__global__ void layernorm_forward_kernel(floatX* out, float* mean, float* rstd, const floatX* inp,
                                         const floatX* weight, const floatX* bias, int N, int C) {
    int lane = threadIdx.x % WARP_SIZE;
    int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= N) { return; }
    const floatX* x = inp + (size_t)row * C;
    float sum = 0.0f;
    for (int c = lane; c < C; c += WARP_SIZE) { sum += (float)x[c]; }
    float m = warp_sum(sum) / C;
    float var = 0.0f;
    for (int c = lane; c < C; c += WARP_SIZE) { float d = (float)x[c] - m; var += d * d; }
    var = warp_sum(var) / C;
    float s = 1.0f / sqrtf(var + 1e-5f);
    floatX* o = out + (size_t)row * C;
    for (int c = lane; c < C; c += WARP_SIZE) { o[c] = (floatX)(((float)x[c] - m) * s * (float)weight[c] + (float)bias[c]); }
    if (lane == 0) { mean[row] = m; rstd[row] = s; }
}

// layernorm_backward_kernel: one warp per row: adds the input gradient to dinp (the
// parameter gradients are column sums, layernorm_param_backward_kernel)
__global__ void layernorm_backward_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const floatX* weight,
                                          const float* mean, const float* rstd, int N, int C) {
    int lane = threadIdx.x % WARP_SIZE;
    int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= N) { return; }
    const floatX* g = dout + (size_t)row * C;
    const floatX* x = inp + (size_t)row * C;
    float m = mean[row], s = rstd[row];
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int c = lane; c < C; c += WARP_SIZE) {
        float dnorm = (float)weight[c] * (float)g[c];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * ((float)x[c] - m) * s;
    }
    dnorm_mean = warp_sum(dnorm_mean) / C;
    dnorm_norm_mean = warp_sum(dnorm_norm_mean) / C;
    floatX* d = dinp + (size_t)row * C;
    for (int c = lane; c < C; c += WARP_SIZE) {
        float norm = ((float)x[c] - m) * s;
        d[c] = (floatX)((float)d[c] + ((float)weight[c] * (float)g[c] - dnorm_mean - norm * dnorm_norm_mean) * s);
    }
}

// layernorm_param_backward_kernel: partial column sums over one chunk of rows
// (blockIdx.y) of dout * norm (weight gradient, partials[0:C]) and dout (bias
// gradient, partials[C:2C]); partials_reduce_kernel adds the chunks in a fixed order
__global__ void layernorm_param_backward_kernel(float* partials, const floatX* dout, const floatX* inp,
                                                const float* mean, const float* rstd, int N, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) { return; }
    int rows = CEIL_DIV(N, (int)gridDim.y);
    int n0 = blockIdx.y * rows, n1 = min(N, n0 + rows);
    float dw = 0.0f, db = 0.0f;
    for (int n = n0; n < n1; n++) {
        float g = (float)dout[(size_t)n * C + c];
        dw += ((float)inp[(size_t)n * C + c] - mean[n]) * rstd[n] * g;
        db += g;
    }
    partials[(size_t)blockIdx.y * 2 * C + c] = dw;
    partials[(size_t)blockIdx.y * 2 * C + C + c] = db;
}

// bias_backward_kernel: partial column sums of dout (N, OC) over one chunk of rows (blockIdx.y)
__global__ void bias_backward_kernel(float* partials, const floatX* dout, int N, int OC) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC) { return; }
    int rows = CEIL_DIV(N, (int)gridDim.y);
    int n0 = blockIdx.y * rows, n1 = min(N, n0 + rows);
    float s = 0.0f;
    for (int n = n0; n < n1; n++) { s += (float)dout[(size_t)n * OC + c]; }
    partials[(size_t)blockIdx.y * OC + c] = s;
}

// partials_reduce_kernel: out[c] += sum over the chunks of partials[chunk * stride + c]
__global__ void partials_reduce_kernel(float* out, const float* partials, int chunks, int stride, int n) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n) { return; }
    float s = 0.0f;
    for (int k = 0; k < chunks; k++) { s += partials[(size_t)k * stride + c]; }
    out[c] += s;
}

#define GELU_SCALING_FACTOR 0.7978845608028654f // sqrt(2 / pi)
#define GELU_CUBIC 0.044715f

#if defined(ENABLE_FP32)
// gelu_forward_kernel: GELU, tanh approximation (GPT-2's); the fp32 build's path (the
// bf16 build fuses it into the matmul's epilogue)
__global__ void gelu_forward_kernel(floatX* out, const floatX* inp, size_t N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) { return; }
    float x = (float)inp[i];
    out[i] = (floatX)(0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + GELU_CUBIC * x * x * x))));
}
#endif

// gelu_backward_kernel: in place, d *= GELU'(x) (tanh approximation)
__global__ void gelu_backward_kernel(floatX* d, const floatX* inp, size_t N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) { return; }
    float x = (float)inp[i];
    float th = tanhf(GELU_SCALING_FACTOR * (x + GELU_CUBIC * x * x * x));
    float sech2 = 1.0f - th * th;
    float local = 0.5f * (1.0f + th) + x * 0.5f * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * GELU_CUBIC * x * x);
    d[i] = (floatX)(local * (float)d[i]);
}

// residual_forward_kernel: out = a + b
__global__ void residual_forward_kernel(floatX* out, const floatX* a, const floatX* b, size_t N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { out[i] = (floatX)((float)a[i] + (float)b[i]); }
}

// fused_classifier_kernel: one block per row of logits: softmax over the V real tokens,
// the cross-entropy loss against the target, and when training the logits' gradient
// (softmax - onehot) * dloss / scored written in place (the padded columns get 0), so the
// probabilities are never stored; a row whose target is TARGET_UNSCORED gets no loss and
// a zero gradient
__global__ void fused_classifier_kernel(floatX* logits, float* losses, const int* targets, float dscale, int V, int Vp, int training) {
    floatX* x = logits + (size_t)blockIdx.x * Vp;
    int target = targets[blockIdx.x];
    if (target == TARGET_UNSCORED) {
        if (threadIdx.x == 0) { losses[blockIdx.x] = 0.0f; }
        if (training) { for (int v = threadIdx.x; v < Vp; v += blockDim.x) { x[v] = (floatX)0.0f; } }
        return;
    }
    float x_target = (float)x[target];
    float maxv = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) { maxv = fmaxf(maxv, (float)x[v]); }
    maxv = block_max(maxv);
    float sum = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) { sum += expf((float)x[v] - maxv); }
    sum = block_sum(sum);
    float lse = maxv + logf(sum);
    if (threadIdx.x == 0) { losses[blockIdx.x] = lse - x_target; }
    if (!training) { return; }
    for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
        x[v] = v < V ? (floatX)((expf((float)x[v] - lse) - (v == target ? 1.0f : 0.0f)) * dscale) : (floatX)0.0f;
    }
}

// adamw_kernel: AdamW on one tensor's slice of this rank's shard, in fp32 on the master
// weights (bias corrections bc1, bc2 from the host, in double as the CPU path)
__global__ void adamw_kernel(float* master, float* m, float* v, const float* grad, size_t n, float lr, float beta1,
                             float beta2, float bc1, float bc2, float eps, float wd, float grad_scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) { return; }
    float g = grad[i] * grad_scale;
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float p = master[i];
    master[i] = p - lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * p);
}

// floatX_from_float_kernel: the kernels' copy of fp32 values (round to nearest)
__global__ void floatX_from_float_kernel(floatX* dst, const float* src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { dst[i] = (floatX)src[i]; }
}

// clamp_kernel: x = min(max(x, lo), hi)
__global__ void clamp_kernel(float* x, size_t n, float lo, float hi) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { x[i] = fminf(fmaxf(x[i], lo), hi); }
}

// global_norm_kernel: per-block partial sums of squares of the gradients, in double
// (the sum has millions of terms); a fixed grid, so the result is deterministic
__global__ void global_norm_kernel(double* partials, const float* g, size_t n) {
    __shared__ double warp_sums[32];
    double s = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        s += (double)g[i] * g[i];
    }
    for (int off = 16; off > 0; off >>= 1) { s += __shfl_xor_sync(0xffffffffu, s, off); }
    if (threadIdx.x % WARP_SIZE == 0) { warp_sums[threadIdx.x / WARP_SIZE] = s; }
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int w = 0; w < (int)(blockDim.x / WARP_SIZE); w++) { total += warp_sums[w]; }
        partials[blockIdx.x] = total;
    }
}

// ----------------------------------------------------------------------------
// the layers' launchers

static void encoder_forward(floatX* out, const int* inp, const floatX* wte, int N, int C) {
    size_t n = (size_t)N * C;
    encoder_forward_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(out, inp, wte, N, C);
    cudaCheckLaunch("encoder_forward_kernel");
}

static void encoder_backward(float* dwte, const floatX* dout, const int* inp, int N, int C) {
    size_t n = (size_t)N * C;
    encoder_backward_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(dwte, dout, inp, N, C);
    cudaCheckLaunch("encoder_backward_kernel");
}

[[maybe_unused]] static void position_embed_forward(floatX* out, const floatX* table, const int* pos, int N, int T, int C) {
    size_t n = (size_t)N * C;
    position_embed_forward_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(out, table, pos, N, T, C);
    cudaCheckLaunch("position_embed_forward_kernel");
}

[[maybe_unused]] static void position_embed_backward(float* dtable, const floatX* dout, const int* pos, int N, int C) {
    position_embed_backward_kernel<<<CEIL_DIV(C, 128), 128, 0, ctx.stream>>>(dtable, dout, pos, N, C);
    cudaCheckLaunch("position_embed_backward_kernel");
}

static void layernorm_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* weight,
                              const floatX* bias, int N, int C) {
    layernorm_forward_kernel<<<CEIL_DIV(N, 8), 256, 0, ctx.stream>>>(out, mean, rstd, inp, weight, bias, N, C);
    cudaCheckLaunch("layernorm_forward_kernel");
}

// the column sums of a (N, n) gradient: chunk partials, then their fixed-order sum into out
static void partials_reduce(float* out, const float* partials, int chunks, int stride, int n) {
    partials_reduce_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(out, partials, chunks, stride, n);
    cudaCheckLaunch("partials_reduce_kernel");
}

static int column_chunks(int N) { return N < COLUMN_CHUNKS ? N : COLUMN_CHUNKS; }

// layernorm_backward: dinp += the input gradient; dweight, dbias += the parameter gradients
static void layernorm_backward(floatX* dinp, float* dweight, float* dbias, float* partials, const floatX* dout,
                               const floatX* inp, const floatX* weight, const float* mean, const float* rstd, int N, int C) {
    layernorm_backward_kernel<<<CEIL_DIV(N, 8), 256, 0, ctx.stream>>>(dinp, dout, inp, weight, mean, rstd, N, C);
    cudaCheckLaunch("layernorm_backward_kernel");
    int chunks = column_chunks(N);
    layernorm_param_backward_kernel<<<dim3(CEIL_DIV(C, 256), chunks), 256, 0, ctx.stream>>>(partials, dout, inp, mean, rstd, N, C);
    cudaCheckLaunch("layernorm_param_backward_kernel");
    partials_reduce(dweight, partials, chunks, 2 * C, C);
    partials_reduce(dbias, partials + C, chunks, 2 * C, C);
}

static void gelu_backward(floatX* d, const floatX* inp, size_t N) {
    gelu_backward_kernel<<<CEIL_DIV(N, 256), 256, 0, ctx.stream>>>(d, inp, N);
    cudaCheckLaunch("gelu_backward_kernel");
}

static void residual_forward(floatX* out, const floatX* a, const floatX* b, size_t N) {
    residual_forward_kernel<<<CEIL_DIV(N, 256), 256, 0, ctx.stream>>>(out, a, b, N);
    cudaCheckLaunch("residual_forward_kernel");
}

static void floatX_from_float(floatX* dst, const float* src, size_t n) {
    if (n == 0) { return; }
    floatX_from_float_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(dst, src, n);
    cudaCheckLaunch("floatX_from_float_kernel");
}

// matmul_forward: out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias (OC); with pre_gelu,
// out = GELU(that) and pre_gelu keeps the pre-activation (fused epilogue in bf16; the
// fp32 build runs the CPU path's GELU kernel so that both paths round alike)
static void matmul_forward(floatX* out, const floatX* inp, const floatX* weight, const floatX* bias,
                           int N, int C, int OC, floatX* pre_gelu) {
#if defined(ENABLE_FP32)
    if (pre_gelu != NULL) {
        matmul_cublaslt(pre_gelu, 0, weight, inp, bias, OC, N, C, 1, 0, 0, NULL);
        size_t n = (size_t)N * OC;
        gelu_forward_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(out, pre_gelu, n);
        cudaCheckLaunch("gelu_forward_kernel");
        return;
    }
#endif
    matmul_cublaslt(out, 0, weight, inp, bias, OC, N, C, 1, 0, 0, pre_gelu);
}

// matmul_backward: dinp = (or += with accumulate_dinp) dout @ weight (unless dinp is NULL);
// dweight += dout^T @ inp (fp32); dbias += column sums of dout (fp32, deterministic)
static void matmul_backward(floatX* dinp, float* dweight, float* dbias, float* partials, const floatX* dout,
                            const floatX* inp, const floatX* weight, int N, int C, int OC, int accumulate_dinp) {
    if (dinp != NULL) { matmul_cublaslt(dinp, 0, weight, dout, NULL, C, N, OC, 0, 0, accumulate_dinp, NULL); }
    matmul_cublaslt(dweight, 1, inp, dout, NULL, C, OC, N, 0, 1, 1, NULL);
    if (dbias != NULL) {
        int chunks = column_chunks(N);
        bias_backward_kernel<<<dim3(CEIL_DIV(OC, 256), chunks), 256, 0, ctx.stream>>>(partials, dout, N, OC);
        cudaCheckLaunch("bias_backward_kernel");
        partials_reduce(dbias, partials, chunks, OC, OC);
    }
}

// fused_classifier: logits = lnf @ wte^T in chunks of rows, loss per row, and when
// training (dloss != 0) the logits' gradient straight back into dlnf and dwte; the mean is
// over the `scored` targets (those not TARGET_UNSCORED)
static void fused_classifier(float* losses, floatX* dlnf, float* dwte, float* partials, floatX* logits, const floatX* lnf,
                             const floatX* wte, const int* targets, float dloss, int N, int scored, int V, int Vp, int C) {
    for (int r0 = 0; r0 < N; r0 += CLASSIFIER_CHUNK) {
        int n = N - r0 < CLASSIFIER_CHUNK ? N - r0 : CLASSIFIER_CHUNK;
        matmul_forward(logits, lnf + (size_t)r0 * C, wte, NULL, n, C, Vp, NULL);
        fused_classifier_kernel<<<n, 1024, 0, ctx.stream>>>(logits, losses + r0, targets + r0, dloss / scored, V, Vp, dloss != 0);
        cudaCheckLaunch("fused_classifier_kernel");
        if (dloss != 0) {
            matmul_backward(dlnf + (size_t)r0 * C, dwte, NULL, partials, logits, lnf + (size_t)r0 * C, wte, n, C, Vp, 0);
        }
    }
}

// ============================================================================
// the transformer block of one residual stream: GPT-2's, and an encoding's second stream
// (PE_STREAMS 2: complex_order's imaginary part, with weights of its own) runs it again; the
// attention between the two halves couples the streams (train_gpt2.c's, the same functions)

// the activations of layer l (slot 0 in evaluation, when only one layer is stored)
static size_t layer_slot(const GPT2* model, int l) { return model->acts_layers == 1 ? 0 : (size_t)l; }

// a block's weights at one layer: the kernels' copy (floatX), or their gradients (float)
template<class T>
struct BlockOf {
    T *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};

// layer l's block of the tensors whose first layer's are w (each tensor holds every layer's
// values consecutively, in GPT-2's shapes)
template<class T>
static BlockOf<T> block_layer(BlockOf<T> w, int l, int C) {
    size_t c = C, o = (size_t)l;
    return {w.ln1w + o * c, w.ln1b + o * c, w.qkvw + o * 3 * c * c, w.qkvb + o * 3 * c, w.attprojw + o * c * c, w.attprojb + o * c,
            w.ln2w + o * c, w.ln2b + o * c, w.fcw + o * 4 * c * c, w.fcb + o * 4 * c, w.fcprojw + o * c * 4 * c, w.fcprojb + o * c};
}

// GPT-2's block of layer l in t (the kernels' parameters or their gradients)
template<class T>
static BlockOf<T> gpt2_block(const TensorSet<T>* t, int l, int C) {
    return block_layer<T>({t->ln1w, t->ln1b, t->qkvw, t->qkvb, t->attprojw, t->attprojb, t->ln2w, t->ln2b, t->fcw, t->fcb, t->fcprojw, t->fcprojb}, l, C);
}

// the stream entering layer l in a stream's activations: the embeddings, or layer l-1's
// output (in evaluation the same slot as layer l's, read before it is overwritten)
static floatX* block_input(const GPT2* model, const ActivationTensors* a, int l) {
    return l == 0 ? a->encoded : a->residual3 + layer_slot(model, l - 1) * model->acts_N * model->config.channels;
}

// block_qkv_forward: ln1 and the qkv projection of the stream's input, into layer slot s
static void block_qkv_forward(ActivationTensors* a, size_t s, size_t N, const floatX* input, const BlockOf<floatX>* w, int BT, int C) {
    layernorm_forward(a->ln1 + s * N * C, a->ln1_mean + s * N, a->ln1_rstd + s * N, input, w->ln1w, w->ln1b, BT, C);
    matmul_forward(a->qkv + s * N * 3 * C, a->ln1 + s * N * C, w->qkvw, w->qkvb, BT, C, 3 * C, NULL);
}

// block_output_forward: the block after its attention (atty): the projection and its
// residual, ln2, the MLP and its residual, into residual3 of slot s; proj (N, C) is scratch
static void block_output_forward(ActivationTensors* a, size_t s, size_t N, const floatX* input, floatX* proj, const BlockOf<floatX>* w,
                                 int BT, int C) {
    floatX* residual2 = a->residual2 + s * N * C;
    matmul_forward(proj, a->atty + s * N * C, w->attprojw, w->attprojb, BT, C, C, NULL);
    residual_forward(residual2, input, proj, (size_t)BT * C);
    layernorm_forward(a->ln2 + s * N * C, a->ln2_mean + s * N, a->ln2_rstd + s * N, residual2, w->ln2w, w->ln2b, BT, C);
    matmul_forward(a->fch_gelu + s * N * 4 * C, a->ln2 + s * N * C, w->fcw, w->fcb, BT, C, 4 * C, a->fch + s * N * 4 * C);
    matmul_forward(proj, a->fch_gelu + s * N * 4 * C, w->fcprojw, w->fcprojb, BT, 4 * C, C, NULL);
    residual_forward(a->residual3 + s * N * C, residual2, proj, (size_t)BT * C);
}

// block_output_backward: from d residual3 of layer l (d->dres) back to d atty (d->dsmall),
// adding the block's input's gradient into dres and into the gradients g; partials is scratch
static void block_output_backward(const ActivationTensors* a, GradScratch* d, size_t l, size_t N, const BlockOf<floatX>* w,
                                  const BlockOf<float>* g, float* partials, int BT, int C) {
    size_t o = l * N;
    // dres = d residual3; residual3 = residual2 + fcproj(GELU(fc(ln2(residual2))))
    matmul_backward(d->dbig, g->fcprojw, g->fcprojb, partials, d->dres, a->fch_gelu + o * 4 * C, w->fcprojw, BT, 4 * C, C, 0);
    gelu_backward(d->dbig, a->fch + o * 4 * C, (size_t)BT * 4 * C);
    matmul_backward(d->dsmall, g->fcw, g->fcb, partials, d->dbig, a->ln2 + o * C, w->fcw, BT, C, 4 * C, 0);
    layernorm_backward(d->dres, g->ln2w, g->ln2b, partials, d->dsmall, a->residual2 + o * C, w->ln2w, a->ln2_mean + o, a->ln2_rstd + o, BT, C);
    // dres = d residual2; residual2 = input + attproj(attention(...))
    matmul_backward(d->dsmall, g->attprojw, g->attprojb, partials, d->dres, a->atty + o * C, w->attprojw, BT, C, C, 0);
}

// block_qkv_backward: from d qkv of layer l (d->dbig) back into d of the block's input
// (d->dres) and the gradients g; accumulate_dln1: d->dsmall holds a part of d ln1 already
static void block_qkv_backward(const ActivationTensors* a, GradScratch* d, size_t l, size_t N, const floatX* input, const BlockOf<floatX>* w,
                               const BlockOf<float>* g, float* partials, int BT, int C, int accumulate_dln1) {
    size_t o = l * N;
    matmul_backward(d->dsmall, g->qkvw, g->qkvb, partials, d->dbig, a->ln1 + o * C, w->qkvw, BT, C, 3 * C, accumulate_dln1);
    layernorm_backward(d->dres, g->ln1w, g->ln1b, partials, d->dsmall, input, w->ln1w, a->ln1_mean + o, a->ln1_rstd + o, BT, C);
}

// ============================================================================
// positional encodings
//
// The encoding this binary is built for lives in its own file, pe/<file>.h (llmc/pe_list.h
// names it), whose CUDA part is included below, with the hooks of train_gpt2.c under the
// same names (docs/adding-an-encoding.md says what each does):
//   pe_embed_forward / pe_embed_backward  position embeddings: PE_EMBED
//   pe_layer_forward / pe_layer_backward  per-layer work before the attention: PE_LAYER
//                                         (PE_LAYER_DLN1: its backward writes dln1 first)
//   PEBias, PERow, pe_bias_setup, pe_bias_row, pe_bias
//                                         the additive attention bias b(i, j): PE_BIAS. The
//                                         kernels (llmc/attention_bias.cuh, attention_mma.cuh)
//                                         call pe_bias_row once per query row and pe_bias per
//                                         pair; PERow's shift is a constant of the row left out
//                                         of pe_bias because it cancels in the softmax (CABLE's
//                                         w_i S_i; the kernels add it to the log-sum-exp)
//   PEGrad, pe_bias_backward, pe_bias_flush, PE_PAR_N
//                                         the bias's gradient, accumulated per thread in PEGrad
//                                         on the row side (the dq pass) and the column side (the
//                                         dk/dv pass), then flushed at the end of the kernel: per
//                                         token, or PE_PAR_N parameter-gradient partials per
//                                         block: PE_BIAS_GRAD; pe_bias_backward_warp, called by
//                                         every lane of a warp at once, for encodings whose
//                                         column side reduces over the warp (t5, fire; PEGrad
//                                         per_lane): PE_BIAS_WARP
//   pe_bias_reduce                        the partials summed into the gradients (no atomics,
//                                         deterministic): PE_BIAS_REDUCE
//   pe_project                            keeps constrained parameters in range: PE_PROJECT
//   pe_attention_forward / pe_attention_backward, pe_attention_scratch
//                                         a layer's whole attention (CoPE, txl, shaw): PE_ATTENTION
//   pe_stream_block, pe_output_forward / pe_output_backward
//                                         a second residual stream (PE_STREAMS 2, complex_order's
//                                         imaginary part): the weights of its block at a layer
//                                         (the trainer runs the block once per stream, in acts
//                                         and acts2, gs and gs2), and the classifier's input
//                                         made of both streams' last layer (after lnf; its
//                                         backward before lnf's)
//   pe_after_update, pe_resume_bytes, pe_resume_save, pe_resume_load, pe_free, pe_reach
//                                         the encoding's own state across passes and a range of the
//                                         parameters' (llmc/pe_state.h, which holds their defaults)
// A hook the file does not define does nothing (the defaults after the include; without
// PE_ATTENTION a layer's attention is llmc/attention_bias.cuh's with the bias hooks).
// model->pe_eval is the evaluation variant in effect (RoPE scaling, xPos's blockwise causal
// attention): the driver sets it around its extrapolation evaluation, plain otherwise.
// Positions: pe_positions(model, l) is the device table of the tokens' positions in layer l
// (randomized positions, llmc/pe.h, as train_gpt2.c draws them), or NULL when they are the
// indices; the default attention then reads the bias at those positions (PEPositions).
// ============================================================================

// replaces a table of the encoding's (sandwich's biases, txl's sinusoids) with `bytes` of
// `host`, once the kernels that may read the old one are done
[[maybe_unused]] static void pe_table_upload(void** table, const void* host, size_t bytes, const char* what) {
    cudaCheck(cudaStreamSynchronize(ctx.stream));
    cuda_free(table);
    *table = cuda_malloc(bytes, what);
    cudaCheck(cudaMemcpy(*table, host, bytes, cudaMemcpyHostToDevice));
}

// copies `bytes` of `host`, made on the host for this forward pass (CAPE's float positions,
// BiPE's positions within segments), into the encoding's device buffer, grown as needed, in
// the stream's order, and returns it; the stream is synchronized after, so `host` may go
[[maybe_unused]] static void* pe_pass_upload(GPT2* model, const void* host, size_t bytes, const char* what) {
    if (model->pe_pass_bytes < bytes) {
        cudaCheck(cudaStreamSynchronize(ctx.stream)); // no kernel reads the old buffer any more
        cuda_free(&model->pe_pass);
        model->pe_pass = cuda_malloc(bytes, what);
        model->pe_pass_bytes = bytes;
    }
    cudaCheck(cudaMemcpyAsync(model->pe_pass, host, bytes, cudaMemcpyHostToDevice, ctx.stream));
    cudaCheck(cudaStreamSynchronize(ctx.stream));
    return model->pe_pass;
}

// ---- positions (llmc/model.h: positions as data; train_gpt2.c's pe_positions_fill) ----
// are the positions of this forward pass drawn (a model trained with -rp, not under the
// plainpos evaluation variant)?
static int rp_active(const GPT2* model) {
    return model->config.rp_len > 0 && model->pe_eval.variant != PE_EVAL_PLAINPOS;
}

// the positions of a forward pass over B x T tokens: given or drawn, and the encoding's own
// (pe_positions_own), made on the host (the same bits as the CPU path, pe_positions_make) and
// copied to the device; the indices 0..T-1 need no table
enum { POS_INDICES, POS_DRAWN, POS_GIVEN };
static void pe_positions_fill(GPT2* model, const int* tokens, int B, int T, int training) {
    const GPT2Config* c = &model->config;
    model->pos_kind = model->pos_in != NULL || PE_OWN_POSITIONS_USED ? POS_GIVEN : rp_active(model) ? POS_DRAWN : POS_INDICES;
    int draws = rp_draws(c->pe, c->num_layers);
    model->pos_span = pe_positions_make(model->pos_host, model->pos_in, draws, B, T, rp_active(model) ? c->rp_len : 0,
                                        model->rp_draw_len, (uint64_t)c->rp_seed, model->rp_key);
    model->pos_span = pe_positions_own(c, model->pos_host, tokens, draws, B, T, model->pos_span, training, model->rp_key);
    if (model->pos_kind == POS_INDICES) { return; }
    cudaCheck(cudaMemcpyAsync(model->acts.positions, model->pos_host, (size_t)draws * B * T * sizeof(int), cudaMemcpyHostToDevice, ctx.stream));
}

// the device positions (B, T) of the tokens in layer l (or the embedding, l = 0) of the last
// forward pass; NULL: the indices (unused in the builds of encodings that take no positions)
[[maybe_unused]] static const int* pe_positions(const GPT2* model, int l) {
    if (model->pos_kind == POS_INDICES) { return NULL; }
    size_t BT = (size_t)model->batch_size * model->seq_len;
    return model->acts.positions + (size_t)(rp_draws(model->config.pe, model->config.num_layers) > 1 ? l : 0) * BT;
}
// ---- end of positions ----

// pe_bias_flush of the encodings with learned bias parameters (t5, kerple, fire): the
// key-side accumulators of every thread summed over the block into the block's partial
template<int N>
__device__ __forceinline__ void flush_param_partials(float* partials, const float (&d)[N], int side, int slot) {
    if (side != PE_SIDE_COL) { return; }
    for (int k = 0; k < N; k++) {
        float s = block_sum(d[k]);
        if (threadIdx.x == 0) { partials[(size_t)slot * N + k] = s; }
    }
}

// pe_bias_flush of the PE_BIAS_WARP encodings (t5, fire): accumulator q of the block's
// partial is the block's sum of value(q), this thread's share of it (its lane's sums)
template<class F>
__device__ __forceinline__ void flush_lane_partials(float* partials, int n, int side, int slot, F value) {
    if (side != PE_SIDE_COL) { return; }
    #pragma unroll 1
    for (int q = 0; q < n; q++) {
        float s = block_sum(value(q));
        if (threadIdx.x == 0) { partials[(size_t)slot * n + q] = s; }
    }
}

// the most threads of a block that calls pe_bias_backward_warp (the fp32 dk/dv kernel at
// HS = 128): the PE_BIAS_WARP encodings stage their lanes' pairs in shared memory of this size
#define PE_WARP_THREADS 512

// true on every lane of the warp when v is on one of them (every lane calls it)
__device__ __forceinline__ bool warp_any(bool v) {
    int x = v;
    #pragma unroll
    for (int off = 1; off < WARP_SIZE; off <<= 1) { x |= __shfl_xor_sync(0xffffffffu, x, off); }
    return x != 0;
}

#define PE_PART PE_PART_CUDA
#include "llmc/pe_part.h"
#undef PE_PART

// the hooks the encoding's file leaves out
#ifndef PE_EMBED
static void pe_embed_forward(GPT2* model, floatX* out, int B, int T) {}
static void pe_embed_backward(GPT2* model, floatX* dout, int B, int T) {}
#endif
#ifndef PE_LAYER
static void pe_layer_forward(GPT2* model, int l, int B, int T) {}
static void pe_layer_backward(GPT2* model, int l, int B, int T) {}
#endif
#ifndef PE_LAYER_DLN1
#define PE_LAYER_DLN1 0
#endif
#ifndef PE_BIAS
struct PEBias {};
struct PERow { int b, h, i; float shift; };
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {}
__device__ __forceinline__ PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { return {b, h, i, 0.0f}; }
__device__ __forceinline__ float pe_bias(const PEBias* pb, const PERow* r, int j) { return 0.0f; }
#endif
#ifndef PE_BIAS_GRAD
#define PE_PAR_N 0
struct PEGrad {};
__device__ __forceinline__ void pe_bias_backward(const PEBias* pb, PEGrad* g, int side, const PERow* r, int j, float ds) {}
__device__ __forceinline__ void pe_bias_flush(const PEBias* pb, PEGrad* g, int side, int b, int h, int t, bool valid, int slot) {}
#endif
#ifndef PE_BIAS_WARP
__device__ __forceinline__ void pe_bias_backward_warp(const PEBias* pb, PEGrad* g, int side, const PERow* r, int j, float ds, bool valid) {
    if (valid) { pe_bias_backward(pb, g, side, r, j, ds); }
}
#endif
#ifndef PE_BIAS_REDUCE
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) {}
#endif
#ifndef PE_PROJECT
static void pe_project(GPT2* model) {}
#endif
#if PE_STREAMS == 1
static void pe_output_forward(GPT2* model, int B, int T) {}
static void pe_output_backward(GPT2* model, int B, int T) {}
#endif
#include "llmc/pe_state.h" // pe_after_update, pe_resume_*, pe_free, pe_reach
// the kernels' PEGradOf (llmc/attention_bias.cuh): never called
PEGrad pe_grad_of(const PEBias*);
// the buffers of an encoding's own that the activations hold (defined 1 by the encoding)
#ifndef PE_REL_BUFFERS
#define PE_REL_BUFFERS 0
#endif
#ifndef PE_ATT_DKV
#define PE_ATT_DKV 0
#endif
#ifndef PE_ATTENTION
// a layer's attention for every encoding but CoPE and txl: llmc/attention_bias.cuh's, the
// bias through the hooks above (D, att_D, is its scratch), at the tokens' positions in layer
// l. The bias encodings with randomized positions (PE_BIAS_OF_POSITIONS) compile the kernels a
// second time for them (PEPositions; non-DAPE builds), so that the instance every other run
// uses stays as it was; for the others positions enter before the attention (embeddings,
// rope's and xpos's rotation) and the bias (none, or xPos's window, which -rp excludes)
// ignores them.
static size_t pe_attention_scratch(const GPT2Config* cfg, int B, int T, int training) { return 0; }
static void pe_attention_forward(GPT2* model, int l, floatX* out, float* lse, const floatX* qkv, int B, int T) {
    int NH = model->config.num_heads, HS = model->config.channels / NH;
    PEBias pb;
    pe_bias_setup(&pb, model, l, B, T, 0);
#if PE_BIAS_OF_POSITIONS && DAPE_ID == 0
    const int* pos = pe_positions(model, l);
    if (pos != NULL) { attention_forward(out, lse, qkv, PEPositions<PEBias>{pb, pos, T}, B, T, NH, HS, ctx.stream); return; }
#endif
    attention_forward(out, lse, qkv, pb, B, T, NH, HS, ctx.stream);
}
static void pe_attention_backward(GPT2* model, int l, floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                                  const float* lse, int B, int T) {
    int NH = model->config.num_heads, HS = model->config.channels / NH;
    PEBias pb;
    pe_bias_setup(&pb, model, l, B, T, 1);
#if PE_BIAS_OF_POSITIONS && DAPE_ID == 0
    const int* pos = pe_positions(model, l);
    if (pos != NULL) {
        attention_backward(dqkv, model->gs.att_D, dout, qkv, out, lse, PEPositions<PEBias>{pb, pos, T}, B, T, NH, HS, ctx.stream);
        pe_bias_reduce(&pb, model, l, B);
        return;
    }
#endif
    attention_backward(dqkv, model->gs.att_D, dout, qkv, out, lse, pb, B, T, NH, HS, ctx.stream);
    pe_bias_reduce(&pb, model, l, B);
}
#endif

// the activations of residual stream st (0: GPT-2's; 1: PE_STREAMS' second), and their backward buffers
static ActivationTensors* stream_acts(GPT2* model, int st) { return st == 0 ? &model->acts : &model->acts2; }
static GradScratch* stream_grads(GPT2* model, int st) { return st == 0 ? &model->gs : &model->gs2; }

// the block of residual stream st at layer l in t (the kernels' parameters or their gradients)
template<class T>
static BlockOf<T> stream_block(GPT2* model, const TensorSet<T>* t, int st, int l) {
#if PE_STREAMS > 1
    if (st > 0) { return pe_stream_block(model, t, l); }
#endif
    return gpt2_block(t, l, model->config.channels);
}

// ============================================================================
// DAPE (pe/dape.h), the second compile-time switch: the logits of all heads as a learned
// function of the scores and the base encoding's bias, through the hooks above

#define PE_PART PE_PART_CUDA
#include "pe/dape.h"
#undef PE_PART

// ============================================================================
// the model

// parameter layout on the device: every tensor aligned, the total a multiple of the
// number of optimizer shards (ZeRO stage 1 splits the flat vector in equal pieces)
static void gpt2_allocate(GPT2* model) {
    GPT2Config* cfg = &model->config;
    int hs = cfg->channels / cfg->num_heads;
    if (!attention_head_size_supported(hs)) {
        fatal("the CUDA trainer supports head sizes 32, 64 and 128; this model has %d (C=%d, NH=%d)", hs, cfg->channels, cfg->num_heads);
    }
    cuda_context_init();
    fill_in_parameter_sizes(model->param_sizes, cfg);
    model->num_parameters = count_parameters(cfg);
    size_t off = 0;
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        model->param_offsets[k] = off;
        off += (model->param_sizes[k] + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    }
    model->sharded = zero_stage_flag == 1 && ctx.world > 1;
    int shards = model->sharded ? ctx.world : 1;
    size_t shard = (off + (size_t)shards * PARAM_ALIGN - 1) / ((size_t)shards * PARAM_ALIGN) * PARAM_ALIGN;
    model->num_padded = shard * shards;
    model->shard_lo = model->sharded ? shard * ctx.rank : 0;
    model->shard_hi = model->shard_lo + shard;
    model->params_memory = (floatX*)cuda_malloc(model->num_padded * sizeof(floatX), "the parameters");
    point_parameters(&model->params, model->params_memory, model->param_offsets);
    model->master = (float*)cuda_malloc(shard * sizeof(float), "the fp32 master weights");
    model->partials = (float*)cuda_malloc((size_t)COLUMN_CHUNKS * 4 * cfg->channels * sizeof(float), "column-sum partials");
    model->norm_partials = (double*)cuda_malloc(NORM_BLOCKS * sizeof(double), "gradient-norm partials");
    model->logits_row = (float*)cuda_malloc((size_t)cfg->padded_vocab_size * sizeof(float), "one row of logits");
    float* slopes = (float*)malloc_check(cfg->num_heads * sizeof(float));
    alibi_slopes(slopes, cfg->num_heads);
    model->alibi_slopes = (float*)cuda_malloc(cfg->num_heads * sizeof(float), "the ALiBi slopes");
    cudaCheck(cudaMemcpy(model->alibi_slopes, slopes, cfg->num_heads * sizeof(float), cudaMemcpyHostToDevice));
    free(slopes);
    model->mean_loss = -1;
}

// host copy in checkpoint order <-> the device's aligned layout
static float* params_to_padded(const GPT2* model, const float* params) {
    float* padded = (float*)calloc_check(model->num_padded, sizeof(float));
    size_t src = 0;
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        memcpy(padded + model->param_offsets[k], params + src, model->param_sizes[k] * sizeof(float));
        src += model->param_sizes[k];
    }
    return padded;
}

static void params_from_padded(const GPT2* model, float* params, const float* padded) {
    size_t dst = 0;
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        memcpy(params + dst, padded + model->param_offsets[k], model->param_sizes[k] * sizeof(float));
        dst += model->param_sizes[k];
    }
}

// uploads parameters (checkpoint order, fp32): this rank's master shard and the kernels' copy
static void gpt2_upload_params(GPT2* model, const float* params) {
    float* padded = params_to_padded(model, params);
    cudaCheck(cudaMemcpy(model->master, padded + model->shard_lo, (model->shard_hi - model->shard_lo) * sizeof(float),
                         cudaMemcpyHostToDevice));
    floatX* px = (floatX*)malloc_check(model->num_padded * sizeof(floatX));
    for (size_t i = 0; i < model->num_padded; i++) { px[i] = (floatX)padded[i]; }
    cudaCheck(cudaMemcpy(model->params_memory, px, model->num_padded * sizeof(floatX), cudaMemcpyHostToDevice));
    free(px);
    free(padded);
}

// builds a freshly initialized model (llmc/model.h: gpt2_init_params on the host, the
// same values as the CPU path) for a configuration
void gpt2_build_from_config(GPT2* model, const GPT2Config* cfg, uint64_t seed) {
    memset(model, 0, sizeof(*model));
    model->config = *cfg;
    gpt2_config_check(cfg, "model configuration");
    if (cfg->pe != PE_ID || cfg->dape != DAPE_ID) {
        fatal("configuration asks for PE '%s' but this binary was built with PE '%s'", model_label(cfg->pe, cfg->dape), model_label(PE_ID, DAPE_ID));
    }
    gpt2_allocate(model);
    float* init = (float*)malloc_check(model->num_parameters * sizeof(float));
    gpt2_init_params(init, cfg, seed);
    gpt2_upload_params(model, init);
    free(init);
}

// loads a checkpoint (fp32 or bf16) after validating its header, size and PE
void gpt2_build_from_checkpoint(GPT2* model, const char* path) {
    memset(model, 0, sizeof(*model));
    int version;
    FILE* f = checkpoint_open(path, &model->config, &version);
    gpt2_allocate(model);
    size_t n = model->num_parameters;
    float* buf = (float*)malloc_check(n * sizeof(float));
    if (version == CHECKPOINT_FP32) {
        fread_check(buf, sizeof(float), n, f, path);
    } else {
        uint16_t* raw = (uint16_t*)malloc_check(n * sizeof(uint16_t));
        fread_check(raw, sizeof(uint16_t), n, f, path);
        for (size_t i = 0; i < n; i++) { buf[i] = bf16_to_float(raw[i]); }
        free(raw);
    }
    fclose(f);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(buf[i])) { fatal("%s holds a non-finite parameter (index %zu)", path, i); }
    }
    gpt2_upload_params(model, buf);
    free(buf);
}

// the fp32 parameters in checkpoint order, from the master weights. With ZeRO the other
// ranks' shards come from the grads buffer, where gpt2_update gathered them; if no update
// ran since (a skipped step), from the kernels' copy, which in bf16 is rounded.
static void gpt2_download_params(const GPT2* model, float* params) {
    float* padded = (float*)malloc_check(model->num_padded * sizeof(float));
    if (!model->sharded) {
        cudaCheck(cudaMemcpy(padded, model->master, model->num_padded * sizeof(float), cudaMemcpyDeviceToHost));
    } else if (model->master_gathered) {
        cudaCheck(cudaMemcpy(padded, model->grads_memory, model->num_padded * sizeof(float), cudaMemcpyDeviceToHost));
    } else {
        floatX* px = (floatX*)malloc_check(model->num_padded * sizeof(floatX));
        cudaCheck(cudaMemcpy(px, model->params_memory, model->num_padded * sizeof(floatX), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < model->num_padded; i++) { padded[i] = (float)px[i]; }
        free(px);
        cudaCheck(cudaMemcpy(padded + model->shard_lo, model->master, (model->shard_hi - model->shard_lo) * sizeof(float),
                             cudaMemcpyDeviceToHost));
#if !defined(ENABLE_FP32)
        fprintf(stderr, "warning: checkpoint after a skipped update with -z 1: other ranks' weights are saved from their bf16 copies\n");
#endif
    }
    params_from_padded(model, params, padded);
    free(padded);
}

// writes the parameters in fp32 (checkpoint version 3), crash-safely
void gpt2_save_checkpoint(const GPT2* model, const char* path) {
    int header[256];
    checkpoint_header_fill(header, &model->config, CHECKPOINT_FP32);
    float* buf = (float*)malloc_check(model->num_parameters * sizeof(float));
    gpt2_download_params(model, buf);
    AtomicFile af;
    atomic_open(&af, path);
    atomic_write(&af, header, sizeof(int), 256);
    atomic_write(&af, buf, sizeof(float), model->num_parameters);
    atomic_commit(&af);
    free(buf);
}

// carves one device allocation into tensors of the given byte sizes (each 256-byte aligned)
static void* carve(void*** ptrs, const size_t* bytes, int n, const char* what) {
    size_t total = 0;
    for (int i = 0; i < n; i++) { total += (bytes[i] + 255) / 256 * 256; }
    char* base = (char*)cuda_malloc(total, what);
    char* p = base;
    for (int i = 0; i < n; i++) {
        *ptrs[i] = bytes[i] > 0 ? (void*)p : NULL;
        p += (bytes[i] + 255) / 256 * 256;
    }
    return base;
}

static void gpt2_free_activations(GPT2* model) {
    cuda_free(&model->acts_memory);
    cuda_free(&model->gs_memory);
    cuda_free(&model->acts2_memory);
    cuda_free(&model->gs2_memory);
    if (model->host_losses != NULL) { cudaCheck(cudaFreeHost(model->host_losses)); }
    if (model->host_tokens != NULL) { cudaCheck(cudaFreeHost(model->host_tokens)); }
    free(model->pos_host);
    model->pos_host = NULL;
    memset(&model->acts, 0, sizeof(model->acts));
    memset(&model->gs, 0, sizeof(model->gs));
    memset(&model->acts2, 0, sizeof(model->acts2));
    memset(&model->gs2, 0, sizeof(model->gs2));
    model->host_losses = NULL;
    model->host_tokens = NULL;
}

// carves the activations of residual stream st for B x T tokens and NL stored layers:
// everything (st 0), or a second stream's own tensors (PE_STREAMS' st 1: its embeddings, the
// block's and the final layernorm's; the rest, which the streams share, NULL)
static void* activations_carve(ActivationTensors* a, const GPT2Config* cfg, int st, size_t B, size_t T, size_t NL, size_t pe_stride) {
    size_t L = cfg->num_layers, NH = cfg->num_heads, C = cfg->channels, Vp = cfg->padded_vocab_size;
    size_t N = B * T, X = sizeof(floatX), F = sizeof(float), S = st == 0; // S: a tensor the streams share
    void** aptrs[] = {
        (void**)&a->encoded, (void**)&a->ln1, (void**)&a->ln1_mean, (void**)&a->ln1_rstd, (void**)&a->qkv, (void**)&a->atty,
        (void**)&a->att_lse, (void**)&a->residual2, (void**)&a->ln2, (void**)&a->ln2_mean, (void**)&a->ln2_rstd, (void**)&a->fch,
        (void**)&a->fch_gelu, (void**)&a->residual3, (void**)&a->lnf, (void**)&a->lnf_mean, (void**)&a->lnf_rstd, (void**)&a->losses,
        (void**)&a->pe_a, (void**)&a->pe_s, (void**)&a->pe_w, (void**)&a->proj, (void**)&a->logits,
        (void**)&a->pe_rel, (void**)&a->pe_lnf, (void**)&a->positions, (void**)&a->inputs, (void**)&a->targets,
    };
    size_t abytes[] = {
        N * C * X, NL * N * C * X, NL * N * F, NL * N * F, NL * N * 3 * C * X, NL * N * C * X,
        S * NL * N * NH * F, NL * N * C * X, NL * N * C * X, NL * N * F, NL * N * F, NL * N * 4 * C * X,
        NL * N * 4 * C * X, NL * N * C * X, N * C * X, N * F, N * F, S * N * F,
        S * (PE_TOKEN_ACTS >= 1 ? NL * pe_stride * F : 0), S * (PE_TOKEN_ACTS >= 2 ? NL * pe_stride * F : 0),
        S * (PE_TOKEN_ACTS >= 3 ? NL * pe_stride * F : 0), S * N * C * X, S * (N < CLASSIFIER_CHUNK ? N : CLASSIFIER_CHUNK) * Vp * X,
        S * (PE_REL_BUFFERS ? T * C * X : 0), S * (PE_STREAMS > 1 ? N * C * X : 0), S * (size_t)rp_draws(cfg->pe, (int)L) * N * sizeof(int),
        S * N * sizeof(int), S * N * sizeof(int),
    };
    return carve(aptrs, abytes, (int)(sizeof(abytes) / sizeof(abytes[0])), st == 0 ? "the activations" : "the second stream's activations");
}

// carves the backward pass's buffers of residual stream st for B x T tokens: everything (st
// 0), or a second stream's own gradients of its residual stream, its big and its small
// activations (the rest NULL)
static void* grads_carve(GradScratch* g, GPT2* model, int st, size_t B, size_t T) {
    const GPT2Config* cfg = &model->config;
    size_t NH = cfg->num_heads, C = cfg->channels;
    size_t N = B * T, X = sizeof(floatX), F = sizeof(float), S = st == 0;
    void** gptrs[] = {
        (void**)&g->dres, (void**)&g->dbig, (void**)&g->dsmall, (void**)&g->att_D,
        (void**)&g->pe_dS, (void**)&g->pe_dw, (void**)&g->pe_dx, (void**)&g->pe_partials, (void**)&g->pe_drel,
        (void**)&g->att_dkv, (void**)&g->dape_partials, (void**)&g->pe_scratch,
    };
    size_t gbytes[] = {
        N * C * X, N * 4 * C * X, N * C * X, S * N * NH * F,
        S * (PE_TOKEN_ACTS >= 2 ? N * NH * F : 0), S * (PE_TOKEN_ACTS >= 3 ? N * NH * F : 0), S * (PE_TOKEN_ACTS >= 1 ? N * NH * X : 0),
        S * (cfg->dape != 0 ? dape_pe_slots(B, T, NH) + (size_t)NH * dape_kv_blocks(T) : (size_t)attention_kv_blocks(B, T, NH)) * PE_PAR_N * F,
        S * (PE_REL_BUFFERS ? (size_t)T * C * X : 0),
        S * (cfg->dape != 0 || PE_ATT_DKV ? N * 2 * C * F : 0),
        S * (cfg->dape != 0 ? (size_t)dape_query_blocks(B, T) * dape_num_params(dape_layer(model, 0)) * F : 0),
        S * pe_attention_scratch(cfg, B, T, 1) * F,
    };
    return carve(gptrs, gbytes, (int)(sizeof(gbytes) / sizeof(gbytes[0])), st == 0 ? "the backward pass's buffers" : "the second stream's backward buffers");
}

// (re)allocates activations for B x T tokens: every layer and the backward's buffers when
// training, one layer otherwise; a training pass after another gets room for both (the
// length buckets of a batch take turns)
static void gpt2_ensure_activations(GPT2* model, int B, int T, int training) {
    GPT2Config* cfg = &model->config;
    int L = cfg->num_layers, NH = cfg->num_heads;
    int fits = model->acts_memory != NULL && B <= model->acts_B && T <= model->acts_T
            && (!training || model->gs_memory != NULL);
    if (fits) { return; }
    if (training && model->gs_memory != NULL) {
        B = B > model->acts_B ? B : model->acts_B;
        T = T > model->acts_T ? T : model->acts_T;
    }
    gpt2_free_activations(model);
    size_t N = (size_t)B * T, NL = training ? (size_t)L : 1;
    size_t pe_stride = (N * NH + 63) / 64 * 64;
    model->acts_memory = activations_carve(&model->acts, cfg, 0, B, T, NL, pe_stride);
    if (training) { model->gs_memory = grads_carve(&model->gs, model, 0, B, T); }
    if (PE_STREAMS > 1) {
        model->acts2_memory = activations_carve(&model->acts2, cfg, 1, B, T, NL, pe_stride);
        if (training) { model->gs2_memory = grads_carve(&model->gs2, model, 1, B, T); }
    }
    // pinned host memory: the copies of the batch and of the losses run asynchronously
    cudaCheck(cudaMallocHost((void**)&model->host_losses, N * sizeof(float)));
    cudaCheck(cudaMallocHost((void**)&model->host_tokens, 2 * N * sizeof(int)));
    model->pos_host = (int*)malloc_check((size_t)rp_draws(cfg->pe, L) * N * sizeof(int));
    model->acts_N = N;
    model->pe_stride = pe_stride;
    model->acts_B = B;
    model->acts_T = T;
    model->acts_layers = (int)NL;
}

// allocates the parameter gradients on first use (evaluation never needs them)
static void gpt2_ensure_grads(GPT2* model) {
    if (model->grads_memory == NULL) {
        model->grads_memory = (float*)cuda_malloc(model->num_padded * sizeof(float), "the parameter gradients");
        cudaCheck(cudaMemset(model->grads_memory, 0, model->num_padded * sizeof(float)));
        point_parameters(&model->grads, model->grads_memory, model->param_offsets);
    }
}

// longest sequence the model can process: the encoding's limit (pe_max_length: learned's
// maxT, xPos's range of fp32 and bf16), randomized positions' range L (T of them are drawn from it)
int gpt2_max_length(const GPT2* model) {
    const GPT2Config* c = &model->config;
    int most = pe_max_length(c);
    return rp_active(model) && c->rp_len < most ? c->rp_len : most;
}

// can the model process T tokens? Within gpt2_max_length and, for an encoding whose range
// depends on its parameters, within that (pe_reach: floater's positions stay in range)
int gpt2_reaches(GPT2* model, int T) { return T <= gpt2_max_length(model) && pe_reach(model, T); }

// Forward pass over B x T tokens. With targets, computes the per-token losses and their
// mean over the scored targets (those not TARGET_UNSCORED: every one of a plain shard).
// dloss is d(objective)/d(mean loss): nonzero when training, and then the
// classifier's backward runs here (fused_classifier) and gpt2_backward continues it.
void gpt2_forward(GPT2* model, const int* inputs, const int* targets, int B, int T, float dloss) {
    GPT2Config* cfg = &model->config;
    int V = cfg->vocab_size, Vp = cfg->padded_vocab_size, L = cfg->num_layers, NH = cfg->num_heads, C = cfg->channels;
    if (T > gpt2_max_length(model)) {
        if (rp_active(model)) { fatal("randomized positions: T = %d tokens cannot be drawn from the range [0, %d) (-rp)", T, cfg->rp_len); }
        fatal("PE %s cannot process T = %d tokens: %s %d", pe_name(cfg->pe), T, PE_LIMIT_REASON, pe_max_length(cfg));
    }
    int scored = 0;
    for (int i = 0; i < B * T; i++) {
        if (inputs[i] < 0 || inputs[i] >= V || (targets != NULL && (targets[i] < TARGET_UNSCORED || targets[i] >= V))) {
            fatal("token id out of range [0, %d) at position %d of the batch", V, i);
        }
        scored += targets != NULL && targets[i] != TARGET_UNSCORED;
    }
    int training = dloss != 0;
    gpt2_ensure_activations(model, B, T, training);
    if (training) { gpt2_ensure_grads(model); }
    model->batch_size = B;
    model->seq_len = T;
    model->training = training;
    model->last_training = training && targets != NULL;
    pe_positions_fill(model, inputs, B, T, training);
    if (model->pos_span > pe_max_length(cfg)) {
        fatal("PE %s cannot take position %d: %s %d", pe_name(cfg->pe), model->pos_span - 1, PE_LIMIT_REASON, pe_max_length(cfg));
    }
    cudaStream_t st = ctx.stream;
    ActivationTensors a = model->acts;
    TensorSet<floatX> p = model->params;
    // through pinned memory (the previous step's copies are done: every forward pass ends synchronized)
    size_t BT = (size_t)B * T;
    memcpy(model->host_tokens, inputs, BT * sizeof(int));
    cudaCheck(cudaMemcpyAsync(a.inputs, model->host_tokens, BT * sizeof(int), cudaMemcpyHostToDevice, st));
    if (targets != NULL) {
        memcpy(model->host_tokens + BT, targets, BT * sizeof(int));
        cudaCheck(cudaMemcpyAsync(a.targets, model->host_tokens + BT, BT * sizeof(int), cudaMemcpyHostToDevice, st));
    }

    size_t N = model->acts_N;
    encoder_forward(a.encoded, a.inputs, p.wte, B * T, C);
    pe_embed_forward(model, a.encoded, B, T);
    for (int l = 0; l < L; l++) {
        size_t s = layer_slot(model, l);
        for (int st = 0; st < PE_STREAMS; st++) { // each residual stream's ln1 and qkv
            ActivationTensors* sa = stream_acts(model, st);
            BlockOf<floatX> w = stream_block(model, &model->params, st, l);
            block_qkv_forward(sa, s, N, block_input(model, sa, l), &w, B * T, C);
        }
        pe_layer_forward(model, l, B, T);
        floatX* l_qkv = a.qkv + s * N * 3 * C;
        floatX* l_atty = a.atty + s * N * C;
        if (cfg->dape != 0) {
            PEBias pb;
            pe_bias_setup(&pb, model, l, B, T, 0);
            dape_forward(model, l, l_atty, a.att_lse + s * N * NH, l_qkv, pb, B, T);
        } else {
            pe_attention_forward(model, l, l_atty, a.att_lse + s * N * NH, l_qkv, B, T);
        }
        for (int st = 0; st < PE_STREAMS; st++) { // each stream's projection, MLP and residuals
            ActivationTensors* sa = stream_acts(model, st);
            BlockOf<floatX> w = stream_block(model, &model->params, st, l);
            block_output_forward(sa, s, N, block_input(model, sa, l), a.proj, &w, B * T, C);
        }
    }
    floatX* last = a.residual3 + layer_slot(model, L - 1) * N * C;
    layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, last, p.lnfw, p.lnfb, B * T, C);
    pe_output_forward(model, B, T);
    if (targets == NULL) {
        model->mean_loss = -1;
        cudaCheck(cudaStreamSynchronize(st));
        return;
    }
    fused_classifier(a.losses, training ? model->gs.dsmall : NULL, training ? model->grads.wte : NULL, model->partials,
                     a.logits, a.lnf, p.wte, a.targets, dloss, B * T, scored, V, Vp, C);
    cudaCheck(cudaMemcpyAsync(model->host_losses, a.losses, (size_t)B * T * sizeof(float), cudaMemcpyDeviceToHost, st));
    cudaCheck(cudaStreamSynchronize(st));
    float sum = 0;
    for (int i = 0; i < B * T; i++) { sum += model->host_losses[i]; }
    model->mean_loss = scored > 0 ? sum / scored : 0;
}

void gpt2_zero_grad(GPT2* model) {
    if (model->grads_memory != NULL) {
        cudaCheck(cudaMemsetAsync(model->grads_memory, 0, model->num_padded * sizeof(float), ctx.stream));
    }
    model->master_gathered = 0;
}

// Backward pass of the last training forward, continuing from the gradient of lnf that
// the fused classifier left in gs.dsmall; accumulates into the parameter gradients.
// Gradient buffers hold one layer; dres carries the residual stream's gradient down.
void gpt2_backward(GPT2* model) {
    GPT2Config* cfg = &model->config;
    int B = model->batch_size, T = model->seq_len, L = cfg->num_layers, NH = cfg->num_heads, C = cfg->channels;
    if (!model->last_training || model->acts_layers != L) { fatal("gpt2_backward needs a training forward pass with targets first"); }
    TensorSet<floatX> p = model->params;
    TensorSet<float> g = model->grads;
    ActivationTensors a = model->acts;
    GradScratch d = model->gs;
    float* part = model->partials;
    size_t N = model->acts_N;
    cudaCheck(cudaMemsetAsync(d.dres, 0, (size_t)B * T * C * sizeof(floatX), ctx.stream));
    pe_output_backward(model, B, T); // first: d lnf of the classifier's input made of the streams
    layernorm_backward(d.dres, g.lnfw, g.lnfb, part, d.dsmall, a.residual3 + (size_t)(L - 1) * N * C,
                       p.lnfw, a.lnf_mean, a.lnf_rstd, B * T, C);
    for (int l = L - 1; l >= 0; l--) {
        size_t o = (size_t)l * N;
        for (int st = 0; st < PE_STREAMS; st++) { // each stream from d residual3 down to d atty
            BlockOf<floatX> w = stream_block(model, &model->params, st, l);
            BlockOf<float> gw = stream_block(model, &model->grads, st, l);
            block_output_backward(stream_acts(model, st), stream_grads(model, st), (size_t)l, N, &w, &gw, part, B * T, C);
        }
        if (cfg->dape != 0) {
            PEBias pb;
            pe_bias_setup(&pb, model, l, B, T, 1);
            dape_backward(model, l, d.dbig, d.dsmall, a.qkv + o * 3 * C, a.atty + o * C, a.att_lse + o * NH, &pb, B, T);
        } else {
            pe_attention_backward(model, l, d.dbig, d.dsmall, a.qkv + o * 3 * C, a.atty + o * C, a.att_lse + o * NH, B, T);
        }
        pe_layer_backward(model, l, B, T);
        for (int st = 0; st < PE_STREAMS; st++) { // each stream's qkv and ln1, into d of its input (dres)
            ActivationTensors* sa = stream_acts(model, st);
            BlockOf<floatX> w = stream_block(model, &model->params, st, l);
            BlockOf<float> gw = stream_block(model, &model->grads, st, l);
            block_qkv_backward(sa, stream_grads(model, st), (size_t)l, N, block_input(model, sa, l), &w, &gw, part, B * T, C, PE_LAYER_DLN1);
        }
    }
    pe_embed_backward(model, d.dres, B, T); // first: it may rescale the tokens' gradient
    encoder_backward(g.wte, d.dres, a.inputs, B * T, C);
}

// squared L2 norm of all parameter gradients (in double: the sum has millions of terms)
double gpt2_grad_norm_squared(const GPT2* model) {
    if (model->grads_memory == NULL) { return 0.0; }
    global_norm_kernel<<<NORM_BLOCKS, 512, 0, ctx.stream>>>(model->norm_partials, model->grads_memory, model->num_padded);
    cudaCheckLaunch("global_norm_kernel");
    double partials[NORM_BLOCKS];
    cudaCheck(cudaMemcpyAsync(partials, model->norm_partials, sizeof(partials), cudaMemcpyDeviceToHost, ctx.stream));
    cudaCheck(cudaStreamSynchronize(ctx.stream));
    double sum = 0.0;
    for (int i = 0; i < NORM_BLOCKS; i++) { sum += partials[i]; }
    return sum;
}

// every rank's master shard into `all` (the full fp32 vector), on the device
static void gpt2_allgather_master(GPT2* model, float* all) {
#if defined(USE_NCCL)
    ncclCheck(ncclAllGather(model->master, all, model->shard_hi - model->shard_lo, ncclFloat, ctx.nccl, ctx.stream));
#elif defined(USE_MPI)
    size_t shard = model->shard_hi - model->shard_lo;
    float* host = (float*)malloc_check(model->num_padded * sizeof(float));
    cudaCheck(cudaMemcpy(host + model->shard_lo, model->master, shard * sizeof(float), cudaMemcpyDeviceToHost));
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, host, (int)shard, MPI_FLOAT, MPI_COMM_WORLD);
    cudaCheck(cudaMemcpy(all, host, model->num_padded * sizeof(float), cudaMemcpyHostToDevice));
    free(host);
#else
    (void)model; (void)all;
#endif
}

// AdamW step t (1-based) at learning rate lr; gradients are multiplied by grad_scale
// first (clipping). Weight decay only on the matrices (llmc/model.h: PARAM_DECAY). Each
// rank updates its shard of the master weights; then the kernels' copy is refreshed (with
// ZeRO from every rank's shard, gathered in fp32 into the now unneeded gradient buffer).
void gpt2_update(GPT2* model, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    size_t shard = model->shard_hi - model->shard_lo;
    if (model->m_memory == NULL) {
        model->m_memory = (float*)cuda_malloc(shard * sizeof(float), "the AdamW first moments");
        model->v_memory = (float*)cuda_malloc(shard * sizeof(float), "the AdamW second moments");
        cudaCheck(cudaMemset(model->m_memory, 0, shard * sizeof(float)));
        cudaCheck(cudaMemset(model->v_memory, 0, shard * sizeof(float)));
    }
    float bc1 = (float)(1.0 - pow((double)beta1, t)), bc2 = (float)(1.0 - pow((double)beta2, t));
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        size_t lo = model->param_offsets[k], hi = lo + model->param_sizes[k];
        if (lo < model->shard_lo) { lo = model->shard_lo; }
        if (hi > model->shard_hi) { hi = model->shard_hi; }
        if (lo >= hi) { continue; }
        size_t at = lo - model->shard_lo;
        adamw_kernel<<<CEIL_DIV(hi - lo, 256), 256, 0, ctx.stream>>>(model->master + at, model->m_memory + at, model->v_memory + at,
            model->grads_memory + lo, hi - lo, lr, beta1, beta2, bc1, bc2, eps, PARAM_DECAY[k] ? weight_decay : 0.0f, grad_scale);
        cudaCheckLaunch("adamw_kernel");
    }
    pe_project(model);
    if (model->sharded) {
        gpt2_allgather_master(model, model->grads_memory);
        floatX_from_float(model->params_memory, model->grads_memory, model->num_padded);
        model->master_gathered = 1;
    } else {
        floatX_from_float(model->params_memory, model->master, model->num_padded);
    }
    pe_after_update(model);
}

// logits over the vocabulary at position t of row b of the last forward pass (sampling), in fp32
void gpt2_logits_row(GPT2* model, int b, int t, float* out) {
    int C = model->config.channels, Vp = model->config.padded_vocab_size;
    const floatX* x = model->acts.lnf + ((size_t)b * model->seq_len + t) * C;
    matmul_cublaslt(model->logits_row, 1, model->params.wte, x, NULL, Vp, 1, C, 1, 0, 0, NULL);
    cudaCheck(cudaMemcpyAsync(out, model->logits_row, Vp * sizeof(float), cudaMemcpyDeviceToHost, ctx.stream));
    cudaCheck(cudaStreamSynchronize(ctx.stream));
}

// per-token losses of the last forward pass with targets
void gpt2_token_losses(const GPT2* model, float* out) {
    memcpy(out, model->host_losses, (size_t)model->batch_size * model->seq_len * sizeof(float));
}

void gpt2_free(GPT2* model) {
    gpt2_free_activations(model);
    cuda_free(&model->params_memory);
    cuda_free(&model->grads_memory);
    cuda_free(&model->master);
    cuda_free(&model->m_memory);
    cuda_free(&model->v_memory);
    cuda_free(&model->partials);
    cuda_free(&model->norm_partials);
    cuda_free(&model->logits_row);
    cuda_free(&model->alibi_slopes);
    cuda_free(&model->pe_table);
    cuda_free(&model->pe_rel_table);
    cuda_free(&model->pe_pass);
    cuda_free(&model->rope_table);
    pe_free(model);
    cuda_context_free();
}

// averages the parameter gradients over the processes (data parallelism): NCCL on the
// device, or MPI on a host copy
void gpt2_allreduce_grads(GPT2* model, const MultiProcess* mp) {
    if (mp->world == 1 || model->grads_memory == NULL) { return; }
#if defined(USE_NCCL)
    ncclCheck(ncclAllReduce(model->grads_memory, model->grads_memory, model->num_padded, ncclFloat, ncclAvg, ctx.nccl, ctx.stream));
#else
    float* host = (float*)malloc_check(model->num_padded * sizeof(float));
    cudaCheck(cudaMemcpy(host, model->grads_memory, model->num_padded * sizeof(float), cudaMemcpyDeviceToHost));
    mp_allreduce_sum_f32(host, model->num_padded);
    for (size_t i = 0; i < model->num_padded; i++) { host[i] /= mp->world; }
    cudaCheck(cudaMemcpy(model->grads_memory, host, model->num_padded * sizeof(float), cudaMemcpyHostToDevice));
    free(host);
#endif
}

// the AdamW moments for the training state file (zeros before the first update): the
// whole model in checkpoint order, or with ZeRO this rank's shard as it lies on the device
size_t gpt2_opt_state_size(const GPT2* model) { return model->sharded ? model->shard_hi - model->shard_lo : model->num_parameters; }

void gpt2_opt_state_get(const GPT2* model, float* m, float* v) {
    size_t shard = model->shard_hi - model->shard_lo;
    float* moments[2] = {m, v};
    const float* device[2] = {model->m_memory, model->v_memory};
    for (int k = 0; k < 2; k++) {
        float* buf = (float*)calloc_check(shard, sizeof(float));
        if (device[k] != NULL) { cudaCheck(cudaMemcpy(buf, device[k], shard * sizeof(float), cudaMemcpyDeviceToHost)); }
        if (model->sharded) { memcpy(moments[k], buf, shard * sizeof(float)); }
        else { params_from_padded(model, moments[k], buf); }
        free(buf);
    }
}

void gpt2_opt_state_set(GPT2* model, const float* m, const float* v) {
    size_t shard = model->shard_hi - model->shard_lo;
    if (model->m_memory == NULL) {
        model->m_memory = (float*)cuda_malloc(shard * sizeof(float), "the AdamW first moments");
        model->v_memory = (float*)cuda_malloc(shard * sizeof(float), "the AdamW second moments");
    }
    const float* moments[2] = {m, v};
    float* device[2] = {model->m_memory, model->v_memory};
    for (int k = 0; k < 2; k++) {
        float* buf = model->sharded ? NULL : params_to_padded(model, moments[k]);
        cudaCheck(cudaMemcpy(device[k], model->sharded ? moments[k] : buf, shard * sizeof(float), cudaMemcpyHostToDevice));
        free(buf);
    }
}

// peak device memory held by the model so far (its own allocations, cuBLASLt's workspace included)
double gpt2_peak_memory_mib(const GPT2* model) {
    (void)model;
    return cuda_bytes_peak / 1048576.0;
}

// dense peak throughput of the GPU in this build's precision (TFLOP/s; 0: unknown):
// bf16 tensor cores, or plain fp32 for the fp32 build
static double gpu_peak_tflops(const char* name) {
    int fp32 = sizeof(floatX) == 4;
    if (strstr(name, "H100") != NULL) {
        if (strstr(name, "PCIe") != NULL) { return fp32 ? 51.2 : 756.0; }
        if (strstr(name, "NVL") != NULL) { return fp32 ? 60.0 : 835.0; }
        return fp32 ? 66.9 : 989.4; // SXM
    }
    if (strstr(name, "H200") != NULL || strstr(name, "GH200") != NULL) { return fp32 ? 66.9 : 989.4; }
    if (strstr(name, "A100") != NULL) { return fp32 ? 19.5 : 312.0; }
    return 0.0;
}

// extra text for the step line: model flops utilization, counting 6 flops per parameter
// and token plus the attention's 6 L C T (llm.c's estimate)
void gpt2_step_info(const GPT2* model, double seconds, long tokens, char* out, size_t n) {
    double peak = gpu_peak_tflops(ctx.prop.name);
    if (n == 0) { return; }
    if (peak <= 0 || seconds <= 0) { out[0] = '\0'; return; }
    const GPT2Config* c = &model->config;
    double flops_per_token = 6.0 * model->num_parameters + 6.0 * c->num_layers * c->channels * model->seq_len;
    double mfu = flops_per_token * tokens / seconds / (peak * 1e12);
    snprintf(out, n, " | %.1f%% %s MFU", 100.0 * mfu, PRECISION_NAME);
}

// ----------------------------------------------------------------------------
// the program: command line, data, training loop, evaluation (shared with the CPU trainer)

// a training pass's fixed cost in tokens, for the length buckets of masked rows (-lb): a guess
// (no GPU has timed it yet): a pass of a small model is a few milliseconds of kernel launches,
// so a batch is split only where that saves thousands of tokens
#define TRAINER_PASS_TOKENS 4096
#define TRAINER_NAME "train_gpt2cu"
#include "llmc/driver.h"

#ifndef TESTING
int main(int argc, char** argv) {
    // the ZeRO stage (-z): the driver validates the flag but does not pass it on
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-z") == 0) { zero_stage_flag = atoi(argv[i + 1]); }
    }
    return train_main(argc, argv);
}
#endif
