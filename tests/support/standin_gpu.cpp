// The stand-in GPU (standin_gpu.hpp).
#include "tests/support/standin_gpu.hpp"

#include "devices/activations.hpp"
#include "devices/ref_precision.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>

#include "devices/shared_gpu_comm.hpp"

namespace easel::standin {

std::atomic<int> g_bad_pointers{0};
std::atomic<int> g_kernel_calls{0};
std::atomic<int64_t> g_host_link_bytes{0};
std::atomic<bool> g_comm_eager{false};
int g_gpu_count = 2;

namespace {

[[noreturn]] void fatal(const std::string& what) {
  std::fprintf(stderr, "stand-in GPU: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// ---- device memory: PROT_NONE pages, one mapping per allocation ----

struct Region {
  size_t bytes = 0, mapped = 0;
  int unit = 0;
  int opens = 0;
};

std::mutex g_mu;  // guards everything below
std::map<const char*, Region>& regions() {
  static std::map<const char*, Region> m;
  return m;
}
std::map<int, int64_t>& in_use() {
  static std::map<int, int64_t> m;
  return m;
}
std::vector<FakeGpu*>& all_devices() {
  static std::vector<FakeGpu*> v;
  return v;
}
int64_t g_limit = int64_t{1} << 30;

thread_local int t_current_unit = 0;  // the thread's current GPU (cudaSetDevice's)

// The region holding p (g_mu held), or null.
std::pair<const char* const, Region>* find_locked(const void* p) {
  const char* c = static_cast<const char*>(p);
  auto it = regions().upper_bound(c);
  if (it == regions().begin()) return nullptr;
  --it;
  if (c >= it->first && c < it->first + it->second.mapped) return &*it;
  return nullptr;
}

void protect(const char* base, size_t mapped, bool open) {
  if (mprotect(const_cast<char*>(base), mapped, open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
    fatal(std::string("mprotect: ") + std::strerror(errno));
}

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

void* fake_alloc(size_t bytes, MemKind kind, std::string* why) {
  if (kind != MemKind::device) return ::operator new (bytes, std::align_val_t{64});
  const int unit = t_current_unit;
  const size_t mapped = (bytes + page_size() - 1) / page_size() * page_size();
  std::lock_guard<std::mutex> lock(g_mu);
  if (in_use()[unit] + static_cast<int64_t>(bytes) > g_limit) {
    *why = "out of memory: the stand-in GPU " + std::to_string(unit) + " holds " +
           std::to_string(in_use()[unit]) + " of its " + std::to_string(g_limit) + " bytes";
    return nullptr;
  }
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    *why = std::string("mmap: ") + std::strerror(errno);
    return nullptr;
  }
  std::memset(p, 0xff, mapped);  // NaNs: fresh device memory holds no zeros
  protect(static_cast<char*>(p), mapped, false);
  regions()[static_cast<const char*>(p)] = Region{bytes, mapped, unit, 0};
  in_use()[unit] += static_cast<int64_t>(bytes);
  return p;
}

void fake_free(void* p, MemKind kind) {
  if (kind != MemKind::device) {
    ::operator delete (p, std::align_val_t{64});
    return;
  }
  int unit = 0;
  if (is_device(p, &unit))  // cudaFree waits for the device's work
    for (FakeGpu* d : devices_of(unit))
      d->finish_all();
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = regions().find(static_cast<const char*>(p));
  if (it == regions().end()) fatal("free of a pointer that is no device allocation");
  if (it->second.opens != 0) fatal("free of device memory that a call has open");
  in_use()[it->second.unit] -= static_cast<int64_t>(it->second.bytes);
  munmap(p, it->second.mapped);
  regions().erase(it);
}

// The compute streams of the units of these pointers (cudaMemcpy on the legacy stream waits
// for every blocking stream of its device; the communication streams are non-blocking).
void finish_compute_of(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs) {
    int unit = 0;
    if (!is_device(p, &unit)) continue;
    for (FakeGpu* d : devices_of(unit))
      d->finish_compute();
  }
}

void fake_copy(void* dst, const void* src, size_t bytes) {
  finish_compute_of({dst, src});
  Opened open({dst, src});
  std::memcpy(dst, src, bytes);
}

void fake_zero(void* p, size_t bytes) {
  finish_compute_of({p});
  Opened open({p});
  std::memset(p, 0, bytes);
}

// The CPU reference op behind a queue: its pointers checked when called, the op run in stream
// order with its regions open.
class CheckedOp final : public Op {
 public:
  CheckedOp(std::unique_ptr<Op> op, FakeGpu* gpu) : Op(op->desc()), op_(std::move(op)), gpu_(gpu) {}
  std::string impl() const override { return op_->impl(); }
  void forward(const float* src, float* dst, std::span<const float* const> w,
               bool training) override {
    const float* srcs[] = {src};
    forward_n(srcs, dst, w, training);
  }
  void backward(const float* src, const float* dst, const float* diff_dst, float* diff_src,
                std::span<const float* const> w, std::span<float* const> dw) override {
    const float* srcs[] = {src};
    float* diff_srcs[] = {diff_src};
    backward_n(srcs, dst, diff_dst, diff_srcs, w, dw);
  }
  void set_draw(uint64_t stream, uint64_t n) override {
    gpu_->queue_compute([op = op_.get(), stream, n] { op->set_draw(stream, n); });
  }
  void forward_n(std::span<const float* const> srcs, float* dst, std::span<const float* const> w,
                 bool training) override {
    std::vector<const float*> s(srcs.begin(), srcs.end()), wv(w.begin(), w.end());
    std::vector<const void*> all = check(s, wv, {dst});
    gpu_->queue_compute([op = op_.get(), s, dst, wv, training, all] {
      Opened open(all);
      op->forward_n(s, dst, wv, training);
    });
  }
  void backward_n(std::span<const float* const> srcs, const float* dst, const float* diff_dst,
                  std::span<float* const> diff_srcs, std::span<const float* const> w,
                  std::span<float* const> dw) override {
    std::vector<const float*> s(srcs.begin(), srcs.end()), wv(w.begin(), w.end());
    std::vector<float*> ds(diff_srcs.begin(), diff_srcs.end()), dwv(dw.begin(), dw.end());
    std::vector<const void*> all = check(s, wv, {dst, diff_dst});
    for (float* p : ds)
      all.push_back(check_one(p));
    for (float* p : dwv)
      all.push_back(check_one(p));
    gpu_->queue_compute([op = op_.get(), s, dst, diff_dst, ds, wv, dwv, all] {
      Opened open(all);
      op->backward_n(s, dst, diff_dst, ds, wv, dwv);
    });
  }

 private:
  const void* check_one(const void* p) {
    if (p != nullptr) gpu_->expect_mine(p);
    return p;
  }
  std::vector<const void*> check(const std::vector<const float*>& srcs,
                                 const std::vector<const float*>& w,
                                 std::initializer_list<const void*> more) {
    std::vector<const void*> all;
    for (const float* p : srcs)
      all.push_back(check_one(p));
    for (const float* p : w)
      all.push_back(check_one(p));
    for (const void* p : more)
      all.push_back(check_one(p));
    return all;
  }
  std::unique_ptr<Op> op_;
  FakeGpu* gpu_;
};

class CheckedLoss final : public LossOp {
 public:
  CheckedLoss(std::unique_ptr<LossOp> l, FakeGpu* gpu) : l_(std::move(l)), gpu_(gpu) {}
  std::string impl() const override { return l_->impl(); }
  // Returns a value: waits for the stream, as the CUDA loss does.
  double forward(const float* logits, const int32_t* labels, float* prob, int64_t n,
                 int64_t* correct) override {
    for (const void* p : {static_cast<const void*>(logits), static_cast<const void*>(labels),
                          static_cast<const void*>(prob)})
      gpu_->expect_mine(p);
    gpu_->finish_compute();
    Opened open({logits, labels, prob});
    return l_->forward(logits, labels, prob, n, correct);
  }
  void backward(const float* prob, const int32_t* labels, float* diff, int64_t n,
                float scale) override {
    for (const void* p : {static_cast<const void*>(prob), static_cast<const void*>(labels),
                          static_cast<const void*>(diff)})
      gpu_->expect_mine(p);
    gpu_->queue_compute([l = l_.get(), prob, labels, diff, n, scale] {
      Opened open({prob, labels, diff});
      l->backward(prob, labels, diff, n, scale);
    });
  }

 private:
  std::unique_ptr<LossOp> l_;
  FakeGpu* gpu_;
};

// The CPU's update kernels, counted, their pointers checked when queued, run in stream order
// (`queue` puts work on the compute or the communication stream) with their regions open.
class CountingKernels final : public ArenaKernels {
 public:
  CountingKernels(FakeGpu* gpu, std::function<void(std::function<void()>)> queue)
      : gpu_(gpu), queue_(std::move(queue)) {}
  void copy(float* y, const float* x, int64_t n) override {
    run({y, x}, [=, this] { k_.copy(y, x, n); });
  }
  void axpy(float* y, float a, const float* x, int64_t n) override {
    run({y, x}, [=, this] { k_.axpy(y, a, x, n); });
  }
  void scale(float* y, float a, int64_t n) override {
    run({y}, [=, this] { k_.scale(y, a, n); });
  }
  void sgd_step(std::span<const Segment> s, float* w, const float* g, float lr, float wd) override {
    run({w, g}, [=, this] { k_.sgd_step(s, w, g, lr, wd); });
  }
  void momentum_step(std::span<const Segment> s, float* w, const float* g, float* v, float lr,
                     float mu, float wd) override {
    run({w, g, v}, [=, this] { k_.momentum_step(s, w, g, v, lr, mu, wd); });
  }
  void nesterov_step(std::span<const Segment> s, float* w, const float* g, float* v, float lr,
                     float mu, float wd) override {
    run({w, g, v}, [=, this] { k_.nesterov_step(s, w, g, v, lr, mu, wd); });
  }
  void elastic_sgd_step(std::span<const Segment> s, float* w, const float* g, const float* c,
                        float lr, float wd, float alpha) override {
    run({w, g, c}, [=, this] { k_.elastic_sgd_step(s, w, g, c, lr, wd, alpha); });
  }
  void elastic_momentum_step(std::span<const Segment> s, float* w, const float* g, float* v,
                             const float* c, float lr, float d, float wd, float alpha,
                             bool nesterov) override {
    run({w, g, v, c},
        [=, this] { k_.elastic_momentum_step(s, w, g, v, c, lr, d, wd, alpha, nesterov); });
  }
  void elastic_centre_sum(float* c, const float* sum, float alpha, int p, int64_t n) override {
    run({c, sum}, [=, this] { k_.elastic_centre_sum(c, sum, alpha, p, n); });
  }

 private:
  void run(std::initializer_list<const void*> ptrs, std::function<void()> fn) {
    g_kernel_calls.fetch_add(1);
    std::vector<const void*> v(ptrs);
    for (const void* p : v)
      gpu_->expect_mine(p);
    queue_([v, fn = std::move(fn)] {
      Opened open(v);
      fn();
    });
  }
  FakeGpu* gpu_;
  std::function<void(std::function<void()>)> queue_;
  ArenaKernels& k_ = cpu_arena_kernels();
};

}  // namespace

// ---- public pieces ----

bool is_device(const void* p, int* unit) {
  if (p == nullptr) return false;
  std::lock_guard<std::mutex> lock(g_mu);
  auto* r = find_locked(p);
  if (r != nullptr && unit != nullptr) *unit = r->second.unit;
  return r != nullptr;
}

int64_t device_bytes_in_use(int unit) {
  std::lock_guard<std::mutex> lock(g_mu);
  return in_use()[unit];
}

void set_memory_limit(int64_t bytes) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_limit = bytes;
}

Opened::Opened(const std::vector<const void*>& ptrs) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const void* p : ptrs) {
    if (p == nullptr) continue;
    auto* r = find_locked(p);
    if (r == nullptr) continue;  // host memory
    if (r->second.opens++ == 0) protect(r->first, r->second.mapped, true);
    regions_.push_back(r->first);
  }
}
Opened::Opened(std::initializer_list<const void*> ptrs) : Opened(std::vector<const void*>(ptrs)) {}

