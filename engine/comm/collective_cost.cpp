// The alpha-beta cost of each collective algorithm (collective_cost.hpp). Each formula follows
// its algorithm's file step by step; a step whose messages cross nodes pays the uplink's latency
// and its bandwidth divided among the messages that leave a node at once.
#include "engine/comm/collective_cost.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace easel {

namespace {

constexpr int kCutFactor = 2;

int ceil_log2(int x) {
  int k = 0;
  while ((1 << k) < x)
    ++k;
  return k;
}

struct Shape {
  double m;
  int p, l, nodes;
  LinkCost in, out;
  explicit Shape(const CollectiveShape& s)
      : m(s.bytes),
        p(std::max(1, s.ranks)),
        l(std::clamp(s.ranks_per_node, 1, std::max(1, s.ranks))),
        nodes((p + l - 1) / l),
        in(s.intra),
        out(s.inter) {}
  // One step moving `bytes` per message; `crossing` messages share a node's uplink when any
  // message of the step leaves its node.
  double step(double bytes, bool leaves_node, int crossing = 1) const {
    if (!leaves_node || nodes == 1) return in.latency_s + bytes / in.bytes_per_s;
    return std::max(in.latency_s + bytes / in.bytes_per_s,
                    out.latency_s + crossing * bytes / out.bytes_per_s);
  }
};

double tree(const Shape& s) {
  double t = 0;
  const int rounds = ceil_log2(s.p);
  for (int k = 0; k < rounds; ++k)
    t += s.step(s.m, (1 << k) >= s.l);  // round k pairs ranks 2^k apart: across nodes past L
  return 2 * t;
}

double ring(const Shape& s) {
  return 2.0 * (s.p - 1) * s.step(s.m / s.p, true);
}

double halving_doubling(const Shape& s) {
  int pp = 1;
  while (pp * 2 <= s.p)
    pp *= 2;
  double t = 0;
  if (pp < s.p) t += 2 * s.step(s.m, s.l < 2);  // the fold and the unfold, between neighbours
  double seg = s.m;
  for (int mask = 1; mask < pp; mask <<= 1) {
    seg /= 2;
    const bool far = mask >= s.l;
    // Across nodes every rank exchanges with one 2^k away at once: the traffic crosses the
    // network's cut between the halves, which a ring's neighbour traffic never loads; priced as
    // twice the uplink's time (kCutFactor), as the simulated KNL dragonfly and GPU fat tree
    // showed (docs/SIMULATION.md "Collectives").
    t += 2 * s.step(seg, far, far ? kCutFactor * std::min(s.l, s.p) : 1);  // halving, doubling
  }
  return t;
}

// The pipelined hierarchical allreduce (engine/comm/collectives/hierarchical.cpp): the same plan
// of slots replayed with each step's cost, a slot costing the longer of its two streams' steps
// (they overlap).
double pipelined(const Shape& s, CollectiveAlgo inter) {
  const int L = s.l, N = s.nodes, C = hierarchical_chunks(s.m);
  const double mc = s.m / C, share = mc / L;
  std::vector<double> a, b, d;  // one chunk's steps: inside (A), across (B), inside (D)
  if ((L & (L - 1)) == 0) {     // halving-doubling inside: halves of the chunk, largest first
    for (double seg = mc / 2; a.size() < static_cast<size_t>(ceil_log2(L)); seg /= 2)
      a.push_back(s.step(seg, false));
    d.assign(a.rbegin(), a.rend());
  } else {
    a.assign(static_cast<size_t>(L - 1), s.step(mc / L, false));
    d = a;
  }
  if (inter == CollectiveAlgo::halving_doubling) {  // L shares leave each node at once
    int pp = 1;
    while (pp * 2 <= N)
      pp *= 2;
    if (pp < N) b.push_back(s.step(share, true, L));
    std::vector<double> half;
    for (double seg = share / 2; half.size() < static_cast<size_t>(ceil_log2(pp)); seg /= 2)
      half.push_back(s.step(seg, true, L));  // the L shares fill the uplink: no cut factor
    b.insert(b.end(), half.begin(), half.end());
    b.insert(b.end(), half.rbegin(), half.rend());
    if (pp < N) b.push_back(s.step(share, true, L));
  } else {
    b.assign(static_cast<size_t>(2 * (N - 1)), s.step(share / N, true, L));
  }
  // The plan of hierarchical.cpp: per slot a D of the oldest chunk whose B is done, else the
  // next A; a B once its A is done.
  double t = 0;
  size_t ca = 0, ai = 0, cb = 0, bi = 0, cd = 0, di = 0;
  std::vector<char> a_done(static_cast<size_t>(C), 0), b_done(static_cast<size_t>(C), 0);
  const size_t n = static_cast<size_t>(C);
  while (cd < n) {
    double in = 0, out = 0;
    bool a_fin = false, b_fin = false;
    if (cd < cb && b_done[cd]) {
      in = d[di];
      if (++di == d.size()) di = 0, ++cd;
    } else if (ca < n) {
      in = a[ai];
      if (++ai == a.size()) ai = 0, a_fin = true;
    }
    if (cb < n && a_done[cb]) {
      out = b[bi];
      if (++bi == b.size()) bi = 0, b_fin = true;
    }
    t += std::max(in, out);
    if (a_fin) a_done[ca++] = 1;
    if (b_fin) b_done[cb++] = 1;
  }
  return t;
}

double hierarchical(const Shape& s, CollectiveAlgo inter) {
  if (s.nodes == 1) return ring(s);
  Shape across = s;
  across.p = s.nodes;
  across.l = 1;
  const auto inter_cost = [&](const Shape& x) {
    return inter == CollectiveAlgo::halving_doubling ? halving_doubling(x) : ring(x);
  };
  if (s.p % s.l != 0) {  // unequal nodes: trees inside, leaders across
    Shape node = s;
    node.p = s.l;
    node.nodes = 1;
    return tree(node) + inter_cost(across);
  }
  if (s.l == 1) return inter_cost(across);
  return pipelined(s, inter);
}

}  // namespace

