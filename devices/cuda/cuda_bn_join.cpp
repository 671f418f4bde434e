// Batch normalization, the joins (add, concat) and global average pooling on the CUDA device, with
// the reference's semantics (devices/cpu/ref_batch_norm.cpp, ref_join.cpp, ref_ops.cpp), one
// section each.
//
// Batch norm: cuDNN's spatial batch normalization (training, inference and backward kernels) where
// it computes PyTorch's definition: its exponentialAverageFactor is the momentum and it keeps the
// running variance unbiased (m/(m-1)), as PyTorch does. A channel of one value per batch (m = 1)
// is the own kernels' (the reference counts m - 1 as 1 there). A fused ReLU is an own step after
// cuDNN's forward and a mask of diff_dst before its backward. cuDNN's backward is the training one
// and always writes dx: after an inference forward, and without diff_src (a net's first layer),
// the own backward kernel runs on the statistics the forward used. The own kernels
// (op_kernels.cu) are the whole op where cuDNN is refused.
//
// add, concat and global_avg_pool: own kernels in both layouts (a sum over the inputs in one pass,
// channel-range copies, one thread per plane).
#include <string>

#include "devices/cuda/cuda_ops.hpp"
#include "devices/cuda/op_kernels.hpp"

namespace easel {

namespace {

const float kOne = 1.f, kZero = 0.f;

cuda_kernels::ChannelShape channel_shape(const OpDesc& d) {
  cuda_kernels::ChannelShape s;
  s.n = d.src.n;
  s.c = d.src.c;
  s.h = d.src.h;
  s.w = d.src.w;
  s.nhwc = d.layout == Layout::nhwc;
  return s;
}

// The batch norm ops' shared part: the per-channel statistics of the last forward (for
// backward), and the zeros of the state parameters' gradients.
class BatchNormBase : public Op {
 protected:
  BatchNormBase(CudaContext& ctx, const OpDesc& d) : Op(d), ctx_(ctx), s_(channel_shape(d)) {}

  Status init_base() {
    EASEL_ASSIGN_OR_RETURN(mean_, device_array<float>(desc_.src.c));
    EASEL_ASSIGN_OR_RETURN(inv_std_, device_array<float>(desc_.src.c));
    return {};
  }
  // The running statistics are state: their gradients are 0.
  void zero_state_diffs(std::span<float* const> diff_weights) {
    const size_t bytes = static_cast<size_t>(desc_.src.c) * sizeof(float);
    for (size_t i = 2; i < 4; ++i)
      EASEL_CUDA_CHECK(cudaMemsetAsync(diff_weights[i], 0, bytes, ctx_.stream));
  }
  // The own backward on mean_ / inv_std_ (and the ReLU mask through dst).
  void own_backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                    std::span<const float* const> weights, std::span<float* const> diff_weights) {
    cuda_kernels::batch_norm_backward(ctx_.stream, s_, src, dst, diff_dst, weights[0],
                                      mean_.as<float>(), inv_std_.as<float>(), last_training_,
                                      desc_.fused_relu, diff_weights[0], diff_weights[1], diff_src);
  }
  static float* state(std::span<const float* const> weights, size_t i) {
    return const_cast<float*>(weights[i]);  // running_mean, running_var: writable (op.hpp)
  }

  CudaContext& ctx_;
  cuda_kernels::ChannelShape s_;
  Buffer mean_, inv_std_;  // [c] the statistics the last forward normalised with
  bool last_training_ = false;
};

// ---------------------------------------------------------------------------------------------
class CudnnBatchNorm final : public BatchNormBase {
 public:
  CudnnBatchNorm(CudaContext& ctx, const OpDesc& d) : BatchNormBase(ctx, d) {}

