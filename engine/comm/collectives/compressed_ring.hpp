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
// up to fp32 rounding of the adds (4 p 2^-24 M).
//
// Error feedback: every rounding is charged to the rank that made it. A rank's residual holds its
// rounding of its own src and, for each chunk it re-encodes in the reduce-scatter, that
// re-encoding's rounding of the partial sum (the last one the owner's of the full sum). So the
// sum over ranks of src - residual is the result, up to the fp32 rounding of a few adds a rank:
// nothing a hop rounds away is lost. A caller that adds its residual to its next src (the int8
// exchange of algos/periodic.cpp) has sent, after T calls, the exact sum of what it meant to send
// less the residuals of the last call, which are that call's error: every element's cumulative
// sum stays within the bound above (of one call, on its inputs) of the fp32 ring's, whatever T,
// and each residual within one own rounding and one re-encoding, max|x_r| / 254 + M (1 + p / 127)
// / 254. Without the hops' share a value small beside its block's largest would be rounded away
// at the next hop, call after call, and never sent. Feeding the rounding back where it is made,
// rather than quantising once at each chunk's owner, keeps the ring: neighbour transfers, the
// same bytes and the same result bits, for a subtract and an add an element a hop; quantising
// once would have each rank send its packed chunks straight to their owners (p - 1 peers each).
//
// A value that is not finite in any src is not finite at its element in every rank's dst (int8:
// NaN, its code -128 in engine/comm/wire_format.hpp; bf16: NaN or the Inf), as the fp32 ring's
// sum is not, so a training run stops as diverged as it would in fp32; its block's other
// elements are rounded with the scale of its finite values.
#pragma once

#include <cstdint>

#include "engine/comm/collectives/team.hpp"
#include "engine/comm/wire_format.hpp"

namespace easel::compressed_ring {

// Every rank calls with its src (n floats); on return dst holds the sum (the same bits on every
// rank; dst may alias src). err, when not null, receives this rank's residual (above): src -
// rounded(src), plus what its re-encodings took off the partial sums it forwarded, so that the
// sum over ranks of src - err is dst. Returns the bytes this rank sent. p == 1: dst =
// rounded(src), err = src - dst, nothing sent.
int64_t allreduce(const Team& t, const float* src, float* dst, int64_t n, WireFormat f,
                  ScratchFloats& s, float* err);

// The bytes all p ranks send in one allreduce of n floats: 2 (p - 1) x 4 x the packed floats
// of the p chunks. What allreduce's returns add up to.
int64_t bytes_sent(int64_t n, int p, WireFormat f);

// The bound above on |result - exact sum| at one element, fp32 rounding included: m is M (int8:
// the sum over ranks of the largest |x| in the element's block) or the sum over ranks of |x| at
// the element (bf16).
double error_bound(int p, WireFormat f, double m);

}  // namespace easel::compressed_ring
