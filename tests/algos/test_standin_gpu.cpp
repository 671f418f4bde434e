// The stand-in GPU's rules (tests/support/standin_gpu.hpp), each caught: host code touching
// device memory faults, a unit given another unit's pointer aborts, an op's output is there only
// after the stream is synchronised, and an allocation past the memory limit fails as out of
// memory naming the buffer class. And the first thing they caught: a net whose tensor is read
// by several layers runs its backward pass on the device (Net::backward adds the gradients with
// the device's kernels).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "nets/models/description.hpp"
#include "run/trainer.hpp"
#include "tests/support/standin_gpu.hpp"
#include "tests/support/test_nets.hpp"

namespace easel {
namespace {

using standin::FakeGpu;
using standin::Opened;

class StandInGpu : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

Buffer device_floats(int64_t n) {
  auto b = Buffer::allocate(static_cast<size_t>(n) * sizeof(float), MemKind::device);
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  return std::move(b).value();
}

TEST_F(StandInGpu, HostTouchOfDeviceMemoryFaults) {
  FakeGpu gpu(0);
  ASSERT_TRUE(gpu.attach().ok());
  Buffer b = device_floats(16);
  volatile float* p = b.as<float>();
  EXPECT_DEATH(p[3] = 1.f, "");
  EXPECT_DEATH((void)p[3], "");
  {
    Opened open({b.data()});  // as the stand-in's own calls do
    p[3] = 1.f;
    EXPECT_EQ(p[3], 1.f);
  }
  EXPECT_DEATH((void)p[3], "") << "closed again after the call";
  // The engine's copies and the device's own calls reach it.
  const std::vector<float> host(16, 2.f);
  copy_bytes(b.data(), MemKind::device, host.data(), MemKind::dram, 16 * sizeof(float));
  std::vector<float> back(16);
  gpu.download(back.data(), b.data(), 16 * sizeof(float));
  EXPECT_EQ(back, host);
}

TEST_F(StandInGpu, UnitsAreToldApart) {
  FakeGpu zero(0), one(1);
  ASSERT_TRUE(zero.attach().ok());
  Buffer on_zero = device_floats(8);
  ASSERT_TRUE(one.attach().ok());
  Buffer on_one = device_floats(8);
  int unit = -1;
  ASSERT_TRUE(standin::is_device(on_zero.data(), &unit));
  EXPECT_EQ(unit, 0);
  ASSERT_TRUE(standin::is_device(on_one.data(), &unit));
  EXPECT_EQ(unit, 1);
  one.kernels().scale(on_one.as<float>(), 2.f, 8);  // its own: fine
  one.synchronize();
  EXPECT_DEATH(one.kernels().scale(on_zero.as<float>(), 2.f, 8),
               "a pointer of GPU 0 used on GPU 1");
  // Copies may cross units (cudaMemcpy with unified addressing).
  copy_bytes(on_one.data(), MemKind::device, on_zero.data(), MemKind::device, 8 * sizeof(float));
}

TEST_F(StandInGpu, OpOutputIsThereOnlyAfterTheStreamIsSynchronised) {
  FakeGpu gpu(0);
  ASSERT_TRUE(gpu.attach().ok());
  OpDesc d{.kind = OpKind::relu, .src = {1, 1, 2, 2}};
  auto op = gpu.make_op(d);
  ASSERT_TRUE(op.ok()) << op.status().to_string();
  Buffer src = device_floats(4), dst = device_floats(4);
  const float in[4] = {-1.f, 2.f, -3.f, 4.f};
  gpu.upload(src.data(), in, sizeof in);
  const float* srcs[] = {src.as<float>()};
  (*op)->forward_n(srcs, dst.as<float>(), {}, true);
  {
    Opened look({dst.data()});  // a debugger's look: nothing has run yet
    EXPECT_TRUE(std::isnan(dst.as<float>()[1])) << "fresh device memory holds NaNs";
  }
  gpu.synchronize();
  {
    Opened look({dst.data()});
    EXPECT_EQ(dst.as<float>()[0], 0.f);
    EXPECT_EQ(dst.as<float>()[1], 2.f);
  }
  // download and the engine's copies wait for the compute stream.
  (*op)->forward_n(srcs, dst.as<float>(), {}, true);
  std::vector<float> out(4);
  copy_bytes(out.data(), MemKind::dram, dst.data(), MemKind::device, sizeof in);
  EXPECT_EQ(out, (std::vector<float>{0.f, 2.f, 0.f, 4.f}));
}

DataSplit& tiny_data() {
  static DataSplit d = [] {
    auto r = load_data("synthetic:64:3x12x12:5", MemKind::dram, 5);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(r).value();
  }();
  return d;
}

TrainConfig gpu_config(const std::string& net) {
  TrainConfig c;
  c.net = net;
  c.data = "synthetic";
  c.algo = "msgd";
  c.iterations = 2;
  c.eval_every = 2;
  c.batch = 8;
  c.lr = 0.01;
  c.seed = 3;
  c.impl = ImplChoice::ref;
  c.device = parse_device("cuda").value();
  c.plan.threads_per_group = 1;
  c.plan.oversubscribe = true;
  c.progress = Progress::none;
  return c;
}

TEST_F(StandInGpu, OutOfMemoryNamesTheBufferClass) {
  standin::g_gpu_count = 1;
  const std::string net = test::write_test_net("standin_oom.toml", test::kBnJoinNet);
  for (const auto& [limit, what] :
       std::vector<std::pair<int64_t, std::string>>{{4096, "activations"}, {0, ""}}) {
    standin::set_memory_limit(limit > 0 ? limit : int64_t{1} << 30);
    auto r = train(gpu_config(net), tiny_data(), nullptr, standin::fake_backend());
    if (what.empty()) {
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      continue;
    }
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("out of memory"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
  }
}

// One training step of `spec` (batch 4) on a stand-in GPU: 0 when every gradient is finite.
int one_step_on_the_device(const NetSpec& spec) {
  FakeGpu gpu(0);
  if (!gpu.attach().ok()) return 3;
  auto net = Net::create(spec, 4, Layout::nchw, gpu, MemKind::device);
  if (!net.ok()) return 4;
  const int64_t n = (*net)->params().total_floats();
  std::vector<float> w(static_cast<size_t>(n));
  (*net)->init_params(w.data(), 1);
  Buffer dw = device_floats(n), dev_w = device_floats(n);
  dw.zero();  // the state segments (batch norm's statistics) have no gradient
  Buffer images = device_floats((*net)->input_shape().count());
  auto labels = Buffer::allocate(4 * sizeof(int32_t), MemKind::device);
  if (!labels.ok()) return 5;
  std::vector<float> img(static_cast<size_t>((*net)->input_shape().count()), 0.5f);
  const int32_t lab[4] = {0, 1, 2, 3};
  gpu.upload(dev_w.data(), w.data(), w.size() * sizeof(float));
  gpu.upload(images.data(), img.data(), img.size() * sizeof(float));
  gpu.upload(labels->data(), lab, sizeof lab);
  (*net)->train_step(images.as<float>(), labels->as<int32_t>(), dev_w.as<float>(), dw.as<float>());
  std::vector<float> g(static_cast<size_t>(n));
  gpu.download(g.data(), dw.data(), g.size() * sizeof(float));
  for (float x : g)
    if (!std::isfinite(x)) return 6;
  return 0;
}

// The must-show of the stand-in: a net with add and concat (tensors read by two layers) takes
// one training step on the device. Net::backward added the readers' gradients with a host loop
// over device memory, which faults here as it would on a GPU.
TEST_F(StandInGpu, FanOutGradientsAreAddedOnTheDevice) {
  auto spec = parse_net_description(test::kBnJoinNet, "bn-join", ModelInput{3, 12, 12, 5});
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EXIT(std::exit(one_step_on_the_device(*spec)), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace easel
