// The CUDA ops against the CPU reference: the same random src, parameters and diff_dst through
// both, forward dst, every backward gradient (of every input) and the state parameters after
// forward (batch norm's running statistics) compared element-wise, for each op kind, both layouts
// and the shapes of LeNet, CIFAR, AlexNet and ResNet; the loss; and one training step of whole
// nets (a small graph net with batch norm, add and concat among them). Every test skips, with the
// CUDA runtime's reason, on a machine without a usable GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "devices/cuda/cuda_device.hpp"
#include "devices/cuda/cuda_ops.hpp"
#include "devices/device.hpp"
#include "engine/memory.hpp"
#include "engine/rng.hpp"
#include "nets/models/description.hpp"
#include "nets/models/models.hpp"
#include "nets/net.hpp"
#include "tests/support/grad_check.hpp"
#include "tests/support/op_descs.hpp"

namespace easel {
namespace {

using test::conv;
using test::ip;
using test::lrn;
using test::pool;
using test::random_params;
using test::random_vector;

constexpr Layout kLayouts[] = {Layout::nchw, Layout::nhwc};

// One CUDA device (GPU 0, attached on the test thread) and the CPU reference device per suite.
class CudaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skip_reason_.clear();
    setup_error_.clear();
    auto gpus = list_gpus();
    if (!gpus.ok()) {
      skip_reason_ = gpus.status().to_string();
      return;
    }
    auto dev = make_cuda_device(0, Precision::fp32);
    if (!dev.ok()) {
      setup_error_ = dev.status().to_string();
      return;
    }
    if (Status s = dev.value()->attach(); !s.ok()) {
      setup_error_ = s.to_string();
      return;
    }
    gpu_ = std::move(dev).value();
    cpu_ = make_cpu_device(ImplChoice::ref);
  }
  static void TearDownTestSuite() {
    gpu_.reset();
    cpu_.reset();
  }
  void SetUp() override {
    if (!setup_error_.empty()) FAIL() << "GPU listed but unusable: " << setup_error_;
    if (!gpu_) GTEST_SKIP() << "no GPU: " << skip_reason_;
  }

  static inline std::unique_ptr<Device> gpu_, cpu_;
  static inline std::string skip_reason_, setup_error_;
};

class CudaConv : public CudaTest {};
class CudaPool : public CudaTest {};
class CudaInnerProduct : public CudaTest {};
class CudaRelu : public CudaTest {};
class CudaLrn : public CudaTest {};
class CudaDropout : public CudaTest {};
class CudaBatchNorm : public CudaTest {};
class CudaJoin : public CudaTest {};
class CudaGlobalAvgPool : public CudaTest {};
class CudaLoss : public CudaTest {};
class CudaNet : public CudaTest {};

// ---- memory helpers ------------------------------------------------------------------------

template <typename T>
Buffer put(const std::vector<T>& v, MemKind kind) {
  const size_t bytes = v.size() * sizeof(T);
  Result<Buffer> b = Buffer::allocate(bytes, kind);
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  if (!b.ok()) return Buffer();
  if (bytes) copy_bytes(b->data(), kind, v.data(), MemKind::dram, bytes);
  return std::move(b).value();
}

template <typename T = float>
std::vector<T> get(const Buffer& b, size_t count) {
  std::vector<T> v(count);
  if (count) copy_bytes(v.data(), MemKind::dram, b.data(), b.kind(), count * sizeof(T));
  return v;
}

// ---- running and comparing -----------------------------------------------------------------

// |got - want| <= atol_scale * max(1, max|want|) + rtol * max(|got|, |want|), element-wise.
struct Tol {
  float rtol, atol_scale;
};
constexpr Tol kExact{0.f, 0.f};
constexpr Tol kTight{1e-4f, 1e-5f};  // different summation orders of a few thousand terms
constexpr Tol kLoose{1e-3f, 1e-4f};  // cuDNN's convolution algorithms (FFT, Winograd), its LRN

