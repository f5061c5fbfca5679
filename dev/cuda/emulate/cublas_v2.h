// a stand-in for cuBLAS's types, for the CPU emulation (cuda_runtime.h)
#pragma once
typedef int cublasStatus_t;
enum { CUBLAS_STATUS_SUCCESS = 0 };
typedef int cublasOperation_t;
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
typedef int cublasComputeType_t;
enum { CUBLAS_COMPUTE_32F = 68 };
