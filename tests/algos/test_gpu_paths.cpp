// The trainer's GPU paths (--device cuda) on any machine: a stand-in GPU backend whose "device"
// memory is host memory that the stand-in tracks. Its ops are the CPU reference ops, wrapped to
// check that every pointer they get is device memory; its copies check their directions; its
// update kernels count their calls. Like a GPU's, its work is asynchronous: the update kernels
// and uploads are queued on its compute stream and run only when an op, a download, a
// synchronize() or the communication stream's wait needs them; its communication stream (the
// overlap's) runs its work either at once (eager) or only when a wait needs it (late), so that a
// missing wait between the streams, in either direction, changes the result (FakeGpu). So these
// tests prove the plumbing — batches and weights
// staged or resident, centre copies and their broadcast, evaluation on the devices — and, since
// the arithmetic is the CPU's, that a GPU run equals the CPU run bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <optional>

#include "algos/comm_list.hpp"
#include "algos/trainer.hpp"
#include "devices/ref_precision.hpp"
#include "tests/support/test_nets.hpp"

namespace easel {
namespace {

// ---- "device" memory: host allocations, remembered ----
std::mutex g_mu;
std::map<const char*, size_t>& allocations() {
  static std::map<const char*, size_t> m;
  return m;
}

bool is_device(const void* p) {
  std::lock_guard<std::mutex> lock(g_mu);
  const char* c = static_cast<const char*>(p);
  auto it = allocations().upper_bound(c);
  if (it == allocations().begin()) return false;
  --it;
  return c >= it->first && c < it->first + it->second;
}

void* fake_alloc(size_t bytes, MemKind kind, std::string*) {
  void* p = ::operator new (bytes, std::align_val_t{64});
  if (kind == MemKind::device) {
    std::lock_guard<std::mutex> lock(g_mu);
    allocations()[static_cast<const char*>(p)] = bytes;
  }
  return p;
}
void fake_free(void* p, MemKind kind) {
  if (kind == MemKind::device) {
    std::lock_guard<std::mutex> lock(g_mu);
    allocations().erase(static_cast<const char*>(p));
  }
  ::operator delete (p, std::align_val_t{64});
}
void fake_copy(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}
void fake_zero(void* p, size_t bytes) {
  std::memset(p, 0, bytes);
}

std::atomic<int> g_bad_pointers{0};  // device-side calls that got host memory
void expect_device(const void* p) {
  if (p != nullptr && !is_device(p)) g_bad_pointers.fetch_add(1);
}

// ---- the stand-in device ----

// One stream of a stand-in GPU: work queued in order, run by whoever needs it done (the
// device's own thread). pushed/done count the items, so that a wait can run the queue up to a
// point.
class Stream {
 public:
  int64_t push(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    q_.push_back(std::move(fn));
    return ++pushed_;
  }
  int64_t pushed() {
    std::lock_guard<std::mutex> lock(mu_);
    return pushed_;
  }
  // Runs the queued work up to item `target` (all of it by default).
  void run_until(int64_t target = INT64_MAX) {
    for (;;) {
      std::function<void()> fn;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (q_.empty() || done_ >= target) return;
        fn = std::move(q_.front());
        q_.pop_front();
        ++done_;
      }
      fn();
    }
  }

 private:
  std::mutex mu_;
  std::deque<std::function<void()>> q_;
  int64_t pushed_ = 0, done_ = 0;
};

// When the stand-in's communication stream runs its work: at once (eager: a missing
// comm_waits_for_compute lets it read what the compute stream has not written yet), or only when
// a wait or synchronize_comm needs it (late: a missing compute_waits_for_comm lets the compute
// stream read what the communication stream has not written yet).
std::atomic<bool> g_comm_eager{false};

class CheckedOp final : public Op {
 public:
  CheckedOp(std::unique_ptr<Op> op, Stream* compute)
      : Op(op->desc()), op_(std::move(op)), compute_(compute) {}
  std::string impl() const override { return op_->impl(); }
  void forward(const float* src, float* dst, std::span<const float* const> w,
               bool training) override {
    expect_device(src);
    expect_device(dst);
    for (const float* p : w)
      expect_device(p);
    compute_->run_until();  // the queued work before it, in stream order
    op_->forward(src, dst, w, training);
  }
  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> w, std::span<float* const> dw) override {
    for (const void* p : {static_cast<const void*>(src), static_cast<const void*>(dst),
                          static_cast<const void*>(diff_dst), static_cast<const void*>(diff_src)})
      expect_device(p);
    for (const float* p : w)
      expect_device(p);
    for (float* p : dw)
      expect_device(p);
    compute_->run_until();
    op_->backward(src, dst, diff_dst, diff_src, w, dw);
  }
  // Net calls these for every kind (the kinds of several inputs, add and concat, only these).
  void forward_n(std::span<const float* const> srcs, float* dst, std::span<const float* const> w,
                 bool training) override {
    for (const float* p : srcs)
      expect_device(p);
    expect_device(dst);
    for (const float* p : w)
      expect_device(p);
    compute_->run_until();
    op_->forward_n(srcs, dst, w, training);
  }
  void backward_n(std::span<const float* const> srcs, const float* dst, const float* diff_dst,
                  std::span<float* const> diff_srcs, std::span<const float* const> w,
                  std::span<float* const> dw) override {
    for (const float* p : srcs)
      expect_device(p);
    for (const float* p : diff_srcs)
      expect_device(p);
    expect_device(dst);
    expect_device(diff_dst);
    for (const float* p : w)
      expect_device(p);
    for (float* p : dw)
      expect_device(p);
    compute_->run_until();
    op_->backward_n(srcs, dst, diff_dst, diff_srcs, w, dw);
  }

