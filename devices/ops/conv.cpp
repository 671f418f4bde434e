// Convolution (cross-correlation, as in Caffe): weights {oc, ic/group, kh, kw}, bias {oc}.
#include "devices/ops/op_def.hpp"

namespace easel {

namespace {

std::string validate_conv(const OpDesc& d) {
  const std::string name = "conv";
  if (d.oc <= 0) return name + ": output channels " + std::to_string(d.oc) + " not positive";
  if (d.group <= 0) return name + ": group " + std::to_string(d.group) + " not positive";
  if (d.src.c % d.group != 0)
    return name + ": input channels " + std::to_string(d.src.c) + " not divisible by group " +
           std::to_string(d.group);
  if (d.oc % d.group != 0)
    return name + ": output channels " + std::to_string(d.oc) + " not divisible by group " +
           std::to_string(d.group);
  return {};
}

Shape4 conv_dst(const OpDesc& d) {
  const Shape4& s = d.src;
  return {s.n, d.oc, (s.h + 2 * d.pad_h - d.kh) / d.stride_h + 1,
          (s.w + 2 * d.pad_w - d.kw) / d.stride_w + 1};
}

std::vector<std::vector<int64_t>> conv_params(const OpDesc& d) {
  std::vector<std::vector<int64_t>> shapes{{d.oc, d.src.c / d.group, d.kh, d.kw}};
  if (d.bias) shapes.push_back({d.oc});
  return shapes;
}

// One multiply-add per weight per output.
double conv_forward_flops(const OpDesc& d) {
  return 2.0 * static_cast<double>(conv_dst(d).count()) *
         static_cast<double>(d.src.c / d.group * d.kh * d.kw);
}

// The data and the weights gradients: each a product as large as the forward one.
double conv_backward_flops(const OpDesc& d, bool diff_src) {
  return (diff_src ? 2.0 : 1.0) * conv_forward_flops(d);
}

}  // namespace

const OpDef kConvDef{
    .kind = OpKind::conv,
    .name = "conv",
    .windowed = true,
    .fuses_relu = true,
    .validate = validate_conv,
    .dst_shape = conv_dst,
    .param_shapes = conv_params,
    .forward_flops = conv_forward_flops,
    .backward_flops = conv_backward_flops,
};

}  // namespace easel
