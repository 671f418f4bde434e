// Box resampling with PIL's bilinear coefficients (nets/data/resample.hpp).
#include "nets/data/resample.hpp"

#include <algorithm>
#include <cmath>

#include "engine/status.hpp"

namespace easel {

Taps triangle_taps(int64_t in, double center, double filter_scale) {
  const double support = filter_scale;  // the triangle's support is 1
  // PIL's (int) casts truncate toward zero; the clamps make that floor here.
  const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
  const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
  Taps t;
  t.first = lo;
  double sum = 0;
  std::vector<double> w;
  for (int64_t k = lo; k < hi; ++k) {
    const double x = (static_cast<double>(k) - center + 0.5) / filter_scale;
    w.push_back(std::max(0.0, 1.0 - std::abs(x)));
    sum += w.back();
  }
  if (w.empty() || sum <= 0) {  // a box past the input's edge: its nearest pixel
    t.first = std::clamp<int64_t>(static_cast<int64_t>(center), 0, in - 1);
    t.w = {1.f};
    return t;
  }
  for (double v : w)
    t.w.push_back(static_cast<float>(v / sum));
  return t;
}

std::vector<Taps> box_taps(int64_t in, double x0, double len, int64_t out) {
  EASEL_CHECK(in >= 1 && out >= 1 && len > 0);
  const double scale = len / static_cast<double>(out);
  const double filter_scale = std::max(scale, 1.0);
  std::vector<Taps> t(static_cast<size_t>(out));
  for (int64_t j = 0; j < out; ++j)
    t[static_cast<size_t>(j)] =
        triangle_taps(in, x0 + (static_cast<double>(j) + 0.5) * scale, filter_scale);
  return t;
}

int64_t taps_begin(const std::vector<Taps>& t) {
  int64_t b = t.front().first;
  for (const Taps& k : t)
    b = std::min(b, k.first);
  return b;
}

int64_t taps_end(const std::vector<Taps>& t) {
  int64_t e = 0;
  for (const Taps& k : t)
    e = std::max(e, k.first + static_cast<int64_t>(k.w.size()));
  return e;
}

void resample_box(const uint8_t* region, int64_t region_w, int64_t origin_x, int64_t origin_y,
                  const std::vector<Taps>& tx, const std::vector<Taps>& ty, uint8_t* dst) {
  const int64_t ow = static_cast<int64_t>(tx.size()), oh = static_cast<int64_t>(ty.size());
  const int64_t col0 = taps_begin(tx), cols = taps_end(tx) - col0;
  // Vertical pass first, over the columns the horizontal pass reads: tmp [oh, cols, 3]. Its
  // inner loop runs over contiguous bytes (vectorised); the horizontal pass then has oh rows.
  // Scratch reused by the thread (a fresh buffer of this size is mmapped and zeroed per call).
  thread_local std::vector<float> tmp;
  tmp.resize(static_cast<size_t>(oh * cols * 3));
  const int64_t n = cols * 3;
  for (int64_t y = 0; y < oh; ++y) {
    const Taps& k = ty[static_cast<size_t>(y)];
    float* __restrict t = tmp.data() + y * n;
    std::fill(t, t + n, 0.f);
    for (size_t i = 0; i < k.w.size(); ++i) {
      const float wi = k.w[i];
      const uint8_t* __restrict s = region +
                                    (k.first + static_cast<int64_t>(i) - origin_y) * region_w * 3 +
                                    (col0 - origin_x) * 3;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        t[j] += wi * static_cast<float>(s[j]);
    }
  }
  // Horizontal pass into float rows, then rounded half up to bytes (the sums are never
  // negative) in a separate, branch-free and vectorised loop, chw.
  const int64_t plane = ow * oh;
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(3 * ow));
  float* __restrict r = row.data();
  for (int64_t y = 0; y < oh; ++y) {
    const float* t = tmp.data() + y * n;
    for (int64_t x = 0; x < ow; ++x) {
      const Taps& k = tx[static_cast<size_t>(x)];
      const float* p = t + (k.first - col0) * 3;
      float a0 = 0, a1 = 0, a2 = 0;
      for (size_t i = 0; i < k.w.size(); ++i, p += 3) {
        a0 += k.w[i] * p[0];
        a1 += k.w[i] * p[1];
        a2 += k.w[i] * p[2];
      }
      r[x] = a0;
      r[ow + x] = a1;
      r[2 * ow + x] = a2;
    }
    for (int c = 0; c < 3; ++c) {
      uint8_t* __restrict d = dst + c * plane + y * ow;
      const float* __restrict rc = r + c * ow;
#pragma omp simd
      for (int64_t x = 0; x < ow; ++x) {
        float v = rc[x];
        v = v > 255.f ? 255.f : v;
        v = v < 0.f ? 0.f : v;
        d[x] = static_cast<uint8_t>(static_cast<int>(v + 0.5f));
      }
    }
  }
}

}  // namespace easel