int ring_broadcast_pieces(double bytes, int ranks) {
  LinkCost intra, inter;
  std::string error;
  if (ranks < 3 || bytes <= 0 || !collective_links(&intra, &inter, &error)) return 0;
  // Every step of either waits for the slowest link the ring crosses.
  const double a = std::max(intra.latency_s, inter.latency_s);
  const double b = std::min(intra.bytes_per_s, inter.bytes_per_s);
  const double p = ranks;
  const double scatter_allgather = 2 * (p - 1) * (a + bytes / p / b);
  const double k = std::clamp(std::round(std::sqrt((p - 2) * bytes / b / std::max(a, 1e-9))), 1.0,
                              std::max(1.0, std::floor(bytes / 4)));
  const double chain = (k + p - 2) * (a + bytes / k / b);
  return chain < scatter_allgather ? static_cast<int>(k) : 0;
}

int hierarchical_chunks(double bytes) {
  return static_cast<int>(std::clamp(std::ceil(bytes / 32e6), 1.0, 8.0));
}

double allreduce_seconds(CollectiveAlgo a, const CollectiveShape& cs, CollectiveAlgo inter) {
  const Shape s(cs);
  if (s.p == 1 || s.m <= 0) return 0;
  switch (a) {
    case CollectiveAlgo::tree:
      return tree(s);
    case CollectiveAlgo::ring:
    case CollectiveAlgo::mpi:  // priced as the bandwidth-optimal ring it runs for large spans
      return ring(s);
    case CollectiveAlgo::halving_doubling:
      return halving_doubling(s);
    case CollectiveAlgo::hierarchical:
      return hierarchical(s, inter);
    case CollectiveAlgo::automatic:
      break;
  }
  const CollectiveChoice c = choose_collective(cs);
  return allreduce_seconds(c.algo, cs, c.inter);
}

