// The oneDNN ops against the reference kernels: the same random src, parameters and diff_dst
// through both, forward dst and every backward gradient compared, for each op kind, both
// layouts and the shapes of LeNet, CIFAR and AlexNet; the kernels LeNet runs are not `ref`;
// two ops driven from two threads give what they give one after the other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "devices/cpu/dnnl_ops.hpp"
#include "devices/cpu/ref_ops.hpp"
#include "easel_config.h"
#include "tests/support/grad_check.hpp"
#include "tests/support/op_descs.hpp"

namespace easel {
namespace {

#if EASEL_HAVE_DNNL

using test::const_ptrs;
using test::conv;
using test::ip;
using test::lrn;
using test::mut_ptrs;
using test::pool;
using test::random_params;
using test::random_vector;

constexpr Layout kLayouts[] = {Layout::nchw, Layout::nhwc};

OpDesc with_layout(OpDesc d, Layout l) {
  d.layout = l;
  return d;
}

// Relative tolerance 1e-4 with an absolute floor scaled to the tensor's magnitude (different
// summation orders of a few thousand terms).
::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want,
                                 const std::string& what) {
  return test::near_scaled(got, want, 1e-4f, 1e-5f, what);
}

// Everything one forward + backward of an op produces.
struct OpRun {
  std::vector<float> dst, diff_src;
  std::vector<std::vector<float>> diff_weights;
};

// One forward and backward of `op` on inputs seeded by `seed` (identical for every op of the
// same descriptor).
OpRun run_op(Op& op, uint64_t seed, bool want_diff_src = true) {
  const OpDesc& d = op.desc();
  const Shape4 o = dst_shape(d);
  const std::vector<float> src = random_vector(d.src.count(), seed);
  const std::vector<float> diff_dst = random_vector(o.count(), seed + 1);
  const auto params = random_params(d, seed + 2);
  auto diff_params = params;  // same shapes; overwritten by backward
  for (auto& v : diff_params)
    std::fill(v.begin(), v.end(), 123.f);
  OpRun r;
  r.dst.assign(static_cast<size_t>(o.count()), -7.f);
  r.diff_src.assign(static_cast<size_t>(d.src.count()), -7.f);
  const auto w = const_ptrs(params);
  op.forward(src.data(), r.dst.data(), w, /*training=*/true);
  const auto dw = mut_ptrs(diff_params);
  op.backward(src.data(), r.dst.data(), diff_dst.data(),
              want_diff_src ? r.diff_src.data() : nullptr, w, dw);
  r.diff_weights = std::move(diff_params);
  return r;
}

std::unique_ptr<Op> must(Result<std::unique_ptr<Op>> r, const OpDesc& d) {
  EXPECT_TRUE(r.ok()) << describe_op(d) << ": " << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

// dnnl against ref for `d` in both layouts.
void expect_matches_ref(const OpDesc& base, bool want_diff_src = true,
                        DnnlConvBwdData strategy = DnnlConvBwdData::automatic) {
  for (Layout l : kLayouts) {
    const OpDesc d = with_layout(base, l);
    SCOPED_TRACE(describe_op(d));
    auto fast = must(make_dnnl_op(d, strategy), d);
    auto ref = must(make_ref_op(d), d);
    if (!fast || !ref) continue;
    SCOPED_TRACE(fast->impl());
    const OpRun a = run_op(*fast, 42, want_diff_src);
    const OpRun b = run_op(*ref, 42, want_diff_src);
    EXPECT_TRUE(close(a.dst, b.dst, "dst"));
    if (want_diff_src) {
      EXPECT_TRUE(close(a.diff_src, b.diff_src, "diff_src"));
    }
    ASSERT_EQ(a.diff_weights.size(), b.diff_weights.size());
    for (size_t i = 0; i < a.diff_weights.size(); ++i)
      EXPECT_TRUE(
          close(a.diff_weights[i], b.diff_weights[i], "diff_weights[" + std::to_string(i) + "]"));
  }
}

TEST(DnnlOps, Available) {
  EXPECT_TRUE(dnnl_available());
}

TEST(DnnlConv, LeNet) {
  expect_matches_ref(conv({8, 1, 28, 28}, 20, 5));
  expect_matches_ref(conv({8, 20, 12, 12}, 50, 5));
}

TEST(DnnlConv, CifarPaddedAndFusedRelu) {
  expect_matches_ref(conv({4, 3, 32, 32}, 32, 5, 1, 2));
  expect_matches_ref(conv({4, 32, 16, 16}, 32, 5, 1, 2, 1, /*fused_relu=*/true));
}

TEST(DnnlConv, Groups) {
  expect_matches_ref(conv({2, 8, 13, 13}, 12, 3, 1, 1, /*group=*/2));
  expect_matches_ref(conv({2, 48, 27, 27}, 64, 5, 1, 2, /*group=*/2, /*fused_relu=*/true));
}

TEST(DnnlConv, AlexNetStride4) {
  expect_matches_ref(conv({2, 3, 59, 59}, 16, 11, 4));
}

TEST(DnnlConv, StridedNoBiasAndRectangular) {
  expect_matches_ref(conv({2, 6, 9, 9}, 8, 3, 2, 1, 1, false, /*bias=*/false));
  OpDesc d = conv({2, 4, 7, 9}, 5, 3);
  d.kw = 2;
  d.stride_w = 2;
  d.pad_h = 1;
  expect_matches_ref(d);
}

TEST(DnnlConv, FirstLayerSkipsDiffSrc) {
  expect_matches_ref(conv({4, 1, 28, 28}, 20, 5), /*want_diff_src=*/false);
}

// Every data-gradient strategy, forced, on the shapes it applies to.
TEST(DnnlConv, BackwardDataStrategies) {
  const std::vector<OpDesc> shapes = {
      conv({4, 20, 12, 12}, 50, 5), conv({2, 32, 16, 16}, 32, 5, 1, 2, 1, true),
      conv({2, 8, 13, 13}, 12, 3, 1, 1, 2), conv({2, 3, 59, 59}, 16, 11, 4),
      conv({2, 6, 9, 9}, 8, 3, 2, 1, 1, false, false)};
  for (DnnlConvBwdData s :
       {DnnlConvBwdData::native, DnnlConvBwdData::forward_flip, DnnlConvBwdData::blocked}) {
    for (const OpDesc& d : shapes) {
      SCOPED_TRACE("strategy " + std::to_string(static_cast<int>(s)));
      if (s == DnnlConvBwdData::forward_flip && d.stride_h != 1) {
        auto r = make_dnnl_op(d, s);
        ASSERT_FALSE(r.ok());
        EXPECT_EQ(r.status().code(), Code::unavailable);
        EXPECT_NE(r.status().message().find("stride"), std::string::npos) << r.status().message();
        continue;
      }
      expect_matches_ref(d, true, s);
    }
  }
}

// The gemm data gradient (matmul + col2im): nhwc and one group only, any stride and padding.
TEST(DnnlConv, GemmBackwardData) {
  const OpDesc shapes[] = {
      conv({4, 20, 12, 12}, 50, 5),     conv({2, 32, 16, 16}, 32, 5, 1, 2, 1, true),
      conv({2, 3, 59, 59}, 16, 11, 4),  conv({2, 6, 9, 9}, 8, 3, 2, 1, 1, false, false),
      conv({3, 17, 7, 7}, 33, 3, 1, 1), conv({64, 20, 12, 12}, 50, 5)};
  for (const OpDesc& base : shapes) {
    const OpDesc d = with_layout(base, Layout::nhwc);
    SCOPED_TRACE(describe_op(d));
    auto fast = must(make_dnnl_op(d, DnnlConvBwdData::gemm), d);
    auto ref = must(make_ref_op(d), d);
    ASSERT_TRUE(fast && ref);
    EXPECT_NE(fast->impl().find("bwd_d=gemm"), std::string::npos) << fast->impl();
    const OpRun a = run_op(*fast, 42), b = run_op(*ref, 42);
    EXPECT_TRUE(close(a.dst, b.dst, "dst"));
    EXPECT_TRUE(close(a.diff_src, b.diff_src, "diff_src"));
    for (size_t i = 0; i < a.diff_weights.size(); ++i)
      EXPECT_TRUE(close(a.diff_weights[i], b.diff_weights[i], "diff_weights"));
  }
  for (const OpDesc& d : {with_layout(conv({2, 8, 13, 13}, 12, 3, 1, 1, 2), Layout::nhwc),
                          with_layout(conv({4, 20, 12, 12}, 50, 5), Layout::nchw)}) {
    auto r = make_dnnl_op(d, DnnlConvBwdData::gemm);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::unavailable);
    EXPECT_NE(r.status().message().find("gemm"), std::string::npos) << r.status().message();
  }
}

// bf16 compute (f32 in and out): against the fp32 reference within bf16's rounding (8 bits of
// mantissa on the inputs, f32 accumulation): |error| <= 3e-2 * max|want|. (A fused ReLU on a
// convolution with thousands of terms flips the mask of outputs near 0, beyond any elementwise
// bound; the inner product's fused ReLU stays within it.)
TEST(DnnlBf16, MatchesRefWithinBf16Rounding) {
  if (!dnnl_bf16_available()) GTEST_SKIP() << "no native bf16 on this CPU";
  DnnlOptions opts;
  opts.precision = Precision::bf16;
  const OpDesc shapes[] = {conv({4, 1, 28, 28}, 20, 5), conv({4, 20, 12, 12}, 50, 5),
                           conv({2, 32, 16, 16}, 32, 5, 1, 2),
                           ip({4, 50, 4, 4}, 500, /*fused_relu=*/true), ip({4, 500, 1, 1}, 10)};
  auto loose = [](const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
    return test::near_scaled(got, want, 0.f, 3e-2f, what);
  };
  for (const OpDesc& base : shapes)
    for (Layout l : kLayouts) {
      const OpDesc d = with_layout(base, l);
      SCOPED_TRACE(describe_op(d));
      auto fast = must(make_dnnl_op(d, opts), d);
      auto ref = must(make_ref_op(d), d);
      ASSERT_TRUE(fast && ref);
      EXPECT_EQ(fast->impl().rfind("dnnl-bf16:", 0), 0u) << fast->impl();
      EXPECT_EQ(fast->impl().find("ref"), std::string::npos) << fast->impl();
      const OpRun a = run_op(*fast, 42), b = run_op(*ref, 42);
      EXPECT_TRUE(loose(a.dst, b.dst, "dst"));
      EXPECT_TRUE(loose(a.diff_src, b.diff_src, "diff_src"));
      for (size_t i = 0; i < a.diff_weights.size(); ++i)
        EXPECT_TRUE(loose(a.diff_weights[i], b.diff_weights[i], "diff_weights"));
    }
}

// Ops without a bf16 kernel (pooling) and a bf16 request on a CPU without bf16 still build.
TEST(DnnlBf16, OtherOpsUnaffected) {
  DnnlOptions opts;
  opts.precision = Precision::bf16;
  const OpDesc d = with_layout(pool(OpKind::max_pool, {2, 20, 24, 24}, 2, 2), Layout::nhwc);
  auto op = must(make_dnnl_op(d, opts), d);
  ASSERT_TRUE(op);
  EXPECT_EQ(op->impl().find("bf16"), std::string::npos);
  EXPECT_TRUE(parse_precision("bf16").ok());
  EXPECT_TRUE(parse_precision("fp32").ok());
  EXPECT_FALSE(parse_precision("fp16").ok());
}

TEST(DnnlInnerProduct, LeNet) {
  expect_matches_ref(ip({8, 50, 4, 4}, 500, /*fused_relu=*/true));
  expect_matches_ref(ip({8, 500, 1, 1}, 10));
}

TEST(DnnlInnerProduct, NoBias) {
  expect_matches_ref(ip({4, 3, 5, 5}, 7, false, false));
}

TEST(DnnlPool, MaxLeNet) {
  expect_matches_ref(pool(OpKind::max_pool, {8, 20, 24, 24}, 2, 2));
  expect_matches_ref(pool(OpKind::max_pool, {8, 50, 8, 8}, 2, 2));
}

// Windows tiling the input (stride == kernel) take the one-pass nhwc backward; channel counts
// around the vector width exercise the masked tail.
TEST(DnnlPool, MaxTiledBackward) {
  for (const OpDesc& d :
       {pool(OpKind::max_pool, {2, 16, 8, 8}, 2, 2), pool(OpKind::max_pool, {2, 33, 12, 12}, 3, 3),
        pool(OpKind::max_pool, {2, 5, 6, 6}, 2, 2)}) {
    auto op = must(make_dnnl_op(with_layout(d, Layout::nhwc)), d);
    ASSERT_TRUE(op);
    EXPECT_NE(op->impl().find("tiled"), std::string::npos) << op->impl();
    expect_matches_ref(d);
  }
}

TEST(DnnlPool, CeilModeCifar) {
  // 32 -> 16 with k3 s2: the last window hangs one past the input.
  for (OpKind k : {OpKind::max_pool, OpKind::avg_pool}) {
    const OpDesc d = pool(k, {4, 32, 32, 32}, 3, 2);
    ASSERT_EQ(dst_shape(d).h, 16);
    expect_matches_ref(d);
  }
}

TEST(DnnlPool, Padded) {
  expect_matches_ref(pool(OpKind::max_pool, {2, 4, 10, 10}, 3, 2, 1));  // extra padding 2 > 1
  expect_matches_ref(pool(OpKind::max_pool, {2, 4, 9, 9}, 3, 2, 1));
  expect_matches_ref(pool(OpKind::avg_pool, {2, 4, 9, 9}, 3, 2, 1));  // extra padding 1 = pad
  expect_matches_ref(pool(OpKind::avg_pool, {2, 4, 11, 11}, 2, 2, 1));
  expect_matches_ref(pool(OpKind::avg_pool, {2, 8, 6, 6}, 6, 1));  // global
}

// Ties: both send the gradient to the first maximum of the window in row-major order.
TEST(DnnlPool, MaxTiesGoToFirstMaximum) {
  for (Layout l : kLayouts) {
    for (const OpDesc& base : {pool(OpKind::max_pool, {2, 20, 24, 24}, 2, 2),
                               pool(OpKind::max_pool, {2, 5, 10, 10}, 3, 2, 1)}) {
      const OpDesc d = with_layout(base, l);
      SCOPED_TRACE(describe_op(d));
      auto fast = must(make_dnnl_op(d), d);
      auto ref = must(make_ref_op(d), d);
      ASSERT_TRUE(fast && ref);
      std::vector<float> src = random_vector(d.src.count(), 5);
      for (float& v : src)
        v = std::round(v);  // -1, 0, 1: many ties
      const std::vector<float> diff_dst = random_vector(dst_shape(d).count(), 6);
      std::vector<float> dst_a(diff_dst.size()), dst_b(diff_dst.size());
      std::vector<float> ds_a(src.size(), 9.f), ds_b(src.size(), -9.f);
      fast->forward(src.data(), dst_a.data(), {}, true);
      ref->forward(src.data(), dst_b.data(), {}, true);
      fast->backward(src.data(), dst_a.data(), diff_dst.data(), ds_a.data(), {}, {});
      ref->backward(src.data(), dst_b.data(), diff_dst.data(), ds_b.data(), {}, {});
      EXPECT_EQ(dst_a, dst_b);
      EXPECT_EQ(ds_a, ds_b);
    }
  }
}

TEST(DnnlPool, AvgRefusesWindowPastPaddedInput) {
  // out = 6, the last window spans [9, 12) but Caffe clips its divisor at in + pad = 11.
  for (Layout l : kLayouts) {
    const OpDesc d = with_layout(pool(OpKind::avg_pool, {2, 4, 10, 10}, 3, 2, 1), l);
    auto r = make_dnnl_op(d);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::unavailable);
    EXPECT_NE(r.status().message().find("avg_pool"), std::string::npos);
  }
}

