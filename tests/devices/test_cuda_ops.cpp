// The CUDA ops against the CPU reference: the same random src, parameters and diff_dst through
// both, forward dst and every backward gradient compared element-wise, for each op kind, both
// layouts and the shapes of LeNet, CIFAR and AlexNet; the loss; and one training step of whole
// nets. Every test skips, with the CUDA runtime's reason, on a machine without a usable GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "devices/cuda/cuda_device.hpp"
#include "devices/device.hpp"
#include "engine/memory.hpp"
#include "engine/rng.hpp"
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
  std::vector<std::vector<float>> diff_weights;
};

// One forward (training) and backward of `op` with every buffer in `kind` memory, on inputs
// seeded by `seed` (the same for every op of the same descriptor).
OpRun run_op(Op& op, Device& dev, MemKind kind, uint64_t seed, bool want_diff_src = true) {
  const OpDesc& d = op.desc();
  const Shape4 o = dst_shape(d);
  const size_t n_src = static_cast<size_t>(d.src.count()), n_dst = static_cast<size_t>(o.count());
  const Buffer src = put(random_vector(d.src.count(), seed), kind);
  const Buffer diff_dst = put(random_vector(o.count(), seed + 1), kind);
  const auto params = random_params(d, seed + 2);
  std::vector<Buffer> w, dw;
  std::vector<const float*> wp;
  std::vector<float*> dwp;
  for (const auto& p : params) {
    w.push_back(put(p, kind));
    dw.push_back(put(std::vector<float>(p.size(), 123.f), kind));
    wp.push_back(w.back().as<float>());
    dwp.push_back(dw.back().as<float>());
  }
  const Buffer dst = put(std::vector<float>(n_dst, -7.f), kind);
  const Buffer diff_src = put(std::vector<float>(n_src, -7.f), kind);
  op.forward(src.as<float>(), dst.as<float>(), wp, /*training=*/true);
  op.backward(src.as<float>(), dst.as<float>(), diff_dst.as<float>(),
              want_diff_src ? diff_src.as<float>() : nullptr, wp, dwp);
  dev.synchronize();
  OpRun r;
  r.dst = get(dst, n_dst);
  r.diff_src = get(diff_src, n_src);
  for (size_t i = 0; i < params.size(); ++i)
    r.diff_weights.push_back(get(dw[i], params[i].size()));
  return r;
}

std::unique_ptr<Op> must(Result<std::unique_ptr<Op>> r, const OpDesc& d) {
  EXPECT_TRUE(r.ok()) << describe_op(d) << ": " << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

// The CUDA op against the reference for `base` in each layout; returns the CUDA impl() of the
// last layout run.
std::string expect_matches_ref(Device& gpu, Device& cpu, const OpDesc& base, Tol tol,
                               bool want_diff_src = true,
                               std::initializer_list<Layout> layouts = {Layout::nchw,
                                                                        Layout::nhwc}) {
  std::string impl;
  for (Layout l : layouts) {
    OpDesc d = base;
    d.layout = l;
    SCOPED_TRACE(describe_op(d));
    auto fast = must(gpu.make_op(d), d);
    auto ref = must(cpu.make_op(d), d);
    if (!fast || !ref) continue;
    impl = fast->impl();
    SCOPED_TRACE(impl);
    const OpRun a = run_op(*fast, gpu, MemKind::device, 42, want_diff_src);
    const OpRun b = run_op(*ref, cpu, MemKind::dram, 42, want_diff_src);
    EXPECT_TRUE(close(a.dst, b.dst, tol, "dst"));
    if (want_diff_src) {
      EXPECT_TRUE(close(a.diff_src, b.diff_src, tol, "diff_src"));
    } else {
      EXPECT_TRUE(close(a.diff_src, std::vector<float>(a.diff_src.size(), -7.f), kExact,
                        "diff_src untouched"));
    }
    EXPECT_EQ(a.diff_weights.size(), b.diff_weights.size());
    for (size_t i = 0; i < std::min(a.diff_weights.size(), b.diff_weights.size()); ++i)
      EXPECT_TRUE(close(a.diff_weights[i], b.diff_weights[i], tol,
                        "diff_weights[" + std::to_string(i) + "]"));
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

// One train_step of `model` on the CPU reference and on the GPU from the same parameters and
// batch: the loss, the hits and every gradient segment agree.
void expect_train_step_matches(Device& gpu, Device& cpu, const std::string& model, ModelInput in,
                               int64_t batch) {
  auto spec = build_model(model, in);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  for (Layout l : kLayouts) {
    SCOPED_TRACE(model + " " + layout_name(l));
    auto cnet = Net::create(spec.value(), batch, l, cpu, MemKind::dram);
    auto gnet = Net::create(spec.value(), batch, l, gpu, MemKind::device);
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
    const StepStats sc =
        cnet.value()->train_step(images.data(), labels.data(), w.data(), diff_c.data());

    const Buffer wd = put(w, MemKind::device), img = put(images, MemKind::device);
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
  }
}

TEST_F(CudaNet, LeNetTrainStepMatchesCpu) {
  expect_train_step_matches(*gpu_, *cpu_, "lenet", {1, 28, 28, 10}, 4);
}

TEST_F(CudaNet, CifarQuickTrainStepMatchesCpu) {
  expect_train_step_matches(*gpu_, *cpu_, "cifar10-quick", {3, 32, 32, 10}, 2);
}

}  // namespace
}  // namespace easel
