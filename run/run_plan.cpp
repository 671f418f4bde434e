#include "run/run_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "algos/list.hpp"
#include "algos/sync_easgd.hpp"
#include "engine/comm/mpi_comm.hpp"
#include "engine/comm/smpi.hpp"
#include "engine/comm/transport.hpp"
#include "engine/log.hpp"
#include "engine/memory.hpp"
#include "engine/worker.hpp"
#include "model/machine.hpp"
#include "nets/graph.hpp"
#include "run/comm_list.hpp"
#include "run/model_request.hpp"
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

// The model's prediction `p` as the clock's prices for the algorithm's row `a`.
ClockPrices prices_of(const model::Prediction& p, const AlgoEntry& a, const AlgoParams& params) {
  ClockPrices c;
  c.step_seconds = p.step_seconds;
  c.exchange_seconds = p.exchange_seconds;
  c.seconds_per_iteration = p.seconds_per_iteration;
  c.compute_source = p.compute_source;
  c.scheduled =
      a.model.kind == ExchangeKind::locked_centre || a.model.kind == ExchangeKind::lockfree_centre;
  c.steps_per_exchange = steps_per_exchange(a, params);
  // The model's comm and wait per iteration are its exchange's share (overlap taken off, the
  // barrier's or turn's wait added): charged whole at each exchange.
  const double per = static_cast<double>(std::max<int64_t>(c.steps_per_exchange, 1));
  c.sync_comm_seconds = p.comm_seconds * per;
  c.sync_wait_seconds = p.wait_seconds * per;
  return c;
}

// --placement hbw on the described CPU machine: every group's replica (model::group_bytes) and
// the centre must fit in its high-bandwidth memory. `hbw` refuses a run that does not fit;
// `hbw-preferred` prices it in DRAM (req.placement) and says so. Returns where it is priced,
// with the reason when it is not where asked (on a GPU machine: the devices' or the host's).
Result<std::string> clock_placement(const TrainRun& t, const model::Machine& m,
                                    model::ModelRequest& req) {
  if (m.gpu) return std::string(req.resident ? "the devices' memory" : "host memory");
  if (req.placement != "hbw") return req.placement;
  const double need =
      req.groups * model::group_bytes(req) + 4.0 * static_cast<double>(req.cost.arena_floats);
  const double have = m.hbw.present ? m.hbw.capacity_gb * 1e9 : 0;
  if (need <= have) return req.placement;
  const auto gb = [](double bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f GB", bytes / 1e9);
    return std::string(b);
  };
  const std::string why = std::to_string(req.groups) + " group(s) and the centre need " + gb(need) +
                          ", its high-bandwidth memory holds " + gb(have);
  if (placement_text(t.cfg.placement) == "hbw")
    return invalid_argument("--placement hbw: " + why +
                            " (--placement hbw-preferred places them in DRAM and prices that)");
  req.placement = "dram";
  log_warn("run",
           "--clock " + t.cfg.clock + ": --placement hbw-preferred: " + why + ": priced in DRAM");
  return "dram (" + why + ")";
}

// The groups sharing one described machine: one process's; under SMPI, the groups of the ranks
// of this rank's simulated node (the platform's, as the collectives see it), so that one rank
// per KNL node prices a whole node's step and 8 ranks of an 8-GPU node a GPU's each.
int groups_on_machine(const TrainRun& t) {
  if (t.world == nullptr) return t.p;
  const int nodes = std::max(1, t.world->transport()->nodes());
  return t.local * std::max(1, t.ranks / nodes);
}

// Why --clock cannot run here, or empty: across mpirun's ranks the schedule is not built; under
// SMPI the steps are priced and the computation must take no simulated time of its own.
std::string clock_refusal(const TrainRun& t) {
  if (smpi::launched()) {
    if (sim_injected_flops() > 0)
      return "the model's step is injected already (tools/simulate --compute model)";
    if (smpi::computation_timed())
      return "under SMPI the computation would be timed as well as priced: run it with "
             "--cfg=smpi/simulate-computation:no (tools/simulate --compute clock --machine FILE)";
    return {};
  }
  if (t.ranks > 1)
    return "runs in one process or under SMPI (tools/simulate --compute clock); across mpirun's "
           "ranks it is not built yet";
  return {};
}

