#include "algos/exchange.hpp"

#include "engine/span_ops.hpp"

#include <algorithm>
#include <atomic>

namespace easel {

namespace {

// f(i, l, d) for every element i of the segments, l and d its segment's learning rate and weight
// decay; nothing while values are ignored (simulated, compute injected: engine/span_ops.hpp).
// Vectorised: f must be elementwise.
template <typename F>
void each_element(std::span<const Segment> segs, float lr, float wd, F f) {
  if (values_ignored()) return;
  for (const Segment& s : segs) {
    const float l = lr * s.lr_mult, d = wd * s.decay_mult;
#pragma omp simd
    for (int64_t i = s.offset; i < s.offset + s.count; ++i)
      f(i, l, d);
  }
}

}  // namespace

void easgd_exchange(std::span<const Segment> segs, float* w, const float* g, float* c, float lr,
                    float wd, float alpha) {
  each_element(segs, lr, wd, [=](int64_t i, float l, float d) {
    const float e = alpha * (w[i] - c[i]);
    w[i] = (w[i] - l * (g[i] + d * w[i])) - e;
    c[i] += e;
  });
}

void easgd_momentum_exchange(std::span<const Segment> segs, float* w, const float* g, float* v,
                             float* c, float lr, float delta, float wd, float alpha,
                             bool nesterov) {
  if (nesterov) {
    each_element(segs, lr, wd, [=](int64_t i, float l, float d) {
      const float e = alpha * (w[i] - c[i]);
      const float vn = delta * v[i] - l * (g[i] + d * w[i]);
      w[i] = w[i] + (1.f + delta) * vn - delta * v[i] - e;
      v[i] = vn;
      c[i] += e;
    });
    return;
  }
  each_element(segs, lr, wd, [=](int64_t i, float l, float d) {
    const float e = alpha * (w[i] - c[i]);
    const float vn = delta * v[i] - l * (g[i] + d * w[i]);
    w[i] = w[i] + vn - e;
    v[i] = vn;
    c[i] += e;
  });
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
  each_element(segs, lr, wd, [=](int64_t i, float l, float d) { g[i] = l * (g[i] + d * w[i]); });
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
