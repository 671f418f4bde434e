// What a run will do, resolved before anything is allocated, trained or written, and then
// executed: plan_run (run/train_run.hpp) resolves it into the run being trained (TrainRun::
// resolved), the trainer builds what it says and decides nothing again, and `easel train
// --explain` prints the same value. Each decision is made by one function: plan_groups for the
// groups, compute_fit for the memory, choose_sync_exchange for sync-easgd's path,
// pick_collective and choose_comm for the Comm.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "algos/sync_easgd.hpp"
#include "run/comm_list.hpp"
#include "run/fit.hpp"
#include "run/sim_clock.hpp"
#include "run/trainer.hpp"

namespace easel {

struct RunPlan {
  // The algorithm's row (algos/list.cpp), looked up once from --algo: the run's algorithm is
  // made from it and the trainer reads its facts (phases, bytes exchanged) here.
  const AlgoEntry* row = nullptr;
  std::string algorithm, algorithm_summary;
  std::string net;
  int64_t params = 0, arena_floats = 0;
  bool net_state = false;  // running statistics (batch norm's) in the arena
  std::string data;
  int64_t train_images = 0, test_images = 0, channels = 0, height = 0, width = 0;
  int ranks = 1, groups_per_rank = 1, groups = 1;
  GroupPlan plan;  // this rank's groups: cores, memory nodes, device
  int64_t batch = 0, iterations = 0, iterations_per_epoch = 0, eval_every = 0;
  std::string device;
  bool resident = false;  // the groups' weights stay on their GPUs (Run::resident)
  // sync-easgd's exchange path and why (none for the other algorithms).
  std::optional<SyncExchangeChoice> exchange;
  // The Comm among the groups (comm_list.hpp's entry) and the host collective it runs, with
  // why --collective auto took it; uses_collectives: the algorithm runs it at all.
  const CommEntry* comm = nullptr;
  CollectivePick collective;
  bool uses_collectives = false;
  std::string placement;
  Fit fit;
  // The stall deadline: a group without a step, or waiting for the others, this long is stalled
  // (docs/FAULTS.md); its source: "model" (with the prediction it came from), "--stall-timeout",
  // "EASEL_STALL_TIMEOUT" or "default" (with why the model gave none).
  double stall_seconds = 0;
  std::string stall_source, stall_why;
  // --clock: the described machine's prices of this run's step and exchange (price_clock).
  std::optional<ClockPrices> clock;
};

// The plan of cfg's run on `data` (its shape and size; this rank's shards kept).
Result<RunPlan> explain_run(const TrainConfig& cfg, DataSplit& data, const DeviceRegistry& devices);

}  // namespace easel
