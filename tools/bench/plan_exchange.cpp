#include "tools/bench/plan_exchange.hpp"

#include <algorithm>

#include "run/groups.hpp"
#include "run/train_run.hpp"
#include "tools/bench/bench.hpp"

namespace easel::bench {

namespace {

// One round of t's algorithm on every group at once, as the trainer's round runs it (the async
// algorithms' step budget, the devices settled at its end); its wall seconds.
double timed_round(TrainRun& t, int64_t iterations) {
  t.run.budget.store(iterations * t.local);
  const double t0 = seconds_now();
  run_on_groups(
      t.run,
      [&](Group& g) {
        t.algo->run_round(t.run, g, iterations);
        g.device->synchronize();
      },
      [] {});
  return seconds_now() - t0;
}

double sum_of(const Run& run, double GroupTimes::*field) {
  double s = 0;
  for (const auto& g : run.groups)
    s += g->times.*field;
  return s;
}

}  // namespace

Result<PlanExchangeTime> time_plan_exchange(const TrainConfig& cfg, DataSplit& data,
                                            const DeviceRegistry& devices, int rounds) {
  if (rounds < 1) return invalid_argument("--time-exchange: give a number of rounds >= 1");
  EASEL_ASSIGN_OR_RETURN(const std::unique_ptr<Algorithm> algo, make_algorithm(cfg.algo));
  if (algo->max_groups() == 1)
    return invalid_argument("--time-exchange: " + algo->name() +
                            " runs one group and exchanges nothing");
  TrainConfig fresh = cfg;  // nothing written: no trace, no resume
  fresh.trace.clear();
  TrainObserver none;
  TrainRun t(fresh, &none);
  EASEL_RETURN_IF_ERROR(set_up_run(t, data, devices, nullptr));  // as train() sets it up
  for (auto& g : t.run.groups)
    g->fake_gradient = [](Group&) {};  // the round is the exchange and the update alone

  PlanExchangeTime out;
  out.rounds = rounds;
  out.iterations = std::max<int64_t>(1, t.run.params.tau);
  out.groups = t.run.size();
  timed_round(t, out.iterations);  // untimed: first touches, the Comm's first use
  const double comm0 = sum_of(t.run, &GroupTimes::comm);
  const double wait0 = sum_of(t.run, &GroupTimes::wait);
  for (int r = 0; r < rounds; ++r)
    out.round_ms.push_back(1e3 * timed_round(t, out.iterations));
  const double per = 1e3 / (static_cast<double>(out.groups) * rounds);
  out.comm_ms = (sum_of(t.run, &GroupTimes::comm) - comm0) * per;
  out.wait_ms = (sum_of(t.run, &GroupTimes::wait) - wait0) * per;
  return out;
}

}  // namespace easel::bench
