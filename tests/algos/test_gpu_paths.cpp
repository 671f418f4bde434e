// The trainer's GPU paths (--device cuda) on any machine, on the stand-in GPU
// (tests/support/standin_gpu.hpp): device memory the host cannot touch, units told apart, ops
// and kernels queued on streams that run when a wait needs them. So these tests prove the
// plumbing — batches and weights staged or resident, centre copies and their broadcast,
// evaluation on the devices — and, since the arithmetic is the CPU's, that a GPU run equals the
// CPU run bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <optional>

#include "run/comm_list.hpp"
#include "run/trainer.hpp"
#include "tests/algos/small_run.hpp"
#include "tests/support/standin_gpu.hpp"
#include "tests/support/test_nets.hpp"

namespace easel {
namespace {

using standin::fake_backend;
using standin::FakeGpu;
using standin::g_bad_pointers;
using standin::g_comm_eager;
using standin::g_gpu_count;
using standin::g_host_link_bytes;
using standin::g_kernel_calls;

DataSplit& small_data() {
  static DataSplit d = [] {
    auto r = load_data("synthetic:512:1x8x8:4", MemKind::dram, 5);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(r).value();
  }();
  return d;
}

TrainConfig config(const std::string& algo, const std::string& device) {
  return test::gpu_config(algo, device);
}

struct Runs {
  TrainSummary cpu, gpu;
  int kernel_calls = 0, bad_pointers = 0;
  int64_t host_link_bytes = 0;  // the GPU run's uploads and downloads
};

// The CPU run of `groups` groups and the run on stand-in GPUs: --device cuda on `groups` GPUs,
// or `device` ("cuda:0,0") on `units` GPUs.
Runs cpu_and_gpu(const std::string& algo, int groups, TrainConfig (*tweak)(TrainConfig) = nullptr,
                 const std::string& device = "cuda", int units = 0) {
  Runs r;
  TrainConfig c = config(algo, "cpu");
  c.plan.groups = GroupCount::of(groups);
  if (tweak) c = tweak(c);
  auto a = train(c, small_data(), nullptr);
  EXPECT_TRUE(a.ok()) << a.status().to_string();
  g_gpu_count = units > 0 ? units : groups;
  TrainConfig g = config(algo, device);
  if (tweak) g = tweak(g);
  g_kernel_calls = 0;
  g_bad_pointers = 0;
  g_host_link_bytes = 0;
  auto b = train(g, small_data(), nullptr, fake_backend());
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  r.host_link_bytes = g_host_link_bytes.load();
  r.kernel_calls = g_kernel_calls.load();
  r.bad_pointers = g_bad_pointers.load();
  if (a.ok()) r.cpu = std::move(a).value();
  if (b.ok()) r.gpu = std::move(b).value();
  return r;
}

void expect_same(const Runs& r) {
  ASSERT_FALSE(r.gpu.final_weights.empty());
  EXPECT_EQ(r.cpu.final_weights, r.gpu.final_weights);
  EXPECT_EQ(r.cpu.group0_weights, r.gpu.group0_weights);
  EXPECT_EQ(r.cpu.test_accuracy, r.gpu.test_accuracy);
  EXPECT_EQ(r.cpu.steps, r.gpu.steps);
  EXPECT_EQ(r.bad_pointers, 0) << "a device-side call got host memory, or a copy ran backwards";
}

TEST(GpuPaths, MsgdResidentEqualsCpu) {
  const Runs r = cpu_and_gpu("msgd", 1);
  expect_same(r);
  EXPECT_GT(r.kernel_calls, 0) << "resident weights must be updated by the device's kernels";
  EXPECT_EQ(r.gpu.info.device, "cuda:0");
}

// --precision tf32 and bf16 on the stand-in: its convolutions and inner products round their
// inputs as tensor cores do (devices/ref_precision.hpp), so each precision trains to weights of
// its own, close to fp32's: within a few bf16 roundings per step over 40 steps.
TEST(GpuPaths, ReducedPrecisionsRoundOnTheStandIn) {
  g_gpu_count = 2;
  std::map<Precision, TrainSummary> runs;
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::bf16}) {
    TrainConfig g = config("sync-sgd", "cuda");
    g.plan.groups = GroupCount::of(2);
    g.precision = p;
    auto r = train(g, small_data(), nullptr, fake_backend());
    ASSERT_TRUE(r.ok()) << precision_name(p) << ": " << r.status().to_string();
    runs[p] = std::move(r).value();
  }
  const std::vector<float>& w32 = runs[Precision::fp32].final_weights;
  ASSERT_FALSE(w32.empty());
  float scale = 0;
  for (float x : w32)
    scale = std::max(scale, std::fabs(x));
  for (Precision p : {Precision::tf32, Precision::bf16}) {
    const std::vector<float>& w = runs[p].final_weights;
    ASSERT_EQ(w.size(), w32.size());
    EXPECT_NE(w, w32) << precision_name(p) << " must round (the stand-in computed fp32)";
    float worst = 0;
    for (size_t i = 0; i < w.size(); ++i)
      worst = std::max(worst, std::fabs(w[i] - w32[i]));
    EXPECT_LT(worst, 0.05f * scale) << precision_name(p);
    EXPECT_NEAR(runs[p].test_accuracy, runs[Precision::fp32].test_accuracy, 0.1)
        << precision_name(p);
  }
  EXPECT_NE(runs[Precision::tf32].final_weights, runs[Precision::bf16].final_weights);
}

