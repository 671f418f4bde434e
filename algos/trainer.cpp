// train(): the parse block, then the pieces of algos/train_run.hpp in order. Also the checks of
// a configuration and the plan of its groups.
#include "algos/trainer.hpp"

#include <cmath>

#include "algos/train_run.hpp"

namespace easel {

namespace {

Status check_range(const char* flag, double v, double lo, double hi, bool lo_open = false) {
  if (!std::isfinite(v) || v > hi || (lo_open ? v <= lo : v < lo)) {
    return invalid_argument(std::string(flag) + ": " + std::to_string(v) + " is out of range " +
                            (lo_open ? "(" : "[") + std::to_string(lo) + ", " + std::to_string(hi) +
                            "]");
  }
  return {};
}

// auto: nhwc on the CPU (oneDNN's brgemm convolutions, PERF-NOTES.md), nchw on GPUs (cuDNN's
// native fp32 layout).
Result<Layout> parse_layout(const std::string& s, bool gpu) {
  if (s == "auto") return gpu ? Layout::nchw : Layout::nhwc;
  if (s == "nchw") return Layout::nchw;
  if (s == "nhwc") return Layout::nhwc;
  return invalid_argument("--layout: unknown layout '" + s + "' (accepted: auto, nchw, nhwc)");
}

Result<AlgoParams> make_params(const TrainConfig& c, int64_t total_iterations, int groups) {
  AlgoParams p;
  EASEL_ASSIGN_OR_RETURN(p.lr.policy, parse_lr_policy(c.lr_policy));
  p.lr.base = c.lr;
  p.lr.gamma = c.lr_gamma;
  p.lr.power = c.lr_power;
  p.lr.stepsize = c.lr_stepsize;
  p.lr.max_iter = total_iterations;
  EASEL_RETURN_IF_ERROR(validate(p.lr));
  p.momentum = static_cast<float>(c.momentum);
  p.weight_decay = static_cast<float>(c.weight_decay);
  p.rho = static_cast<float>(c.rho);
  p.alpha = static_cast<float>(c.alpha);
  if (c.alpha < 0 && c.rho < 0) p.alpha = 0.9f / static_cast<float>(groups);  // beta = 0.9
  p.tau = static_cast<int>(c.tau);
  if (c.momentum_form == "nesterov") {
    p.nesterov = true;
  } else if (c.momentum_form == "heavy-ball") {
    p.nesterov = false;
  } else {
    return invalid_argument("--momentum-form: '" + c.momentum_form +
                            "' (accepted: nesterov, heavy-ball)");
  }
  if (c.reduce == "tree")
    p.reduce = ReduceMode::tree;
  else if (c.reduce == "serial")
    p.reduce = ReduceMode::serial;
  else
    return invalid_argument("--reduce: '" + c.reduce + "' (accepted: tree, serial)");
  if (c.pack == "single")
    p.pack = PackMode::single;
  else if (c.pack == "per-layer")
    p.pack = PackMode::per_layer;
  else
    return invalid_argument("--pack: '" + c.pack + "' (accepted: single, per-layer)");
  if (c.overlap == "on")
    p.overlap = true;
  else if (c.overlap == "off")
    p.overlap = false;
  else
    return invalid_argument("--overlap: '" + c.overlap + "' (accepted: on, off)");
  if (c.collective == "tree")
    p.collective = CollectiveAlgo::tree;
  else if (c.collective == "ring")
    p.collective = CollectiveAlgo::ring;
  else
    return invalid_argument("--collective: '" + c.collective + "' (accepted: tree, ring)");
  return p;
}
}  // namespace

Result<GroupPlan> plan_groups(const TrainConfig& cfg, const Topology& topo,
                              const DeviceRegistry& devices) {
  EASEL_ASSIGN_OR_RETURN(std::unique_ptr<Algorithm> algo, make_algorithm(cfg.algo));
  EASEL_ASSIGN_OR_RETURN(DeviceRequest dev, parse_device(cfg.device, devices));
  PlanRequest req = cfg.plan;
  if (dev.gpu) {
    // One worker group per GPU; its host thread (plus OpenMP team) gathers batches and runs
    // whatever the algorithm does on the host.
    auto units = dev.kind->unit_count();
    if (!units.ok()) return unavailable("--device " + cfg.device + ": " + units.status().message());
    std::vector<int> ordinals = dev.ordinals;
    if (ordinals.empty())  // every GPU; a one-group algorithm the first
      for (int u = 0; u < *units && u < algo->max_groups(); ++u)
        ordinals.push_back(u);
    for (int o : ordinals)
      if (o >= *units)
        return invalid_argument("--device " + cfg.device + ": there is no GPU " +
                                std::to_string(o) + " (this machine has " + std::to_string(*units) +
                                ")");
    const int n = static_cast<int>(ordinals.size());
    if (req.groups != "auto" && req.groups != std::to_string(n))
      return invalid_argument("--groups " + req.groups + ": with --device " + cfg.device +
                              " each GPU is one worker group (" + std::to_string(n) + " GPU(s)" +
                              (algo->max_groups() == 1 && dev.ordinals.empty()
                                   ? ": " + algo->name() + " runs on the first)"
                                   : ")"));
    req.groups = std::to_string(n);
    if (req.threads_per_group == 0 && req.threads == 0 && req.cpu_lists.empty())
      req.threads_per_group = std::max(1, topo.core_count() / n);
    if (n > topo.core_count()) req.oversubscribe = true;  // host threads mostly wait on GPUs
    EASEL_ASSIGN_OR_RETURN(GroupPlan plan, make_plan(topo, req));
    for (size_t i = 0; i < plan.groups.size(); ++i)
      plan.groups[i].gpu = ordinals[i];
    EASEL_RETURN_IF_ERROR(check_group_count(*algo, n));
    return plan;
  }
  if (algo->max_groups() == 1 && req.groups == "auto" && req.cpu_lists.empty()) {
    req.groups = "1";
    if (req.threads_per_group == 0)
      req.threads_per_group = req.threads > 0 ? req.threads : topo.core_count();
  }
  EASEL_ASSIGN_OR_RETURN(GroupPlan plan, make_plan(topo, req));
  // Refused here too, so that `easel topology` shows no plan that `easel train` would refuse.
  EASEL_RETURN_IF_ERROR(check_group_count(*algo, static_cast<int>(plan.groups.size())));
  return plan;
}

Status validate_config(const TrainConfig& c) {
  if (c.batch < 1 || c.batch > 65536)
    return invalid_argument("--batch: " + std::to_string(c.batch) + " is out of range [1, 65536]");
  if (c.iterations < 0) return invalid_argument("--iterations: must be >= 0");
  if (c.iterations == 0) EASEL_RETURN_IF_ERROR(check_range("--epochs", c.epochs, 0, 1e6, true));
  EASEL_RETURN_IF_ERROR(check_range("--momentum", c.momentum, 0, 1));
  if (c.momentum >= 1) return invalid_argument("--momentum: must be < 1");
  EASEL_RETURN_IF_ERROR(check_range("--weight-decay", c.weight_decay, 0, 1));
  if (c.rho != -1) EASEL_RETURN_IF_ERROR(check_range("--rho", c.rho, 0, 1e3));
  if (c.alpha != -1) EASEL_RETURN_IF_ERROR(check_range("--alpha", c.alpha, 0, 1));
  if (c.alpha != -1 && c.rho != -1)
    return invalid_argument(
        "--alpha and --rho: give one (--alpha fixes the elastic step, --rho "
        "makes it lr * rho)");
  if (c.tau < 1 || c.tau > 1000000) return invalid_argument("--tau: must be in [1, 1000000]");
  EASEL_RETURN_IF_ERROR(check_range("--target-accuracy", c.target_accuracy, 0, 1));
  if (c.eval_every < 0) return invalid_argument("--eval-every: must be >= 0");
  EASEL_RETURN_IF_ERROR(parse_layout(c.layout, false).status());
  EASEL_RETURN_IF_ERROR(parse_impl_choice(c.impl).status());
  EASEL_RETURN_IF_ERROR(parse_precision(c.precision).status());
  EASEL_RETURN_IF_ERROR(parse_placement(c.placement).status());
  EASEL_RETURN_IF_ERROR(make_algorithm(c.algo).status());
  EASEL_RETURN_IF_ERROR(make_params(c, 1, 1).status());
  EASEL_ASSIGN_OR_RETURN(DeviceRequest dev, parse_device(c.device));
  if (!dev.gpu) {
    const Placement pl = parse_placement(c.placement).value();
    for (MemKind k : pl.kind)
      if (k == MemKind::pinned_host || k == MemKind::device)
        return invalid_argument("--placement " + c.placement + ": " + mem_kind_name(k) +
                                " memory belongs to a GPU; it needs --device cuda");
  }
  return {};
}

Result<TrainSummary> train(const TrainConfig& cfg, DataSplit& data, TrainObserver* obs,
                           const DeviceRegistry& devices, const Checkpoint* resume) {
  TrainObserver null_observer;
  if (!obs) obs = &null_observer;
  const double t_setup = now_seconds();
  EASEL_RETURN_IF_ERROR(validate_config(cfg));
  EASEL_ASSIGN_OR_RETURN(std::unique_ptr<Algorithm> algo, make_algorithm(cfg.algo));
  EASEL_ASSIGN_OR_RETURN(DeviceRequest dev_req, parse_device(cfg.device, devices));
  EASEL_ASSIGN_OR_RETURN(Layout layout, parse_layout(cfg.layout, dev_req.gpu));
  EASEL_ASSIGN_OR_RETURN(ImplChoice impl, parse_impl_choice(cfg.impl));
  EASEL_ASSIGN_OR_RETURN(Precision precision, parse_precision(cfg.precision));
  EASEL_ASSIGN_OR_RETURN(Placement placement, parse_placement(cfg.placement));
  if (data.train.count == 0 || data.test.count == 0)
    return invalid_argument("--data: the training and test sets must not be empty");

  TrainRun t(cfg, obs);
  t.algo = std::move(algo);
  t.dev_req = std::move(dev_req);
  t.layout = layout;
  t.impl = impl;
  t.precision = precision;
  t.placement = placement;
  EASEL_RETURN_IF_ERROR(plan_run(t, data, devices));
  EASEL_ASSIGN_OR_RETURN(t.run.params, make_params(cfg, t.total, t.p));
  EASEL_RETURN_IF_ERROR(build_run(t, data.train));
  if (resume) EASEL_RETURN_IF_ERROR(restore_from(t, *resume));
  EASEL_RETURN_IF_ERROR(prepare_algorithm(t, resume));

  TrainSummary sum;
  describe_run(t, sum.info);
  t.report->on_start(sum.info);
  obs->on_setup(t.run);
  sum.setup_seconds = now_seconds() - t_setup;
  sum.target_accuracy = cfg.target_accuracy;
  EASEL_RETURN_IF_ERROR(run_rounds(t, data.test, resume, sum));
  finish_summary(t, sum);
  return sum;  // t's destructor finishes the algorithm and takes the run down
}

}  // namespace easel
