// The trainer's watch over its groups' steps in one process (docs/FAULTS.md, "Stalls"): a group
// whose round runs but which did no step within the stall deadline (stall_timeout_seconds(), the
// run's RunPlan::stall_seconds) is stalled, even where nobody waits for it (the async centre
// algorithms' groups meet only at the centre).
#pragma once

#include <cstdint>
#include <vector>

#include "run/train_run.hpp"

namespace easel {

class StallWatch {
 public:
  // At a round's start, before the groups run.
  explicit StallWatch(TrainRun& t);
  // On the trainer's thread while the round runs (run_on_groups' tick). The stalled group idle
  // the longest, one a call, is given up (Group::abandoned: it throws Abandoned where it comes
  // back, before it writes into the centre). Under --on-failure drop or restart its failure is
  // recorded (record_group_failure: "stalled: ...") and the others go on; drop also marks it
  // dropped. Under stop the run's stall is declared (declare_stall: exit 4) and the others end the
  // round (Run::failed). On --clock only the group holding the turn is watched (the others wait
  // for it), and a given-up one leaves the schedule at once (SimClock::leave).
  // Only for the algorithms that survive a lost group, in one process: where the groups wait for
  // each other (and across MPI ranks) their bounded waits name a stall.
  void check();

 private:
  void give_up(Group& g, double idle);

  TrainRun& t_;
  std::vector<int64_t> steps_;  // each group's steps when last seen to change
  std::vector<double> since_;   // and when
};

}  // namespace easel
