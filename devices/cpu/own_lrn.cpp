// LRN in both of Caffe's regions, the same definition as the reference (devices/cpu/ref_ops.cpp,
// RefLrn), with m = n (across channels) or n^2 (within channel):
//   scale = k + alpha / m * box(src^2),  dst = src * scale^-beta
//   diff_src = diff_dst * scale^-beta - 2 alpha beta / m * src * box(diff_dst * dst / scale)
// where box sums the zero-padded window of half (n-1)/2 on each side (a symmetric window, so the
// backward's transposed window is the same box). Every box is made of one-axis boxes over rows
// laid out [len][inner]: a shift by d positions along the axis is a shift by d * inner
// contiguous floats, so each pass is a few contiguous, vectorisable loops whatever the axis.
//   across, nchw: rows N, axis C, inner H*W      across, nhwc: rows N*H*W, axis C, inner 1
//   within: along w (rows P*H, axis W, inner V), then along h (rows P, axis H, inner W*V),
//           with P = N*C, V = 1 (nchw) or P = N, V = C (nhwc)
// oneDNN 2.6 has a JIT kernel for the across region on AVX-512 only (on AVX2 it would run
// lrn_ref, which easel refuses), and its within-channel backward is off (dnnl_ops.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "devices/cpu/own_ops.hpp"

namespace easel {

namespace {

// out[r][p][:] <- the sum of in[r][q][:] over q in [p - half, p + half] clipped to [0, len), for
// each of `rows` rows of len x inner floats. in and out must not overlap.
void box_along(const float* in, float* out, int64_t rows, int64_t len, int64_t inner,
               int64_t half) {
  const int64_t row = len * inner;
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = in + r * row;
    float* b = out + r * row;
    std::copy(a, a + row, b);
    for (int64_t d = 1; d <= half && d < len; ++d) {
      const int64_t sh = d * inner;
#pragma omp simd
      for (int64_t i = 0; i < row - sh; ++i)
        b[i] += a[i + sh];
#pragma omp simd
      for (int64_t i = sh; i < row; ++i)
        b[i] += a[i - sh];
    }
  }
}

class OwnLrn final : public Op {
 public:
  explicit OwnLrn(const OpDesc& d)
      : Op(d),
        count_(d.src.count()),
        half_((d.local_size - 1) / 2),
        scale_(static_cast<size_t>(count_)),
        pow_(static_cast<size_t>(count_)),
        tmp_(static_cast<size_t>(count_)),
        box_(static_cast<size_t>(count_)) {}
  std::string impl() const override {
    return desc_.lrn_within_channel ? "own:lrn_within" : "own:lrn_across";
  }

  void forward(const float* src, float* dst, std::span<const float* const>, bool) override {
    const OpDesc& d = desc_;
    const float alpha_m = d.alpha / summands();
    float* sq = tmp_.data();
#pragma omp parallel for simd
    for (int64_t i = 0; i < count_; ++i)
      sq[i] = src[i] * src[i];
    const float* b = box(sq, box_.data());
    const float k = d.k, beta = d.beta;
    float* scale = scale_.data();
    float* p = pow_.data();
    const bool three_quarters = beta == 0.75f;
#pragma omp parallel for simd
    for (int64_t i = 0; i < count_; ++i) {
      const float s = k + alpha_m * b[i];
      scale[i] = s;
      // s^-0.75 = 1 / (sqrt(s) * sqrt(sqrt(s))): exact to a few ulp, far cheaper than pow.
      const float r = std::sqrt(s);
      p[i] = three_quarters ? 1.f / (r * std::sqrt(r)) : std::pow(s, -beta);
      dst[i] = src[i] * p[i];
    }
  }

  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const>, std::span<float* const>) override {
    if (!diff_src) return;
    const float ratio = 2.f * desc_.alpha * desc_.beta / summands();
    float* t = tmp_.data();
    const float* scale = scale_.data();
#pragma omp parallel for simd
    for (int64_t i = 0; i < count_; ++i)
      t[i] = diff_dst[i] * dst[i] / scale[i];
    const float* b = box(t, box_.data());
    const float* p = pow_.data();
#pragma omp parallel for simd
    for (int64_t i = 0; i < count_; ++i)
      diff_src[i] = diff_dst[i] * p[i] - ratio * src[i] * b[i];
  }

 private:
  float summands() const {
    const int64_t m = desc_.local_size;
    return static_cast<float>(desc_.lrn_within_channel ? m * m : m);
  }

  // The window sums of in, returned: in out (across), or back in in (within: the pass along w
  // goes to out, the one along h from there back to in). Both are clobbered.
  const float* box(float* in, float* out) {
    const Shape4& s = desc_.src;
    const bool nchw = desc_.layout == Layout::nchw;
    if (!desc_.lrn_within_channel) {
      if (nchw)
        box_along(in, out, s.n, s.c, s.h * s.w, half_);
      else
        box_along(in, out, s.n * s.h * s.w, s.c, 1, half_);
      return out;
    }
    const int64_t planes = nchw ? s.n * s.c : s.n, v = nchw ? 1 : s.c;
    box_along(in, out, planes * s.h, s.w, v, half_);  // along w
    box_along(out, in, planes, s.h, s.w * v, half_);  // along h
    return in;
  }

  int64_t count_, half_;
  std::vector<float> scale_, pow_, tmp_, box_;  // per element; scale and pow kept for backward
};

}  // namespace

Result<std::unique_ptr<Op>> make_own_lrn(const OpDesc& d, const DnnlOptions& /*options*/) {
  return std::unique_ptr<Op>(new OwnLrn(d));
}

}  // namespace easel
