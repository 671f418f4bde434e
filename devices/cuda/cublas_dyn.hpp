// cuBLAS, opened on first use (dlopen) instead of linked: loading libcublas (and the
// libcublasLt it pulls in) costs about 210 MB of resident memory at process start, measured on
// this project's machine with an empty program linked against it, whether or not a GPU is ever
// used; the CPU run's whole budget is 250 MB (issue 4). The CUDA runtime, cuDNN and NCCL cost
// little and stay linked.
#pragma once

#include <cublas_v2.h>

#include "engine/status.hpp"

namespace easel::cublas_dyn {

// The cuBLAS entry points easel calls (the names are cublas_v2.h's, which map some of them to
// their _v2 symbols).
struct Api {
  decltype(&::cublasCreate) create = nullptr;
  decltype(&::cublasDestroy) destroy = nullptr;
  decltype(&::cublasSetStream) set_stream = nullptr;
  decltype(&::cublasSetPointerMode) set_pointer_mode = nullptr;
  decltype(&::cublasSgemm) sgemm = nullptr;
  // cublasGemmEx with a cublasComputeType_t (cublas_api.h overloads the name for C++ callers).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  decltype(&::cublasGetStatusName) status_name = nullptr;
  decltype(&::cublasGetStatusString) status_string = nullptr;
};

// Opens the library once (thread-safe) and resolves every entry point; the error names the
// library or the symbol that is missing. Later calls return the same answer.
Result<const Api*> load();

// The table, once load() has succeeded (the CUDA device loads it when it attaches).
const Api& api();

}  // namespace easel::cublas_dyn
