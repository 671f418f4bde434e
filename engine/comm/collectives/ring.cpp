// The ring: reduce-scatter then all-gather over p chunks, each rank sending to the next and
// receiving from the previous at every step. Chunk c is summed in rank order c, c+1, ..., c-1
// and ends at rank c-1. Each rank moves 2 (p-1)/p of the span per allreduce: bandwidth-optimal,
// with 2 (p-1) latencies. Large chunks are pipelined by the transport (Transport's pieces), so
// several are in flight while the previous one is added.
// reduce = reduce-scatter, then the root gathers the chunks; broadcast = the root scatters the
// chunks, then an all-gather (van de Geijn), or where the links predict it faster
// (ring_broadcast_pieces) a pipelined chain along the ring.
#include "engine/comm/collective_cost.hpp"
#include "engine/comm/collectives/team.hpp"

namespace easel::ring {

namespace {

int mod(int a, int p) {
  return ((a % p) + p) % p;
}

}  // namespace

void reduce_scatter_steps(const Team& t, const float* src, float* work, int64_t n, Schedule* out) {
  const int p = t.size();
  const int me = t.me, next = mod(me + 1, p), prev = mod(me - 1, p);
  for (int s = 0; s < p - 1; ++s) {
    const int cs = mod(me - s, p), cr = mod(me - s - 1, p);
    const int64_t bs = chunk_begin(n, cs, p), es = chunk_begin(n, cs + 1, p);
    const int64_t br = chunk_begin(n, cr, p), er = chunk_begin(n, cr + 1, p);
    const float* from = (s == 0 ? src : work) + bs;  // chunk cs was received at step s - 1
    out->push_back(team_transfer(t, next, from, es - bs, prev, work + br, src + br, er - br,
                                 RecvOp::add, "ring reduce-scatter"));
  }
}

void reduce_scatter(const Team& t, const float* src, float* work, int64_t n) {
  Schedule s;
  reduce_scatter_steps(t, src, work, n, &s);
  run_schedule(t, s);
}

void allgather_steps(const Team& t, float* buf, int64_t n, int shift, Schedule* out) {
  const int p = t.size();
  const int me = t.me, next = mod(me + 1, p), prev = mod(me - 1, p);
  for (int s = 0; s < p - 1; ++s) {
    const int cs = mod(me + shift - s, p), cr = mod(me + shift - s - 1, p);
    const int64_t bs = chunk_begin(n, cs, p), es = chunk_begin(n, cs + 1, p);
    const int64_t br = chunk_begin(n, cr, p), er = chunk_begin(n, cr + 1, p);
    out->push_back(team_transfer(t, next, buf + bs, es - bs, prev, buf + br, nullptr, er - br,
                                 RecvOp::copy, "ring all-gather"));
  }
}

void allgather(const Team& t, float* buf, int64_t n, int shift) {
  Schedule s;
  allgather_steps(t, buf, n, shift, &s);
  run_schedule(t, s);
}

void allreduce(const Team& t, float* buf, int64_t n, ScratchFloats&) {
  if (t.size() == 1) return;
  reduce_scatter(t, buf, buf, n);
  allgather(t, buf, n, 1);
}

void reduce(const Team& t, const float* src, float* dst, int64_t n, int root, ScratchFloats& s) {
  const int p = t.size();
  if (p == 1) {
    copy_floats(dst, src, n);
    return;
  }
  float* work = t.me == root ? dst : s.at_least(n);
  reduce_scatter(t, src, work, n);
  const int mine = mod(t.me + 1, p);
  if (t.me != root) {
    team_send(t, root, work + chunk_begin(n, mine, p),
              chunk_begin(n, mine + 1, p) - chunk_begin(n, mine, p), "ring reduce (gather)");
    return;
  }
  for (int j = 0; j < p; ++j) {  // chunk j is owned by rank j - 1
    if (j == mine) continue;
    team_recv(t, mod(j - 1, p), dst + chunk_begin(n, j, p),
              chunk_begin(n, j + 1, p) - chunk_begin(n, j, p), "ring reduce (gather)");
  }
}

// The pipelined chain from the root along the ring: at step s the rank at distance v from the
// root receives piece s - v + 1 from the previous rank and passes piece s - v (received at step
// s - 1) to the next.
void chain_broadcast(const Team& t, float* buf, int64_t n, int root, int pieces) {
  const int p = t.size();
  const int v = mod(t.me - root, p), next = mod(t.me + 1, p), prev = mod(t.me - 1, p);
  for (int s = 0; s < pieces + p - 2; ++s) {
    const int ks = v < p - 1 ? s - v : -1, kr = v > 0 ? s - v + 1 : -1;
    const bool send = ks >= 0 && ks < pieces, recv = kr >= 0 && kr < pieces;
    if (!send && !recv) continue;
    const int64_t bs = send ? chunk_begin(n, ks, pieces) : 0;
    const int64_t br = recv ? chunk_begin(n, kr, pieces) : 0;
    team_step(t, send ? next : -1, buf + bs, send ? chunk_begin(n, ks + 1, pieces) - bs : 0,
              recv ? prev : -1, buf + br, nullptr, recv ? chunk_begin(n, kr + 1, pieces) - br : 0,
              RecvOp::copy, "ring broadcast (chain)");
  }
}

void broadcast(const Team& t, float* buf, int64_t n, int root) {
  const int p = t.size();
  if (p == 1) return;
  const int pieces = ring_broadcast_pieces(static_cast<double>(n) * 4, p);
  if (pieces > 0) return chain_broadcast(t, buf, n, root, pieces);
  if (t.me == root) {
    for (int j = 0; j < p; ++j)
      if (j != root)
        team_send(t, j, buf + chunk_begin(n, j, p), chunk_begin(n, j + 1, p) - chunk_begin(n, j, p),
                  "ring broadcast (scatter)");
  } else {
    team_recv(t, root, buf + chunk_begin(n, t.me, p),
              chunk_begin(n, t.me + 1, p) - chunk_begin(n, t.me, p), "ring broadcast (scatter)");
  }
  allgather(t, buf, n, 0);
}

// As hierarchical's part across nodes: the reduce-scatter's steps, then the all-gather's from
// the chunk each rank then holds.
void allreduce_steps(const Team& t, float* buf, int64_t n, Schedule* out) {
  reduce_scatter_steps(t, buf, buf, n, out);
  allgather_steps(t, buf, n, 1, out);
}

}  // namespace easel::ring
