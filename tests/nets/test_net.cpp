// Net assembly: LeNet's parameter count and layout, fusion of ReLU, fillers, and an end-to-end
// gradient check of a whole net (loss included) against central differences.
#include <gtest/gtest.h>

#include <cmath>

#include "devices/device.hpp"
#include "engine/span_ops.hpp"
#include "nets/graph.hpp"
#include "nets/models/models.hpp"
#include "nets/net.hpp"

namespace easel {
namespace {

std::unique_ptr<Net> make_net(const std::string& model, ModelInput in, int64_t batch, Layout layout,
                              ImplChoice impl) {
  static std::unique_ptr<Device> fast = make_cpu_device(ImplChoice::fast);
  static std::unique_ptr<Device> ref = make_cpu_device(ImplChoice::ref);
  auto spec = build_model(model, in);
  EXPECT_TRUE(spec.ok()) << spec.status().to_string();
  auto net = Net::create(spec.value(), batch, layout, impl == ImplChoice::fast ? *fast : *ref,
                         MemKind::dram);
  EXPECT_TRUE(net.ok()) << net.status().to_string();
  return std::move(net).value();
}

TEST(Net, LeNetHasCaffesParameterCount) {
  auto net = make_net("lenet", {1, 28, 28, 10}, 4, Layout::nchw, ImplChoice::ref);
  EXPECT_EQ(net->params().param_count(), 431080);
  const auto& segs = net->params().segments();
  ASSERT_EQ(segs.size(), 8u);
  EXPECT_EQ(segs[0].name, "conv1.weights");
  EXPECT_EQ(segs[0].count, 20 * 1 * 5 * 5);
  EXPECT_EQ(segs[2].count, 50 * 20 * 5 * 5);
  EXPECT_EQ(segs[4].count, 500 * 800);
  EXPECT_EQ(segs[6].count, 10 * 500);
  EXPECT_FLOAT_EQ(segs[1].lr_mult, 2.f);  // Caffe's bias lr_mult
  for (const auto& s : segs)
    EXPECT_EQ(s.offset % kArenaAlign, 0);
  // ip1 + relu1 are fused into one layer.
  const auto layers = net->describe();
  ASSERT_EQ(layers.size(), 6u);
  EXPECT_EQ(layers[4].kind, "inner_product+relu");
  EXPECT_NEAR(net->flops_per_image_train() / 1e6, 13.18, 0.6);  // PERF-NOTES.md: 13.18 MFLOP
}

TEST(Net, XavierFillerMatchesCaffeRange) {
  auto net = make_net("lenet", {1, 28, 28, 10}, 2, Layout::nchw, ImplChoice::ref);
  std::vector<float> w(static_cast<size_t>(net->params().total_floats()));
  net->init_params(w.data(), 7);
  const Segment& conv2 = net->params().segment(2);
  const float a = std::sqrt(3.f / (20 * 25));
  float lo = 1, hi = -1;
  for (int64_t i = 0; i < conv2.count; ++i) {
    lo = std::min(lo, w[static_cast<size_t>(conv2.offset + i)]);
    hi = std::max(hi, w[static_cast<size_t>(conv2.offset + i)]);
  }
  EXPECT_GE(lo, -a);
  EXPECT_LE(hi, a);
  EXPECT_LT(lo, -0.9f * a);
  EXPECT_GT(hi, 0.9f * a);
  const Segment& b = net->params().segment(1);
  for (int64_t i = 0; i < b.count; ++i)
    EXPECT_EQ(w[static_cast<size_t>(b.offset + i)], 0.f);
  std::vector<float> w2(w.size());
  net->init_params(w2.data(), 7);
  EXPECT_EQ(w, w2);
}

TEST(Net, RejectsMismatchedClasses) {
  auto spec = build_model("lenet", {1, 28, 28, 10});
  ASSERT_TRUE(spec.ok());
  spec.value().classes = 7;
  auto dev = make_cpu_device(ImplChoice::ref);
  auto net = Net::create(spec.value(), 2, Layout::nchw, *dev, MemKind::dram);
  ASSERT_FALSE(net.ok());
  EXPECT_NE(net.status().message().find("classes"), std::string::npos);
  auto unknown = build_model("resnet-9000", {1, 28, 28, 10});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("lenet"), std::string::npos);
}

// Activations that cannot fit in the machine's memory are refused before any is allocated
// (images of 4096 x 4096 took the machine's memory page by page); what fits once does not fit
// for as many groups as it would take.
TEST(Net, RefusesActivationsLargerThanTheMachine) {
  auto dev = make_cpu_device(ImplChoice::ref);
  auto huge = build_model("lenet", {1, 4096, 4096, 10});
  ASSERT_TRUE(huge.ok()) << huge.status().to_string();
  auto net = Net::create(huge.value(), 64, Layout::nchw, *dev, MemKind::dram);
  ASSERT_FALSE(net.ok());
  EXPECT_EQ(net.status().code(), Code::invalid_argument);
  EXPECT_NE(net.status().message().find("net 'lenet' on 1x4096x4096 images, batch 64, 1 group(s): "
                                        "their activations need more than this machine's"),
            std::string::npos)
      << net.status().message();
  auto small = build_model("lenet", {1, 28, 28, 10});
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(Net::create(small.value(), 64, Layout::nchw, *dev, MemKind::dram).ok());
  auto many = Net::create(small.value(), 64, Layout::nchw, *dev, MemKind::dram, 1 << 30);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("1073741824 group(s)"), std::string::npos)
      << many.status().message();
}

