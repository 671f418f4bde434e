// Concatenation along channels of 2 to 16 inputs whose n, h and w agree (GoogLeNet's inception
// outputs): dst {n, sum of c, h, w}, the inputs' channels in input order. Backward splits
// diff_dst the same way. No parameters.
#include "devices/ops/op_def.hpp"

namespace easel {

namespace {

std::string validate_concat(const OpDesc& d) {
  for (size_t i = 0; i < d.more_src.size(); ++i) {
    const Shape4& s = d.more_src[i];
    if (s.n != d.src.n || s.h != d.src.h || s.w != d.src.w)
      return "concat: input " + std::to_string(i + 1) + " " + s.to_string() +
             " differs from input 0 " + d.src.to_string() + " in n, h or w";
    if (s.c <= 0)
      return "concat: input " + std::to_string(i + 1) + " " + s.to_string() +
             " has a non-positive size";
  }
  return {};
}

Shape4 concat_dst(const OpDesc& d) {
  Shape4 o = d.src;
  for (const Shape4& s : d.more_src)
    o.c += s.c;
  return o;
}

}  // namespace

const OpDef kConcatDef{
    .kind = OpKind::concat,
    .name = "concat",
    .min_inputs = 2,
    .max_inputs = 16,
    .validate = validate_concat,
    .dst_shape = concat_dst,
    .forward_flops = dst_count_flops,  // one copy per element
};

}  // namespace easel
