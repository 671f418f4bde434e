// Softmax + cross-entropy on the CUDA device (devices/op.hpp's LossOp), own kernels: one block
// per row computes the softmax (max subtracted, as the CPU's), the row's -log prob[label] and
// whether its first maximum is the label; one more block reduces the rows in a fixed order.
// forward() returns host values, so it copies the three totals into pinned memory and waits
// for the stream: the one synchronization of a training step. With bf16 activations (--precision
// bf16) the logits are widened into f32 first and the gradient rounded into bf16 after.
#include <string>

#include "devices/cuda/cuda_ops.hpp"
#include "devices/cuda/op_kernels.hpp"

namespace easel {

namespace {

class CudaLoss final : public LossOp {
 public:
  CudaLoss(CudaContext& ctx, int64_t batch, int64_t classes)
      : ctx_(ctx), batch_(batch), classes_(classes), bf16_(ctx.precision == Precision::bf16) {}

  Status init() {
    if (!fits_int(batch_) || !fits_int(classes_))
      return unavailable("cuda loss: batch " + std::to_string(batch_) + " or classes " +
                         std::to_string(classes_) + " beyond int");
    EASEL_ASSIGN_OR_RETURN(row_loss_, device_array<float>(batch_));
    EASEL_ASSIGN_OR_RETURN(row_state_, device_array<int32_t>(batch_));
    EASEL_ASSIGN_OR_RETURN(totals_, device_array<cuda_kernels::LossTotals>(1));
    EASEL_ASSIGN_OR_RETURN(
        host_totals_, Buffer::allocate(sizeof(cuda_kernels::LossTotals), MemKind::pinned_host));
    if (bf16_) {
      EASEL_ASSIGN_OR_RETURN(logits32_, device_array<float>(batch_ * classes_));
      EASEL_ASSIGN_OR_RETURN(diff32_, device_array<float>(batch_ * classes_));
    }
    return {};
  }
  std::string impl() const override {
    return bf16_ ? "own:softmax_xent(bf16 logits)" : "own:softmax_xent";
  }

  double forward(const float* logits, const int32_t* labels, float* prob, int64_t n,
                 int64_t* correct) override {
    EASEL_CHECK(n >= 0 && n <= batch_);
    if (n == 0) return 0.0;
    auto* totals = totals_.as<cuda_kernels::LossTotals>();
    if (bf16_) {  // the bf16 logits widened (exactly) for the f32 softmax
      cuda_kernels::from_bf16(ctx_.stream, reinterpret_cast<const uint16_t*>(logits),
                              logits32_.as<float>(), n * classes_);
      logits = logits32_.as<float>();
    }
    cuda_kernels::softmax_xent_forward(ctx_.stream, logits, labels, prob, n, classes_,
                                       row_loss_.as<float>(), row_state_.as<int32_t>(), totals);
    auto* host = host_totals_.as<cuda_kernels::LossTotals>();
    EASEL_CUDA_CHECK(
        cudaMemcpyAsync(host, totals, sizeof(*host), cudaMemcpyDeviceToHost, ctx_.stream));
    EASEL_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    EASEL_CHECK_MSG(host->bad_labels == 0, "label outside [0, classes)");
    if (correct) *correct += host->hits;
    return host->loss;
  }

  void backward(const float* prob, const int32_t* labels, float* diff_logits, int64_t n,
                float scale) override {
    EASEL_CHECK(n >= 0 && n <= batch_);
    if (!bf16_) {
      cuda_kernels::softmax_xent_backward(ctx_.stream, prob, labels, diff_logits, n, batch_,
                                          classes_, scale);
      return;
    }
    cuda_kernels::softmax_xent_backward(ctx_.stream, prob, labels, diff32_.as<float>(), n, batch_,
                                        classes_, scale);
    cuda_kernels::to_bf16(ctx_.stream, diff32_.as<float>(),
                          reinterpret_cast<uint16_t*>(diff_logits), batch_ * classes_);
  }

 private:
  CudaContext& ctx_;
  int64_t batch_, classes_;
  Buffer row_loss_;           // [batch] -log prob[label] per row
  Buffer row_state_;          // [batch] 0 miss, 1 hit, 2 bad label
  Buffer totals_;             // LossTotals, device
  Buffer host_totals_;        // LossTotals, pinned host: forward's copy target
  const bool bf16_;           // bf16 logits and diff_logits (the device's activations)
  Buffer logits32_, diff32_;  // bf16: [batch, classes] f32 logits and gradient
};

}  // namespace

Result<std::unique_ptr<LossOp>> make_cuda_loss(CudaContext& ctx, int64_t batch, int64_t classes) {
  if (batch <= 0 || classes <= 0)
    return invalid_argument("loss: batch " + std::to_string(batch) + " and classes " +
                            std::to_string(classes) + " must be positive");
  auto loss = std::make_unique<CudaLoss>(ctx, batch, classes);
  EASEL_RETURN_IF_ERROR(loss->init());
  return std::unique_ptr<LossOp>(std::move(loss));
}

}  // namespace easel
