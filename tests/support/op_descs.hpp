// Op descriptors the device tests build over and over (the fast paths against the reference:
// oneDNN and CUDA alike).
#pragma once

#include "devices/op.hpp"

namespace easel::test {

inline OpDesc conv(Shape4 src, int64_t oc, int64_t k, int64_t stride = 1, int64_t pad = 0,
                   int64_t group = 1, bool fused_relu = false, bool bias = true) {
  OpDesc d;
  d.kind = OpKind::conv;
  d.src = src;
  d.oc = oc;
  d.kh = d.kw = k;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = pad;
  d.group = group;
  d.fused_relu = fused_relu;
  d.bias = bias;
  return d;
}

inline OpDesc pool(OpKind kind, Shape4 src, int64_t k, int64_t stride, int64_t pad = 0) {
  OpDesc d;
  d.kind = kind;
  d.src = src;
  d.kh = d.kw = k;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = pad;
  return d;
}

inline OpDesc ip(Shape4 src, int64_t oc, bool fused_relu = false, bool bias = true) {
  OpDesc d;
  d.kind = OpKind::inner_product;
  d.src = src;
  d.oc = oc;
  d.fused_relu = fused_relu;
  d.bias = bias;
  return d;
}

inline OpDesc lrn(Shape4 src, int64_t local_size, float alpha, float beta, float k) {
  OpDesc d;
  d.kind = OpKind::lrn;
  d.src = src;
  d.local_size = local_size;
  d.alpha = alpha;
  d.beta = beta;
  d.k = k;
  return d;
}

}  // namespace easel::test