 private:
  std::unique_ptr<Op> op_;
  Stream* compute_;
};

class CheckedLoss final : public LossOp {
 public:
  CheckedLoss(std::unique_ptr<LossOp> l, Stream* compute) : l_(std::move(l)), compute_(compute) {}
  std::string impl() const override { return l_->impl(); }
  double forward(const float* logits, const int32_t* labels, float* prob, int64_t n,
                 int64_t* correct) override {
    expect_device(logits);
    expect_device(labels);
    expect_device(prob);
    compute_->run_until();
    return l_->forward(logits, labels, prob, n, correct);
  }
  void backward(const float* prob, const int32_t* labels, float* diff, int64_t n,
                float scale) override {
    expect_device(prob);
    expect_device(labels);
    expect_device(diff);
    compute_->run_until();
    l_->backward(prob, labels, diff, n, scale);
  }

 private:
  std::unique_ptr<LossOp> l_;
  Stream* compute_;
};

std::atomic<int> g_kernel_calls{0};
std::atomic<int64_t> g_host_link_bytes{0};  // bytes uploaded and downloaded by the stand-ins

// The CPU's update kernels, counted, their pointers checked when queued, and queued on a stream
// (`queue` puts work on it: the compute stream's push, or the communication stream's).
class CountingKernels final : public ArenaKernels {
 public:
  explicit CountingKernels(std::function<void(std::function<void()>)> queue)
      : queue_(std::move(queue)) {}
  ArenaKernels& k = cpu_arena_kernels();
  void copy(float* y, const float* x, int64_t n) override {
    note({y, x});
    queue_([=, this] { k.copy(y, x, n); });
  }
  void axpy(float* y, float a, const float* x, int64_t n) override {
    note({y, x});
    queue_([=, this] { k.axpy(y, a, x, n); });
  }
  void scale(float* y, float a, int64_t n) override {
    note({y});
    queue_([=, this] { k.scale(y, a, n); });
  }
  void sgd_step(std::span<const Segment> s, float* w, const float* g, float lr, float wd) override {
    note({w, g});
    queue_([=, this] { k.sgd_step(s, w, g, lr, wd); });
  }
  void momentum_step(std::span<const Segment> s, float* w, const float* g, float* v, float lr,
                     float mu, float wd) override {
    note({w, g, v});
    queue_([=, this] { k.momentum_step(s, w, g, v, lr, mu, wd); });
  }
  void nesterov_step(std::span<const Segment> s, float* w, const float* g, float* v, float lr,
                     float mu, float wd) override {
    note({w, g, v});
    queue_([=, this] { k.nesterov_step(s, w, g, v, lr, mu, wd); });
  }
  void elastic_sgd_step(std::span<const Segment> s, float* w, const float* g, const float* c,
                        float lr, float wd, float alpha) override {
    note({w, g, c});
    queue_([=, this] { k.elastic_sgd_step(s, w, g, c, lr, wd, alpha); });
  }
  void elastic_momentum_step(std::span<const Segment> s, float* w, const float* g, float* v,
                             const float* c, float lr, float d, float wd, float alpha,
                             bool nesterov) override {
    note({w, g, v, c});
    queue_([=, this] { k.elastic_momentum_step(s, w, g, v, c, lr, d, wd, alpha, nesterov); });
  }
  void elastic_centre_sum(float* c, const float* sum, float alpha, int p, int64_t n) override {
    note({c, sum});
    queue_([=, this] { k.elastic_centre_sum(c, sum, alpha, p, n); });
  }

 private:
  std::function<void(std::function<void()>)> queue_;
  static void note(std::initializer_list<const void*> ptrs) {
    g_kernel_calls.fetch_add(1);
    for (const void* p : ptrs)
      expect_device(p);
  }
};

