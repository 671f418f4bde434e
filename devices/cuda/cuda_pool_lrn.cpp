// Pooling and LRN on the CUDA device, with Caffe's semantics (devices/cpu/ref_ops.cpp):
// cuDNN only where it computes exactly that, easel's own kernels (op_kernels.cu) elsewhere.
//
// Pooling: cuDNN rounds output sizes down, Caffe's ceil mode (the default) up; floor mode
// (ceil_mode false, PyTorch's) is cuDNN's rounding. Where cuDNN's size equals dst_shape (always
// in floor mode, where the last window starts at most at in + pad - k), every window lies inside
// the padded input, so the reference's average divides by kh*kw, which is cuDNN's
// AVERAGE_COUNT_INCLUDE_PADDING: cuDNN takes those average pools. Max pooling is always
// easel's kernel: Caffe sends a window's gradient to its first maximum, a rule cuDNN does not
// promise (and ties are common after a ReLU); the kernel keeps the argmax for backward.
//
// LRN: cuDNN's cross-channel LRN is Caffe's (cuDNN divides alpha by n itself, the window is
// centred for odd n) within cuDNN's limits on n, k and beta, on nchw; the own kernel keeps the
// scale for backward and serves nhwc.
#include <string>

#include "devices/cuda/cuda_ops.hpp"
#include "devices/cuda/op_kernels.hpp"

namespace easel {

namespace {

const float kOne = 1.f, kZero = 0.f;

std::string hw(int64_t h, int64_t w) {
  return std::to_string(h) + "x" + std::to_string(w);
}

// ---------------------------------------------------------------------------------------------
class CudnnPool final : public Op {
 public:
  CudnnPool(CudaContext& ctx, const OpDesc& d) : Op(d), ctx_(ctx), o_(dst_shape(d)) {}

  Status init() {
    const OpDesc& d = desc_;
    if (d.act != DType::f32)
      return unavailable(std::string(op_kind_name(d.kind)) +
                         ": bf16 activations take easel's kernel (f32 sums, rounded once)");
    if (d.kind == OpKind::max_pool)
      return unavailable(
          "max_pool: cuDNN does not promise Caffe's rule that the first maximum of a "
          "window takes its gradient (ties are common after a ReLU); easel's kernel keeps it");
    if (!fits_int(d.kh) || !fits_int(d.kw) || !fits_int(d.stride_h) || !fits_int(d.stride_w) ||
        !fits_int(d.pad_h) || !fits_int(d.pad_w))
      return unavailable("avg_pool: window beyond cuDNN's int arguments");
    EASEL_RETURN_IF_ERROR(make_tensor_desc(x_, d.src, d.layout));
    EASEL_RETURN_IF_ERROR(make_tensor_desc(y_, o_, d.layout));
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnCreatePoolingDescriptor(pool_.out()));
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnSetPooling2dDescriptor(
        pool_.get(), CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, CUDNN_NOT_PROPAGATE_NAN,
        static_cast<int>(d.kh), static_cast<int>(d.kw), static_cast<int>(d.pad_h),
        static_cast<int>(d.pad_w), static_cast<int>(d.stride_h), static_cast<int>(d.stride_w)));
    int n = 0, c = 0, h = 0, w = 0;
    EASEL_CUDNN_RETURN_IF_ERROR(
        cudnnGetPooling2dForwardOutputDim(pool_.get(), x_.get(), &n, &c, &h, &w));
    if (Shape4{n, c, h, w} != o_)
      return unavailable(d.ceil_mode ? "avg_pool: cuDNN rounds the output down to " + hw(h, w) +
                                           ", Caffe's ceil mode gives " + hw(o_.h, o_.w)
                                     : "avg_pool: cuDNN's output " + hw(h, w) +
                                           " differs from floor mode's " + hw(o_.h, o_.w));
    return {};
  }
  std::string impl() const override { return "cudnn:avg_pool"; }

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool /*training*/) override {
    EASEL_CUDNN_CHECK(
        cudnnPoolingForward(ctx_.cudnn, pool_.get(), &kOne, x_.get(), src, &kZero, y_.get(), dst));
  }
  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (diff_src == nullptr) return;
    EASEL_CUDNN_CHECK(cudnnPoolingBackward(ctx_.cudnn, pool_.get(), &kOne, y_.get(), dst, y_.get(),
                                           diff_dst, x_.get(), src, &kZero, x_.get(), diff_src));
  }

 private:
  CudaContext& ctx_;
  const Shape4 o_;
  TensorDesc x_, y_;  // src (and diff_src), dst (and diff_dst)
  PoolDesc pool_;
};