TEST(DnnlRelu, MatchesRef) {
  expect_matches_ref(OpDesc{.src = {4, 20, 7, 7}});
}

TEST(DnnlRelu, InPlace) {
  OpDesc d{.src = {2, 3, 5, 5}};
  auto op = must(make_dnnl_op(d), d);
  ASSERT_TRUE(op);
  std::vector<float> x = random_vector(d.src.count(), 3), want = x;
  for (float& v : want)
    v = std::max(v, 0.f);
  op->forward(x.data(), x.data(), {}, true);
  EXPECT_EQ(x, want);
  std::vector<float> g = random_vector(d.src.count(), 4), gwant = g;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(x[i] > 0.f)) gwant[i] = 0.f;
  op->backward(x.data(), x.data(), g.data(), g.data(), {}, {});
  EXPECT_EQ(g, gwant);
}

TEST(DnnlLrn, AcrossChannels) {
  expect_matches_ref(lrn({2, 16, 7, 7}, 5, 0.5f, 0.75f, 1.f));
  expect_matches_ref(lrn({2, 32, 8, 8}, 3, 0.3f, 0.75f, 2.f));
  expect_matches_ref(lrn({2, 96, 13, 13}, 5, 1e-4f, 0.75f, 1.f));  // AlexNet's
}

