// The loop of train(): rounds of training, each followed by an evaluation, the round's record
// and a checkpoint.
#include <algorithm>

#include "algos/groups.hpp"
#include "algos/train_run.hpp"
#include "engine/log.hpp"
#include "engine/span_ops.hpp"

namespace easel {

namespace {

int64_t steps_so_far(const Run& run) {
  int64_t s = 0;
  for (const auto& g : run.groups)
    s += g->steps.load(std::memory_order_relaxed);
  return s;
}

// Every group runs k iterations of the algorithm on its own thread; the observer hears of the
// progress meanwhile. Returns the round's seconds (every rank's round is over).
double train_round(TrainRun& t, int64_t k) {
  Run& run = t.run;
  run.budget.store(k * t.local);
  for (auto& g : run.groups) {
    g->loss_sum = 0;
    g->loss_count = 0;
  }
  const double r0 = now_seconds();
  const int64_t steps_before = steps_so_far(run);
  const int64_t batch = t.cfg.batch;
  run_on_groups(
      run,
      [&](Group& g) {
        const double q0 = thread_runqueue_seconds();
        t.algo->run_round(run, g, k);
        g.device->synchronize();  // between rounds every buffer is settled
        const double q1 = q0 >= 0 ? thread_runqueue_seconds() : -1;
        if (q1 >= q0) g.times.preempted += q1 - q0;
      },
      [&] {
        const int64_t s = steps_so_far(run) * t.ranks;  // the other ranks run in lockstep
        const double el = now_seconds() - r0;
        const double ips =
            el > 0 ? static_cast<double>((s - steps_before * t.ranks) * batch) / el : 0;
        t.report->on_progress(s / t.p, t.total,
                              static_cast<double>(s * batch) / static_cast<double>(t.train_count),
                              0, ips);
      });
  if (t.world) t.world->barrier(t.rank);  // every rank's round is over (async: none in flight)
  return now_seconds() - r0;
}

// The evaluated model on `test`, this process's groups' shares of it.
std::vector<EvalStats> evaluate_model(TrainRun& t, const Dataset& test) {
  Run& run = t.run;
  const float* eval_w = t.algo->eval_weights(run);
  if (run.resident) {
    copy_bytes(t.eval_buf.data(), MemKind::dram, eval_w, MemKind::device, t.arena_bytes);
    eval_w = t.eval_buf.data();
  }
  if (t.world) {
    if (t.rank == 0) span_copy(t.eval_buf.data(), eval_w, run.arena_floats());
    t.world->broadcast(t.rank, t.eval_buf.data(), run.arena_floats(), 0);
    eval_w = t.eval_buf.data();
  }
  return evaluate_groups(run, test, eval_w);
}

// Hands the observer a checkpoint after `done` iterations. A failed write (disk full, --out
// removed) leaves the last good checkpoint; training goes on.
void checkpoint(TrainRun& t, const TrainSummary& sum, int64_t done, double wall_seconds,
                int64_t last_images) {
  Checkpoint ck = capture_run(t.run, *t.algo, t.identity);
  ck.iterations_done = done;
  ck.total_iterations = t.total;
  ck.wall_seconds = wall_seconds;
  ck.train_seconds = sum.train_seconds;
  ck.eval_seconds = sum.eval_seconds;
  ck.best_accuracy = sum.best_accuracy;
  ck.time_to_target_seconds = sum.time_to_target_seconds.value_or(-1);
  ck.images_before_round = last_images;
  if (Status st = t.report->on_checkpoint(ck); !st.ok())
    log_error("train", "checkpoint not written: " + st.message() +
                           " (the previous one, if any, is still whole)");
}

}  // namespace

Status run_rounds(TrainRun& t, const Dataset& test, const Checkpoint* resume, TrainSummary& sum) {
  double t0 = now_seconds();
  int64_t done = 0, last_images = 0;
  if (resume) {  // checked by restore_from
    done = resume->iterations_done;
    last_images = resume->images_before_round;
    t0 -= resume->wall_seconds;
    sum.train_seconds = resume->train_seconds;
    sum.eval_seconds = resume->eval_seconds;
    sum.best_accuracy = resume->best_accuracy;
    if (resume->time_to_target_seconds >= 0)
      sum.time_to_target_seconds = resume->time_to_target_seconds;
  }
  const bool checkpoints = !t.world && t.report->wants_checkpoints();
  while (done < t.total) {
    const int64_t k = std::min(t.eval_every, t.total - done);
    const double round_seconds = train_round(t, k);
    sum.train_seconds += round_seconds;
    done += k;

    const double e0 = now_seconds();
    const std::vector<double> rows = gather_rows(t, evaluate_model(t, test));
    Decision decision = Decision::go_on;  // rank 0 decides; every rank follows
    EvalRecord rec;
    if (t.rank == 0) {
      rec = make_record(t, rows);
      rec.eval_seconds = now_seconds() - e0;
      sum.eval_seconds += rec.eval_seconds;
      rec.wall_seconds = now_seconds() - t0;
      rec.train_seconds = sum.train_seconds;
      rec.images_per_second =
          round_seconds > 0 ? static_cast<double>(rec.images - last_images) / round_seconds : 0;
      last_images = rec.images;
      t.report->on_eval(rec);
      decision = add_round(sum, rec, t.cfg.target_accuracy);
      if (decision == Decision::go_on && t.report->should_stop()) decision = Decision::stopped;
    } else {
      sum.eval_seconds += now_seconds() - e0;
    }
    // A diverged round keeps the last good checkpoint.
    if (checkpoints && decision != Decision::diverged)
      checkpoint(t, sum, done, rec.wall_seconds, last_images);
    if (t.world) t.world->broadcast_bytes(&decision, sizeof decision, 0);
    if (decision == Decision::target || decision == Decision::stopped) break;
    if (decision == Decision::diverged)
      return internal_error(
          t.rank == 0 ? "training diverged: train loss is " + std::to_string(rec.train_loss) +
                            " at step " + std::to_string(rec.step) + " (lower --lr)"
                      : std::string("training diverged (rank 0 saw a non-finite train loss)"));
  }
  sum.wall_seconds = now_seconds() - t0;
  return {};
}

}  // namespace easel
