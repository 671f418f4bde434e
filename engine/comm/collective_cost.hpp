// The latency-bandwidth (alpha-beta) cost of each collective algorithm, as NCCL's tuner prices
// its own: what `--collective auto` chooses by, and what the performance model charges. Ranks
// are placed in blocks of ranks_per_node; a node's uplink is shared by the messages that leave
// it at once (one per node in a ring or tree round, all of a node's ranks in a
// halving-doubling round across nodes or in the hierarchical algorithm's inter-node part).
#pragma once

#include <string>
#include <vector>

#include "engine/comm/comm.hpp"

namespace easel {

struct LinkCost {
  double latency_s = 2e-6;
  double bytes_per_s = 10e9;
};

struct CollectiveShape {
  double bytes = 0;  // the span one allreduce sums
  int ranks = 1;
  int ranks_per_node = 1;  // in blocks: ranks [k L, (k+1) L) share node k
  LinkCost intra;          // between ranks of one node
  LinkCost inter;          // a node's uplink
};

// Predicted seconds of one allreduce (reduce + broadcast cost the same order of data: an
// allreduce is what sync-sgd and the allreduce-based centre run): its row's formula
// (engine/comm/collectives/list.cpp), auto's choice for auto. hierarchical uses `inter`
// (ring or halving_doubling) across nodes.
double allreduce_seconds(CollectiveAlgo a, const CollectiveShape& s,
                         CollectiveAlgo inter = CollectiveAlgo::ring);

// Each algorithm's allreduce formula, following its file step by step: its row's
// allreduce_seconds, for more than one rank and a positive span. `inter`: hierarchical's part
// across nodes (the flat ones ignore it). The ring and halving-doubling also give the bytes of
// each step of their allreduce among `ranks` (one message per rank a step), as hierarchical's
// pipeline replays its part across nodes.
namespace tree {
double allreduce_cost(const CollectiveShape& s, CollectiveAlgo inter);
}
namespace ring {
double allreduce_cost(const CollectiveShape& s, CollectiveAlgo inter);
std::vector<double> allreduce_step_bytes(double bytes, int ranks);
}  // namespace ring
namespace halving_doubling {
double allreduce_cost(const CollectiveShape& s, CollectiveAlgo inter);
std::vector<double> allreduce_step_bytes(double bytes, int ranks);
}  // namespace halving_doubling
namespace hierarchical {
double allreduce_cost(const CollectiveShape& s, CollectiveAlgo inter);
}

// The chunks the hierarchical allreduce's pipeline cuts a span of `bytes` into (nodes of equal
// size, ranks_per_node of them): the count from 1 to kMaxHierarchicalChunks that the cost model
// prices fastest over the run's links (collective_links), so that a mid-size span pipelines too.
constexpr int kMaxHierarchicalChunks = 32;
int hierarchical_chunks(double bytes, int ranks, int ranks_per_node, CollectiveAlgo inter);
int hierarchical_chunks(const CollectiveShape& s, CollectiveAlgo inter);

// The hierarchical allreduce's pipeline as streams of steps (Transport::run_streams), which
// engine/comm/collectives/hierarchical.cpp runs and the cost model replays: C chunks, each with
// na steps inside the node (phase 0, A: the reduce-scatter), nb across nodes (phase 1, B: the
// allreduce of the rank's share), nd inside (phase 2, D: the all-gather). Stream 0 holds every
// A in chunk order, stream 1 every D, streams 2 .. 2 + (C+1)/2 the B's in lanes of two chunks
// (chunk c in lane c mod the lanes), so that several chunks cross nodes at once and one's
// latency hides behind another's bytes; a B's first step waits for its chunk's A, a D's for its
// chunk's B.
struct PlanStep {
  int phase = 0, chunk = 0, index = 0;
  int after_stream = -1, after_count = 0;
};
struct HierarchicalPlan {
  std::vector<std::vector<PlanStep>> streams;
};
HierarchicalPlan hierarchical_plan(int chunks, int na, int nb, int nd);

// How the ring broadcasts `bytes` from one rank: 0 for the root's scatter and an all-gather (van
// de Geijn: 2 (p-1)/p of the span through each link), or K > 0 for a pipelined chain along the
// ring in K pieces (K + p - 2 steps of bytes / K: the span once through each link), whichever
// the links (collective_links) predict faster.
int ring_broadcast_pieces(double bytes, int ranks);

// Predicted seconds of a reduce into one rank plus a broadcast from it (sync-easgd's master):
// the tree's is its allreduce; the bandwidth-optimal algorithms add the root's gather of the
// reduced chunks and its scatter before the broadcast's all-gather, 2 (p-1)/p of the span
// through the root's link.
double reduce_broadcast_seconds(CollectiveAlgo a, const CollectiveShape& s,
                                CollectiveAlgo inter = CollectiveAlgo::ring);

// What --collective auto runs for this shape: the cheapest of the rows auto weighs (tree, ring,
// halving-doubling and hierarchical, the inter-node part the cheapest of the rows that can be
// one: ring, then halving-doubling), one predicted within 1% of an earlier one of that order
// giving way to it; `why` is one line naming the choice and each algorithm's predicted time.
struct CollectiveChoice {
  CollectiveAlgo algo = CollectiveAlgo::tree;
  CollectiveAlgo inter = CollectiveAlgo::ring;
  std::string why;
};
CollectiveChoice choose_collective(const CollectiveShape& s);
// `a` itself with `inter` (and no why), or for auto choose_collective(s): the one place auto
// becomes an algorithm.
CollectiveChoice resolve_collective(CollectiveAlgo a, const CollectiveShape& s,
                                    CollectiveAlgo inter = CollectiveAlgo::ring);

// The links a run's collectives cross: shared memory among one process's threads by default;
// EASEL_COLLECTIVE_LINKS="INTRA_US,INTRA_GBPS,INTER_US,INTER_GBPS" overrides them (tools/simulate
// sets it from the platform); under MPI rank 0's value (engine/comm/run_env.hpp), since the links
// decide chunk counts, scatter streams and auto's algorithm, which every rank must share. False
// with a message naming the variable when it is malformed.
bool collective_links(LinkCost* intra, LinkCost* inter, std::string* error);
// The same for the value `v` (nullptr or "": the defaults).
bool parse_collective_links(const char* v, LinkCost* intra, LinkCost* inter, std::string* error);

}  // namespace easel
