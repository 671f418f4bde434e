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

#include "devices/cpu/cpu_op_list.hpp"
#include "devices/cpu/dnnl_ops.hpp"
#include "devices/cpu/own_ops.hpp"
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
  std::vector<std::vector<float>> more_diff_src;  // of the inputs after the first
  std::vector<std::vector<float>> diff_weights;
  std::vector<std::vector<float>> weights;  // after forward: batch norm's running statistics
};

// One forward and backward of `op` (all its inputs) on inputs seeded by `seed` (identical for
// every op of the same descriptor). Batch norm's parameters are positive (its running variance
// must be).
OpRun run_op(Op& op, uint64_t seed, bool want_diff_src = true, bool training = true) {
  const OpDesc& d = op.desc();
  const Shape4 o = dst_shape(d);
  std::vector<std::vector<float>> srcs{random_vector(d.src.count(), seed)};
  for (size_t i = 0; i < d.more_src.size(); ++i)
    srcs.push_back(random_vector(d.more_src[i].count(), seed + 10 + i));
  const std::vector<float> diff_dst = random_vector(o.count(), seed + 1);
  const bool bn = d.kind == OpKind::batch_norm;
  auto params = random_params(d, seed + 2, bn ? 0.5f : -1.f, bn ? 1.5f : 1.f);
  auto diff_params = params;  // same shapes; overwritten by backward
  for (auto& v : diff_params)
    std::fill(v.begin(), v.end(), 123.f);
  OpRun r;
  r.dst.assign(static_cast<size_t>(o.count()), -7.f);
  std::vector<std::vector<float>> diff_srcs;
  for (const auto& x : srcs)
    diff_srcs.emplace_back(x.size(), -7.f);
  const auto w = const_ptrs(params);
  op.forward_n(const_ptrs(srcs), r.dst.data(), w, training);
  const auto dw = mut_ptrs(diff_params);
  std::vector<float*> ds = mut_ptrs(diff_srcs);
  if (!want_diff_src) ds[0] = nullptr;
  op.backward_n(const_ptrs(srcs), r.dst.data(), diff_dst.data(), ds, w, dw);
  r.diff_src = std::move(diff_srcs[0]);
  r.more_diff_src.assign(diff_srcs.begin() + 1, diff_srcs.end());
  r.diff_weights = std::move(diff_params);
  r.weights = std::move(params);
  return r;
}

