// Shapes, checks, parameter shapes and operation counts of the ops (see devices/op.hpp).
#include "devices/op.hpp"

#include <string>

namespace easel {

namespace {

std::string x2(int64_t a, int64_t b) {
  return std::to_string(a) + "x" + std::to_string(b);
}

// Caffe's pooling output size: ceil rounding, then the last window must start inside the input
// (plus the leading padding).
int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p) {
  const int64_t span = in + 2 * p - k;  // >= 0 once validated
  int64_t out = (span + s - 1) / s + 1;
  if (p > 0 && (out - 1) * s >= in + p) --out;
  return out;
}

bool has_window(OpKind k) {
  return k == OpKind::conv || k == OpKind::max_pool || k == OpKind::avg_pool;
}

// Checks shared by convolution and pooling: window, stride and padding against the input.
std::string check_window(const OpDesc& d, const char* name) {
  const std::string n = name;
  if (d.kh <= 0 || d.kw <= 0) return n + ": kernel " + x2(d.kh, d.kw) + " must be positive";
  if (d.stride_h <= 0 || d.stride_w <= 0)
    return n + ": stride " + x2(d.stride_h, d.stride_w) + " must be positive";
  if (d.pad_h < 0 || d.pad_w < 0) return n + ": pad " + x2(d.pad_h, d.pad_w) + " is negative";
  if (d.kh > d.src.h + 2 * d.pad_h || d.kw > d.src.w + 2 * d.pad_w)
    return n + ": kernel " + x2(d.kh, d.kw) + " larger than padded input " +
           x2(d.src.h + 2 * d.pad_h, d.src.w + 2 * d.pad_w);
  return {};
}

}  // namespace

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::conv:
      return "conv";
    case OpKind::max_pool:
      return "max_pool";
    case OpKind::avg_pool:
      return "avg_pool";
    case OpKind::inner_product:
      return "inner_product";
    case OpKind::relu:
      return "relu";
    case OpKind::lrn:
      return "lrn";
    case OpKind::dropout:
      return "dropout";
  }
  return "unknown";
}

Shape4 dst_shape(const OpDesc& d) {
  const Shape4& s = d.src;
  switch (d.kind) {
    case OpKind::conv:
      return {s.n, d.oc, (s.h + 2 * d.pad_h - d.kh) / d.stride_h + 1,
              (s.w + 2 * d.pad_w - d.kw) / d.stride_w + 1};
    case OpKind::max_pool:
    case OpKind::avg_pool:
      return {s.n, s.c, pooled_size(s.h, d.kh, d.stride_h, d.pad_h),
              pooled_size(s.w, d.kw, d.stride_w, d.pad_w)};
    case OpKind::inner_product:
      return {s.n, d.oc, 1, 1};
    case OpKind::relu:
    case OpKind::lrn:
    case OpKind::dropout:
      return s;
  }
  return s;
}

std::string validate(const OpDesc& d) {
  const std::string name = op_kind_name(d.kind);
  const Shape4& s = d.src;
  if (s.n <= 0 || s.c <= 0 || s.h <= 0 || s.w <= 0)
    return name + ": input " + s.to_string() + " has a non-positive size";
  if (has_window(d.kind)) {
    if (std::string why = check_window(d, name.c_str()); !why.empty()) return why;
  }
  switch (d.kind) {
    case OpKind::conv:
      if (d.oc <= 0) return name + ": output channels " + std::to_string(d.oc) + " not positive";
      if (d.group <= 0) return name + ": group " + std::to_string(d.group) + " not positive";
      if (s.c % d.group != 0)
        return name + ": input channels " + std::to_string(s.c) + " not divisible by group " +
               std::to_string(d.group);
      if (d.oc % d.group != 0)
        return name + ": output channels " + std::to_string(d.oc) + " not divisible by group " +
               std::to_string(d.group);
      break;
    case OpKind::max_pool:
    case OpKind::avg_pool:
      // Caffe requires this: a window lying wholly in the padding would have nothing to pool.
      if (d.pad_h >= d.kh || d.pad_w >= d.kw)
        return name + ": pad " + x2(d.pad_h, d.pad_w) + " must be smaller than kernel " +
               x2(d.kh, d.kw);
      break;
    case OpKind::inner_product:
      if (d.oc <= 0) return name + ": output channels " + std::to_string(d.oc) + " not positive";
      break;
    case OpKind::lrn:
      if (d.local_size < 1 || d.local_size % 2 == 0)
        return name + ": local_size " + std::to_string(d.local_size) + " must be odd and >= 1";
      if (!(d.k > 0.f)) return name + ": k " + std::to_string(d.k) + " must be positive";
      if (!(d.alpha >= 0.f)) return name + ": alpha " + std::to_string(d.alpha) + " is negative";
      break;
    case OpKind::dropout:
      if (!(d.ratio >= 0.f && d.ratio < 1.f))
        return name + ": ratio " + std::to_string(d.ratio) + " outside [0, 1)";
      break;
    case OpKind::relu:
      break;
  }
  return {};
}

std::vector<std::vector<int64_t>> param_shapes(const OpDesc& d) {
  std::vector<std::vector<int64_t>> shapes;
  if (d.kind == OpKind::conv) {
    shapes.push_back({d.oc, d.src.c / d.group, d.kh, d.kw});
  } else if (d.kind == OpKind::inner_product) {
    shapes.push_back({d.oc, d.src.per_image()});
  } else {
    return shapes;
  }
  if (d.bias) shapes.push_back({d.oc});
  return shapes;
}

std::pair<int64_t, int64_t> fans(const OpDesc& d) {
  const auto shapes = param_shapes(d);
  if (shapes.empty()) return {1, 1};
  // Caffe's fillers: fan_in = count / dims[0], fan_out = count / dims[1].
  const std::vector<int64_t>& w = shapes[0];
  int64_t count = 1;
  for (int64_t x : w)
    count *= x;
  return {count / w[0], count / w[1]};
}

double forward_flops(const OpDesc& d) {
  const Shape4 o = dst_shape(d);
  const double dst = static_cast<double>(o.count());
  switch (d.kind) {
    case OpKind::conv:  // one multiply-add per weight per output
      return 2.0 * dst * static_cast<double>(d.src.c / d.group * d.kh * d.kw);
    case OpKind::inner_product:
      return 2.0 * dst * static_cast<double>(d.src.per_image());
    // The rest have no multiply-adds to speak of: one operation per element touched.
    case OpKind::max_pool:
    case OpKind::avg_pool:
      return dst * static_cast<double>(d.kh * d.kw);
    case OpKind::lrn:
      return dst * static_cast<double>(2 * d.local_size + 2);
    case OpKind::relu:
    case OpKind::dropout:
      return dst;
  }
  return 0.0;
}

double backward_flops(const OpDesc& d) {
  // Convolution and inner product compute two products as large as the forward one (data and
  // weights gradients); the element-wise ops cost about what their forward does.
  if (d.kind == OpKind::conv || d.kind == OpKind::inner_product) return 2.0 * forward_flops(d);
  return forward_flops(d);
}

}  // namespace easel
