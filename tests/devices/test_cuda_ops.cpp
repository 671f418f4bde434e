// The CUDA ops against the CPU reference: the same random src, parameters and diff_dst through
// both, forward dst and every backward gradient compared element-wise (the machinery in
// cuda_op_test.hpp), for convolution, pooling (ceil and floor mode), inner product, ReLU, LRN and
// dropout, both layouts and the shapes of LeNet, CIFAR, AlexNet and ResNet; the loss; and one
// training step of whole nets (a small graph net with batch norm, add and concat among them).
// The kinds of ResNet and GoogLeNet are in test_cuda_bn_join.cpp. Every test skips, with the
// CUDA runtime's reason, on a machine without a usable GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "devices/cuda/cuda_device.hpp"
#include "devices/cuda/cuda_ops.hpp"
#include "devices/device.hpp"
#include "engine/memory.hpp"
#include "engine/rng.hpp"
#include "nets/models/description.hpp"
#include "nets/models/models.hpp"
#include "nets/net.hpp"
#include "tests/devices/cuda_op_test.hpp"
#include "tests/support/grad_check.hpp"
#include "tests/support/op_descs.hpp"
#include "tests/support/test_nets.hpp"

namespace easel {
namespace {

using test::conv;
using test::ip;
using test::lrn;
using test::pool;
using test::random_params;
using test::random_vector;

using cuda_test::close;
using cuda_test::CudaTest;
using cuda_test::expect_matches_ref;
using cuda_test::get;
using cuda_test::kExact;
using cuda_test::kLayouts;
using cuda_test::kLoose;
using cuda_test::kTight;
using cuda_test::must;
using cuda_test::put;
using cuda_test::starts_with;

class CudaConv : public CudaTest {};
class CudaPool : public CudaTest {};
class CudaInnerProduct : public CudaTest {};
class CudaRelu : public CudaTest {};
class CudaLrn : public CudaTest {};
class CudaDropout : public CudaTest {};
class CudaLoss : public CudaTest {};
class CudaNet : public CudaTest {};

// ---- convolution ---------------------------------------------------------------------------

TEST_F(CudaConv, LeNet) {
  for (const OpDesc& d : {conv({8, 1, 28, 28}, 20, 5), conv({8, 20, 12, 12}, 50, 5)}) {
    const std::string impl = expect_matches_ref(*gpu_, *cpu_, d, kLoose);
    EXPECT_TRUE(starts_with(impl, "cudnn:fwd=")) << impl;
  }
}

TEST_F(CudaConv, PaddedStridedRectangularNoBias) {
  expect_matches_ref(*gpu_, *cpu_, conv({4, 3, 32, 32}, 32, 5, 1, 2), kLoose);  // cifar conv1
  expect_matches_ref(*gpu_, *cpu_, conv({2, 6, 9, 9}, 8, 3, 2, 1, 1, false, /*bias=*/false),
                     kLoose);
  OpDesc d = conv({2, 4, 7, 9}, 5, 3);
  d.kw = 2;
  d.stride_w = 2;
  d.pad_h = 1;
  expect_matches_ref(*gpu_, *cpu_, d, kLoose);
  expect_matches_ref(*gpu_, *cpu_, conv({2, 3, 59, 59}, 16, 11, 4), kLoose);  // AlexNet conv1
}

TEST_F(CudaConv, GroupsAndFusedRelu) {
  expect_matches_ref(*gpu_, *cpu_, conv({2, 8, 13, 13}, 12, 3, 1, 1, /*group=*/2), kLoose);
  expect_matches_ref(*gpu_, *cpu_, conv({2, 48, 27, 27}, 64, 5, 1, 2, 2, /*fused_relu=*/true),
                     kLoose);
  expect_matches_ref(*gpu_, *cpu_, conv({4, 32, 16, 16}, 32, 5, 1, 2, 1, /*fused_relu=*/true),
                     kLoose);
}

TEST_F(CudaConv, FirstLayerSkipsDiffSrc) {
  expect_matches_ref(*gpu_, *cpu_, conv({4, 1, 28, 28}, 20, 5), kLoose, /*want_diff_src=*/false);
}

// ---- pooling -------------------------------------------------------------------------------

TEST_F(CudaPool, MaxLeNetIsExactAndOwn) {
  for (const OpDesc& d : {pool(OpKind::max_pool, {8, 20, 24, 24}, 2, 2),
                          pool(OpKind::max_pool, {8, 50, 8, 8}, 2, 2)}) {
    EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, d, kExact), "own:max_pool");
  }
}

