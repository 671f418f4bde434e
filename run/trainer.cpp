// train(): the pieces of run/train_run.hpp in order, and the plan of a configuration's groups.
#include "run/trainer.hpp"

#include <cmath>

#include "run/train_run.hpp"

namespace easel {

Result<GroupPlan> plan_groups(const Algorithm& algo, const TrainConfig& cfg, const Topology& topo,
                              const DeviceRegistry& devices) {
  EASEL_ASSIGN_OR_RETURN(DeviceRequest dev, bind_device(cfg.device, devices));
  PlanRequest req = cfg.plan;
  if (dev.gpu) {
    // One worker group per GPU; its host thread (plus OpenMP team) gathers batches and runs
    // whatever the algorithm does on the host.
    auto units = dev.kind->unit_count();
    if (!units.ok())
      return unavailable("--device " + device_text(cfg.device) + ": " + units.status().message());
    std::vector<int> ordinals = dev.ordinals;
    if (ordinals.empty())  // every GPU; a one-group algorithm the first
      for (int u = 0; u < *units && u < algo.max_groups(); ++u)
        ordinals.push_back(u);
    for (int o : ordinals)
      if (o >= *units)
        return invalid_argument("--device " + device_text(cfg.device) + ": there is no GPU " +
                                std::to_string(o) + " (this machine has " + std::to_string(*units) +
                                ")");
    const int n = static_cast<int>(ordinals.size());
    if (!req.groups.is_auto() && req.groups != GroupCount::of(n))
      return invalid_argument("--groups " + req.groups.text() + ": with --device " +
                              device_text(cfg.device) + " each listed GPU is one worker group (" +
                              std::to_string(n) + " GPU(s)" +
                              (algo.max_groups() == 1 && dev.ordinals.empty()
                                   ? ": " + algo.name() + " runs on the first)"
                                   : ")"));
    req.groups = GroupCount::of(n);
    if (req.threads_per_group == 0 && req.threads == 0 && req.cpu_lists.empty())
      req.threads_per_group = std::max(1, topo.core_count() / n);
    if (n > topo.core_count()) req.oversubscribe = true;  // host threads mostly wait on GPUs
    EASEL_ASSIGN_OR_RETURN(GroupPlan plan, make_plan(topo, req));
    for (size_t i = 0; i < plan.groups.size(); ++i)
      plan.groups[i].gpu = ordinals[i];
    EASEL_RETURN_IF_ERROR(check_group_count(algo, n));
    return plan;
  }
  if (algo.max_groups() == 1 && req.groups.is_auto() && req.cpu_lists.empty()) {
    req.groups = GroupCount::of(1);
    if (req.threads_per_group == 0)
      req.threads_per_group = req.threads > 0 ? req.threads : topo.core_count();
  }
  EASEL_ASSIGN_OR_RETURN(GroupPlan plan, make_plan(topo, req));
  // Refused here too, so that `easel topology` shows no plan that `easel train` would refuse.
  EASEL_RETURN_IF_ERROR(check_group_count(algo, static_cast<int>(plan.groups.size())));
  EASEL_RETURN_IF_ERROR(check_hbw_placement(topo, host_placement(cfg)));  // cache mode: no hbw node
  return plan;
}

Status plan_new_run(TrainRun& t, DataSplit& data, const DeviceRegistry& devices) {
  EASEL_ASSIGN_OR_RETURN(t.resolved.row, algo_row(t.cfg.algo));
  t.algo = t.resolved.row->make();
  EASEL_ASSIGN_OR_RETURN(t.dev_req, bind_device(t.cfg.device, devices));
  if (data.train.count == 0 || data.test.count == 0)
    return invalid_argument("--data: the training and test sets must not be empty");
  return plan_run(t, data, devices);
}

Status set_up_run(TrainRun& t, DataSplit& data, const DeviceRegistry& devices,
                  const Checkpoint* resume) {
  // Across MPI ranks each step's refusal is agreed before the next collective (the weights'
  // broadcast, the trace's clock, the plan's gather), so that the ranks end together.
  Status st = plan_new_run(t, data, devices);
  if (st.ok()) st = build_run(t, data.train);
  EASEL_RETURN_IF_ERROR(agreed_outcome(t, st));
  st = init_weights(t);
  if (!t.cfg.trace.empty()) start_trace(t);
  if (st.ok() && resume) st = restore_from(t, *resume);
  if (st.ok()) st = prepare_algorithm(t, resume);
  return agreed_outcome(t, st);
}

Result<TrainSummary> train(const TrainConfig& cfg, DataSplit& data, TrainObserver* obs,
                           const DeviceRegistry& devices, const Checkpoint* resume) {
  TrainObserver null_observer;
  if (!obs) obs = &null_observer;
  const double t_setup = now_seconds();
  TrainRun t(cfg, obs);
  EASEL_RETURN_IF_ERROR(set_up_run(t, data, devices, resume));

  TrainSummary sum;
  describe_run(t, sum.info);
  EASEL_RETURN_IF_ERROR(t.report->on_start(sum.info));
  obs->on_setup(t.run);
  sum.setup_seconds = now_seconds() - t_setup;
  sum.target_accuracy = cfg.target_accuracy;
  EASEL_RETURN_IF_ERROR(run_rounds(t, data.test, resume, sum));
  finish_summary(t, sum);
  return sum;  // t's destructor finishes the algorithm and takes the run down
}

}  // namespace easel
