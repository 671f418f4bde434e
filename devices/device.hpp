// A Device builds Ops for its memory and runs the fused update kernels over flat arenas.
// Device != stream != memory kind (ggml's lesson): the CPU device takes host memory kinds;
// the CUDA device (devices/cuda) takes device and pinned-host memory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "devices/arena_kernels.hpp"
#include "devices/op.hpp"
#include "engine/memory.hpp"
#include "engine/status.hpp"

namespace easel {

// Which implementations a device may choose from, in its preference order.
enum class ImplChoice {
  fast,  // the device's fastest (oneDNN on CPU), falling back to ref with a logged reason
  ref,   // only the plain reference kernels (tests, debugging)
};
Result<ImplChoice> parse_impl_choice(const std::string& name);

// The arithmetic of the fast kernels. Parameters, gradients and momentum stay f32 in the arena
// (master weights) whatever is chosen, and so does every exchange. fp32: FMA arithmetic, the
// same bits as always. tf32: the convolutions and matrix products multiply on tensor cores with
// 10-bit mantissas, f32 accumulation (GPUs only: the CPU device refuses it). bf16: activations
// and weights rounded to bfloat16 inside the convolutions and inner products, f32 accumulation
// (the CPU device refuses it where it cannot pay: devices/cpu/cpu_precision.hpp). The reference
// kernels are always fp32.
enum class Precision {
  fp32,
  bf16,
  tf32,
};
Result<Precision> parse_precision(const std::string& name);
const char* precision_name(Precision p);

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda:0"
  // Where the device's ops read and write (activations, batches, a resident arena): dram for
  // the CPU, device memory for a GPU. Host kinds can be placed freely on the CPU.
  virtual MemKind memory() const { return MemKind::dram; }
  bool is_host() const { return is_host_kind(memory()); }
  // Binds the calling thread to the device (a GPU: makes it the thread's current device). A
  // group's thread calls it once before it builds or runs anything on the device.
  virtual Status attach() { return {}; }
  // Copies in the device's own order of work: upload host -> device memory (the source must
  // stay unchanged until the next synchronize()), download device -> host memory (returns when
  // the bytes have landed). The CPU copies at once.
  virtual void upload(void* dst, const void* src, size_t bytes);
  virtual void download(void* dst, const void* src, size_t bytes);
  // Waits until all work issued to the device so far is done (a no-op on the CPU, whose ops
  // return when they are done).
  virtual void synchronize() {}
  // The update rules on arenas in memory().
  virtual ArenaKernels& kernels() { return cpu_arena_kernels(); }
  // A second stream of work for communication (sync-easgd's overlap on GPUs): the same rules on
  // the communication stream, which runs concurrently with the compute stream (ops, losses,
  // kernels(), upload) and in order with a device Comm's queued collectives
  // (Comm::reduce_sum_queued). Only these waits order the two streams: comm_waits_for_compute()
  // (the communication stream's later work starts after all compute work queued so far),
  // compute_waits_for_comm() (the reverse); the host waits for the communication stream with
  // synchronize_comm(). The CPU has one order of work, done when each call returns: no-ops.
  virtual ArenaKernels& comm_kernels() { return kernels(); }
  virtual void comm_waits_for_compute() {}
  virtual void compute_waits_for_comm() {}
  virtual void synchronize_comm() {}
  // The element type of the activations the device's ops read and write (OpDesc::act): f32,
  // or bf16 on a GPU at --precision bf16 (its ops then convert at no boundary: the net's
  // activations and their gradients are bf16 from the first layer to the loss).
  virtual DType activation_type() const { return DType::f32; }
  // The batch normalised on the device (a uint8 batch crosses the host link, 4x fewer bytes
  // than floats): dst[i] <- table[channel(i) * 256 + bytes[i]] for the shape.count() elements
  // of a dense tensor of `shape` in `layout`, channel(i) the channel of element i, written as
  // `to` (bf16 rounded to nearest even from the table's f32). bytes, table (shape.c * 256 f32)
  // and dst lie in memory(); in the device's order of work. The table holds the host's own
  // conversion of each byte value (nets/data: pixel_table), so the result equals the host's
  // normalised batch bit for bit (rounded once for bf16).
  virtual void normalize_bytes(const uint8_t* bytes, const float* table, const Shape4& shape,
                               Layout layout, DType to, void* dst);
  // dst <- src, count f32 values as activations of type `to` (bf16: rounded to nearest even),
  // both in memory(), in the device's order of work: float images into a bf16 net's input. The
  // default takes f32 only and copies on the host.
  virtual void to_activations(const float* src, DType to, void* dst, int64_t count);
  // y[i] <- y[i] + x[i] for `count` activations of type t (a gradient that several readers of a
  // tensor add up: Net::backward_layer), in the device's order of work; bf16 sums in f32 and
  // rounds once. The default: kernels().axpy for f32 (bf16 aborts: a device that keeps bf16
  // activations overrides it).
  virtual void add_activations(void* y, const void* x, DType t, int64_t count);
  // Builds the op: walks the device's ordered implementation list (reference last); every
  // refusal is logged once with its reason. Fails only when even the reference refuses.
  virtual Result<std::unique_ptr<Op>> make_op(const OpDesc& desc) = 0;
  virtual Result<std::unique_ptr<LossOp>> make_loss(int64_t batch, int64_t classes) = 0;
};

// --device: "cpu", "cuda" (all GPUs), "cuda:0,2": each listed GPU a group ("cuda:0,0": 2 on GPU 0).
// The names are the device list's (devices/list.hpp).
struct DeviceEntry;
struct DeviceRequest {
  const DeviceEntry* kind = nullptr;  // the list's entry (never null once parsed)
  bool gpu = false;                   // kind is an accelerator: one worker group per unit
  std::vector<int> ordinals;  // with gpu: the GPUs asked for, in order (repeats share); empty: all
};
// Against the built-in device list. Errors name the flag and the bad part ("--device: 'cuda:x'
// ..."). parse_device(text, registry) in devices/list.hpp reads it against another list.
Result<DeviceRequest> parse_device(const std::string& text);

// The CPU device: oneDNN (when built with it) then reference.
std::unique_ptr<Device> make_cpu_device(ImplChoice choice, Precision precision = Precision::fp32);

}  // namespace easel