TEST_F(CudaPool, CeilModeCifar) {
  // 32 -> 16 with k3 s2: cuDNN's floor would give 15, so the average is easel's kernel.
  const OpDesc mx = pool(OpKind::max_pool, {4, 32, 32, 32}, 3, 2);
  const OpDesc av = pool(OpKind::avg_pool, {4, 32, 32, 32}, 3, 2);
  ASSERT_EQ(dst_shape(av).h, 16);
  EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, mx, kExact), "own:max_pool");
  EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, av, kTight), "own:avg_pool");
}

TEST_F(CudaPool, AvgWhereFloorEqualsCeilIsCudnn) {
  for (const OpDesc& d : {pool(OpKind::avg_pool, {2, 20, 24, 24}, 2, 2),
                          pool(OpKind::avg_pool, {2, 4, 9, 9}, 3, 2, 1),
                          pool(OpKind::avg_pool, {2, 8, 6, 6}, 6, 1)}) {  // global
    EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, d, kTight), "cudnn:avg_pool");
  }
}

TEST_F(CudaPool, Padded) {
  expect_matches_ref(*gpu_, *cpu_, pool(OpKind::max_pool, {2, 4, 10, 10}, 3, 2, 1), kExact);
  expect_matches_ref(*gpu_, *cpu_, pool(OpKind::max_pool, {2, 4, 9, 9}, 3, 2, 1), kExact);
  // The last window runs past input + pad: Caffe clips its divisor (easel's kernel).
  EXPECT_EQ(
      expect_matches_ref(*gpu_, *cpu_, pool(OpKind::avg_pool, {2, 4, 10, 10}, 3, 2, 1), kTight),
      "own:avg_pool");
  expect_matches_ref(*gpu_, *cpu_, pool(OpKind::avg_pool, {2, 4, 11, 11}, 2, 2, 1), kTight);
}

// Floor rounding (ceil_mode false, PyTorch's): cuDNN's own rounding, so the average pools are
// cuDNN's (every window inside the padded input: the divisor is kh*kw on both sides); max pooling
// stays easel's kernel. Shapes whose ceil-mode remainder floor mode drops, and ResNet's stem.
TEST_F(CudaPool, FloorMode) {
  for (OpDesc d : {pool(OpKind::max_pool, {2, 16, 28, 28}, 3, 2, 1),
                   pool(OpKind::max_pool, {2, 5, 6, 6}, 3, 2),
                   pool(OpKind::max_pool, {1, 64, 112, 112}, 3, 2, 1)}) {  // ResNet's stem
    d.ceil_mode = false;
    EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, d, kExact), "own:max_pool");
  }
  for (OpDesc d :
       {pool(OpKind::avg_pool, {2, 4, 9, 9}, 3, 2, 1), pool(OpKind::avg_pool, {2, 17, 6, 7}, 3, 2),
        pool(OpKind::avg_pool, {2, 4, 10, 10}, 3, 2, 1)}) {
    d.ceil_mode = false;
    EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, d, kTight), "cudnn:avg_pool");
  }
  OpDesc stem = pool(OpKind::max_pool, {1, 64, 112, 112}, 3, 2, 1);
  stem.ceil_mode = false;
  EXPECT_EQ(dst_shape(stem).h, 56);
}

