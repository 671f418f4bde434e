// A node's attributes by name, each read as the type ONNX gives it, for the ONNX readers of
// nets/models (onnx_import.cpp, onnx_lrn.cpp). Built only with Meson's onnx feature.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <vector>

namespace easel::onnx_attr {

// The attribute `name` of `n`, or null.
inline const onnx::AttributeProto* find(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
inline int64_t int_of(const onnx::NodeProto& n, const char* name, int64_t fallback) {
  const auto* a = find(n, name);
  return a ? a->i() : fallback;
}
inline float float_of(const onnx::NodeProto& n, const char* name, float fallback) {
  const auto* a = find(n, name);
  return a ? a->f() : fallback;
}
inline std::vector<int64_t> ints_of(const onnx::NodeProto& n, const char* name,
                                    std::vector<int64_t> fallback) {
  const auto* a = find(n, name);
  if (!a) return fallback;
  return {a->ints().begin(), a->ints().end()};
}

}  // namespace easel::onnx_attr
