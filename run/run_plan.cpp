#include "run/run_plan.hpp"

#include "algos/sync_easgd.hpp"
#include "engine/worker.hpp"
#include "nets/graph.hpp"
#include "run/comm_list.hpp"
#include "run/train_run.hpp"

namespace easel {

Result<RunPlan> explain_run(const TrainConfig& cfg, DataSplit& data,
                            const DeviceRegistry& devices) {
  if (data.train.count == 0 || data.test.count == 0)
    return invalid_argument("--data: the training and test sets must not be empty");
  TrainObserver none;
  TrainRun t(cfg, &none);
  EASEL_ASSIGN_OR_RETURN(t.algo, make_algorithm(cfg.algo));
  EASEL_ASSIGN_OR_RETURN(t.dev_req, bind_device(cfg.device, devices));
  // The groups, the run's length and the memory fit, as train() plans them (refused the same).
  EASEL_RETURN_IF_ERROR(plan_run(t, data, devices));
  t.run.params = make_params(cfg, t.total, t.p);
  EASEL_ASSIGN_OR_RETURN(const NetCost cost, net_cost(t.spec));

  RunPlan r;
  r.algorithm = t.algo->name();
  if (const AlgoEntry* e = find_algo(r.algorithm)) r.algorithm_summary = e->summary;
  r.net = t.spec.name;
  r.params = cost.params;
  r.arena_floats = cost.arena_floats;
  r.net_state = cost.state_floats > 0;
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
  r.resident = resident_for(t);
  if (takes_sync_exchange(r.algorithm)) {
    EASEL_ASSIGN_OR_RETURN(
        const SyncExchangeChoice choice,
        choose_sync_exchange(t.run.params.exchange,
                             sync_switches(t.run.params, t.ranks, r.resident), r.net_state, t.p));
    r.exchange_path = sync_exchange_path_name(choice.path);
    r.exchange_why = choice.why;
  }
  // The Comm as make_comm() picks it (a device kind's Comm takes its devices when made).
  const CommNeeds needs = comm_needs(t, cost.arena_floats, {});
  EASEL_ASSIGN_OR_RETURN(const CollectivePick pick, pick_collective(needs));
  r.comm = choose_comm(needs).name;
  r.collective = collective_algo_name(pick.algo);
  r.collective_why = pick.why;
  r.uses_collectives =
      t.world != nullptr || (t.algo->uses_collectives() && r.exchange_path != "partitioned" &&
                             r.exchange_path != "mirrored");
  r.placement = placement_to_string(cfg.placement);
  r.fit = t.fit;
  r.stall_seconds = stall_timeout_seconds();
  return r;
}

}  // namespace easel