// Where cuDNN's rounding differs (ceil mode), its refusal says so, and easel's kernel runs.
TEST_F(CudaPool, CeilModeRefusalNamesTheRounding) {
  const OpDesc d = pool(OpKind::avg_pool, {2, 4, 32, 32}, 3, 2);
  auto r = make_cudnn_pool(cuda_context(*gpu_), d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ceil mode"), std::string::npos) << r.status().to_string();
}

// Ties (-1, 0, 1 inputs): the gradient goes to the first maximum in scan order, as the CPU's.
TEST_F(CudaPool, MaxTiesGoToFirstMaximum) {
  for (Layout l : kLayouts) {
    for (OpDesc d : {pool(OpKind::max_pool, {2, 20, 24, 24}, 2, 2),
                     pool(OpKind::max_pool, {2, 5, 10, 10}, 3, 2, 1)}) {
      d.layout = l;
      SCOPED_TRACE(describe_op(d));
      auto fast = must(gpu_->make_op(d), d);
      auto ref = must(cpu_->make_op(d), d);
      ASSERT_TRUE(fast && ref);
      std::vector<float> src = random_vector(d.src.count(), 5);
      for (float& v : src)
        v = std::round(v);
      const std::vector<float> diff_dst = random_vector(dst_shape(d).count(), 6);
      std::vector<float> dst_b(diff_dst.size()), ds_b(src.size());
      ref->forward(src.data(), dst_b.data(), {}, true);
      ref->backward(src.data(), dst_b.data(), diff_dst.data(), ds_b.data(), {}, {});
      const Buffer s = put(src, MemKind::device), dd = put(diff_dst, MemKind::device);
      const Buffer dst = put(dst_b, MemKind::device), ds = put(ds_b, MemKind::device);
      fast->forward(s.as<float>(), dst.as<float>(), {}, true);
      fast->backward(s.as<float>(), dst.as<float>(), dd.as<float>(), ds.as<float>(), {}, {});
      gpu_->synchronize();
      EXPECT_EQ(get(dst, dst_b.size()), dst_b);
      EXPECT_EQ(get(ds, ds_b.size()), ds_b);
    }
  }
}

// ---- inner product, ReLU -------------------------------------------------------------------

TEST_F(CudaInnerProduct, LeNetBothLayouts) {
  EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, ip({8, 50, 4, 4}, 500, /*fused_relu=*/true), kTight),
            "cublas:sgemm");
  expect_matches_ref(*gpu_, *cpu_, ip({8, 500, 1, 1}, 10), kTight);
}

TEST_F(CudaInnerProduct, NoBiasAndFirstLayer) {
  expect_matches_ref(*gpu_, *cpu_, ip({4, 3, 5, 5}, 7, false, /*bias=*/false), kTight);
  expect_matches_ref(*gpu_, *cpu_, ip({4, 3, 5, 5}, 7, true), kTight, /*want_diff_src=*/false);
}

TEST_F(CudaRelu, MatchesRefAndRunsInPlace) {
  OpDesc d;
  d.src = {4, 20, 7, 7};
  EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, d, kExact), "own:relu");
  auto op = must(gpu_->make_op(d), d);
  ASSERT_TRUE(op);
  std::vector<float> x = random_vector(d.src.count(), 3), want = x;
  for (float& v : want)
    v = std::max(v, 0.f);
  const Buffer xd = put(x, MemKind::device);
  op->forward(xd.as<float>(), xd.as<float>(), {}, true);
  gpu_->synchronize();
  EXPECT_EQ(get(xd, x.size()), want);
  std::vector<float> g = random_vector(d.src.count(), 4), gwant = g;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(want[i] > 0.f)) gwant[i] = 0.f;
  const Buffer gd = put(g, MemKind::device);
  op->backward(xd.as<float>(), xd.as<float>(), gd.as<float>(), gd.as<float>(), {}, {});
  gpu_->synchronize();
  EXPECT_EQ(get(gd, g.size()), gwant);
}

// ---- LRN -----------------------------------------------------------------------------------

TEST_F(CudaLrn, AcrossChannels) {
  const OpDesc shapes[] = {lrn({2, 16, 7, 7}, 5, 0.5f, 0.75f, 1.f),
                           lrn({2, 32, 8, 8}, 3, 0.3f, 0.75f, 2.f),      // cifar-full-like, n = 3
                           lrn({2, 96, 13, 13}, 5, 1e-4f, 0.75f, 1.f)};  // AlexNet's
  for (const OpDesc& d : shapes) {
    EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, d, kLoose, true, {Layout::nchw}), "cudnn:lrn");
    EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, d, kTight, true, {Layout::nhwc}), "own:lrn");
  }
}

