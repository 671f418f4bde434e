// The CUDA device's arena kernels against the CPU's (cpu_arena_kernels) on the same random
// arenas, for every update rule, with segments whose lr_mult / decay_mult differ from 1 and
// padding between them that must stay untouched; the NCCL Comm among all GPUs present against
// sums computed on the host. Both skip, with the reason, on a machine without a GPU. The
// set-up failures (no GPU, no NCCL, bad devices) run everywhere: they return a Status.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <latch>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "devices/arena_kernels.hpp"
#include "devices/cuda/cublas_dyn.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "devices/device.hpp"
#include "engine/arena.hpp"
#include "engine/comm/comm.hpp"
#include "engine/memory.hpp"
#include "engine/rng.hpp"

namespace easel {
namespace {

size_t sz(int64_t n) {
  return static_cast<size_t>(n);
}

// ---------------------------------------------------------------------------------------------
// Set-up failures: a Status, never a crash (these run on every machine).

TEST(CudaSetup, NoGpuMeansAStatus) {
  auto gpus = list_gpus();
  if (!gpus.ok()) {
    EXPECT_FALSE(gpus.status().message().empty());
    auto dev = make_cuda_device(0, Precision::fp32);
    ASSERT_FALSE(dev.ok());
    EXPECT_FALSE(dev.status().message().empty());
  }
  auto far = make_cuda_device(1 << 20, Precision::fp32);  // no such GPU anywhere
  ASSERT_FALSE(far.ok());
  EXPECT_FALSE(far.status().message().empty());
}

// cuBLAS is opened at run time, not linked (devices/cuda/cublas_dyn.hpp: linking it costs
// ~210 MB of resident memory in every process): it opens without a GPU, resolves every entry
// point easel calls, and answers the same table again.
TEST(CudaSetup, CublasOpensAtRunTimeWithoutAGpu) {
  auto api = cublas_dyn::load();
  ASSERT_TRUE(api.ok()) << api.status().message();
  EXPECT_STREQ((*api)->status_name(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  EXPECT_NE((*api)->sgemm, nullptr);
  auto again = cublas_dyn::load();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *api);
  EXPECT_EQ(&cublas_dyn::api(), *api);
}

TEST(CudaSetup, NcclCommRefusesWhatItCannotConnect) {
  auto none = make_nccl_comm({});
  ASSERT_FALSE(none.ok());
  if (!nccl_built()) {
    EXPECT_NE(none.status().message().find("NCCL"), std::string::npos) << none.status().message();
    return;
  }
  EXPECT_EQ(none.status().code(), Code::invalid_argument) << none.status().message();

  auto cpu = make_cpu_device(ImplChoice::ref);
  Device* const devs[] = {cpu.get()};
  auto on_cpu = make_nccl_comm(devs);
  ASSERT_FALSE(on_cpu.ok());
  EXPECT_EQ(on_cpu.status().code(), Code::invalid_argument) << on_cpu.status().message();
  EXPECT_NE(on_cpu.status().message().find("cpu"), std::string::npos) << on_cpu.status().message();
}

// ---------------------------------------------------------------------------------------------
// Arena kernels: GPU against CPU.

// The GPU computes each rule exactly as written (no FMA contraction); g++ may contract a*b+c on
// the CPU. Operands are O(1), so a few ulps of that scale bound the difference.
bool near_cpu(float gpu, float cpu) {
  return std::abs(gpu - cpu) <= 8.f * FLT_EPSILON * (2.f + std::abs(cpu));
}

Segment seg(const char* name, int64_t count, float lr_mult, float decay_mult) {
  Segment s;
  s.name = name;
  s.count = count;
  s.lr_mult = lr_mult;
  s.decay_mult = decay_mult;
  return s;
}

// Counts that leave padding after each segment, an empty segment, a segment spanning several
// kernel tiles, multipliers other than 1 (and decay 0, as for biases).
ArenaLayout mixed_layout() {
  ArenaLayout l;
  l.add(seg("conv1.weights", 5000, 1.f, 1.f));
  l.add(seg("conv1.bias", 37, 2.f, 0.f));
  l.add(seg("empty", 0, 1.f, 1.f));
  l.add(seg("fc.weights", 1030, 0.5f, 3.f));
  l.add(seg("fc.bias", 1, 2.f, 0.f));
  return l;
}

// More segments than one launch's table holds (the kernels split them over launches).
ArenaLayout many_layout() {
  ArenaLayout l;
  Rng rng(7);
  const float lr_mults[] = {0.5f, 1.f, 2.f};
  const float decay_mults[] = {0.f, 1.f, 2.f};
  for (int i = 0; i < 300; ++i) {
    l.add(seg("s", 1 + static_cast<int64_t>(rng.below(40)), lr_mults[rng.below(3)],
              decay_mults[rng.below(3)]));
  }
  return l;
}

constexpr int64_t kGuard = 64;  // floats past the arena's end that no kernel may write

struct HostArrays {
  std::vector<float> w, g, v, c;  // each total + kGuard floats
};

HostArrays random_arrays(int64_t total, uint64_t seed) {
  Rng rng(seed);
  HostArrays h;
  for (auto* a : {&h.w, &h.g, &h.v, &h.c}) {
    a->resize(sz(total + kGuard));
    for (float& x : *a)
      x = rng.uniform(-1.f, 1.f);
  }
  return h;
}

struct Ptrs {
  float *w, *g, *v, *c;
};

struct RuleCase {
  const char* name;
  std::function<void(ArenaKernels&, std::span<const Segment>, const Ptrs&)> run;
};

constexpr float kLr = 0.05f, kMu = 0.9f, kWd = 0.01f, kAlpha = 0.1f;

std::vector<RuleCase> rule_cases() {
  return {
      {"sgd", [](ArenaKernels& k, std::span<const Segment> s,
                 const Ptrs& p) { k.sgd_step(s, p.w, p.g, kLr, kWd); }},
      {"momentum", [](ArenaKernels& k, std::span<const Segment> s,
                      const Ptrs& p) { k.momentum_step(s, p.w, p.g, p.v, kLr, kMu, kWd); }},
      {"nesterov", [](ArenaKernels& k, std::span<const Segment> s,
                      const Ptrs& p) { k.nesterov_step(s, p.w, p.g, p.v, kLr, kMu, kWd); }},
      {"elastic_sgd",
       [](ArenaKernels& k, std::span<const Segment> s, const Ptrs& p) {
         k.elastic_sgd_step(s, p.w, p.g, p.c, kLr, kWd, kAlpha);
       }},
      {"elastic_sgd alpha 0",
       [](ArenaKernels& k, std::span<const Segment> s, const Ptrs& p) {
         k.elastic_sgd_step(s, p.w, p.g, p.c, kLr, kWd, 0.f);
       }},
      {"elastic_momentum nesterov",
       [](ArenaKernels& k, std::span<const Segment> s, const Ptrs& p) {
         k.elastic_momentum_step(s, p.w, p.g, p.v, p.c, kLr, kMu, kWd, kAlpha, true);
       }},
      {"elastic_momentum heavy-ball",
       [](ArenaKernels& k, std::span<const Segment> s, const Ptrs& p) {
         k.elastic_momentum_step(s, p.w, p.g, p.v, p.c, kLr, kMu, kWd, kAlpha, false);
       }},
      {"elastic_momentum alpha 0",
       [](ArenaKernels& k, std::span<const Segment> s, const Ptrs& p) {
         k.elastic_momentum_step(s, p.w, p.g, p.v, p.c, kLr, kMu, kWd, 0.f, true);
       }},
  };
}

class CudaUpdate : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gpus = list_gpus();
    if (!gpus.ok()) GTEST_SKIP() << gpus.status().message();
    auto d = make_cuda_device(0, Precision::fp32);
    ASSERT_TRUE(d.ok()) << d.status().message();
    dev_ = std::move(d).value();
    const Status s = dev_->attach();
    ASSERT_TRUE(s.ok()) << s.message();
  }

