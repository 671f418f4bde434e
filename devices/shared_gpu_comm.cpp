// The Comm among groups that share GPUs (shared_gpu_comm.hpp): the shared-memory transport's
// rendezvous with a combine of device kernels, under the collective algorithms of
// engine/comm/collectives/.
#include "devices/shared_gpu_comm.hpp"

#include <string>
#include <vector>

#include "engine/comm/transport.hpp"
#include "engine/memory.hpp"

namespace easel {

bool devices_share_a_unit(std::span<Device* const> devices) {
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = i + 1; j < devices.size(); ++j)
      if (devices[i]->name() == devices[j]->name()) return true;
  return false;
}

namespace {

// The receiver's side of a transfer, on its own GPU: device kernels on the stream its current
// collective runs on (compute, or communication for the queued ones), the peer's span read in
// place when both are on one GPU, else first copied into the receiver's scratch.
class DeviceCombine final : public ShmCombine {
 public:
  explicit DeviceCombine(std::span<Device* const> devices)
      : devs_(devices.begin(), devices.end()), ranks_(devices.size()) {}

  // Rank `rank`'s next collective runs on the communication stream (else the compute stream).
  void use_comm_stream(int rank, bool comm) { at(rank).comm = comm; }
  ArenaKernels& kernels(int rank) {
    return at(rank).comm ? dev(rank).comm_kernels() : dev(rank).kernels();
  }
  // Waits for the rank's current stream: its work so far is done.
  void wait(int rank) { at(rank).comm ? dev(rank).synchronize_comm() : dev(rank).synchronize(); }

  void combine(int rank, int peer, const Transfer& x, const float* in) override {
    const int64_t n = x.recv_n;
    if (n == 0) return;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    if (!same_gpu(rank, peer)) {
      if (x.op == RecvOp::copy) {  // the engine copy returns when the bytes have landed
        copy_bytes(x.dst, MemKind::device, in, MemKind::device, bytes);
        return;
      }
      float* f = fetched(rank, n);
      copy_bytes(f, MemKind::device, in, MemKind::device, bytes);
      in = f;
    }
    ArenaKernels& k = kernels(rank);
    if (x.op == RecvOp::copy) {
      k.copy(x.dst, in, n);
    } else {
      if (x.dst != x.own) k.copy(x.dst, x.own, n);
      k.axpy(x.dst, 1.f, in, n);  // own + 1 * in: own + in exactly rounded, as the host adds
    }
    wait(rank);  // the sender may reuse its span once this returns
  }
  const char* kind() const override { return "gpu-shm"; }
  bool on_device() const override { return true; }

  Device& dev(int rank) const { return *devs_[static_cast<size_t>(rank)]; }

 private:
  struct alignas(64) Rank {
    bool comm = false;
    Buffer fetched;  // a peer's span copied from another GPU, on this rank's GPU
  };
  Rank& at(int rank) { return ranks_[static_cast<size_t>(rank)]; }
  bool same_gpu(int a, int b) const { return dev(a).name() == dev(b).name(); }
  float* fetched(int rank, int64_t n) {
    Buffer& b = at(rank).fetched;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    if (b.bytes() < bytes) {
      auto r = Buffer::allocate(bytes, MemKind::device);
      EASEL_CHECK_MSG(r.ok(), ("shared-GPU transport scratch: " + r.status().message()).c_str());
      b = std::move(r).value();
    }
    return b.as<float>();
  }

  std::vector<Device*> devs_;
  std::vector<Rank> ranks_;  // each written by its rank's thread only
};

// The collective algorithm over the device transport. Every collective first waits for the
// rank's stream (its inputs are final, its peers may read them) and returns when its data is
// there (each combine waits for its kernels): the queued variants are correct, not overlapped.
class SharedGpuComm final : public Comm {
 public:
  SharedGpuComm(std::span<Device* const> devices, CollectiveAlgo algo, CollectiveAlgo inter)
      : combine_(std::make_shared<DeviceCombine>(devices)),
        transport_(make_transport(static_cast<int>(devices.size()), combine_)),
        comm_(make_collective_comm(transport_, algo, inter)) {}

  int size() const override { return comm_->size(); }
  std::string name() const override { return comm_->name(); }

  void allreduce_sum(int rank, float* buf, int64_t n) override {
    enter(rank, false);
    comm_->allreduce_sum(rank, buf, n);
  }
  void reduce_sum(int rank, const float* src, float* dst, int64_t n, int root) override {
    enter(rank, false);
    reduce(rank, src, dst, n, root);
  }
  void broadcast(int rank, float* buf, int64_t n, int root) override {
    enter(rank, false);
    comm_->broadcast(rank, buf, n, root);
  }
  void barrier(int rank) override {
    combine_->dev(rank).synchronize();
    transport_->barrier(rank);
  }
  void reduce_sum_queued(int rank, const float* src, float* dst, int64_t n, int root) override {
    enter(rank, true);
    reduce(rank, src, dst, n, root);
  }
  void broadcast_queued(int rank, float* buf, int64_t n, int root) override {
    enter(rank, true);
    comm_->broadcast(rank, buf, n, root);
  }
  double wait_seconds(int rank) const override { return comm_->wait_seconds(rank); }
  std::string compressed_refusal() const override { return comm_->compressed_refusal(); }

 private:
  static std::shared_ptr<Transport> make_transport(int size, std::shared_ptr<ShmCombine> c) {
    ShmOptions o;
    o.combine = std::move(c);
    return make_shm_transport(size, o);
  }

  void enter(int rank, bool comm) {
    combine_->use_comm_stream(rank, comm);
    combine_->wait(rank);
  }

  // One group alone copies on its device (the algorithms' one-rank copy is the host's).
  void reduce(int rank, const float* src, float* dst, int64_t n, int root) {
    if (size() > 1) return comm_->reduce_sum(rank, src, dst, n, root);
    if (n > 0 && dst != src) combine_->kernels(rank).copy(dst, src, n);
    combine_->wait(rank);
  }

  std::shared_ptr<DeviceCombine> combine_;
  std::shared_ptr<Transport> transport_;
  std::unique_ptr<Comm> comm_;
};

}  // namespace

std::unique_ptr<Comm> make_shared_gpu_comm(std::span<Device* const> devices, CollectiveAlgo algo,
                                           CollectiveAlgo inter) {
  return std::make_unique<SharedGpuComm>(devices, algo, inter);
}

Result<std::unique_ptr<Comm>> make_gpu_groups_comm(std::span<Device* const> devices,
                                                   CollectiveAlgo algo, CollectiveAlgo inter,
                                                   DistinctGpuComm distinct) {
  if (devices_share_a_unit(devices)) return make_shared_gpu_comm(devices, algo, inter);
  return distinct(devices);
}

}  // namespace easel
