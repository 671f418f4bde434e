// The device-neutral functions of devices/op.hpp: each reads the kind's OpDef
// (devices/ops/<kind>.cpp), after the checks every kind shares.
#include "devices/op.hpp"

#include <string>

#include "devices/ops/op_def.hpp"

namespace easel {

std::string hxw(int64_t a, int64_t b) {
  return std::to_string(a) + "x" + std::to_string(b);
}

std::string check_window(const OpDesc& d, const std::string& n) {
  if (d.kh <= 0 || d.kw <= 0) return n + ": kernel " + hxw(d.kh, d.kw) + " must be positive";
  if (d.stride_h <= 0 || d.stride_w <= 0)
    return n + ": stride " + hxw(d.stride_h, d.stride_w) + " must be positive";
  if (d.pad_h < 0 || d.pad_w < 0) return n + ": pad " + hxw(d.pad_h, d.pad_w) + " is negative";
  if (d.kh > d.src.h + 2 * d.pad_h || d.kw > d.src.w + 2 * d.pad_w)
    return n + ": kernel " + hxw(d.kh, d.kw) + " larger than padded input " +
           hxw(d.src.h + 2 * d.pad_h, d.src.w + 2 * d.pad_w);
  return {};
}

double dst_count_flops(const OpDesc& d) {
  return static_cast<double>(dst_shape(d).count());
}

const char* op_kind_name(OpKind k) {
  return op_def(k).name;
}

const char* dtype_name(DType t) {
  return t == DType::bf16 ? "bf16" : "f32";
}

std::string describe_op(const OpDesc& d) {
  return std::string(op_kind_name(d.kind)) + " " + d.src.to_string() + " " + layout_name(d.layout) +
         (d.act == DType::f32 ? "" : std::string(" ") + dtype_name(d.act));
}

Shape4 dst_shape(const OpDesc& d) {
  const OpDef& def = op_def(d.kind);
  return def.dst_shape ? def.dst_shape(d) : d.src;
}

std::string validate(const OpDesc& d) {
  const OpDef& def = op_def(d.kind);
  const std::string name = def.name;
  const Shape4& s = d.src;
  const int inputs = 1 + static_cast<int>(d.more_src.size());
  if (inputs < def.min_inputs || inputs > def.max_inputs)
    return name + ": takes " +
           (def.min_inputs == def.max_inputs
                ? std::to_string(def.min_inputs)
                : std::to_string(def.min_inputs) + " to " + std::to_string(def.max_inputs)) +
           " input(s), got " + std::to_string(inputs);
  if (s.n <= 0 || s.c <= 0 || s.h <= 0 || s.w <= 0)
    return name + ": input " + s.to_string() + " has a non-positive size";
  if (def.windowed) {
    if (std::string why = check_window(d, name); !why.empty()) return why;
  }
  return def.validate ? def.validate(d) : std::string();
}

std::pair<int, int> input_range(OpKind k) {
  const OpDef& def = op_def(k);
  return {def.min_inputs, def.max_inputs};
}

int state_params(const OpDesc& d) {
  return op_def(d.kind).state_params;
}

std::string param_name(const OpDesc& d, size_t i) {
  const OpDef& def = op_def(d.kind);
  if (def.param_names) return def.param_names[i];
  static const char* kDefault[] = {"weights", "bias"};
  return i < 2 ? kDefault[i] : std::to_string(i);
}

std::vector<std::vector<int64_t>> param_shapes(const OpDesc& d) {
  const OpDef& def = op_def(d.kind);
  return def.param_shapes ? def.param_shapes(d) : std::vector<std::vector<int64_t>>{};
}

std::pair<int64_t, int64_t> fans(const OpDesc& d) {
  const auto shapes = param_shapes(d);
  if (shapes.empty()) return {1, 1};
  // Caffe's fillers: fan_in = count / dims[0], fan_out = count / dims[1].
  const std::vector<int64_t>& w = shapes[0];
  if (w.size() < 2) return {1, 1};  // a per-channel vector (batch norm's scale)
  int64_t count = 1;
  for (int64_t x : w)
    count *= x;
  return {count / w[0], count / w[1]};
}

double forward_flops(const OpDesc& d) {
  return op_def(d.kind).forward_flops(d);
}

double backward_flops(const OpDesc& d, bool diff_src) {
  const OpDef& def = op_def(d.kind);
  return def.backward_flops ? def.backward_flops(d, diff_src) : def.forward_flops(d);
}

bool fuses_relu(OpKind k) {
  return op_def(k).fuses_relu;
}

}  // namespace easel
