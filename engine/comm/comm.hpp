// The Comm interface: collectives among the P worker groups of a run. Ranks are groups; in the
// shared-memory Comm every rank is a thread of this process and calls each collective with its
// own rank id (thread-per-rank, as Gloo's tests run ranks). Every collective is one message
// over the flat arena (the paper's single-layer communication); callers that want the per-layer
// mode call it once per segment.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/comm/wire_format.hpp"
#include "engine/memory.hpp"
#include "engine/status.hpp"

namespace easel {

// A Comm's scratch floats: grows, never shrinks, and is not zero-filled (every use writes what
// it reads; simulated runs with injected compute then touch none of its pages). In host memory,
// or (on_device) in device memory of the GPU current on the thread that first grows it: a device
// transport's ranks (Transport::scratch_on_device), whose floats only device kernels touch.
class ScratchFloats {
 public:
  ScratchFloats() = default;
  explicit ScratchFloats(bool on_device) : on_device_(on_device) {}
  float* at_least(int64_t n) {
    if (n > size_) {
      if (on_device_) {
        grow_on_device(n);
      } else {
        p_.reset(new float[static_cast<size_t>(n)]);
      }
      size_ = n;
    }
    return on_device_ ? device_.as<float>() : p_.get();
  }

 private:
  void grow_on_device(int64_t n);  // collective_comm.cpp

  bool on_device_ = false;
  std::unique_ptr<float[]> p_;
  Buffer device_;
  int64_t size_ = 0;
};

// The collective algorithms (engine/comm/collectives/, one file each, over a Transport), the MPI
// library's own collectives, and `automatic`: chosen per run by their latency-bandwidth cost
// (engine/comm/collective_cost.hpp). Each value is the key of its row in
// engine/comm/collectives/list.cpp, which holds its flag name (auto, tree, ring,
// halving-doubling, hierarchical, mpi) and every other fact about it.
enum class CollectiveAlgo { automatic, tree, ring, halving_doubling, hierarchical, mpi };
const char* collective_algo_name(CollectiveAlgo a);  // its row's name

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int size() const = 0;
  virtual std::string name() const = 0;

  // All ranks call; afterwards every rank's buf holds the element-wise sum. Deterministic:
  // the summation order depends only on size() and the algorithm, never on timing.
  virtual void allreduce_sum(int rank, float* buf, int64_t n) = 0;
  // All ranks call with their src; root's dst receives the sum (dst ignored elsewhere; it may
  // alias root's src). Deterministic as above.
  virtual void reduce_sum(int rank, const float* src, float* dst, int64_t n, int root) = 0;
  // All ranks call; afterwards every rank's buf equals root's.
  virtual void broadcast(int rank, float* buf, int64_t n, int root) = 0;
  virtual void barrier(int rank) = 0;
  // The same collectives queued on the rank's device communication stream (a device Comm:
  // NCCL), after the work Device::comm_waits_for_compute() ordered before them, returning at
  // once; the data is there after Device::compute_waits_for_comm() (for the device's later
  // work) or synchronize_comm() (for the host). A host Comm runs them at once, as above.
  virtual void reduce_sum_queued(int rank, const float* src, float* dst, int64_t n, int root) {
    reduce_sum(rank, src, dst, n, root);
  }
  virtual void broadcast_queued(int rank, float* buf, int64_t n, int root) {
    broadcast(rank, buf, n, root);
  }

  // The compressed allreduce (engine/comm/collectives/compressed_ring.hpp): every rank's src
  // rounded to `f`, summed with every transfer packed in `f`, the same bits in every rank's dst
  // (which may alias src); err (or null) receives this rank's share of what the roundings took
  // off (the ranks' src - err sum to dst: the error-feedback residual). Returns the bytes this
  // rank sent. Only where compressed_refusal() is empty.
  virtual int64_t allreduce_compressed(int rank, const float* src, float* dst, int64_t n,
                                       WireFormat f, float* err) {
    (void)rank, (void)src, (void)dst, (void)n, (void)f, (void)err;
    EASEL_CHECK_MSG(false, "this Comm has no compressed allreduce");
    return 0;
  }
  // Empty where allreduce_compressed runs; otherwise why not (a clause for a flag's refusal).
  virtual std::string compressed_refusal() const { return name() + " carries fp32 only"; }

  // Seconds rank spent waiting for others inside collectives (arrival skew), as opposed to
  // moving data. Accumulated since construction; read by the rank's own thread.
  virtual double wait_seconds(int rank) const = 0;
};

class Transport;

// The Comm of a collective algorithm over a transport: its collectives run `algo` (tree, ring,
// halving_doubling or hierarchical; not automatic or mpi, which the caller resolves), among all
// the transport's ranks. hierarchical runs `inter` (ring or halving_doubling) across nodes.
std::unique_ptr<Comm> make_collective_comm(std::shared_ptr<Transport> transport,
                                           CollectiveAlgo algo,
                                           CollectiveAlgo inter = CollectiveAlgo::ring);

// Shared-memory Comm among `size` threads of this process: a collective algorithm over the
// shared-memory transport. A waiting rank spins for up to spin_seconds before it sleeps: give a
// spin (kShmSpinSeconds) only when every rank has a core of its own, and 0 when ranks share
// cores (oversubscribed, or other processes on the cores).
inline constexpr double kShmSpinSeconds = 0.01;
std::unique_ptr<Comm> make_shm_comm(int size, CollectiveAlgo algo, double spin_seconds = 0);

// Waits until `counter` (which only grows, written by another thread of this process with a
// release store followed by notify_all) reaches `target`, modulo 2^32 (the two are within 2^31
// of each other): spins as the Comm's barrier does for up to spin_seconds, then sleeps on it.
void wait_for_counter(const std::atomic<uint32_t>& counter, uint32_t target, double spin_seconds);

}  // namespace easel
