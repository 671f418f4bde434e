// The CUDA kinds added with ResNet and GoogLeNet against the CPU reference, in both layouts:
// batch norm (cuDNN's kernels and the own ones; training and inference, fused ReLU, without
// diff_src; the running statistics after forward, the state gradients 0), add, concat (every
// input's gradient) and global average pooling. Every test skips without a usable GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "devices/cuda/cuda_ops.hpp"
#include "tests/devices/cuda_op_test.hpp"

namespace easel {
namespace {

using cuda_test::close;
using cuda_test::CudaTest;
using cuda_test::expect_matches_ref;
using cuda_test::expect_same_run;
using cuda_test::get;
using cuda_test::kExact;
using cuda_test::kLayouts;
using cuda_test::kLoose;
using cuda_test::kTight;
using cuda_test::must;
using cuda_test::put;
using test::random_params;
using test::random_vector;

class CudaBatchNorm : public CudaTest {};
class CudaJoin : public CudaTest {};
class CudaGlobalAvgPool : public CudaTest {};

// ---- batch normalization -------------------------------------------------------------------

OpDesc batch_norm(Shape4 src, bool fused_relu = false) {
  return OpDesc{.kind = OpKind::batch_norm, .src = src, .fused_relu = fused_relu};
}

constexpr Shape4 kBnShapes[] = {{4, 16, 7, 7}, {4, 17, 5, 5}, {2, 64, 8, 8}, {8, 3, 6, 6}};

// cuDNN's kernels: training (batch statistics; the running statistics moved by the momentum with
// the variance unbiased, compared after forward) and inference (the running statistics, left as
// they are), with and without the fused ReLU; the running statistics' gradients 0.
TEST_F(CudaBatchNorm, CudnnMatchesRef) {
  for (const Shape4& s : kBnShapes) {
    for (bool relu : {false, true}) {
      for (bool training : {true, false}) {
        EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, batch_norm(s, relu), kLoose, true,
                                     {Layout::nchw, Layout::nhwc}, training),
                  "cudnn:batch_norm");
      }
    }
  }
  // after an inner product: m = N
  EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, batch_norm({4, 32, 1, 1}), kLoose),
            "cudnn:batch_norm");
}

// Without diff_src (a net's first layer) the parameter gradients come from the own backward.
TEST_F(CudaBatchNorm, WithoutDiffSrc) {
  for (const Shape4& s : {Shape4{4, 16, 7, 7}, Shape4{4, 17, 5, 5}}) {
    for (bool relu : {false, true}) {
      for (bool training : {true, false})
        expect_matches_ref(*gpu_, *cpu_, batch_norm(s, relu), kLoose, /*want_diff_src=*/false,
                           {Layout::nchw, Layout::nhwc}, training);
    }
  }
}

// The own kernels, the op where cuDNN is refused, on every case.
TEST_F(CudaBatchNorm, OwnKernelsMatchRef) {
  for (const Shape4& s : kBnShapes) {
    for (bool relu : {false, true}) {
      for (bool training : {true, false}) {
        for (bool diff_src : {true, false}) {
          for (Layout l : kLayouts) {
            OpDesc d = batch_norm(s, relu);
            d.layout = l;
            d.bn_momentum = 0.25f;
            SCOPED_TRACE(describe_op(d));
            auto fast = must(make_own_batch_norm(cuda_context(*gpu_), d), d);
            auto ref = must(cpu_->make_op(d), d);
            ASSERT_TRUE(fast && ref);
            EXPECT_EQ(fast->impl(), "own:batch_norm");
            expect_same_run(*fast, *gpu_, *ref, *cpu_, kTight, diff_src, training);
          }
        }
      }
    }
  }
}

// One value per channel (m = N*H*W = 1): cuDNN is refused with the reason, the own kernels count
// m - 1 as 1 as the reference does.
TEST_F(CudaBatchNorm, OneValuePerChannelIsOwn) {
  auto r = make_cudnn_batch_norm(cuda_context(*gpu_), batch_norm({1, 8, 1, 1}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("N*H*W = 1"), std::string::npos) << r.status().to_string();
  for (bool training : {true, false})
    EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, batch_norm({1, 8, 1, 1}, true), kTight, true,
                                 {Layout::nchw, Layout::nhwc}, training),
              "own:batch_norm");
}

// Two training forwards in a row move the running statistics twice, as the reference's.
TEST_F(CudaBatchNorm, RunningStatisticsAccumulate) {
  for (Layout l : kLayouts) {
    OpDesc d = batch_norm({4, 16, 5, 5});
    d.layout = l;
    d.bn_momentum = 0.3f;
    SCOPED_TRACE(describe_op(d));
    auto fast = must(gpu_->make_op(d), d);
    auto ref = must(cpu_->make_op(d), d);
    ASSERT_TRUE(fast && ref);
    auto params = random_params(d, 3, 0.5f, 1.5f);
    std::vector<Buffer> w;
    std::vector<const float*> wg;
    for (const auto& p : params) {
      w.push_back(put(p, MemKind::device));
      wg.push_back(w.back().as<float>());
    }
    const std::vector<const float*> wc = test::const_ptrs(params);
    std::vector<float> dst(static_cast<size_t>(d.src.count()));
    const Buffer dst_g = put(dst, MemKind::device);
    for (uint64_t seed : {11, 12}) {
      const std::vector<float> src = random_vector(d.src.count(), seed, -2.f, 3.f);
      const Buffer src_g = put(src, MemKind::device);
      ref->forward(src.data(), dst.data(), wc, true);
      fast->forward(src_g.as<float>(), dst_g.as<float>(), wg, true);
      gpu_->synchronize();
    }
    for (size_t i = 2; i < 4; ++i)
      EXPECT_TRUE(close(get(w[i], params[i].size()), params[i], kLoose, param_name(d, i)));
  }
}