  // A device buffer holding `host`.
  void to_device(const std::vector<float>& host, Buffer* out) {
    auto b = Buffer::allocate(std::max<size_t>(host.size(), 1) * sizeof(float), MemKind::device);
    ASSERT_TRUE(b.ok()) << b.status().message();
    *out = std::move(b).value();
    dev_->upload(out->data(), host.data(), host.size() * sizeof(float));
    dev_->synchronize();
  }
  std::vector<float> to_host(const Buffer& b, size_t n) {
    std::vector<float> h(n);
    dev_->download(h.data(), b.data(), n * sizeof(float));
    return h;
  }

  // Runs every rule on the CPU and on the GPU from the same arrays and compares: segment
  // elements within a few ulps, padding and the guard past the end bit-identical to the input,
  // the read-only inputs (g, centre) unchanged on the device.
  void check_layout(const ArenaLayout& layout, uint64_t seed) {
    const int64_t total = layout.total_floats();
    std::vector<char> in_segment(sz(total + kGuard), 0);
    for (const Segment& s : layout.segments()) {
      for (int64_t i = s.offset; i < s.offset + s.count; ++i)
        in_segment[sz(i)] = 1;
    }
    ASSERT_LT(layout.param_count(), total) << "the layout should have padding";
    const std::span<const Segment> segs(layout.segments());

    for (const RuleCase& rc : rule_cases()) {
      SCOPED_TRACE(rc.name);
      const HostArrays in = random_arrays(total, seed);
      HostArrays cpu = in;
      rc.run(cpu_arena_kernels(), segs, {cpu.w.data(), cpu.g.data(), cpu.v.data(), cpu.c.data()});

      Buffer w, g, v, c;
      ASSERT_NO_FATAL_FAILURE(to_device(in.w, &w));
      ASSERT_NO_FATAL_FAILURE(to_device(in.g, &g));
      ASSERT_NO_FATAL_FAILURE(to_device(in.v, &v));
      ASSERT_NO_FATAL_FAILURE(to_device(in.c, &c));
      rc.run(dev_->kernels(), segs, {w.as<float>(), g.as<float>(), v.as<float>(), c.as<float>()});
      dev_->synchronize();
      const size_t n = in.w.size();
      const std::vector<float> gw = to_host(w, n), gv = to_host(v, n);
      EXPECT_EQ(to_host(g, n), in.g);
      EXPECT_EQ(to_host(c, n), in.c);

      int wrong = 0, touched = 0;
      for (size_t i = 0; i < n; ++i) {
        if (in_segment[i]) {
          const bool ok = near_cpu(gw[i], cpu.w[i]) && near_cpu(gv[i], cpu.v[i]);
          if (!ok && ++wrong <= 5)
            ADD_FAILURE() << "element " << i << ": w gpu " << gw[i] << " cpu " << cpu.w[i]
                          << ", v gpu " << gv[i] << " cpu " << cpu.v[i];
        } else {
          const bool same = std::memcmp(&gw[i], &in.w[i], sizeof(float)) == 0 &&
                            std::memcmp(&gv[i], &in.v[i], sizeof(float)) == 0;
          if (!same && ++touched <= 5)
            ADD_FAILURE() << "padding/guard element " << i << " was written";
        }
      }
      EXPECT_EQ(wrong, 0);
      EXPECT_EQ(touched, 0);
    }
  }

