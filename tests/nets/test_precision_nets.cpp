// Every built-in net's forward (logits) and backward (the whole gradient arena) at tf32 and bf16
// against fp32, one training step from the same weights and batch, within the tolerances of
// docs/NETS.md "Precision":
//
// A product of length K whose inputs are rounded with unit roundoff u (2^-8 bf16, 2^-11 tf32;
// devices/ref_precision.hpp) and summed in f32 has each term a_i b_i (1 + d_i), |d_i| <= 2u + u^2:
// |error| <= (2u + u^2) sum |a_i b_i|. Rounding to nearest makes the d_i independent, of mean 0,
// so the error of the sum is about 2u / sqrt(3) ||a o b||_2, and the sum itself is about
// ||a o b||_2 for terms of mixed sign: a layer's normwise relative error is ~1.2u, whatever K.
// L such layers in a row add theirs (each amplified by the later layers' gain, ~1 for
// normalised nets): the logits' error is ~1.2u sqrt(L) typically and below 4u L as a bound. The
// gradient passes the L layers forward and back (2L roundings of activations, weights and
// gradients): 8u L, plus the decisions that flip: a ReLU mask or a max-pool argmax whose inputs
// lie within the rounding error of each other (a fraction ~u of them) sends an O(1) share of
// its gradient elsewhere, normwise ~sqrt(u): 8u L + 2 sqrt(u).
// Batch norm (resnet18, resnet50, googlenet) breaks the backward bound at a test's batch of 2:
// its gradient (g - mean g - x^ mean(g x^)) / sigma subtracts nearly equal terms over 8 values
// per channel on the last 2x2 maps, so the fp32 gradient carries large errors of its own; for
// those nets the test checks the forward bound and that the gradient is finite, and reports
// the gradient's difference (docs/NETS.md "Precision").
//
// The precisions run as the reference of devices/ref_precision.hpp (the CUDA device's tensor-core
// arithmetic, up to the order of its f32 sums) over the CPU's fast fp32 ops, and, where the CPU
// computes bf16 natively, as oneDNN's bf16 kernels themselves.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "devices/cpu/dnnl_ops.hpp"
#include "devices/device.hpp"
#include "devices/ref_precision.hpp"
#include "engine/arena.hpp"
#include "engine/rng.hpp"
#include "nets/models/models.hpp"
#include "nets/net.hpp"

namespace easel {
namespace {

// The CPU's fast ops with their convolutions and inner products rounding as precision p; counts
// the layers it rounds (L above).
class RoundingDevice final : public Device {
 public:
  RoundingDevice(std::unique_ptr<Device> inner, Precision p) : inner_(std::move(inner)), p_(p) {}
  std::string name() const override { return inner_->name(); }
  Result<std::unique_ptr<Op>> make_op(const OpDesc& d) override {
    EASEL_ASSIGN_OR_RETURN(std::unique_ptr<Op> op, inner_->make_op(d));
    if (d.kind == OpKind::conv || d.kind == OpKind::inner_product) ++rounded_layers;
    return with_rounded_inputs(std::move(op), p_);
  }
  Result<std::unique_ptr<LossOp>> make_loss(int64_t batch, int64_t classes) override {
    return inner_->make_loss(batch, classes);
  }
  int rounded_layers = 0;

