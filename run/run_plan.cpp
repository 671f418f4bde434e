#include "run/run_plan.hpp"

#include "algos/sync_easgd.hpp"
#include "engine/worker.hpp"
#include "nets/graph.hpp"
#include "run/comm_list.hpp"
#include "run/train_run.hpp"

namespace easel {

namespace {

// The --exchange value that runs `path` (the algorithm is handed the plan's path, not auto).
SyncExchange exchange_for(SyncExchangePath path) {
  switch (path) {
    case SyncExchangePath::partitioned:
      return SyncExchange::partitioned;
    case SyncExchangePath::mirrored:
      return SyncExchange::mirrored;
    case SyncExchangePath::comm:
      break;
  }
  return SyncExchange::comm;
}

}  // namespace

Status resolve_plan(TrainRun& t, const NetCost& cost) {
  RunPlan& r = t.resolved;
  r.params = cost.params;
  r.arena_floats = cost.arena_floats;
  r.net_state = cost.state_floats > 0;
  r.resident = resident_for(t);
  if (takes_sync_exchange(t.algo->name())) {
    EASEL_ASSIGN_OR_RETURN(r.exchange,
                           choose_sync_exchange(t.run.params.exchange,
                                                sync_switches(t.run.params, t.ranks, r.resident),
                                                cost.state_floats > 0, t.p));
    t.run.params.exchange = exchange_for(r.exchange->path);
  }
  // The Comm as make_comm() makes it (a device kind's Comm takes its devices when made).
  const CommNeeds needs = comm_needs(t, cost.arena_floats, {});
  EASEL_ASSIGN_OR_RETURN(r.collective, pick_collective(needs));
  r.comm = &choose_comm(needs);
  const bool fast = r.exchange && r.exchange->path != SyncExchangePath::comm;
  r.uses_collectives = t.world != nullptr || (t.algo->uses_collectives() && !fast);
  r.stall_seconds = stall_timeout_seconds();
  return {};
}

Result<RunPlan> explain_run(const TrainConfig& cfg, DataSplit& data,
                            const DeviceRegistry& devices) {
  TrainObserver none;
  TrainRun t(cfg, &none);
  EASEL_RETURN_IF_ERROR(plan_new_run(t, data, devices));  // as train() plans it

  RunPlan r = t.resolved;
  r.algorithm = r.row->name;
  r.algorithm_summary = r.row->summary;
  r.net = t.spec.name;
  r.data = cfg.data;
  r.train_images = t.train_count;
  r.test_images = data.test.count;
  r.channels = data.train.channels;
  r.height = data.train.height;
  r.width = data.train.width;
  r.ranks = t.ranks;
  r.groups_per_rank = t.local;
  r.groups = t.p;
  r.plan = t.plan;
  r.batch = cfg.batch;
  r.iterations = t.total;
  r.iterations_per_epoch = t.per_epoch;
  r.eval_every = t.eval_every;
  r.device = t.dev_req.kind->name;
  r.placement = placement_to_string(cfg.placement);
  return r;
}

}  // namespace easel
