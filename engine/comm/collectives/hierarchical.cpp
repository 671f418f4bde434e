// Node-aware: inside each node first, then across nodes, then back inside. With every node
// holding L ranks (placed in blocks): a ring reduce-scatter inside the node leaves local rank j
// with chunk j+1 of the node's sum (chunks of n by L); the L ranks with the same local index,
// one per node, reduce their chunk across nodes with the inter-node algorithm (ring or
// halving-doubling), in parallel; a ring all-gather inside the node completes the span. Each
// node's uplink then carries 2 (N-1)/N of the span per allreduce whatever L is, and the node's own
// links the rest. Nodes of unequal size: a tree inside each node into a leader, the inter-node
// algorithm among the leaders, a tree broadcast back.
// The summation order depends on the rank count and the ranks per node only.
#include <vector>

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

void inter_allreduce(CollectiveAlgo a, const Team& t, float* buf, int64_t n, ScratchFloats& s) {
  if (a == CollectiveAlgo::halving_doubling)
    halving_doubling::allreduce(t, buf, n, s);
  else
    ring::allreduce(t, buf, n, s);
}
void inter_reduce(CollectiveAlgo a, const Team& t, const float* src, float* dst, int64_t n,
                  int root, ScratchFloats& s) {
  if (a == CollectiveAlgo::halving_doubling)
    halving_doubling::reduce(t, src, dst, n, root, s);
  else
    ring::reduce(t, src, dst, n, root, s);
}
void inter_broadcast(CollectiveAlgo a, const Team& t, float* buf, int64_t n, int root) {
  if (a == CollectiveAlgo::halving_doubling)
    halving_doubling::broadcast(t, buf, n, root);
  else
    ring::broadcast(t, buf, n, root);
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

void allreduce(const Team& t, float* buf, int64_t n, ScratchFloats& s, CollectiveAlgo inter) {
  if (t.size() == 1) return;
  const Layout l = layout_of(t);
  const Team local = local_team(t, l);
  if (!l.equal) {
    tree::reduce(local, buf, buf, n, 0, s);
    if (l.my_local == 0) inter_allreduce(inter, leaders(t, l, -1, 0), buf, n, inner());
    tree::broadcast(local, buf, n, 0);
    return;
  }
  const int L = local.size();
  ring::reduce_scatter(local, buf, buf, n);
  const int c = (l.my_local + 1) % L;
  const int64_t b = chunk_begin(n, c, L), e = chunk_begin(n, c + 1, L);
  inter_allreduce(inter, cross_team(t, l, l.my_local), buf + b, e - b, inner());
  ring::allgather(local, buf, n, 1);
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
    if (l.my_local == root_local) {
      for (int j = 0; j < L; ++j)
        if (j != root_local)
          team_send(local, j, buf + chunk_begin(n, j, L),
                    chunk_begin(n, j + 1, L) - chunk_begin(n, j, L),
                    "hierarchical broadcast (scatter)");
    } else {
      team_recv(local, root_local, buf + chunk_begin(n, l.my_local, L),
                chunk_begin(n, l.my_local + 1, L) - chunk_begin(n, l.my_local, L),
                "hierarchical broadcast (scatter)");
    }
  }
  const int64_t b = chunk_begin(n, l.my_local, L), e = chunk_begin(n, l.my_local + 1, L);
  inter_broadcast(inter, cross_team(t, l, l.my_local), buf + b, e - b, root_node);
  ring::allgather(local, buf, n, 0);
}

}  // namespace easel::hierarchical
