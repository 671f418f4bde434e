// LRN within channel, the same definition as the reference (devices/cpu/ref_ops.cpp, RefLrn):
//   scale = k + alpha / n^2 * box(src^2),  dst = src * scale^-beta
//   diff_src = diff_dst * scale^-beta - 2 alpha beta / n^2 * src * box(diff_dst * dst / scale)
// where box sums the zero-padded window of half (n-1)/2 on each side of (h, w) (a symmetric
// window, so the backward's transposed window is the same box). The box is separable: a pass
// along w, then one along h. Both layouts are [planes][H][W][V]: nchw has planes N*C and V 1,
// nhwc planes N and V C; a shift along w is then a shift of V contiguous floats, so every pass
// is one contiguous, vectorisable loop.
#include <algorithm>
#include <cmath>
#include <vector>

#include "devices/cpu/own_ops.hpp"

namespace easel {

namespace {

class OwnLrnWithin final : public Op {
 public:
  explicit OwnLrnWithin(const OpDesc& d)
      : Op(d),
        count_(d.src.count()),
        planes_(d.layout == Layout::nchw ? d.src.n * d.src.c : d.src.n),
        v_(d.layout == Layout::nchw ? 1 : d.src.c),
        half_((d.local_size - 1) / 2),
        scale_(static_cast<size_t>(count_)),
        pow_(static_cast<size_t>(count_)),
        tmp_(static_cast<size_t>(count_)),
        box_(static_cast<size_t>(count_)) {}
  std::string impl() const override { return "own:lrn_within"; }

  void forward(const float* src, float* dst, std::span<const float* const>, bool) override {
    const OpDesc& d = desc_;
    const float alpha_m = d.alpha / static_cast<float>(d.local_size * d.local_size);
    float* sq = dst;  // dst holds the squares until it is written
#pragma omp parallel for
    for (int64_t i = 0; i < count_; ++i)
      sq[i] = src[i] * src[i];
    box(sq, box_.data());
    const float k = d.k, beta = d.beta;
    float* scale = scale_.data();
    float* p = pow_.data();
    const bool three_quarters = beta == 0.75f;
#pragma omp parallel for simd
    for (int64_t i = 0; i < count_; ++i) {
      const float s = k + alpha_m * box_[static_cast<size_t>(i)];
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
    const OpDesc& d = desc_;
    const float ratio = 2.f * d.alpha * d.beta / static_cast<float>(d.local_size * d.local_size);
    float* t = diff_src;  // diff_src holds diff_dst * dst / scale until it is written
    const float* scale = scale_.data();
#pragma omp parallel for simd
    for (int64_t i = 0; i < count_; ++i)
      t[i] = diff_dst[i] * dst[i] / scale[i];
    box(t, box_.data());
    const float* p = pow_.data();
#pragma omp parallel for simd
    for (int64_t i = 0; i < count_; ++i)
      diff_src[i] = diff_dst[i] * p[i] - ratio * src[i] * box_[static_cast<size_t>(i)];
  }

 private:
  // out <- the window sums of in (both [planes][H][W][V]); tmp_ holds the pass along w.
  void box(const float* in, float* out) {
    const int64_t hh = desc_.src.h, wv = desc_.src.w * v_, plane = hh * wv, half = half_;
    float* tmp = tmp_.data();
#pragma omp parallel for
    for (int64_t p = 0; p < planes_; ++p) {
      const float* a = in + p * plane;
      float* b = tmp + p * plane;
      float* o = out + p * plane;
      for (int64_t y = 0; y < hh; ++y) {  // along w: a shift by dx is a shift by dx * V floats
        const float* ar = a + y * wv;
        float* br = b + y * wv;
        std::copy(ar, ar + wv, br);
        for (int64_t dx = 1; dx <= half; ++dx) {
          const int64_t sh = dx * v_;
          if (sh >= wv) break;
#pragma omp simd
          for (int64_t i = 0; i < wv - sh; ++i)
            br[i] += ar[i + sh];
#pragma omp simd
          for (int64_t i = sh; i < wv; ++i)
            br[i] += ar[i - sh];
        }
      }
      for (int64_t y = 0; y < hh; ++y) {  // along h: whole rows
        float* orow = o + y * wv;
        std::copy(b + y * wv, b + (y + 1) * wv, orow);
        for (int64_t yy = std::max<int64_t>(y - half, 0); yy <= std::min(y + half, hh - 1); ++yy) {
          if (yy == y) continue;
          const float* brow = b + yy * wv;
#pragma omp simd
          for (int64_t i = 0; i < wv; ++i)
            orow[i] += brow[i];
        }
      }
    }
  }

  int64_t count_, planes_, v_, half_;
  std::vector<float> scale_, pow_, tmp_, box_;  // per element; scale and pow kept for backward
};

}  // namespace

Result<std::unique_ptr<Op>> make_own_lrn(const OpDesc& d, const DnnlOptions& /*options*/) {
  if (!d.lrn_within_channel)
    return unavailable(
        "lrn: easel's own kernel is the within-channel region's (oneDNN has the other)");
  return std::unique_ptr<Op>(new OwnLrnWithin(d));
}

}  // namespace easel
