// Reference batch normalization (PyTorch's definition, see OpDesc in devices/op.hpp), written to
// be read: one channel at a time, every element reached through offset4() so that the same loops
// serve both layouts, sums in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "devices/cpu/ref_ops.hpp"

namespace easel {

namespace {

// Per channel c, over the m = N*H*W values x of the channel:
//   training:  mean = sum x / m, var = sum (x - mean)^2 / m (biased), and the running statistics
//              move toward mean and var * m / (m - 1) (unbiased) by bn_momentum;
//   otherwise: mean and var are the running statistics.
//   xhat = (x - mean) / sqrt(var + eps),  dst = scale * xhat + shift  (then max(., 0) if fused)
// Backward, g = diff_dst (masked by dst > 0 when fused):
//   diff_shift = sum g,  diff_scale = sum g * xhat,
//   diff_src   = scale / sqrt(var + eps) * (g - (diff_shift + xhat * diff_scale) / m)  (training;
//                the batch statistics depend on x), or scale / sqrt(var + eps) * g (otherwise).
// weights: scale, shift, running_mean, running_var; a training forward writes the last two in
// place (the caller's arena, writable; see state_params() in devices/op.hpp), backward writes
// their diff_weights as 0.
class RefBatchNorm final : public Op {
 public:
  explicit RefBatchNorm(const OpDesc& d)
      : Op(d), mean_(static_cast<size_t>(d.src.c)), inv_std_(static_cast<size_t>(d.src.c)) {}
  std::string impl() const override { return "ref"; }

  void forward(const float* src, float* dst, std::span<const float* const> weights,
               bool training) override {
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    const float* scale = weights[0];
    const float* shift = weights[1];
    float* running_mean = const_cast<float*>(weights[2]);  // state, updated in training
    float* running_var = const_cast<float*>(weights[3]);
    const double m = static_cast<double>(s.n * s.h * s.w);
    last_training_ = training;
#pragma omp parallel for
    for (int64_t c = 0; c < s.c; ++c) {
      double mean = running_mean[c], var = running_var[c];
      if (training) {
        double sum = 0, sq = 0;
        for_channel(c, [&](int64_t i) { sum += src[i]; });
        mean = sum / m;
        for_channel(c, [&](int64_t i) { sq += (src[i] - mean) * (src[i] - mean); });
        var = sq / m;
        const double mom = d.bn_momentum;
        running_mean[c] = static_cast<float>((1 - mom) * running_mean[c] + mom * mean);
        running_var[c] =
            static_cast<float>((1 - mom) * running_var[c] + mom * var * m / std::max(m - 1, 1.0));
      }
      const float inv_std = static_cast<float>(1 / std::sqrt(var + d.eps));
      mean_[static_cast<size_t>(c)] = static_cast<float>(mean);
      inv_std_[static_cast<size_t>(c)] = inv_std;
      const float a = scale[c] * inv_std, b = shift[c] - a * static_cast<float>(mean);
      for_channel(c, [&](int64_t i) {
        const float y = a * src[i] + b;
        dst[i] = d.fused_relu ? std::max(y, 0.f) : y;
      });
    }
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> weights,
                std::span<float* const> diff_weights) override {
    const OpDesc& d = desc_;
    const Shape4& s = d.src;
    const float* scale = weights[0];
    const double m = static_cast<double>(s.n * s.h * s.w);
#pragma omp parallel for
    for (int64_t c = 0; c < s.c; ++c) {
      const double mean = mean_[static_cast<size_t>(c)], inv_std = inv_std_[static_cast<size_t>(c)];
      auto g = [&](int64_t i) { return d.fused_relu && !(dst[i] > 0.f) ? 0.f : diff_dst[i]; };
      double dshift = 0, dscale = 0;
      for_channel(c, [&](int64_t i) {
        dshift += g(i);
        dscale += g(i) * (src[i] - mean) * inv_std;
      });
      diff_weights[0][c] = static_cast<float>(dscale);
      diff_weights[1][c] = static_cast<float>(dshift);
      diff_weights[2][c] = 0.f;  // the running statistics are state, not trained
      diff_weights[3][c] = 0.f;
      if (diff_src == nullptr) continue;
      const double k = scale[c] * inv_std;
      for_channel(c, [&](int64_t i) {
        const double xhat = (src[i] - mean) * inv_std;
        diff_src[i] = static_cast<float>(last_training_ ? k * (g(i) - (dshift + xhat * dscale) / m)
                                                        : k * g(i));
      });
    }
  }

 private:
  // f(offset) for every element of channel c.
  template <typename F>
  void for_channel(int64_t c, F f) const {
    const Shape4& s = desc_.src;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t h = 0; h < s.h; ++h)
        for (int64_t w = 0; w < s.w; ++w)
          f(offset4(s, desc_.layout, n, c, h, w));
  }

  // From the last forward: the statistics it normalised with, for backward.
  std::vector<float> mean_, inv_std_;
  bool last_training_ = false;
};

}  // namespace

Result<std::unique_ptr<Op>> make_ref_batch_norm(const OpDesc& d) {
  return std::unique_ptr<Op>(new RefBatchNorm(d));
}

}  // namespace easel
