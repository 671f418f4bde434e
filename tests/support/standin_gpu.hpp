// A stand-in GPU for the trainer's GPU paths (--device cuda) on any machine, strict where a real
// GPU is:
//   - its device memory is mmap'd pages kept PROT_NONE: the host faults on any touch, except
//     inside the stand-in's own op, kernel, copy and collective calls, which open the regions
//     they are given for the call;
//   - each region belongs to the unit (GPU) whose thread allocated it (attach() makes a unit the
//     thread's current one, as cudaSetDevice); a unit's op or kernel given another unit's
//     pointer aborts ("a pointer of GPU 0 used on GPU 1"); copies may cross units;
//   - its ops, losses' backward, kernels and uploads are queued on the unit's compute stream and
//     run only when something needs them (a download, synchronize(), a loss forward, which
//     returns a value, or an engine copy: copy_bytes runs the compute streams first, as
//     cudaMemcpy on the legacy stream waits for blocking streams); its communication stream runs
//     its work either at once (eager) or only when a wait needs it (late);
//   - fresh device memory is filled with NaNs (cudaMalloc's memory is not zeroed);
//   - each unit has a memory limit: a larger allocation fails with "out of memory".
// Its ops are the CPU reference ops, so a run on it equals the CPU run bit for bit. At
// --precision bf16 its activations are bf16 in its memory, as the CUDA device's are.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "devices/list.hpp"

namespace easel::standin {

// Counters the tests read (reset them before a run).
extern std::atomic<int> g_bad_pointers;         // device-side calls given host memory, or copies
                                                // run backwards
extern std::atomic<int> g_kernel_calls;         // arena kernel calls
extern std::atomic<int64_t> g_host_link_bytes;  // bytes uploaded and downloaded
extern std::atomic<bool> g_comm_eager;          // the communication stream runs work at once

// True when p lies in device memory of any unit; its unit in *unit.
bool is_device(const void* p, int* unit = nullptr);
// Bytes of device memory allocated on `unit` now.
int64_t device_bytes_in_use(int unit);
// Each unit's memory limit (default 1 GiB); an allocation past it fails with "out of memory".
void set_memory_limit(int64_t bytes);

// Opens the device regions holding `ptrs` for the host for its lifetime (the stand-in's own
// calls; a test that wants to look at device memory as a debugger would). Nests.
class Opened {
 public:
  explicit Opened(std::initializer_list<const void*> ptrs);
  explicit Opened(const std::vector<const void*>& ptrs);
  ~Opened();
  Opened(const Opened&) = delete;
  Opened& operator=(const Opened&) = delete;

 private:
  std::vector<const void*> regions_;
};

// One stream: work queued in order, run by whoever needs it done (one runner at a time).
class Stream {
 public:
  int64_t push(std::function<void()> fn);
  int64_t pushed();
  // Runs the queued work up to item `target` (all of it by default).
  void run_until(int64_t target = INT64_MAX);

 private:
  std::mutex mu_;
  std::recursive_mutex run_mu_;
  std::deque<std::function<void()>> q_;
  int64_t pushed_ = 0, done_ = 0;
};

class FakeGpu;
// The stand-in devices of unit `unit` that exist now (copy_bytes runs their compute streams).
std::vector<FakeGpu*> devices_of(int unit);

class FakeGpu final : public Device {
 public:
  // precision: tf32/bf16 round the inputs of convolutions and inner products as tensor cores do.
  explicit FakeGpu(int unit, Precision precision = Precision::fp32);
  ~FakeGpu() override;
  std::string name() const override { return "cuda:" + std::to_string(unit_); }
  MemKind memory() const override { return MemKind::device; }
  int unit() const { return unit_; }
  Status attach() override;
  // What the CUDA device takes (devices/cuda/cuda_op_list.cpp): every kind but Caffe's
  // within-channel LRN, which it refuses (cuda_pool_lrn.cpp).
  Result<std::unique_ptr<Op>> make_op(const OpDesc& d) override;
  Result<std::unique_ptr<LossOp>> make_loss(int64_t batch, int64_t classes) override;
  // bf16 at --precision bf16, as the CUDA device: the ops then read and write bf16 activations
  // (devices/ref_precision.hpp: with_bf16_activations).
  DType activation_type() const override {
    return precision_ == Precision::bf16 ? DType::bf16 : DType::f32;
  }
  // Queued, the host's reference (devices/activations.hpp).
  void normalize_bytes(const uint8_t* bytes, const float* table, const Shape4& shape, Layout layout,
                       DType to, void* dst) override;
  void add_activations(void* y, const void* x, DType t, int64_t count) override;
  void to_activations(const float* src, DType to, void* dst, int64_t count) override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;
  void synchronize() override { compute_.run_until(); }
  ArenaKernels& kernels() override { return *kernels_; }
  ArenaKernels& comm_kernels() override { return *comm_kernels_; }
  void comm_waits_for_compute() override;
  void compute_waits_for_comm() override { comm_.run_until(); }
  void synchronize_comm() override { comm_.run_until(); }

  // Work on the compute stream; on the communication stream (its kernels, the stand-in NCCL's
  // queued collectives).
  void queue_compute(std::function<void()> fn) { compute_.push(std::move(fn)); }
  void queue_comm(std::function<void()> fn);
  // Before a collective on the compute stream (NCCL's synchronous ones run there).
  void finish_compute() { compute_.run_until(); }
  void finish_all() {
    comm_.run_until();
    compute_.run_until();
  }
  // Aborts unless p is null, host memory (counted in g_bad_pointers) or this unit's.
  void expect_mine(const void* p) const;

 private:
  int unit_;
  Precision precision_;
  std::unique_ptr<Device> cpu_;
  Stream compute_, comm_;
  std::unique_ptr<ArenaKernels> kernels_, comm_kernels_;
};

// The device list with its "cuda" entry replaced by the stand-in: g_gpu_count GPUs (set before
// a run), and the Comm the CUDA entry chooses (devices/shared_gpu_comm.hpp): the stand-in NCCL
// (the shared-memory Comm in the devices' stream order; like NCCL it refuses two ranks on one
// unit) among groups on distinct units, the shared-GPU Comm where units repeat.
extern int g_gpu_count;
DeviceRegistry fake_backend();

}  // namespace easel::standin
