// A Device builds Ops for its memory and runs the fused update kernels over flat arenas.
// Device != stream != memory kind (ggml's lesson): the CPU device takes host memory kinds;
// the CUDA device (devices/cuda) takes device and pinned-host memory.
#pragma once

#include <memory>
#include <string>

#include "devices/op.hpp"
#include "engine/status.hpp"

namespace easel {

// Which implementations a device may choose from, in its preference order.
enum class ImplChoice {
  fast,  // the device's fastest (oneDNN on CPU), falling back to ref with a logged reason
  ref,   // only the plain reference kernels (tests, debugging)
};
Result<ImplChoice> parse_impl_choice(const std::string& name);

// The arithmetic of the fast kernels. Parameters, gradients and momentum stay f32 in the arena
// (master weights) whatever is chosen; bf16 rounds activations and weights to bfloat16 inside
// the convolutions and inner products (f32 accumulation) where the CPU has AVX512_BF16 or AMX,
// and falls back to fp32 (logged once) elsewhere. The reference kernels are always fp32.
enum class Precision {
  fp32,
  bf16,
};
Result<Precision> parse_precision(const std::string& name);
const char* precision_name(Precision p);

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda:0"
  // Builds the op: walks the device's ordered implementation list (reference last); every
  // refusal is logged once with its reason. Fails only when even the reference refuses.
  virtual Result<std::unique_ptr<Op>> make_op(const OpDesc& desc) = 0;
  virtual Result<std::unique_ptr<LossOp>> make_loss(int64_t batch, int64_t classes) = 0;
};

// The CPU device: oneDNN (when built with it) then reference.
std::unique_ptr<Device> make_cpu_device(ImplChoice choice, Precision precision = Precision::fp32);

}  // namespace easel
