// `easel train --explain --time-exchange N`: the exchange of the run the plan describes, timed
// as the trainer runs it. The run is built from its plan (run/run_plan.hpp) as train() builds it
// (groups, arenas, Comm, the algorithm prepared with the plan's path and collective); each group's
// gradient is left out, so that a round of the algorithm is its exchange and its update alone.
#pragma once

#include "engine/status.hpp"
#include "nets/data/dataset.hpp"
#include "run/trainer.hpp"

namespace easel::bench {

struct PlanExchangeTime {
  int rounds = 0;                   // timed (after one untimed)
  int64_t iterations = 0;           // a round: the steps between two exchanges (--tau, else 1)
  int groups = 0;                   // this process's
  std::vector<double> round_ms;     // wall time of each round, all groups together
  double comm_ms = 0, wait_ms = 0;  // per group and round: the algorithm's own accounting
};

// Builds cfg's run on `data` (as train() does: refused the same) and times `rounds` rounds of
// its algorithm on every group at once. Errors for an algorithm that exchanges nothing (sgd,
// msgd: one group).
Result<PlanExchangeTime> time_plan_exchange(const TrainConfig& cfg, DataSplit& data,
                                            const DeviceRegistry& devices, int rounds);

}  // namespace easel::bench
