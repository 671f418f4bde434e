// CUDA implementations of the inner product (cuBLAS), ReLU and dropout (own kernels), one
// section each, and the cuDNN helpers the op files share. Convolution is in cuda_conv.cpp,
// pooling and LRN in cuda_pool_lrn.cpp, the loss in cuda_loss.cpp; the device chooses among them
// from its ordered list in cuda_op_list.cpp.
#include <string>

#include "devices/cuda/cublas_dyn.hpp"
#include "devices/cuda/cuda_ops.hpp"
#include "devices/cuda/op_kernels.hpp"
#include "devices/dropout_hash.hpp"

namespace easel {

namespace {

const float kOne = 1.f, kZero = 0.f;

// ---------------------------------------------------------------------------------------------
// Inner product with cuBLAS. Row-major: dst[N, oc] = src[N, K] * W[oc, K]^T + bias, K = C*H*W in
// the layout's own order (so both layouts are the same product). cuBLAS is column-major: a
// row-major [r, c] matrix is its transpose [c, r] with leading dimension c.
class CublasInnerProduct final : public Op {
 public:
  CublasInnerProduct(CudaContext& ctx, const OpDesc& d)
      : Op(d), ctx_(ctx), n_(d.src.n), k_(d.src.per_image()), oc_(d.oc) {}

  Status init() {
    if (!fits_int(n_) || !fits_int(k_) || !fits_int(oc_))
      return unavailable("matrix sizes beyond cuBLAS's int arguments");
    if (desc_.fused_relu) {
      EASEL_ASSIGN_OR_RETURN(masked_, device_array<float>(n_ * oc_));
    }
    return {};
  }
  std::string impl() const override { return "cublas:sgemm"; }

  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool /*training*/) override {
    // dst^T[oc, N] = (W^T[K, oc])^T * src^T[K, N]
    EASEL_CUBLAS_CHECK(cublas_dyn::api().sgemm(ctx_.cublas, CUBLAS_OP_T, CUBLAS_OP_N, oc(), n(),
                                               k(), &kOne, weights[0], k(), src, k(), &kZero, dst,
                                               oc()));
    cuda_kernels::add_bias_relu_rows(ctx_.stream, dst, desc_.bias ? weights[1] : nullptr, n_, oc_,
                                     desc_.fused_relu);
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    const float* g = diff_dst;  // [N, oc]
    if (desc_.fused_relu) {
      cuda_kernels::relu_backward(ctx_.stream, dst, diff_dst, masked_.as<float>(), n_ * oc_);
      g = masked_.as<float>();
    }
    // diff_W[oc, K] = g^T * src, i.e. diff_W^T[K, oc] = src^T[K, N] * (g^T[oc, N])^T
    EASEL_CUBLAS_CHECK(cublas_dyn::api().sgemm(ctx_.cublas, CUBLAS_OP_N, CUBLAS_OP_T, k(), oc(),
                                               n(), &kOne, src, k(), g, oc(), &kZero,
                                               diff_weights[0], k()));
    if (desc_.bias) cuda_kernels::column_sums(ctx_.stream, g, n_, oc_, diff_weights[1]);
    if (diff_src == nullptr) return;
    // diff_src[N, K] = g * W, i.e. diff_src^T[K, N] = W^T[K, oc] * g^T[oc, N]
    EASEL_CUBLAS_CHECK(cublas_dyn::api().sgemm(ctx_.cublas, CUBLAS_OP_N, CUBLAS_OP_N, k(), n(),
                                               oc(), &kOne, weights[0], k(), g, oc(), &kZero,
                                               diff_src, k()));
  }

 private:
  int n() const { return static_cast<int>(n_); }
  int k() const { return static_cast<int>(k_); }
  int oc() const { return static_cast<int>(oc_); }