std::unique_ptr<Op> must(Result<std::unique_ptr<Op>> r, const OpDesc& d) {
  EXPECT_TRUE(r.ok()) << describe_op(d) << ": " << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

// dnnl against ref for `d` in both layouts: dst, every diff_src, every diff_weights, and the
// parameters after forward (batch norm's running statistics).
void expect_matches_ref(const OpDesc& base, bool want_diff_src = true,
                        DnnlConvBwdData strategy = DnnlConvBwdData::automatic,
                        bool training = true) {
  for (Layout l : kLayouts) {
    const OpDesc d = with_layout(base, l);
    SCOPED_TRACE(describe_op(d) + (training ? " training" : " inference"));
    auto fast = must(make_dnnl_op(d, strategy), d);
    auto ref = must(make_ref_op(d), d);
    if (!fast || !ref) continue;
    SCOPED_TRACE(fast->impl());
    EXPECT_EQ(fast->impl().find("ref"), std::string::npos) << fast->impl();
    const OpRun a = run_op(*fast, 42, want_diff_src, training);
    const OpRun b = run_op(*ref, 42, want_diff_src, training);
    EXPECT_TRUE(close(a.dst, b.dst, "dst"));
    if (want_diff_src) {
      EXPECT_TRUE(close(a.diff_src, b.diff_src, "diff_src"));
    }
    ASSERT_EQ(a.more_diff_src.size(), b.more_diff_src.size());
    for (size_t i = 0; i < a.more_diff_src.size(); ++i)
      EXPECT_TRUE(
          close(a.more_diff_src[i], b.more_diff_src[i], "diff_src" + std::to_string(i + 1)));
    ASSERT_EQ(a.diff_weights.size(), b.diff_weights.size());
    for (size_t i = 0; i < a.diff_weights.size(); ++i) {
      EXPECT_TRUE(
          close(a.diff_weights[i], b.diff_weights[i], "diff_weights[" + std::to_string(i) + "]"));
      EXPECT_TRUE(close(a.weights[i], b.weights[i], "weights[" + std::to_string(i) + "]"));
    }
  }
}

OpDesc batch_norm(Shape4 src, bool fused_relu = false) {
  return OpDesc{.kind = OpKind::batch_norm, .src = src, .fused_relu = fused_relu};
}

OpDesc joined(OpKind kind, std::vector<Shape4> inputs) {
  OpDesc d{.kind = kind, .src = inputs.front()};
  d.more_src.assign(inputs.begin() + 1, inputs.end());
  return d;
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
      conv({3, 17, 7, 7}, 33, 3, 1, 1), conv({64, 20, 12, 12}, 50, 5),
      conv({2, 80, 6, 6}, 16, 3, 1, 1)};  // col2im's gather: a whole block of 64 and a tail
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

const OpDesc kAcrossLrns[] = {lrn({2, 16, 7, 7}, 5, 0.5f, 0.75f, 1.f),
                              lrn({2, 32, 8, 8}, 3, 0.3f, 0.75f, 2.f),
                              lrn({2, 96, 13, 13}, 5, 1e-4f, 0.75f, 1.f)};  // AlexNet's

// oneDNN 2.6 has a JIT kernel for LRN across channels on AVX-512 only; below it (AVX2) it would
// run lrn_ref, which is refused with the reason (and easel's own kernel runs: OwnLrn below).
TEST(DnnlLrn, AcrossChannels) {
  if (dnnl_avx512_available()) {
    for (const OpDesc& d : kAcrossLrns)
      expect_matches_ref(d);
    return;
  }
  for (const OpDesc& base : kAcrossLrns) {
    for (Layout l : kLayouts) {
      auto r = make_dnnl_op(with_layout(base, l));
      if (r.ok()) continue;  // a JIT kernel for this shape after all
      EXPECT_EQ(r.status().code(), Code::unavailable);
      EXPECT_NE(r.status().message().find("reference kernel"), std::string::npos)
          << r.status().message();
    }
  }
  GTEST_SKIP() << "oneDNN has no JIT kernel for LRN across channels below AVX-512";
}

// oneDNN 2.6's within-channel LRN backward (lrn_jit, avx512) missed the reference's gradient by
// up to 0.8% on cifar10_full's norm1 (4x32x16x16, size 3, alpha 5e-5), and for channel counts
// that are not a multiple of 16 only its reference kernel applies: the region is refused, and
// easel's reference kernel runs (cifar10-full's two small LRN layers).
TEST(DnnlLrn, WithinChannelIsRefusedWithTheReason) {
  for (const Shape4& s : {Shape4{4, 32, 16, 16}, Shape4{2, 17, 6, 6}}) {
    OpDesc d = lrn(s, 3, 5e-05f, 0.75f, 1.f);
    d.lrn_within_channel = true;
    for (Layout l : kLayouts) {
      auto r = make_dnnl_op(with_layout(d, l));
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), Code::unavailable);
      EXPECT_NE(r.status().message().find("within-channel"), std::string::npos)
          << r.status().message();
    }
  }
}

// easel's own across-channel kernel against the reference in both layouts, on every CPU (the
// device picks it where oneDNN has no JIT kernel); the device's pick is never a reference one.
TEST(OwnLrn, AcrossChannelsMatchesRef) {
  std::vector<OpDesc> cases(std::begin(kAcrossLrns), std::end(kAcrossLrns));
  cases.push_back(lrn({2, 3, 4, 5}, 7, 0.5f, 0.6f, 2.f));  // a window past the channels, pow
  for (const OpDesc& base : cases) {
    for (Layout l : kLayouts) {
      const OpDesc d = with_layout(base, l);
      SCOPED_TRACE(describe_op(d));
      auto own = must(make_own_lrn(d, DnnlOptions{}), d);
      auto ref = must(make_ref_op(d), d);
      if (!own || !ref) continue;
      EXPECT_EQ(own->impl(), "own:lrn_across");
      const OpRun a = run_op(*own, 42, true, true);
      const OpRun b = run_op(*ref, 42, true, true);
      EXPECT_TRUE(close(a.dst, b.dst, "dst"));
      EXPECT_TRUE(close(a.diff_src, b.diff_src, "diff_src"));
      auto picked = must(make_cpu_op(d, ImplChoice::fast, DnnlOptions{}), d);
      if (picked) {
        EXPECT_NE(picked->impl(), "ref");
      }
    }
  }
}

// Both regions of easel's own kernel against central differences, in both layouts.
TEST(OwnLrn, GradientCheck) {
  for (bool within : {false, true}) {
    OpDesc base = lrn({2, 6, 3, 4}, 3, 0.5f, 0.75f, 1.f);
    base.lrn_within_channel = within;
    for (Layout l : kLayouts) {
      const OpDesc d = with_layout(base, l);
      auto op = must(make_own_lrn(d, DnnlOptions{}), d);
      ASSERT_TRUE(op);
      EXPECT_TRUE(test::check_gradients(*op)) << describe_op(d);
    }
  }
}