TEST_F(CudaLrn, WindowBeyondCudnnUsesOwnKernel) {
  const OpDesc d = lrn({2, 24, 5, 5}, 17, 0.5f, 0.75f, 1.f);  // cuDNN takes n <= 16
  EXPECT_EQ(expect_matches_ref(*gpu_, *cpu_, d, kTight, true, {Layout::nchw}), "own:lrn");
}

// ---- dropout -------------------------------------------------------------------------------

TEST_F(CudaDropout, TrainingMaskScaleAndBackward) {
  for (Layout l : kLayouts) {
    OpDesc d;
    d.kind = OpKind::dropout;
    d.layout = l;
    d.src = {2, 16, 32, 32};
    d.ratio = 0.3f;
    d.seed = 9;
    SCOPED_TRACE(describe_op(d));
    auto op = must(gpu_->make_op(d), d);
    ASSERT_TRUE(op);
    EXPECT_EQ(op->impl(), "own:dropout");
    const size_t n = static_cast<size_t>(d.src.count());
    const std::vector<float> src = random_vector(d.src.count(), 1, 0.5f, 1.5f);  // never 0
    const std::vector<float> diff_dst = random_vector(d.src.count(), 2);
    const Buffer s = put(src, MemKind::device), dd = put(diff_dst, MemKind::device);
    const Buffer dst = put(std::vector<float>(n, -7.f), MemKind::device);
    const Buffer ds = put(std::vector<float>(n, -7.f), MemKind::device);
    op->forward(s.as<float>(), dst.as<float>(), {}, true);
    op->backward(s.as<float>(), dst.as<float>(), dd.as<float>(), ds.as<float>(), {}, {});
    gpu_->synchronize();
    const std::vector<float> y = get(dst, n), g = get(ds, n);
    const float scale = 1.f / (1.f - d.ratio);
    size_t kept = 0, wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      if (y[i] == 0.f) {
        wrong += g[i] != 0.f;
      } else {
        ++kept;
        wrong += y[i] != src[i] * scale || g[i] != diff_dst[i] * scale;
      }
    }
    EXPECT_EQ(wrong, 0u);
    EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(n), 0.7, 0.02);

    // The next training forward draws a new mask.
    op->forward(s.as<float>(), dst.as<float>(), {}, true);
    gpu_->synchronize();
    const std::vector<float> y2 = get(dst, n);
    size_t changed = 0;
    for (size_t i = 0; i < n; ++i)
      changed += (y[i] == 0.f) != (y2[i] == 0.f);
    EXPECT_GT(changed, n / 10);
  }
}

// The CPU's own kernel (the fast CPU device's row) draws logical element j where the GPU draws
// memory index j, from the same hash (devices/dropout_hash.hpp): the same masks, call after
// call, in nchw and wherever h = w = 1 (dropout after an inner product, in either layout).
TEST_F(CudaDropout, SameMaskAsTheCpuOwnKernel) {
  const std::unique_ptr<Device> cpu = make_cpu_device(ImplChoice::fast);
  for (const auto& [s, l] : {std::pair{Shape4{2, 16, 8, 8}, Layout::nchw},
                             std::pair{Shape4{8, 512, 1, 1}, Layout::nhwc}}) {
    OpDesc d;
    d.kind = OpKind::dropout;
    d.layout = l;
    d.src = s;
    d.ratio = 0.5f;
    d.seed = 21;
    SCOPED_TRACE(describe_op(d));
    auto g = must(gpu_->make_op(d), d);
    auto c = must(cpu->make_op(d), d);
    ASSERT_TRUE(g && c);
    EXPECT_EQ(c->impl(), "own:dropout");
    const size_t n = static_cast<size_t>(s.count());
    const std::vector<float> src = random_vector(s.count(), 1, 0.5f, 1.5f);
    const Buffer sb = put(src, MemKind::device), db = put(std::vector<float>(n), MemKind::device);
    std::vector<float> want(n);
    for (int call = 0; call < 2; ++call) {
      g->forward(sb.as<float>(), db.as<float>(), {}, true);
      c->forward(src.data(), want.data(), {}, true);
      gpu_->synchronize();
      EXPECT_EQ(get(db, n), want) << "call " << call;
    }
  }
}

