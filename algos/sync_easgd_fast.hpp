// sync-easgd's single-process fast exchanges (algos/sync_easgd.cpp holds the algorithm, its
// Comm path and its overlap path; these replace the Comm path where they can, with the same
// numbers bit for bit). Both run in one process on the CPU, with --reduce tree, --pack single,
// --collective tree and --overlap off; they order the groups by counters, not barriers, so a
// group waits only for one about a whole step behind:
//   partitioned (any P): each group sums its 1/P slice of S = sum_i W^i and updates that slice
//     of Wc into a second centre buffer, and takes its elastic step from the old Wc;
//   mirrored (P <= 2): each group keeps its own copy of Wc and updates all of it from every
//     group's weights, fused with its elastic step, in one pass.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "algos/algorithm.hpp"

namespace easel {

// One of the fast exchanges, as SyncEasgd drives it. At each exchanging step group g's thread
// calls publish() before its gradient and exchange() after it; every group makes the same
// exchanges in the same order (the sync algorithms' contract).
class FastExchange {
 public:
  virtual ~FastExchange() = default;
  // Its buffers, derived from the groups' weights and run.centre as they are now (the initial
  // or the restored values); on the owning group's thread where a group owns one.
  virtual Status prepare(Run& run) = 0;
  // g's weights for this exchange are final (called before g computes its gradient).
  virtual void publish(Run& run, Group& g) = 0;
  // The exchange, with g's gradient in g.diff: g's elastic step (SGD with --momentum 0, else
  // momentum --momentum-form) from Wc, and Wc <- Wc + alpha*(S - P*Wc). Returns when g's
  // weights are updated; the centre is whole once every group has made this exchange.
  virtual void exchange(Run& run, Group& g, float lr, float alpha) = 0;
  // Wc between rounds (every group has made the same number of exchanges).
  virtual const float* centre(Run& run) const = 0;
};

std::unique_ptr<FastExchange> make_partitioned_exchange();
// Requires run.size() <= 2 (prepare() refuses more).
std::unique_ptr<FastExchange> make_mirrored_exchange();

// ---- the kernels of the two exchanges (one pass each, chunk by chunk) ----

// Sync EASGD's centre update over the slice [lo, hi) of the arena, in one pass, as each group
// runs it in the partitioned exchange: S = the sum of the P arenas `w` in the shared-memory
// Comm's binomial-tree order (pairs (v, v+1), then (v, v+2), ...: equal bit for bit to its
// reduce_sum), then c_new = c_old + alpha*(S - P*c_old) (elastic_centre_from). Works in chunks of
// kCentreChunk floats; tmp holds P + 1 chunks (resized here, once). With P > 1 the stores to
// c_new are streamed, since every group reads them next (stream_store).
inline constexpr int64_t kCentreChunk = 256;
void centre_update_slice(std::span<const float* const> w, const float* c_old, float* c_new,
                         float alpha, int64_t lo, int64_t hi, std::vector<float>& tmp);
// Sync EASGD's whole exchange for one group that keeps its own copy of the centre (the
// mirrored exchange: every group updates the whole centre itself, the same bits everywhere), in
// one pass over the arena, chunk by chunk: S = the tree-order sum of w_all (the P groups'
// weights at this exchange; w_all[own] holds the same values as w), then the elastic step of
// w in place from the old c (v == nullptr: SGD, else momentum delta), then c <- c +
// alpha*(S - P*c) in place; the new w is also streamed to w_copy when it is not null (the copy
// the other groups read at the next exchange). The same bits as centre_update_slice and the
// elastic steps. tmp holds P chunks (resized here, once).
void mirrored_exchange(std::span<const Segment> segs, std::span<const float* const> w_all, float* w,
                       float* w_copy, const float* g, float* v, float* c, float lr, float delta,
                       float wd, float alpha, bool nesterov, std::vector<float>& tmp);
// Group `id`'s slice [first, second) of an n-float arena split among p groups, starting on
// kArenaAlign boundaries (64 bytes); the last group takes the remainder.
std::pair<int64_t, int64_t> centre_slice(int64_t n, int p, int id);

}  // namespace easel
