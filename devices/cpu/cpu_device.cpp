// The CPU device: ops from its ordered list of implementations (devices/cpu/cpu_op_list.cpp:
// oneDNN, then the reference kernels, every refusal logged once with its reason).
#include <string>

#include "devices/cpu/cpu_op_list.hpp"
#include "devices/cpu/dnnl_ops.hpp"
#include "devices/cpu/ref_ops.hpp"
#include "devices/device.hpp"
#include "engine/log.hpp"

namespace easel {

namespace {

class CpuDevice final : public Device {
 public:
  CpuDevice(ImplChoice choice, const DnnlOptions& options) : choice_(choice), options_(options) {
    if (options_.precision == Precision::bf16 && choice_ == ImplChoice::fast &&
        !dnnl_bf16_available()) {
      log_once(LogLevel::warn, "cpu", "bf16-unavailable",
               "--precision bf16: this CPU (or build) has no native bf16 compute; running fp32");
      options_.precision = Precision::fp32;
    }
    // tf32 is refused before a run builds its devices (check_cpu_precision); a caller that
    // builds one directly gets fp32, the CPU's nearest.
    if (options_.precision == Precision::tf32) options_.precision = Precision::fp32;
  }
  std::string name() const override { return "cpu"; }

  Result<std::unique_ptr<Op>> make_op(const OpDesc& desc) override {
    return make_cpu_op(desc, choice_, options_);
  }

  Result<std::unique_ptr<LossOp>> make_loss(int64_t batch, int64_t classes) override {
    if (batch <= 0 || classes <= 0)
      return invalid_argument("loss: batch " + std::to_string(batch) + " and classes " +
                              std::to_string(classes) + " must be positive");
    return make_cpu_loss(batch, classes);
  }

 private:
  ImplChoice choice_;
  DnnlOptions options_;
};

}  // namespace

Result<ImplChoice> parse_impl_choice(const std::string& name) {
  if (name == "fast") return ImplChoice::fast;
  if (name == "ref") return ImplChoice::ref;
  return invalid_argument("--impl: unknown implementation choice '" + name +
                          "' (expected fast or ref)");
}

Result<Precision> parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "tf32") return Precision::tf32;
  if (name == "bf16") return Precision::bf16;
  return invalid_argument("--precision: unknown precision '" + name +
                          "' (expected fp32, tf32 or bf16)");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp32:
      return "fp32";
    case Precision::tf32:
      return "tf32";
    case Precision::bf16:
      return "bf16";
  }
  return "?";
}

std::unique_ptr<Device> make_cpu_device(ImplChoice choice, const DnnlOptions& options) {
  return std::make_unique<CpuDevice>(choice, options);
}

std::unique_ptr<Device> make_cpu_device(ImplChoice choice, Precision precision) {
  DnnlOptions o;
  o.precision = precision;
  return make_cpu_device(choice, o);
}

}  // namespace easel
