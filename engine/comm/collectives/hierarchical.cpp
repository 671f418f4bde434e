// Node-aware: inside each node first, then across nodes, then back inside. With every node
// holding L ranks (placed in blocks), the allreduce is pipelined over chunks of the span
// (pipelined() below): each chunk is reduce-scattered inside the node (halving-doubling when L
// is a power of two, so that the large halves stay between near ranks, else the ring), each
// rank's share of it allreduced across nodes by the ranks of the same local index, one per
// node (ring or halving-doubling), and all-gathered inside the node; while one chunk crosses
// nodes, the next is reduced inside them. Each node's uplink carries 2 (N-1)/N of the span per
// allreduce whatever L is. reduce and broadcast run the same three phases unpipelined, with the
// ring inside. Nodes of unequal size: a tree inside each node into a leader, the inter-node
// algorithm among the leaders, a tree broadcast back.
// The summation order depends on the rank count, the ranks per node and the span's size, and
// where a ring runs (ranks per node not a power of two, or --collective hierarchical/ring across
// nodes) on the chunks, which the cost model picks from the links too (hierarchical_chunks);
// halving-doubling's order does not depend on how the span is cut.
#include <algorithm>
#include <vector>

#include "engine/comm/collective_cost.hpp"
#include "engine/comm/collectives/list.hpp"
#include "engine/comm/collectives/team.hpp"

