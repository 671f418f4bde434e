// The performance model (model/): machine descriptions read and refused with one line
// naming the file and key; the model's invariants (serial exchanges never cheaper with more
// groups, the tree beats P serial exchanges at large P, oversubscription costs time, tau and
// overlap cut the exchange); `easel model --json` and `easel plan` through the program.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "model/layer_rates.hpp"
#include "model/machine.hpp"
#include "model/model.hpp"
#include "nets/graph.hpp"
#include "nets/models/models.hpp"
#include "tests/tools/machine_refusal.hpp"
#include "tests/tools/run_easel.hpp"

namespace easel::model {
namespace {

std::string machines_dir() {
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  return std::string(root != nullptr ? root : ".") + "/tools/machines/";
}

// A two-core machine with LeNet calibrated, as `easel bench --calibrate` writes one.
const char* kSmall = R"(
[machine]
name = "two cores"
kind = "cpu"
cores = 2
source = "test"
[compute]
peak_gflops = 100
efficiency = 0.3
serial_fraction = 0.1
contention = 1.1
oversubscription_overhead = 0.05
oversubscribed_wait = 0.1
source = "test"
[memory]
source = "test"
[memory.dram]
bandwidth_gbs = 20
core_bandwidth_gbs = 12
capacity_gb = 16
source = "test"
[transport]
source = "test"
[transport.shared_memory]
latency_us = 2
bandwidth_gbs = 10
source = "test"
[[net]]
name = "lenet"
batch = 64
step_seconds = 0.01
update_seconds = 0.001
source = "test"
)";

// kSmall with `tables` before its [[net]] (the exchanges and passes timed by size).
std::string with_tables(const std::string& tables) {
  std::string text = kSmall;
  text.replace(text.find("[[net]]"), 7, tables + "[[net]]");
  return text;
}

Machine small() {
  auto m = parse_machine(kSmall, "small.toml");
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.value();
}

ModelRequest request(const std::string& net, const std::string& algo, int groups,
                     int64_t classes = 0) {
  const ModelInput in = net == "alexnet-cifar" ? ModelInput{3, 32, 32, classes ? classes : 10}
                                               : ModelInput{1, 28, 28, 10};
  auto spec = build_model(net, in);
  EXPECT_TRUE(spec.ok());
  ModelRequest r;
  r.net = net;
  r.cost = net_cost(*spec).value();
  r.input_floats = in.channels * in.height * in.width;
  r.algo = algo;
  r.groups = groups;
  return r;
}

TEST(Machine, DescribedMachinesParse) {
  for (const char* name : {"knl-7250", "gpu8-pcie", "gpu8-nvlink", "gpu8-a100-pcie"}) {
    auto m = load_machine(machines_dir() + name + ".toml");
    ASSERT_TRUE(m.ok()) << name << ": " << m.status().message();
    EXPECT_FALSE(m->name.empty());
  }
  auto knl = load_machine(machines_dir() + "knl-7250.toml");
  EXPECT_EQ(knl->cores, 68);
  EXPECT_TRUE(knl->hbw.present);
  EXPECT_EQ(knl->modes.size(), 4u);
  auto gpu = load_machine(machines_dir() + "gpu8-pcie.toml");
  EXPECT_TRUE(gpu->gpu);
  EXPECT_EQ(gpu->devices, 8);
}

// Every refusal is one line naming the file and the key.
TEST(Machine, BadDescriptionsNameFileAndKey) {
  struct Case {
    std::string from, to, key;
  };
  const std::vector<Case> cases = {
      {"peak_gflops = 100", "peak_gflops = -1", "compute.peak_gflops"},
      {"peak_gflops = 100", "peak_gflops = \"fast\"", "compute.peak_gflops"},
      {"efficiency = 0.3\n", "", "compute.efficiency"},
      {"kind = \"cpu\"", "kind = \"fpga\"", "machine.kind"},
      {"latency_us = 2", "latency_us = 2\nlatncy = 3", "transport.shared_memory.latncy"},
      {"[transport]\nsource = \"test\"", "[transport]", "transport.source"},
      {"step_seconds = 0.01", "step_seconds = 0", "net[0].step_seconds"},
      {"cores = 2", "cores = 2\ndevices = 8", "machine.devices"},
  };
  for (const Case& c : cases) {
    std::string text = kSmall;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    expect_refused(text, c.key);
  }
  auto syntax = parse_machine("[machine\n", "syntax.toml");
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.status().message().rfind("syntax.toml:", 0), 0u);
}

// --precision: the machine's rate for it divides the step's flops; a machine without the rate
// refuses in one line naming the file and the key; plan's "all" ranks every precision it has.
TEST(Model, PrecisionUsesTheMachinesRate) {
  auto a100 = load_machine(machines_dir() + "gpu8-a100-pcie.toml");
  ASSERT_TRUE(a100.ok()) << a100.status().message();
  EXPECT_DOUBLE_EQ(a100->compute_rate("tf32"), 156000);
  EXPECT_DOUBLE_EQ(a100->compute_rate("bf16"), 312000);
  ModelRequest r = request("alexnet-cifar", "msgd", 1);
  std::map<std::string, double> step;
  for (const char* p : {"fp32", "tf32", "bf16"}) {
    r.precision = p;
    auto pred = predict(*a100, r);
    ASSERT_TRUE(pred.ok()) << p << ": " << pred.status().message();
    step[p] = pred->step_seconds;
  }
  EXPECT_LT(step["tf32"], step["fp32"]);
  EXPECT_LT(step["bf16"], step["tf32"]);
  auto knl = load_machine(machines_dir() + "knl-7250.toml");
  r.precision = "bf16";
  auto none = predict(*knl, r);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("bf16_gflops"), std::string::npos);
  r.precision = "all";
  auto rows = plan_partitions(*a100, r, 100);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  std::set<std::string> seen;
  for (const PlanRow& row : *rows)
    seen.insert(row.precision);
  EXPECT_EQ(seen, (std::set<std::string>{"fp32", "tf32", "bf16"}));
  EXPECT_NE(rows->front().precision, "fp32");
}