TEST(DnnlOps, RefusesDropout) {
  OpDesc d{.kind = OpKind::dropout, .src = {2, 3, 4, 4}};
  auto r = make_dnnl_op(d);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::unavailable);
  EXPECT_FALSE(r.status().message().empty());
}

TEST(DnnlOps, GradientCheck) {
  for (const OpDesc& base : {conv({2, 3, 6, 6}, 4, 3, 1, 1, 1, true), ip({2, 4, 3, 3}, 5, true),
                             lrn({2, 6, 3, 3}, 3, 0.5f, 0.75f, 1.f)}) {
    for (Layout l : kLayouts) {
      const OpDesc d = with_layout(base, l);
      auto op = must(make_dnnl_op(d), d);
      ASSERT_TRUE(op);
      EXPECT_TRUE(test::check_gradients(*op)) << describe_op(d);
    }
  }
}

// LeNet's layers at batch 64.
std::vector<OpDesc> lenet(Layout l) {
  return {with_layout(conv({64, 1, 28, 28}, 20, 5), l),
          with_layout(pool(OpKind::max_pool, {64, 20, 24, 24}, 2, 2), l),
          with_layout(conv({64, 20, 12, 12}, 50, 5), l),
          with_layout(pool(OpKind::max_pool, {64, 50, 8, 8}, 2, 2), l),
          with_layout(ip({64, 50, 4, 4}, 500, true), l),
          with_layout(ip({64, 500, 1, 1}, 10), l)};
}

