// Inner product: weights {oc, C*H*W} (each image's src block in its layout's own order), bias
// {oc}; dst [N, oc, 1, 1].
#include "devices/ops/op_def.hpp"

namespace easel {

namespace {

std::string validate_ip(const OpDesc& d) {
  if (d.oc <= 0) return "inner_product: output channels " + std::to_string(d.oc) + " not positive";
  return {};
}

Shape4 ip_dst(const OpDesc& d) {
  return {d.src.n, d.oc, 1, 1};
}

std::vector<std::vector<int64_t>> ip_params(const OpDesc& d) {
  std::vector<std::vector<int64_t>> shapes{{d.oc, d.src.per_image()}};
  if (d.bias) shapes.push_back({d.oc});
  return shapes;
}

double ip_forward_flops(const OpDesc& d) {
  return 2.0 * static_cast<double>(ip_dst(d).count()) * static_cast<double>(d.src.per_image());
}

// The data and the weights gradients: each a product as large as the forward one.
double ip_backward_flops(const OpDesc& d, bool diff_src) {
  return (diff_src ? 2.0 : 1.0) * ip_forward_flops(d);
}

}  // namespace

const OpDef kInnerProductDef{
    .kind = OpKind::inner_product,
    .name = "inner_product",
    .fuses_relu = true,
    .validate = validate_ip,
    .dst_shape = ip_dst,
    .param_shapes = ip_params,
    .forward_flops = ip_forward_flops,
    .backward_flops = ip_backward_flops,
};

}  // namespace easel
