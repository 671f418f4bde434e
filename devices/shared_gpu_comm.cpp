// The Comm among groups that share GPUs (shared_gpu_comm.hpp): binomial trees of device kernels
// between host barriers.
#include "devices/shared_gpu_comm.hpp"

#include <string>
#include <vector>

#include "engine/memory.hpp"

namespace easel {

bool devices_share_a_unit(std::span<Device* const> devices) {
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = i + 1; j < devices.size(); ++j)
      if (devices[i]->name() == devices[j]->name()) return true;
  return false;
}

namespace {

// What each rank publishes for the current collective; written by its rank before a barrier,
// read by peers after it.
struct alignas(64) Slot {
  const float* cur = nullptr;  // tree reduce: the rank's current partial sum
  float* work = nullptr;       // broadcast: the rank's buffer
  Buffer acc, fetched;         // device scratch on the rank's GPU (grown, never shrunk)
};

// The stream a collective runs on: the compute stream (kernels(), synchronize()) or the
// communication stream (comm_kernels(), synchronize_comm()).
struct On {
  Device& dev;
  bool comm;
  ArenaKernels& k() { return comm ? dev.comm_kernels() : dev.kernels(); }
  void wait() { comm ? dev.synchronize_comm() : dev.synchronize(); }
};

class SharedGpuComm final : public Comm {
 public:
  explicit SharedGpuComm(std::span<Device* const> devices)
      : devs_(devices.begin(), devices.end()),
        host_(make_shm_comm(static_cast<int>(devices.size()), CollectiveAlgo::tree)),
        slots_(devices.size()) {}

  int size() const override { return static_cast<int>(devs_.size()); }
  std::string name() const override {
    return "shared-gpu-tree(" + std::to_string(devs_.size()) + ")";
  }

  void allreduce_sum(int rank, float* buf, int64_t n) override {
    On on{dev(rank), false};
    reduce(on, rank, buf, buf, n, 0);
    broadcast(on, rank, buf, n, 0);
  }
  void reduce_sum(int rank, const float* src, float* dst, int64_t n, int root) override {
    On on{dev(rank), false};
    reduce(on, rank, src, dst, n, root);
  }
  void broadcast(int rank, float* buf, int64_t n, int root) override {
    On on{dev(rank), false};
    broadcast(on, rank, buf, n, root);
  }
  void barrier(int rank) override {
    dev(rank).synchronize();
    host_->barrier(rank);
  }
  void reduce_sum_queued(int rank, const float* src, float* dst, int64_t n, int root) override {
    On on{dev(rank), true};
    reduce(on, rank, src, dst, n, root);
  }
  void broadcast_queued(int rank, float* buf, int64_t n, int root) override {
    On on{dev(rank), true};
    broadcast(on, rank, buf, n, root);
  }
  double wait_seconds(int rank) const override { return host_->wait_seconds(rank); }

 private:
  Device& dev(int rank) const { return *devs_[static_cast<size_t>(rank)]; }
  Slot& slot(int rank) { return slots_[static_cast<size_t>(rank)]; }
  bool same_gpu(int a, int b) const { return dev(a).name() == dev(b).name(); }

  // A device buffer of at least n floats in b, on the calling rank's GPU.
  static float* scratch(Buffer& b, int64_t n) {
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    if (b.bytes() < bytes) {
      auto r = Buffer::allocate(bytes, MemKind::device);
      EASEL_CHECK_MSG(r.ok(), ("shared-GPU Comm scratch: " + r.status().message()).c_str());
      b = std::move(r).value();
    }
    return b.as<float>();
  }

  // Peer's buffer p as rank's kernels may read it: itself on the same GPU, else copied over.
  const float* readable(int rank, int peer, const float* p, int64_t n) {
    if (same_gpu(rank, peer)) return p;
    float* f = scratch(slot(rank).fetched, n);
    copy_bytes(f, MemKind::device, p, MemKind::device, static_cast<size_t>(n) * sizeof(float));
    return f;
  }

  // Binomial tree into root: in round `mask` rank v (relative to root) adds v + mask's partial
  // to its own, as the shared-memory Comm's tree does (the same sums in the same order).
  void reduce(On on, int rank, const float* src, float* dst, int64_t n, int root) {
    const int p = size();
    if (n == 0) return;
    on.wait();  // src is final
    if (p == 1) {
      if (dst != src) on.k().copy(dst, src, n);
      on.wait();
      return;
    }
    const int v = (rank - root + p) % p;
    Slot& me = slot(rank);
    float* acc = rank == root ? dst : (v % 2 == 0 && v + 1 < p ? scratch(me.acc, n) : nullptr);
    me.cur = src;
    host_->barrier(rank);
    for (int mask = 1; mask < p; mask <<= 1) {
      if (v % (2 * mask) == 0 && v + mask < p) {
        const int peer = (v + mask + root) % p;
        const float* theirs = readable(rank, peer, slot(peer).cur, n);
        if (acc != me.cur) on.k().copy(acc, me.cur, n);
        on.k().axpy(acc, 1.f, theirs, n);  // cur + 1 * theirs: cur + theirs exactly rounded
        me.cur = acc;
        on.wait();
      }
      host_->barrier(rank);  // this round's partials are complete; peers may read them next
    }
  }

  void broadcast(On on, int rank, float* buf, int64_t n, int root) {
    const int p = size();
    if (p == 1 || n == 0) return;
    const int v = (rank - root + p) % p;
    on.wait();  // root's buf is final; the others' is no longer read by earlier work
    slot(rank).work = buf;
    host_->barrier(rank);
    for (int mask = 1; mask < p; mask <<= 1) {
      if (v >= mask && v < 2 * mask) {
        const int peer = (v - mask + root) % p;
        if (same_gpu(rank, peer)) {
          on.k().copy(buf, slot(peer).work, n);
          on.wait();
        } else {
          copy_bytes(buf, MemKind::device, slot(peer).work, MemKind::device,
                     static_cast<size_t>(n) * sizeof(float));
        }
      }
      host_->barrier(rank);
    }
  }

  std::vector<Device*> devs_;
  std::unique_ptr<Comm> host_;  // its barrier and wait seconds
  std::vector<Slot> slots_;
};

}  // namespace

std::unique_ptr<Comm> make_shared_gpu_comm(std::span<Device* const> devices) {
  return std::make_unique<SharedGpuComm>(devices);
}

Result<std::unique_ptr<Comm>> make_gpu_groups_comm(std::span<Device* const> devices,
                                                   DistinctGpuComm distinct) {
  if (devices_share_a_unit(devices)) return make_shared_gpu_comm(devices);
  return distinct(devices);
}

}  // namespace easel