class FakeGpu final : public Device {
 public:
  explicit FakeGpu(int ordinal, Precision precision = Precision::fp32)
      : ordinal_(ordinal),
        precision_(precision),
        cpu_(make_cpu_device(ImplChoice::ref)),
        kernels_([this](std::function<void()> fn) { compute_.push(std::move(fn)); }),
        comm_kernels_([this](std::function<void()> fn) { queue_comm(std::move(fn)); }) {}
  std::string name() const override { return "cuda:" + std::to_string(ordinal_); }
  MemKind memory() const override { return MemKind::device; }
  Status attach() override {
    static std::once_flag once;
    std::call_once(once, [] {
      ExternalMemory m;
      m.alloc = fake_alloc;
      m.free = fake_free;
      m.copy = fake_copy;
      m.zero = fake_zero;
      install_external_memory(m);
    });
    return {};
  }
  // What the CUDA device takes (devices/cuda/cuda_op_list.cpp): every kind but Caffe's
  // within-channel LRN, which it refuses (cuda_pool_lrn.cpp).
  Result<std::unique_ptr<Op>> make_op(const OpDesc& d) override {
    if (d.kind == OpKind::lrn && d.lrn_within_channel)
      return unavailable(describe_op(d) +
                         ": no CUDA implementation applies (the within-channel LRN region)");
    EASEL_ASSIGN_OR_RETURN(std::unique_ptr<Op> op, cpu_->make_op(d));
    // tf32/bf16: the convolutions and inner products round their inputs as tensor cores do.
    op = with_rounded_inputs(std::move(op), precision_);
    return std::unique_ptr<Op>(std::make_unique<CheckedOp>(std::move(op), &compute_));
  }
  Result<std::unique_ptr<LossOp>> make_loss(int64_t batch, int64_t classes) override {
    EASEL_ASSIGN_OR_RETURN(std::unique_ptr<LossOp> l, cpu_->make_loss(batch, classes));
    return std::unique_ptr<LossOp>(std::make_unique<CheckedLoss>(std::move(l), &compute_));
  }
  // Queued, as a GPU's (the source must stay unchanged until the next synchronize()).
  void upload(void* dst, const void* src, size_t bytes) override {
    expect_device(dst);
    if (is_device(src)) g_bad_pointers.fetch_add(1);
    g_host_link_bytes.fetch_add(static_cast<int64_t>(bytes));
    compute_.push([=] { std::memcpy(dst, src, bytes); });
  }
  void download(void* dst, const void* src, size_t bytes) override {
    expect_device(src);
    if (is_device(dst)) g_bad_pointers.fetch_add(1);
    g_host_link_bytes.fetch_add(static_cast<int64_t>(bytes));
    compute_.run_until();
    std::memcpy(dst, src, bytes);
  }
  void synchronize() override { compute_.run_until(); }
  ArenaKernels& kernels() override { return kernels_; }
  ArenaKernels& comm_kernels() override { return comm_kernels_; }
  // The communication stream's next work first runs the compute stream up to here.
  void comm_waits_for_compute() override {
    const int64_t upto = compute_.pushed();
    queue_comm([this, upto] { compute_.run_until(upto); });
  }
  // The compute stream's next work runs after everything queued on the communication stream.
  void compute_waits_for_comm() override { comm_.run_until(); }
  void synchronize_comm() override { comm_.run_until(); }

  // Work on the communication stream (its kernels, the stand-in NCCL's queued collectives).
  void queue_comm(std::function<void()> fn) {
    comm_.push(std::move(fn));
    if (g_comm_eager) comm_.run_until();
  }
  // Before a collective on the compute stream (NCCL's synchronous ones run there).
  void finish_compute() { compute_.run_until(); }

 private:
  int ordinal_;
  Precision precision_;
  std::unique_ptr<Device> cpu_;
  Stream compute_, comm_;
  CountingKernels kernels_, comm_kernels_;
};

int g_gpu_count = 2;

