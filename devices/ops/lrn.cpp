// LRN across channels, Caffe's definition: dst = src / (k + alpha/n * sum_{window} src^2)^beta,
// the window local_size channels wide (odd), centred on the channel.
#include "devices/ops/op_def.hpp"

namespace easel {

namespace {

std::string validate_lrn(const OpDesc& d) {
  const std::string name = "lrn";
  if (d.local_size < 1 || d.local_size % 2 == 0)
    return name + ": local_size " + std::to_string(d.local_size) + " must be odd and >= 1";
  if (!(d.k > 0.f)) return name + ": k " + std::to_string(d.k) + " must be positive";
  if (!(d.alpha >= 0.f)) return name + ": alpha " + std::to_string(d.alpha) + " is negative";
  return {};
}

// Per element: a square and an add per window channel, the scale and the power.
double lrn_flops(const OpDesc& d) {
  return static_cast<double>(d.src.count()) * static_cast<double>(2 * d.local_size + 2);
}

}  // namespace

const OpDef kLrnDef{
    .kind = OpKind::lrn,
    .name = "lrn",
    .validate = validate_lrn,
    .forward_flops = lrn_flops,
};

}  // namespace easel