TEST_F(CudaDropout, InferenceIsIdentity) {
  OpDesc d;
  d.kind = OpKind::dropout;
  d.src = {2, 8, 5, 5};
  d.ratio = 0.5f;
  auto op = must(gpu_->make_op(d), d);
  ASSERT_TRUE(op);
  const size_t n = static_cast<size_t>(d.src.count());
  const std::vector<float> src = random_vector(d.src.count(), 1),
                           g = random_vector(d.src.count(), 2);
  const Buffer s = put(src, MemKind::device), dd = put(g, MemKind::device);
  const Buffer dst = put(std::vector<float>(n, -7.f), MemKind::device);
  const Buffer ds = put(std::vector<float>(n, -7.f), MemKind::device);
  op->forward(s.as<float>(), dst.as<float>(), {}, /*training=*/false);
  op->backward(s.as<float>(), dst.as<float>(), dd.as<float>(), ds.as<float>(), {}, {});
  gpu_->synchronize();
  EXPECT_EQ(get(dst, n), src);
  EXPECT_EQ(get(ds, n), g);
}
// ---- loss ----------------------------------------------------------------------------------

TEST_F(CudaLoss, MatchesCpuForFullAndPartialBatches) {
  const int64_t batch = 8;
  for (int64_t classes : {10, 1000}) {
    auto cpu_loss = cpu_->make_loss(batch, classes);
    auto gpu_loss = gpu_->make_loss(batch, classes);
    ASSERT_TRUE(cpu_loss.ok() && gpu_loss.ok()) << gpu_loss.status().to_string();
    EXPECT_EQ(gpu_loss.value()->impl(), "own:softmax_xent");
    const size_t count = static_cast<size_t>(batch * classes);
    const std::vector<float> logits = random_vector(batch * classes, 5, -3.f, 3.f);
    std::vector<int32_t> labels(static_cast<size_t>(batch));
    Rng rng(6);
    for (auto& x : labels)
      x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(classes)));
    for (size_t r = 0; r < labels.size(); r += 2) {  // every other row a hit
      const auto row = logits.begin() + static_cast<std::ptrdiff_t>(r) * classes;
      labels[r] = static_cast<int32_t>(std::max_element(row, row + classes) - row);
    }
    const Buffer lg = put(logits, MemKind::device);
    const Buffer lb = put(labels, MemKind::device);
    for (int64_t n : {batch, int64_t{5}}) {
      SCOPED_TRACE("classes " + std::to_string(classes) + ", n " + std::to_string(n));
      std::vector<float> prob_c(count, 0.f), diff_c(count, 99.f);
      int64_t correct_c = 3, correct_g = 3;
      const double loss_c =
          cpu_loss.value()->forward(logits.data(), labels.data(), prob_c.data(), n, &correct_c);
      cpu_loss.value()->backward(prob_c.data(), labels.data(), diff_c.data(), n,
                                 1.f / static_cast<float>(n));
      const Buffer prob = put(std::vector<float>(count, 0.f), MemKind::device);
      const Buffer diff = put(std::vector<float>(count, 99.f), MemKind::device);
      const double loss_g = gpu_loss.value()->forward(lg.as<float>(), lb.as<int32_t>(),
                                                      prob.as<float>(), n, &correct_g);
      gpu_loss.value()->backward(prob.as<float>(), lb.as<int32_t>(), diff.as<float>(), n,
                                 1.f / static_cast<float>(n));
      gpu_->synchronize();
      EXPECT_NEAR(loss_g, loss_c, 1e-5 * std::max(1.0, std::abs(loss_c)));
      EXPECT_EQ(correct_g, correct_c);
      EXPECT_TRUE(close(get(prob, count), prob_c, kTight, "prob"));
      const std::vector<float> diff_g = get(diff, count);
      EXPECT_TRUE(close(diff_g, diff_c, kTight, "diff_logits"));
      for (size_t i = static_cast<size_t>(n * classes); i < count; ++i)
        ASSERT_EQ(diff_g[i], 0.f) << "row past n not zeroed at " << i;
    }
  }
}

// ---- whole nets ----------------------------------------------------------------------------