TEST(DnnlOps, LeNetRunsNoReferenceKernel) {
  for (Layout l : kLayouts) {
    for (const OpDesc& d : lenet(l)) {
      auto op = must(make_dnnl_op(d), d);
      ASSERT_TRUE(op);
      const std::string impl = op->impl();
      std::printf("  %-36s %s\n", describe_op(d).c_str(), impl.c_str());
      EXPECT_EQ(impl.rfind("dnnl:", 0), 0u) << impl;
      EXPECT_EQ(impl.find("ref"), std::string::npos) << describe_op(d) << ": " << impl;
    }
  }
}

TEST(DnnlOps, TwoThreadsMatchSequential) {
  const OpDesc a = with_layout(conv({8, 20, 12, 12}, 50, 5, 1, 0, 1, true), Layout::nhwc);
  const OpDesc b = with_layout(ip({8, 50, 4, 4}, 500, true), Layout::nchw);
  auto op_a = must(make_dnnl_op(a), a);
  auto op_b = must(make_dnnl_op(b), b);
  ASSERT_TRUE(op_a && op_b);
  const OpRun seq_a = run_op(*op_a, 7), seq_b = run_op(*op_b, 8);
  constexpr int kRepeats = 5;
  std::vector<OpRun> par_a(kRepeats), par_b(kRepeats);
  // Created on this thread, run on two others at once.
  std::thread ta([&] {
    for (OpRun& r : par_a)
      r = run_op(*op_a, 7);
  });
  std::thread tb([&] {
    for (OpRun& r : par_b)
      r = run_op(*op_b, 8);
  });
  ta.join();
  tb.join();
  for (int i = 0; i < kRepeats; ++i) {
    EXPECT_EQ(par_a[i].dst, seq_a.dst);
    EXPECT_EQ(par_a[i].diff_src, seq_a.diff_src);
    EXPECT_EQ(par_a[i].diff_weights, seq_a.diff_weights);
    EXPECT_EQ(par_b[i].dst, seq_b.dst);
    EXPECT_EQ(par_b[i].diff_src, seq_b.diff_src);
    EXPECT_EQ(par_b[i].diff_weights, seq_b.diff_weights);
  }
}

#else
TEST(DnnlOps, Skipped) {
  GTEST_SKIP() << "easel was built without oneDNN";
}
#endif

}  // namespace
}  // namespace easel
