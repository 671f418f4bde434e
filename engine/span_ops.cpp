// Span operations: each is one pass with `omp simd` on the inner loop. No OpenMP parallel
// region is opened here: callers run these on a worker's thread (its team may split the arena).
//
// Rounding contract: every elastic update is written as
//   u = <the plain update of w>;  w = u - alpha*(w_old - centre)
// and alpha == 0 takes the plain update's own code path, so that an elastic step with alpha 0
// is bit-identical to the corresponding plain step (sync-easgd with rho = 0 equals sgd).
#include "engine/span_ops.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#if defined(__SSE__)
#include <immintrin.h>
#endif

namespace easel {
namespace {

static_assert(std::atomic_ref<float>::is_always_lock_free, "racy ops need lock-free floats");

struct SegRange {
  int64_t begin, end;
  float lr, wd;  // effective lr*lr_mult, wd*decay_mult
};

inline SegRange range_of(const Segment& s, float lr, float wd) {
  return {s.offset, s.offset + s.count, lr * s.lr_mult, wd * s.decay_mult};
}

// The elastic steps' element rules over [0, n) of pointers already offset, writing the new w to
// `out` (w itself, or a buffer that is then streamed): one definition for both, so that the
// plain and the streamed kernels give the same bits.
inline void elastic_sgd_block(float* out, const float* w, const float* g, const float* c, int64_t n,
                              float lr, float wd, float alpha) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float wo = w[i];
    const float u = wo - lr * (g[i] + wd * wo);
    out[i] = u - alpha * (wo - c[i]);
  }
}

inline void elastic_momentum_block(float* out, const float* w, const float* g, float* v,
                                   const float* c, int64_t n, float lr, float wd, float delta,
                                   float alpha, bool nesterov) {
  if (nesterov) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float wo = w[i];
      const float vo = v[i];
      const float vn = delta * vo - lr * (g[i] + wd * wo);
      v[i] = vn;
      const float u = wo + (1.f + delta) * vn - delta * vo;
      out[i] = u - alpha * (wo - c[i]);
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float wo = w[i];
      const float vn = delta * v[i] - lr * (g[i] + wd * wo);
      v[i] = vn;
      const float u = wo + vn;
      out[i] = u - alpha * (wo - c[i]);
    }
  }
}

// Runs block(out, offset, count) over every segment in pieces of kStreamBlock floats: straight
// into dst where the piece lies inside [keep_lo, keep_hi), else into a buffer then streamed to
// dst.
constexpr int64_t kStreamBlock = 256;
template <typename Block>
void streamed_segments(std::span<const Segment> segs, float* dst, int64_t keep_lo, int64_t keep_hi,
                       float lr, float wd, Block block) {
  alignas(64) float buf[kStreamBlock];
  for (const Segment& s : segs) {
    const SegRange r = range_of(s, lr, wd);
    for (int64_t b = r.begin; b < r.end; b += kStreamBlock) {
      const int64_t m = std::min(kStreamBlock, r.end - b);
      if (b >= keep_lo && b + m <= keep_hi) {
        block(dst + b, b, m, r);
      } else {
        block(buf, b, m, r);
        stream_store(dst + b, buf, m);
      }
    }
  }
  stream_fence();
}

bool g_values_ignored = false;

}  // namespace

void set_values_ignored(bool on) {
  g_values_ignored = on;
}

bool values_ignored() {
  return g_values_ignored;
}

void span_copy(float* y, const float* x, int64_t n) {
  if (g_values_ignored) return;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i];
}

void span_axpy(float* y, float a, const float* x, int64_t n) {
  if (g_values_ignored) return;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] += a * x[i];
}

void span_axpby(float* y, float a, const float* x, float b, int64_t n) {
  if (g_values_ignored) return;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] = a * x[i] + b * y[i];
}

void span_scale(float* y, float a, int64_t n) {
  if (g_values_ignored) return;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] *= a;
}

void span_zero(float* y, int64_t n) {
  if (g_values_ignored) return;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] = 0.f;
}

double span_sum_squares(const float* x, int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    s += v * v;
  }
  return s;
}

