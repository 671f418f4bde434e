// Dropout: in training each element is kept with probability 1-ratio and scaled by 1/(1-ratio),
// from the op's own random stream (desc.seed); identity when not training.
#include "devices/ops/op_def.hpp"

namespace easel {

namespace {

std::string validate_dropout(const OpDesc& d) {
  if (!(d.ratio >= 0.f && d.ratio < 1.f))
    return "dropout: ratio " + std::to_string(d.ratio) + " outside [0, 1)";
  return {};
}

}  // namespace

const OpDef kDropoutDef{
    .kind = OpKind::dropout,
    .name = "dropout",
    .validate = validate_dropout,
    .forward_flops = dst_count_flops,
};

}  // namespace easel
