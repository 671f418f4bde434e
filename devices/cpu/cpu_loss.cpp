// Softmax + cross-entropy on the CPU: one row of logits per image, max subtracted before exp.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "devices/cpu/ref_ops.hpp"

namespace easel {

namespace {

class CpuLoss final : public LossOp {
 public:
  CpuLoss(int64_t batch, int64_t classes) : batch_(batch), classes_(classes) {}
  std::string impl() const override { return "cpu"; }

  double forward(const float* logits, const int32_t* labels, float* prob, int64_t n,
                 int64_t* correct) override {
    EASEL_CHECK(n >= 0 && n <= batch_);
    double loss = 0.0;
    int64_t right = 0;
    for (int64_t r = 0; r < n; ++r) {
      const float* x = logits + r * classes_;
      float* p = prob + r * classes_;
      const int32_t label = labels[r];
      EASEL_CHECK_MSG(label >= 0 && label < classes_, "label outside [0, classes)");
      // The first maximum is the prediction; it is also the shift that keeps exp() finite.
      int64_t best = 0;
      for (int64_t j = 1; j < classes_; ++j)
        if (x[j] > x[best]) best = j;
      const float shift = x[best];
      float sum = 0.f;
      for (int64_t j = 0; j < classes_; ++j) {
        p[j] = std::exp(x[j] - shift);
        sum += p[j];
      }
      for (int64_t j = 0; j < classes_; ++j)
        p[j] /= sum;
      loss -= std::log(std::max(p[label], FLT_MIN));
      if (best == label) ++right;
    }
    if (correct) *correct += right;
    return loss;
  }

  void backward(const float* prob, const int32_t* labels, float* diff_logits, int64_t n,
                float scale) override {
    EASEL_CHECK(n >= 0 && n <= batch_);
    for (int64_t r = 0; r < n; ++r) {
      const float* p = prob + r * classes_;
      float* g = diff_logits + r * classes_;
      for (int64_t j = 0; j < classes_; ++j)
        g[j] = p[j] * scale;
      g[labels[r]] -= scale;
    }
    std::fill(diff_logits + n * classes_, diff_logits + batch_ * classes_, 0.f);
  }

 private:
  int64_t batch_, classes_;
};

}  // namespace

std::unique_ptr<LossOp> make_cpu_loss(int64_t batch, int64_t classes) {
  EASEL_CHECK(batch > 0 && classes > 0);
  return std::make_unique<CpuLoss>(batch, classes);
}

}  // namespace easel
