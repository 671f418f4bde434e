// The compressed allreduce (INTELLECT-1's and OpenDiLoCo's int8 all-reduce): a ring whose every
// transfer carries packed bf16 or int8 (engine/comm/wire_format.hpp), not fp32.
//
// The span is cut into p chunks as the ring cuts it (chunk_begin). Each rank first rounds its
// own span chunk by chunk (int8 blocks start at each chunk's start). Reduce-scatter: at step s
// rank r sends chunk r - s packed and receives chunk r - s - 1 packed from r - 1, decodes it and
// adds its own rounded chunk in fp32 (decoded + own), and re-encodes that partial sum to forward
// it at the next step; after p - 1 steps rank r holds the fp32 sum of chunk r + 1, which it
// encodes once more. All-gather: those packed sums go round the ring unchanged (bit copies), each
// rank decoding every chunk, the owner its own too. So every rank ends with the same bits, the
// summation order (chunk c: rank c, c + 1, ..., c - 1) depends only on p, and each rank sends
// 2 (p - 1) packed chunks: about 2 (p - 1) / p of the packed span.
//
// Error (each |x| below is per int8 block of the chunk; bf16 reads 2^-8 |x| for s / 2): every
// rank's rounding adds at most s_r / 2 = max|x_r| / 254, and each of the p - 1 re-encodings of a
// partial sum S_k (k = 2 .. p, the last the full sum) at most max|S_k| / 254; with
// M = sum over ranks of max|x_r|, |S_k| <= M (1 + k / 127), so
//   |result - exact sum| <= (2p - 1) M / 254 (1 + p / 127)   (int8)
//   |result - exact sum| <= (2p - 1) 2^-8 sum_r |x_r| (1 + p 2^-7)   (bf16, elementwise)
// up to fp32 rounding of the adds (p 2^-24 M).
#pragma once

#include <cstdint>

#include "engine/comm/collectives/team.hpp"
#include "engine/comm/wire_format.hpp"

namespace easel::compressed_ring {

// Every rank calls with its src (n floats); on return dst holds the sum (the same bits on every
// rank; dst may alias src). err, when not null, receives what this rank's own rounding took off
// its contribution: src - rounded(src) (the error-feedback residual). Returns the bytes this rank
// sent. p == 1: dst = rounded(src), nothing sent.
int64_t allreduce(const Team& t, const float* src, float* dst, int64_t n, WireFormat f,
                  ScratchFloats& s, float* err);

// The bytes all p ranks send in one allreduce of n floats: 2 (p - 1) x 4 x the packed floats
// of the p chunks. What allreduce's returns add up to.
int64_t bytes_sent(int64_t n, int p, WireFormat f);

}  // namespace easel::compressed_ring