// f(i, r) for every element i of the segments, r its segment's learning rate and decay
// (range_of); nothing while values are ignored. f is elementwise: the loop is vectorised.
template <typename F>
void each_element(std::span<const Segment> segs, float lr, float wd, F f) {
  if (g_values_ignored) return;
  for (const Segment& s : segs) {
    const SegRange r = range_of(s, lr, wd);
#pragma omp simd
    for (int64_t i = r.begin; i < r.end; ++i)
      f(i, r);
  }
}

void sgd_step(std::span<const Segment> segs, float* w, const float* g, float lr, float wd) {
  each_element(segs, lr, wd,
               [=](int64_t i, const SegRange& r) { w[i] = w[i] - r.lr * (g[i] + r.wd * w[i]); });
}

void momentum_step(std::span<const Segment> segs, float* w, const float* g, float* v, float lr,
                   float mu, float wd) {
  each_element(segs, lr, wd, [=](int64_t i, const SegRange& r) {
    const float vn = mu * v[i] - r.lr * (g[i] + r.wd * w[i]);
    v[i] = vn;
    w[i] = w[i] + vn;
  });
}

void nesterov_step(std::span<const Segment> segs, float* w, const float* g, float* v, float lr,
                   float mu, float wd) {
  each_element(segs, lr, wd, [=](int64_t i, const SegRange& r) {
    const float vo = v[i];
    const float vn = mu * vo - r.lr * (g[i] + r.wd * w[i]);
    v[i] = vn;
    w[i] = w[i] + (1.f + mu) * vn - mu * vo;
  });
}

void elastic_sgd_step(std::span<const Segment> segs, float* w, const float* g, const float* centre,
                      float lr, float wd, float alpha) {
  if (g_values_ignored) return;
  if (alpha == 0.f) {
    sgd_step(segs, w, g, lr, wd);
    return;
  }
  for (const Segment& s : segs) {
    const SegRange r = range_of(s, lr, wd);
    elastic_sgd_block(w + r.begin, w + r.begin, g + r.begin, centre + r.begin, r.end - r.begin,
                      r.lr, r.wd, alpha);
  }
}

void elastic_momentum_step(std::span<const Segment> segs, float* w, const float* g, float* v,
                           const float* centre, float lr, float delta, float wd, float alpha,
                           bool nesterov) {
  if (g_values_ignored) return;
  if (alpha == 0.f) {
    if (nesterov) {
      nesterov_step(segs, w, g, v, lr, delta, wd);
    } else {
      momentum_step(segs, w, g, v, lr, delta, wd);
    }
    return;
  }
  for (const Segment& s : segs) {
    const SegRange r = range_of(s, lr, wd);
    elastic_momentum_block(w + r.begin, w + r.begin, g + r.begin, v + r.begin, centre + r.begin,
                           r.end - r.begin, r.lr, r.wd, delta, alpha, nesterov);
  }
}

void elastic_sgd_range(float* w_out, const float* w, const float* g, const float* centre, int64_t n,
                       float lr_eff, float wd_eff, float alpha) {
  if (g_values_ignored) return;
  elastic_sgd_block(w_out, w, g, centre, n, lr_eff, wd_eff, alpha);
}

void elastic_momentum_range(float* w_out, const float* w, const float* g, float* v,
                            const float* centre, int64_t n, float lr_eff, float wd_eff, float delta,
                            float alpha, bool nesterov) {
  if (g_values_ignored) return;
  elastic_momentum_block(w_out, w, g, v, centre, n, lr_eff, wd_eff, delta, alpha, nesterov);
}

void stream_store(float* dst, const float* src, int64_t n) {
  if (g_values_ignored) return;
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 63) != 0; ++i)
    dst[i] = src[i];
  for (; i + 16 <= n; i += 16)
    _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
#elif defined(__AVX__)
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 31) != 0; ++i)
    dst[i] = src[i];
  for (; i + 8 <= n; i += 8)
    _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
#elif defined(__SSE__)
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 15) != 0; ++i)
    dst[i] = src[i];
  for (; i + 4 <= n; i += 4)
    _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
#endif
  for (; i < n; ++i)
    dst[i] = src[i];
}

