// The second element type through the GPU path, on the stand-in GPU (standin_gpu.hpp), which
// keeps bf16 activations in its memory at --precision bf16 as the CUDA device does:
//   - a batch that crosses as bytes and is normalised on the device equals the host's float
//     batch bit for bit (f32), or that batch rounded once (bf16);
//   - a GPU run moves its batches as bytes (4x fewer than floats);
//   - nets with bf16 activations and gradients between layers stay within docs/NETS.md's
//     bound of fp32 ("Precision": bf16 activations).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "devices/activations.hpp"
#include "devices/ref_precision.hpp"
#include "nets/data/augment.hpp"
#include "nets/models/description.hpp"
#include "nets/models/models.hpp"
#include "run/trainer.hpp"
#include "tests/algos/small_run.hpp"
#include "tests/support/standin_gpu.hpp"
#include "tests/support/test_nets.hpp"

namespace easel {
namespace {

using standin::fake_backend;
using standin::FakeGpu;
using standin::g_bad_pointers;
using standin::g_gpu_count;
using standin::g_host_link_bytes;

Buffer on_device(size_t bytes) {
  auto b = Buffer::allocate(std::max<size_t>(bytes, 1), MemKind::device);
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  return std::move(b).value();
}

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// Device::normalize_bytes on the stand-in against gather_batch, for a held 3-channel set, both
// layouts, with and without augmentation (crop with padding, flip, per-channel normalisation).
TEST(StandInBf16, NormalizedBytesEqualTheHostBatch) {
  auto data = load_data("synthetic:64:3x6x5:4", MemKind::dram, 3);
  ASSERT_TRUE(data.ok()) << data.status().to_string();
  const Dataset& ds = data->train;
  FakeGpu gpu(0, Precision::bf16);
  ASSERT_TRUE(gpu.attach().ok());
  constexpr int64_t kN = 7;
  const std::vector<int64_t> idx = {3, 0, 9, 5, 17, 2, 11};
  for (const char* text : {"none", "crop-pad=2,flip,normalize=cifar10", "normalize=imagenet"}) {
    auto a = parse_augment(text);
    ASSERT_TRUE(a.ok());
    std::vector<AugmentDraw> draws(kN);
    for (int64_t i = 0; i < kN; ++i)
      draws[static_cast<size_t>(i)] = draw_augment(*a, 5, 1, 0, i);
    const std::vector<float> table = pixel_table(ds, *a);
    ASSERT_EQ(table.size(), static_cast<size_t>(3 * 256));
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
      SCOPED_TRACE(std::string(text) + (layout == Layout::nhwc ? " nhwc" : " nchw"));
      const Shape4 shape{kN, 3, 6, 5};
      const size_t count = static_cast<size_t>(shape.count());
      std::vector<float> want(count);
      std::vector<int32_t> want_labels(kN), labels(kN);
      gather_batch(ds, idx.data(), kN, layout, want.data(), want_labels.data(), *a, draws.data());
      std::vector<uint8_t> bytes(count);
      gather_batch_bytes(ds, idx.data(), kN, layout, bytes.data(), labels.data(), *a, draws.data());
      EXPECT_EQ(labels, want_labels);
      Buffer dev_bytes = on_device(count), dev_table = on_device(table.size() * sizeof(float));
      Buffer f32 = on_device(count * sizeof(float)), bf16 = on_device(count * 2);
      gpu.upload(dev_bytes.data(), bytes.data(), count);
      gpu.upload(dev_table.data(), table.data(), table.size() * sizeof(float));
      gpu.normalize_bytes(dev_bytes.as<uint8_t>(), dev_table.as<float>(), shape, layout, DType::f32,
                          f32.data());
      gpu.normalize_bytes(dev_bytes.as<uint8_t>(), dev_table.as<float>(), shape, layout,
                          DType::bf16, bf16.data());
      std::vector<float> got(count);
      std::vector<uint16_t> got16(count);
      gpu.download(got.data(), f32.data(), count * sizeof(float));
      gpu.download(got16.data(), bf16.data(), count * 2);
      int wrong = 0, wrong16 = 0;
      for (size_t i = 0; i < count; ++i) {
        wrong += bits_of(got[i]) != bits_of(want[i]);
        wrong16 += got16[i] != bf16_from_f32(want[i]);
      }
      EXPECT_EQ(wrong, 0) << "of " << count;
      EXPECT_EQ(wrong16, 0) << "of " << count;
    }
  }
}

TrainConfig small_run(const std::string& device) {
  TrainConfig c = test::gpu_config("msgd", device);
  c.iterations = 12;
  c.eval_every = 6;
  return c;
}

// The batches cross as bytes: the run's whole host traffic (batches, labels, the evaluations'
// test batches, weights) stays below what its training batches alone would take as floats.
TEST(StandInBf16, GpuBatchesCrossAsBytes) {
  auto data = load_data("synthetic:256:1x16x16:4", MemKind::dram, 5);
  ASSERT_TRUE(data.ok()) << data.status().to_string();
  g_gpu_count = 1;
  g_host_link_bytes = 0;
  g_bad_pointers = 0;
  const TrainConfig c = small_run("cuda");
  auto r = train(c, *data, nullptr, fake_backend());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const int64_t float_batches = c.iterations * c.batch * 256 * int64_t{sizeof(float)};
  EXPECT_LT(g_host_link_bytes.load(), float_batches);
  EXPECT_EQ(g_bad_pointers.load(), 0);
}

// ||a - b||_2 / ||b||_2
double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

struct Step {
  std::vector<float> logits, grad;
  DType act = DType::f32;
  size_t layers = 0;
};

// One training step of spec (batch 2, nchw, weights from seed 1) on `device`, its input
// normalised from the same bytes (on the device where it is one).
Step one_step(const NetSpec& spec, Device& device) {
  constexpr int64_t kBatch = 2;
  const bool gpu = !device.is_host();
  EXPECT_TRUE(device.attach().ok());
  auto made =
      Net::create(spec, kBatch, Layout::nchw, device, gpu ? MemKind::device : MemKind::dram);
  EXPECT_TRUE(made.ok()) << made.status().to_string();
  if (!made.ok()) return {};
  Net& net = **made;
  const Shape4 in = net.input_shape();
  const size_t count = static_cast<size_t>(in.count());
  const int64_t n = net.params().total_floats();
  std::vector<float> w(static_cast<size_t>(n)), g(static_cast<size_t>(n));
  net.init_params(w.data(), 1);
  std::vector<uint8_t> bytes(count);
  Rng rng = Rng::stream(3, 0);
  for (uint8_t& b : bytes)
    b = static_cast<uint8_t>(rng.below(256));
  std::vector<float> table(static_cast<size_t>(in.c * 256));
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = (static_cast<float>(i % 256) / 255.f - 0.5f) / 0.25f;
  const int32_t labels[kBatch] = {1, 3};
  Step out;
  out.act = net.activation_type();
  out.layers = net.layer_count();
  if (!gpu) {
    std::vector<float> images(count);
    normalize_bytes_host(bytes.data(), table.data(), in, Layout::nchw, DType::f32, images.data());
    net.train_step(images.data(), labels, w.data(), g.data());
  } else {
    Buffer dev_bytes = on_device(count), dev_table = on_device(table.size() * sizeof(float));
    Buffer input = on_device(count * dtype_bytes(out.act));
    Buffer dev_labels = on_device(sizeof labels);
    Buffer dev_w = on_device(w.size() * sizeof(float)), dev_g = on_device(g.size() * sizeof(float));
    dev_g.zero();
    device.upload(dev_bytes.data(), bytes.data(), count);
    device.upload(dev_table.data(), table.data(), table.size() * sizeof(float));
    device.upload(dev_labels.data(), labels, sizeof labels);
    device.upload(dev_w.data(), w.data(), w.size() * sizeof(float));
    device.normalize_bytes(dev_bytes.as<uint8_t>(), dev_table.as<float>(), in, Layout::nchw,
                           out.act, input.data());
    net.train_step(input.as<float>(), dev_labels.as<int32_t>(), dev_w.as<float>(),
                   dev_g.as<float>());
    device.download(g.data(), dev_g.data(), g.size() * sizeof(float));
  }
  out.logits = net.output_values(net.layer_count());
  out.grad = g;
  return out;
}

// docs/NETS.md "Precision": with bf16 activations every layer's output is rounded as well as
// the products' inputs, so T, the number of layers, takes the place of L in the bounds: logits
// within 4uT, the gradient within 8uT + 2 sqrt(u).
TEST(StandInBf16, ActivationsWithinTheBound) {
  struct Case {
    std::string name;
    Result<NetSpec> spec;
  };
  std::vector<Case> cases;
  for (const char* name : {"lenet", "mlp", "cifar10-quick"}) {
    const ModelInput in = std::string(name) == "cifar10-quick" ? ModelInput{3, 32, 32, 10}
                                                               : ModelInput{1, 28, 28, 10};
    cases.push_back({name, build_model(name, in)});
  }
  cases.push_back(
      {"bn-join", parse_net_description(test::kBnJoinNet, "bn-join", ModelInput{3, 12, 12, 5})});
  auto cpu = make_cpu_device(ImplChoice::ref);
  const double u = unit_roundoff(Precision::bf16);
  for (Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(c.spec.ok()) << c.spec.status().to_string();
    const Step want = one_step(*c.spec, *cpu);
    FakeGpu gpu(0, Precision::bf16);
    const Step got = one_step(*c.spec, gpu);
    ASSERT_EQ(got.act, DType::bf16);
    ASSERT_EQ(got.grad.size(), want.grad.size());
    ASSERT_EQ(got.logits.size(), want.logits.size());
    for (float x : got.logits)  // bf16 in the device's memory: no bits below the top 16
      ASSERT_EQ(bits_of(x) & 0xffffu, 0u) << x;
    const double t = static_cast<double>(got.layers);
    const double fwd = rel_error(got.logits, want.logits), bwd = rel_error(got.grad, want.grad);
    EXPECT_GT(fwd, 0) << "nothing was rounded";
    EXPECT_LT(fwd, 4 * u * t) << "logits, T = " << t;
    if (c.name != "bn-join") {  // batch norm at batch 2: docs/NETS.md (forward bound only)
      EXPECT_LT(bwd, 8 * u * t + 2 * std::sqrt(u)) << "gradient, T = " << t;
    }
    EXPECT_TRUE(std::isfinite(bwd));
    std::printf("[bf16 activations] %s T=%zu fwd %.2e (%.2f u) bwd %.2e (%.2f u)\n", c.name.c_str(),
                got.layers, fwd, fwd / u, bwd, bwd / u);
  }
}

}  // namespace
}  // namespace easel