  std::unique_ptr<Device> dev_;
};

TEST_F(CudaUpdate, RulesMatchCpuWithMultipliersAndPadding) {
  check_layout(mixed_layout(), 11);
}

TEST_F(CudaUpdate, RulesMatchCpuOverManySegments) {
  check_layout(many_layout(), 12);
}

// With alpha 0 the elastic steps take the plain rules: bit-identical on the device too.
TEST_F(CudaUpdate, ElasticWithAlphaZeroIsThePlainStep) {
  const ArenaLayout layout = mixed_layout();
  const std::span<const Segment> segs(layout.segments());
  const HostArrays in = random_arrays(layout.total_floats(), 13);
  const size_t n = in.w.size();
  for (bool nesterov : {false, true}) {
    Buffer w1, v1, w2, v2, g, c;
    ASSERT_NO_FATAL_FAILURE(to_device(in.w, &w1));
    ASSERT_NO_FATAL_FAILURE(to_device(in.v, &v1));
    ASSERT_NO_FATAL_FAILURE(to_device(in.w, &w2));
    ASSERT_NO_FATAL_FAILURE(to_device(in.v, &v2));
    ASSERT_NO_FATAL_FAILURE(to_device(in.g, &g));
    ASSERT_NO_FATAL_FAILURE(to_device(in.c, &c));
    ArenaKernels& k = dev_->kernels();
    k.elastic_momentum_step(segs, w1.as<float>(), g.as<float>(), v1.as<float>(), c.as<float>(), kLr,
                            kMu, kWd, 0.f, nesterov);
    if (nesterov) {
      k.nesterov_step(segs, w2.as<float>(), g.as<float>(), v2.as<float>(), kLr, kMu, kWd);
    } else {
      k.momentum_step(segs, w2.as<float>(), g.as<float>(), v2.as<float>(), kLr, kMu, kWd);
    }
    dev_->synchronize();
    EXPECT_EQ(std::memcmp(to_host(w1, n).data(), to_host(w2, n).data(), n * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(to_host(v1, n).data(), to_host(v2, n).data(), n * sizeof(float)), 0);
  }
}

TEST_F(CudaUpdate, ElementwiseOpsMatchCpu) {
  const int64_t n = 100003;  // not a multiple of any tile
  const HostArrays in = random_arrays(n, 14);
  ArenaKernels& cpu = cpu_arena_kernels();
  struct Case {
    const char* name;
    bool exact;  // one rounding per element: the CPU and the GPU agree bit for bit
    std::function<void(ArenaKernels&, float* y, const float* x)> run;
  };
  const Case cases[] = {
      {"copy", true, [&](ArenaKernels& k, float* y, const float* x) { k.copy(y, x, n); }},
      {"scale", true, [&](ArenaKernels& k, float* y, const float*) { k.scale(y, 0.37f, n); }},
      {"axpy", false, [&](ArenaKernels& k, float* y, const float* x) { k.axpy(y, -0.3f, x, n); }},
      {"elastic_centre_sum", false,
       [&](ArenaKernels& k, float* y, const float* x) { k.elastic_centre_sum(y, x, 0.05f, 4, n); }},
  };
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.name);
    std::vector<float> y = in.w;
    cs.run(cpu, y.data(), in.g.data());
    Buffer dy, dx;
    ASSERT_NO_FATAL_FAILURE(to_device(in.w, &dy));
    ASSERT_NO_FATAL_FAILURE(to_device(in.g, &dx));
    cs.run(dev_->kernels(), dy.as<float>(), dx.as<float>());
    dev_->synchronize();
    const std::vector<float> gy = to_host(dy, in.w.size());
    int wrong = 0;
    for (size_t i = 0; i < gy.size(); ++i) {
      const bool ok = i >= sz(n) ? std::memcmp(&gy[i], &in.w[i], sizeof(float)) == 0
                      : cs.exact ? std::memcmp(&gy[i], &y[i], sizeof(float)) == 0
                                 : near_cpu(gy[i], y[i]);
      if (!ok && ++wrong <= 5)
        ADD_FAILURE() << "element " << i << ": gpu " << gy[i] << " cpu " << y[i];
    }
    EXPECT_EQ(wrong, 0);
  }
}

