// What a compressed exchange puts on the wire (--exchange-precision bf16 | int8), and the codec
// between fp32 spans and their packed form. A packed span travels over the transport as floats
// that are bit copies of its bytes (RecvOp::copy moves bits), so every transport carries it.
//
// Layout of a packed span of m values:
//   bf16: m 16-bit codes (the upper half of each float, rounded to nearest even), 2 a float;
//   int8: ceil(m / kInt8Block) fp32 scales (s = max |x| / 127 over the finite values of each
//         block of kInt8Block values from the span's start), then m int8 codes (round(x / s) in
//         [-127, 127]; -128 for a value that is not finite), 4 a float; the last float's unused
//         bytes are zero.
// Decoding: bf16 code << 16; int8 code * s, and NaN for code -128. Every decode of the same bytes
// gives the same bits. A value that is not finite stays so (bf16: NaN or the same Inf; int8:
// NaN), as it would in an fp32 sum, so a run that exchanges one stops as diverged in either.
#pragma once

#include <cstdint>

namespace easel {

enum class WireFormat { bf16, int8 };
const char* wire_format_name(WireFormat f);

inline constexpr int64_t kInt8Block = 256;

// Floats a packed span of m values takes.
int64_t packed_floats(int64_t m, WireFormat f);

// out (packed_floats(m, f) floats) <- the packed form of x[0, m). With `err`: err += x - y, y
// what wire_decode reads of out (the rounding this encoding made, for error feedback).
void wire_encode(const float* x, int64_t m, WireFormat f, float* out, float* err = nullptr);
// Decodes packed `in` (m values): y = decode(in); then dst = add ? add + y : y. With `err`
// (src then holds what was encoded): err = src - y before dst is written (src may alias dst).
// Summation in one order only: dst[i] = add[i] + y[i].
void wire_decode(const float* in, int64_t m, WireFormat f, float* dst, const float* add = nullptr,
                 const float* src = nullptr, float* err = nullptr);

// x <- decode(encode(x)), blocks from x's start: |error| <= 2^-8 |x| (bf16), <= s / 2 with s the
// scale of x's block (int8); not finite stays not finite.
void wire_round_trip(float* x, int64_t m, WireFormat f);

}  // namespace easel
