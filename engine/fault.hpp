// Fault injection for tests and the chaos benchmark, one documented variable:
// EASEL_FAULT=ACTION:TARGET@STEP (docs/FAULTS.md). ACTION: kill (SIGKILL to the process that
// holds the target), nan (its weights turn non-finite), throw (its thread throws GroupFailed,
// as a failing kernel or allocation would) or stall (its thread blocks, as a hung kernel or
// read would, until the trainer gives it up: Group::abandoned) or hang (its thread blocks for
// good, deaf to that: a thread that never comes back); throw, stall and hang for the
// algorithms whose groups can be lost only, see Algorithm::survives_group_loss; TARGET: rankR
// (that rank's first group) or groupG (numbered across the run); STEP: the target group's step
// count at which it happens, once. (A group that throws or stalls inside sync-easgd's fast
// exchanges would leave the others waiting without a deadline: they are refused there.)
// Under mpirun every rank takes rank 0's value (engine/comm/run_env.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/status.hpp"

namespace easel {

struct Fault {
  enum class Action { kill, nan, raise, stall, hang };  // raise: EASEL_FAULT's throw
  Action action = Action::kill;
  bool rank_target = true;  // rankR; else groupG
  int target = 0;
  int64_t step = 0;
};

// The fault EASEL_FAULT asks for (none when unset), or an error naming the variable.
Result<std::optional<Fault>> parse_fault(const std::string& text);
Result<std::optional<Fault>> injected_fault();

// Whether `f` targets the group of global id `group` (local id `local`) on rank `rank`.
bool fault_targets(const Fault& f, int rank, int local, int group);

}  // namespace easel