TEST(GpuPaths, SyncSgdResidentEqualsCpu) {
  const Runs r = cpu_and_gpu("sync-sgd", 2);
  expect_same(r);
  EXPECT_GT(r.kernel_calls, 0);
}

TEST(GpuPaths, SyncEasgdResidentWithCentreCopiesEqualsCpu) {
  const Runs r = cpu_and_gpu("sync-easgd", 2);
  expect_same(r);
  EXPECT_GT(r.kernel_calls, 0);
  EXPECT_EQ(r.gpu.info.device, "cuda:0,cuda:1");
}

TEST(GpuPaths, SyncEasgdOnThreeAndFourGroupsEqualsCpu) {
  // Also the check that the CPU's partitioned exchange sums in the Comm's tree order: the
  // resident path reduces through the Comm into the root.
  for (int groups : {3, 4}) {
    const Runs r = cpu_and_gpu("sync-easgd", groups);
    expect_same(r);
  }
}

TEST(GpuPaths, SyncEasgdResidentWithTauAndPerLayerMessages) {
  const Runs r = cpu_and_gpu("sync-easgd", 2, [](TrainConfig c) {
    c.tau = 3;
    c.pack = PackMode::per_layer;
    c.momentum = 0;
    return c;
  });
  expect_same(r);
}

// Sync EASGD3 on GPUs: the exchange on every device's communication stream, ordered against its
// compute stream by events. It equals the CPU's overlap (the communication thread, the same tree
// order) and the GPU run without overlap, bit for bit, and like that run (Sync EASGD2) moves only
// the batches over the host link. The stand-in's communication stream runs its work both at once
// (eager) and only when a wait needs it (late): a missing comm_waits_for_compute fails the eager
// runs (the reduce reads a snapshot not yet taken, the broadcast overwrites a centre not yet
// read), a missing compute_waits_for_comm the late ones (the step reads an old centre).
TEST(GpuPaths, SyncEasgdOverlapOnTheDevicesEqualsCpuOverlap) {
  for (bool eager : {false, true})
    for (int groups : {2, 3})
      for (int tau : {1, 2}) {
        const std::string what = std::string(eager ? "eager" : "late") + ", " +
                                 std::to_string(groups) + " groups, tau " + std::to_string(tau);
        g_comm_eager = eager;
        static int s_tau;  // cpu_and_gpu takes a plain function
        s_tau = tau;
        const Runs on = cpu_and_gpu("sync-easgd", groups, [](TrainConfig c) {
          c.overlap = true;
          c.tau = s_tau;
          return c;
        });
        const Runs off = cpu_and_gpu("sync-easgd", groups, [](TrainConfig c) {
          c.tau = s_tau;
          return c;
        });
        SCOPED_TRACE(what);
        expect_same(on);
        EXPECT_EQ(on.gpu.final_weights, off.gpu.final_weights);
        EXPECT_EQ(on.gpu.group0_weights, off.gpu.group0_weights);
        EXPECT_GT(on.kernel_calls, 0);
        EXPECT_EQ(on.host_link_bytes, off.host_link_bytes)
            << "the overlap must not move weights or the centre over the host link";
      }
  g_comm_eager = false;
}