// n == 0 and empty segment lists launch nothing (null pointers are never touched).
TEST_F(CudaUpdate, EmptyLaunchesNothing) {
  ArenaKernels& k = dev_->kernels();
  k.copy(nullptr, nullptr, 0);
  k.axpy(nullptr, 1.f, nullptr, 0);
  k.scale(nullptr, 2.f, 0);
  k.elastic_centre_sum(nullptr, nullptr, 0.1f, 4, 0);
  k.sgd_step({}, nullptr, nullptr, kLr, kWd);
  const Segment empty[] = {seg("a", 0, 1.f, 1.f), seg("b", 0, 2.f, 0.f)};
  k.momentum_step(empty, nullptr, nullptr, nullptr, kLr, kMu, kWd);
  k.elastic_momentum_step(empty, nullptr, nullptr, nullptr, nullptr, kLr, kMu, kWd, kAlpha, true);
  dev_->synchronize();  // aborts on any launch error
}

// ---------------------------------------------------------------------------------------------
// The NCCL Comm: one rank per GPU, each on its own thread.

// Integer-valued input of rank r: every partial sum is exact, whatever NCCL's order.
float value(int rank, int64_t i) {
  return static_cast<float>((rank + 1) * (i % 13) + rank);
}
float expected_sum(int p, int64_t i) {
  float s = 0.f;
  for (int r = 0; r < p; ++r)
    s += value(r, i);
  return s;
}

