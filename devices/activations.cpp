#include "devices/activations.hpp"

namespace easel {

void activations_to_f32(const void* src, DType t, float* dst, int64_t count) {
  if (t == DType::f32) {
    std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < count; ++i)
    dst[i] = f32_from_bf16(s[i]);
}

void activations_from_f32(const float* src, DType t, void* dst, int64_t count) {
  if (t == DType::f32) {
    std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < count; ++i)
    d[i] = bf16_from_f32(src[i]);
}

void normalize_bytes_host(const uint8_t* bytes, const float* table, const Shape4& shape,
                          Layout layout, DType to, void* dst) {
  const int64_t count = shape.count(), c = shape.c, hw = shape.h * shape.w;
  float* f = static_cast<float*>(dst);
  uint16_t* b = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t ch = layout == Layout::nhwc ? i % c : (i / hw) % c;
    const float v = table[ch * 256 + bytes[i]];
    if (to == DType::f32)
      f[i] = v;
    else
      b[i] = bf16_from_f32(v);
  }
}

}  // namespace easel
