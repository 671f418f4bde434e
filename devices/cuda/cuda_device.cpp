// The CUDA device: the GPU list, the error channel of the CUDA, cuDNN and cuBLAS calls, the
// memory hooks (device and pinned-host memory), and the Device itself: one GPU, one stream,
// one cuDNN and one cuBLAS handle, used by the one thread that attached it.
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <mutex>

#include "devices/cuda/cublas_dyn.hpp"
#include "devices/cuda/cuda_common.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "devices/cuda/op_kernels.hpp"
#include "engine/log.hpp"

namespace easel {

namespace {

std::string where(const char* call, const char* file, int line) {
  return std::string(call) + " at " + file + ":" + std::to_string(line);
}

// cudaMalloc / cudaHostAlloc behind engine/memory.hpp's ExternalMemory.
void* cuda_alloc(size_t bytes, MemKind kind, std::string* why) {
  void* p = nullptr;
  const cudaError_t e = kind == MemKind::device ? cudaMalloc(&p, bytes)
                                                : cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    *why = std::string(kind == MemKind::device ? "cudaMalloc" : "cudaHostAlloc") + ": " +
           cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky-free error state of a failed allocation
    return nullptr;
  }
  return p;
}

void cuda_free(void* p, MemKind kind) {
  // Freeing cannot fail for a pointer we allocated; a failure here means the context is gone
  // (process exit after a fatal error), where there is nothing left to do.
  if (kind == MemKind::device)
    cudaFree(p);
  else
    cudaFreeHost(p);
}

// cudaMemcpy does not wait for the DMA of a pageable-host -> device copy, nor for a device ->
// device one, and cudaMemset is asynchronous; the engine's contract is "returns when the bytes
// have landed", across GPUs too: so wait on every GPU the call touched (set-up and between
// rounds only; the calling thread's current device is restored).
void sync_devices_of(std::initializer_list<const void*> ptrs) {
  int current = 0;
  EASEL_CUDA_CHECK(cudaGetDevice(&current));
  for (const void* p : ptrs) {
    cudaPointerAttributes a{};
    EASEL_CUDA_CHECK(cudaPointerGetAttributes(&a, p));
    if (a.type != cudaMemoryTypeDevice) continue;
    EASEL_CUDA_CHECK(cudaSetDevice(a.device));
    EASEL_CUDA_CHECK(cudaDeviceSynchronize());
  }
  EASEL_CUDA_CHECK(cudaSetDevice(current));
}

void cuda_copy(void* dst, const void* src, size_t bytes) {
  EASEL_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  sync_devices_of({dst, src});
}

void cuda_zero(void* p, size_t bytes) {
  cudaPointerAttributes a{};
  EASEL_CUDA_CHECK(cudaPointerGetAttributes(&a, p));
  int current = 0;
  EASEL_CUDA_CHECK(cudaGetDevice(&current));
  if (a.type == cudaMemoryTypeDevice) EASEL_CUDA_CHECK(cudaSetDevice(a.device));
  EASEL_CUDA_CHECK(cudaMemset(p, 0, bytes));
  EASEL_CUDA_CHECK(cudaDeviceSynchronize());
  EASEL_CUDA_CHECK(cudaSetDevice(current));
}

class CudaDevice final : public Device {
 public:
  CudaDevice(int ordinal, Precision precision) {
    ctx_.ordinal = ordinal;
    ctx_.precision = precision;
  }
  ~CudaDevice() override {
    if (!attached_) return;
    cudaSetDevice(ctx_.ordinal);
    cudaStreamSynchronize(ctx_.stream);
    if (ctx_.comm_stream) cudaStreamSynchronize(ctx_.comm_stream);
    kernels_.reset();
    comm_kernels_.reset();
    if (ctx_.compute_done) cudaEventDestroy(ctx_.compute_done);
    if (ctx_.comm_done) cudaEventDestroy(ctx_.comm_done);
    if (ctx_.comm_stream) cudaStreamDestroy(ctx_.comm_stream);
    if (ctx_.cublas) cublas_dyn::api().destroy(ctx_.cublas);
    if (ctx_.cudnn) cudnnDestroy(ctx_.cudnn);
    if (ctx_.stream) cudaStreamDestroy(ctx_.stream);
  }

  std::string name() const override { return "cuda:" + std::to_string(ctx_.ordinal); }
  MemKind memory() const override { return MemKind::device; }

