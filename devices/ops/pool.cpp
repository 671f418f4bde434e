// Max and average pooling over a kh x kw window. Output size: Caffe's by default (rounded up,
// the last window starting inside the input plus padding), or rounded down (ceil_mode false,
// PyTorch's default). Two kinds, one shape rule.
#include "devices/ops/op_def.hpp"

namespace easel {

namespace {

// Caffe's pooling output size: ceil rounding, then the last window must start inside the input
// (plus the leading padding). Floor rounding needs no clip: the last window starts at most at
// in + p - k < in (pad < kernel).
int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode) {
  const int64_t span = in + 2 * p - k;  // >= 0 once validated
  if (!ceil_mode) return span / s + 1;
  int64_t out = (span + s - 1) / s + 1;
  if (p > 0 && (out - 1) * s >= in + p) --out;
  return out;
}

// Caffe requires this: a window lying wholly in the padding would have nothing to pool.
std::string validate_pool(const OpDesc& d) {
  if (d.pad_h >= d.kh || d.pad_w >= d.kw)
    return std::string(op_kind_name(d.kind)) + ": pad " + hxw(d.pad_h, d.pad_w) +
           " must be smaller than kernel " + hxw(d.kh, d.kw);
  return {};
}

Shape4 pool_dst(const OpDesc& d) {
  const Shape4& s = d.src;
  return {s.n, s.c, pooled_size(s.h, d.kh, d.stride_h, d.pad_h, d.ceil_mode),
          pooled_size(s.w, d.kw, d.stride_w, d.pad_w, d.ceil_mode)};
}

// One operation per window element per output.
double pool_flops(const OpDesc& d) {
  return static_cast<double>(pool_dst(d).count()) * static_cast<double>(d.kh * d.kw);
}

}  // namespace

const OpDef kMaxPoolDef{
    .kind = OpKind::max_pool,
    .name = "max_pool",
    .windowed = true,
    .validate = validate_pool,
    .dst_shape = pool_dst,
    .forward_flops = pool_flops,
};

const OpDef kAvgPoolDef{
    .kind = OpKind::avg_pool,
    .name = "avg_pool",
    .windowed = true,
    .validate = validate_pool,
    .dst_shape = pool_dst,
    .forward_flops = pool_flops,
};

}  // namespace easel