namespace easel::hierarchical {

namespace {

struct Layout {
  std::vector<std::vector<int>> nodes;  // team indices of each node, in team order
  int my_node = 0, my_local = 0;
  bool equal = true;
};

Layout layout_of(const Team& t) {
  Layout l;
  int last = -1;
  for (int i = 0; i < t.size(); ++i) {
    const int node = t.t->node_of(t.rank(i));
    if (l.nodes.empty() || node != last) l.nodes.emplace_back();
    last = node;
    if (i == t.me) {
      l.my_node = static_cast<int>(l.nodes.size()) - 1;
      l.my_local = static_cast<int>(l.nodes.back().size());
    }
    l.nodes.back().push_back(i);
  }
  for (const auto& n : l.nodes)
    l.equal = l.equal && n.size() == l.nodes[0].size();
  return l;
}

// A team of some of t's indices; `me` is the caller's index in `members`.
Team sub(const Team& t, const std::vector<int>& members, int me) {
  Team s;
  s.t = t.t;
  s.me = me;
  for (int i : members)
    s.ranks.push_back(t.rank(i));
  return s;
}

Team local_team(const Team& t, const Layout& l) {
  return sub(t, l.nodes[static_cast<size_t>(l.my_node)], l.my_local);
}

// The ranks with local index j on every node.
Team cross_team(const Team& t, const Layout& l, int j) {
  std::vector<int> members;
  for (const auto& n : l.nodes)
    members.push_back(n[static_cast<size_t>(j)]);
  return sub(t, members, l.my_node);
}

// The leaders: the first rank of every node, or on `root_node` the rank `root_local`.
Team leaders(const Team& t, const Layout& l, int root_node, int root_local) {
  std::vector<int> members;
  for (size_t k = 0; k < l.nodes.size(); ++k)
    members.push_back(l.nodes[k][static_cast<int>(k) == root_node ? root_local : 0]);
  return sub(t, members, l.my_node);
}

// The part across nodes: its row's (engine/comm/collectives/list.cpp) collectives.
const CollectiveEntry& across(CollectiveAlgo a) {
  const CollectiveEntry& e = collective_entry(a);
  EASEL_CHECK_MSG(e.allreduce_steps != nullptr,
                  "hierarchical's part across nodes is ring or halving-doubling");
  return e;
}
void inter_allreduce(CollectiveAlgo a, const Team& t, float* buf, int64_t n, ScratchFloats& s) {
  across(a).allreduce(t, buf, n, s, a);
}
void inter_reduce(CollectiveAlgo a, const Team& t, const float* src, float* dst, int64_t n,
                  int root, ScratchFloats& s) {
  across(a).reduce(t, src, dst, n, root, s, a);
}
void inter_broadcast(CollectiveAlgo a, const Team& t, float* buf, int64_t n, int root) {
  across(a).broadcast(t, buf, n, root, a);
}

// The inter-node algorithm's own scratch: the caller's holds the span being reduced.
ScratchFloats& inner() {
  thread_local ScratchFloats s;
  return s;
}

int node_and_local(const Layout& l, int i, int* local) {
  for (size_t k = 0; k < l.nodes.size(); ++k)
    for (size_t j = 0; j < l.nodes[k].size(); ++j)
      if (l.nodes[k][j] == i) {
        *local = static_cast<int>(j);
        return static_cast<int>(k);
      }
  EASEL_CHECK_MSG(false, "a root outside the team");
  return 0;
}

}  // namespace

// The allreduce on equal nodes, pipelined: the span is cut into C chunks (hierarchical_chunks);
// each chunk is reduce-scattered inside the node (A), allreduced across nodes on each rank's share
// (B), all-gathered inside the node (D). The phases are separate streams of one
// Transport::run_streams call (hierarchical_plan, engine/comm/collective_cost.hpp: A0 A1 ...;
// B0 B1 ... in lanes; D0 D1 ...), each B once its A is done, each D once its B is done, so that
// a transport that can runs each at its own pace. The steps depend on the step counts only, so
// every rank of a node and every rank of a cross team gives the same streams.
void pipelined(const Team& t, const Layout& l, float* buf, int64_t n, CollectiveAlgo inter,
               int chunks) {
  const Team local = local_team(t, l);
  const Team cross = cross_team(t, l, l.my_local);
  const int L = local.size();
  const bool intra_hd = (L & (L - 1)) == 0;  // halving-doubling inside: large halves stay near
  const int C = static_cast<int>(std::clamp<int64_t>(n, 1, chunks));
  std::vector<Schedule> A(static_cast<size_t>(C)), B(A.size()), D(A.size());
  for (int c = 0; c < C; ++c) {
    const int64_t cb = chunk_begin(n, c, C), nc = chunk_begin(n, c + 1, C) - cb;
    float* x = buf + cb;
    int64_t lo = 0, hi = 0;
    if (intra_hd) {
      halving_doubling::reduce_scatter_steps(local, x, nc, &A[c], &lo, &hi);
      halving_doubling::allgather_steps(local, x, nc, &D[c]);
    } else {
      ring::reduce_scatter_steps(local, x, x, nc, &A[c]);
      const int j = (l.my_local + 1) % L;
      lo = chunk_begin(nc, j, L);
      hi = chunk_begin(nc, j + 1, L);
      ring::allgather_steps(local, x, nc, 1, &D[c]);
    }
    // The cross team's steps; idle on an empty share, which is empty on every node alike (the
    // same local index everywhere: e.g. the even rank of a folded pair inside).
    const bool idle = hi == lo;
    across(inter).allreduce_steps(cross, x + lo, hi - lo, &B[c]);
    if (idle)
      for (Step& st : B[c])
        st = Step{};
  }
  const HierarchicalPlan plan =
      hierarchical_plan(C, static_cast<int>(A[0].size()), static_cast<int>(B[0].size()),
                        static_cast<int>(D[0].size()));
  std::vector<Stream> streams(plan.streams.size());
  for (size_t k = 0; k < plan.streams.size(); ++k)
    for (const PlanStep& ps : plan.streams[k]) {
      const std::vector<Schedule>& phase = ps.phase == 0 ? A : ps.phase == 1 ? B : D;
      StreamStep st;
      st.x = phase[static_cast<size_t>(ps.chunk)][static_cast<size_t>(ps.index)].x;
      st.after_stream = ps.after_stream;
      st.after_count = ps.after_count;
      streams[k].push_back(st);
    }
  t.t->run_streams(t.self(), streams, "hierarchical allreduce");
}

void allreduce(const Team& t, float* buf, int64_t n, ScratchFloats& s, CollectiveAlgo inter) {
  if (t.size() == 1) return;
  const Layout l = layout_of(t);
  const int per_node = static_cast<int>(l.nodes[0].size());
  allreduce_chunked(
      t, buf, n, s, inter,
      l.equal ? hierarchical_chunks(static_cast<double>(n) * 4, t.size(), per_node, inter) : 1);
}

void allreduce_chunked(const Team& t, float* buf, int64_t n, ScratchFloats& s, CollectiveAlgo inter,
                       int chunks) {
  EASEL_CHECK(chunks >= 1);
  if (t.size() == 1) return;
  const Layout l = layout_of(t);
  if (!l.equal) {
    const Team local = local_team(t, l);
    tree::reduce(local, buf, buf, n, 0, s);
    if (l.my_local == 0) inter_allreduce(inter, leaders(t, l, -1, 0), buf, n, inner());
    tree::broadcast(local, buf, n, 0);
    return;
  }
  if (l.nodes.size() == 1) return ring::allreduce(t, buf, n, s);
  if (l.nodes[0].size() == 1) return inter_allreduce(inter, t, buf, n, s);
  pipelined(t, l, buf, n, inter, chunks);
}

void reduce(const Team& t, const float* src, float* dst, int64_t n, int root, ScratchFloats& s,
            CollectiveAlgo inter) {
  if (t.size() == 1) {
    copy_floats(dst, src, n);
    return;
  }
  const Layout l = layout_of(t);
  int root_local = 0;
  const int root_node = node_and_local(l, root, &root_local);
  const Team local = local_team(t, l);
  float* work = t.me == root ? dst : s.at_least(n);
  if (!l.equal) {
    const int leader = l.my_node == root_node ? root_local : 0;
    tree::reduce(local, src, work, n, leader, s);
    if (l.my_local == leader)
      inter_reduce(inter, leaders(t, l, root_node, root_local), work, work, n, root_node, inner());
    return;
  }
  const int L = local.size();
  ring::reduce_scatter(local, src, work, n);
  const int c = (l.my_local + 1) % L;
  const int64_t b = chunk_begin(n, c, L), e = chunk_begin(n, c + 1, L);
  inter_reduce(inter, cross_team(t, l, l.my_local), work + b, work + b, e - b, root_node, inner());
  if (l.my_node != root_node) return;
  if (t.me != root) {
    team_send(local, root_local, work + b, e - b, "hierarchical reduce (gather)");
    return;
  }
  for (int j = 0; j < L; ++j) {
    if (j == root_local) continue;
    const int cj = (j + 1) % L;
    team_recv(local, j, dst + chunk_begin(n, cj, L),
              chunk_begin(n, cj + 1, L) - chunk_begin(n, cj, L), "hierarchical reduce (gather)");
  }
}

void broadcast(const Team& t, float* buf, int64_t n, int root, CollectiveAlgo inter) {
  if (t.size() == 1) return;
  const Layout l = layout_of(t);
  int root_local = 0;
  const int root_node = node_and_local(l, root, &root_local);
  const Team local = local_team(t, l);
  if (!l.equal) {
    const int leader = l.my_node == root_node ? root_local : 0;
    if (l.my_local == leader)
      inter_broadcast(inter, leaders(t, l, root_node, root_local), buf, n, root_node);
    tree::broadcast(local, buf, n, leader);
    return;
  }
  const int L = local.size();
  if (l.my_node == root_node) {  // the root scatters chunk j to local rank j
    std::vector<ScatterPiece> pieces;
    for (int j = 0; j < L; ++j)
      pieces.push_back({j, chunk_begin(n, j, L), chunk_begin(n, j + 1, L)});
    team_scatter(local, root_local, buf, pieces, "hierarchical broadcast (scatter)");
  }
  const int64_t b = chunk_begin(n, l.my_local, L), e = chunk_begin(n, l.my_local + 1, L);
  inter_broadcast(inter, cross_team(t, l, l.my_local), buf + b, e - b, root_node);
  ring::allgather(local, buf, n, 0);
}

}  // namespace easel::hierarchical