  Status attach() override {
    EASEL_CUDA_RETURN_IF_ERROR(cudaSetDevice(ctx_.ordinal));
    if (attached_) return {};
    install_cuda_memory();
    // A blocking stream: ordered with the legacy default stream, which the engine-level
    // copies (copy_bytes) use between rounds.
    EASEL_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&ctx_.stream));
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnCreate(&ctx_.cudnn));
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnSetStream(ctx_.cudnn, ctx_.stream));
    EASEL_ASSIGN_OR_RETURN(const cublas_dyn::Api* blas, cublas_dyn::load());
    EASEL_CUBLAS_RETURN_IF_ERROR(blas->create(&ctx_.cublas));
    EASEL_CUBLAS_RETURN_IF_ERROR(blas->set_stream(ctx_.cublas, ctx_.stream));
    EASEL_CUBLAS_RETURN_IF_ERROR(blas->set_pointer_mode(ctx_.cublas, CUBLAS_POINTER_MODE_HOST));
    // fp32 keeps cuBLAS's pedantic-free default (FMA, no tensor cores for sgemm); the inner
    // products ask for TF32 or bf16 explicitly through cublasGemmEx's compute type.
    kernels_ = make_cuda_arena_kernels(ctx_);
    // The communication stream, its own kernels (comm_ctx_: ctx_ on that stream) and the events
    // between the two streams.
    EASEL_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&ctx_.comm_stream, cudaStreamNonBlocking));
    EASEL_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&ctx_.compute_done, cudaEventDisableTiming));
    EASEL_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ctx_.comm_done, cudaEventDisableTiming));
    comm_ctx_ = ctx_;
    comm_ctx_.stream = ctx_.comm_stream;
    comm_kernels_ = make_cuda_arena_kernels(comm_ctx_);
    attached_ = true;
    return {};
  }

  Result<std::unique_ptr<Op>> make_op(const OpDesc& desc) override {
    if (!attached_) return internal_error(name() + ": make_op before attach()");
    if (std::string why = validate(desc); !why.empty()) return invalid_argument(why);
    return make_cuda_op(ctx_, desc);
  }

  Result<std::unique_ptr<LossOp>> make_loss(int64_t batch, int64_t classes) override {
    if (!attached_) return internal_error(name() + ": make_loss before attach()");
    if (batch <= 0 || classes <= 0)
      return invalid_argument("loss: batch " + std::to_string(batch) + " and classes " +
                              std::to_string(classes) + " must be positive");
    return make_cuda_loss(ctx_, batch, classes);
  }

  DType activation_type() const override {
    return ctx_.precision == Precision::bf16 ? DType::bf16 : DType::f32;
  }
  void normalize_bytes(const uint8_t* bytes, const float* table, const Shape4& shape, Layout layout,
                       DType to, void* dst) override {
    EASEL_CHECK_MSG(attached_, "CUDA device used before attach()");
    cuda_kernels::normalize_bytes(ctx_.stream, bytes, table, shape.n, shape.c, shape.h * shape.w,
                                  layout == Layout::nhwc, to == DType::bf16, dst);
  }
  void to_activations(const float* src, DType to, void* dst, int64_t count) override {
    EASEL_CHECK_MSG(attached_, "CUDA device used before attach()");
    if (to == DType::bf16) {
      cuda_kernels::to_bf16(ctx_.stream, src, static_cast<uint16_t*>(dst), count);
    } else if (dst != src && count > 0) {
      EASEL_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(count) * sizeof(float),
                                       cudaMemcpyDeviceToDevice, ctx_.stream));
    }
  }
  void add_activations(void* y, const void* x, DType t, int64_t count) override {
    if (t == DType::f32) {
      Device::add_activations(y, x, t, count);  // the arena kernels' axpy
      return;
    }
    EASEL_CHECK_MSG(attached_, "CUDA device used before attach()");
    cuda_kernels::add_bf16(ctx_.stream, static_cast<uint16_t*>(y), static_cast<const uint16_t*>(x),
                           count);
  }

  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    EASEL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx_.stream));
  }
  void download(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    EASEL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx_.stream));
    EASEL_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }
  void synchronize() override {
    if (attached_) EASEL_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }
  ArenaKernels& kernels() override {
    EASEL_CHECK_MSG(attached_, "CUDA device used before attach()");
    return *kernels_;
  }
  ArenaKernels& comm_kernels() override {
    EASEL_CHECK_MSG(attached_, "CUDA device used before attach()");
    return *comm_kernels_;
  }
  // An event recorded on one stream and waited for on the other: the GPU orders them, the host
  // goes on at once.
  void comm_waits_for_compute() override {
    EASEL_CHECK_MSG(attached_, "CUDA device used before attach()");
    EASEL_CUDA_CHECK(cudaEventRecord(ctx_.compute_done, ctx_.stream));
    EASEL_CUDA_CHECK(cudaStreamWaitEvent(ctx_.comm_stream, ctx_.compute_done, 0));
  }
  void compute_waits_for_comm() override {
    EASEL_CHECK_MSG(attached_, "CUDA device used before attach()");
    EASEL_CUDA_CHECK(cudaEventRecord(ctx_.comm_done, ctx_.comm_stream));
    EASEL_CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream, ctx_.comm_done, 0));
  }
  void synchronize_comm() override {
    if (attached_) EASEL_CUDA_CHECK(cudaStreamSynchronize(ctx_.comm_stream));
  }

  CudaContext& context() {
    EASEL_CHECK_MSG(attached_, "CUDA device used before attach()");
    return ctx_;
  }

 private:
  CudaContext ctx_;
  CudaContext comm_ctx_;  // ctx_ with the communication stream as its stream (comm_kernels_)
  bool attached_ = false;
  std::unique_ptr<ArenaKernels> kernels_, comm_kernels_;
};

}  // namespace

