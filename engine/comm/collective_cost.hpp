// The latency-bandwidth (alpha-beta) cost of each collective algorithm, as NCCL's tuner prices
// its own: what `--collective auto` chooses by, and what the performance model charges. Ranks
// are placed in blocks of ranks_per_node; a node's uplink is shared by the messages that leave
// it at once (one per node in a ring or tree round, all of a node's ranks in a
// halving-doubling round across nodes or in the hierarchical algorithm's inter-node part).
#pragma once

#include <string>

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
// allreduce is what sync-sgd and the allreduce-based centre run). hierarchical uses `inter`
// (ring or halving_doubling) across nodes.
double allreduce_seconds(CollectiveAlgo a, const CollectiveShape& s,
                         CollectiveAlgo inter = CollectiveAlgo::ring);

// The chunks the hierarchical allreduce's pipeline cuts a span of `bytes` into (nodes of equal
// size): one per 32 MB, 1 to 8. A function of the size alone, so that the summation order
// depends on the span, the rank count and the ranks per node only.
int hierarchical_chunks(double bytes);

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

// What --collective auto runs for this shape: the cheapest of tree, ring, halving-doubling and
// hierarchical (the inter-node part the cheaper of ring and halving-doubling), one predicted
// within 1% of an earlier one of that order giving way to it; `why` is one line naming the choice
// and each algorithm's predicted time.
struct CollectiveChoice {
  CollectiveAlgo algo = CollectiveAlgo::tree;
  CollectiveAlgo inter = CollectiveAlgo::ring;
  std::string why;
};
CollectiveChoice choose_collective(const CollectiveShape& s);

// The links a run's collectives cross: shared memory among one process's threads by default;
// EASEL_COLLECTIVE_LINKS="INTRA_US,INTRA_GBPS,INTER_US,INTER_GBPS" overrides them (tools/simulate
// sets it from the platform); false with a message naming the variable when it is malformed.
bool collective_links(LinkCost* intra, LinkCost* inter, std::string* error);

}  // namespace easel
