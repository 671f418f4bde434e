// The codec of the compressed exchange (wire_format.hpp).
#include "engine/comm/wire_format.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace easel {

const char* wire_format_name(WireFormat f) {
  return f == WireFormat::bf16 ? "bf16" : "int8";
}

namespace {

int64_t blocks(int64_t m) {
  return (m + kInt8Block - 1) / kInt8Block;
}

// fp32 -> bf16 bits, round to nearest even (a NaN stays a NaN).
uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}

// The bits of |x| as an int32: they order as |x| does.
int32_t abs_bits(float x) {
  int32_t u;
  std::memcpy(&u, &x, 4);
  return u & 0x7fffffff;
}

bool finite(float x) {
  return abs_bits(x) < 0x7f800000;  // false for NaN and +-Inf
}

// The int8 scale of x[b, e): max |x| / 127 over its finite values (finite, >= 0). The max is
// taken on the bits: an int max the compiler vectorizes (a float max it does not, for NaN's sake).
float int8_scale(const float* x, int64_t b, int64_t e) {
  int32_t bits = 0;
  for (int64_t i = b; i < e; ++i)
    bits = std::max(bits, finite(x[i]) ? abs_bits(x[i]) : 0);
  float amax;
  std::memcpy(&amax, &bits, 4);
  return amax / 127.f;
}

// The code of a value that is not finite: NaN and +-Inf, which no scale can round (casting NaN
// or a quotient out of range to int8 is undefined), and which a sum must not lose.
constexpr int8_t kNotFinite = -128;

// x's int8 code under the scale s of its block (|x| <= 127 s when x is finite). Every value is
// computed and the code selected, without branches, so that the loops over a block vectorize;
// only values in [-128, 127] are cast.
int8_t int8_code(float x, float s) {
  const float q = s > 0 ? std::clamp(std::nearbyint(x / s), -127.f, 127.f) : 0.f;
  return static_cast<int8_t>(finite(x) ? q : static_cast<float>(kNotFinite));
}

// code * s, and NaN for kNotFinite: the quiet NaN's bits or-ed in where the code is -128 (the
// only code under -127), without a branch.
float int8_value(int8_t code, float s) {
  float y = static_cast<float>(code) * s;
  uint32_t u;
  std::memcpy(&u, &y, 4);
  u |= static_cast<uint32_t>((code + 127) >> 31) & 0x7fc00000u;
  std::memcpy(&y, &u, 4);
  return y;
}

}  // namespace

int64_t packed_floats(int64_t m, WireFormat f) {
  if (f == WireFormat::bf16) return (m + 1) / 2;
  return blocks(m) + (m + 3) / 4;
}

void wire_encode(const float* x, int64_t m, WireFormat f, float* out, float* err) {
  if (m == 0) return;
  auto* bytes = reinterpret_cast<unsigned char*>(out);
  out[packed_floats(m, f) - 1] = 0;  // the unused bytes of the last float
  if (f == WireFormat::bf16) {
    for (int64_t i = 0; i < m; ++i) {
      const uint16_t b = bf16_bits(x[i]);
      std::memcpy(bytes + 2 * i, &b, 2);
      if (err != nullptr) err[i] += x[i] - bf16_value(b);
    }
    return;
  }
  const int64_t nb = blocks(m);
  unsigned char* codes = bytes + 4 * nb;
  for (int64_t k = 0; k < nb; ++k) {
    const int64_t b = k * kInt8Block, e = std::min(m, b + kInt8Block);
    const float s = int8_scale(x, b, e);
    out[k] = s;
    for (int64_t i = b; i < e; ++i)
      codes[i] = static_cast<unsigned char>(int8_code(x[i], s));
    if (err != nullptr)
      for (int64_t i = b; i < e; ++i)
        err[i] += x[i] - int8_value(static_cast<int8_t>(codes[i]), s);
  }
}

void wire_decode(const float* in, int64_t m, WireFormat f, float* dst, const float* add,
                 const float* src, float* err) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(in);
  auto put = [&](int64_t i, float y) {
    if (err != nullptr) err[i] = src[i] - y;
    dst[i] = add != nullptr ? add[i] + y : y;
  };
  if (f == WireFormat::bf16) {
    for (int64_t i = 0; i < m; ++i) {
      uint16_t b;
      std::memcpy(&b, bytes + 2 * i, 2);
      put(i, bf16_value(b));
    }
    return;
  }
  const int64_t nb = blocks(m);
  const unsigned char* codes = bytes + 4 * nb;
  for (int64_t k = 0; k < nb; ++k) {
    const int64_t b = k * kInt8Block, e = std::min(m, b + kInt8Block);
    float s;
    std::memcpy(&s, bytes + 4 * k, 4);
    for (int64_t i = b; i < e; ++i)
      put(i, int8_value(static_cast<int8_t>(codes[i]), s));
  }
}

void wire_round_trip(float* x, int64_t m, WireFormat f) {
  if (f == WireFormat::bf16) {
    for (int64_t i = 0; i < m; ++i)
      x[i] = bf16_value(bf16_bits(x[i]));
    return;
  }
  for (int64_t b = 0; b < m; b += kInt8Block) {
    const int64_t e = std::min(m, b + kInt8Block);
    const float s = int8_scale(x, b, e);
    for (int64_t i = b; i < e; ++i)
      x[i] = int8_value(int8_code(x[i], s), s);
  }
}

}  // namespace easel
