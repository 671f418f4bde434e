#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/rng.hpp"
#include "engine/span_ops.hpp"

namespace easel {
namespace {

// Two segments with different multipliers and padding between them; the arena is 48 floats.
struct Fixture {
  ArenaLayout layout;
  std::vector<float> w, g, v, c;
  Fixture() {
    Segment a;
    a.name = "a";
    a.dims = {5, 3};
    a.lr_mult = 1.f;
    a.decay_mult = 1.f;
    Segment b;
    b.name = "b";
    b.dims = {7};
    b.lr_mult = 2.f;
    b.decay_mult = 0.f;
    layout.add(a);
    layout.add(b);
    const size_t n = static_cast<size_t>(layout.total_floats());
    Rng rng(42);
    w.resize(n);
    g.resize(n);
    v.resize(n);
    c.resize(n);
    for (size_t i = 0; i < n; ++i) {
      w[i] = rng.uniform(-1.f, 1.f);
      g[i] = rng.uniform(-1.f, 1.f);
      v[i] = rng.uniform(-0.1f, 0.1f);
      c[i] = rng.uniform(-1.f, 1.f);
    }
  }
  std::span<const Segment> segs() const { return layout.segments(); }
  // Calls fn(i, lr_mult, decay_mult) for every parameter index; padding is skipped.
  template <typename F>
  void each(F fn) const {
    for (const Segment& s : layout.segments()) {
      for (int64_t i = s.offset; i < s.offset + s.count; ++i) {
        fn(static_cast<size_t>(i), static_cast<double>(s.lr_mult),
           static_cast<double>(s.decay_mult));
      }
    }
  }
  std::vector<bool> is_param() const {
    std::vector<bool> m(w.size(), false);
    each([&](size_t i, double, double) { m[i] = true; });
    return m;
  }
};

constexpr double kTol = 1e-6;

TEST(SpanOps, BasicOpsMatchReference) {
  const int64_t n = 1003;
  std::vector<float> x(n), y(n), y0;
  Rng rng(1);
  for (auto& e : x)
    e = rng.uniform(-2.f, 2.f);
  for (auto& e : y)
    e = rng.uniform(-2.f, 2.f);
  y0 = y;

  span_axpy(y.data(), 0.5f, x.data(), n);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(y[i], y0[i] + 0.5 * x[i], kTol);
  y = y0;
  span_axpby(y.data(), 0.25f, x.data(), -3.f, n);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(y[i], 0.25 * x[i] - 3.0 * y0[i], 1e-5);
  y = y0;
  span_scale(y.data(), 1.5f, n);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(y[i], 1.5 * y0[i], kTol);
  span_copy(y.data(), x.data(), n);
  EXPECT_EQ(std::memcmp(y.data(), x.data(), n * sizeof(float)), 0);
  double ref = 0;
  for (float e : x)
    ref += static_cast<double>(e) * e;
  EXPECT_NEAR(span_sum_squares(x.data(), n), ref, 1e-9 * ref);
  span_zero(y.data(), n);
  for (float e : y)
    EXPECT_EQ(e, 0.f);
}

TEST(SpanOps, SgdUsesSegmentMultipliers) {
  Fixture f;
  const auto w0 = f.w;
  const double lr = 0.1, wd = 0.01;
  sgd_step(f.segs(), f.w.data(), f.g.data(), 0.1f, 0.01f);
  f.each([&](size_t i, double lm, double dm) {
    EXPECT_NEAR(f.w[i], w0[i] - lr * lm * (f.g[i] + wd * dm * w0[i]), kTol) << i;
  });
  const auto param = f.is_param();
  for (size_t i = 0; i < f.w.size(); ++i) {
    if (!param[i]) {
      EXPECT_EQ(f.w[i], w0[i]) << "padding changed at " << i;
    }
  }
}

TEST(SpanOps, MomentumMatchesReference) {
  Fixture f;
  const auto w0 = f.w, v0 = f.v;
  const double lr = 0.05, mu = 0.9, wd = 0.005;
  momentum_step(f.segs(), f.w.data(), f.g.data(), f.v.data(), 0.05f, 0.9f, 0.005f);
  f.each([&](size_t i, double lm, double dm) {
    const double vn = mu * v0[i] - lr * lm * (f.g[i] + wd * dm * w0[i]);
    EXPECT_NEAR(f.v[i], vn, kTol);
    EXPECT_NEAR(f.w[i], w0[i] + vn, kTol);
  });
}

TEST(SpanOps, NesterovMatchesReference) {
  Fixture f;
  const auto w0 = f.w, v0 = f.v;
  const double lr = 0.05, mu = 0.9, wd = 0.005;
  nesterov_step(f.segs(), f.w.data(), f.g.data(), f.v.data(), 0.05f, 0.9f, 0.005f);
  f.each([&](size_t i, double lm, double dm) {
    const double vn = mu * v0[i] - lr * lm * (f.g[i] + wd * dm * w0[i]);
    EXPECT_NEAR(f.v[i], vn, kTol);
    EXPECT_NEAR(f.w[i], w0[i] + (1 + mu) * vn - mu * v0[i], kTol);
  });
}

TEST(SpanOps, ElasticSgdMatchesReference) {
  Fixture f;
  const auto w0 = f.w;
  const double lr = 0.1, wd = 0.01, alpha = 0.3;
  elastic_sgd_step(f.segs(), f.w.data(), f.g.data(), f.c.data(), 0.1f, 0.01f, 0.3f);
  f.each([&](size_t i, double lm, double dm) {
    const double ref = w0[i] - lr * lm * (f.g[i] + wd * dm * w0[i]) - alpha * (w0[i] - f.c[i]);
    EXPECT_NEAR(f.w[i], ref, kTol) << i;
  });
}

TEST(SpanOps, ElasticWithZeroAlphaIsBitwiseSgd) {
  Fixture a, b;
  for (int step = 0; step < 5; ++step) {
    sgd_step(a.segs(), a.w.data(), a.g.data(), 0.1f, 0.01f);
    elastic_sgd_step(b.segs(), b.w.data(), b.g.data(), b.c.data(), 0.1f, 0.01f, 0.f);
  }
  EXPECT_EQ(std::memcmp(a.w.data(), b.w.data(), a.w.size() * sizeof(float)), 0);

  for (bool nesterov : {false, true}) {
    Fixture m, e;
    for (int step = 0; step < 5; ++step) {
      if (nesterov) {
        nesterov_step(m.segs(), m.w.data(), m.g.data(), m.v.data(), 0.1f, 0.9f, 0.01f);
      } else {
        momentum_step(m.segs(), m.w.data(), m.g.data(), m.v.data(), 0.1f, 0.9f, 0.01f);
      }
      elastic_momentum_step(e.segs(), e.w.data(), e.g.data(), e.v.data(), e.c.data(), 0.1f, 0.9f,
                            0.01f, 0.f, nesterov);
    }
    EXPECT_EQ(std::memcmp(m.w.data(), e.w.data(), m.w.size() * sizeof(float)), 0) << nesterov;
    EXPECT_EQ(std::memcmp(m.v.data(), e.v.data(), m.v.size() * sizeof(float)), 0) << nesterov;
  }

  // A pull with alpha 0 leaves w exactly as it was.
  Fixture p;
  const auto w0 = p.w;
  elastic_pull(p.w.data(), p.c.data(), 0.f, static_cast<int64_t>(p.w.size()));
  EXPECT_EQ(std::memcmp(p.w.data(), w0.data(), w0.size() * sizeof(float)), 0);
}

TEST(SpanOps, ElasticMomentumMatchesReference) {
  for (bool nesterov : {false, true}) {
    Fixture f;
    const auto w0 = f.w, v0 = f.v;
    const double lr = 0.05, d = 0.9, wd = 0.005, alpha = 0.2;
    elastic_momentum_step(f.segs(), f.w.data(), f.g.data(), f.v.data(), f.c.data(), 0.05f, 0.9f,
                          0.005f, 0.2f, nesterov);
    f.each([&](size_t i, double lm, double dm) {
      const double vn = d * v0[i] - lr * lm * (f.g[i] + wd * dm * w0[i]);
      const double step = nesterov ? (1 + d) * vn - d * v0[i] : vn;
      EXPECT_NEAR(f.v[i], vn, kTol);
      EXPECT_NEAR(f.w[i], w0[i] + step - alpha * (w0[i] - f.c[i]), kTol) << i << nesterov;
    });
  }
}

TEST(SpanOps, ElasticPullAndCentre) {
  Fixture f;
  const int64_t n = static_cast<int64_t>(f.w.size());
  const auto w0 = f.w, c0 = f.c;
  elastic_pull(f.w.data(), f.c.data(), 0.25f, n);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(f.w[i], w0[i] - 0.25 * (w0[i] - c0[i]), kTol);
  f.w = w0;
  elastic_centre(f.c.data(), f.w.data(), 0.25f, n);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(f.c[i], c0[i] + 0.25 * (w0[i] - c0[i]), kTol);
  f.c = c0;
  std::vector<float> sum(f.w.size());
  for (size_t i = 0; i < sum.size(); ++i)
    sum[i] = 3.f * f.w[i] + 0.5f;
  elastic_centre_sum(f.c.data(), sum.data(), 0.1f, 4, n);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(f.c[i], c0[i] + 0.1 * (sum[i] - 4.0 * c0[i]), kTol);
  // Into another buffer: the same bits as in place; the old centre is left alone.
  std::vector<float> c_new(f.c.size(), -1.f);
  elastic_centre_from(c_new.data(), c0.data(), sum.data(), 0.1f, 4, n);
  EXPECT_EQ(c_new, f.c);
  EXPECT_NE(c0, f.c);
  elastic_centre_from(c_new.data(), c0.data(), sum.data(), 0.f, 4, n);  // alpha 0: a copy
  EXPECT_EQ(c_new, c0);
}

// The streamed elastic steps (the partitioned sync-easgd exchange's) give the plain kernels'
// bits, whichever part of w is kept in the cache, and leave the padding between segments alone.
TEST(SpanOps, StreamedElasticStepsEqualPlainOnesBitForBit) {
  ArenaLayout layout;
  for (auto [count, lr_mult] : {std::pair{1000, 1.f}, {3, 2.f}, {777, 1.f}, {4100, 0.5f}}) {
    Segment s;
    s.name = "s" + std::to_string(count);
    s.dims = {count};
    s.lr_mult = lr_mult;
    s.decay_mult = lr_mult == 2.f ? 0.f : 1.f;
    layout.add(s);
  }
  const int64_t n = layout.total_floats();
  Rng rng(7);
  std::vector<float> w0(n), g(n), v0(n), c(n);
  for (int64_t i = 0; i < n; ++i) {
    w0[i] = rng.uniform(-1.f, 1.f);
    g[i] = rng.uniform(-1.f, 1.f);
    v0[i] = rng.uniform(-0.1f, 0.1f);
    c[i] = rng.uniform(-1.f, 1.f);
  }
  const std::vector<std::pair<int64_t, int64_t>> keeps = {
      {0, 0}, {0, n}, {1024, 3000}, {5, n / 2 + 3}, {n / 2, n}};
  for (auto [lo, hi] : keeps) {
    std::vector<float> wp = w0, ws = w0;
    elastic_sgd_step(layout.segments(), wp.data(), g.data(), c.data(), 0.1f, 0.01f, 0.3f);
    elastic_sgd_step_streamed(layout.segments(), ws.data(), ws.data(), g.data(), c.data(), 0.1f,
                              0.01f, 0.3f, lo, hi);
    EXPECT_EQ(ws, wp) << "sgd, keep [" << lo << ", " << hi << ")";
    std::vector<float> wo(n, 0.f);  // into another arena; w itself untouched
    elastic_sgd_step_streamed(layout.segments(), w0.data(), wo.data(), g.data(), c.data(), 0.1f,
                              0.01f, 0.3f, lo, hi);
    for (const Segment& sg : layout.segments())
      for (int64_t i = sg.offset; i < sg.offset + sg.count; ++i)
        ASSERT_EQ(wo[i], wp[i]) << "sgd into another arena, element " << i;
    for (bool nesterov : {false, true}) {
      std::vector<float> vp = v0, vs = v0;
      wp = w0;
      ws = w0;
      elastic_momentum_step(layout.segments(), wp.data(), g.data(), vp.data(), c.data(), 0.1f, 0.9f,
                            0.01f, 0.3f, nesterov);
      elastic_momentum_step_streamed(layout.segments(), ws.data(), ws.data(), g.data(), vs.data(),
                                     c.data(), 0.1f, 0.9f, 0.01f, 0.3f, nesterov, lo, hi);
      EXPECT_EQ(ws, wp) << "nesterov " << nesterov << ", keep [" << lo << ", " << hi << ")";
      EXPECT_EQ(vs, vp) << "nesterov " << nesterov;
      std::vector<float> wo(n, 0.f), vo = v0;
      elastic_momentum_step_streamed(layout.segments(), w0.data(), wo.data(), g.data(), vo.data(),
                                     c.data(), 0.1f, 0.9f, 0.01f, 0.3f, nesterov, lo, hi);
      for (const Segment& sg : layout.segments())
        for (int64_t i = sg.offset; i < sg.offset + sg.count; ++i)
          ASSERT_EQ(wo[i], wp[i]) << "into another arena, element " << i;
      EXPECT_EQ(vo, vp);
    }
  }
  std::vector<float> w = w0;
  elastic_sgd_step_streamed(layout.segments(), w.data(), w.data(), g.data(), c.data(), 0.1f, 0.01f,
                            0.3f, 0, 0);
  int64_t changed = 0;
  for (int64_t i = 0; i < n; ++i)
    changed += w[i] != w0[i];
  EXPECT_GT(changed, 5000);
}

TEST(SpanOps, StreamStoreCopiesAnyAlignmentAndLength) {
  std::vector<float> src(300), dst(320);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<float>(i) + 0.5f;
  for (int off : {0, 1, 3, 15, 16}) {
    for (int len : {0, 1, 7, 16, 33, 255, 300 - 16}) {
      std::fill(dst.begin(), dst.end(), -1.f);
      stream_store(dst.data() + off, src.data(), len);
      stream_fence();
      for (int i = 0; i < 320; ++i) {
        const float want = i >= off && i < off + len ? src[static_cast<size_t>(i - off)] : -1.f;
        ASSERT_EQ(dst[static_cast<size_t>(i)], want) << "off " << off << " len " << len;
      }
    }
  }
}

TEST(SpanOps, RacyOpsMatchPlainOnesSingleThreaded) {
  Fixture f;
  const int64_t n = static_cast<int64_t>(f.w.size());
  std::vector<float> shared = f.c, plain = f.c;
  racy_axpy(shared.data(), -0.5f, f.g.data(), n);
  span_axpy(plain.data(), -0.5f, f.g.data(), n);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_FLOAT_EQ(shared[i], plain[i]);
  racy_elastic_centre(shared.data(), f.w.data(), 0.3f, n);
  elastic_centre(plain.data(), f.w.data(), 0.3f, n);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_FLOAT_EQ(shared[i], plain[i]);
  std::vector<float> out(f.w.size());
  racy_copy_from(out.data(), shared.data(), n);
  EXPECT_EQ(std::memcmp(out.data(), shared.data(), out.size() * sizeof(float)), 0);
}

// Four threads write and read the same elements at once; every value any of them reads must be
// one that some thread wrote whole.
TEST(SpanOps, RacyOpsNeverTearValues) {
  const int64_t n = 4096;
  std::vector<float> shared(n, 1.f);
  // Every writer t pulls the shared value to its own constant target with alpha = 1, so each
  // element only ever holds 1.0 or one of the targets 2, 3, 4, 5.
  std::vector<std::vector<float>> targets(4, std::vector<float>(n));
  for (int t = 0; t < 4; ++t)
    std::fill(targets[t].begin(), targets[t].end(), 2.f + t);
  std::atomic<bool> go{false}, bad{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load())
        std::this_thread::yield();
      std::vector<float> seen(n);
      for (int rep = 0; rep < 200; ++rep) {
        racy_elastic_centre(shared.data(), targets[t].data(), 1.f, n);
        racy_copy_from(seen.data(), shared.data(), n);
        for (float x : seen) {
          if (!(x == 1.f || x == 2.f || x == 3.f || x == 4.f || x == 5.f)) bad = true;
        }
      }
    });
  }
  go = true;
  for (auto& th : threads)
    th.join();
  EXPECT_FALSE(bad.load());

  // Concurrent racy_axpy with zero increments never invents a value either.
  std::vector<float> zeros(n, 0.f);
  std::fill(shared.begin(), shared.end(), 7.f);
  threads.clear();
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep)
        racy_axpy(shared.data(), 1.f, zeros.data(), n);
    });
  }
  for (auto& th : threads)
    th.join();
  for (float x : shared)
    ASSERT_EQ(x, 7.f);
}

}  // namespace
}  // namespace easel
