// Activations in either element type (DType, devices/op.hpp) on the host: the bf16 conversions
// (bit-exact with the CUDA device's __float2bfloat16_rn and its widening), and the host's
// reference of Device::normalize_bytes. The CUDA device's kernels compute the same values; the
// stand-in GPU of the tests runs these.
#pragma once

#include <cstdint>
#include <cstring>

#include "devices/op.hpp"
#include "engine/tensor.hpp"

namespace easel {

// f32 -> bf16 bits, rounded to nearest even; a NaN stays a (quiet) NaN, infinities stay.
inline uint16_t bf16_from_f32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
// bf16 bits -> f32, exact.
inline float f32_from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// dst[i] <- src[i] (count elements of type t) as f32, exactly.
void activations_to_f32(const void* src, DType t, float* dst, int64_t count);
// dst[i] <- src[i] as type t (bf16: rounded to nearest even).
void activations_from_f32(const float* src, DType t, void* dst, int64_t count);

// Device::normalize_bytes on host memory: dst[i] <- table[channel(i) * 256 + bytes[i]] as `to`.
void normalize_bytes_host(const uint8_t* bytes, const float* table, const Shape4& shape,
                          Layout layout, DType to, void* dst);

}  // namespace easel