// Groups sharing a GPU (--device cuda:0,0): each its own stand-in device (streams) and replica
// on one unit, the exchange by the devices' kernels (the shared-GPU Comm: NCCL refuses two ranks
// on one device). Sync-easgd resident, and overlapped with either stream order, equals the CPU
// run bit for bit: on one GPU, on three groups of one GPU, and with a third group on a second
// GPU (its buffers copied across).
TEST(GpuPaths, GroupsSharingAGpuSyncEasgdEqualsCpu) {
  struct Case {
    std::string device;
    int groups, units;
  };
  for (const Case& k : {Case{"cuda:0,0", 2, 1}, Case{"cuda:0,0,0", 3, 1}, Case{"cuda:0,0,1", 3, 2}})
    for (bool overlap : {false, true})
      for (bool eager : {false, true}) {
        if (!overlap && eager) continue;
        SCOPED_TRACE(k.device + (overlap ? " overlap" : "") + (eager ? " eager" : ""));
        g_comm_eager = eager;
        const Runs r = cpu_and_gpu(
            "sync-easgd", k.groups,
            overlap ? +[](TrainConfig c) {
              c.overlap = true;
              return c;
            }
                    : nullptr,
            k.device, k.units);
        expect_same(r);
        EXPECT_GT(r.kernel_calls, 0);
      }
  g_comm_eager = false;
  const Runs r = cpu_and_gpu("sync-easgd", 2, nullptr, "cuda:0,0", 1);
  EXPECT_EQ(r.gpu.info.device, "cuda:0,cuda:0");
}

// The asynchronous algorithms on one GPU: staged (async-easgd: the centre in host memory, under
// its lock) and lock-free (hogwild): they run every step, touch no host memory from the device,
// and learn as the CPU run does (first come first served: not bit for bit).
TEST(GpuPaths, GroupsSharingAGpuAsyncAndHogwildRun) {
  for (const char* algo : {"async-easgd", "hogwild-sgd", "hogwild-easgd"}) {
    SCOPED_TRACE(algo);
    const Runs r = cpu_and_gpu(algo, 2, nullptr, "cuda:0,0", 1);
    ASSERT_FALSE(r.gpu.final_weights.empty());
    EXPECT_EQ(r.gpu.steps, r.cpu.steps);
    EXPECT_EQ(r.bad_pointers, 0);
    EXPECT_NEAR(r.gpu.test_accuracy, r.cpu.test_accuracy, 0.15);
    for (float w : r.gpu.final_weights)
      ASSERT_TRUE(std::isfinite(w));
  }
}

TEST(GpuPaths, StagedAlgorithmKeepsHostArenasAndEqualsCpu) {
  // easgd-rr is not device-resident: its arenas stay on the host, the weights are uploaded and
  // the gradient downloaded every step, and the device's kernels are never called.
  const Runs r = cpu_and_gpu("easgd-rr", 2);
  expect_same(r);
  EXPECT_EQ(r.kernel_calls, 0);
}

// A checkpoint of a GPU run holds the arenas copied off the devices, and a resumed run puts
// them back (and sync-easgd's centre copies follow from the centre): the same bits as the run
// that never stopped.
// A graph net of batch norm (its running statistics state segments of the device arena), add,
// concat, floor-mode pooling and global average pooling, resident (msgd): every op gets device
// memory and the run equals the CPU's, running statistics included.
const std::string& bn_join_net_file() {
  static const std::string path = test::write_test_net("gpu_paths_bn_join.toml", test::kBnJoinNet);
  return path;
}

TEST(GpuPaths, BatchNormAddConcatNetEqualsCpu) {
  const Runs r = cpu_and_gpu("msgd", 1, [](TrainConfig c) {
    c.net = bn_join_net_file();
    return c;
  });
  expect_same(r);
}