// --clock: the described machine's prices of this run, from one prediction of the model for
// the run's net, algorithm, groups (those sharing the machine), batch and resolved tau. Refuses,
// naming the flag and file, what the model cannot price.
Status price_clock(TrainRun& t) {
  const std::string& file = t.cfg.clock;
  if (const std::string why = clock_refusal(t); !why.empty())
    return invalid_argument("--clock " + file + ": " + why);
  const auto refused = [&](const Status& st) {
    std::string m = st.message();
    if (m.rfind("--machine: ", 0) == 0) m.erase(0, 11);  // the file's resolution says --machine
    return invalid_argument("--clock " + file + ": " + m);
  };
  Result<std::string> path = model::resolve_machine_path(file);
  if (!path.ok()) return refused(path.status());
  Result<model::Machine> m = model::load_machine(*path);
  if (!m.ok()) return refused(m.status());
  Result<model::ModelRequest> req = model_request(t.cfg, t.spec, *m, groups_on_machine(t));
  if (!req.ok()) return refused(req.status());
  req->tau = t.run.params.tau;
  // On a GPU machine the weights stay on the devices where the algorithm keeps them there when
  // run on GPUs (the original EASGD's master is on the host: they cross the host link).
  req->resident = !m->gpu || t.algo->device_resident();
  Result<std::string> placed = clock_placement(t, *m, *req);
  if (!placed.ok()) return refused(placed.status());
  Result<model::Prediction> p = model::predict(*m, *req);
  if (!p.ok()) return refused(p.status());
  ClockPrices c = prices_of(*p, *t.resolved.row, t.run.params);
  c.file = file;
  c.machine = m->name;
  c.placement = *placed;
  t.resolved.clock = c;
  return {};
}

// The stall deadline from the model: kStallMultiple times one step plus one exchange as the
// model predicts them for this run on this machine's calibration (EASEL_MACHINE, else the one
// `easel bench --calibrate` wrote), at least kStallFloorSeconds. Returns why not, or empty.
constexpr double kStallMultiple = 10, kStallFloorSeconds = 30;
std::string model_stall_deadline(const TrainRun& t, RunPlan& r) {
  const std::string file = model::default_calibration_path();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    return "no calibration of this machine (" + file + "; `easel bench --calibrate` writes it)";
  Result<model::Machine> m = model::load_machine(file);
  if (!m.ok()) return m.status().message();
  Result<model::ModelRequest> req = model_request(t.cfg, t.spec, *m, groups_on_machine(t));
  if (!req.ok()) return req.status().message();
  req->tau = t.run.params.tau;
  req->resident = !m->gpu || t.algo->device_resident();
  Result<model::Prediction> p = model::predict(*m, *req);
  if (!p.ok()) return p.status().message();
  const double predicted = p->step_seconds + p->exchange_seconds;
  r.stall_seconds = std::max(kStallFloorSeconds, kStallMultiple * predicted);
  char b[200];
  std::snprintf(b, sizeof b, "%g x the model's step and exchange, %.3g s on %s, at least %g s",
                kStallMultiple, predicted, file.c_str(), kStallFloorSeconds);
  r.stall_why = b;
  return {};
}

// The run's stall deadline (RunPlan::stall_seconds and its source): --stall-timeout, else
// EASEL_STALL_TIMEOUT, else the model's (model_stall_deadline), else 300 s; the process's
// bounded waits take it (set_stall_timeout_seconds).
void resolve_stall_deadline(const TrainRun& t, RunPlan& r) {
  const char* env = std::getenv("EASEL_STALL_TIMEOUT");
  if (t.cfg.stall_timeout > 0) {
    r.stall_seconds = t.cfg.stall_timeout;
    r.stall_source = "--stall-timeout";
  } else if (env != nullptr && *env != 0) {
    set_stall_timeout_seconds(0);  // read (and checked) again
    resolve_stall_deadline(t, r);
    r.stall_source = "EASEL_STALL_TIMEOUT";
  } else if (std::string why = model_stall_deadline(t, r); why.empty()) {
    r.stall_source = "model";
  } else {
    r.stall_seconds = 300;
    r.stall_source = "default";
    r.stall_why = "the model gave none: " + why;
  }
  set_stall_timeout_seconds(r.stall_seconds);
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
  resolve_stall_deadline(t, r);
  if (!t.cfg.clock.empty()) {
    EASEL_RETURN_IF_ERROR(price_clock(t));
    if (smpi::launched()) {
      // SMPI keeps the time: each step computed, then charged the model's price; the exchanges
      // cost what the platform's links make of them. No schedule: the ranks' order is SMPI's.
      set_sim_step_seconds(r.clock->step_seconds);
    } else {
      t.clock = std::make_unique<SimClock>(*r.clock, t.p);
      if (r.clock->scheduled) t.run.clock = t.clock.get();
    }
  }
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
