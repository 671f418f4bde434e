// LRN, Caffe's definitions: across channels, dst = src / (k + alpha/n * sum_{window} src^2)^beta
// with the window local_size channels wide (odd), centred on the channel; within channel
// (lrn_within_channel), alpha/n^2 over an n x n spatial window centred on the element, zero
// padded (see OpDesc in devices/op.hpp).
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

// Per element: a square and an add per window element, the scale and the power.
double lrn_flops(const OpDesc& d) {
  const int64_t window = d.lrn_within_channel ? d.local_size * d.local_size : d.local_size;
  return static_cast<double>(d.src.count()) * static_cast<double>(2 * window + 2);
}

}  // namespace

const OpDef kLrnDef{
    .kind = OpKind::lrn,
    .name = "lrn",
    .validate = validate_lrn,
    .forward_flops = lrn_flops,
};

}  // namespace easel