// ---------------------------------------------------------------------------------------------
class OwnPool final : public Op {
 public:
  OwnPool(CudaContext& ctx, const OpDesc& d) : Op(d), ctx_(ctx) {
    const Shape4 o = dst_shape(d);
    s_.n = d.src.n;
    s_.c = d.src.c;
    s_.h = d.src.h;
    s_.w = d.src.w;
    s_.oh = o.h;
    s_.ow = o.w;
    s_.kh = d.kh;
    s_.kw = d.kw;
    s_.sh = d.stride_h;
    s_.sw = d.stride_w;
    s_.ph = d.pad_h;
    s_.pw = d.pad_w;
    s_.nhwc = d.layout == Layout::nhwc;
  }

  Status init() {
    if (desc_.kind != OpKind::max_pool) return {};
    if (!fits_int(desc_.src.h * desc_.src.w))
      return unavailable("max_pool: an input plane of " + hw(desc_.src.h, desc_.src.w) +
                         " overflows the int32 argmax");
    EASEL_ASSIGN_OR_RETURN(argmax_, device_array<int32_t>(dst_shape(desc_).count()));
    return {};
  }
  std::string impl() const override {
    return desc_.kind == OpKind::max_pool ? "own:max_pool" : "own:avg_pool";
  }

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool /*training*/) override {
    if (desc_.act == DType::bf16)
      run_forward(bits(src), bits(dst));
    else
      run_forward(src, dst);
  }
  void backward(const float* /*src*/, const float* /*dst*/, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (diff_src == nullptr) return;
    if (desc_.act == DType::bf16)
      run_backward(bits(diff_dst), bits(diff_src));
    else
      run_backward(diff_dst, diff_src);
  }

 private:
  static uint16_t* bits(float* p) { return reinterpret_cast<uint16_t*>(p); }
  static const uint16_t* bits(const float* p) { return reinterpret_cast<const uint16_t*>(p); }
  // T: float, or uint16_t for bf16 activations (the kernels' overloads).
  template <typename T>
  void run_forward(const T* src, T* dst) {
    if (desc_.kind == OpKind::max_pool)
      cuda_kernels::max_pool_forward(ctx_.stream, s_, src, dst, argmax_.as<int32_t>());
    else
      cuda_kernels::avg_pool_forward(ctx_.stream, s_, src, dst);
  }
  template <typename T>
  void run_backward(const T* diff_dst, T* diff_src) {
    if (desc_.kind == OpKind::max_pool)
      cuda_kernels::max_pool_backward(ctx_.stream, s_, diff_dst, argmax_.as<int32_t>(), diff_src);
    else
      cuda_kernels::avg_pool_backward(ctx_.stream, s_, diff_dst, diff_src);
  }

  CudaContext& ctx_;
  cuda_kernels::PoolShape s_;
  Buffer argmax_;  // max: per dst element, h * w_in + w of the winner in its input plane
};

// ---------------------------------------------------------------------------------------------
class CudnnLrn final : public Op {
 public:
  CudnnLrn(CudaContext& ctx, const OpDesc& d) : Op(d), ctx_(ctx) {}