 private:
  std::unique_ptr<Device> inner_;
  Precision p_;
};

struct Step {
  std::vector<float> logits, grad;
};

// One training step of `name` on `device` (batch 2, nhwc, weights from seed 1, a fixed batch).
Step one_step(const std::string& name, Device& device) {
  const ModelEntry* entry = nullptr;
  for (const ModelEntry& e : model_list())
    if (e.name == name) entry = &e;
  EXPECT_NE(entry, nullptr) << name;
  ModelInput in = entry->input;
  if (in.height > 64) in = {in.channels, 64, 64, in.classes};  // the 224x224 nets at 64x64
  auto spec = build_model(name, in);
  EXPECT_TRUE(spec.ok()) << spec.status().to_string();
  constexpr int64_t kBatch = 2;
  auto net = Net::create(spec.value(), kBatch, Layout::nhwc, device, MemKind::dram);
  EXPECT_TRUE(net.ok()) << net.status().to_string();
  if (!net.ok()) return {};
  const int64_t n = net.value()->params().total_floats();
  std::vector<float> w(static_cast<size_t>(n)), g(static_cast<size_t>(n));
  net.value()->init_params(w.data(), 1);
  std::vector<float> images(static_cast<size_t>(kBatch * in.channels * in.height * in.width));
  Rng rng = Rng::stream(3, 0);
  for (float& x : images)
    x = rng.uniform(0.f, 1.f);
  std::vector<int32_t> labels(kBatch);
  for (int32_t& l : labels)
    l = static_cast<int32_t>(rng.below(static_cast<uint64_t>(in.classes)));
  net.value()->train_step(images.data(), labels.data(), w.data(), g.data());
  const float* out = net.value()->output();
  return {std::vector<float>(out, out + kBatch * in.classes), g};
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

// The gradient's bound (above).
double bwd_bound(double u, double layers) {
  return 8 * u * layers + 2 * std::sqrt(u);
}

class PrecisionNets : public ::testing::TestWithParam<std::string> {};

TEST_P(PrecisionNets, ForwardAndBackwardWithinTheBound) {
  const std::string name = GetParam();
  const bool batch_norm = name == "resnet18" || name == "resnet50" || name == "googlenet";
  const bool small = name == "lenet" || name == "mlp" || name.rfind("cifar10", 0) == 0;
  auto fp32 = make_cpu_device(ImplChoice::fast, Precision::fp32);
  const Step want = one_step(name, *fp32);
  ASSERT_FALSE(want.grad.empty());
  std::string row = name;
  for (Precision p : {Precision::tf32, Precision::bf16}) {
    RoundingDevice dev(make_cpu_device(ImplChoice::fast, Precision::fp32), p);
    const Step got = one_step(name, dev);
    ASSERT_EQ(got.grad.size(), want.grad.size());
    const double u = unit_roundoff(p), layers = dev.rounded_layers;
    ASSERT_GT(layers, 0);
    const double fwd = rel_error(got.logits, want.logits), bwd = rel_error(got.grad, want.grad);
    EXPECT_GT(fwd, 0) << precision_name(p) << ": nothing was rounded";
    EXPECT_LT(fwd, 4 * u * layers) << precision_name(p) << " logits, L = " << layers;
    EXPECT_TRUE(std::isfinite(bwd)) << precision_name(p);
    if (!batch_norm) {
      EXPECT_LT(bwd, bwd_bound(u, layers)) << precision_name(p) << " gradient";
    }
    char cell[96];
    std::snprintf(cell, sizeof cell, " | L=%d %s fwd %.2e (%.2f u) bwd %.2e (%.2f u)",
                  dev.rounded_layers, precision_name(p), fwd, fwd / u, bwd, bwd / u);
    row += cell;
  }
  // oneDNN's own bf16 kernels, where the CPU has them: the same bound (the small nets: the
  // kernels are the same on the large ones, and their steps cost the suite's time).
  if (dnnl_bf16_available() && small) {
    DnnlOptions o;
    o.precision = Precision::bf16;
    auto dev = make_cpu_device(ImplChoice::fast, o);
    const Step got = one_step(name, *dev);
    RoundingDevice count(make_cpu_device(ImplChoice::fast, Precision::fp32), Precision::bf16);
    one_step(name, count);
    const double u = unit_roundoff(Precision::bf16), layers = count.rounded_layers;
    const double fwd = rel_error(got.logits, want.logits), bwd = rel_error(got.grad, want.grad);
    EXPECT_LT(fwd, 4 * u * layers) << "oneDNN bf16 logits";
    if (!batch_norm) {
      EXPECT_LT(bwd, bwd_bound(u, layers)) << "oneDNN bf16 gradient";
    }
    char cell[80];
    std::snprintf(cell, sizeof cell, " | dnnl-bf16 fwd %.2e (%.2f u) bwd %.2e (%.2f u)", fwd,
                  fwd / u, bwd, bwd / u);
    row += cell;
  }
  std::printf("[precision] %s\n", row.c_str());
}

INSTANTIATE_TEST_SUITE_P(EveryNet, PrecisionNets,
                         ::testing::Values("lenet", "mlp", "cifar10-quick", "cifar10-full",
                                           "alexnet-cifar", "vgg19", "resnet18", "resnet50",
                                           "googlenet"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace easel