TEST(NcclComm, RefusesTwoRanksOnOneGpu) {
  auto gpus = list_gpus();
  if (!gpus.ok()) GTEST_SKIP() << gpus.status().message();
  if (!nccl_built()) GTEST_SKIP() << "easel was built without NCCL";
  auto a = make_cuda_device(0, Precision::fp32);
  auto b = make_cuda_device(0, Precision::fp32);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->attach().ok());
  ASSERT_TRUE((*b)->attach().ok());
  Device* const same[] = {a->get(), a->get()};
  Device* const two[] = {a->get(), b->get()};
  for (std::span<Device* const> devs :
       {std::span<Device* const>(same), std::span<Device* const>(two)}) {
    auto c = make_nccl_comm(devs);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), Code::invalid_argument) << c.status().message();
    EXPECT_NE(c.status().message().find("cuda:0"), std::string::npos) << c.status().message();
  }
}

// What each rank brings back to the main thread, which compares.
struct RankResult {
  std::vector<std::vector<float>> allreduce, reduce_dst, reduce_src, reduce_in_place, broadcast;
  double wait_s = -1.0;
};

TEST(NcclComm, CollectivesMatchHostSums) {
  auto gpus = list_gpus();
  if (!gpus.ok()) GTEST_SKIP() << gpus.status().message();
  if (!nccl_built()) GTEST_SKIP() << "easel was built without NCCL";
  const int p = static_cast<int>(gpus->size());
  const int64_t sizes[] = {1, 1000, (int64_t{1} << 20) + 3};
  const int reduce_root = p - 1, bcast_root = p / 2;

  std::vector<std::unique_ptr<Device>> devs;
  std::vector<Device*> ptrs;
  for (int r = 0; r < p; ++r) {
    auto d = make_cuda_device(r, Precision::fp32);
    ASSERT_TRUE(d.ok()) << d.status().message();
    devs.push_back(std::move(d).value());
    ptrs.push_back(devs.back().get());
  }
  std::vector<RankResult> results(sz(p));
  std::vector<Status> attached_status(sz(p));
  std::unique_ptr<Comm> comm;  // destroyed before the devices
  std::latch attached(p), created(1);

  auto rank_main = [&](int r) {
    RankResult& out = results[sz(r)];
    attached_status[sz(r)] = devs[sz(r)]->attach();
    attached.count_down();
    created.wait();
    if (!attached_status[sz(r)].ok() || comm == nullptr) return;
    Device& dev = *devs[sz(r)];
    // A device buffer of n floats holding value(r, i), or -1 everywhere. A rank that cannot
    // allocate a few MiB aborts: skipping its collectives would hang the other ranks.
    auto alloc = [&](int64_t n, bool rank_values) {
      auto x = Buffer::allocate(sz(n) * sizeof(float), MemKind::device);
      EASEL_CHECK_MSG(x.ok(), "NCCL test: cudaMalloc failed");
      Buffer b = std::move(x).value();
      std::vector<float> h(sz(n));
      for (int64_t i = 0; i < n; ++i)
        h[sz(i)] = rank_values ? value(r, i) : -1.f;
      dev.upload(b.data(), h.data(), sz(n) * sizeof(float));
      dev.synchronize();
      return b;
    };
    auto download = [&](const Buffer& b, int64_t n) {
      std::vector<float> h(sz(n));
      dev.download(h.data(), b.data(), sz(n) * sizeof(float));
      return h;
    };
    for (int64_t n : sizes) {
      Buffer ar = alloc(n, true), src = alloc(n, true), dst = alloc(n, false),
             inplace = alloc(n, true), bc = alloc(n, true);
      comm->allreduce_sum(r, ar.as<float>(), n);
      out.allreduce.push_back(download(ar, n));
      // Out of place: non-root dst must stay as it was (-1).
      comm->reduce_sum(r, src.as<float>(), dst.as<float>(), n, reduce_root);
      out.reduce_dst.push_back(download(dst, n));
      out.reduce_src.push_back(download(src, n));
      // In place at root 0; non-roots pass no dst.
      comm->reduce_sum(r, inplace.as<float>(), r == 0 ? inplace.as<float>() : nullptr, n, 0);
      out.reduce_in_place.push_back(download(inplace, n));
      comm->broadcast(r, bc.as<float>(), n, bcast_root);
      out.broadcast.push_back(download(bc, n));
    }
    comm->barrier(r);  // every rank is done before any frees its buffers
    out.wait_s = comm->wait_seconds(r);
  };

  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r)
    threads.emplace_back(rank_main, r);
  attached.wait();
  Status create_status;
  bool all_attached = true;
  for (const Status& s : attached_status)
    all_attached = all_attached && s.ok();
  if (all_attached) {
    auto c = make_nccl_comm(ptrs);
    if (c.ok()) {
      comm = std::move(c).value();
    } else {
      create_status = c.status();
    }
  }
  created.count_down();
  for (auto& t : threads)
    t.join();
  for (const Status& s : attached_status)
    ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(create_status.ok()) << create_status.message();
  EXPECT_EQ(comm->size(), p);
  EXPECT_NE(comm->name().find("nccl"), std::string::npos);

  for (int r = 0; r < p; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const RankResult& res = results[sz(r)];
    ASSERT_EQ(res.allreduce.size(), std::size(sizes));
    EXPECT_GE(res.wait_s, 0.0);
    for (size_t k = 0; k < std::size(sizes); ++k) {
      const int64_t n = sizes[k];
      SCOPED_TRACE("n " + std::to_string(n));
      int wrong[5] = {};
      for (int64_t i = 0; i < n; ++i) {
        const size_t j = sz(i);
        wrong[0] += (res.allreduce[k][j] != expected_sum(p, i));
        wrong[1] += (res.reduce_dst[k][j] != (r == reduce_root ? expected_sum(p, i) : -1.f));
        wrong[2] += (res.reduce_src[k][j] != value(r, i));
        wrong[3] += (r == 0 && res.reduce_in_place[k][j] != expected_sum(p, i));
        wrong[4] += (res.broadcast[k][j] != value(bcast_root, i));
      }
      EXPECT_EQ(wrong[0], 0) << "allreduce";
      EXPECT_EQ(wrong[1], 0) << "reduce to rank " << reduce_root;
      EXPECT_EQ(wrong[2], 0) << "reduce changed its source";
      EXPECT_EQ(wrong[3], 0) << "reduce in place at rank 0";
      EXPECT_EQ(wrong[4], 0) << "broadcast from rank " << bcast_root;
    }
  }
  comm.reset();
}

}  // namespace
}  // namespace easel
