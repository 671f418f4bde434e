// The device transport of groups sharing a GPU (devices/shared_gpu_comm.hpp) on the stand-in GPU,
// whose device memory faults on any host touch: every collective algorithm of
// engine/comm/collectives/ runs over it unchanged and equals the same algorithm over host shared
// memory bit for bit, on one GPU and with a group on a second GPU (its spans copied across), on
// the compute stream and queued on the communication stream.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "devices/shared_gpu_comm.hpp"
#include "run/trainer.hpp"
#include "tests/algos/small_run.hpp"
#include "tests/support/standin_gpu.hpp"

namespace easel {
namespace {

using standin::fake_backend;
using standin::FakeGpu;
using standin::g_bad_pointers;
using standin::g_gpu_count;

// A value whose sums depend on the order of addition (mixed magnitudes).
float value(int rank, int64_t i) {
  const float big = (i % 3 == 0) ? 1e7f : 1.f;
  return big * static_cast<float>(rank + 1) + 0.1f * static_cast<float>(i % 17) +
         1e-3f * static_cast<float>(rank * 7 + 1);
}

struct Results {
  std::vector<std::vector<float>> allreduce;  // [rank]
  std::vector<float> reduced;                 // the root's
  std::vector<std::vector<float>> broadcast;  // [rank], from the root
};

// Allreduce, reduce into `root` and broadcast from it, of value(rank, i), each rank a thread.
// units: the GPU of each rank, or empty for host memory (the shared-memory Comm).
Results run(CollectiveAlgo algo, const std::vector<int>& units, int p, int64_t n, int root,
            bool queued) {
  Results r;
  r.allreduce.resize(static_cast<size_t>(p));
  r.broadcast.resize(static_cast<size_t>(p));
  r.reduced.resize(static_cast<size_t>(n));
  std::vector<std::unique_ptr<FakeGpu>> gpus;
  std::vector<Device*> devs;
  for (int u : units) {
    gpus.push_back(std::make_unique<FakeGpu>(u));
    devs.push_back(gpus.back().get());
  }
  std::unique_ptr<Comm> comm =
      units.empty() ? make_shm_comm(p, algo) : make_shared_gpu_comm(devs, algo);
  std::vector<std::thread> ts;
  for (int k = 0; k < p; ++k)
    ts.emplace_back([&, k] {
      std::vector<float> host(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        host[static_cast<size_t>(i)] = value(k, i);
      const size_t bytes = host.size() * sizeof(float);
      auto& all = r.allreduce[static_cast<size_t>(k)];
      auto& bc = r.broadcast[static_cast<size_t>(k)];
      if (units.empty()) {
        all = host;
        comm->allreduce_sum(k, all.data(), n);
        std::vector<float> dst(static_cast<size_t>(n));
        comm->reduce_sum(k, host.data(), dst.data(), n, root);
        bc = k == root ? dst : std::vector<float>(static_cast<size_t>(n), -1.f);
        comm->broadcast(k, bc.data(), n, root);
        if (k == root) r.reduced = dst;
        return;
      }
      Device& d = *devs[static_cast<size_t>(k)];
      ASSERT_TRUE(d.attach().ok());
      auto a = Buffer::allocate(bytes, MemKind::device);
      auto s = Buffer::allocate(bytes, MemKind::device);
      auto t = Buffer::allocate(bytes, MemKind::device);
      ASSERT_TRUE(a.ok() && s.ok() && t.ok());
      float* buf = a->as<float>();
      float* src = s->as<float>();
      float* dst = t->as<float>();
      d.upload(buf, host.data(), bytes);
      d.upload(src, host.data(), bytes);
      comm->allreduce_sum(k, buf, n);
      all.resize(host.size());
      d.download(all.data(), buf, bytes);
      if (queued) {
        d.comm_waits_for_compute();
        comm->reduce_sum_queued(k, src, dst, n, root);
      } else {
        comm->reduce_sum(k, src, dst, n, root);
      }
      if (k == root) {
        d.compute_waits_for_comm();
        r.reduced.resize(host.size());
        d.download(r.reduced.data(), dst, bytes);
      } else {
        const std::vector<float> junk(host.size(), -1.f);
        d.upload(dst, junk.data(), bytes);
      }
      if (queued) {
        d.comm_waits_for_compute();
        comm->broadcast_queued(k, dst, n, root);
        d.compute_waits_for_comm();
      } else {
        comm->broadcast(k, dst, n, root);
      }
      bc.resize(host.size());
      d.download(bc.data(), dst, bytes);
      comm->barrier(k);
    });
  for (auto& t : ts)
    t.join();
  return r;
}

TEST(DeviceTransport, EveryAlgorithmEqualsSharedMemoryBitForBit) {
  g_bad_pointers = 0;
  for (CollectiveAlgo algo : {CollectiveAlgo::tree, CollectiveAlgo::ring,
                              CollectiveAlgo::halving_doubling, CollectiveAlgo::hierarchical})
    for (int p : {1, 2, 3, 5})
      for (int64_t n : {int64_t{1}, int64_t{p + 1}, int64_t{4099}}) {
        const int root = p - 1;
        const Results host = run(algo, {}, p, n, root, false);
        std::vector<std::vector<int>> layouts = {std::vector<int>(static_cast<size_t>(p), 0)};
        if (p >= 3) layouts.push_back({0, 0, 1, 0, 1});  // a group on a second GPU
        for (auto units : layouts) {
          units.resize(static_cast<size_t>(p));
          for (bool queued : {false, true}) {
            SCOPED_TRACE(std::string(collective_algo_name(algo)) + " p=" + std::to_string(p) +
                         " n=" + std::to_string(n) + (units.back() == 1 ? " two GPUs" : "") +
                         (queued ? " queued" : ""));
            const Results dev = run(algo, units, p, n, root, queued);
            EXPECT_EQ(dev.allreduce, host.allreduce);
            EXPECT_EQ(dev.reduced, host.reduced);
            EXPECT_EQ(dev.broadcast, host.broadcast);
          }
        }
      }
  EXPECT_EQ(g_bad_pointers.load(), 0) << "a device kernel was given host memory";
}

TEST(DeviceTransport, IsTheSharedMemoryTransportWithDeviceScratch) {
  FakeGpu a(0), b(0);
  Device* devs[] = {&a, &b};
  auto comm = make_shared_gpu_comm(devs, CollectiveAlgo::ring);
  EXPECT_EQ(comm->name(), "ring over gpu-shm(2)");
}

// --collective is honoured for groups sharing a GPU: sync-easgd with resident weights (reduce into
// group 0, broadcast back over the device transport) equals the CPU run with the same algorithm
// (the Comm path there, as --collective other than tree or auto takes it), on one GPU and with a
// group on a second GPU.
TEST(DeviceTransport, CollectiveFlagPicksTheAlgorithmOnSharedGpus) {
  static DataSplit data = [] {
    auto r = load_data("synthetic:256:1x8x8:4", MemKind::dram, 5);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(r).value();
  }();
  auto config = [](const std::string& device, CollectiveAlgo algo) {
    TrainConfig c = test::gpu_config("sync-easgd", device);
    c.iterations = 12;
    c.eval_every = 12;
    c.plan.groups = GroupCount::of(3);
    c.collective = algo;
    return c;
  };
  g_gpu_count = 2;
  for (CollectiveAlgo algo :
       {CollectiveAlgo::ring, CollectiveAlgo::halving_doubling, CollectiveAlgo::hierarchical})
    for (const char* device : {"cuda:0,0,0", "cuda:0,1,0"}) {
      SCOPED_TRACE(std::string(collective_algo_name(algo)) + " " + device);
      auto cpu = train(config("cpu", algo), data, nullptr);
      ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
      g_bad_pointers = 0;
      auto gpu = train(config(device, algo), data, nullptr, fake_backend());
      ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
      EXPECT_EQ(cpu->final_weights, gpu->final_weights);
      EXPECT_EQ(cpu->group0_weights, gpu->group0_weights);
      EXPECT_EQ(g_bad_pointers.load(), 0);
    }
}

}  // namespace
}  // namespace easel
