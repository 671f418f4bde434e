// The compressed ring allreduce (compressed_ring.hpp).
#include "engine/comm/collectives/compressed_ring.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/span_ops.hpp"

namespace easel::compressed_ring {

namespace {

int mod(int a, int p) {
  return ((a % p) + p) % p;
}

struct Chunks {
  int64_t n;
  int p;
  int64_t begin(int j) const { return chunk_begin(n, mod(j, p), p); }
  int64_t size(int j) const { return chunk_begin(n, mod(j, p) + 1, p) - begin(j); }
};

}  // namespace

int64_t bytes_sent(int64_t n, int p, WireFormat f) {
  if (p < 2) return 0;
  const Chunks c{n, p};
  int64_t floats = 0;
  for (int j = 0; j < p; ++j)
    floats += packed_floats(c.size(j), f);
  return 2 * (p - 1) * 4 * floats;
}

double error_bound(int p, WireFormat f, double m) {
  const double k = 2.0 * p - 1, fp32 = 4.0 * p * std::ldexp(m, -24);
  if (f == WireFormat::bf16) return k * std::ldexp(m, -8) * (1 + std::ldexp(p, -7)) + fp32;
  return k * m / 254 * (1 + p / 127.0) + fp32;
}

int64_t allreduce(const Team& t, const float* src, float* dst, int64_t n, WireFormat f,
                  ScratchFloats& s, float* err) {
  const int p = t.size(), me = t.me, next = mod(me + 1, p), prev = mod(me - 1, p);
  const Chunks c{n, p};
  const bool values = !values_ignored();  // simulated, compute injected: the bytes move alone
  int64_t most = 0;
  for (int j = 0; j < p; ++j)
    most = std::max(most, packed_floats(c.size(j), f));
  float* a = s.at_least(2 * std::max<int64_t>(most, 1));
  float* b = a + std::max<int64_t>(most, 1);
  // This rank's contribution, rounded chunk by chunk; chunk `me` kept packed in a to send first.
  if (values)
    for (int j = 0; j < p; ++j) {
      float* pk = j == me ? a : b;
      wire_encode(src + c.begin(j), c.size(j), f, pk);
      wire_decode(pk, c.size(j), f, dst + c.begin(j), nullptr, src + c.begin(j),
                  err != nullptr ? err + c.begin(j) : nullptr);
    }
  if (p == 1) return 0;
  int64_t sent = 0;
  // Reduce-scatter: a holds the packed chunk to send, b receives.
  for (int st = 0; st < p - 1; ++st) {
    const int cs = me - st, cr = me - st - 1;
    const int64_t ns = packed_floats(c.size(cs), f), nr = packed_floats(c.size(cr), f);
    team_step(t, next, a, ns, prev, b, nullptr, nr, RecvOp::copy, "compressed ring reduce-scatter");
    sent += 4 * ns;
    if (!values) continue;
    float* acc = dst + c.begin(cr);
    wire_decode(b, c.size(cr), f, acc, acc);  // decoded partial + own rounded chunk
    // Forwarded next step, or (last) the owner's sum; what this rounding takes off the partial
    // sum joins this rank's residual, so that no rank's share of it is lost at this hop.
    wire_encode(acc, c.size(cr), f, a, err != nullptr ? err + c.begin(cr) : nullptr);
  }
  // The owner's sum as every rank will read it.
  if (values) wire_decode(a, c.size(me + 1), f, dst + c.begin(me + 1));
  // All-gather: the packed sums travel unchanged; a holds the one to send.
  for (int st = 0; st < p - 1; ++st) {
    const int cs = me + 1 - st, cr = me - st;
    const int64_t ns = packed_floats(c.size(cs), f), nr = packed_floats(c.size(cr), f);
    team_step(t, next, a, ns, prev, b, nullptr, nr, RecvOp::copy, "compressed ring all-gather");
    sent += 4 * ns;
    if (values) wire_decode(b, c.size(cr), f, dst + c.begin(cr));
    std::swap(a, b);
  }
  return sent;
}

}  // namespace easel::compressed_ring
