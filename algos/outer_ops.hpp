// The pieces local-sgd, slowmo and diloco share (algos/periodic.hpp runs them): the precision
// of what a group sends (--exchange-precision), the AdamW inner step (--optimizer
// adamw) and the outer rules over the averaged pseudo-gradient. Plain loops over host arenas,
// written to be read; each is checked against a hand computation (tests/algos/test_periodic.cpp).
#pragma once

#include <cstdint>
#include <span>

#include "engine/arena.hpp"
#include "engine/comm/wire_format.hpp"

namespace easel {

enum class ExchangePrecision { fp32, bf16, int8 };
const char* exchange_precision_name(ExchangePrecision p);
// bf16 and int8 as the compressed allreduce packs them (engine/comm/wire_format.hpp: int8 with
// one fp32 scale per block of kInt8Block floats, max |x| / 127 over the block).
WireFormat wire_format(ExchangePrecision p);

// Bytes n floats take packed, as one span: 4n (fp32), 2n (bf16), n + 4 ceil(n / kInt8Block)
// (int8). The performance model's payload; the compressed allreduce sends about 2 (p - 1) / p
// of it per group (engine/comm/collectives/compressed_ring.hpp).
int64_t exchange_payload_bytes(int64_t n, ExchangePrecision p);

// x <- decode(encode(x)): what the receiver reads of x sent at precision p. bf16 rounds to
// nearest even (|error| <= 2^-8 |x|); int8 rounds x / s to the nearest integer in [-127, 127]
// with s = max |x| / 127 of its block (|error| <= s / 2). fp32: unchanged.
void exchange_round_trip(float* x, int64_t n, ExchangePrecision p);

// AdamW's moments and hyper-parameters (torch.optim.AdamW's update, step t >= 1).
struct AdamW {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
};
// One AdamW step on every trained segment (lr' = lr * lr_mult, wd' = wd * decay_mult; state
// segments untouched): w <- w - lr' wd' w; m <- b1 m + (1 - b1) g; v <- b2 v + (1 - b2) g^2;
// w <- w - (lr' / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
void adamw_step(std::span<const Segment> segs, float* w, const float* g, float* m, float* v,
                float lr, float wd, const AdamW& a, int64_t t);

// The outer rules on the anchor x (the last synchronised weights), from d = the groups' mean
// pseudo-gradient x - w_i, and u, the outer momentum:
//   local-sgd: x <- x - d                                   (the groups' average)
//   slowmo:    u <- beta u + d / gamma; x <- x - alpha gamma u   (Wang et al. 2020; gamma the
//              inner learning rate)
//   diloco:    u <- mu u + d; x <- x - eta (d + mu u)        (Nesterov, as torch.optim.SGD)
void outer_average(float* x, const float* d, int64_t n);
void outer_slowmo(float* x, float* u, const float* d, int64_t n, float alpha, float beta,
                  float gamma);
void outer_nesterov(float* x, float* u, const float* d, int64_t n, float eta, float mu);

}  // namespace easel
