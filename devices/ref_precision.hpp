// The reference arithmetic of the reduced precisions: what a tensor-core convolution or matrix
// product at tf32 or bf16 computes, up to the order of its f32 sums. Its inputs (activations,
// weights, incoming gradients) are rounded to the precision's significand, to nearest even;
// the products of two such values are exact in f32 and are summed in f32. The CUDA device's ops
// at tf32/bf16 and oneDNN's bf16 kernels on the CPU compute this; the stand-in GPU of the tests
// and the accuracy tests (tests/nets/test_precision_nets.cpp) run it through the reference ops.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>

#include "devices/device.hpp"
#include "devices/op.hpp"

namespace easel {

// x rounded to the precision's significand, to nearest even: bf16 keeps 8 bits (7 stored),
// tf32 11 (10 stored), fp32 all 24. The exponent range is f32's in all three; NaN stays NaN.
inline float round_to_precision(float x, Precision p) {
  if (p == Precision::fp32) return x;
  const int drop = p == Precision::bf16 ? 16 : 13;  // stored mantissa bits removed
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf, NaN
  const uint32_t half = (1u << (drop - 1)) - 1u + ((u >> drop) & 1u);
  u = (u + half) & ~((1u << drop) - 1u);
  std::memcpy(&x, &u, sizeof u);
  return x;
}

// The unit roundoff u of the precision: |round(x) - x| <= u |x| (2^-8 bf16, 2^-11 tf32,
// 2^-24 fp32).
double unit_roundoff(Precision p);

// `op` computing as the precision's tensor-core ops do: for convolutions and inner products
// (the kinds the reduced precisions change) src, weights[0] and diff_dst are rounded (into the
// wrapper's own buffers) before `op` runs; bias and every output stay f32. Other kinds, and
// fp32, return `op` itself.
std::unique_ptr<Op> with_rounded_inputs(std::unique_ptr<Op> op, Precision p);

// What an op of a device that keeps bf16 activations computes (the CUDA device at --precision
// bf16): its bf16 inputs (srcs, dst, diff_dst) widened exactly, `op` run on them in f32, its
// activation outputs (dst, diff_srcs) rounded once to bf16; a convolution's weight gradient is
// rounded to bf16 as well (cuDNN's convolutions write it in their data type), the others' and
// every bias gradient stay f32. `op` is built for f32 activations; the result reads and writes
// bf16 ones (its desc().act is bf16). The stand-in GPU runs it.
std::unique_ptr<Op> with_bf16_activations(std::unique_ptr<Op> op);
// The loss of such a device: bf16 logits widened, prob f32, diff_logits rounded to bf16.
std::unique_ptr<LossOp> with_bf16_activations(std::unique_ptr<LossOp> loss, int64_t batch,
                                              int64_t classes);

}  // namespace easel
