#include "devices/ref_precision.hpp"

#include <string>
#include <vector>

#include "devices/activations.hpp"
#include "devices/wrapping_op.hpp"

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

// f32 scratch for one activation tensor of a Bf16ActsOp.
struct Widened {
  std::vector<float> v;
  float* from(const float* bf16, int64_t n) {
    v.resize(static_cast<size_t>(n));
    activations_to_f32(bf16, DType::bf16, v.data(), n);
    return v.data();
  }
  float* sized(int64_t n) {
    v.assign(static_cast<size_t>(n), 0.f);
    return v.data();
  }
};

class Bf16ActsOp final : public WrappingOp {
 public:
  explicit Bf16ActsOp(std::unique_ptr<Op> op) : WrappingOp(std::move(op), DType::bf16) {
    const size_t inputs = 1 + desc_.more_src.size();
    srcs_.resize(inputs);
    diff_srcs_.resize(inputs);
  }
  std::string impl() const override { return op_->impl() + "+bf16-activations"; }

  void forward_n(std::span<const float* const> srcs, float* dst,
                 std::span<const float* const> weights, bool training) override {
    std::vector<const float*> s = widen_srcs(srcs);
    float* y = dst_.sized(dst_count());
    op_->forward_n(s, y, weights, training);
    activations_from_f32(y, DType::bf16, dst, dst_count());
  }

  void backward_n(std::span<const float* const> srcs, const float* dst, const float* diff_dst,
                  std::span<float* const> diff_srcs, std::span<const float* const> weights,
                  std::span<float* const> diff_weights) override {
    std::vector<const float*> s = widen_srcs(srcs);
    const float* y = dst_.from(dst, dst_count());
    const float* dy = diff_dst_.from(diff_dst, dst_count());
    std::vector<float*> ds(diff_srcs.size(), nullptr);
    for (size_t i = 0; i < ds.size(); ++i)
      if (diff_srcs[i] != nullptr) ds[i] = diff_srcs_[i].sized(src_shape(i).count());
    op_->backward_n(s, y, dy, ds, weights, diff_weights);
    for (size_t i = 0; i < ds.size(); ++i)
      if (ds[i] != nullptr)
        activations_from_f32(ds[i], DType::bf16, diff_srcs[i], src_shape(i).count());
    if (desc_.kind == OpKind::conv && !diff_weights.empty()) {
      const std::vector<int64_t> dims = param_shapes(desc_)[0];
      int64_t n = 1;
      for (int64_t d : dims)
        n *= d;
      for (int64_t i = 0; i < n; ++i)
        diff_weights[0][i] = round_to_precision(diff_weights[0][i], Precision::bf16);
    }
  }

 private:
  std::vector<const float*> widen_srcs(std::span<const float* const> srcs) {
    std::vector<const float*> out(srcs.size());
    for (size_t i = 0; i < srcs.size(); ++i)
      out[i] = srcs_[i].from(srcs[i], src_shape(i).count());
    return out;
  }

  std::vector<Widened> srcs_, diff_srcs_;
  Widened dst_, diff_dst_;
};

class Bf16ActsLoss final : public LossOp {
 public:
  Bf16ActsLoss(std::unique_ptr<LossOp> l, int64_t batch, int64_t classes)
      : l_(std::move(l)), count_(batch * classes) {}
  std::string impl() const override { return l_->impl() + "+bf16-logits"; }
  double forward(const float* logits, const int32_t* labels, float* prob, int64_t n,
                 int64_t* correct) override {
    return l_->forward(logits_.from(logits, count_), labels, prob, n, correct);
  }
  void backward(const float* prob, const int32_t* labels, float* diff_logits, int64_t n,
                float scale) override {
    float* d = diff_.sized(count_);
    l_->backward(prob, labels, d, n, scale);
    activations_from_f32(d, DType::bf16, diff_logits, count_);
  }

 private:
  std::unique_ptr<LossOp> l_;
  int64_t count_;
  Widened logits_, diff_;
};

}  // namespace

std::unique_ptr<Op> with_bf16_activations(std::unique_ptr<Op> op) {
  return std::make_unique<Bf16ActsOp>(std::move(op));
}

std::unique_ptr<LossOp> with_bf16_activations(std::unique_ptr<LossOp> loss, int64_t batch,
                                              int64_t classes) {
  return std::make_unique<Bf16ActsLoss>(std::move(loss), batch, classes);
}

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
