// The pure parts of `easel bench` (tools/bench/bench_model.hpp): flag validation, the FLOP
// model of the FMA loop and of LeNet's step, the byte-count model of the exchange, and the
// min/median/max summary. Nothing here times anything.
#include <gtest/gtest.h>

#include "devices/device.hpp"
#include "engine/memory.hpp"
#include "nets/models/models.hpp"
#include "tools/bench/bench_model.hpp"

namespace easel::bench {
namespace {

// The default layouts are those of 1x1, 1x2 and 2x1 that fit the cores the process may use
// (`taskset -c 1 easel bench` times 1x1 only); --layouts given is kept as given.
TEST(BenchFlags, DefaultsAreValidAndFitTheCores) {
  auto c = validate_flags(BenchFlags{}, 2);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->nets, (std::vector<std::string>{"lenet", "cifar10-quick"}));
  EXPECT_EQ(c->batches, (std::vector<int64_t>{64}));
  EXPECT_EQ(c->layouts, (std::vector<GroupLayout>{{1, 1}, {1, 2}, {2, 1}}));
  EXPECT_EQ(validate_flags(BenchFlags{}, 16)->layouts, c->layouts);
  EXPECT_EQ(validate_flags(BenchFlags{}, 1)->layouts, (std::vector<GroupLayout>{{1, 1}}));
  BenchFlags two;
  two.layouts = "2x1";
  EXPECT_EQ(validate_flags(two, 1)->layouts, (std::vector<GroupLayout>{{2, 1}}));
}

TEST(BenchFlags, ParsesLists) {
  auto l = parse_layouts("1x1,2x1,,4x2");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l.value(), (std::vector<GroupLayout>{{1, 1}, {2, 1}, {4, 2}}));
  EXPECT_EQ(l.value()[2].to_string(), "4x2");
  auto b = parse_batches("64,128");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value(), (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(split_list(",a,,b,"), (std::vector<std::string>{"a", "b"}));
}

// Each bad flag gives one line that names the flag and the bad value.
TEST(BenchFlags, RefusesBadValuesNamingTheFlag) {
  struct Case {
    BenchFlags f;
    const char* flag;
    const char* value;
  };
  std::vector<Case> cases;
  auto add = [&](auto set, const char* flag, const char* value) {
    BenchFlags f;
    set(f);
    cases.push_back({f, flag, value});
  };
  add([](BenchFlags& f) { f.nets = "lenet,alexnet9"; }, "--nets", "alexnet9");
  add([](BenchFlags& f) { f.nets = ","; }, "--nets", "empty");
  add([](BenchFlags& f) { f.batches = "64,0"; }, "--batches", "'0'");
  add([](BenchFlags& f) { f.batches = "6x"; }, "--batches", "'6x'");
  add([](BenchFlags& f) { f.layouts = "2"; }, "--layouts", "'2'");
  add([](BenchFlags& f) { f.layouts = "0x1"; }, "--layouts", "'0x1'");
  add([](BenchFlags& f) { f.layouts = "1x-1"; }, "--layouts", "'1x-1'");
  add([](BenchFlags& f) { f.warmup = -1; }, "--warmup", "-1");
  add([](BenchFlags& f) { f.repeats = 0; }, "--repeats", "0");
  add([](BenchFlags& f) { f.min_time = -0.5; }, "--min-time", "-0.5");
  add([](BenchFlags& f) { f.layout = "chwn"; }, "--layout", "chwn");
  add([](BenchFlags& f) { f.impl = "fastest"; }, "--impl", "fastest");
  add([](BenchFlags& f) { f.triad_mib = 0; }, "--triad-mib", "0");
  add([](BenchFlags& f) { f.json = "/no/such/dir/out.json"; }, "--json", "/no/such/dir");
  add([](BenchFlags& f) { f.json = "/"; }, "--json", "is a directory");
  add([](BenchFlags& f) { f.json = "/proc/version/x.json"; }, "--json", "not a directory");
  // An earlier result is kept unless --overwrite.
  add([](BenchFlags& f) { f.json = "/proc/version"; }, "--json", "exists (give --overwrite");
  // Three arrays larger than half the machine would be touched page by page (3 x 64 GiB: on
  // machines of less than 384 GiB).
  if (physical_memory_bytes() < 384.0 * (1 << 30))
    add([](BenchFlags& f) { f.triad_mib = 65536; }, "--triad-mib", "more than half");
  BenchFlags over;
  over.json = "/proc/version";
  over.overwrite = true;
  EXPECT_TRUE(validate_flags(over, 2).ok());
  for (const Case& c : cases) {
    auto r = validate_flags(c.f, 2);
    ASSERT_FALSE(r.ok()) << c.flag;
    const std::string& m = r.status().message();
    EXPECT_EQ(m.rfind(c.flag, 0), 0u) << m;
    EXPECT_NE(m.find(c.value), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(BenchModel, FmaLoopFlops) {
  // 24 accumulators x 16 lanes x 2 FLOPs per FMA.
  EXPECT_DOUBLE_EQ(fma_loop_flops(1, 24, 16), 768.0);
  EXPECT_DOUBLE_EQ(fma_loop_flops(1000, 12, 8), 192000.0);
}

// LeNet's step as counted by hand: forward multiply-adds x2 per conv/ip layer, backward twice
// that (data + weights gradients) except conv1 (weights gradient only), pools k*k per output
// each way; biases and ReLU not counted.
TEST(BenchModel, LenetFlopsPerImage) {
  const BenchInput in = bench_input("lenet");
  EXPECT_EQ(in.channels, 1);
  EXPECT_EQ(in.height, 28);
  auto spec = build_model("lenet", {in.channels, in.height, in.width, in.classes});
  ASSERT_TRUE(spec.ok());
  std::unique_ptr<Device> dev = make_cpu_device(ImplChoice::ref);
  auto net = Net::create(spec.value(), 4, Layout::nchw, *dev, MemKind::dram);
  ASSERT_TRUE(net.ok()) << net.status().message();
  const double conv1 = 2.0 * 20 * 24 * 24 * 25, conv2 = 2.0 * 50 * 8 * 8 * 500;
  const double ip1 = 2.0 * 800 * 500, ip2 = 2.0 * 500 * 10;
  const double pools = 20 * 12 * 12 * 4 + 50 * 4 * 4 * 4;
  EXPECT_DOUBLE_EQ(net.value()->flops_per_image_train(),
                   2 * conv1 + 3 * (conv2 + ip1 + ip2) + 2 * pools);
  EXPECT_EQ(bench_input("cifar10-quick").channels, 3);
}

TEST(BenchModel, ByteCounts) {
  const int64_t n = 1000;
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::triad, n, 1), 12000.0);
  // P = 2: one add (read 2, write 1) and one copy.
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::tree_reduce, n, 2), 12000.0);
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::tree_broadcast, n, 2), 8000.0);
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::ring_reduce, n, 2), 20000.0);
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::ring_broadcast, n, 2), 8000.0);
  // P = 4: three adds; reduce-scatter is 3 steps x 4 ranks x n/4 floats.
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::tree_reduce, n, 4), 36000.0);
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::ring_reduce, n, 4), 44000.0);
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::tree_broadcast, n, 4), 24000.0);
  // Fused updates: per group, times P.
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::elastic_sgd_step, n, 2), 32000.0);
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::momentum_step, n, 1), 20000.0);
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::elastic_centre_sum, n, 8), 12000.0);
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::sync_exchange, n, 2), 12000.0 + 32000.0 + 12000.0);
  // Partitioned: every W read once, the old centre read and the new one written once, and
  // every group's elastic step.
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::sync_exchange_partitioned, n, 2),
                   8000.0 + 8000.0 + 32000.0);
  // One rank: nothing moves between ranks.
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::tree_reduce, n, 1), 0.0);
  EXPECT_DOUBLE_EQ(traffic_bytes(Traffic::ring_reduce, n, 1), 0.0);
  for (Traffic t : {Traffic::triad, Traffic::tree_reduce, Traffic::sync_exchange})
    EXPECT_STRNE(traffic_formula(t), "");
}

TEST(BenchModel, Summary) {
  const Summary s = summarize({3, 1, 2});
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.median, 2);
  EXPECT_EQ(s.max, 3);
  EXPECT_EQ(summarize({4, 1, 2, 3}).median, 2.5);
  EXPECT_EQ(summarize({}).median, 0);
}

}  // namespace
}  // namespace easel::bench