// ---- add, concat, global average pooling ---------------------------------------------------

OpDesc joined(OpKind kind, std::vector<Shape4> inputs) {
  OpDesc d{.kind = kind, .src = inputs.front()};
  d.more_src.assign(inputs.begin() + 1, inputs.end());
  return d;
}

// The sum in input order and the copies are the reference's bit for bit.
TEST_F(CudaJoin, AddMatchesRef) {
  EXPECT_EQ(
      expect_matches_ref(*gpu_, *cpu_, joined(OpKind::add, {{4, 64, 7, 7}, {4, 64, 7, 7}}), kExact),
      "own:add");
  expect_matches_ref(*gpu_, *cpu_,
                     joined(OpKind::add, {{2, 17, 5, 5}, {2, 17, 5, 5}, {2, 17, 5, 5}}), kExact);
  expect_matches_ref(*gpu_, *cpu_, joined(OpKind::add, std::vector<Shape4>(16, {2, 3, 4, 5})),
                     kExact);
}

TEST_F(CudaJoin, ConcatMatchesRef) {
  EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_,
                               joined(OpKind::concat, {{2, 16, 7, 7}, {2, 17, 7, 7}, {2, 5, 7, 7}}),
                               kExact),
            "own:concat");
  // an inception module's four branches
  expect_matches_ref(
      *gpu_, *cpu_,
      joined(OpKind::concat, {{2, 64, 4, 4}, {2, 128, 4, 4}, {2, 32, 4, 4}, {2, 32, 4, 4}}),
      kExact);
  expect_matches_ref(*gpu_, *cpu_, joined(OpKind::concat, {{3, 1, 1, 1}, {3, 2, 1, 1}}), kExact);
}

// A diff_src given as nullptr is skipped and the others are still written.
TEST_F(CudaJoin, SkipsANullDiffSrc) {
  for (OpKind k : {OpKind::add, OpKind::concat}) {
    for (Layout l : kLayouts) {
      OpDesc d = joined(k, {{2, 3, 4, 4}, {2, 5, 4, 4}});
      if (k == OpKind::add) d.more_src[0] = d.src;
      d.layout = l;
      SCOPED_TRACE(describe_op(d));
      auto fast = must(gpu_->make_op(d), d);
      auto ref = must(cpu_->make_op(d), d);
      ASSERT_TRUE(fast && ref);
      const auto a = random_vector(d.src.count(), 1), b = random_vector(d.more_src[0].count(), 2);
      const auto dd = random_vector(dst_shape(d).count(), 3);
      std::vector<float> dst(dd.size()), db(b.size(), 6.f);
      ref->forward_n(std::vector<const float*>{a.data(), b.data()}, dst.data(), {}, true);
      ref->backward_n(std::vector<const float*>{a.data(), b.data()}, dst.data(), dd.data(),
                      std::vector<float*>{nullptr, db.data()}, {}, {});
      const Buffer ag = put(a, MemKind::device), bg = put(b, MemKind::device);
      const Buffer ddg = put(dd, MemKind::device), dstg = put(dst, MemKind::device);
      const Buffer dbg = put(std::vector<float>(b.size(), 5.f), MemKind::device);
      const std::vector<const float*> srcs{ag.as<float>(), bg.as<float>()};
      fast->forward_n(srcs, dstg.as<float>(), {}, true);
      fast->backward_n(srcs, dstg.as<float>(), ddg.as<float>(),
                       std::vector<float*>{nullptr, dbg.as<float>()}, {}, {});
      gpu_->synchronize();
      EXPECT_EQ(get(dstg, dst.size()), dst);
      EXPECT_EQ(get(dbg, db.size()), db);
    }
  }
}

TEST_F(CudaGlobalAvgPool, MatchesRef) {
  for (const Shape4& s : {Shape4{4, 64, 7, 7}, Shape4{2, 17, 5, 3}, Shape4{3, 8, 1, 1}}) {
    EXPECT_EQ(
        expect_matches_ref(*gpu_, *cpu_, OpDesc{.kind = OpKind::global_avg_pool, .src = s}, kTight),
        "own:global_avg_pool");
  }
  // a first layer: diff_src untouched
  expect_matches_ref(*gpu_, *cpu_, OpDesc{.kind = OpKind::global_avg_pool, .src = {2, 4, 3, 3}},
                     kTight, /*want_diff_src=*/false);
}

}  // namespace
}  // namespace easel