void stream_fence() {
#if defined(__SSE__)
  _mm_sfence();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

void elastic_sgd_step_streamed(std::span<const Segment> segs, const float* w, float* w_out,
                               const float* g, const float* centre, float lr, float wd, float alpha,
                               int64_t keep_lo, int64_t keep_hi) {
  if (g_values_ignored) return;
  if (alpha == 0.f) {  // sgd_step's own rule (bit for bit), in place
    if (w_out != w) span_copy(w_out, w, segs.empty() ? 0 : segs.back().offset + segs.back().count);
    sgd_step(segs, w_out, g, lr, wd);
    return;
  }
  streamed_segments(segs, w_out, keep_lo, keep_hi, lr, wd,
                    [&](float* out, int64_t b, int64_t m, const SegRange& r) {
                      elastic_sgd_block(out, w + b, g + b, centre + b, m, r.lr, r.wd, alpha);
                    });
}

void elastic_momentum_step_streamed(std::span<const Segment> segs, const float* w, float* w_out,
                                    const float* g, float* v, const float* centre, float lr,
                                    float delta, float wd, float alpha, bool nesterov,
                                    int64_t keep_lo, int64_t keep_hi) {
  if (g_values_ignored) return;
  if (alpha == 0.f) {  // the plain momentum rules (bit for bit), in place
    if (w_out != w) span_copy(w_out, w, segs.empty() ? 0 : segs.back().offset + segs.back().count);
    elastic_momentum_step(segs, w_out, g, v, centre, lr, delta, wd, alpha, nesterov);
    return;
  }
  streamed_segments(segs, w_out, keep_lo, keep_hi, lr, wd,
                    [&](float* out, int64_t b, int64_t m, const SegRange& r) {
                      elastic_momentum_block(out, w + b, g + b, v + b, centre + b, m, r.lr, r.wd,
                                             delta, alpha, nesterov);
                    });
}

void elastic_pull(float* w, const float* centre, float alpha, int64_t n) {
  if (g_values_ignored) return;
  if (alpha == 0.f) return;  // keeps w bit-identical (no -0/+0 flips)
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    w[i] = w[i] - alpha * (w[i] - centre[i]);
}

void elastic_centre(float* centre, const float* w, float alpha, int64_t n) {
  if (g_values_ignored) return;
  if (alpha == 0.f) return;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    centre[i] = centre[i] + alpha * (w[i] - centre[i]);
}

void elastic_centre_sum(float* centre, const float* sum_w, float alpha, int p, int64_t n) {
  if (g_values_ignored) return;
  elastic_centre_from(centre, centre, sum_w, alpha, p, n);
}

void elastic_centre_from(float* c_new, const float* c_old, const float* sum_w, float alpha, int p,
                         int64_t n) {
  if (g_values_ignored) return;
  if (alpha == 0.f) {
    if (c_new != c_old) span_copy(c_new, c_old, n);
    return;
  }
  const float pf = static_cast<float>(p);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    c_new[i] = c_old[i] + alpha * (sum_w[i] - pf * c_old[i]);
}

void racy_axpy(float* shared, float a, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    std::atomic_ref<float> s(shared[i]);
    s.store(s.load(std::memory_order_relaxed) + a * x[i], std::memory_order_relaxed);
  }
}

void racy_copy_from(float* dst, const float* shared, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    // atomic_ref needs a non-const referent; the load does not write.
    std::atomic_ref<float> s(const_cast<float&>(shared[i]));
    dst[i] = s.load(std::memory_order_relaxed);
  }
}

void racy_elastic_centre(float* shared, const float* w, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    std::atomic_ref<float> s(shared[i]);
    const float c = s.load(std::memory_order_relaxed);
    s.store(c + alpha * (w[i] - c), std::memory_order_relaxed);
  }
}

void copy_state(std::span<const Segment> segs, float* dst, const float* src) {
  if (g_values_ignored) return;
  for (const Segment& s : segs)
    if (s.state) std::memcpy(dst + s.offset, src + s.offset, sizeof(float) * s.count);
}

void racy_copy_state(std::span<const Segment> segs, float* shared, const float* src) {
  for (const Segment& s : segs) {
    if (!s.state) continue;
    for (int64_t i = 0; i < s.count; ++i)
      std::atomic_ref<float>(shared[s.offset + i])
          .store(src[s.offset + i], std::memory_order_relaxed);
  }
}

}  // namespace easel
