// Box resampling with PIL's bilinear coefficients (nets/data/resample.hpp).
#include "nets/data/resample.hpp"

#include <algorithm>
#include <cmath>

#include "engine/status.hpp"

namespace easel {

std::vector<Taps> box_taps(int64_t in, double x0, double len, int64_t out) {
  EASEL_CHECK(in >= 1 && out >= 1 && len > 0);
  const double scale = len / static_cast<double>(out);
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle's support is 1
  std::vector<Taps> t(static_cast<size_t>(out));
  std::vector<double> w;
  for (int64_t j = 0; j < out; ++j) {
    const double center = x0 + (static_cast<double>(j) + 0.5) * scale;
    // PIL's (int) casts truncate toward zero; the clamps make that floor here.
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
    Taps& tj = t[static_cast<size_t>(j)];
    tj.first = lo;
    double sum = 0;
    w.clear();
    for (int64_t k = lo; k < hi; ++k) {
      const double x = (static_cast<double>(k) - center + 0.5) / filter_scale;
      w.push_back(std::max(0.0, 1.0 - std::abs(x)));
      sum += w.back();
    }
    if (w.empty() || sum <= 0) {  // a box past the input's edge: its nearest pixel
      tj.first = std::clamp<int64_t>(static_cast<int64_t>(center), 0, in - 1);
      tj.w = {1.f};
      continue;
    }
    for (double v : w)
      tj.w.push_back(static_cast<float>(v / sum));
  }
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
  const int64_t row0 = taps_begin(ty), row1 = taps_end(ty);
  // Horizontal pass over the rows the vertical pass reads: tmp [rows, ow, 3].
  // Scratch reused by the thread (a fresh buffer of this size is mmapped and zeroed per call).
  thread_local std::vector<float> tmp, acc;
  tmp.resize(static_cast<size_t>((row1 - row0) * ow * 3));
  for (int64_t y = row0; y < row1; ++y) {
    const uint8_t* s = region + (y - origin_y) * region_w * 3;
    float* t = tmp.data() + (y - row0) * ow * 3;
    for (int64_t x = 0; x < ow; ++x) {
      const Taps& k = tx[static_cast<size_t>(x)];
      const uint8_t* p = s + (k.first - origin_x) * 3;
      float a0 = 0, a1 = 0, a2 = 0;
      for (size_t i = 0; i < k.w.size(); ++i, p += 3) {
        a0 += k.w[i] * static_cast<float>(p[0]);
        a1 += k.w[i] * static_cast<float>(p[1]);
        a2 += k.w[i] * static_cast<float>(p[2]);
      }
      t[x * 3] = a0;
      t[x * 3 + 1] = a1;
      t[x * 3 + 2] = a2;
    }
  }
  // Vertical pass, rounded to bytes, chw.
  const int64_t plane = ow * oh;
  acc.resize(static_cast<size_t>(ow * 3));
  for (int64_t y = 0; y < oh; ++y) {
    const Taps& k = ty[static_cast<size_t>(y)];
    std::fill(acc.begin(), acc.end(), 0.f);
    for (size_t i = 0; i < k.w.size(); ++i) {
      const float wi = k.w[i];
      const float* p = tmp.data() + (k.first - row0 + static_cast<int64_t>(i)) * ow * 3;
      for (int64_t x = 0; x < ow * 3; ++x)
        acc[static_cast<size_t>(x)] += wi * p[x];
    }
    for (int64_t x = 0; x < ow; ++x)
      for (int c = 0; c < 3; ++c) {  // rounded half up (the sums are never negative)
        const float v = std::clamp(acc[static_cast<size_t>(x * 3 + c)], 0.f, 255.f);
        dst[c * plane + y * ow + x] = static_cast<uint8_t>(static_cast<int>(v + 0.5f));
      }
  }
}

}  // namespace easel