// A staged algorithm (the weights uploaded each step, the gradient downloaded) brings the running
// statistics the step updated on the device back too: without it they stayed at their initial
// values on the GPU.
// Resident sync-easgd on a net with state: the same as the CPU's run, which takes the Comm path
// for such nets (both sum every group's running statistics as its step left them).
TEST(GpuPaths, ResidentSyncEasgdBatchNormNetEqualsCpu) {
  const Runs r = cpu_and_gpu("sync-easgd", 2, [](TrainConfig c) {
    c.net = bn_join_net_file();
    return c;
  });
  expect_same(r);
}

TEST(GpuPaths, StagedBatchNormNetEqualsCpu) {
  const Runs r = cpu_and_gpu("easgd-rr", 2, [](TrainConfig c) {
    c.net = bn_join_net_file();
    return c;
  });
  expect_same(r);
}

TEST(GpuPaths, StandInRefusesWhatTheCudaDeviceRefuses) {
  FakeGpu gpu(0);
  ASSERT_TRUE(gpu.attach().ok());
  OpDesc d{.kind = OpKind::lrn, .src = {2, 4, 5, 5}, .lrn_within_channel = true};
  auto r = gpu.make_op(d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no CUDA implementation applies"), std::string::npos);
  d.lrn_within_channel = false;
  EXPECT_TRUE(gpu.make_op(d).ok());
}

TEST(GpuPaths, ResumeEqualsUninterrupted) {
  struct Keeper : TrainObserver {
    bool wants_checkpoints() const override { return true; }
    Status on_checkpoint(Checkpoint ck) override {
      if (ck.iterations_done == 20) kept = ck;
      return {};
    }
    std::optional<Checkpoint> kept;
  };
  for (const char* overlap : {"off", "on"})
    for (const char* algo : {"sync-easgd", "sync-sgd", "easgd-rr"}) {
      if (std::string(overlap) == "on" && std::string(algo) != "sync-easgd") continue;
      g_gpu_count = 2;
      TrainConfig c = config(algo, "cuda");
      ASSERT_TRUE(set_setting(c, "overlap", overlap).ok());
      c.momentum = 0.9;
      Keeper keep;
      auto whole = train(c, small_data(), &keep, fake_backend());
      ASSERT_TRUE(whole.ok()) << whole.status().to_string();
      ASSERT_TRUE(keep.kept.has_value()) << algo;
      auto resumed = train(c, small_data(), nullptr, fake_backend(), &*keep.kept);
      ASSERT_TRUE(resumed.ok()) << resumed.status().to_string();
      EXPECT_EQ(resumed->final_weights, whole->final_weights) << algo << " overlap " << overlap;
      EXPECT_EQ(resumed->group0_weights, whole->group0_weights) << algo << " overlap " << overlap;
    }
}

TEST(GpuPaths, RefusalsNameTheFlag) {
  g_gpu_count = 2;
  TrainConfig c = config("sync-easgd", "cuda");
  c.reduce = ReduceMode::serial;
  auto r = train(c, small_data(), nullptr, fake_backend());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--reduce"), std::string::npos) << r.status().message();
  c = config("sync-easgd", "cuda");
  c.plan.groups = GroupCount::of(3);
  r = train(c, small_data(), nullptr, fake_backend());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--groups 3"), std::string::npos) << r.status().message();
  c = config("sync-easgd", "cuda:2");
  r = train(c, small_data(), nullptr, fake_backend());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no GPU 2"), std::string::npos) << r.status().message();
  c = config("sync-easgd", "cuda");
  c.placement = parse_placement("weights=hbw-preferred").value();
  r = train(c, small_data(), nullptr, fake_backend());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--placement weights"), std::string::npos)
      << r.status().message();
  c = config("msgd", "cuda:0,1");  // msgd runs on one group
  r = train(c, small_data(), nullptr, fake_backend());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--groups"), std::string::npos) << r.status().message();
}

// --device cuda picks every GPU, and a one-group algorithm the first, as on the CPU it plans
// one group of every core.
TEST(GpuPaths, OneGroupAlgorithmTakesTheFirstGpu) {
  g_gpu_count = 2;
  Topology topo = detect_topology().value();
  const auto groups_of = [&](const TrainConfig& c) {
    return plan_groups(*make_algorithm(c.algo).value(), c, topo, fake_backend());
  };
  auto plan = groups_of(config("msgd", "cuda"));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->groups.size(), 1u);
  EXPECT_EQ(plan->groups[0].gpu, 0);
  plan = groups_of(config("sync-easgd", "cuda"));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->groups.size(), 2u);
}

