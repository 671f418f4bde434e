// The Comm among the GPU groups of one process: NCCL, one communicator per GPU, all created
// together by ncclCommInitAll. Rank i is devices[i]; every rank calls from its own thread (the
// one that attached its device) with device pointers, and each collective runs on the rank's
// stream, then waits for it (cudaStreamSynchronize), so that it returns when the data is there
// and the engine's host timers measure the transfer.
//
// Summation order: NCCL's is fixed for a fixed GPU count, topology, NCCL version and chosen
// algorithm/protocol (which NCCL picks from the message size; NCCL_ALGO and NCCL_PROTO pin
// them), so results are deterministic run to run on the same machine. It is NOT the order of
// the shared-memory Comm's tree or ring (engine/comm/shm_comm.cpp): the two agree only up to
// rounding.
//
// Wait time: a collective cannot tell waiting for a late peer from moving data (both happen
// inside NCCL's kernels), so collectives add nothing to wait_seconds(); arrival skew shows in
// the collective's own duration. barrier() first waits for the rank's stream, then meets the
// other rank threads on the host; the time in that host barrier is the rank's wait.
#include <nccl.h>

#include <barrier>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "devices/cuda/cuda_common.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "engine/log.hpp"

namespace easel {

namespace {

Status nccl_error(ncclResult_t r, const char* call, const char* file, int line) {
  std::string m = std::string("NCCL: ") + ncclGetErrorString(r);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') m += std::string(" (") + last + ")";
  return unavailable(m + " in " + call + " at " + file + ":" + std::to_string(line));
}

}  // namespace

// The one wrapper of NCCL calls: set-up returns the Status, the hot path aborts with it.
#define EASEL_NCCL_RETURN_IF_ERROR(call)                                                          \
  do {                                                                                            \
    const ncclResult_t easel_r_ = (call);                                                         \
    if (easel_r_ != ncclSuccess) return ::easel::nccl_error(easel_r_, #call, __FILE__, __LINE__); \
  } while (0)
#define EASEL_NCCL_CHECK(call)                                                       \
  do {                                                                               \
    const ncclResult_t easel_r_ = (call);                                            \
    if (easel_r_ != ncclSuccess)                                                     \
      ::easel::cuda_fatal(::easel::nccl_error(easel_r_, #call, __FILE__, __LINE__)); \
  } while (0)

namespace {

// What one rank runs on. `wait_s` is written and read only by the rank's own thread.
struct alignas(64) NcclRank {
  int ordinal = 0;
  cudaStream_t stream = nullptr;
  cudaStream_t comm_stream = nullptr;  // the queued collectives' (the device's communication)
  ncclComm_t comm = nullptr;
  double wait_s = 0.0;
};

class NcclComm final : public Comm {
 public:
  explicit NcclComm(std::vector<NcclRank> ranks)
      : ranks_(std::move(ranks)), barrier_(static_cast<std::ptrdiff_t>(ranks_.size())) {}

  // Communicators of one ncclCommInitAll are destroyed together: NCCL counts the destroys and
  // frees the shared resources with the last one, so calling them in turn from one thread is
  // the documented single-process pattern. Every collective has already been waited for.
  ~NcclComm() override {
    for (NcclRank& r : ranks_) {
      if (r.comm == nullptr) continue;
      const ncclResult_t e = ncclCommDestroy(r.comm);
      if (e != ncclSuccess)
        log_warn("nccl", nccl_error(e, "ncclCommDestroy", __FILE__, __LINE__).message());
    }
  }

  int size() const override { return static_cast<int>(ranks_.size()); }
  std::string name() const override { return "nccl(" + std::to_string(ranks_.size()) + ")"; }

  void allreduce_sum(int rank, float* buf, int64_t n) override {
    NcclRank& r = at(rank);
    EASEL_CHECK(n >= 0);
    if (n == 0) return;
    EASEL_NCCL_CHECK(
        ncclAllReduce(buf, buf, static_cast<size_t>(n), ncclFloat, ncclSum, r.comm, r.stream));
    EASEL_CUDA_CHECK(cudaStreamSynchronize(r.stream));
  }

  void reduce_sum(int rank, const float* src, float* dst, int64_t n, int root) override {
    rooted("ncclReduce", rank, n, root, false, [&](const NcclRank& r, cudaStream_t s) {
      return reduce_call(r, src, rank == root ? dst : nullptr, n, root, s);
    });
  }
  void broadcast(int rank, float* buf, int64_t n, int root) override {
    rooted("ncclBroadcast", rank, n, root, false, [&](const NcclRank& r, cudaStream_t s) {
      return ncclBroadcast(buf, buf, static_cast<size_t>(n), ncclFloat, root, r.comm, s);
    });
  }
  // Queued on the device's communication stream, not waited for (Device::synchronize_comm).
  void reduce_sum_queued(int rank, const float* src, float* dst, int64_t n, int root) override {
    rooted("ncclReduce", rank, n, root, true, [&](const NcclRank& r, cudaStream_t s) {
      return reduce_call(r, src, rank == root ? dst : nullptr, n, root, s);
    });
  }
  void broadcast_queued(int rank, float* buf, int64_t n, int root) override {
    rooted("ncclBroadcast", rank, n, root, true, [&](const NcclRank& r, cudaStream_t s) {
      return ncclBroadcast(buf, buf, static_cast<size_t>(n), ncclFloat, root, r.comm, s);
    });
  }

  void barrier(int rank) override {
    NcclRank& r = at(rank);
    EASEL_CUDA_CHECK(cudaStreamSynchronize(r.stream));
    const auto t0 = std::chrono::steady_clock::now();
    barrier_.arrive_and_wait();
    const auto t1 = std::chrono::steady_clock::now();
    r.wait_s += std::chrono::duration<double>(t1 - t0).count();
  }

  double wait_seconds(int rank) const override {
    EASEL_CHECK(rank >= 0 && rank < size());
    return ranks_[static_cast<size_t>(rank)].wait_s;
  }

 private:
  // Non-root ranks pass no receive buffer: NCCL uses recvbuff on the root only (its argument
  // check skips it elsewhere), and this keeps it off whatever `dst` a non-root caller passed.
  static ncclResult_t reduce_call(const NcclRank& r, const float* src, float* dst, int64_t n,
                                  int root, cudaStream_t s) {
    return ncclReduce(src, dst, static_cast<size_t>(n), ncclFloat, ncclSum, root, r.comm, s);
  }
  // A rooted collective of rank's, `what` (NCCL's name, for its error): `call(rank, stream)` on
  // its stream, waited for, or queued on its communication stream; nothing for n == 0.
  template <class Call>
  void rooted(const char* what, int rank, int64_t n, int root, bool queued, Call call) {
    NcclRank& r = at(rank);
    at(root);
    EASEL_CHECK(n >= 0);
    if (n == 0) return;
    const cudaStream_t s = queued ? r.comm_stream : r.stream;
    const ncclResult_t e = call(r, s);
    if (e != ncclSuccess) cuda_fatal(nccl_error(e, what, __FILE__, __LINE__));
    if (!queued) EASEL_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  NcclRank& at(int rank) {
    EASEL_CHECK(rank >= 0 && rank < size());
    return ranks_[static_cast<size_t>(rank)];
  }

  std::vector<NcclRank> ranks_;
  std::barrier<> barrier_;  // the host side of barrier(), among the P rank threads
};

// Restores the calling thread's current GPU (ncclCommInitAll visits every GPU).
class CurrentDeviceGuard {
 public:
  CurrentDeviceGuard() {
    if (cudaGetDevice(&saved_) != cudaSuccess) {
      saved_ = -1;
      cudaGetLastError();
    }
  }
  ~CurrentDeviceGuard() {
    if (saved_ >= 0) cudaSetDevice(saved_);
  }
  CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
  CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace

bool nccl_built() {
  return true;
}

// Requires every device to be attached (by any thread; cuda_context aborts otherwise), since
// its stream is taken here. Refuses with invalid_argument: no devices, a missing or non-CUDA
// device, two ranks on one GPU. Destroy the Comm before its devices.
Result<std::unique_ptr<Comm>> make_nccl_comm(std::span<Device* const> devices) {
  if (devices.empty()) return invalid_argument("NCCL comm: no devices (one rank per GPU)");
  const int p = static_cast<int>(devices.size());
  std::vector<NcclRank> ranks(devices.size());
  std::vector<int> ordinals(devices.size());
  for (int i = 0; i < p; ++i) {
    Device* d = devices[static_cast<size_t>(i)];
    if (d == nullptr)
      return invalid_argument("NCCL comm: rank " + std::to_string(i) + " has no device");
    const std::string dev_name = d->name();
    if (dev_name.rfind("cuda:", 0) != 0)
      return invalid_argument("NCCL comm: rank " + std::to_string(i) + " is on device '" +
                              dev_name + "', not a GPU (NCCL connects GPU groups only)");
    const CudaContext& ctx = cuda_context(*d);
    for (int j = 0; j < i; ++j) {
      if (ordinals[static_cast<size_t>(j)] == ctx.ordinal)
        return invalid_argument("NCCL comm: ranks " + std::to_string(j) + " and " +
                                std::to_string(i) +
                                " are both on cuda:" + std::to_string(ctx.ordinal) +
                                " (NCCL needs one rank per GPU: one group per GPU, or the "
                                "shared-memory Comm for groups sharing a GPU)");
    }
    ordinals[static_cast<size_t>(i)] = ctx.ordinal;
    ranks[static_cast<size_t>(i)].ordinal = ctx.ordinal;
    ranks[static_cast<size_t>(i)].stream = ctx.stream;
    ranks[static_cast<size_t>(i)].comm_stream = ctx.comm_stream;
  }

  int version = 0;
  EASEL_NCCL_RETURN_IF_ERROR(ncclGetVersion(&version));
  log_once(LogLevel::info, "nccl", "version",
           "NCCL " + std::to_string(version) + " (built against " +
               std::to_string(NCCL_VERSION_CODE) + ")");

  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  {
    CurrentDeviceGuard guard;
    EASEL_NCCL_RETURN_IF_ERROR(ncclCommInitAll(comms.data(), p, ordinals.data()));
  }
  for (size_t i = 0; i < ranks.size(); ++i)
    ranks[i].comm = comms[i];
  return std::unique_ptr<Comm>(std::make_unique<NcclComm>(std::move(ranks)));
}

}  // namespace easel