::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want,
                                 Tol tol, const std::string& what) {
  return test::near_scaled(got, want, tol.rtol, tol.atol_scale, what);
}

struct OpRun {
  std::vector<float> dst, diff_src;
  std::vector<std::vector<float>> more_diff_src;  // of the inputs after the first
  std::vector<std::vector<float>> diff_weights;
  std::vector<std::vector<float>> weights;  // after forward: batch norm's running statistics
};

// One forward and backward of `op` (all its inputs, through forward_n / backward_n) with every
// buffer in `kind` memory, on inputs seeded by `seed` (the same for every op of the same
// descriptor). Batch norm's parameters are positive (its running variance must be).
OpRun run_op(Op& op, Device& dev, MemKind kind, uint64_t seed, bool want_diff_src = true,
             bool training = true) {
  const OpDesc& d = op.desc();
  const Shape4 o = dst_shape(d);
  std::vector<Shape4> shapes{d.src};
  shapes.insert(shapes.end(), d.more_src.begin(), d.more_src.end());
  std::vector<Buffer> srcs, diff_srcs;
  std::vector<const float*> sp;
  std::vector<float*> dsp;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const uint64_t input_seed = i == 0 ? seed : seed + 10 + i;
    srcs.push_back(put(random_vector(shapes[i].count(), input_seed), kind));
    diff_srcs.push_back(
        put(std::vector<float>(static_cast<size_t>(shapes[i].count()), -7.f), kind));
    sp.push_back(srcs.back().as<float>());
    dsp.push_back(diff_srcs.back().as<float>());
  }
  if (!want_diff_src) dsp[0] = nullptr;
  const Buffer diff_dst = put(random_vector(o.count(), seed + 1), kind);
  const bool bn = d.kind == OpKind::batch_norm;
  const auto params = random_params(d, seed + 2, bn ? 0.5f : -1.f, bn ? 1.5f : 1.f);
  std::vector<Buffer> w, dw;
  std::vector<const float*> wp;
  std::vector<float*> dwp;
  for (const auto& p : params) {
    w.push_back(put(p, kind));
    dw.push_back(put(std::vector<float>(p.size(), 123.f), kind));
    wp.push_back(w.back().as<float>());
    dwp.push_back(dw.back().as<float>());
  }
  const Buffer dst = put(std::vector<float>(static_cast<size_t>(o.count()), -7.f), kind);
  op.forward_n(sp, dst.as<float>(), wp, training);
  op.backward_n(sp, dst.as<float>(), diff_dst.as<float>(), dsp, wp, dwp);
  dev.synchronize();
  OpRun r;
  r.dst = get(dst, static_cast<size_t>(o.count()));
  r.diff_src = get(diff_srcs[0], static_cast<size_t>(d.src.count()));
  for (size_t i = 1; i < shapes.size(); ++i)
    r.more_diff_src.push_back(get(diff_srcs[i], static_cast<size_t>(shapes[i].count())));
  for (size_t i = 0; i < params.size(); ++i) {
    r.diff_weights.push_back(get(dw[i], params[i].size()));
    r.weights.push_back(get(w[i], params[i].size()));
  }
  return r;
}

