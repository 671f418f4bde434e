#include "devices/ref_precision.hpp"

#include <string>
#include <vector>

namespace easel {

namespace {

class RoundedInputsOp final : public Op {
 public:
  RoundedInputsOp(std::unique_ptr<Op> op, Precision p)
      : Op(op->desc()), op_(std::move(op)), p_(p) {}

  std::string impl() const override {
    return op_->impl() + "+" + precision_name(p_) + "-rounded-inputs";
  }

  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool training) override {
    round_into(src_, src, desc_.src.count());
    std::vector<const float*> w(weights.begin(), weights.end());
    w[0] = round_into(w_, weights[0], weight_count());
    op_->forward(src_.data(), dst, w, training);
  }

  // src and weights rounded again (the caller's, as forward's contract allows a backward
  // without its forward's buffers), diff_dst rounded.
  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    round_into(src_, src, desc_.src.count());
    std::vector<const float*> w(weights.begin(), weights.end());
    w[0] = round_into(w_, weights[0], weight_count());
    round_into(dd_, diff_dst, dst_shape(desc_).count());
    op_->backward(src_.data(), dst, dd_.data(), diff_src, w, diff_weights);
  }

 private:
  int64_t weight_count() const {
    const std::vector<std::vector<int64_t>> shapes = param_shapes(desc_);
    int64_t n = 1;
    for (int64_t d : shapes[0])
      n *= d;
    return n;
  }

  const float* round_into(std::vector<float>& to, const float* from, int64_t n) {
    to.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      to[static_cast<size_t>(i)] = round_to_precision(from[i], p_);
    return to.data();
  }

  std::unique_ptr<Op> op_;
  Precision p_;
  std::vector<float> src_, w_, dd_;  // the rounded inputs
};

}  // namespace

double unit_roundoff(Precision p) {
  switch (p) {
    case Precision::bf16:
      return 1.0 / 256;
    case Precision::tf32:
      return 1.0 / 2048;
    case Precision::fp32:
      break;
  }
  return 1.0 / (1 << 24);
}

std::unique_ptr<Op> with_rounded_inputs(std::unique_ptr<Op> op, Precision p) {
  const OpKind k = op->desc().kind;
  if (p == Precision::fp32 || (k != OpKind::conv && k != OpKind::inner_product)) return op;
  return std::make_unique<RoundedInputsOp>(std::move(op), p);
}

}  // namespace easel