  Status init() {
    const OpDesc& d = desc_;
    if (d.layout != Layout::nchw)
      return unavailable("lrn: used on nchw only (cuDNN documents its LRN for NCHW)");
    if (d.local_size < CUDNN_LRN_MIN_N || d.local_size > CUDNN_LRN_MAX_N)
      return unavailable("lrn: local_size " + std::to_string(d.local_size) + " outside cuDNN's [" +
                         std::to_string(CUDNN_LRN_MIN_N) + ", " + std::to_string(CUDNN_LRN_MAX_N) +
                         "]");
    if (d.k < CUDNN_LRN_MIN_K || d.beta < CUDNN_LRN_MIN_BETA)
      return unavailable("lrn: k " + std::to_string(d.k) + " or beta " + std::to_string(d.beta) +
                         " below cuDNN's minimum (k >= " + std::to_string(CUDNN_LRN_MIN_K) +
                         ", beta >= " + std::to_string(CUDNN_LRN_MIN_BETA) + ")");
    EASEL_RETURN_IF_ERROR(make_tensor_desc(x_, d.src, d.layout));
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnCreateLRNDescriptor(lrn_.out()));
    // cuDNN's alpha is Caffe's: both divide it by the window size n.
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnSetLRNDescriptor(
        lrn_.get(), static_cast<unsigned>(d.local_size), d.alpha, d.beta, d.k));
    return {};
  }
  std::string impl() const override { return "cudnn:lrn"; }

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool /*training*/) override {
    EASEL_CUDNN_CHECK(cudnnLRNCrossChannelForward(ctx_.cudnn, lrn_.get(),
                                                  CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, x_.get(),
                                                  src, &kZero, x_.get(), dst));
  }
  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (diff_src == nullptr) return;
    EASEL_CUDNN_CHECK(cudnnLRNCrossChannelBackward(
        ctx_.cudnn, lrn_.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, x_.get(), dst, x_.get(),
        diff_dst, x_.get(), src, &kZero, x_.get(), diff_src));
  }

 private:
  CudaContext& ctx_;
  TensorDesc x_;  // every tensor of the op has src's shape
  LrnDesc lrn_;
};

// ---------------------------------------------------------------------------------------------
class OwnLrn final : public Op {
 public:
  OwnLrn(CudaContext& ctx, const OpDesc& d) : Op(d), ctx_(ctx) {
    s_.n = d.src.n;
    s_.c = d.src.c;
    s_.h = d.src.h;
    s_.w = d.src.w;
    s_.local_size = d.local_size;
    s_.alpha = d.alpha;
    s_.beta = d.beta;
    s_.k = d.k;
    s_.nhwc = d.layout == Layout::nhwc;
  }

  Status init() {
    EASEL_ASSIGN_OR_RETURN(scale_, device_array<float>(desc_.src.count()));
    return {};
  }
  std::string impl() const override { return "own:lrn"; }

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool /*training*/) override {
    cuda_kernels::lrn_forward(ctx_.stream, s_, src, dst, scale_.as<float>());
  }
  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (diff_src == nullptr) return;
    cuda_kernels::lrn_backward(ctx_.stream, s_, src, dst, scale_.as<float>(), diff_dst, diff_src);
  }

 private:
  CudaContext& ctx_;
  cuda_kernels::LrnShape s_;
  Buffer scale_;  // k + alpha/n * sum_window src^2 per element, from the last forward
};

template <typename T>
Result<std::unique_ptr<Op>> with_init(std::unique_ptr<T> op) {
  EASEL_RETURN_IF_ERROR(op->init());
  return std::unique_ptr<Op>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<Op>> make_cudnn_pool(CudaContext& ctx, const OpDesc& d) {
  return with_init(std::make_unique<CudnnPool>(ctx, d));
}
Result<std::unique_ptr<Op>> make_own_pool(CudaContext& ctx, const OpDesc& d) {
  return with_init(std::make_unique<OwnPool>(ctx, d));
}
// Both CUDA LRNs normalise across channels; Caffe's within-channel region is refused here (the
// run then says no CUDA implementation applies) rather than computed as the other region.
Status refuse_within_channel(const OpDesc& d) {
  if (d.lrn_within_channel)
    return unavailable("lrn: the within-channel region has no CUDA kernel (across channels only)");
  return {};
}

Result<std::unique_ptr<Op>> make_cudnn_lrn(CudaContext& ctx, const OpDesc& d) {
  EASEL_RETURN_IF_ERROR(refuse_within_channel(d));
  return with_init(std::make_unique<CudnnLrn>(ctx, d));
}
Result<std::unique_ptr<Op>> make_own_lrn(CudaContext& ctx, const OpDesc& d) {
  EASEL_RETURN_IF_ERROR(refuse_within_channel(d));
  return with_init(std::make_unique<OwnLrn>(ctx, d));
}

}  // namespace easel