std::unique_ptr<Op> must(Result<std::unique_ptr<Op>> r, const OpDesc& d) {
  EXPECT_TRUE(r.ok()) << describe_op(d) << ": " << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

// A CUDA op against the reference op of the same descriptor: dst, every diff_src (untouched
// where skipped), every diff_weights (the state parameters' exactly 0) and the parameters after
// forward (batch norm's running statistics).
void expect_same_run(Op& fast, Device& gpu, Op& ref, Device& cpu, Tol tol, bool want_diff_src,
                     bool training) {
  const OpDesc& d = fast.desc();
  SCOPED_TRACE(fast.impl() + (training ? " training" : " inference"));
  const OpRun a = run_op(fast, gpu, MemKind::device, 42, want_diff_src, training);
  const OpRun b = run_op(ref, cpu, MemKind::dram, 42, want_diff_src, training);
  EXPECT_TRUE(close(a.dst, b.dst, tol, "dst"));
  if (want_diff_src) {
    EXPECT_TRUE(close(a.diff_src, b.diff_src, tol, "diff_src"));
  } else {
    EXPECT_TRUE(close(a.diff_src, std::vector<float>(a.diff_src.size(), -7.f), kExact,
                      "diff_src untouched"));
  }
  ASSERT_EQ(a.more_diff_src.size(), b.more_diff_src.size());
  for (size_t i = 0; i < a.more_diff_src.size(); ++i)
    EXPECT_TRUE(
        close(a.more_diff_src[i], b.more_diff_src[i], tol, "diff_src" + std::to_string(i + 1)));
  ASSERT_EQ(a.diff_weights.size(), b.diff_weights.size());
  const size_t first_state = a.diff_weights.size() - static_cast<size_t>(state_params(d));
  for (size_t i = 0; i < a.diff_weights.size(); ++i) {
    const std::string name = param_name(d, i);
    EXPECT_TRUE(close(a.weights[i], b.weights[i], tol, name + " after forward"));
    if (i >= first_state) {
      EXPECT_TRUE(close(a.diff_weights[i], std::vector<float>(a.diff_weights[i].size(), 0.f),
                        kExact, "diff " + name + " (state: 0)"));
    } else {
      EXPECT_TRUE(close(a.diff_weights[i], b.diff_weights[i], tol, "diff " + name));
    }
  }
}

// The CUDA op against the reference for `base` in each layout; returns the CUDA impl() of the
// last layout run.
std::string expect_matches_ref(Device& gpu, Device& cpu, const OpDesc& base, Tol tol,
                               bool want_diff_src = true,
                               std::initializer_list<Layout> layouts = {Layout::nchw, Layout::nhwc},
                               bool training = true) {
  std::string impl;
  for (Layout l : layouts) {
    OpDesc d = base;
    d.layout = l;
    SCOPED_TRACE(describe_op(d));
    auto fast = must(gpu.make_op(d), d);
    auto ref = must(cpu.make_op(d), d);
    if (!fast || !ref) continue;
    impl = fast->impl();
    expect_same_run(*fast, gpu, *ref, cpu, tol, want_diff_src, training);
  }
  return impl;
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

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

// A small graph net of the new kinds: conv -> batch norm (+ fused ReLU) -> floor-mode max pool,
// a residual join (a conv and batch norm branch added to its input; the pool's gradient is the
// sum of two readers'), a concat of the join and a 1x1 conv of it, global average pooling, fc.
constexpr const char* kBnJoinNet = R"(
name = "bn-join"
description = "batch norm, add, concat and global average pooling"
[input]
channels = 3
height = 12
width = 12
classes = 5
[[layer]]
name = "conv1"
type = "conv"
outputs = 8
kernel = 3
pad = 1
bias = false
[[layer]]
name = "bn1"
type = "batch_norm"
[[layer]]
name = "relu1"
type = "relu"
[[layer]]
name = "pool1"
type = "max_pool"
kernel = 3
stride = 2
pad = 1
ceil_mode = false
[[layer]]
name = "branch"
type = "conv"
inputs = ["pool1"]
outputs = 8
kernel = 3
pad = 1
bias = false
[[layer]]
name = "branch_bn"
type = "batch_norm"
momentum = 0.2
[[layer]]
name = "join"
type = "add"
inputs = ["branch_bn", "pool1"]
[[layer]]
name = "join_relu"
type = "relu"
[[layer]]
name = "squeeze"
type = "conv"
inputs = ["join_relu"]
outputs = 4
kernel = 1
[[layer]]
name = "cat"
type = "concat"
inputs = ["join_relu", "squeeze"]
[[layer]]
name = "gap"
type = "global_avg_pool"
[[layer]]
name = "fc"
type = "inner_product"
outputs = "classes"
)";

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
