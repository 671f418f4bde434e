// The round's statistics: every group's row, gathered on rank 0, summed into the round's record
// and the run's summary.
#include <algorithm>
#include <cmath>

#include "engine/span_ops.hpp"
#include "run/train_run.hpp"

namespace easel {

namespace {

// What each group reports to rank 0 after a round, as doubles (every count is below 2^53).
enum GroupRow : int {
  kSteps,
  kLossSum,
  kLossCount,
  kCompute,
  kComm,
  kWait,
  kPreempted,
  kStaleSum,
  kStaleCount,
  kStaleMax,
  kEvalLoss,
  kEvalCorrect,
  kEvalCount,
  kRowSize
};

}  // namespace

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::completed:
      return "completed";
    case StopReason::target:
      return "target";
    case StopReason::interrupted:
      return "interrupted";
    case StopReason::diverged:
      return "diverged";
    case StopReason::stalled:
      return "stalled";
    case StopReason::requested:
      return "requested";
  }
  return "completed";
}

std::vector<double> gather_rows(const TrainRun& t, const std::vector<EvalStats>& eval_part) {
  std::vector<double> rows(static_cast<size_t>(t.local * kRowSize));
  for (int i = 0; i < t.local; ++i) {
    const Group& g = *t.run.groups[static_cast<size_t>(i)];
    double* r = &rows[static_cast<size_t>(i * kRowSize)];
    r[kSteps] = static_cast<double>(g.steps.load());
    r[kLossSum] = g.loss_sum;
    r[kLossCount] = static_cast<double>(g.loss_count);
    r[kCompute] = g.times.compute;
    r[kComm] = g.times.comm;
    r[kWait] = g.times.wait;
    r[kPreempted] = g.times.preempted;
    r[kStaleSum] = static_cast<double>(g.staleness_sum);
    r[kStaleCount] = static_cast<double>(g.staleness_count);
    r[kStaleMax] = static_cast<double>(g.staleness_max);
    r[kEvalLoss] = eval_part[static_cast<size_t>(i)].loss_sum;
    r[kEvalCorrect] = static_cast<double>(eval_part[static_cast<size_t>(i)].correct);
    r[kEvalCount] = static_cast<double>(eval_part[static_cast<size_t>(i)].count);
  }
  if (t.world) {
    std::vector<double> all(t.rank == 0 ? rows.size() * static_cast<size_t>(t.ranks) : 0);
    t.world->gather_bytes(rows.data(), rows.size() * sizeof(double), all.data(), 0);
    rows = std::move(all);
  }
  return rows;
}

EvalRecord make_record(const TrainRun& t, const std::vector<double>& rows) {
  EvalRecord rec;
  int64_t group_steps = 0;
  double loss = 0;
  int64_t loss_n = 0;
  EvalStats ev;
  int64_t st_sum = 0, st_n = 0;
  for (int q = 0; q < t.p; ++q) {
    const double* r = &rows[static_cast<size_t>(q * kRowSize)];
    group_steps += static_cast<int64_t>(r[kSteps]);
    loss += r[kLossSum];
    loss_n += static_cast<int64_t>(r[kLossCount]);
    rec.group_times.push_back({r[kCompute], r[kComm], r[kWait], r[kPreempted]});
    rec.group_steps.push_back(static_cast<int64_t>(r[kSteps]));
    rec.staleness_max = std::max(rec.staleness_max, static_cast<int64_t>(r[kStaleMax]));
    st_sum += static_cast<int64_t>(r[kStaleSum]);
    st_n += static_cast<int64_t>(r[kStaleCount]);
    ev.loss_sum += r[kEvalLoss];
    ev.correct += static_cast<int64_t>(r[kEvalCorrect]);
    ev.count += static_cast<int64_t>(r[kEvalCount]);
  }
  rec.images = group_steps * t.cfg.batch;
  rec.step = group_steps / t.p;
  rec.epoch = static_cast<double>(rec.images) / static_cast<double>(t.train_count);
  rec.train_loss = loss_n ? loss / static_cast<double>(loss_n) : 0;
  rec.test_loss = ev.count ? ev.loss_sum / static_cast<double>(ev.count) : 0;
  rec.test_accuracy =
      ev.count ? static_cast<double>(ev.correct) / static_cast<double>(ev.count) : 0;
  rec.test_images = ev.count;
  rec.staleness_mean = st_n ? static_cast<double>(st_sum) / static_cast<double>(st_n) : 0;
  return rec;
}

Decision add_round(TrainSummary& sum, const EvalRecord& rec, double target_accuracy) {
  ++sum.evaluations;
  sum.test_accuracy = rec.test_accuracy;
  sum.test_loss = rec.test_loss;
  sum.best_accuracy = std::max(sum.best_accuracy, rec.test_accuracy);
  sum.steps = rec.step;
  sum.images = rec.images;
  sum.epochs = rec.epoch;
  sum.group_times = rec.group_times;
  sum.staleness_mean = rec.staleness_mean;
  sum.staleness_max = rec.staleness_max;
  if (target_accuracy > 0 && !sum.time_to_target_seconds && rec.test_accuracy >= target_accuracy) {
    sum.time_to_target_seconds = sum.train_seconds;
    sum.stopped_at_target = true;
    return Decision::target;
  }
  if (!std::isfinite(rec.train_loss)) return Decision::diverged;
  return Decision::go_on;
}

void finish_summary(TrainRun& t, TrainSummary& sum) {
  sum.images_per_second =
      sum.train_seconds > 0 ? static_cast<double>(sum.images) / sum.train_seconds : 0;
  for (const auto& g : sum.group_times) {
    sum.compute_seconds += g.compute;
    sum.comm_seconds += g.comm;
    sum.wait_seconds += g.wait;
    sum.preempted_seconds += g.preempted;
  }
  const double all = sum.compute_seconds + sum.comm_seconds + sum.wait_seconds;
  sum.comm_share = all > 0 ? sum.comm_seconds / all : 0;
  sum.wait_share = all > 0 ? sum.wait_seconds / all : 0;
  sum.preempted_share = all > 0 ? sum.preempted_seconds / all : 0;
  sum.exchanged_bytes_per_image = exchanged_bytes_per_image(*t.resolved.row, t.run, t.cfg.batch);
  const Run& run = t.run;
  if (values_ignored()) return;  // simulated, compute injected: no weights to hand back
  sum.final_weights.resize(static_cast<size_t>(run.arena_floats()));
  if (t.world)
    std::copy(t.eval_buf.data(), t.eval_buf.data() + run.arena_floats(), sum.final_weights.begin());
  else
    copy_bytes(sum.final_weights.data(), MemKind::dram, t.algo->eval_weights(t.run),
               run.resident ? MemKind::device : MemKind::dram, t.arena_bytes);
  const Group& g0 = *run.groups[0];
  sum.group0_weights.resize(static_cast<size_t>(run.arena_floats()));
  copy_bytes(sum.group0_weights.data(), MemKind::dram, g0.weights.data(), g0.weights.kind(),
             t.arena_bytes);
}

}  // namespace easel