TEST(Model, OneGroupIsAllCompute) {
  auto p = predict(small(), request("lenet", "msgd", 1));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->compute_source, "calibrated");
  EXPECT_DOUBLE_EQ(p->seconds_per_iteration, 0.01);
  EXPECT_DOUBLE_EQ(p->compute_share, 1);
  EXPECT_NEAR(p->images_per_second, 6400, 1e-6);
}

TEST(Model, SharesAddUpAndImagesFollow) {
  for (const char* algo : {"sync-easgd", "sync-sgd", "easgd-rr", "async-easgd", "async-sgd",
                           "hogwild-easgd", "hogwild-sgd", "async-measgd"}) {
    for (int g : {2, 4, 8}) {
      auto p = predict(small(), request("lenet", algo, g));
      ASSERT_TRUE(p.ok()) << algo;
      EXPECT_NEAR(p->compute_share + p->comm_share + p->wait_share, 1, 1e-9) << algo << g;
      EXPECT_NEAR(p->images_per_second, g * 64 / p->seconds_per_iteration, 1e-6);
      EXPECT_GT(p->comm_share, 0) << algo << g;
    }
  }
}

// P serial exchanges: more groups never make the exchange cheaper.
TEST(Model, SerialPatternsNeverCheaperWithMoreGroups) {
  const Machine knl = load_machine(machines_dir() + "knl-7250.toml").value();
  for (const char* algo : {"easgd-rr", "sync-easgd"}) {
    double last = 0;
    for (int g : {2, 4, 8, 16, 32}) {
      ModelRequest r = request("alexnet-cifar", algo, g);
      r.reduce = ReduceMode::serial;
      r.threads_per_group = 68 / g;
      auto p = predict(knl, r);
      ASSERT_TRUE(p.ok()) << p.status().message();
      EXPECT_GE(p->exchange_seconds * (std::string(algo) == "easgd-rr" ? g : 1), last)
          << algo << " " << g;
      last = p->exchange_seconds * (std::string(algo) == "easgd-rr" ? g : 1);
    }
  }
}

TEST(Model, TreeBeatsSerialAtLargeP) {
  for (const char* file : {"knl-7250", "gpu8-pcie", "gpu8-nvlink", "gpu8-a100-pcie"}) {
    const Machine m = load_machine(machines_dir() + file + ".toml").value();
    const int g = m.gpu ? 8 : 16;
    ModelRequest tree = request("alexnet-cifar", "sync-easgd", g);
    tree.threads_per_group = m.gpu ? 1 : 4;
    ModelRequest serial = tree;
    serial.reduce = ReduceMode::serial;
    auto a = predict(m, tree), b = predict(m, serial);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_LT(a->exchange_seconds, b->exchange_seconds) << file;
    EXPECT_LT(a->seconds_per_iteration, b->seconds_per_iteration) << file;
  }
}

TEST(Model, OversubscriptionCostsTime) {
  const Machine m = small();
  auto two = predict(m, request("lenet", "sync-easgd", 2));
  auto four = predict(m, request("lenet", "sync-easgd", 4));
  auto eight = predict(m, request("lenet", "sync-easgd", 8));
  ASSERT_TRUE(two.ok() && four.ok() && eight.ok());
  EXPECT_FALSE(two->oversubscribed);
  EXPECT_TRUE(four->oversubscribed);
  // Four groups on two cores: each step at least twice as long, plus the overhead; eight:
  // twice four's (the overhead is per step, OversubscriptionOverheadIsPerStepWhateverTheRatio).
  EXPECT_GT(four->step_seconds, 2 * two->step_seconds);
  EXPECT_NEAR(eight->step_seconds, 2 * four->step_seconds, 1e-12);
  EXPECT_GT(four->wait_share, 0);
  EXPECT_EQ(two->wait_share, 0);
}

