// The CPU device: an explicit, ordered list of implementations (oneDNN, then the reference
// kernels). make_op tries each in turn; every refusal is logged once with its reason.
#include <array>
#include <string>

#include "devices/cpu/dnnl_ops.hpp"
#include "devices/cpu/ref_ops.hpp"
#include "devices/device.hpp"
#include "engine/log.hpp"

namespace easel {

namespace {

struct OpImpl {
  const char* name;
  bool fast_only;  // skipped under ImplChoice::ref
  Result<std::unique_ptr<Op>> (*make)(const OpDesc&);
};

// Preference order; the reference comes last and never refuses a valid descriptor.
constexpr std::array<OpImpl, 2> kOpImpls{{
    {"dnnl", true, make_dnnl_op},
    {"ref", false, make_ref_op},
}};

std::string describe(const OpDesc& d) {
  return std::string(op_kind_name(d.kind)) + " " + d.src.to_string() + " " + layout_name(d.layout);
}

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(ImplChoice choice) : choice_(choice) {}
  std::string name() const override { return "cpu"; }

  Result<std::unique_ptr<Op>> make_op(const OpDesc& desc) override {
    if (std::string why = validate(desc); !why.empty()) return invalid_argument(why);
    Status last = internal_error("cpu: no implementation tried for " + describe(desc));
    for (const OpImpl& impl : kOpImpls) {
      if (impl.fast_only && choice_ == ImplChoice::ref) continue;
      Result<std::unique_ptr<Op>> op = impl.make(desc);
      if (op.ok()) return op;
      last = op.status();
      const std::string msg = describe(desc) + ": " + impl.name + " refused (" +
                              op.status().to_string() + "), trying the next implementation";
      const LogLevel level =
          op.status().code() == Code::unavailable ? LogLevel::info : LogLevel::warn;
      log_once(level, "cpu", std::string(impl.name) + ":" + op.status().message(), msg);
    }
    return last;
  }

  Result<std::unique_ptr<LossOp>> make_loss(int64_t batch, int64_t classes) override {
    if (batch <= 0 || classes <= 0)
      return invalid_argument("loss: batch " + std::to_string(batch) + " and classes " +
                              std::to_string(classes) + " must be positive");
    return make_cpu_loss(batch, classes);
  }

 private:
  ImplChoice choice_;
};

}  // namespace

Result<ImplChoice> parse_impl_choice(const std::string& name) {
  if (name == "fast") return ImplChoice::fast;
  if (name == "ref") return ImplChoice::ref;
  return invalid_argument("--impl: unknown implementation choice '" + name +
                          "' (expected fast or ref)");
}

std::unique_ptr<Device> make_cpu_device(ImplChoice choice) {
  return std::make_unique<CpuDevice>(choice);
}

}  // namespace easel