// Gradients of a whole net. A max-pool window whose two largest inputs lie within float
// rounding of each other may route its gradient to a different element on the GPU than on the
// CPU (both are right), which moves a few percent of one segment; the per-op tests above check
// every op tightly. So a segment agrees when its relative L2 error is <= 1e-2 and at most 10% of
// its elements lie outside the element-wise tolerance: wrong plumbing (layout, transposition,
// scale, ReLU mask) breaks both almost everywhere.
::testing::AssertionResult gradients_agree(const float* got, const float* want, int64_t n,
                                           const std::string& name) {
  float peak = 0.f;
  for (int64_t i = 0; i < n; ++i)
    peak = std::max(peak, std::abs(want[i]));
  const double atol = 1e-4 * std::max(peak, 1e-6f), rtol = 1e-3;
  double err2 = 0, norm2 = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    err2 += d * d;
    norm2 += static_cast<double>(want[i]) * want[i];
    if (!(std::abs(d) <= atol + rtol * std::max(std::abs(got[i]), std::abs(want[i])))) ++bad;
  }
  const double rel = std::sqrt(err2 / std::max(norm2, 1e-30));
  if (rel <= 1e-2 && bad * 10 <= n) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << name << ": relative L2 error " << rel << ", " << bad
                                       << " of " << n << " elements beyond the tolerance";
}

// One train_step of `spec` on the CPU reference and on the GPU from the same parameters and
// batch: the loss, the hits and every gradient segment agree; the state segments (batch norm's
// running statistics, moved by the step) agree after it, and so does an evaluation on them.
void expect_train_step_matches(Device& gpu, Device& cpu, const NetSpec& spec,
                               const std::string& model, ModelInput in, int64_t batch) {
  for (Layout l : kLayouts) {
    SCOPED_TRACE(model + " " + layout_name(l));
    auto cnet = Net::create(spec, batch, l, cpu, MemKind::dram);
    auto gnet = Net::create(spec, batch, l, gpu, MemKind::device);
    ASSERT_TRUE(cnet.ok()) << cnet.status().to_string();
    ASSERT_TRUE(gnet.ok()) << gnet.status().to_string();
    std::string impls;
    for (const LayerInfo& info : gnet.value()->describe())
      impls += " " + info.name + "=" + info.impl;
    SCOPED_TRACE("GPU layers:" + impls);
    const size_t n = static_cast<size_t>(cnet.value()->params().total_floats());
    ASSERT_EQ(static_cast<size_t>(gnet.value()->params().total_floats()), n);
    std::vector<float> w(n), diff_c(n, 0.f);
    cnet.value()->init_params(w.data(), 3);
    const std::vector<float> images =
        random_vector(cnet.value()->input_shape().count(), 7, 0.f, 1.f);
    std::vector<int32_t> labels(static_cast<size_t>(batch));
    Rng rng(8);
    for (auto& x : labels)
      x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(in.classes)));
    const std::vector<float> w0 = w;  // the CPU's step moves the state segments of w
    const StepStats sc =
        cnet.value()->train_step(images.data(), labels.data(), w.data(), diff_c.data());

    const Buffer wd = put(w0, MemKind::device), img = put(images, MemKind::device);
    const Buffer lab = put(labels, MemKind::device);
    const Buffer dd = put(std::vector<float>(n, 0.f), MemKind::device);
    const StepStats sg = gnet.value()->train_step(img.as<float>(), lab.as<int32_t>(),
                                                  wd.as<float>(), dd.as<float>());
    gpu.synchronize();
    const std::vector<float> diff_g = get(dd, n);
    EXPECT_NEAR(sg.loss, sc.loss, 1e-4 * std::max(1.0, std::abs(sc.loss)));
    EXPECT_EQ(sg.correct, sc.correct);
    for (const Segment& s : cnet.value()->params().segments()) {
      const auto off = static_cast<size_t>(s.offset), cnt = static_cast<size_t>(s.count);
      const std::vector<float> want(diff_c.begin() + off, diff_c.begin() + off + cnt);
      const std::vector<float> got(diff_g.begin() + off, diff_g.begin() + off + cnt);
      EXPECT_TRUE(gradients_agree(got.data(), want.data(), s.count, s.name));
    }

    const std::vector<float> w_g = get(wd, n);  // the state segments moved on both
    for (const Segment& s : cnet.value()->params().segments()) {
      if (!s.state) continue;
      const auto off = static_cast<size_t>(s.offset), cnt = static_cast<size_t>(s.count);
      EXPECT_TRUE(close(std::vector<float>(w_g.begin() + off, w_g.begin() + off + cnt),
                        std::vector<float>(w.begin() + off, w.begin() + off + cnt), kLoose,
                        s.name + " after the step"));
      EXPECT_NE(std::vector<float>(w.begin() + off, w.begin() + off + cnt),
                std::vector<float>(w0.begin() + off, w0.begin() + off + cnt))
          << s.name << ": the step did not move the state";
    }
    const EvalStats ec = cnet.value()->evaluate(images.data(), labels.data(), batch, w.data());
    const EvalStats eg =
        gnet.value()->evaluate(img.as<float>(), lab.as<int32_t>(), batch, wd.as<float>());
    gpu.synchronize();
    EXPECT_NEAR(eg.loss_sum, ec.loss_sum, 1e-3 * std::max(1.0, std::abs(ec.loss_sum)));
  }
}