Status cuda_error(cudaError_t e, const char* call, const char* file, int line) {
  return unavailable("CUDA: " + std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) +
                     ") in " + where(call, file, line));
}

Status cudnn_error(cudnnStatus_t e, const char* call, const char* file, int line) {
  return unavailable("cuDNN: " + std::string(cudnnGetErrorString(e)) + " in " +
                     where(call, file, line));
}

Status cublas_error(cublasStatus_t e, const char* call, const char* file, int line) {
  const cublas_dyn::Api& blas = cublas_dyn::api();
  return unavailable("cuBLAS: " + std::string(blas.status_name(e)) + " (" + blas.status_string(e) +
                     ") in " + where(call, file, line));
}

void cuda_fatal(const Status& s) {
  std::fprintf(stderr, "easel: fatal GPU error: %s\n", s.message().c_str());
  std::abort();
}

void install_cuda_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
    ExternalMemory m;
    m.alloc = cuda_alloc;
    m.free = cuda_free;
    m.copy = cuda_copy;
    m.zero = cuda_zero;
    install_external_memory(m);
  });
}

CudaContext& cuda_context(Device& d) {
  auto* c = dynamic_cast<CudaDevice*>(&d);
  EASEL_CHECK_MSG(c != nullptr, "cuda_context: not a CUDA device");
  return c->context();
}

bool cuda_built() {
  return true;
}

Result<std::vector<GpuInfo>> list_gpus() {
  int count = 0;  // left unchanged by a failing call (no driver)
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return unavailable(std::string("no usable GPU: the CUDA runtime says ") + cudaGetErrorName(e) +
                       " (" + cudaGetErrorString(e) + ")");
  }
  if (count <= 0) return unavailable("no usable GPU: the CUDA runtime found no device");
  std::vector<GpuInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    EASEL_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, i));
    GpuInfo g;
    g.ordinal = i;
    g.name = prop.name;
    g.memory_bytes = prop.totalGlobalMem;
    g.cc_major = prop.major;
    g.cc_minor = prop.minor;
    g.multiprocessors = prop.multiProcessorCount;
    out.push_back(std::move(g));
  }
  return out;
}

Status prepare_gpu_memory() {
  EASEL_RETURN_IF_ERROR(list_gpus().status());
  install_cuda_memory();
  return {};
}

Result<std::unique_ptr<Device>> make_cuda_device(int ordinal, Precision precision) {
  EASEL_ASSIGN_OR_RETURN(std::vector<GpuInfo> gpus, list_gpus());
  if (ordinal < 0 || ordinal >= static_cast<int>(gpus.size()))
    return invalid_argument("--device: cuda:" + std::to_string(ordinal) + " does not exist (" +
                            std::to_string(gpus.size()) + " GPU(s): cuda:0.." +
                            std::to_string(gpus.size() - 1) + ")");
  // TF32 and bf16 tensor cores came with compute capability 8.0 (A100); before it cuDNN and
  // cuBLAS would quietly compute fp32 (tf32) or emulate bf16 slowly.
  const GpuInfo& g = gpus[static_cast<size_t>(ordinal)];
  if (precision != Precision::fp32 && g.cc_major < 8)
    return invalid_argument(std::string("--precision ") + precision_name(precision) +
                            ": cuda:" + std::to_string(ordinal) + " (" + g.name +
                            ", compute capability " + std::to_string(g.cc_major) + "." +
                            std::to_string(g.cc_minor) + ") has no " + precision_name(precision) +
                            " tensor cores (8.0 and later); use fp32");
  return std::unique_ptr<Device>(std::make_unique<CudaDevice>(ordinal, precision));
}

}  // namespace easel
