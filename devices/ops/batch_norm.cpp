// Batch normalization per channel, PyTorch's definition (see OpDesc in devices/op.hpp): scale
// {c}, shift {c} trained; running_mean {c}, running_var {c} state, updated in place by a training
// forward. A following ReLU fuses (ResNet and GoogLeNet always have BN -> ReLU).
#include "devices/ops/op_def.hpp"

namespace easel {

namespace {

constexpr const char* kBatchNormParams[] = {"scale", "shift", "running_mean", "running_var"};

std::string validate_batch_norm(const OpDesc& d) {
  if (!(d.eps > 0.f)) return "batch_norm: eps " + std::to_string(d.eps) + " must be positive";
  if (!(d.bn_momentum >= 0.f && d.bn_momentum <= 1.f))
    return "batch_norm: momentum " + std::to_string(d.bn_momentum) + " outside [0, 1]";
  return {};
}

std::vector<std::vector<int64_t>> batch_norm_params(const OpDesc& d) {
  return {{d.src.c}, {d.src.c}, {d.src.c}, {d.src.c}};
}

// Per element: the two statistics' sums, the normalisation and the affine step.
double batch_norm_forward_flops(const OpDesc& d) {
  return 5.0 * static_cast<double>(d.src.count());
}

// Per element: the two reductions (diff_shift, diff_scale) and the data gradient.
double batch_norm_backward_flops(const OpDesc& d, bool diff_src) {
  return (diff_src ? 7.0 : 4.0) * static_cast<double>(d.src.count());
}

}  // namespace

const OpDef kBatchNormDef{
    .kind = OpKind::batch_norm,
    .name = "batch_norm",
    .fuses_relu = true,
    .state_params = 2,
    .param_names = kBatchNormParams,
    .validate = validate_batch_norm,
    .param_shapes = batch_norm_params,
    .forward_flops = batch_norm_forward_flops,
    .backward_flops = batch_norm_backward_flops,
};

}  // namespace easel