Opened::~Opened() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const void* base : regions_) {
    auto it = regions().find(static_cast<const char*>(base));
    if (it == regions().end()) fatal("device memory freed while a call had it open");
    if (--it->second.opens == 0) protect(it->first, it->second.mapped, false);
  }
}

int64_t Stream::push(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  q_.push_back(std::move(fn));
  return ++pushed_;
}
int64_t Stream::pushed() {
  std::lock_guard<std::mutex> lock(mu_);
  return pushed_;
}
void Stream::run_until(int64_t target) {
  std::lock_guard<std::recursive_mutex> runner(run_mu_);
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

std::vector<FakeGpu*> devices_of(int unit) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<FakeGpu*> out;
  for (FakeGpu* d : all_devices())
    if (d->unit() == unit) out.push_back(d);
  return out;
}

FakeGpu::FakeGpu(int unit, Precision precision)
    : unit_(unit),
      precision_(precision),
      cpu_(make_cpu_device(ImplChoice::ref)),
      kernels_(std::make_unique<CountingKernels>(
          this, [this](std::function<void()> fn) { compute_.push(std::move(fn)); })),
      comm_kernels_(std::make_unique<CountingKernels>(
          this, [this](std::function<void()> fn) { queue_comm(std::move(fn)); })) {
  std::lock_guard<std::mutex> lock(g_mu);
  all_devices().push_back(this);
}

