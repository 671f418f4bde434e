// easel's own CPU kernels whose result is random, tested for their properties (the deterministic
// ones are compared with the reference in test_dnnl_ops.cpp). Dropout (own_dropout.cpp): the
// device's choice, the kept fraction and the scale, the same mask in both layouts and equal to
// the counter-based draw of logical element j, the gradient, new masks per training forward and
// the same mask for the same seed and call at any thread count, identity outside training.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "devices/cpu/cpu_op_list.hpp"
#include "devices/cpu/own_ops.hpp"
#include "devices/cpu/ref_ops.hpp"
#include "devices/dropout_hash.hpp"
#include "tests/support/grad_check.hpp"

namespace easel {
namespace {

using test::random_vector;
using test::relayout;

constexpr Layout kLayouts[] = {Layout::nchw, Layout::nhwc};

OpDesc dropout(Shape4 s, float ratio, uint64_t seed, Layout l = Layout::nchw) {
  OpDesc d;
  d.kind = OpKind::dropout;
  d.src = s;
  d.ratio = ratio;
  d.seed = seed;
  d.layout = l;
  return d;
}

std::unique_ptr<Op> make_own(const OpDesc& d) {
  auto op = make_own_dropout(d, DnnlOptions{});
  EXPECT_TRUE(op.ok()) << op.status().to_string();
  return op.ok() ? std::move(op).value() : nullptr;
}

// `calls` training forwards of a fresh op on src; the last dst.
std::vector<float> forwards(const OpDesc& d, const std::vector<float>& src, int calls = 1) {
  auto op = make_own(d);
  std::vector<float> dst(src.size());
  for (int i = 0; i < calls; ++i)
    op->forward(src.data(), dst.data(), {}, true);
  return dst;
}

// Whether each element was kept (src is never 0).
std::vector<bool> kept_of(const std::vector<float>& dst) {
  std::vector<bool> k(dst.size());
  for (size_t i = 0; i < dst.size(); ++i)
    k[i] = dst[i] != 0.f;
  return k;
}

TEST(OwnDropout, ChosenBeforeTheReference) {
  const OpDesc d = dropout({2, 3, 4, 4}, 0.5f, 1);
  auto fast = make_cpu_op(d, ImplChoice::fast, DnnlOptions{});
  ASSERT_TRUE(fast.ok()) << fast.status().to_string();
  EXPECT_EQ(fast.value()->impl(), "own:dropout");
  auto ref = make_cpu_op(d, ImplChoice::ref, DnnlOptions{});
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  EXPECT_EQ(ref.value()->impl(), "ref");
}

// (a) Over 131072 elements the dropped fraction is within 4 sigma of ratio, and every kept
// element is src / (1 - ratio).
TEST(OwnDropout, KeepsOneMinusRatioAndScales) {
  for (float ratio : {0.5f, 0.3f, 0.05f}) {
    for (Layout l : kLayouts) {
      const OpDesc d = dropout({8, 64, 16, 16}, ratio, 5, l);
      SCOPED_TRACE(describe_op(d) + " ratio " + std::to_string(ratio));
      const auto src = random_vector(d.src.count(), 11, 0.5f, 1.5f);
      const auto dst = forwards(d, src);
      int64_t dropped = 0, wrong = 0;
      for (size_t i = 0; i < src.size(); ++i) {
        if (dst[i] == 0.f)
          ++dropped;
        else
          wrong += std::fabs(dst[i] - src[i] / (1.f - ratio)) > 1e-6f * dst[i];
      }
      EXPECT_EQ(wrong, 0);
      const double n = static_cast<double>(src.size());
      EXPECT_NEAR(dropped / n, ratio, 4 * std::sqrt(ratio * (1 - ratio) / n));
    }
  }
  // ratio 0 keeps everything, unscaled
  const OpDesc d = dropout({2, 8, 4, 4}, 0.f, 5);
  const auto src = random_vector(d.src.count(), 11);
  EXPECT_EQ(forwards(d, src), src);
}

// (b) Both layouts drop the same logical elements, for h*w > 1 (where nhwc's memory order is not
// the logical one) and h = w = 1, first and later calls; and logical element j is kept exactly
// when the shared draw keeps j (the CUDA kernel's draw of memory index j: the same mask in nchw
// and where h = w = 1).
TEST(OwnDropout, SameMaskInBothLayoutsAndTheSharedDraw) {
  for (Shape4 s : {Shape4{3, 5, 4, 7}, Shape4{4, 33, 1, 1}, Shape4{2, 1, 3, 5}}) {
    const OpDesc a = dropout(s, 0.4f, 9, Layout::nchw);
    const OpDesc b = dropout(s, 0.4f, 9, Layout::nhwc);
    SCOPED_TRACE(describe_op(a));
    const auto src = random_vector(s.count(), 1, 0.5f, 1.5f);
    const auto src_nhwc = relayout(src.data(), s, Layout::nchw, Layout::nhwc);
    for (int calls : {1, 3}) {
      const auto da = forwards(a, src, calls);
      const auto db = relayout(forwards(b, src_nhwc, calls).data(), s, Layout::nhwc, Layout::nchw);
      EXPECT_EQ(da, db) << calls << " call(s)";
      const uint64_t k = dropout_hash::key(9, static_cast<uint64_t>(calls - 1));
      const uint64_t t = dropout_hash::threshold(0.4f);
      int64_t differ = 0;
      for (size_t j = 0; j < da.size(); ++j)
        differ += (da[j] != 0.f) != dropout_hash::keep(k, j, t);
      EXPECT_EQ(differ, 0) << calls << " call(s)";
    }
  }
}

// The integer threshold is the float comparison u >= ratio, u = b * 2^-24, at and around it.
TEST(OwnDropout, ThresholdIsTheFloatComparison) {
  for (float ratio : {0.f, 0.2f, 0.3f, 0.5f, 0.7f, 0.999f, 0x1.fffffep-1f}) {
    const uint64_t t = dropout_hash::threshold(ratio);
    for (uint64_t b : {t - 1, t, t + 1}) {
      if (b >= (uint64_t{1} << 24)) continue;
      EXPECT_EQ(b >= t, static_cast<float>(b) * 0x1.0p-24f >= ratio) << ratio << " " << b;
    }
  }
}

// (c) The gradient: diff_dst * scale where kept, 0 where dropped, exactly; and against central
// differences with the mask fixed (a fresh op per forward: the same first call). After an
// inference forward, backward copies.
TEST(OwnDropout, Gradient) {
  for (float ratio : {0.5f, 0.2f}) {
    for (Layout l : kLayouts) {
      const OpDesc d = dropout({2, 3, 4, 4}, ratio, 42, l);
      SCOPED_TRACE(describe_op(d));
      auto op = make_own(d);
      const auto src = random_vector(d.src.count(), 1, 0.5f, 1.5f);
      const auto diff_dst = random_vector(d.src.count(), 2);
      std::vector<float> dst(src.size()), diff_src(src.size(), -7.f);
      op->forward(src.data(), dst.data(), {}, true);
      op->backward(src.data(), dst.data(), diff_dst.data(), diff_src.data(), {}, {});
      const float scale = 1.f / (1.f - ratio);
      for (size_t i = 0; i < src.size(); ++i)
        ASSERT_EQ(diff_src[i], dst[i] != 0.f ? diff_dst[i] * scale : 0.f) << i;

      EXPECT_TRUE(test::check_gradients([&] { return make_own(d); }));
      test::GradCheckOptions inference;
      inference.training = false;
      EXPECT_TRUE(test::check_gradients([&] { return make_own(d); }, inference));

      op->forward(src.data(), dst.data(), {}, false);
      EXPECT_EQ(dst, src);
      op->backward(src.data(), dst.data(), diff_dst.data(), diff_src.data(), {}, {});
      EXPECT_EQ(diff_src, diff_dst);
    }
  }
}

// (d) Every training forward draws a new mask (an inference forward between them draws none);
// the same seed and call give the same mask, with 1 and 2 threads; another seed another mask.
TEST(OwnDropout, NewMaskPerCallSameForSeedCallAndThreads) {
  for (Layout l : kLayouts) {
    const OpDesc d = dropout({16, 32, 8, 8}, 0.5f, 77, l);
    SCOPED_TRACE(describe_op(d));
    const auto src = random_vector(d.src.count(), 3, 0.5f, 1.5f);
    const size_t n = src.size();
    auto op = make_own(d);
    std::vector<float> first(n), second(n), id(n);
    op->forward(src.data(), first.data(), {}, true);
    op->forward(src.data(), id.data(), {}, false);
    op->forward(src.data(), second.data(), {}, true);
    const auto k1 = kept_of(first), k2 = kept_of(second);
    size_t changed = 0;
    for (size_t i = 0; i < n; ++i)
      changed += k1[i] != k2[i];
    EXPECT_NEAR(static_cast<double>(changed) / static_cast<double>(n), 0.5, 0.02);
    EXPECT_EQ(forwards(d, src, 1), first);
    EXPECT_EQ(forwards(d, src, 2), second);  // call 1, not counting the inference forward

    const auto diff_dst = random_vector(d.src.count(), 4);
    std::vector<std::vector<float>> dst_at, diff_at;
    const int before = omp_get_max_threads();
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      auto t = make_own(d);
      std::vector<float> dst(n), diff_src(n);
      t->forward(src.data(), dst.data(), {}, true);
      t->forward(src.data(), dst.data(), {}, true);
      t->backward(src.data(), dst.data(), diff_dst.data(), diff_src.data(), {}, {});
      dst_at.push_back(dst);
      diff_at.push_back(diff_src);
    }
    omp_set_num_threads(before);
    EXPECT_EQ(dst_at[0], second);
    EXPECT_EQ(dst_at[0], dst_at[1]);
    EXPECT_EQ(diff_at[0], diff_at[1]);

    OpDesc other = d;
    other.seed = 78;
    EXPECT_NE(kept_of(forwards(other, src)), k1);
  }
}

// set_draw(stream, n): the next training forward is draw n of the stream, as in a run that did
// n steps before (what a resumed group passes); stream 0 is the op's own seed; another stream
// (another group) another mask. The reference kernel follows the pair the same way.
TEST(OwnDropout, SetDrawPicksTheStreamAndTheCall) {
  const OpDesc d = dropout({8, 16, 4, 4}, 0.5f, 77, Layout::nhwc);
  const auto src = random_vector(d.src.count(), 5, 0.5f, 1.5f);
  const size_t n = src.size();
  auto draw = [&](const std::unique_ptr<Op>& op, uint64_t stream, uint64_t call) {
    std::vector<float> dst(n);
    op->set_draw(stream, call);
    op->forward(src.data(), dst.data(), {}, true);
    return dst;
  };
  auto op = make_own(d);
  EXPECT_EQ(draw(op, 0, 2), forwards(d, src, 3));  // stream 0, call 2: a fresh op's third
  const auto a = draw(op, 5, 3);
  EXPECT_EQ(draw(make_own(d), 5, 3), a);  // the pair alone decides
  EXPECT_NE(kept_of(draw(op, 6, 3)), kept_of(a));
  EXPECT_NE(kept_of(draw(op, 5, 4)), kept_of(a));
  std::vector<float> next(n);  // without set_draw the count goes on: call 5 of stream 5
  op->set_draw(5, 4);
  op->forward(src.data(), next.data(), {}, true);
  op->forward(src.data(), next.data(), {}, true);
  EXPECT_EQ(draw(make_own(d), 5, 5), next);

  auto ref = make_ref_dropout(d);
  ASSERT_TRUE(ref.ok());
  const auto r = draw(*ref, 5, 3);
  auto ref2 = make_ref_dropout(d);
  ASSERT_TRUE(ref2.ok());
  EXPECT_EQ(draw(*ref2, 5, 3), r);
  EXPECT_NE(kept_of(draw(*ref2, 6, 3)), kept_of(r));
}

}  // namespace
}  // namespace easel
