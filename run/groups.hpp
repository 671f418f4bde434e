// The trainer's group-level pieces: running a function on every group's own thread, building
// a group's replica (device, net, arenas, batch stream), and sharded evaluation.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <utility>
#include <vector>

#include "algos/algorithm.hpp"
#include "engine/worker.hpp"
#include "run/train_config.hpp"

namespace easel {

// Whether group g was given up as stalled while its thread had not come back (Group::abandoned,
// in_round; StallWatch): no work is posted to it, and it is not waited for past a second deadline.
inline bool given_up(const Group& g) {
  return g.abandoned.load(std::memory_order_acquire) && g.in_round.load(std::memory_order_acquire);
}

// Runs fn(g) on every group's own thread at once and waits for all; while waiting, calls
// tick() about every 250 ms. Exceptions from a group are rethrown after all have finished. A
// group given up (given_up) gets no work; one given up while it runs fn is waited for one more
// stall deadline (a restarted one comes back at once), then left: dropped (Group::dropped), its
// thread may run fn (a shared copy) later, for it alone.
template <typename Fn, typename Tick>
void run_on_groups(Run& run, Fn fn, Tick tick) {
  const auto shared = std::make_shared<Fn>(std::move(fn));
  std::vector<std::pair<Group*, std::future<void>>> fs;
  for (auto& g : run.groups) {
    Group* gp = g.get();
    if (!given_up(*gp)) fs.emplace_back(gp, gp->worker->post([gp, shared] { (*shared)(*gp); }));
  }
  for (auto& [gp, f] : fs) {
    double left_at = -1;  // when it is left, once given up
    while (f.wait_for(std::chrono::milliseconds(250)) != std::future_status::ready) {
      if (!given_up(*gp)) {
        left_at = -1;
      } else if (left_at < 0) {
        left_at = now_seconds() + stall_timeout_seconds();
      } else if (now_seconds() >= left_at) {
        gp->dropped = true;  // read by its thread when it comes back (never restarted)
        f = {};
        break;
      }
      tick();
    }
  }
  for (auto& [gp, f] : fs)
    if (f.valid()) f.get();
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
