// The binomial tree. reduce: in round k (mask 2^k) the rank at distance v from the root with
// v % 2^(k+1) == 2^k sends its partial to v - 2^k, which adds it to its own (parent + child,
// children in increasing distance); log2(p) rounds, each moving the whole span. broadcast:
// farthest first (MPICH's order): a rank receives from v less its lowest set bit, then sends to
// v + mask for every mask below that bit, largest first, so that with ranks placed in blocks per
// node only the first rounds cross nodes. allreduce = reduce into team index 0 + broadcast.
// Moves 2 log2(p) spans per allreduce: latency-optimal, not bandwidth-optimal.
#include "engine/comm/collectives/team.hpp"

namespace easel::tree {

void reduce(const Team& t, const float* src, float* dst, int64_t n, int root, ScratchFloats& s) {
  const int p = t.size();
  const int v = (t.me - root + p) % p;
  const float* cur = src;
  float* acc = nullptr;
  for (int mask = 1; mask < p; mask <<= 1) {
    if (v % (2 * mask) != 0) {
      team_send(t, (v - mask + root) % p, cur, n, "tree reduce");
      return;
    }
    if (v + mask >= p) continue;
    if (acc == nullptr) acc = v == 0 ? dst : s.at_least(n);
    team_step(t, -1, nullptr, 0, (v + mask + root) % p, acc, cur, n, RecvOp::add, "tree reduce");
    cur = acc;
  }
  if (v == 0 && cur != dst) copy_floats(dst, cur, n);  // p == 1
}

void broadcast(const Team& t, float* buf, int64_t n, int root) {
  const int p = t.size();
  const int v = (t.me - root + p) % p;
  int mask = 1;
  while (mask < p)
    mask <<= 1;
  if (v != 0) {
    mask = v & -v;
    team_recv(t, (v - mask + root) % p, buf, n, "tree broadcast");
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < p) team_send(t, (v + mask + root) % p, buf, n, "tree broadcast");
}

void allreduce(const Team& t, float* buf, int64_t n, ScratchFloats& s) {
  if (t.size() == 1) return;
  reduce(t, buf, buf, n, 0, s);
  broadcast(t, buf, n, 0);
}

}  // namespace easel::tree
