// The values the emulation's stand-ins give the runtime's and cuBLASLt's enums and types,
// printed one per line: built once against the real CUDA headers and once against the
// emulation's (make test-cuda-emulate), the two outputs must be equal.
#include <cstdio>
#include <cstddef>
#include <cuda_runtime.h>
#include <cublasLt.h>

#define V(x) printf("%-48s %lld\n", #x, (long long)(x))
int main() {
    V(cudaSuccess); V(cudaErrorInvalidValue); V(cudaErrorMemoryAllocation); V(cudaErrorInvalidConfiguration);
    V(cudaErrorInvalidSymbol); V(cudaErrorInvalidDevicePointer); V(cudaErrorInvalidMemcpyDirection);
    V(cudaErrorInsufficientDriver); V(cudaErrorNoDevice); V(cudaErrorInvalidDevice); V(cudaErrorInvalidResourceHandle);
    V(cudaErrorNotReady);
    V(cudaMemcpyHostToHost); V(cudaMemcpyHostToDevice); V(cudaMemcpyDeviceToHost); V(cudaMemcpyDeviceToDevice);
    V(cudaFuncAttributeMaxDynamicSharedMemorySize);
    V(CUDA_R_32F); V(CUDA_R_16F); V(CUDA_R_16BF);
    V(CUBLAS_STATUS_SUCCESS); V(CUBLAS_STATUS_NOT_INITIALIZED); V(CUBLAS_STATUS_INVALID_VALUE); V(CUBLAS_STATUS_NOT_SUPPORTED);
    V(CUBLAS_OP_N); V(CUBLAS_OP_T);
    V(CUBLAS_COMPUTE_32F); V(CUBLAS_COMPUTE_32F_FAST_16BF); V(CUBLAS_COMPUTE_32F_FAST_TF32);
    V(CUBLASLT_EPILOGUE_DEFAULT); V(CUBLASLT_EPILOGUE_BIAS); V(CUBLASLT_EPILOGUE_GELU); V(CUBLASLT_EPILOGUE_GELU_BIAS);
    V(CUBLASLT_EPILOGUE_GELU_AUX); V(CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
    V(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE); V(CUBLASLT_MATMUL_DESC_SCALE_TYPE); V(CUBLASLT_MATMUL_DESC_TRANSA);
    V(CUBLASLT_MATMUL_DESC_TRANSB); V(CUBLASLT_MATMUL_DESC_EPILOGUE); V(CUBLASLT_MATMUL_DESC_BIAS_POINTER);
    V(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER); V(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD);
    V(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES); V(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
    V(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES); V(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
    V(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
    V(sizeof(cublasLtMatmulAlgo_t)); V(sizeof(cublasLtMatmulHeuristicResult_t));
    V(offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize)); V(offsetof(cublasLtMatmulHeuristicResult_t, state));
    return 0;
}