  CudaContext& ctx_;
  int64_t n_, k_, oc_;
  Buffer masked_;  // fused ReLU: diff_dst where dst > 0, else 0 [N, oc]
};

// ---------------------------------------------------------------------------------------------
// ReLU (negative slope 0); backward tests dst > 0, so that it also works in place.
class OwnRelu final : public Op {
 public:
  OwnRelu(CudaContext& ctx, const OpDesc& d) : Op(d), ctx_(ctx) {}
  std::string impl() const override { return "own:relu"; }

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool /*training*/) override {
    cuda_kernels::relu_forward(ctx_.stream, src, dst, desc_.src.count());
  }
  void backward(const float* /*src*/, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (diff_src)
      cuda_kernels::relu_backward(ctx_.stream, dst, diff_dst, diff_src, desc_.src.count());
  }

 private:
  CudaContext& ctx_;
};

// ---------------------------------------------------------------------------------------------
// Dropout: in training a counter-based hash of (desc.seed, the op's training-forward count,
// memory index) draws the mask (devices/dropout_hash.hpp), which is kept for backward; identity
// otherwise. It is the CPU's own kernel's mask (own_dropout.cpp, which draws by logical index)
// in nchw and wherever h = w = 1; in nhwc with h*w > 1 it is equal in distribution only. The
// CPU's reference kernel draws a sequential stream.
class OwnDropout final : public Op {
 public:
  OwnDropout(CudaContext& ctx, const OpDesc& d)
      : Op(d), ctx_(ctx), seed_(d.seed), count_(d.src.count()), scale_(1.f / (1.f - d.ratio)) {}

  Status init() {
    EASEL_ASSIGN_OR_RETURN(mask_, device_array<uint8_t>(count_));
    return {};
  }
  std::string impl() const override { return "own:dropout"; }

  void set_draw(uint64_t stream, uint64_t n) override {
    seed_ = dropout_hash::stream_seed(desc_.seed, stream);
    calls_ = n;
  }

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool training) override {
    last_training_ = training;
    if (!training) {
      copy(dst, src);
      return;
    }
    cuda_kernels::dropout_forward(ctx_.stream, src, dst, mask_.as<uint8_t>(), count_, desc_.ratio,
                                  scale_, seed_, calls_++);
  }

  void backward(const float* /*src*/, const float* /*dst*/, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (diff_src == nullptr) return;
    if (!last_training_) {
      copy(diff_src, diff_dst);
      return;
    }
    cuda_kernels::dropout_backward(ctx_.stream, diff_dst, mask_.as<uint8_t>(), diff_src, count_,
                                   scale_);
  }

 private:
  void copy(float* dst, const float* src) {
    if (dst == src || count_ == 0) return;
    EASEL_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(count_) * sizeof(float),
                                     cudaMemcpyDeviceToDevice, ctx_.stream));
  }

  CudaContext& ctx_;
  uint64_t seed_;  // desc.seed in the stream set_draw named
  int64_t count_;
  float scale_;
  Buffer mask_;         // 1 kept, 0 dropped, per element of the last training forward
  uint64_t calls_ = 0;  // training forwards so far: the hash's counter
  bool last_training_ = false;
};

template <typename T>
Result<std::unique_ptr<Op>> with_init(std::unique_ptr<T> op) {
  EASEL_RETURN_IF_ERROR(op->init());
  return std::unique_ptr<Op>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<Op>> make_cublas_ip(CudaContext& ctx, const OpDesc& d) {
  return with_init(std::make_unique<CublasInnerProduct>(ctx, d));
}
Result<std::unique_ptr<Op>> make_own_relu(CudaContext& ctx, const OpDesc& d) {
  return std::unique_ptr<Op>(std::make_unique<OwnRelu>(ctx, d));
}
Result<std::unique_ptr<Op>> make_own_dropout(CudaContext& ctx, const OpDesc& d) {
  return with_init(std::make_unique<OwnDropout>(ctx, d));
}

Status make_tensor_desc(TensorDesc& t, const Shape4& s, Layout l) {
  if (!fits_int(s.n) || !fits_int(s.c) || !fits_int(s.h) || !fits_int(s.w) || !fits_int(s.count()))
    return unavailable("tensor " + s.to_string() + " is beyond cuDNN's int sizes");
  EASEL_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(t.out()));
  EASEL_CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(
      t.get(), l == Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
      static_cast<int>(s.n), static_cast<int>(s.c), static_cast<int>(s.h), static_cast<int>(s.w)));
  return {};
}

}  // namespace easel
