#include "algos/exchange.hpp"

#include "engine/span_ops.hpp"

#include <algorithm>
#include <atomic>

namespace easel {

namespace {

// S[0, m) = the sum of w[v] + c over the P arenas in the shared-memory Comm's binomial-tree
// order (pairs (v, v+1), then (v, v+2), ...), into tmp's first chunk (a copy when P == 1, so
// that the arenas may change after); tmp holds at least P chunks.
const float* tree_sum(std::span<const float* const> w, int64_t c, int64_t m, float* tmp) {
  const int p = static_cast<int>(w.size());
  for (int v = 0; v < p; v += 2) {
    float* a = tmp + static_cast<size_t>(v) * kCentreChunk;
    const float* w0 = w[static_cast<size_t>(v)] + c;
    if (v + 1 < p) {
      const float* w1 = w[static_cast<size_t>(v + 1)] + c;
#pragma omp simd
      for (int64_t i = 0; i < m; ++i)
        a[i] = w0[i] + w1[i];
    } else {
      span_copy(a, w0, m);
    }
  }
  for (int mask = 2; mask < p; mask <<= 1) {
    for (int v = 0; v + mask < p; v += 2 * mask) {
      float* a = tmp + static_cast<size_t>(v) * kCentreChunk;
      const float* b = tmp + static_cast<size_t>(v + mask) * kCentreChunk;
#pragma omp simd
      for (int64_t i = 0; i < m; ++i)
        a[i] = a[i] + b[i];
    }
  }
  return tmp;
}

}  // namespace

void centre_update_slice(std::span<const float* const> w, const float* c_old, float* c_new,
                         float alpha, int64_t lo, int64_t hi, std::vector<float>& tmp) {
  const int p = static_cast<int>(w.size());
  const size_t need = static_cast<size_t>(p + 1) * kCentreChunk;
  if (tmp.size() < need) tmp.resize(need);
  for (int64_t c = lo; c < hi; c += kCentreChunk) {
    const int64_t m = std::min(kCentreChunk, hi - c);
    const float* sum = tree_sum(w, c, m, tmp.data());
    if (p == 1) {
      elastic_centre_from(c_new + c, c_old + c, sum, alpha, p, m);
    } else {  // every group reads this slice next: streamed (engine/span_ops.hpp)
      float* out = &tmp[static_cast<size_t>(p) * kCentreChunk];
      elastic_centre_from(out, c_old + c, sum, alpha, p, m);
      stream_store(c_new + c, out, m);
    }
  }
  if (p > 1) stream_fence();
}

void mirrored_exchange(std::span<const Segment> segs, std::span<const float* const> w_all, float* w,
                       float* w_copy, const float* g, float* v, float* c, float lr, float delta,
                       float wd, float alpha, bool nesterov, std::vector<float>& tmp) {
  const int p = static_cast<int>(w_all.size());
  const int64_t n = segs.empty() ? 0 : segs.back().offset + segs.back().count;
  if (alpha == 0.f) {  // the plain local step's own code path; the centre stays
    if (v)
      elastic_momentum_step(segs, w, g, v, c, lr, delta, wd, 0.f, nesterov);
    else
      elastic_sgd_step(segs, w, g, c, lr, wd, 0.f);
    if (w_copy) {
      stream_store(w_copy, w, n);
      stream_fence();
    }
    return;
  }
  const size_t need = static_cast<size_t>(p) * kCentreChunk;
  if (tmp.size() < need) tmp.resize(need);
  for (const Segment& s : segs) {
    const float l = lr * s.lr_mult, d = wd * s.decay_mult;
    const int64_t end = s.offset + s.count;
    for (int64_t b = s.offset; b < end; b += kCentreChunk) {
      const int64_t m = std::min(kCentreChunk, end - b);
      const float* sum = tree_sum(w_all, b, m, tmp.data());  // before w, one of its terms, moves
      if (v)
        elastic_momentum_range(w + b, w + b, g + b, v + b, c + b, m, l, d, delta, alpha, nesterov);
      else
        elastic_sgd_range(w + b, w + b, g + b, c + b, m, l, d, alpha);
      elastic_centre_from(c + b, c + b, sum, alpha, p, m);
      if (w_copy) stream_store(w_copy + b, w + b, m);
    }
  }
  if (w_copy) stream_fence();
}

std::pair<int64_t, int64_t> centre_slice(int64_t n, int p, int id) {
  const int64_t per = (n / p + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  const int64_t lo = std::min(n, per * id);
  return {lo, id + 1 == p ? n : std::min(n, lo + per)};
}

void easgd_exchange(std::span<const Segment> segs, float* w, const float* g, float* c, float lr,
                    float wd, float alpha) {
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
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float e = alpha * (w[i] - c[i]);
    c[i] += e;
  }
}

void easgd_exchange_racy(std::span<const Segment> segs, float* w, const float* g, float* c,
                         float lr, float wd, float alpha) {
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