FakeGpu::~FakeGpu() {
  comm_.run_until();
  compute_.run_until();
  std::lock_guard<std::mutex> lock(g_mu);
  std::erase(all_devices(), this);
}

Status FakeGpu::attach() {
  static std::once_flag once;
  std::call_once(once, [] {
    ExternalMemory m;
    m.alloc = fake_alloc;
    m.free = fake_free;
    m.copy = fake_copy;
    m.zero = fake_zero;
    install_external_memory(m);
  });
  t_current_unit = unit_;
  return {};
}

Result<std::unique_ptr<Op>> FakeGpu::make_op(const OpDesc& d) {
  if (d.kind == OpKind::lrn && d.lrn_within_channel)
    return unavailable(describe_op(d) +
                       ": no CUDA implementation applies (the within-channel LRN region)");
  if (d.act != activation_type())
    return invalid_argument(describe_op(d) + ": the stand-in GPU keeps " +
                            dtype_name(activation_type()) + " activations");
  OpDesc f32 = d;
  f32.act = DType::f32;
  EASEL_ASSIGN_OR_RETURN(std::unique_ptr<Op> op, cpu_->make_op(f32));
  // tf32/bf16: the convolutions and inner products round their inputs as tensor cores do.
  op = with_rounded_inputs(std::move(op), precision_);
  if (d.act == DType::bf16) op = with_bf16_activations(std::move(op));
  return std::unique_ptr<Op>(std::make_unique<CheckedOp>(std::move(op), this));
}

