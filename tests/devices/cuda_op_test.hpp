// What the CUDA op tests share (test_cuda_ops.cpp, test_cuda_bn_join.cpp): the fixture holding
// one CUDA device and the CPU reference device, device-memory helpers, and the comparison of a
// CUDA op with the reference op of the same descriptor on the same inputs. Every test of the
// fixture skips, with the CUDA runtime's reason, on a machine without a usable GPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "devices/activations.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "devices/device.hpp"
#include "engine/memory.hpp"
#include "tests/support/grad_check.hpp"

namespace easel::cuda_test {

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

// Activations of type t (bf16: rounded on the host) in `kind` memory, and back as f32 (exact).
inline Buffer put_acts(const std::vector<float>& v, DType t, MemKind kind) {
  if (t == DType::f32) return put(v, kind);
  std::vector<uint16_t> b(v.size());
  activations_from_f32(v.data(), t, b.data(), static_cast<int64_t>(v.size()));
  return put(b, kind);
}
inline std::vector<float> get_acts(const Buffer& b, size_t count, DType t) {
  if (t == DType::f32) return get(b, count);
  const std::vector<uint16_t> raw = get<uint16_t>(b, count);
  std::vector<float> v(count);
  activations_to_f32(raw.data(), t, v.data(), static_cast<int64_t>(count));
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

inline ::testing::AssertionResult close(const std::vector<float>& got,
                                        const std::vector<float>& want, Tol tol,
                                        const std::string& what) {
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
// descriptor). Batch norm's parameters are positive (its running variance must be). The
// activations are of the op's desc().act (bf16: the random values rounded), read back as f32.
inline OpRun run_op(Op& op, Device& dev, MemKind kind, uint64_t seed, bool want_diff_src = true,
                    bool training = true) {
  const OpDesc& d = op.desc();
  const DType t = d.act;  // of every activation buffer; parameters are f32
  const Shape4 o = dst_shape(d);
  std::vector<Shape4> shapes{d.src};
  shapes.insert(shapes.end(), d.more_src.begin(), d.more_src.end());
  std::vector<Buffer> srcs, diff_srcs;
  std::vector<const float*> sp;
  std::vector<float*> dsp;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const uint64_t input_seed = i == 0 ? seed : seed + 10 + i;
    srcs.push_back(put_acts(random_vector(shapes[i].count(), input_seed), t, kind));
    diff_srcs.push_back(
        put_acts(std::vector<float>(static_cast<size_t>(shapes[i].count()), -7.f), t, kind));
    sp.push_back(srcs.back().as<float>());
    dsp.push_back(diff_srcs.back().as<float>());
  }
  if (!want_diff_src) dsp[0] = nullptr;
  const Buffer diff_dst = put_acts(random_vector(o.count(), seed + 1), t, kind);
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
  const Buffer dst = put_acts(std::vector<float>(static_cast<size_t>(o.count()), -7.f), t, kind);
  op.forward_n(sp, dst.as<float>(), wp, training);
  op.backward_n(sp, dst.as<float>(), diff_dst.as<float>(), dsp, wp, dwp);
  dev.synchronize();
  OpRun r;
  r.dst = get_acts(dst, static_cast<size_t>(o.count()), t);
  r.diff_src = get_acts(diff_srcs[0], static_cast<size_t>(d.src.count()), t);
  for (size_t i = 1; i < shapes.size(); ++i)
    r.more_diff_src.push_back(get_acts(diff_srcs[i], static_cast<size_t>(shapes[i].count()), t));
  for (size_t i = 0; i < params.size(); ++i) {
    r.diff_weights.push_back(get(dw[i], params[i].size()));
    r.weights.push_back(get(w[i], params[i].size()));
  }
  return r;
}

inline std::unique_ptr<Op> must(Result<std::unique_ptr<Op>> r, const OpDesc& d) {
  EXPECT_TRUE(r.ok()) << describe_op(d) << ": " << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

// A CUDA op against the reference op of the same descriptor: dst, every diff_src (untouched
// where skipped), every diff_weights (the state parameters' exactly 0) and the parameters after
// forward (batch norm's running statistics).
inline void expect_same_run(Op& fast, Device& gpu, Op& ref, Device& cpu, Tol tol,
                            bool want_diff_src, bool training) {
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
inline std::string expect_matches_ref(
    Device& gpu, Device& cpu, const OpDesc& base, Tol tol, bool want_diff_src = true,
    std::initializer_list<Layout> layouts = {Layout::nchw, Layout::nhwc}, bool training = true) {
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

inline bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace easel::cuda_test
