// Shared pieces of the CUDA device (devices/cuda/*.cpp and *.cu only; no other folder
// includes a CUDA, cuDNN or cuBLAS header): one checking macro per vendor API, and the
// context (GPU, stream, handles) that every op, loss and kernel of one device runs on.
//
// Two error channels, as everywhere in easel: set-up returns a Status naming the failed call,
// file and line (EASEL_*_RETURN_IF_ERROR); a failure on the hot path, after set-up succeeded,
// is a broken invariant and aborts with the same information (EASEL_*_CHECK).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>

#include "devices/arena_kernels.hpp"
#include "devices/device.hpp"
#include "devices/op.hpp"
#include "engine/status.hpp"

namespace easel {

Status cuda_error(cudaError_t e, const char* call, const char* file, int line);
Status cudnn_error(cudnnStatus_t e, const char* call, const char* file, int line);
Status cublas_error(cublasStatus_t e, const char* call, const char* file, int line);
[[noreturn]] void cuda_fatal(const Status& s);

#define EASEL_CUDA_RETURN_IF_ERROR(call)                                                          \
  do {                                                                                            \
    const cudaError_t easel_e_ = (call);                                                          \
    if (easel_e_ != cudaSuccess) return ::easel::cuda_error(easel_e_, #call, __FILE__, __LINE__); \
  } while (0)
#define EASEL_CUDNN_RETURN_IF_ERROR(call)                               \
  do {                                                                  \
    const cudnnStatus_t easel_e_ = (call);                              \
    if (easel_e_ != CUDNN_STATUS_SUCCESS)                               \
      return ::easel::cudnn_error(easel_e_, #call, __FILE__, __LINE__); \
  } while (0)
#define EASEL_CUBLAS_RETURN_IF_ERROR(call)                               \
  do {                                                                   \
    const cublasStatus_t easel_e_ = (call);                              \
    if (easel_e_ != CUBLAS_STATUS_SUCCESS)                               \
      return ::easel::cublas_error(easel_e_, #call, __FILE__, __LINE__); \
  } while (0)

#define EASEL_CUDA_CHECK(call)                                                       \
  do {                                                                               \
    const cudaError_t easel_e_ = (call);                                             \
    if (easel_e_ != cudaSuccess)                                                     \
      ::easel::cuda_fatal(::easel::cuda_error(easel_e_, #call, __FILE__, __LINE__)); \
  } while (0)
#define EASEL_CUDNN_CHECK(call)                                                       \
  do {                                                                                \
    const cudnnStatus_t easel_e_ = (call);                                            \
    if (easel_e_ != CUDNN_STATUS_SUCCESS)                                             \
      ::easel::cuda_fatal(::easel::cudnn_error(easel_e_, #call, __FILE__, __LINE__)); \
  } while (0)
#define EASEL_CUBLAS_CHECK(call)                                                       \
  do {                                                                                 \
    const cublasStatus_t easel_e_ = (call);                                            \
    if (easel_e_ != CUBLAS_STATUS_SUCCESS)                                             \
      ::easel::cuda_fatal(::easel::cublas_error(easel_e_, #call, __FILE__, __LINE__)); \
  } while (0)

// What one CUDA device's work runs on. Created by attach() on the device's thread; the stream
// is a blocking one (ordered with the legacy default stream, so that engine-level copies
// between rounds see finished work).
struct CudaContext {
  int ordinal = 0;
  Precision precision = Precision::fp32;
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;    // set to `stream`
  cublasHandle_t cublas = nullptr;  // set to `stream`, pointer mode host
  // The communication stream (non-blocking: the engine's copies between rounds do not wait for
  // it; the algorithm synchronizes it first) and the events that order it against `stream`
  // (Device::comm_waits_for_compute / compute_waits_for_comm). NCCL's queued collectives run on it.
  cudaStream_t comm_stream = nullptr;
  cudaEvent_t compute_done = nullptr, comm_done = nullptr;
};

// The context of a device made by make_cuda_device; aborts for any other Device.
CudaContext& cuda_context(Device& d);

// Builds the op / loss on ctx (cuda_op_list.cpp): cuDNN or cuBLAS where it applies,
// else easel's own kernel; every refusal logged once with its reason. Parameters are read from
// the arena in the user formats of devices/op.hpp; activations are in the descriptor's layout.
Result<std::unique_ptr<Op>> make_cuda_op(CudaContext& ctx, const OpDesc& desc);
Result<std::unique_ptr<LossOp>> make_cuda_loss(CudaContext& ctx, int64_t batch, int64_t classes);

// The update rules of engine/span_ops.hpp as kernels on ctx.stream (devices/cuda/update.cu).
std::unique_ptr<ArenaKernels> make_cuda_arena_kernels(CudaContext& ctx);

// Installs the ExternalMemory hooks for device (cudaMalloc on the current GPU) and
// pinned-host (cudaHostAlloc) memory; idempotent.
void install_cuda_memory();

}  // namespace easel