void expect_train_step_matches(Device& gpu, Device& cpu, const std::string& model, ModelInput in,
                               int64_t batch) {
  auto spec = build_model(model, in);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  expect_train_step_matches(gpu, cpu, spec.value(), model, in, batch);
}

TEST_F(CudaNet, LeNetTrainStepMatchesCpu) {
  expect_train_step_matches(*gpu_, *cpu_, "lenet", {1, 28, 28, 10}, 4);
}

TEST_F(CudaNet, CifarQuickTrainStepMatchesCpu) {
  expect_train_step_matches(*gpu_, *cpu_, "cifar10-quick", {3, 32, 32, 10}, 2);
}

using test::kBnJoinNet;  // tests/support/test_nets.hpp

// The kind of each new layer's op on the GPU ("batch_norm+relu" counts as batch_norm).
std::string new_kind_impls(const Net& net) {
  std::string impls;
  for (const LayerInfo& info : net.describe()) {
    const std::string kind = info.kind.substr(0, info.kind.find('+'));
    if (kind == "batch_norm" || kind == "add" || kind == "concat" || kind == "global_avg_pool" ||
        kind == "max_pool")
      impls += (impls.empty() ? "" : " ") + kind + "=" + info.impl;
  }
  return impls;
}

TEST_F(CudaNet, BatchNormAddConcatNetTrainStepMatchesCpu) {
  const ModelInput in{3, 12, 12, 5};
  auto spec = parse_net_description(kBnJoinNet, "bn-join", in);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  expect_train_step_matches(*gpu_, *cpu_, spec.value(), "bn-join", in, 4);
  // The GPU runs the new kinds on their CUDA kernels, in the layers' topological order.
  for (Layout l : kLayouts) {
    auto gnet = Net::create(spec.value(), 4, l, *gpu_, MemKind::device);
    ASSERT_TRUE(gnet.ok()) << gnet.status().to_string();
    EXPECT_EQ(new_kind_impls(*gnet.value()),
              "batch_norm=cudnn:batch_norm max_pool=own:max_pool batch_norm=cudnn:batch_norm "
              "add=own:add concat=own:concat global_avg_pool=own:global_avg_pool");
  }
}

// Runs without a GPU: the description of the whole-net check builds on the CPU, with the layers
// the check means (the ReLU after bn1 fused, the others standing alone).
TEST(CudaNetDescription, BatchNormAddConcatNetBuilds) {
  const ModelInput in{3, 12, 12, 5};
  auto spec = parse_net_description(kBnJoinNet, "bn-join", in);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto cpu = make_cpu_device(ImplChoice::ref);
  auto net = Net::create(spec.value(), 4, Layout::nchw, *cpu, MemKind::dram);
  ASSERT_TRUE(net.ok()) << net.status().to_string();
  std::string kinds;
  for (const LayerInfo& info : net.value()->describe())
    kinds += (kinds.empty() ? "" : " ") + info.kind;
  EXPECT_EQ(kinds,
            "conv batch_norm+relu max_pool conv batch_norm add relu conv concat global_avg_pool "
            "inner_product");
  EXPECT_EQ(new_kind_impls(*net.value()),
            "batch_norm=ref max_pool=ref batch_norm=ref add=ref concat=ref global_avg_pool=ref");
}

}  // namespace
}  // namespace easel
