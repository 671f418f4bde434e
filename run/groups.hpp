// The trainer's group-level pieces: running a function on every group's own thread, building
// a group's replica (device, net, arenas, batch stream), and sharded evaluation.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <vector>

#include "algos/algorithm.hpp"
#include "run/train_config.hpp"

namespace easel {

// Runs fn(g) on every group's own thread at once and waits for all; while waiting, calls
// tick() about every 250 ms. Exceptions from a group are rethrown after all have finished.
template <typename Fn, typename Tick>
void run_on_groups(Run& run, Fn fn, Tick tick) {
  std::vector<std::future<void>> fs;
  for (auto& g : run.groups) {
    Group* gp = g.get();
    fs.push_back(gp->worker->post([gp, &fn] { fn(*gp); }));
  }
  for (auto& f : fs) {
    while (f.wait_for(std::chrono::milliseconds(250)) != std::future_status::ready)
      tick();
  }
  for (auto& f : fs)
    f.get();
}

// Builds group g's replica on its own thread (call it there: g.worker's): attaches its device,
// creates the net, the arenas (of arena_kind's kinds), the batch stream over its shard of
// `train` (its pipeline's threads on data_cpus, or on the group's own cpus when that is empty)
// and the evaluation buffers. `local` groups in this process, `total` in the run; tar shards
// read through a shuffle buffer come whole (not kept by keep_shards), each group taking its
// own shards among all `total`. Errors name what failed.
Status build_group(Group& g, const NetSpec& spec, const TrainConfig& cfg, Layout layout,
                   const Placement& placement,
                   const std::function<MemKind(BufferClass)>& arena_kind, const Dataset& train,
                   int local, int total, const std::vector<int>& data_cpus);

}  // namespace easel