// easel's own within-channel kernel (the CPU device's row after oneDNN's refusal) against the
// reference in both layouts: dst and diff_src, odd and wide windows, beta 0.75 (its sqrt path)
// and another beta (pow), a window wider than the image.
TEST(OwnLrn, WithinChannelMatchesRef) {
  for (const OpDesc& base :
       {lrn({4, 32, 16, 16}, 3, 5e-05f, 0.75f, 1.f), lrn({2, 17, 7, 5}, 5, 2.f, 0.75f, 1.f),
        lrn({2, 3, 4, 6}, 9, 0.5f, 0.6f, 2.f)}) {
    OpDesc within = base;
    within.lrn_within_channel = true;
    for (Layout l : kLayouts) {
      const OpDesc d = with_layout(within, l);
      SCOPED_TRACE(describe_op(d));
      auto fast = must(make_cpu_op(d, ImplChoice::fast, DnnlOptions{}), d);
      auto ref = must(make_ref_op(d), d);
      if (!fast || !ref) continue;
      EXPECT_EQ(fast->impl(), "own:lrn_within");
      const OpRun a = run_op(*fast, 42, true, true);
      const OpRun b = run_op(*ref, 42, true, true);
      EXPECT_TRUE(close(a.dst, b.dst, "dst"));
      EXPECT_TRUE(close(a.diff_src, b.diff_src, "diff_src"));
    }
  }
}

// Floor rounding: the bottom/right padding is the top/left one (ResNet's stem maxpool, and
// shapes whose ceil-mode remainder floor mode drops).
TEST(DnnlPool, FloorMode) {
  for (OpDesc d :
       {pool(OpKind::max_pool, {2, 16, 28, 28}, 3, 2, 1),
        pool(OpKind::max_pool, {2, 5, 6, 6}, 3, 2), pool(OpKind::avg_pool, {2, 4, 9, 9}, 3, 2, 1),
        pool(OpKind::avg_pool, {2, 17, 6, 7}, 3, 2),
        pool(OpKind::avg_pool, {2, 4, 10, 10}, 3, 2, 1)}) {
    d.ceil_mode = false;
    expect_matches_ref(d);
  }
  OpDesc stem = pool(OpKind::max_pool, {1, 64, 112, 112}, 3, 2, 1);
  stem.ceil_mode = false;
  ASSERT_EQ(dst_shape(stem).h, 56);
  expect_matches_ref(stem);
}

TEST(DnnlGlobalAvgPool, MatchesRef) {
  expect_matches_ref(OpDesc{.kind = OpKind::global_avg_pool, .src = {4, 64, 7, 7}});
  expect_matches_ref(OpDesc{.kind = OpKind::global_avg_pool, .src = {2, 17, 5, 3}});
  expect_matches_ref(OpDesc{.kind = OpKind::global_avg_pool, .src = {3, 8, 1, 1}});
}

// Training (batch statistics, running-statistics update) and inference (running statistics),
// with and without the fused ReLU, channel counts on and off oneDNN's jit kernel (16-wide).
TEST(DnnlBatchNorm, MatchesRef) {
  for (const Shape4& s :
       {Shape4{4, 16, 7, 7}, Shape4{4, 17, 5, 5}, Shape4{2, 64, 8, 8}, Shape4{8, 3, 6, 6}}) {
    for (bool relu : {false, true}) {
      for (bool training : {true, false})
        expect_matches_ref(batch_norm(s, relu), true, DnnlConvBwdData::automatic, training);
    }
  }
  expect_matches_ref(batch_norm({4, 32, 1, 1}), true);  // after an inner product
}

// Without diff_src (a net's first layer) the parameter gradients still match.
TEST(DnnlBatchNorm, WithoutDiffSrc) {
  for (const Shape4& s : {Shape4{4, 16, 7, 7}, Shape4{4, 17, 5, 5}}) {
    for (bool training : {true, false}) {
      expect_matches_ref(batch_norm(s, true), false, DnnlConvBwdData::automatic, training);
      expect_matches_ref(batch_norm(s, false), false, DnnlConvBwdData::automatic, training);
    }
  }
}

TEST(DnnlAdd, MatchesRef) {
  expect_matches_ref(joined(OpKind::add, {{4, 64, 7, 7}, {4, 64, 7, 7}}));
  expect_matches_ref(joined(OpKind::add, {{2, 17, 5, 5}, {2, 17, 5, 5}, {2, 17, 5, 5}}));
}

