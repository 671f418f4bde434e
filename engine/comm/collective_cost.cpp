// The alpha-beta cost of each collective algorithm (collective_cost.hpp). Each formula follows
// its algorithm's file step by step; a step whose messages cross nodes pays the uplink's latency
// and its bandwidth divided among the messages that leave a node at once.
#include "engine/comm/collective_cost.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "engine/comm/collectives/list.hpp"
#include "engine/comm/run_env.hpp"
#include "engine/status.hpp"

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
  CollectiveShape collective() const {
    CollectiveShape cs;
    cs.bytes = m;
    cs.ranks = p;
    cs.ranks_per_node = l;
    cs.intra = in;
    cs.inter = out;
    return cs;
  }
  // One step moving `bytes` per message; `crossing` messages share a node's uplink when any
  // message of the step leaves its node.
  double step(double bytes, bool leaves_node, int crossing = 1) const {
    if (!leaves_node || nodes == 1) return in.latency_s + bytes / in.bytes_per_s;
    return std::max(in.latency_s + bytes / in.bytes_per_s,
                    out.latency_s + crossing * bytes / out.bytes_per_s);
  }
};

double tree_time(const Shape& s) {
  double t = 0;
  const int rounds = ceil_log2(s.p);
  for (int k = 0; k < rounds; ++k)
    t += s.step(s.m, (1 << k) >= s.l);  // round k pairs ranks 2^k apart: across nodes past L
  return 2 * t;
}

double ring_time(const Shape& s) {
  return 2.0 * (s.p - 1) * s.step(s.m / s.p, true);
}

