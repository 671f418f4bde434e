// What the CUDA op files (cuda_ops.cpp, cuda_conv.cpp, cuda_pool_lrn.cpp, cuda_bn_join.cpp,
// cuda_loss.cpp) share: owned cuDNN descriptors, the size checks of the vendor APIs' int
// arguments, and each implementation's factory. A factory returns the op, or a Status saying why
// it does not apply (make_cuda_op, cuda_op_list.cpp, logs it once and tries the next one). A
// factory sees desc.act: bf16 activations where the context's precision is bf16 (conv, inner
// product, ReLU and pooling take them natively; make_cuda_op wraps the other kinds' f32 ops in
// with_bf16_boundary). Ops
// keep a reference to the context: they must not outlive their device.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "devices/cuda/cuda_common.hpp"
#include "engine/memory.hpp"

namespace easel {

// One cuDNN descriptor, destroyed with its owner. Created in an op's init() through
// EASEL_CUDNN_RETURN_IF_ERROR(cudnnCreate...(x.out())).
template <typename T, cudnnStatus_t (*Destroy)(T)>
class CudnnDesc {
 public:
  CudnnDesc() = default;
  ~CudnnDesc() {
    if (d_) Destroy(d_);
  }
  CudnnDesc(const CudnnDesc&) = delete;
  CudnnDesc& operator=(const CudnnDesc&) = delete;
  T get() const { return d_; }
  T* out() { return &d_; }

 private:
  T d_ = nullptr;
};
using TensorDesc = CudnnDesc<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc = CudnnDesc<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = CudnnDesc<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = CudnnDesc<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor>;
using LrnDesc = CudnnDesc<cudnnLRNDescriptor_t, cudnnDestroyLRNDescriptor>;

// True when every value fits the int arguments of cuDNN / cuBLAS.
inline bool fits_int(int64_t v) {
  return v >= 0 && v <= std::numeric_limits<int>::max();
}

// Creates `t` as a dense tensor of `type` (float unless said), shape s, layout l. Fails
// (unavailable) when the tensor is too large for cuDNN's int sizes.
Status make_tensor_desc(TensorDesc& t, const Shape4& s, Layout l,
                        cudnnDataType_t type = CUDNN_DATA_FLOAT);

// Device memory for `count` elements of T, or the allocator's reason.
template <typename T>
Result<Buffer> device_array(int64_t count) {
  return Buffer::allocate(static_cast<size_t>(count) * sizeof(T), MemKind::device);
}

// The implementations, by kind (the order of preference is make_cuda_op's list in
// cuda_op_list.cpp).
Result<std::unique_ptr<Op>> make_cudnn_conv(CudaContext& ctx, const OpDesc& d);
Result<std::unique_ptr<Op>> make_cudnn_conv_ohwi(CudaContext& ctx, const OpDesc& d);
Result<std::unique_ptr<Op>> make_cudnn_pool(CudaContext& ctx, const OpDesc& d);
Result<std::unique_ptr<Op>> make_own_pool(CudaContext& ctx, const OpDesc& d);
Result<std::unique_ptr<Op>> make_cudnn_lrn(CudaContext& ctx, const OpDesc& d);
Result<std::unique_ptr<Op>> make_own_lrn(CudaContext& ctx, const OpDesc& d);
Result<std::unique_ptr<Op>> make_cublas_ip(CudaContext& ctx, const OpDesc& d);
Result<std::unique_ptr<Op>> make_own_relu(CudaContext& ctx, const OpDesc& d);
Result<std::unique_ptr<Op>> make_own_dropout(CudaContext& ctx, const OpDesc& d);
Result<std::unique_ptr<Op>> make_cudnn_batch_norm(CudaContext& ctx, const OpDesc& d);
Result<std::unique_ptr<Op>> make_own_batch_norm(CudaContext& ctx, const OpDesc& d);
Result<std::unique_ptr<Op>> make_own_add(CudaContext& ctx, const OpDesc& d);
Result<std::unique_ptr<Op>> make_own_concat(CudaContext& ctx, const OpDesc& d);
Result<std::unique_ptr<Op>> make_own_global_avg_pool(CudaContext& ctx, const OpDesc& d);

// `op`, built for f32 activations, reading and writing bf16 ones (cuda_bf16_boundary.cpp): its
// inputs widened into f32 buffers of its own, its outputs rounded into the bf16 tensors.
Result<std::unique_ptr<Op>> with_bf16_boundary(CudaContext& ctx, std::unique_ptr<Op> op);

}  // namespace easel
