// A run on a described machine's clock (`easel train --clock FILE`, one process): every group
// computes for real, and time is the described machine's, priced once at plan time by the
// performance model (model/model.hpp) for the run's net, algorithm, groups, batch and tau.
//
// Async algorithms (a centre under a lock or none: async-easgd/measgd, async-sgd/msgd,
// hogwild-*) run a deterministic schedule: before each step a group waits for its turn (the
// group of the smallest simulated time among those still in the round, ties by id; one group
// runs at a time), then advances by the step's price; an exchange with a locked centre begins at
// max(its time, the centre's free time) (the difference is its wait at the lock) and holds the
// centre for its price; a lock-free (hogwild) exchange takes its price and never queues. A group
// whose round's budget is spent leaves the schedule; at the round's end every group's clock
// stands at the latest one's (the trainer's barrier before the evaluation). So which group
// exchanges when, and each read's staleness, are those of the described node, and two runs give
// the same bits.
//
// Sync algorithms are not gated (their math does not depend on the order): a round of k
// iterations takes k steps plus, every steps_per_exchange steps, the exchange with its wait as
// the model prices them, so their accuracies are those of the run without --clock, bit for bit.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "algos/algorithm.hpp"
#include "algos/step_clock.hpp"

namespace easel {

// The prices of a run on a clock (RunPlan::clock; `train --explain` prints them).
struct ClockPrices {
  std::string file;                  // --clock as given
  std::string machine;               // the description's name
  double step_seconds = 0;           // one group's step among the others
  double exchange_seconds = 0;       // one exchange (async: with the centre, before its queue)
  double seconds_per_iteration = 0;  // the model's whole iteration
  // Sync algorithms: the comm and wait one exchange adds (the model's per iteration x
  // steps_per_exchange; overlap already taken off); 0 steps: none, the per-iteration comm and
  // wait (host copies of one group) are charged at every step.
  double sync_comm_seconds = 0, sync_wait_seconds = 0;
  int64_t steps_per_exchange = 0;
  bool scheduled = false;      // async: the groups' steps ordered by simulated time
  std::string compute_source;  // the model's: "calibrated", "described", "layer rates"
  std::string placement;       // where the groups' buffers are priced: "dram", "hbw", or why not
};

class SimClock final : public StepClock {
 public:
  SimClock(const ClockPrices& prices, int groups);

  // Before a round: every group is in the schedule again, nobody holds the turn.
  void begin_round();
  // After a round of `k` iterations that began after `done`: the round's simulated seconds
  // (async: from the latest clock before it to the latest after it; sync: priced from the
  // steps' indices); every group's clock then stands at the round's end.
  double end_round(int64_t done, int64_t k);
  // A resumed run's clock: every group's at `now` (a checkpoint's clock_seconds, taken between
  // rounds), with its simulated times so far (by local group id).
  void resume_at(double now, const std::vector<GroupTimes>& times);
  // Group g's simulated compute, comm and wait so far (preempted 0).
  GroupTimes times(int g) const;
  double now() const { return now_; }

  // The group taking its step (holding the turn); -1: none. The stall watch looks at it alone:
  // the others wait for it.
  int holder() const;
  // A group given up as stalled and restarted (it left the schedule): in this round's schedule
  // again at its own simulated time (the stall takes none).
  void enter(const Group& g);

  void await_turn(const Group& g) override;
  void step(const Group& g) override;
  void exchange(const Group& g, bool locked) override;
  void leave(const Group& g) override;

 private:
  // The group whose turn it is: the smallest (time, id) in the round; -1 when none is.
  int next_locked() const;

  ClockPrices prices_;
  mutable std::mutex mu_;
  std::condition_variable turn_cv_;
  std::vector<double> t_;  // each group's simulated time
  std::vector<char> in_;   // in this round's schedule
  std::vector<GroupTimes> times_;
  int holder_ = -1;         // the group taking its step; -1: none
  double centre_free_ = 0;  // when the locked centre is free
  double now_ = 0;          // the end of the last round
};

}  // namespace easel