Result<std::unique_ptr<LossOp>> FakeGpu::make_loss(int64_t batch, int64_t classes) {
  EASEL_ASSIGN_OR_RETURN(std::unique_ptr<LossOp> l, cpu_->make_loss(batch, classes));
  if (activation_type() == DType::bf16) l = with_bf16_activations(std::move(l), batch, classes);
  return std::unique_ptr<LossOp>(std::make_unique<CheckedLoss>(std::move(l), this));
}

void FakeGpu::normalize_bytes(const uint8_t* bytes, const float* table, const Shape4& shape,
                              Layout layout, DType to, void* dst) {
  for (const void* p : {static_cast<const void*>(bytes), static_cast<const void*>(table),
                        static_cast<const void*>(dst)})
    expect_mine(p);
  compute_.push([=] {
    Opened open({bytes, table, dst});
    normalize_bytes_host(bytes, table, shape, layout, to, dst);
  });
}

void FakeGpu::to_activations(const float* src, DType to, void* dst, int64_t count) {
  expect_mine(src);
  expect_mine(dst);
  compute_.push([=] {
    Opened open({src, dst});
    activations_from_f32(src, to, dst, count);
  });
}

void FakeGpu::add_activations(void* y, const void* x, DType t, int64_t count) {
  if (t == DType::f32) {
    Device::add_activations(y, x, t, count);  // the counted kernels' axpy
    return;
  }
  expect_mine(y);
  expect_mine(x);
  compute_.push([=] {
    Opened open({y, x});
    uint16_t* a = static_cast<uint16_t*>(y);
    const uint16_t* b = static_cast<const uint16_t*>(x);
    for (int64_t i = 0; i < count; ++i)
      a[i] = bf16_from_f32(f32_from_bf16(a[i]) + f32_from_bf16(b[i]));
  });
}

void FakeGpu::expect_mine(const void* p) const {
  if (p == nullptr) return;
  int unit = -1;
  if (!is_device(p, &unit)) {
    g_bad_pointers.fetch_add(1);
    return;
  }
  if (unit != unit_)
    fatal("a pointer of GPU " + std::to_string(unit) + " used on GPU " + std::to_string(unit_));
}

// Queued, as a GPU's (the source must stay unchanged until the next synchronize()).
void FakeGpu::upload(void* dst, const void* src, size_t bytes) {
  expect_mine(dst);
  if (is_device(src)) g_bad_pointers.fetch_add(1);
  g_host_link_bytes.fetch_add(static_cast<int64_t>(bytes));
  compute_.push([=] {
    Opened open({dst});
    std::memcpy(dst, src, bytes);
  });
}