double halving_doubling_time(const Shape& s) {
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

// A step of the replayed pipeline: its latency, then its bytes' time on its resource (0: the
// links inside the node, shared by the A and D streams; 1: the node's uplink, shared by the B
// lanes), which one step at a time holds.
struct Cost {
  double latency, busy;
  int resource;
};

Cost inside_step(const Shape& s, double bytes) {
  return {s.in.latency_s, bytes / s.in.bytes_per_s, 0};
}
// `crossing` messages of `bytes` leave the node at once.
Cost across_step(const Shape& s, double bytes, int crossing) {
  const double in = s.in.latency_s + bytes / s.in.bytes_per_s;
  const double out = s.out.latency_s + crossing * bytes / s.out.bytes_per_s;
  return out >= in ? Cost{s.out.latency_s, crossing * bytes / s.out.bytes_per_s, 1}
                   : Cost{s.in.latency_s, bytes / s.in.bytes_per_s, 1};
}

// The pipelined hierarchical allreduce (engine/comm/collectives/hierarchical.cpp) in C chunks:
// its streams (hierarchical_plan) replayed step by step, each stream at its own pace, as the
// MPI transport runs them: a step starts when its stream's previous step and its dependency
// are done, pays its latency, then holds its resource for its bytes' time.
double pipelined(const Shape& s, CollectiveAlgo inter, int C) {
  const int L = s.l, N = s.nodes;
  const double mc = s.m / C, share = mc / L;
  std::vector<Cost> a, b, d;  // one chunk's steps: inside (A), across (B), inside (D)
  if ((L & (L - 1)) == 0) {   // halving-doubling inside: halves of the chunk, largest first
    for (double seg = mc / 2; a.size() < static_cast<size_t>(ceil_log2(L)); seg /= 2)
      a.push_back(inside_step(s, seg));
    d.assign(a.rbegin(), a.rend());
  } else {
    a.assign(static_cast<size_t>(L - 1), inside_step(s, mc / L));
    d = a;
  }
  // The L shares of a node leave it at once, filling its uplink: no cut factor.
  for (double bytes : collective_entry(inter).allreduce_step_bytes(share, N))
    b.push_back(across_step(s, bytes, L));
  const HierarchicalPlan plan = hierarchical_plan(
      C, static_cast<int>(a.size()), static_cast<int>(b.size()), static_cast<int>(d.size()));
  const size_t S = plan.streams.size();
  std::vector<std::vector<double>> end(S);  // each stream's steps' end times
  double free_at[2] = {0, 0}, last = 0;
  for (;;) {
    // The next step of the stream that is ready first (its dependency done).
    int pick = -1;
    double pick_ready = 0;
    for (size_t k = 0; k < S; ++k) {
      const size_t i = end[k].size();
      if (i == plan.streams[k].size()) continue;
      const PlanStep& ps = plan.streams[k][i];
      double ready = i > 0 ? end[k][i - 1] : 0;
      if (ps.after_stream >= 0) {
        const auto& dep = end[static_cast<size_t>(ps.after_stream)];
        if (dep.size() < static_cast<size_t>(ps.after_count)) continue;
        if (ps.after_count > 0)
          ready = std::max(ready, dep[static_cast<size_t>(ps.after_count - 1)]);
      }
      if (pick < 0 || ready < pick_ready) pick = static_cast<int>(k), pick_ready = ready;
    }
    if (pick < 0) break;
    const PlanStep& ps =
        plan.streams[static_cast<size_t>(pick)][end[static_cast<size_t>(pick)].size()];
    const std::vector<Cost>& phase = ps.phase == 0 ? a : ps.phase == 1 ? b : d;
    const Cost c = phase[static_cast<size_t>(ps.index)];
    const double start = std::max(pick_ready + c.latency, free_at[c.resource]);
    free_at[c.resource] = start + c.busy;
    end[static_cast<size_t>(pick)].push_back(start + c.busy);
    last = std::max(last, start + c.busy);
  }
  return last;
}

double hierarchical_time(const Shape& s, CollectiveAlgo inter) {
  if (s.nodes == 1) return ring_time(s);
  Shape across = s;
  across.p = s.nodes;
  across.l = 1;
  const auto inter_cost = [&](const Shape& x) {
    return collective_entry(inter).allreduce_seconds(x.collective(), inter);
  };
  if (s.p % s.l != 0) {  // unequal nodes: trees inside, leaders across
    Shape node = s;
    node.p = s.l;
    node.nodes = 1;
    return tree_time(node) + inter_cost(across);
  }
  if (s.l == 1) return inter_cost(across);
  return pipelined(s, inter, hierarchical_chunks(s.collective(), inter));
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

int hierarchical_chunks(const CollectiveShape& cs, CollectiveAlgo inter) {
  const Shape s(cs);
  if (s.m <= 0 || s.nodes == 1 || s.l == 1 || s.p % s.l != 0) return 1;
  int best = 1;
  double best_t = pipelined(s, inter, 1);
  for (int c = 2; c <= kMaxHierarchicalChunks; ++c) {
    const double t = pipelined(s, inter, c);
    if (t < best_t * 0.99) best = c, best_t = t;  // within 1%: fewer chunks
  }
  return best;
}

int hierarchical_chunks(double bytes, int ranks, int ranks_per_node, CollectiveAlgo inter) {
  CollectiveShape cs;
  cs.bytes = bytes;
  cs.ranks = ranks;
  cs.ranks_per_node = ranks_per_node;
  std::string error;
  if (!collective_links(&cs.intra, &cs.inter, &error)) return 1;
  return hierarchical_chunks(cs, inter);
}

HierarchicalPlan hierarchical_plan(int chunks, int na, int nb, int nd) {
  EASEL_CHECK(chunks >= 1 && na >= 1 && nb >= 1 && nd >= 1);
  const int lanes = (chunks + 1) / 2;
  HierarchicalPlan plan;
  plan.streams.resize(static_cast<size_t>(2 + lanes));  // A, D, then the B lanes
  for (int c = 0; c < chunks; ++c) {
    const size_t b = static_cast<size_t>(2 + c % lanes);
    for (int i = 0; i < na; ++i)
      plan.streams[0].push_back(PlanStep{0, c, i, -1, 0});
    for (int i = 0; i < nb; ++i)
      plan.streams[b].push_back(PlanStep{1, c, i, i == 0 ? 0 : -1, i == 0 ? (c + 1) * na : 0});
    const int b_done = static_cast<int>(plan.streams[b].size());
    for (int i = 0; i < nd; ++i)
      plan.streams[1].push_back(
          PlanStep{2, c, i, i == 0 ? static_cast<int>(b) : -1, i == 0 ? b_done : 0});
  }
  return plan;
}

namespace tree {
double allreduce_cost(const CollectiveShape& s, CollectiveAlgo) {
  return tree_time(Shape(s));
}
}  // namespace tree

namespace ring {
double allreduce_cost(const CollectiveShape& s, CollectiveAlgo) {
  return ring_time(Shape(s));
}
std::vector<double> allreduce_step_bytes(double bytes, int ranks) {
  return std::vector<double>(static_cast<size_t>(2 * (ranks - 1)), bytes / ranks);
}
}  // namespace ring

namespace halving_doubling {
double allreduce_cost(const CollectiveShape& s, CollectiveAlgo) {
  return halving_doubling_time(Shape(s));
}
std::vector<double> allreduce_step_bytes(double bytes, int ranks) {
  int pp = 1;
  while (pp * 2 <= ranks)
    pp *= 2;
  std::vector<double> steps, half;
  if (pp < ranks) steps.push_back(bytes);  // the fold
  for (double seg = bytes / 2; half.size() < static_cast<size_t>(ceil_log2(pp)); seg /= 2)
    half.push_back(seg);
  steps.insert(steps.end(), half.begin(), half.end());    // halving
  steps.insert(steps.end(), half.rbegin(), half.rend());  // doubling
  if (pp < ranks) steps.push_back(bytes);                 // the unfold
  return steps;
}
}  // namespace halving_doubling

namespace hierarchical {
double allreduce_cost(const CollectiveShape& s, CollectiveAlgo inter) {
  EASEL_CHECK_MSG(collective_entry(inter).allreduce_steps != nullptr,
                  "hierarchical's part across nodes is ring or halving-doubling");
  return hierarchical_time(Shape(s), inter);
}
}  // namespace hierarchical

double allreduce_seconds(CollectiveAlgo a, const CollectiveShape& cs, CollectiveAlgo inter) {
  const Shape s(cs);
  if (s.p == 1 || s.m <= 0) return 0;
  const CollectiveChoice c = resolve_collective(a, cs, inter);
  return collective_entry(c.algo).allreduce_seconds(cs, c.inter);
}

double reduce_broadcast_seconds(CollectiveAlgo a, const CollectiveShape& cs, CollectiveAlgo inter) {
  const Shape s(cs);
  if (s.p == 1 || s.m <= 0) return 0;
  const CollectiveChoice c = resolve_collective(a, cs, inter);
  const double all = allreduce_seconds(c.algo, cs, c.inter);
  if (!collective_entry(c.algo).root_gather) return all;
  // The root's gather and scatter: p - 1 messages of m / p each way, over its one link.
  const double root = 2.0 * (s.p - 1) * s.step(s.m / s.p, true);
  return all + root;
}

CollectiveChoice resolve_collective(CollectiveAlgo a, const CollectiveShape& s,
                                    CollectiveAlgo inter) {
  if (collective_entry(a).automatic) return choose_collective(s);
  CollectiveChoice c;
  c.algo = a;
  c.inter = inter;
  return c;
}

namespace {

// A row auto weighs, its predicted allreduce and (takes_inter) its cheapest part across nodes.
struct Option {
  const CollectiveEntry* e;
  double t;
  CollectiveAlgo inter;
};

Option price(const CollectiveEntry& e, const CollectiveShape& cs) {
  Option o{&e, allreduce_seconds(e.algo, cs), CollectiveAlgo::ring};
  if (!e.takes_inter) return o;
  bool first = true;
  for (const CollectiveEntry& inter : collective_list()) {  // a tie keeps the earlier row
    if (inter.allreduce_steps == nullptr) continue;
    const double t = allreduce_seconds(e.algo, cs, inter.algo);
    if (first || t < o.t) o.t = t, o.inter = inter.algo;
    first = false;
  }
  return o;
}

// "collective auto: hierarchical/ring in 4 chunk(s) for 93.2 MB over 64 ranks (4 per node):
// predicted allreduce tree 1.2 ms, ring ..." for the pick among `options`.
std::string choice_line(const Option& pick, const std::vector<Option>& options,
                        const CollectiveShape& cs) {
  const Shape s(cs);
  std::string algo = pick.e->name;
  if (pick.e->takes_inter) {
    char chunks[32];
    std::snprintf(chunks, sizeof chunks, " in %d chunk(s)", hierarchical_chunks(cs, pick.inter));
    algo += std::string("/") + collective_algo_name(pick.inter) + chunks;
  }
  char line[512];
  std::snprintf(line, sizeof line,
                "collective auto: %s for %.3g MB over %d ranks (%d per node): "
                "predicted allreduce",
                algo.c_str(), s.m / 1e6, s.p, s.l);
  std::string why = line;
  for (size_t i = 0; i < options.size(); ++i) {
    std::snprintf(line, sizeof line, "%s %s %.3g ms", i == 0 ? "" : ",", options[i].e->name,
                  options[i].t * 1e3);
    why += line;
  }
  return why;
}

}  // namespace

CollectiveChoice choose_collective(const CollectiveShape& cs) {
  std::vector<Option> options;
  CollectiveAlgo inter = CollectiveAlgo::ring;
  for (const CollectiveEntry& e : collective_list()) {
    if (!e.auto_candidate) continue;
    options.push_back(price(e, cs));
    if (e.takes_inter) inter = options.back().inter;
  }
  EASEL_CHECK(!options.empty());
  const Option* pick = &options[0];
  for (const Option& o : options)
    if (o.t < pick->t * 0.99) pick = &o;  // within 1%: the earlier (simpler) one
  CollectiveChoice best;
  best.algo = pick->e->algo;
  best.inter = inter;
  best.why = choice_line(*pick, options, cs);
  return best;
}

bool parse_collective_links(const char* v, LinkCost* intra, LinkCost* inter, std::string* error) {
  // Shared memory among threads: a hand-off of a few microseconds, one core's copy bandwidth.
  *intra = LinkCost{2e-6, 8e9};
  *inter = *intra;
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

bool collective_links(LinkCost* intra, LinkCost* inter, std::string* error) {
  return parse_collective_links(run_env("EASEL_COLLECTIVE_LINKS"), intra, inter, error);
}

}  // namespace easel