// The device list with its "cuda" entry replaced by the stand-in: g_gpu_count units, each a
// FakeGpu; host memory underneath, so the shared-memory Comm stands in for NCCL.
Result<int> fake_gpu_count() {
  return g_gpu_count;
}
Result<std::unique_ptr<Device>> make_fake_gpu(int unit, ImplChoice, Precision precision) {
  return std::unique_ptr<Device>(std::make_unique<FakeGpu>(unit, precision));
}
// The stand-in NCCL: the shared-memory Comm, in the devices' stream order. Its collectives run
// after the rank's queued compute work (NCCL's run on the rank's stream); the queued ones go on
// the rank's communication stream.
class FakeNccl final : public Comm {
 public:
  explicit FakeNccl(std::span<Device* const> devs)
      : shm_(make_shm_comm(static_cast<int>(devs.size()), CollectiveAlgo::tree)) {
    for (Device* d : devs)
      devs_.push_back(static_cast<FakeGpu*>(d));
  }
  int size() const override { return shm_->size(); }
  std::string name() const override { return "stand-in nccl"; }
  void allreduce_sum(int rank, float* buf, int64_t n) override {
    dev(rank).finish_compute();
    shm_->allreduce_sum(rank, buf, n);
  }
  void reduce_sum(int rank, const float* src, float* dst, int64_t n, int root) override {
    dev(rank).finish_compute();
    shm_->reduce_sum(rank, src, dst, n, root);
  }
  void broadcast(int rank, float* buf, int64_t n, int root) override {
    dev(rank).finish_compute();
    shm_->broadcast(rank, buf, n, root);
  }
  void barrier(int rank) override {
    dev(rank).finish_compute();
    shm_->barrier(rank);
  }
  void reduce_sum_queued(int rank, const float* src, float* dst, int64_t n, int root) override {
    dev(rank).queue_comm([=, this] { shm_->reduce_sum(rank, src, dst, n, root); });
  }
  void broadcast_queued(int rank, float* buf, int64_t n, int root) override {
    dev(rank).queue_comm([=, this] { shm_->broadcast(rank, buf, n, root); });
  }
  double wait_seconds(int rank) const override { return shm_->wait_seconds(rank); }

 private:
  FakeGpu& dev(int rank) { return *devs_[static_cast<size_t>(rank)]; }
  std::unique_ptr<Comm> shm_;
  std::vector<FakeGpu*> devs_;
};

Result<std::unique_ptr<Comm>> make_fake_comm(std::span<Device* const> devs) {
  return std::unique_ptr<Comm>(std::make_unique<FakeNccl>(devs));
}

DeviceRegistry fake_backend() {
  static const std::vector<DeviceEntry> list = [] {
    std::vector<DeviceEntry> v(device_list().begin(), device_list().end());
    for (DeviceEntry& e : v)
      if (std::string(e.name) == "cuda")
        e = DeviceEntry{"cuda",
                        "stand-in GPUs over host memory",
                        true,
                        fake_gpu_count,
                        make_fake_gpu,
                        "stand-in NCCL",
                        [] { return true; },
                        make_fake_comm};
    return v;
  }();
  return {list};
}

DataSplit& small_data() {
  static DataSplit d = [] {
    auto r = load_data("synthetic:512:1x8x8:4", MemKind::dram, 5);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(r).value();
  }();
  return d;
}

TrainConfig config(const std::string& algo, const std::string& device) {
  TrainConfig c;
  c.net = "mlp";
  c.data = "synthetic";
  c.algo = algo;
  c.iterations = 40;
  c.eval_every = 20;
  c.batch = 16;
  c.lr = 0.05;
  c.lr_policy = LrSchedule::Policy::fixed;
  c.seed = 7;
  c.impl = ImplChoice::ref;
  c.layout = Layout::nchw;
  c.device = parse_device(device).value();
  c.plan.threads_per_group = 1;
  c.plan.oversubscribe = true;
  c.progress = Progress::none;
  return c;
}

struct Runs {
  TrainSummary cpu, gpu;
  int kernel_calls = 0, bad_pointers = 0;
  int64_t host_link_bytes = 0;  // the GPU run's uploads and downloads
};

Runs cpu_and_gpu(const std::string& algo, int groups, TrainConfig (*tweak)(TrainConfig) = nullptr) {
  Runs r;
  TrainConfig c = config(algo, "cpu");
  c.plan.groups = std::to_string(groups);
  if (tweak) c = tweak(c);
  auto a = train(c, small_data(), nullptr);
  EXPECT_TRUE(a.ok()) << a.status().to_string();
  g_gpu_count = groups;
  TrainConfig g = config(algo, "cuda");
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
    g.plan.groups = "2";
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
    Status on_checkpoint(const Checkpoint& ck) override {
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
  c.plan.groups = "3";
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
  auto plan = plan_groups(config("msgd", "cuda"), topo, fake_backend());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->groups.size(), 1u);
  EXPECT_EQ(plan->groups[0].gpu, 0);
  plan = plan_groups(config("sync-easgd", "cuda"), topo, fake_backend());
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
  EXPECT_FALSE(parse_device("cuda:1,1").ok());

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
  auto shm = choose_comm(needs).make(needs);
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
  auto comm = dev.make(needs);
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  EXPECT_EQ((*comm)->size(), 2);
}

}  // namespace
}  // namespace easel