void FakeGpu::download(void* dst, const void* src, size_t bytes) {
  expect_mine(src);
  if (is_device(dst)) g_bad_pointers.fetch_add(1);
  g_host_link_bytes.fetch_add(static_cast<int64_t>(bytes));
  compute_.run_until();
  Opened open({src});
  std::memcpy(dst, src, bytes);
}

// The communication stream's next work first runs the compute stream up to here.
void FakeGpu::comm_waits_for_compute() {
  const int64_t upto = compute_.pushed();
  queue_comm([this, upto] { compute_.run_until(upto); });
}

void FakeGpu::queue_comm(std::function<void()> fn) {
  comm_.push(std::move(fn));
  if (g_comm_eager) comm_.run_until();
}

namespace {

Result<int> fake_gpu_count() {
  return g_gpu_count;
}
Result<std::unique_ptr<Device>> make_fake_gpu(int unit, ImplChoice, Precision precision) {
  return std::unique_ptr<Device>(std::make_unique<FakeGpu>(unit, precision));
}

// The stand-in NCCL: the shared-memory Comm, in the devices' stream order. Its collectives run
// after the rank's queued compute work (NCCL's run on the rank's stream) with the rank's
// buffers open (its peers read them between the Comm's barriers, while every rank is inside);
// the queued ones go on the rank's communication stream.
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
    enter(rank, {buf});
    Opened open({buf});
    shm_->allreduce_sum(rank, buf, n);
  }
  // dst is root's only (NCCL ignores the others').
  void reduce_sum(int rank, const float* src, float* dst, int64_t n, int root) override {
    if (rank != root) dst = nullptr;
    enter(rank, {src, dst});
    Opened open({src, dst});
    shm_->reduce_sum(rank, src, dst, n, root);
  }
  void broadcast(int rank, float* buf, int64_t n, int root) override {
    enter(rank, {buf});
    Opened open({buf});
    shm_->broadcast(rank, buf, n, root);
  }
  void barrier(int rank) override {
    dev(rank).finish_compute();
    shm_->barrier(rank);
  }
  void reduce_sum_queued(int rank, const float* src, float* dst, int64_t n, int root) override {
    if (rank != root) dst = nullptr;
    check(rank, {src, dst});
    dev(rank).queue_comm([=, this] {
      Opened open({src, dst});
      shm_->reduce_sum(rank, src, dst, n, root);
    });
  }
  void broadcast_queued(int rank, float* buf, int64_t n, int root) override {
    check(rank, {buf});
    dev(rank).queue_comm([=, this] {
      Opened open({buf});
      shm_->broadcast(rank, buf, n, root);
    });
  }
  double wait_seconds(int rank) const override { return shm_->wait_seconds(rank); }

 private:
  FakeGpu& dev(int rank) { return *devs_[static_cast<size_t>(rank)]; }
  void check(int rank, std::initializer_list<const void*> ptrs) {
    for (const void* p : ptrs)
      dev(rank).expect_mine(p);
  }
  void enter(int rank, std::initializer_list<const void*> ptrs) {
    check(rank, ptrs);
    dev(rank).finish_compute();
  }
  std::unique_ptr<Comm> shm_;
  std::vector<FakeGpu*> devs_;
};

// Refuses two ranks on one unit, as NCCL does ("Duplicate GPU detected").
Result<std::unique_ptr<Comm>> make_fake_nccl(std::span<Device* const> devs) {
  if (devices_share_a_unit(devs))
    return unavailable("stand-in NCCL: two ranks on one GPU (NCCL refuses a duplicate GPU)");
  return std::unique_ptr<Comm>(std::make_unique<FakeNccl>(devs));
}

// As the CUDA entry chooses (devices/list.cpp).
Result<std::unique_ptr<Comm>> make_fake_comm(std::span<Device* const> devs, CollectiveAlgo algo,
                                             CollectiveAlgo inter) {
  return make_gpu_groups_comm(devs, algo, inter, make_fake_nccl);
}

}  // namespace

DeviceRegistry fake_backend() {
  static const std::vector<DeviceEntry> list = [] {
    std::vector<DeviceEntry> v(device_list().begin(), device_list().end());
    for (DeviceEntry& e : v)
      if (std::string(e.name) == "cuda")
        e = DeviceEntry{"cuda",
                        "stand-in GPUs over protected host memory",
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

}  // namespace easel::standin