  Status init() {
    const OpDesc& d = desc_;
    if (d.src.n * d.src.h * d.src.w < 2)
      return unavailable(
          "batch_norm: one value per channel (N*H*W = 1): cuDNN's unbiased running variance "
          "divides by m - 1 = 0; the reference counts it as 1");
    if (static_cast<double>(d.eps) < CUDNN_BN_MIN_EPSILON)
      return unavailable("batch_norm: eps " + std::to_string(d.eps) + " below cuDNN's minimum " +
                         std::to_string(CUDNN_BN_MIN_EPSILON));
    EASEL_RETURN_IF_ERROR(make_tensor_desc(x_, d.src, d.layout));
    EASEL_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(bn_.out()));
    EASEL_CUDNN_RETURN_IF_ERROR(
        cudnnDeriveBNTensorDescriptor(bn_.get(), x_.get(), CUDNN_BATCHNORM_SPATIAL));
    EASEL_RETURN_IF_ERROR(init_base());
    if (d.fused_relu) {
      EASEL_ASSIGN_OR_RETURN(masked_, device_array<float>(d.src.count()));
    }
    return {};
  }
  std::string impl() const override { return "cudnn:batch_norm"; }

  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool training) override {
    const OpDesc& d = desc_;
    last_training_ = training;
    if (training) {
      // running = (1 - factor) * running + factor * batch statistic (variance unbiased); the
      // batch mean and 1/sqrt(var + eps) (var biased) kept for backward.
      EASEL_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
          ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_.get(), src, x_.get(), dst,
          bn_.get(), weights[0], weights[1], static_cast<double>(d.bn_momentum), state(weights, 2),
          state(weights, 3), static_cast<double>(d.eps), mean_.as<float>(), inv_std_.as<float>()));
    } else {
      EASEL_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
          ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_.get(), src, x_.get(), dst,
          bn_.get(), weights[0], weights[1], weights[2], weights[3], static_cast<double>(d.eps)));
      // The running statistics as mean_ / inv_std_, for a backward after this forward.
      cuda_kernels::batch_norm_stats(ctx_.stream, s_, src, d.eps, d.bn_momentum, false,
                                     state(weights, 2), state(weights, 3), mean_.as<float>(),
                                     inv_std_.as<float>());
    }
    if (d.fused_relu) cuda_kernels::relu_forward(ctx_.stream, dst, dst, d.src.count());
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    const OpDesc& d = desc_;
    if (last_training_ && diff_src != nullptr) {
      const float* g = diff_dst;
      if (d.fused_relu) {
        cuda_kernels::relu_backward(ctx_.stream, dst, diff_dst, masked_.as<float>(), d.src.count());
        g = masked_.as<float>();
      }
      EASEL_CUDNN_CHECK(cudnnBatchNormalizationBackward(
          ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero, x_.get(), src,
          x_.get(), g, x_.get(), diff_src, bn_.get(), weights[0], diff_weights[0], diff_weights[1],
          static_cast<double>(d.eps), mean_.as<float>(), inv_std_.as<float>()));
    } else {
      own_backward(src, dst, diff_dst, diff_src, weights, diff_weights);
    }
    zero_state_diffs(diff_weights);
  }

 private:
  TensorDesc x_;   // src, dst and their gradients
  TensorDesc bn_;  // 1 x c x 1 x 1: scale, shift, the statistics
  Buffer masked_;  // fused ReLU: diff_dst where dst > 0, else 0
};

// ---------------------------------------------------------------------------------------------
class OwnBatchNorm final : public BatchNormBase {
 public:
  OwnBatchNorm(CudaContext& ctx, const OpDesc& d) : BatchNormBase(ctx, d) {}
  Status init() { return init_base(); }
  std::string impl() const override { return "own:batch_norm"; }

  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool training) override {
    const OpDesc& d = desc_;
    last_training_ = training;
    cuda_kernels::batch_norm_stats(ctx_.stream, s_, src, d.eps, d.bn_momentum, training,
                                   state(weights, 2), state(weights, 3), mean_.as<float>(),
                                   inv_std_.as<float>());
    cuda_kernels::batch_norm_apply(ctx_.stream, s_, src, dst, weights[0], weights[1],
                                   mean_.as<float>(), inv_std_.as<float>(), d.fused_relu);
  }
  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    own_backward(src, dst, diff_dst, diff_src, weights, diff_weights);
    zero_state_diffs(diff_weights);
  }
};

// ---------------------------------------------------------------------------------------------
// The kinds of several inputs run through forward_n / backward_n only.
class OwnJoin : public MultiInputOp<Op> {
 protected:
  OwnJoin(CudaContext& ctx, const OpDesc& d) : MultiInputOp(d), ctx_(ctx) {}

  CudaContext& ctx_;
};

// dst = sum of the inputs (one pass, input order); every diff_src = diff_dst (a copy, skipped
// where diff_src is diff_dst itself).
class OwnAdd final : public OwnJoin {
 public:
  OwnAdd(CudaContext& ctx, const OpDesc& d) : OwnJoin(ctx, d) {}
  Status init() {
    if (inputs() > static_cast<size_t>(cuda_kernels::kMaxJoinInputs))
      return unavailable("add: " + std::to_string(inputs()) + " inputs, the kernel takes " +
                         std::to_string(cuda_kernels::kMaxJoinInputs));
    return {};
  }
  std::string impl() const override { return "own:add"; }

