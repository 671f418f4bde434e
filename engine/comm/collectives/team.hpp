// What every collective algorithm works on: a team of a transport's ranks (all of them, or a
// node's, or one rank of every node), the calling rank's place in it, and the step helpers.
// Team indices are the algorithms' ranks; the transport sees its own.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/comm/comm.hpp"
#include "engine/comm/transport.hpp"
#include "engine/status.hpp"

namespace easel {

struct Team {
  Transport* t = nullptr;
  std::vector<int> ranks;  // team index -> transport rank
  int me = 0;              // the caller's team index

  int size() const { return static_cast<int>(ranks.size()); }
  int rank(int i) const { return ranks[static_cast<size_t>(i)]; }
  int self() const { return rank(me); }

  // Every rank of `t`, the caller being transport rank `self`.
  static Team all(Transport& t, int self);
};

// [begin, end) of chunk j of n floats cut into `parts` nearly equal chunks.
inline int64_t chunk_begin(int64_t n, int j, int parts) {
  return n * j / parts;
}

// Sends `n` floats of `src` to team index `to` and receives `m` floats from team index `from`
// into dst (copy, or dst = own + in); either side may be absent (index < 0 or length ignored).
// Large adds are pipelined in the transport's pieces (Transport::pipeline_floats).
void team_step(const Team& team, int to, const float* src, int64_t n, int from, float* dst,
               const float* own, int64_t m, RecvOp op, const char* what);
inline void team_send(const Team& team, int to, const float* src, int64_t n, const char* what) {
  team_step(team, to, src, n, -1, nullptr, nullptr, 0, RecvOp::copy, what);
}
inline void team_recv(const Team& team, int from, float* dst, int64_t m, const char* what) {
  team_step(team, -1, nullptr, 0, from, dst, nullptr, m, RecvOp::copy, what);
}

// One step of an algorithm written down instead of run (team_step's arguments as the caller's
// Transfer): algorithms that are pipelined with others (hierarchical) run several streams of
// them through Transport::run_streams. A step with neither peer is a slot the caller sits out.
struct Step {
  Transfer x;
  const char* what = "";
  bool idle() const { return x.send_peer < 0 && x.recv_peer < 0; }
};
using Schedule = std::vector<Step>;
Step team_transfer(const Team& team, int to, const float* src, int64_t n, int from, float* dst,
                   const float* own, int64_t m, RecvOp op, const char* what);
// Runs the schedule's steps one after another (its idle slots skipped).
void run_schedule(const Team& team, const Schedule& s);

// The root sends every piece [begin, end) of buf to its team index `to`, at once (a stream a
// piece, at most kScatterStreams, pieces in order within one) where a piece takes less than a
// latency of the links (collective_links), so that the latencies overlap, else one after
// another; the others receive theirs into buf. Every member calls it with the same pieces (one per
// destination; a piece to the root itself is skipped).
struct ScatterPiece {
  int to;
  int64_t begin, end;
};
constexpr size_t kScatterStreams = 64;
void team_scatter(const Team& t, int root, float* buf, const std::vector<ScatterPiece>& pieces,
                  const char* what);

// Copies n floats (nothing when values are ignored: simulated, compute injected).
void copy_floats(float* dst, const float* src, int64_t n);

// The algorithms, one file each. src is const; dst matters on the root only (it may alias the
// root's src); buf is in and out. scratch is the caller's own, grown on demand.
namespace tree {  // binomial: reduce into the root, broadcast farthest first (MPICH's order)
void reduce(const Team& t, const float* src, float* dst, int64_t n, int root, ScratchFloats& s);
void broadcast(const Team& t, float* buf, int64_t n, int root);
void allreduce(const Team& t, float* buf, int64_t n, ScratchFloats& s);
}  // namespace tree
namespace ring {  // reduce-scatter + all-gather along the ring of team indices
// On return the caller's work holds the whole sum of chunk (me + 1) mod p (chunks of n by p).
void reduce_scatter(const Team& t, const float* src, float* work, int64_t n);
// The same written down: p - 1 steps appended to `out` (p == 1: none).
void reduce_scatter_steps(const Team& t, const float* src, float* work, int64_t n, Schedule* out);
// Rank i starts with chunk (i + shift) mod p of buf; on return buf is whole everywhere.
void allgather(const Team& t, float* buf, int64_t n, int shift);
void allgather_steps(const Team& t, float* buf, int64_t n, int shift, Schedule* out);
// The allreduce written down: the reduce-scatter's steps, then the all-gather's (shift 1).
void allreduce_steps(const Team& t, float* buf, int64_t n, Schedule* out);
void reduce(const Team& t, const float* src, float* dst, int64_t n, int root, ScratchFloats& s);
void broadcast(const Team& t, float* buf, int64_t n, int root);
void allreduce(const Team& t, float* buf, int64_t n, ScratchFloats& s);
}  // namespace ring
namespace halving_doubling {  // Rabenseifner: recursive halving, then doubling; any p
// The allreduce written down: the same number of steps on every rank of the team (idle where a
// rank sits a round out), slot k of every rank's schedule matching slot k of its peers'.
void allreduce_steps(const Team& t, float* buf, int64_t n, Schedule* out);
// Its two halves: after the reduce-scatter's steps the caller holds the whole sum of
// [*lo, *hi) of buf (empty on the even rank of a folded pair); the all-gather's steps start
// from there and leave buf whole on every rank.
void reduce_scatter_steps(const Team& t, float* buf, int64_t n, Schedule* out, int64_t* lo,
                          int64_t* hi);
void allgather_steps(const Team& t, float* buf, int64_t n, Schedule* out);
void reduce(const Team& t, const float* src, float* dst, int64_t n, int root, ScratchFloats& s);
void broadcast(const Team& t, float* buf, int64_t n, int root);
void allreduce(const Team& t, float* buf, int64_t n, ScratchFloats& s);
}  // namespace halving_doubling
namespace hierarchical {  // inside each node, then across nodes on each rank's share, then back
// `inter` is the algorithm across nodes (ring or halving_doubling).
void reduce(const Team& t, const float* src, float* dst, int64_t n, int root, ScratchFloats& s,
            CollectiveAlgo inter);
void broadcast(const Team& t, float* buf, int64_t n, int root, CollectiveAlgo inter);
void allreduce(const Team& t, float* buf, int64_t n, ScratchFloats& s, CollectiveAlgo inter);
// The allreduce with its pipeline cut into `chunks` chunks (allreduce: hierarchical_chunks of the
// span, engine/comm/collective_cost.hpp), for the tests.
void allreduce_chunked(const Team& t, float* buf, int64_t n, ScratchFloats& s, CollectiveAlgo inter,
                       int chunks);
}  // namespace hierarchical

}  // namespace easel
