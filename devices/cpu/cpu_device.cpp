// The CPU device: ops from its ordered list of implementations (devices/cpu/cpu_op_list.cpp:
// oneDNN, then the reference kernels, every refusal logged once with its reason).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "devices/cpu/cpu_op_list.hpp"
#include "devices/cpu/cpu_precision.hpp"
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
    if (desc.act != DType::f32)
      return invalid_argument(describe_op(desc) + ": the CPU device keeps activations f32");
    if (options_.precision != Precision::bf16 || !options_.bf16_per_layer ||
        (desc.kind != OpKind::conv && desc.kind != OpKind::inner_product))
      return make_cpu_op(desc, choice_, options_);
    return faster_of_bf16_and_fp32(desc);
  }

  Result<std::unique_ptr<LossOp>> make_loss(int64_t batch, int64_t classes) override {
    if (batch <= 0 || classes <= 0)
      return invalid_argument("loss: batch " + std::to_string(batch) + " and classes " +
                              std::to_string(classes) + " must be positive");
    return make_cpu_loss(batch, classes);
  }

 private:
  // bf16 per layer: the op at bf16 and at fp32, each timed on scratch buffers of its shapes; the
  // faster is kept, and a layer that stays fp32 says so once with both times.
  Result<std::unique_ptr<Op>> faster_of_bf16_and_fp32(const OpDesc& desc) {
    EASEL_ASSIGN_OR_RETURN(std::unique_ptr<Op> bf16, make_cpu_op(desc, choice_, options_));
    if (bf16->impl().rfind("dnnl-bf16:", 0) != 0) return bf16;  // no bf16 kernel: fp32 already
    DnnlOptions f32 = options_;
    f32.precision = Precision::fp32;
    EASEL_ASSIGN_OR_RETURN(std::unique_ptr<Op> fp32, make_cpu_op(desc, choice_, f32));
    // Interleaved, the best of five each after one untimed: robust to a loaded machine.
    Trial a(*bf16), b(*fp32);
    double t_bf16 = 1e30, t_fp32 = 1e30;
    for (int k = 0; k < 6; ++k) {
      const double x = a.seconds(), y = b.seconds();
      if (k > 0) t_bf16 = std::min(t_bf16, x), t_fp32 = std::min(t_fp32, y);
    }
    if (t_bf16 <= t_fp32) return bf16;
    char why[160];
    std::snprintf(why, sizeof why,
                  ": its bf16 kernel is slower (%.3f against %.3f ms a step); stays fp32",
                  t_bf16 * 1e3, t_fp32 * 1e3);
    log_once(LogLevel::info, "cpu", "bf16-layer:" + describe_op(desc),
             "--precision bf16: " + describe_op(desc) + why);
    return fp32;
  }

  // One op's forward + backward on buffers of 0.01 of its shapes, timed.
  class Trial {
   public:
    explicit Trial(Op& op) : op_(op) {
      const OpDesc& d = op.desc();
      src_.assign(static_cast<size_t>(d.src.count()), 0.01f);
      diff_src_.assign(src_.size(), 0.f);
      dst_.assign(static_cast<size_t>(dst_shape(d).count()), 0.01f);
      diff_dst_ = dst_;
      for (const std::vector<int64_t>& shape : param_shapes(d)) {
        int64_t n = 1;
        for (int64_t x : shape)
          n *= x;
        w_.emplace_back(static_cast<size_t>(n), 0.01f);
        dw_.emplace_back(static_cast<size_t>(n), 0.f);
      }
      for (size_t i = 0; i < w_.size(); ++i) {
        wp_.push_back(w_[i].data());
        dwp_.push_back(dw_[i].data());
      }
    }
    double seconds() {
      const auto t0 = std::chrono::steady_clock::now();
      op_.forward(src_.data(), dst_.data(), wp_, true);
      op_.backward(src_.data(), dst_.data(), diff_dst_.data(), diff_src_.data(), wp_, dwp_);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }

   private:
    Op& op_;
    std::vector<float> src_, diff_src_, dst_, diff_dst_;
    std::vector<std::vector<float>> w_, dw_;
    std::vector<const float*> wp_;
    std::vector<float*> dwp_;
  };

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
  o.bf16_per_layer = bf16_per_layer_wanted();
  return make_cpu_device(choice, o);
}

}  // namespace easel