double reduce_broadcast_seconds(CollectiveAlgo a, const CollectiveShape& cs, CollectiveAlgo inter) {
  const Shape s(cs);
  if (s.p == 1 || s.m <= 0) return 0;
  if (a == CollectiveAlgo::automatic) {
    const CollectiveChoice c = choose_collective(cs);
    a = c.algo;
    inter = c.inter;
  }
  const double all = allreduce_seconds(a, cs, inter);
  if (a == CollectiveAlgo::tree) return all;
  // The root's gather and scatter: p - 1 messages of m / p each way, over its one link.
  const double root = 2.0 * (s.p - 1) * s.step(s.m / s.p, true);
  return all + root;
}

CollectiveChoice choose_collective(const CollectiveShape& cs) {
  CollectiveChoice best;
  const Shape s(cs);
  const double h_ring = allreduce_seconds(CollectiveAlgo::hierarchical, cs, CollectiveAlgo::ring);
  const double h_hd =
      allreduce_seconds(CollectiveAlgo::hierarchical, cs, CollectiveAlgo::halving_doubling);
  const CollectiveAlgo h_inter =
      h_hd < h_ring ? CollectiveAlgo::halving_doubling : CollectiveAlgo::ring;
  struct Option {
    CollectiveAlgo a;
    double t;
  };
  const Option options[] = {
      {CollectiveAlgo::tree, allreduce_seconds(CollectiveAlgo::tree, cs)},
      {CollectiveAlgo::ring, allreduce_seconds(CollectiveAlgo::ring, cs)},
      {CollectiveAlgo::halving_doubling, allreduce_seconds(CollectiveAlgo::halving_doubling, cs)},
      {CollectiveAlgo::hierarchical, std::min(h_ring, h_hd)}};
  const Option* pick = &options[0];
  for (const Option& o : options)
    if (o.t < pick->t * 0.99) pick = &o;  // within 1%: the earlier (simpler) one
  best.algo = pick->a;
  best.inter = h_inter;
  char line[512];
  std::snprintf(line, sizeof line,
                "collective auto: %s%s for %.3g MB over %d ranks (%d per node): predicted "
                "allreduce tree %.3g ms, ring %.3g ms, halving-doubling %.3g ms, hierarchical "
                "%.3g ms",
                collective_algo_name(best.algo),
                best.algo == CollectiveAlgo::hierarchical
                    ? (h_inter == CollectiveAlgo::ring ? "/ring" : "/halving-doubling")
                    : "",
                s.m / 1e6, s.p, s.l, options[0].t * 1e3, options[1].t * 1e3, options[2].t * 1e3,
                options[3].t * 1e3);
  best.why = line;
  return best;
}

bool collective_links(LinkCost* intra, LinkCost* inter, std::string* error) {
  // Shared memory among threads: a hand-off of a few microseconds, one core's copy bandwidth.
  *intra = LinkCost{2e-6, 8e9};
  *inter = *intra;
  const char* v = std::getenv("EASEL_COLLECTIVE_LINKS");
  if (v == nullptr || *v == '\0') return true;
  double a = 0, b = 0, c = 0, d = 0;
  char tail = 0;
  if (std::sscanf(v, "%lf,%lf,%lf,%lf%c", &a, &b, &c, &d, &tail) != 4 || a < 0 || b <= 0 || c < 0 ||
      d <= 0) {
    *error = std::string("EASEL_COLLECTIVE_LINKS='") + v +
             "' is not INTRA_US,INTRA_GBPS,INTER_US,INTER_GBPS (e.g. 1,24,1,24)";
    return false;
  }
  *intra = LinkCost{a * 1e-6, b * 1e9};
  *inter = LinkCost{c * 1e-6, d * 1e9};
  return true;
}

}  // namespace easel