  void forward_n(std::span<const float* const> srcs, float* dst, std::span<const float* const>,
                 bool) override {
    EASEL_CHECK(srcs.size() == inputs());
    cuda_kernels::add_n(ctx_.stream, srcs.data(), static_cast<int>(srcs.size()), dst,
                        desc_.src.count());
  }
  void backward_n(std::span<const float* const>, const float*, const float* diff_dst,
                  std::span<float* const> diff_srcs, std::span<const float* const>,
                  std::span<float* const>) override {
    const size_t bytes = static_cast<size_t>(desc_.src.count()) * sizeof(float);
    for (float* ds : diff_srcs)
      if (ds != nullptr && ds != diff_dst && bytes > 0)
        EASEL_CUDA_CHECK(
            cudaMemcpyAsync(ds, diff_dst, bytes, cudaMemcpyDeviceToDevice, ctx_.stream));
  }
};

// dst's channels are the inputs' in order; backward copies each input's range of diff_dst back.
class OwnConcat final : public OwnJoin {
 public:
  OwnConcat(CudaContext& ctx, const OpDesc& d) : OwnJoin(ctx, d), whole_c_(dst_shape(d).c) {}
  std::string impl() const override { return "own:concat"; }

  void forward_n(std::span<const float* const> srcs, float* dst, std::span<const float* const>,
                 bool) override {
    EASEL_CHECK(srcs.size() == inputs());
    int64_t c0 = 0;
    for (size_t i = 0; i < inputs(); ++i) {
      const Shape4& s = src_shape(i);
      cuda_kernels::copy_channels(ctx_.stream, srcs[i], dst, s.n, s.c, whole_c_, c0, s.h * s.w,
                                  nhwc(), /*to_whole=*/true);
      c0 += s.c;
    }
  }
  void backward_n(std::span<const float* const>, const float*, const float* diff_dst,
                  std::span<float* const> diff_srcs, std::span<const float* const>,
                  std::span<float* const>) override {
    EASEL_CHECK(diff_srcs.size() == inputs());
    int64_t c0 = 0;
    for (size_t i = 0; i < inputs(); ++i) {
      const Shape4& s = src_shape(i);
      if (diff_srcs[i] != nullptr)
        cuda_kernels::copy_channels(ctx_.stream, diff_dst, diff_srcs[i], s.n, s.c, whole_c_, c0,
                                    s.h * s.w, nhwc(), /*to_whole=*/false);
      c0 += s.c;
    }
  }

 private:
  bool nhwc() const { return desc_.layout == Layout::nhwc; }
  int64_t whole_c_;  // dst's channels
};

// ---------------------------------------------------------------------------------------------
// The mean over H x W per (n, c), summed in the reference's order; backward spreads diff_dst / HW.
class OwnGlobalAvgPool final : public Op {
 public:
  OwnGlobalAvgPool(CudaContext& ctx, const OpDesc& d) : Op(d), ctx_(ctx), s_(channel_shape(d)) {}
  std::string impl() const override { return "own:global_avg_pool"; }

  void forward(const float* src, float* dst, std::span<const float* const> /*weights*/,
               bool /*training*/) override {
    cuda_kernels::global_avg_pool_forward(ctx_.stream, s_, src, dst);
  }
  void backward(const float* /*src*/, const float* /*dst*/, const float* diff_dst, float* diff_src,
                std::span<const float* const> /*weights*/,
                std::span<float* const> /*diff_weights*/) override {
    if (diff_src) cuda_kernels::global_avg_pool_backward(ctx_.stream, s_, diff_dst, diff_src);
  }

 private:
  CudaContext& ctx_;
  cuda_kernels::ChannelShape s_;
};

template <typename T>
Result<std::unique_ptr<Op>> with_init(std::unique_ptr<T> op) {
  EASEL_RETURN_IF_ERROR(op->init());
  return std::unique_ptr<Op>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<Op>> make_cudnn_batch_norm(CudaContext& ctx, const OpDesc& d) {
  return with_init(std::make_unique<CudnnBatchNorm>(ctx, d));
}
Result<std::unique_ptr<Op>> make_own_batch_norm(CudaContext& ctx, const OpDesc& d) {
  return with_init(std::make_unique<OwnBatchNorm>(ctx, d));
}
Result<std::unique_ptr<Op>> make_own_add(CudaContext& ctx, const OpDesc& d) {
  return with_init(std::make_unique<OwnAdd>(ctx, d));
}
Result<std::unique_ptr<Op>> make_own_concat(CudaContext& ctx, const OpDesc& d) {
  return std::unique_ptr<Op>(std::make_unique<OwnConcat>(ctx, d));
}
Result<std::unique_ptr<Op>> make_own_global_avg_pool(CudaContext& ctx, const OpDesc& d) {
  return std::unique_ptr<Op>(std::make_unique<OwnGlobalAvgPool>(ctx, d));
}

}  // namespace easel