// The output gradients share buffers where their lives in the backward pass do not overlap:
// resnet18 needs four buffers, 27% of one per output (at 64 x 64 as at 224 x 224). That the
// shared gradients stay right is the gradient checks' (NetGraph's fan-out, add, concat).
TEST(Net, OutputGradientsShareBuffers) {
  auto lenet = make_net("lenet", {1, 28, 28, 10}, 4, Layout::nchw, ImplChoice::fast);
  EXPECT_LE(lenet->gradient_bytes(), lenet->unshared_gradient_bytes());
  auto resnet = make_net("resnet18", {3, 64, 64, 10}, 2, Layout::nchw, ImplChoice::fast);
  EXPECT_LT(resnet->gradient_bytes(), resnet->unshared_gradient_bytes() * 3 / 10)
      << resnet->gradient_bytes() << " of " << resnet->unshared_gradient_bytes();
  // What the memory fit counts (net_cost, without building the net) is what Net allocates,
  // for a chain, residual joins and googlenet's concatenated branches.
  for (const char* name : {"lenet", "resnet18", "googlenet"}) {
    const ModelInput in =
        std::string(name) == "lenet" ? ModelInput{1, 28, 28, 10} : ModelInput{3, 64, 64, 10};
    auto spec = build_model(name, in);
    ASSERT_TRUE(spec.ok()) << spec.status().to_string();
    auto cost = net_cost(spec.value());
    ASSERT_TRUE(cost.ok()) << cost.status().to_string();
    auto net = make_net(name, in, 2, Layout::nchw, ImplChoice::fast);
    EXPECT_EQ(net->gradient_bytes(),
              static_cast<size_t>(cost.value().gradient_floats) * 2 * sizeof(float))
        << name;
    EXPECT_LT(cost.value().gradient_floats, cost.value().activation_floats) << name;
  }
}

