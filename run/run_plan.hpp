// What a run will do, resolved before anything is allocated, trained or written: `easel train
// --explain` prints it. The trainer resolves each part by the same function (plan_run for the
// groups and the memory fit, choose_sync_exchange for sync-easgd's path, pick_collective and
// choose_comm for the Comm), so what the plan says is what the run does.
#pragma once

#include <string>
#include <vector>

#include "run/fit.hpp"
#include "run/trainer.hpp"

namespace easel {

struct RunPlan {
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
  bool resident = false;  // the groups' weights stay on their GPUs
  // sync-easgd's exchange path and why (empty for the other algorithms).
  std::string exchange_path, exchange_why;
  // The Comm among the groups (comm_list.hpp's entry) and the host collective it runs, with
  // why --collective auto took it; uses_collectives: the algorithm runs it at all.
  std::string comm, collective, collective_why;
  bool uses_collectives = false;
  std::string placement;
  Fit fit;
  double stall_seconds = 0;  // a group waiting this long stops the run (EASEL_STALL_TIMEOUT)
};

// The plan of cfg's run on `data` (its shape and size; this rank's shards kept).
Result<RunPlan> explain_run(const TrainConfig& cfg, DataSplit& data, const DeviceRegistry& devices);

}  // namespace easel
