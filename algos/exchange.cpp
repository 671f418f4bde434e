#include "algos/exchange.hpp"

#include "engine/span_ops.hpp"

#include <algorithm>
#include <atomic>

namespace easel {

void easgd_exchange(std::span<const Segment> segs, float* w, const float* g, float* c, float lr,
                    float wd, float alpha) {
  if (values_ignored()) return;  // simulated, compute injected (engine/span_ops.hpp)
  for (const Segment& s : segs) {
    const float l = lr * s.lr_mult, d = wd * s.decay_mult;
    float* ws = w + s.offset;
    const float* gs = g + s.offset;
    float* cs = c + s.offset;
#pragma omp simd
    for (int64_t i = 0; i < s.count; ++i) {
      const float e = alpha * (ws[i] - cs[i]);
      ws[i] = (ws[i] - l * (gs[i] + d * ws[i])) - e;
      cs[i] += e;
    }
  }
}

void easgd_momentum_exchange(std::span<const Segment> segs, float* w, const float* g, float* v,
                             float* c, float lr, float delta, float wd, float alpha,
                             bool nesterov) {
  if (values_ignored()) return;  // simulated, compute injected (engine/span_ops.hpp)
  for (const Segment& s : segs) {
    const float l = lr * s.lr_mult, d = wd * s.decay_mult;
    float* ws = w + s.offset;
    const float* gs = g + s.offset;
    float* vs = v + s.offset;
    float* cs = c + s.offset;
    if (nesterov) {
#pragma omp simd
      for (int64_t i = 0; i < s.count; ++i) {
        const float e = alpha * (ws[i] - cs[i]);
        const float vn = delta * vs[i] - l * (gs[i] + d * ws[i]);
        ws[i] = ws[i] + (1.f + delta) * vn - delta * vs[i] - e;
        vs[i] = vn;
        cs[i] += e;
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < s.count; ++i) {
        const float e = alpha * (ws[i] - cs[i]);
        const float vn = delta * vs[i] - l * (gs[i] + d * ws[i]);
        ws[i] = ws[i] + vn - e;
        vs[i] = vn;
        cs[i] += e;
      }
    }
  }
}

void easgd_centre_pull(float* c, const float* w, float alpha, int64_t n) {
  if (values_ignored()) return;  // simulated, compute injected (engine/span_ops.hpp)
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float e = alpha * (w[i] - c[i]);
    c[i] += e;
  }
}

void easgd_exchange_racy(std::span<const Segment> segs, float* w, const float* g, float* c,
                         float lr, float wd, float alpha) {
  if (values_ignored()) return;  // simulated, compute injected (engine/span_ops.hpp)
  for (const Segment& s : segs) {
    const float l = lr * s.lr_mult, d = wd * s.decay_mult;
    float* ws = w + s.offset;
    const float* gs = g + s.offset;
    for (int64_t i = 0; i < s.count; ++i) {
      std::atomic_ref<float> ci(c[s.offset + i]);
      const float cv = ci.load(std::memory_order_relaxed);
      const float e = alpha * (ws[i] - cv);
      ws[i] = (ws[i] - l * (gs[i] + d * ws[i])) - e;
      // Another group may have written c[i] since the load: last writer wins, as in Hogwild.
      ci.store(ci.load(std::memory_order_relaxed) + e, std::memory_order_relaxed);
    }
  }
}

}  // namespace easel

namespace easel {
void scaled_gradient(std::span<const Segment> segs, float* g, const float* w, float lr, float wd) {
  if (values_ignored()) return;  // simulated, compute injected (engine/span_ops.hpp)
  for (const Segment& s : segs) {
    const float l = lr * s.lr_mult, d = wd * s.decay_mult;
    float* gs = g + s.offset;
    const float* ws = w + s.offset;
#pragma omp simd
    for (int64_t i = 0; i < s.count; ++i)
      gs[i] = l * (gs[i] + d * ws[i]);
  }
}
}  // namespace easel

namespace easel {
void local_step(Run& run, Group& g, float lr, LocalRule rule) {
  const AlgoParams& p = run.params;
  ArenaKernels& k = *g.kernels;
  switch (rule) {
    case LocalRule::sgd:
      k.sgd_step(run.segments(), g.weights.data(), g.diff.data(), lr, p.weight_decay);
      return;
    case LocalRule::heavy_ball:
      k.momentum_step(run.segments(), g.weights.data(), g.diff.data(), g.momentum.data(), lr,
                      p.momentum, p.weight_decay);
      return;
    case LocalRule::nesterov:
      k.nesterov_step(run.segments(), g.weights.data(), g.diff.data(), g.momentum.data(), lr,
                      p.momentum, p.weight_decay);
      return;
  }
}
}  // namespace easel