// d mean-loss / d weights of a whole net against central differences, in double-summed loss.
void check_net_gradient(const std::string& model, ModelInput in, Layout layout, ImplChoice impl,
                        int checks_per_segment = 6) {
  const int64_t batch = 3;
  auto net = make_net(model, in, batch, layout, impl);
  const int64_t n = net->params().total_floats();
  std::vector<float> w(static_cast<size_t>(n)), diff(static_cast<size_t>(n));
  net->init_params(w.data(), 3);
  Rng rng(11);
  // Biases away from zero so that ReLU kinks are rare.
  for (const auto& s : net->params().segments())
    if (s.dims.size() == 1)
      for (int64_t i = 0; i < s.count; ++i)
        w[static_cast<size_t>(s.offset + i)] =
            (rng.uniform() < 0.5f ? -1.f : 1.f) * rng.uniform(0.05f, 0.1f);
  std::vector<float> images(static_cast<size_t>(net->input_shape().count()));
  for (auto& x : images)
    x = rng.uniform();
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (auto& l : labels)
    l = static_cast<int32_t>(rng.below(static_cast<uint64_t>(in.classes)));
  net->train_step(images.data(), labels.data(), w.data(), diff.data());
  auto loss_at = [&](std::vector<float>& ww) {
    const EvalStats s = net->evaluate(images.data(), labels.data(), batch, ww.data());
    return s.loss_sum / batch;
  };
  int checked = 0, bad = 0;
  for (const auto& s : net->params().segments()) {
    for (int k = 0; k < checks_per_segment; ++k) {
      const size_t i = static_cast<size_t>(
          s.offset + static_cast<int64_t>(rng.below(static_cast<uint64_t>(s.count))));
      const float h = 2e-3f;
      const float w0 = w[i];
      w[i] = w0 + h;
      const double lp = loss_at(w);
      w[i] = w0 - h;
      const double lm = loss_at(w);
      w[i] = w0;
      const double num = (lp - lm) / (2 * h);
      ++checked;
      if (std::abs(num - diff[i]) > 2e-3 + 5e-2 * std::abs(num)) {
        ++bad;
        ADD_FAILURE() << s.name << "[" << i - static_cast<size_t>(s.offset) << "]: analytic "
                      << diff[i] << " numeric " << num;
      }
    }
  }
  EXPECT_EQ(bad, 0) << "of " << checked;
}

TEST(Net, LeNetGradientMatchesFiniteDifferencesRef) {
  check_net_gradient("lenet", {1, 28, 28, 10}, Layout::nchw, ImplChoice::ref);
}
TEST(Net, LeNetGradientMatchesFiniteDifferencesFastNhwc) {
  check_net_gradient("lenet", {1, 28, 28, 10}, Layout::nhwc, ImplChoice::fast);
}
TEST(Net, CifarQuickGradientMatchesFiniteDifferencesFast) {
  check_net_gradient("cifar10-quick", {3, 32, 32, 10}, Layout::nhwc, ImplChoice::fast);
}
TEST(Net, CifarQuickGradientMatchesFiniteDifferencesRef) {
  check_net_gradient("cifar10-quick", {3, 32, 32, 10}, Layout::nchw, ImplChoice::ref, 2);
}

TEST(Net, FastAndRefAgreeOnATrainingStep) {
  for (Layout layout : {Layout::nchw, Layout::nhwc}) {
    auto a = make_net("lenet", {1, 28, 28, 10}, 8, layout, ImplChoice::fast);
    auto b = make_net("lenet", {1, 28, 28, 10}, 8, layout, ImplChoice::ref);
    const int64_t n = a->params().total_floats();
    std::vector<float> w(static_cast<size_t>(n)), da(w.size()), db(w.size());
    a->init_params(w.data(), 5);
    Rng rng(2);
    std::vector<float> images(static_cast<size_t>(a->input_shape().count()));
    for (auto& x : images)
      x = rng.uniform();
    std::vector<int32_t> labels(8);
    for (auto& l : labels)
      l = static_cast<int32_t>(rng.below(10));
    const StepStats sa = a->train_step(images.data(), labels.data(), w.data(), da.data());
    const StepStats sb = b->train_step(images.data(), labels.data(), w.data(), db.data());
    EXPECT_NEAR(sa.loss, sb.loss, 1e-4);
    double num = 0, den = 0;
    for (size_t i = 0; i < da.size(); ++i) {
      num += (da[i] - db[i]) * (da[i] - db[i]);
      den += db[i] * db[i];
    }
    EXPECT_LT(std::sqrt(num / den), 1e-4) << layout_name(layout);
  }
}

}  // namespace
}  // namespace easel
