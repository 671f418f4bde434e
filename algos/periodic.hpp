// EASGD's descendants: the groups step on their own (--optimizer msgd or adamw) and every --tau
// steps meet in one allreduce of their pseudo-gradients d_i = x - w_i, where x, the anchor, is
// the weights of their last meeting; each group then applies the same outer rule to its copy of
// x (algos/outer_ops.hpp) and continues from it. With --exchange-precision bf16 or int8 the
// allreduce is the compressed ring (engine/comm/collectives/compressed_ring.hpp: every transfer
// packed, int8 with error feedback on every rounding). The files local_sgd.cpp,
// slowmo.cpp and diloco.cpp each pick a rule. Deterministic: every group computes the same x from
// the same sum, so the copies stay equal bit for bit; across MPI ranks the allreduce spans every
// group. In one process a group lost under --on-failure drop or restart stays in the lockstep as
// an absent member (it sends zeros and is not counted: the mean is over the groups present); a
// restarted one re-enters at the next meeting from the anchor with its inner state zero.
#pragma once

#include <memory>
#include <string>

#include "algos/algorithm.hpp"

namespace easel {

enum class OuterRule { average, slowmo, nesterov };

std::unique_ptr<Algorithm> make_periodic(std::string name, OuterRule rule);

// stop_here (algos/algorithm.hpp) at `step`, where the groups stand in the lockstep (a failed
// group's own Group::steps falls behind it); defined beside stop_here in algos/local_step.cpp.
bool stop_here(Run& run, const Group& g, int64_t step);

}  // namespace easel
