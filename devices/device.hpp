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
std::unique_ptr<Device> make_cpu_device(ImplChoice choice);

}  // namespace easel