// --device reads the list's names: what a list lacks is refused, and the message says what the
// list accepts.
TEST(DeviceList, ParseDeviceReadsTheListsNames) {
  auto cpu = parse_device("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(std::string(cpu->kind->name), "cpu");
  EXPECT_FALSE(cpu->gpu);
  auto two = parse_device("cuda:0,2");
  ASSERT_TRUE(two.ok()) << two.status().message();
  EXPECT_EQ(std::string(two->kind->name), "cuda");
  EXPECT_TRUE(two->gpu);
  EXPECT_EQ(two->ordinals, (std::vector<int>{0, 2}));
  auto bad = parse_device("tpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--device: 'tpu' is not a device (accepted: cpu, cuda, cuda:0, cuda:0,1,...)");
  EXPECT_FALSE(parse_device("cpu:0").ok()) << "the CPU has no units to pick";
  auto shared = parse_device("cuda:1,1");  // two groups on GPU 1
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  EXPECT_EQ(shared->ordinals, (std::vector<int>{1, 1}));

  const DeviceEntry only_cpu[] = {device_list()[0]};
  auto none = parse_device("cuda", DeviceRegistry{only_cpu});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "--device: 'cuda' is not a device (accepted: cpu)");
  // The stand-in replaces the entry the trainer asks: its units, its devices.
  g_gpu_count = 3;
  const DeviceRegistry fake = fake_backend();
  const DeviceEntry* gpu = fake.find("cuda");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->unit_count().value(), 3);
  EXPECT_TRUE(gpu->has_comm());
  EXPECT_EQ(gpu->make_device(2, ImplChoice::ref, Precision::fp32).value()->name(), "cuda:2");
  EXPECT_FALSE(fake.find("cpu")->has_comm()) << "the CPU's groups share host memory";
}

// The Comm comes from the list by what the run needs: the device kind's own Comm for arenas on
// the devices, else shared memory (spinning only when every thread has a core).
TEST(CommList, ChoosesByWhatTheRunNeeds) {
  std::vector<std::string> names;
  for (const CommEntry& c : comm_list())
    names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"device", "hier", "shm"}));
  const DeviceRegistry fake = fake_backend();
  CommNeeds needs;
  needs.local_groups = 2;
  needs.kind = fake.find("cpu");
  EXPECT_EQ(std::string(choose_comm(needs).name), "shm");
  EXPECT_EQ(choose_comm(needs).spin_seconds(needs), 0);
  needs.has_cores = true;
  EXPECT_EQ(choose_comm(needs).spin_seconds(needs), kShmSpinSeconds);
  auto shm = choose_comm(needs).make(needs, CollectivePick{});
  ASSERT_TRUE(shm.ok());
  EXPECT_EQ((*shm)->size(), 2);

  FakeGpu a(0), b(1);
  Device* devs[] = {&a, &b};
  needs.kind = fake.find("cuda");
  needs.on_devices = true;
  needs.devices = devs;
  const CommEntry& dev = choose_comm(needs);
  EXPECT_EQ(std::string(dev.name), "device");
  EXPECT_EQ(dev.spin_seconds(needs), 0);
  auto comm = dev.make(needs, CollectivePick{});
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  EXPECT_EQ((*comm)->size(), 2);
  // auto on distinct GPUs: NCCL's own choice, no line; on a shared GPU: the tree, said in a line.
  auto pick = pick_collective(needs);
  ASSERT_TRUE(pick.ok());
  EXPECT_EQ(pick->why, "");
  FakeGpu a2(0);
  Device* shared[] = {&a, &a2};
  needs.devices = shared;
  pick = pick_collective(needs);
  ASSERT_TRUE(pick.ok());
  EXPECT_EQ(pick->algo, CollectiveAlgo::tree);
  EXPECT_NE(pick->why.find("collective auto: tree for 2 groups sharing GPUs"), std::string::npos)
      << pick->why;
}

}  // namespace
}  // namespace easel
