// Element-wise sum of 2 to 16 inputs of one shape (ResNet's residual joins): dst = sum_i src_i;
// every diff_src_i = diff_dst. No parameters.
#include "devices/ops/op_def.hpp"

namespace easel {

namespace {

std::string validate_add(const OpDesc& d) {
  for (size_t i = 0; i < d.more_src.size(); ++i)
    if (d.more_src[i] != d.src)
      return "add: input " + std::to_string(i + 1) + " " + d.more_src[i].to_string() +
             " differs from input 0 " + d.src.to_string();
  return {};
}

// One add per element per input after the first.
double add_flops(const OpDesc& d) {
  return static_cast<double>(d.src.count()) * static_cast<double>(d.more_src.size());
}

// The copies of diff_dst into every diff_src.
double add_backward_flops(const OpDesc& d, bool /*diff_src*/) {
  return static_cast<double>(d.src.count()) * static_cast<double>(1 + d.more_src.size());
}

}  // namespace

const OpDef kAddDef{
    .kind = OpKind::add,
    .name = "add",
    .min_inputs = 2,
    .max_inputs = 16,
    .validate = validate_add,
    .forward_flops = add_flops,
    .backward_flops = add_backward_flops,
};

}  // namespace easel