// The shared-memory exchange is bounded by the memory's bandwidth unless its arenas, (2P + 1) x
// the weights, fit the described last-level cache (memory.cache_mb), as LeNet's (1.7 MB) do in
// a 32 MB one; easel bench --calibrate prices its layouts with the same function.
TEST(Model, ExchangeInCacheIsNotBoundByMemory) {
  Machine m = small();
  m.shared_memory.bandwidth_gbs = 100;  // the link faster than the memory (20 GB/s)
  const ModelRequest r = request("lenet", "sync-easgd", 2);
  const double n = static_cast<double>(r.cost.arena_floats);
  const double bytes = shm_exchange_floats(2, false) * n;
  const double lat = 3 * m.shared_memory.latency_us * 1e-6;  // 2 levels + 1, one message
  auto uncached = predict(m, r);
  ASSERT_TRUE(uncached.ok());
  EXPECT_FALSE(shm_exchange_cached(m, 2, n));
  EXPECT_NEAR(uncached->exchange_seconds, lat + bytes / 20e9, 1e-9);
  m.cache_mb = 32;
  EXPECT_TRUE(shm_exchange_cached(m, 2, n));
  EXPECT_FALSE(shm_exchange_cached(m, 2, 2e6));  // 5 x 8 MB > 32 MB
  auto cached = predict(m, r);
  ASSERT_TRUE(cached.ok());
  EXPECT_NEAR(cached->exchange_seconds, lat + bytes / 2 / 100e9, 1e-9);
  EXPECT_NEAR(cached->exchange_seconds, shm_exchange_seconds(m, m.dram, 2, false, n, 1, 1), 1e-12);
  // cache_mb is read from [memory] and checked.
  std::string text = kSmall;
  text.replace(text.find("[memory]\n"), 9, "[memory]\ncache_mb = 32\n");
  auto parsed = parse_machine(text, "c.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->cache_mb, 32);
  text.replace(text.find("cache_mb = 32"), 13, "cache_mb = -1");
  expect_refused(text, "memory.cache_mb", "c.toml");
}

// The exchange timed by size ([[transport.shared_memory.exchange]]): log-log interpolation
// between the points of the nearest timed group count, proportional beyond the ends, scaled to
// other group counts by the per-group bytes and to oversubscribed groups by N / C.
TEST(Model, ExchangeBySizeInterpolatesTheCalibratedPoints) {
  Machine m = small();
  const std::vector<ExchangePoint> pts = {
      {2, 1e6, 1e-4}, {2, 1e8, 1e-1}, {4, 1e6, 2e-4}, {4, 1e8, 2e-1}};
  // 4 MB at two groups: seconds go as bytes^1.5 between the points (x100 bytes, x1000 seconds).
  EXPECT_NEAR(shm_exchange_by_size(pts, m, 2, false, 1e6, 1, 1), 1e-4 * std::pow(4.0, 1.5), 1e-12);
  EXPECT_NEAR(shm_exchange_by_size(pts, m, 2, false, 2.5e5, 1, 1), 1e-4, 1e-15);    // a point
  EXPECT_NEAR(shm_exchange_by_size(pts, m, 2, false, 2.5e4, 1, 1), 1e-5, 1e-15);    // below
  EXPECT_NEAR(shm_exchange_by_size(pts, m, 2, false, 5e7, 1, 1), 2e-1, 1e-12);      // above
  EXPECT_NEAR(shm_exchange_by_size(pts, m, 2, false, 2.5e7, 1, 2), 0.5e-1, 1e-12);  // 2 threads
  // Eight groups: the four-group points scaled by the per-group bytes.
  const double scale = (shm_exchange_floats(8, false) / 8) / (shm_exchange_floats(4, false) / 4);
  EXPECT_NEAR(shm_exchange_by_size(pts, m, 8, false, 2.5e5, 1, 1), 2e-4 * scale, 1e-15);
  // Three groups: equally near 2 and 4, the larger's (partitioned) points.
  const double s3 = (shm_exchange_floats(3, false) / 3) / (shm_exchange_floats(4, false) / 4);
  EXPECT_NEAR(shm_exchange_by_size(pts, m, 3, false, 2.5e5, 1, 1), 2e-4 * s3, 1e-15);
  // Per-layer messages add their latency; no points: -1.
  EXPECT_NEAR(shm_exchange_by_size(pts, m, 2, false, 2.5e5, 3, 1),
              1e-4 + 2 * 3 * m.shared_memory.latency_us * 1e-6, 1e-15);
  EXPECT_EQ(shm_exchange_by_size({}, m, 2, false, 2.5e5, 1, 1), -1);

  // Read from the description, and used by the model in place of latency and bandwidth; four
  // groups on two cores take turns: x 2.
  std::string text = with_tables(
      "[[transport.shared_memory.exchange]]\ngroups = 4\nbytes = 1e6\nseconds = 2e-4\n"
      "[[transport.shared_memory.exchange]]\ngroups = 4\nbytes = 1e8\nseconds = 2e-1\n");
  auto parsed = parse_machine(text, "x.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->shm_exchange.size(), 2u);
  const ModelRequest r = request("lenet", "sync-easgd", 4);
  const double n = static_cast<double>(r.cost.arena_floats);
  auto p = predict(*parsed, r);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->exchange_seconds,
              2 * shm_exchange_by_size(parsed->shm_exchange, *parsed, 4, false, n, 1, 1), 1e-12);
  // Of it, the turns of the groups sharing a core are wait (the trainer's barriers), the rest comm.
  const double own = shm_exchange_by_size(parsed->shm_exchange, *parsed, 4, false, n, 1, 1);
  EXPECT_NEAR(p->exchange_turns_seconds, own, 1e-12);
  EXPECT_NEAR(p->comm_seconds, own, 1e-12);
  EXPECT_NEAR(p->wait_seconds, own + 0.1 * p->step_seconds, 1e-9);  // + oversubscribed_wait
  text.replace(text.find("seconds = 2e-4"), 14, "seconds = -2e-4");
  expect_refused(text, "transport.shared_memory.exchange[0].seconds", "x.toml");
}

// A net with running statistics (batch norm) takes the trainer's Comm path, not the fused
// exchange: its exchange is priced from [[transport.shared_memory.comm_exchange]] (the Comm
// path's comm), a net without them from [[transport.shared_memory.exchange]].
TEST(Model, NetWithRunningStatisticsIsPricedOnTheCommPath) {
  std::string text = with_tables(
      "[[transport.shared_memory.exchange]]\ngroups = 2\nbytes = 1e6\nseconds = 2e-4\n"
      "[[transport.shared_memory.comm_exchange]]\ngroups = 2\nbytes = 1e6\n"
      "seconds = 5e-5\n");
  auto m = parse_machine(text, "x.toml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->shm_comm_exchange.size(), 1u);
  ModelRequest plain = request("lenet", "sync-easgd", 2);
  ASSERT_EQ(plain.cost.state_floats, 0);
  const double n = static_cast<double>(plain.cost.arena_floats);
  ModelRequest stats = plain;
  stats.cost.state_floats = 64;  // the same arena, with batch norm's statistics in it
  auto fused = predict(*m, plain);
  auto comm = predict(*m, stats);
  ASSERT_TRUE(fused.ok() && comm.ok());
  EXPECT_NEAR(fused->exchange_seconds, shm_exchange_by_size(m->shm_exchange, *m, 2, false, n, 1, 1),
              1e-12);
  EXPECT_NEAR(comm->exchange_seconds,
              shm_exchange_by_size(m->shm_comm_exchange, *m, 2, false, n, 1, 1), 1e-12);
  EXPECT_LT(comm->exchange_seconds, fused->exchange_seconds / 2);
  // One group alone does the Comm path's whole comm (its copy and the centre's update): 20 floats
  // of bytes per arena float against 24 shared by two groups.
  ModelRequest one = stats;
  one.groups = 1;
  auto alone = predict(*m, one);
  ASSERT_TRUE(alone.ok());
  EXPECT_NEAR(alone->exchange_seconds, comm->exchange_seconds * 20.0 / (24.0 / 2), 1e-12);
  // sync-sgd has no centre: its allreduce is the fused exchange's whatever the net.
  stats.algo = plain.algo = "sync-sgd";
  EXPECT_NEAR(predict(*m, stats)->exchange_seconds, predict(*m, plain)->exchange_seconds, 1e-15);
}

// sync-easgd's Comm path prices its exchange steps' elastic momentum step (compute) over the
// momentum update, both timed by size ([[step.elastic_update]], [[step.update]]), time-sliced
// as the step and once per tau; a net without running statistics (the fused exchanges) and
// async-easgd do not take it. Past half the last-level cache the passes' cold timings serve.
TEST(Model, CommPathPricesTheElasticStepAndColdPasses) {
  std::string text = with_tables(
      "[[transport.shared_memory.exchange]]\ngroups = 2\nbytes = 1e6\nseconds = 2e-4\n"
      "[[transport.shared_memory.comm_exchange]]\ngroups = 2\nbytes = 1e6\n"
      "seconds = 5e-5\ncold_seconds = 1e-4\n");
  auto parsed = parse_machine(text, "x.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  Machine m = *parsed;
  m.update_passes = {{1, 1e6, 1e-4, 3e-4}};
  m.elastic_passes = {{1, 1e6, 4e-4, 9e-4}};
  ModelRequest stats = request("lenet", "sync-easgd", 1);
  stats.cost.state_floats = 64;
  const double w = 4.0 * static_cast<double>(stats.cost.arena_floats);
  ModelRequest plain = stats;
  plain.cost.state_floats = 0;
  auto base = predict(m, plain);
  auto comm = predict(m, stats);
  ASSERT_TRUE(base.ok() && comm.ok());
  EXPECT_NEAR(comm->step_seconds - base->step_seconds, 0, 1e-15);  // the step itself alike
  EXPECT_NEAR(comm->compute_seconds - comm->step_seconds, (4e-4 - 1e-4) * w / 1e6, 1e-12);
  EXPECT_NEAR(base->compute_seconds, base->step_seconds, 1e-15);
  // tau 4: once in four steps; 4 groups on 2 cores: time-sliced, x 2.
  ModelRequest tau = stats;
  tau.tau = 4;
  EXPECT_NEAR(predict(m, tau)->compute_seconds - comm->step_seconds, 3e-4 * w / 1e6 / 4, 1e-12);
  ModelRequest four = stats;
  four.groups = 4;
  auto p4 = predict(m, four);
  EXPECT_NEAR(p4->compute_seconds - p4->step_seconds, 2 * 3e-4 * w / 1e6, 1e-12);
  ModelRequest async = stats;
  async.algo = "async-easgd";
  auto pa = predict(m, async);
  EXPECT_NEAR(pa->compute_seconds, pa->step_seconds, 1e-15);
  // Cold: the groups' buffers over half the cache (here 1 MB): the cold timings, for the
  // elastic step and for the Comm path's exchange.
  EXPECT_FALSE(passes_cold(m, stats));  // no cache described
  m.cache_mb = 1;
  ASSERT_TRUE(passes_cold(m, stats));
  auto cold = predict(m, stats);
  ASSERT_TRUE(cold.ok());
  EXPECT_NEAR(cold->compute_seconds - cold->step_seconds, (9e-4 - 3e-4) * w / 1e6, 1e-12);
  const double n = static_cast<double>(stats.cost.arena_floats);
  EXPECT_NEAR(cold->exchange_seconds,
              shm_exchange_by_size(m.shm_comm_exchange, m, 1, false, n, 1, 1, true, true), 1e-12);
  EXPECT_NEAR(cold->exchange_seconds / comm->exchange_seconds, 2, 1e-9);  // 1e-4 against 5e-5
  m.cache_mb = 1e6;
  EXPECT_FALSE(passes_cold(m, stats));
}

// The Comm path timed at one group ([[...comm_exchange]] groups = 1: the root alone copies its
// weights and updates the centre) prices one group from that point, not scaled from two; the
// fused exchanges need two groups and refuse one, by name.
TEST(Model, CommPathTimedAtOneGroupPricesOneGroup) {
  std::string text = with_tables(
      "[[transport.shared_memory.comm_exchange]]\ngroups = 1\nbytes = 1e6\n"
      "seconds = 7e-5\n[[transport.shared_memory.comm_exchange]]\ngroups = 2\n"
      "bytes = 1e6\nseconds = 5e-5\n");
  auto m = parse_machine(text, "x.toml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ModelRequest one = request("lenet", "sync-easgd", 1);
  one.cost.state_floats = 64;
  const double w = 4.0 * static_cast<double>(one.cost.arena_floats);
  auto p1 = predict(*m, one);
  ASSERT_TRUE(p1.ok());
  EXPECT_NEAR(p1->exchange_seconds, 7e-5 * w / 1e6, 1e-12);
  ModelRequest two = one;
  two.groups = 2;
  EXPECT_NEAR(predict(*m, two)->exchange_seconds, 5e-5 * w / 1e6, 1e-12);
  text.replace(text.find("[[transport.shared_memory.comm_exchange]]\ngroups = 1"), 41,
               "[[transport.shared_memory.exchange]]");
  expect_refused(text, "transport.shared_memory.exchange[0].groups", "x.toml");
}

// The Comm path's root sums and updates the centre while the other groups wait at its
// barriers, spinning when each has its core: their wait is the slowest group's timing less the
// mean (slowest_seconds), once per tau; groups sharing cores block instead (no such wait).
TEST(Model, CommPathGroupsWaitForTheRootWithACoreEach) {
  std::string text = with_tables(
      "[[transport.shared_memory.comm_exchange]]\ngroups = 2\nbytes = 1e6\n"
      "seconds = 5e-5\nslowest_seconds = 8e-5\n");
  auto m = parse_machine(text, "x.toml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->shm_comm_exchange[0].slowest_seconds, 8e-5);
  ModelRequest two = request("lenet", "sync-easgd", 2);
  two.cost.state_floats = 64;
  const double w = 4.0 * static_cast<double>(two.cost.arena_floats);
  auto p2 = predict(*m, two);
  ASSERT_TRUE(p2.ok());
  EXPECT_NEAR(p2->exchange_root_wait_seconds, 3e-5 * w / 1e6, 1e-12);
  EXPECT_NEAR(p2->wait_seconds, 3e-5 * w / 1e6, 1e-12);
  EXPECT_NEAR(p2->seconds_per_iteration, p2->compute_seconds + p2->comm_seconds + p2->wait_seconds,
              1e-15);
  ModelRequest tau = two;
  tau.tau = 3;
  EXPECT_NEAR(predict(*m, tau)->wait_seconds, 1e-5 * w / 1e6, 1e-12);
  ModelRequest four = two;  // 4 groups on 2 cores: they block, not spin
  four.groups = 4;
  EXPECT_EQ(predict(*m, four)->exchange_root_wait_seconds, 0);
  ModelRequest plain = two;  // the fused exchange: no root
  plain.cost.state_floats = 0;
  EXPECT_EQ(predict(*m, plain)->exchange_root_wait_seconds, 0);
}

// A calibrated net's own oversubscription_overhead ([[net]]) replaces the machine's for it.
TEST(Model, NetsOwnOversubscriptionOverhead) {
  std::string text = kSmall;
  text.replace(text.find("update_seconds = 0.001"), 22,
               "update_seconds = 0.001\noversubscription_overhead = 0.25");
  auto m = parse_machine(text, "net.toml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto own = predict(*m, request("lenet", "sync-easgd", 4));
  auto machine_wide = predict(small(), request("lenet", "sync-easgd", 4));
  ASSERT_TRUE(own.ok() && machine_wide.ok());
  // Four groups on two cores: x 2 x (1 + overhead), 0.25 against the machine's 0.05.
  EXPECT_NEAR(own->step_seconds / machine_wide->step_seconds, 1.25 / 1.05, 1e-9);
}

// Time slicing: N groups on C < N cores take N / C of the cores' time, and each step costs
// (1 + overhead) more CPU whatever N / C (the caches refilled after each switch): 8 groups on 2
// cores twice 4's, not more.
TEST(Model, OversubscriptionOverheadIsPerStepWhateverTheRatio) {
  const Machine m = small();
  auto two = predict(m, request("lenet", "sync-easgd", 2));
  auto four = predict(m, request("lenet", "sync-easgd", 4));
  auto eight = predict(m, request("lenet", "sync-easgd", 8));
  ASSERT_TRUE(two.ok() && four.ok() && eight.ok());
  EXPECT_NEAR(four->step_seconds / two->step_seconds, 2 * 1.05, 1e-9);
  EXPECT_NEAR(eight->step_seconds / two->step_seconds, 4 * 1.05, 1e-9);
}

// async-easgd's locked exchange timed by size ([[transport.shared_memory.centre_exchange]]):
// interpolated at the arena's bytes; groups sharing the cores have it time-sliced as their
// step (x N / C), and a group blocked at the lock leaves its core to another: no wait added
// while the lock is not the bottleneck.
TEST(Model, LockedExchangeBySizeAndTimeSliced) {
  const std::vector<ExchangePoint> pts = {{1, 1e6, 1e-4}, {1, 1e8, 1e-1}};
  EXPECT_NEAR(seconds_by_size(pts, 1e7), 1e-4 * std::pow(10.0, 1.5), 1e-12);
  EXPECT_NEAR(seconds_by_size(pts, 2e8), 2e-1, 1e-12);  // beyond: proportional
  EXPECT_NEAR(seconds_by_size(pts, 1e5), 1e-5, 1e-15);
  EXPECT_EQ(seconds_by_size({}, 1e5), -1);
  std::string text = with_tables(
      "[[transport.shared_memory.centre_exchange]]\nbytes = 1e6\nseconds = 1e-4\n"
      "[[transport.shared_memory.centre_exchange]]\nbytes = 1e8\nseconds = 1e-1\n");
  auto m = parse_machine(text, "c.toml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->shm_centre_exchange.size(), 2u);
  const ModelRequest one = request("lenet", "async-easgd", 1);
  const double w = 4.0 * static_cast<double>(one.cost.arena_floats);
  auto p1 = predict(*m, one);
  ASSERT_TRUE(p1.ok());
  EXPECT_NEAR(p1->exchange_seconds, seconds_by_size(pts, w), 1e-12);
  auto p4 = predict(*m, request("lenet", "async-easgd", 4));
  ASSERT_TRUE(p4.ok());
  EXPECT_NEAR(p4->comm_seconds, 2 * p4->exchange_seconds, 1e-12);
  EXPECT_NEAR(p4->wait_seconds, 0, 1e-12);
  EXPECT_NEAR(p4->seconds_per_iteration, p4->step_seconds + p4->comm_seconds, 1e-12);
  // Without the points: the latency and bandwidth, not the timings.
  auto plain = predict(small(), one);
  ASSERT_TRUE(plain.ok());
  EXPECT_GT(std::abs(plain->exchange_seconds - p1->exchange_seconds), 1e-9);
  // A centre exchange has no group count: the key is refused, by name.
  text.replace(text.find("bytes = 1e6"), 11, "groups = 2\nbytes = 1e6");
  expect_refused(text, "transport.shared_memory.centre_exchange[0]", "c.toml");
}

// The centre algorithms' exchange applies the update on its steps (ModelFacts::
// update_in_exchange): the step keeps the momentum update on the others only, 1 - 1/tau of them.
TEST(Model, CentreAlgorithmsUpdateInTheExchange) {
  const Machine m = small();  // LeNet: step 10 ms, its update 1 ms, at batch 64
  auto step = [&](const std::string& algo, int tau) {
    ModelRequest r = request("lenet", algo, 1);
    r.batch = 64;
    r.tau = tau;
    auto p = predict(m, r);
    EXPECT_TRUE(p.ok()) << algo;
    return p.ok() ? p->step_seconds : -1;
  };
  const double whole = step("sync-easgd", 1);
  EXPECT_NEAR(whole, 0.01, 1e-12);
  EXPECT_NEAR(step("async-easgd", 1), 0.009, 1e-12);
  EXPECT_NEAR(step("async-easgd", 4), 0.01 - 0.001 / 4, 1e-12);
  EXPECT_NEAR(step("easgd-rr", 2), 0.01 - 0.001 / 2, 1e-12);
  EXPECT_NEAR(step("async-sgd", 1), 0.009, 1e-12);  // every step is the centre's
  EXPECT_NEAR(step("hogwild-sgd", 4), 0.009, 1e-12);
  EXPECT_NEAR(step("local-sgd", 4), 0.01, 1e-12);
}

// Ranks sharing one machine split its cores: 2 ranks of 2 groups on 2 cores are oversubscribed.
TEST(Model, RanksPerNodeShareTheCores) {
  Machine m = small();
  m.mpi = {true, 1, 10};
  ModelRequest r = request("lenet", "sync-easgd", 2);
  r.ranks = 2;
  auto apart = predict(m, r);
  r.ranks_per_node = 2;
  auto shared = predict(m, r);
  ASSERT_TRUE(apart.ok() && shared.ok());
  EXPECT_FALSE(apart->oversubscribed);
  EXPECT_TRUE(shared->oversubscribed);
  EXPECT_GT(shared->step_seconds, 2 * apart->step_seconds / m.contention);
  // Its step is that of 4 groups on the machine; 2 ranks of 1 group step as 2 groups do,
  // contention included.
  ModelRequest four = request("lenet", "sync-easgd", 4);
  EXPECT_DOUBLE_EQ(shared->step_seconds, predict(m, four)->step_seconds);
  r.groups = 1;
  auto one_each = predict(m, r);
  ASSERT_TRUE(one_each.ok());
  EXPECT_DOUBLE_EQ(one_each->step_seconds,
                   predict(m, request("lenet", "sync-easgd", 2))->step_seconds);
  EXPECT_GT(one_each->step_seconds, predict(m, request("lenet", "sync-easgd", 1))->step_seconds);
  // Bad counts: more ranks per node than ranks, or than cores; on GPUs, than devices.
  for (int bad : {3, 0}) {
    r.ranks_per_node = bad;
    auto p = predict(m, r);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find("--ranks-per-node"), std::string::npos);
  }
  r.ranks = 4;
  r.ranks_per_node = 4;
  EXPECT_NE(predict(m, r).status().message().find("use at most 2"), std::string::npos);
  Machine gpu = load_machine(machines_dir() + "gpu8-pcie.toml").value();
  ModelRequest g = request("alexnet-cifar", "sync-easgd", 8);
  g.ranks = 2;
  g.ranks_per_node = 2;
  EXPECT_NE(predict(gpu, g).status().message().find("need 16 devices"), std::string::npos);
}

TEST(Model, TauOverlapAndResidencyCutTheExchange) {
  const Machine gpu = load_machine(machines_dir() + "gpu8-pcie.toml").value();
  ModelRequest r = request("alexnet-cifar", "sync-easgd", 8, 1000);
  auto base = predict(gpu, r);
  r.tau = 4;
  auto tau = predict(gpu, r);
  r.tau = 1;
  r.overlap = true;
  auto overlap = predict(gpu, r);
  r.overlap = false;
  r.resident = false;
  auto copies = predict(gpu, r);
  ASSERT_TRUE(base.ok() && tau.ok() && overlap.ok() && copies.ok());
  EXPECT_LT(tau->comm_seconds, base->comm_seconds);
  EXPECT_LT(overlap->comm_seconds, base->comm_seconds);
  EXPECT_GT(copies->comm_seconds, base->comm_seconds);
  ModelRequest rr = request("alexnet-cifar", "easgd-rr", 8, 1000);
  rr.resident = false;
  auto original = predict(gpu, rr);
  ASSERT_TRUE(original.ok());
  // The original EASGD spends more of its time not computing (moving weights or waiting for
  // the master's turn) than Sync EASGD with resident weights.
  EXPECT_GT(original->comm_share + original->wait_share, base->comm_share + base->wait_share);
  EXPECT_GT(original->seconds_per_iteration, base->seconds_per_iteration);
}

// local-sgd, slowmo and diloco: one allreduce of each group's payload every tau steps, at
// --exchange-precision (int8: a byte per float and a scale per 256).
TEST(Model, PeriodicAlgorithmsPriceTheirPayloadEveryTau) {
  const Machine m = small();
  ModelRequest r = request("lenet", "diloco", 2);
  r.tau = 16;
  auto fp32 = predict(m, r);
  r.exchange_precision = ExchangePrecision::int8;
  auto int8 = predict(m, r);
  ModelRequest s = request("lenet", "sync-sgd", 2);
  auto sync = predict(m, s);
  ASSERT_TRUE(fp32.ok() && int8.ok() && sync.ok()) << fp32.status().message();
  const double n = static_cast<double>(r.cost.arena_floats);
  EXPECT_EQ(fp32->group_exchange_bytes, 4 * n);
  EXPECT_EQ(int8->group_exchange_bytes, n + 4 * std::ceil(n / 256));
  EXPECT_EQ(fp32->exchanges_per_step, 1.0 / 16);
  EXPECT_EQ(sync->exchanges_per_step, 1.0);
  EXPECT_LT(int8->comm_seconds, fp32->comm_seconds);
  EXPECT_LT(fp32->comm_seconds, sync->comm_seconds);
}

TEST(Model, RefusesRequestsNamingTheFlag) {
  const Machine m = small();
  ModelRequest r = request("lenet", "msgd", 2);
  EXPECT_NE(predict(m, r).status().message().find("--algo msgd"), std::string::npos);
  r = request("lenet", "sync-easgd", 2);
  r.placement = "hbw";
  EXPECT_NE(predict(m, r).status().message().find("--placement hbw"), std::string::npos);
  r = request("lenet", "no-such", 2);
  EXPECT_NE(predict(m, r).status().message().find("--algo"), std::string::npos);
}

TEST(Plan, RanksPartitionsAndChecksTheFastMemory) {
  const Machine knl = load_machine(machines_dir() + "knl-7250.toml").value();
  ModelRequest r = request("alexnet-cifar", "sync-easgd", 1, 1000);
  r.batch = 64;
  auto rows = plan_partitions(knl, r, 100);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_FALSE(rows->empty());
  for (size_t i = 1; i < rows->size(); ++i)
    EXPECT_LE((*rows)[i - 1].seconds, (*rows)[i].seconds);
  bool snc4_16 = false;
  for (const PlanRow& row : *rows) {
    if (row.mode == "snc4-flat") {
      EXPECT_TRUE(row.groups == 1 || row.groups % 4 == 0);
    }
    if (row.mode == "quadrant-cache") {
      EXPECT_FALSE(row.fits_fast);
    }
    if (row.mode == "snc4-flat" && row.groups == 16) {
      snc4_16 = true;
      // 4 GB of MCDRAM per cluster, shared by 4 groups: 1 GB each, less than a replica.
      EXPECT_NEAR(row.hbw_bytes_per_group, 1e9, 1);
      EXPECT_FALSE(row.fits_fast);
    }
  }
  EXPECT_TRUE(snc4_16);
}

}  // namespace
}  // namespace easel::model

namespace {

using easel_test::run_easel;

TEST(ModelCmd, JsonHasTheKeys) {
  const easel_test::Out o = run_easel(
      "model --net lenet --algo sync-easgd --groups 4 --threads-per-group 17 --machine knl-7250 "
      "--json",
      "", "model_json");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  for (const char* k :
       {"seconds_per_iteration", "compute_share", "comm_share", "wait_share", "images_per_second"})
    ASSERT_TRUE(j.contains(k)) << k;
  EXPECT_GT(j["seconds_per_iteration"].get<double>(), 0);
  EXPECT_NEAR(j["compute_share"].get<double>() + j["comm_share"].get<double>() +
                  j["wait_share"].get<double>(),
              1, 1e-9);
}

// The model prices the exchange path the trainer runs: sync-easgd on a net without running
// statistics and on one with batch norm's, under each switch, `easel model`'s exchange_path is
// the one the run's summary.json records (both from algos/sync_easgd.hpp's one rule).
TEST(ModelCmd, PricesTheExchangePathTheTrainerRuns) {
  namespace fs = std::filesystem;
  const char* src = std::getenv("EASEL_SOURCE_ROOT");
  const std::string bn = std::string(src != nullptr ? src : ".") +
                         "/tests/fuzz/corpus/net/small-resnet.toml --input 3x16x16";
  const std::string bn_data = "synthetic:64:3x16x16:10";
  struct Case {
    std::string net, data, flags, path;
  };
  const Case cases[] = {
      {"mlp", "synthetic:64", "--groups 2", "mirrored"},
      {"mlp", "synthetic:64", "--groups 3", "partitioned"},
      {"mlp", "synthetic:64", "--groups 3 --pack per-layer", "comm"},
      {"mlp", "synthetic:64", "--groups 2 --reduce serial", "comm"},
      {"mlp", "synthetic:64", "--groups 2 --overlap on", "comm"},
      {"mlp", "synthetic:64", "--groups 3 --collective ring", "comm"},
      {"mlp", "synthetic:64", "--groups 3 --collective tree", "partitioned"},
      {"mlp", "synthetic:64", "--groups 2 --exchange comm", "comm"},
      {"mlp", "synthetic:64", "--groups 2 --exchange partitioned", "partitioned"},
      {bn, bn_data, "--groups 2", "comm"},
      {bn, bn_data, "--groups 3 --exchange comm", "comm"},
  };
  int k = 0;
  for (const Case& c : cases) {
    const std::string tag = "path" + std::to_string(k++);
    const fs::path out = fs::path(::testing::TempDir()) / ("model_" + tag);
    fs::remove_all(out);
    const std::string net = c.net.substr(0, c.net.find(' '));
    const easel_test::Out t =
        run_easel("train --algo sync-easgd --net " + net + " --data " + c.data +
                      " --iterations 2 --oversubscribe --out " + out.string() + " " + c.flags,
                  "", tag + "_train");
    ASSERT_EQ(t.code, 0) << c.flags << "\n" << t.err;
    const auto summary = nlohmann::json::parse(easel_test::slurp(out / "summary.json"));
    fs::remove_all(out);
    const easel_test::Out m = run_easel(
        "model --machine knl-7250 --algo sync-easgd --net " + c.net + " " + c.flags + " --json", "",
        tag + "_model");
    ASSERT_EQ(m.code, 0) << c.flags << "\n" << m.err;
    const auto model = nlohmann::json::parse(m.out);
    EXPECT_EQ(summary["exchange_path"], c.path) << c.net << " " << c.flags;
    EXPECT_EQ(model["exchange_path"], summary["exchange_path"]) << c.net << " " << c.flags;
  }
}

TEST(ModelCmd, BadMachineIsOneLineExit2) {
  namespace fs = std::filesystem;
  const fs::path bad = fs::path(::testing::TempDir()) / "bad_machine.toml";
  std::ofstream(bad) << "[machine]\nname = \"x\"\nkind = \"cpu\"\ncores = 0\nsource = \"t\"\n";
  for (const std::string& args :
       {"model --machine " + bad.string(), "plan --machine " + bad.string(),
        std::string("model --machine no-such-machine"),
        std::string("model --machine /no/file.toml"),
        std::string("model --machine knl-7250 --groups 0")}) {
    const easel_test::Out o = run_easel(args, "", "model_bad");
    EXPECT_EQ(o.code, 2) << args << ": " << o.err;
    EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << o.err;
  }
  const easel_test::Out o = run_easel("model --machine " + bad.string(), "", "model_bad");
  EXPECT_NE(o.err.find("machine.cores"), std::string::npos) << o.err;
}

TEST(ModelCmd, PlanPrintsEveryMode) {
  const easel_test::Out o =
      run_easel("plan --net alexnet-cifar --classes 1000 --machine knl-7250", "", "plan");
  ASSERT_EQ(o.code, 0) << o.err;
  for (const char* mode : {"quadrant-flat", "snc2-flat", "snc4-flat", "quadrant-cache"})
    EXPECT_NE(o.out.find(mode), std::string::npos) << mode;
}

}  // namespace

namespace {

// The outer-optimiser flags through the program: refused in one line, exit 2, naming the flag,
// before any data is read; `easel model` takes them from the same table.
TEST(PeriodicCmd, BadFlagsAreOneLineExit2AndTheModelPricesThem) {
  for (const std::string& args :
       {std::string("train --algo sync-easgd --optimizer adamw"),
        std::string("train --algo async-sgd --exchange-precision int8"),
        std::string("train --algo local-sgd --outer-lr 0.5"),
        std::string("train --algo diloco --outer-momentum 1.5"),
        std::string("train --algo diloco --optimizer adam"),
        std::string("train --algo diloco --exchange-precision fp8"),
        std::string("train --algo diloco --tau 0"),
        std::string("model --machine knl-7250 --algo sync-sgd --exchange-precision bf16")}) {
    const easel_test::Out o = easel_test::run_easel(args, "", "periodic_bad");
    EXPECT_EQ(o.code, 2) << args << ": " << o.err;
    EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << args << ": " << o.err;
  }
  const easel_test::Out o = easel_test::run_easel(
      "model --machine knl-7250 --algo diloco --groups 4 --exchange-precision int8 --json", "",
      "periodic_model");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["tau"].get<int>(), 16);  // --tau auto: diloco's own
  EXPECT_DOUBLE_EQ(j["exchanges_per_step"].get<double>(), 1.0 / 16);
}

// easel bench's layer table prices each pass against a roofline: its bytes are the model's
// (layer_work) and its fraction the longer of FLOPs at the FMA peak and bytes at the triad over
// the layer's time, with the roof named.
TEST(BenchLayers, RooflineOfEachLayerFromTheModelsWork) {
  const std::string json =
      ::testing::TempDir() + "/bench_roof_" + std::to_string(::getpid()) + ".json";
  const easel_test::Out o = run_easel(
      "bench --nets lenet --batches 8 --layouts 1x1 --skip-exchange --triad-mib 16 --repeats 1 "
      "--warmup 1 --min-time 0.02 --overwrite --json " +
          json,
      "", "bench_roof");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto doc = nlohmann::json::parse(easel_test::slurp(json));
  const double peak = doc["ceilings"]["fma_core_gflops"]["max"].get<double>() * 1e9;
  const double triad = doc["ceilings"]["triad_core_gbs"]["max"].get<double>() * 1e9;
  auto spec = easel::build_model("lenet", {1, 28, 28, 10});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  auto work = easel::model::layer_work(spec.value());
  ASSERT_TRUE(work.ok()) << work.status().message();
  const auto& layers = doc["layers"][0]["layers"];
  ASSERT_EQ(layers.size(), work->size());
  std::set<std::string> bounds;
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& l = layers[i];
    const easel::model::LayerWork& w = (*work)[i];
    ASSERT_EQ(l["name"], w.name);
    EXPECT_DOUBLE_EQ(l["forward_bytes"].get<double>(), w.forward.bytes(8)) << w.name;
    EXPECT_DOUBLE_EQ(l["backward_bytes"].get<double>(), w.backward.bytes(8)) << w.name;
    for (const char* pass : {"forward", "backward"}) {
      const std::string p = pass;
      const double flops = l[p + "_flops"].get<double>();
      const double bytes = (p == "forward" ? w.forward : w.backward).bytes(8);
      const double secs = 1e-3 * l[p + "_ms"]["median"].get<double>();
      const auto& roof = l[p + "_roofline"];
      ASSERT_TRUE(roof.is_object()) << w.name << " " << p;
      const double fraction = roof["fraction"].get<double>();
      EXPECT_NEAR(fraction, std::max(flops / peak, bytes / triad) / secs, 1e-9 * fraction)
          << w.name << " " << p;
      EXPECT_EQ(roof["bound"], flops / peak >= bytes / triad ? "fma" : "mem") << w.name << " " << p;
      bounds.insert(roof["bound"].get<std::string>());
    }
  }
  EXPECT_EQ(bounds, (std::set<std::string>{"fma", "mem"}));  // the convolutions, the pools
  EXPECT_NE(o.out.find("bwd roof"), std::string::npos) << o.out;
  std::remove(json.c_str());
}

}  // namespace