TEST(DnnlConcat, MatchesRef) {
  expect_matches_ref(joined(OpKind::concat, {{2, 16, 7, 7}, {2, 17, 7, 7}, {2, 5, 7, 7}}));
  // an inception module's four branches
  expect_matches_ref(
      joined(OpKind::concat, {{2, 64, 4, 4}, {2, 128, 4, 4}, {2, 32, 4, 4}, {2, 32, 4, 4}}));
}

// The multi-input ops skip a diff_src given as nullptr and still write the others.
TEST(DnnlJoin, SkipsANullDiffSrc) {
  for (OpKind k : {OpKind::add, OpKind::concat}) {
    const OpDesc d = joined(k, {{2, 3, 4, 4}, {2, 3, 4, 4}});
    SCOPED_TRACE(describe_op(d));
    auto fast = must(make_dnnl_op(d), d);
    auto ref = must(make_ref_op(d), d);
    ASSERT_TRUE(fast && ref);
    const auto a = random_vector(d.src.count(), 1), b = random_vector(d.src.count(), 2);
    const auto dd = random_vector(dst_shape(d).count(), 3);
    const std::vector<const float*> srcs{a.data(), b.data()};
    std::vector<float> dst(dd.size()), db_fast(a.size(), 5.f), db_ref(a.size(), 6.f);
    fast->forward_n(srcs, dst.data(), {}, true);
    fast->backward_n(srcs, dst.data(), dd.data(), std::vector<float*>{nullptr, db_fast.data()}, {},
                     {});
    ref->forward_n(srcs, dst.data(), {}, true);
    ref->backward_n(srcs, dst.data(), dd.data(), std::vector<float*>{nullptr, db_ref.data()}, {},
                    {});
    EXPECT_EQ(db_fast, db_ref);
  }
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
                             lrn({2, 6, 3, 3}, 3, 0.5f, 0.75f, 1.f), batch_norm({3, 5, 3, 2}, true),
                             joined(OpKind::add, {{2, 3, 3, 3}, {2, 3, 3, 3}}),
                             joined(OpKind::concat, {{2, 3, 3, 3}, {2, 2, 3, 3}}),
                             OpDesc{.kind = OpKind::global_avg_pool, .src = {2, 3, 3, 4}}}) {
    for (Layout l : kLayouts) {
      const OpDesc d = with_layout(base, l);
      // The device's fast pick: oneDNN's, or easel's own where oneDNN has no JIT kernel on this
      // CPU (LRN across channels below AVX-512); never a reference kernel.
      auto op = must(make_cpu_op(d, ImplChoice::fast, DnnlOptions{}), d);
      ASSERT_TRUE(op);
      EXPECT_NE(op->impl(), "ref") << describe_op(d);
      test::GradCheckOptions opt;
      if (d.kind == OpKind::batch_norm) {  // running_var positive; dst curved in src
        opt.weight_lo = 0.5f, opt.weight_hi = 1.5f;
        opt.step = 1e-3f;
      }
      EXPECT_TRUE(test::check_gradients(*op, opt)) << describe_op(d);
    }
  }
}

// ResNet's and GoogLeNet's new kinds at batch 32: no oneDNN reference kernel.
TEST(DnnlOps, ResNetKindsRunNoReferenceKernel) {
  OpDesc stem = pool(OpKind::max_pool, {32, 64, 112, 112}, 3, 2, 1);
  stem.ceil_mode = false;
  for (Layout l : kLayouts) {
    for (const OpDesc& d :
         {with_layout(batch_norm({32, 64, 56, 56}, true), l),
          with_layout(batch_norm({32, 256, 14, 14}), l),
          with_layout(joined(OpKind::add, {{32, 256, 14, 14}, {32, 256, 14, 14}}), l),
          with_layout(
              joined(OpKind::concat,
                     {{32, 64, 28, 28}, {32, 128, 28, 28}, {32, 32, 28, 28}, {32, 32, 28, 28}}),
              l),
          with_layout(OpDesc{.kind = OpKind::global_avg_pool, .src = {32, 512, 7, 7}}, l),
          with_layout(stem, l)}) {
      auto op = must(make_dnnl_op(d), d);
      ASSERT_TRUE(op);
      const std::string impl = op->impl();
      std::printf("  %-36s %s\n", describe_op(d).c_str(), impl.c_str());
      EXPECT_EQ(impl.rfind("dnnl:", 0), 0u) << impl;
      EXPECT_EQ(impl.find("ref"), std::string::npos) << describe_op(d) << ": " << impl;
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
