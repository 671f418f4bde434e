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
      : Op(d),
        ctx_(ctx),
        n_(d.src.n),
        k_(d.src.per_image()),
        oc_(d.oc),
        bf16_(ctx.precision == Precision::bf16 && d.act == DType::bf16) {}

  Status init() {
    if (!fits_int(n_) || !fits_int(k_) || !fits_int(oc_))
      return unavailable("matrix sizes beyond cuBLAS's int arguments");
    if (desc_.fused_relu) {
      EASEL_ASSIGN_OR_RETURN(
          masked_, bf16_ ? device_array<uint16_t>(n_ * oc_) : device_array<float>(n_ * oc_));
    }
    if (bf16_) {
      EASEL_ASSIGN_OR_RETURN(w_bf_, device_array<uint16_t>(oc_ * k_));
      EASEL_ASSIGN_OR_RETURN(y32_, device_array<float>(n_ * oc_));
    }
    return {};
  }
  std::string impl() const override {
    switch (ctx_.precision) {
      case Precision::tf32:
        return "cublas:gemm-ex(tf32 tensor ops, f32 accumulation)";
      case Precision::bf16:
        return "cublas:gemm-ex(bf16 operands, f32 accumulation)";
      case Precision::fp32:
        break;
    }
    return "cublas:sgemm";
  }

  // bf16: src is the net's bf16 tensor, W rounded into w_bf_ (kept for backward-data); the
  // product lands in f32 (y32_) and the bias and ReLU round it once into the bf16 dst.
  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool /*training*/) override {
    const float* bias = desc_.bias ? weights[1] : nullptr;
    if (bf16_) {
      cuda_kernels::to_bf16(ctx_.stream, weights[0], w_bf_.as<uint16_t>(), oc_ * k_);
      gemm(CUBLAS_OP_T, CUBLAS_OP_N, oc(), n(), k(), w_bf_.data(), k(), src, k(), y32_.as<float>(),
           CUDA_R_32F, oc());
      cuda_kernels::bias_relu_rows_to_bf16(ctx_.stream, y32_.as<float>(), bias, n_, oc_,
                                           desc_.fused_relu, reinterpret_cast<uint16_t*>(dst));
      return;
    }
    // dst^T[oc, N] = (W^T[K, oc])^T * src^T[K, N]
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, oc(), n(), k(), weights[0], k(), src, k(), dst, CUDA_R_32F,
         oc());
    cuda_kernels::add_bias_relu_rows(ctx_.stream, dst, bias, n_, oc_, desc_.fused_relu);
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    const float* g = diff_dst;  // [N, oc], the activations' type
    if (desc_.fused_relu) {
      if (bf16_)
        cuda_kernels::relu_backward(ctx_.stream, reinterpret_cast<const uint16_t*>(dst),
                                    reinterpret_cast<const uint16_t*>(diff_dst),
                                    masked_.as<uint16_t>(), n_ * oc_);
      else
        cuda_kernels::relu_backward(ctx_.stream, dst, diff_dst, masked_.as<float>(), n_ * oc_);
      g = masked_.as<float>();
    }
    // diff_W[oc, K] = g^T * src, i.e. diff_W^T[K, oc] = src^T[K, N] * (g^T[oc, N])^T (f32 out)
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, k(), oc(), n(), src, k(), g, oc(), diff_weights[0], CUDA_R_32F,
         k());
    if (desc_.bias) {
      if (bf16_)
        cuda_kernels::column_sums(ctx_.stream, reinterpret_cast<const uint16_t*>(g), n_, oc_,
                                  diff_weights[1]);
      else
        cuda_kernels::column_sums(ctx_.stream, g, n_, oc_, diff_weights[1]);
    }
    if (diff_src == nullptr) return;
    // diff_src[N, K] = g * W, i.e. diff_src^T[K, N] = W^T[K, oc] * g^T[oc, N] (bf16: into the
    // bf16 diff_src, W as forward rounded it)
    const void* w = bf16_ ? w_bf_.data() : static_cast<const void*>(weights[0]);
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, k(), n(), oc(), w, k(), g, oc(), diff_src,
         bf16_ ? CUDA_R_16BF : CUDA_R_32F, k());
  }

 private:
  int n() const { return static_cast<int>(n_); }
  int k() const { return static_cast<int>(k_); }
  int oc() const { return static_cast<int>(oc_); }

  // c (column-major, of type ctype) = op(a) * op(b) in the device's precision: fp32 sgemm (FMA,
  // the bits the tests pin); tf32 cublasGemmEx on the f32 operands with
  // CUBLAS_COMPUTE_32F_FAST_TF32; bf16 cublasGemmEx on bf16 operands with CUBLAS_COMPUTE_32F
  // (f32 accumulation; c f32 or bf16).
  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a, int lda,
            const void* b, int ldb, void* c, cudaDataType_t ctype, int ldc) {
    const cublas_dyn::Api& blas = cublas_dyn::api();
    switch (ctx_.precision) {
      case Precision::fp32:
        EASEL_CUBLAS_CHECK(
            blas.sgemm(ctx_.cublas, ta, tb, m, n, k, &kOne, static_cast<const float*>(a), lda,
                       static_cast<const float*>(b), ldb, &kZero, static_cast<float*>(c), ldc));
        return;
      case Precision::tf32:
        EASEL_CUBLAS_CHECK(blas.gemm_ex(ctx_.cublas, ta, tb, m, n, k, &kOne, a, CUDA_R_32F, lda, b,
                                        CUDA_R_32F, ldb, &kZero, c, CUDA_R_32F, ldc,
                                        CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
        return;
      case Precision::bf16:
        EASEL_CUBLAS_CHECK(blas.gemm_ex(ctx_.cublas, ta, tb, m, n, k, &kOne, a, CUDA_R_16BF, lda, b,
                                        CUDA_R_16BF, ldb, &kZero, c, ctype, ldc, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT));
        return;
    }
  }

  CudaContext& ctx_;
  int64_t n_, k_, oc_;
  const bool bf16_;  // bf16 activations, bf16 operands
  Buffer masked_;    // fused ReLU: diff_dst where dst > 0, else 0 [N, oc] (the activations' type)
  Buffer w_bf_;      // bf16: W [oc, K] rounded
  Buffer y32_;       // bf16: the product [N, oc] in f32, before the bias and the rounding
};

// ---------------------------------------------------------------------------------------------
// ReLU (negative slope 0), on f32 or bf16 activations; backward tests dst > 0, so that it also
// works in place.
class OwnRelu final : public Op {
 public:
  OwnRelu(CudaContext& ctx, const OpDesc& d) : Op(d), ctx_(ctx) {}
  std::string impl() const override { return "own:relu"; }

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool /*training*/) override {
    if (desc_.act == DType::bf16)
      cuda_kernels::relu_forward(ctx_.stream, reinterpret_cast<const uint16_t*>(src),
                                 reinterpret_cast<uint16_t*>(dst), desc_.src.count());
    else
      cuda_kernels::relu_forward(ctx_.stream, src, dst, desc_.src.count());
  }
  void backward(const float* /*src*/, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (diff_src == nullptr) return;
    if (desc_.act == DType::bf16)
      cuda_kernels::relu_backward(ctx_.stream, reinterpret_cast<const uint16_t*>(dst),
                                  reinterpret_cast<const uint16_t*>(diff_dst),
                                  reinterpret_cast<uint16_t*>(diff_src), desc_.src.count());
    else
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

Status make_tensor_desc(TensorDesc& t, const Shape4& s, Layout l, cudnnDataType_t type) {
  if (!fits_int(s.n) || !fits_int(s.c) || !fits_int(s.h) || !fits_int(s.w) || !fits_int(s.count()))
    return unavailable("tensor " + s.to_string() + " is beyond cuDNN's int sizes");
  EASEL_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(t.out()));
  EASEL_CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(
      t.get(), l == Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, type,
      static_cast<int>(s.n), static_cast<int>(s.c), static_cast<int>(s.h), static_cast<int>(s.w)));
  return {};
}

}  // namespace easel
