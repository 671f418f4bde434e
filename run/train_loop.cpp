// The loop of train(): rounds of training, each followed by an evaluation, the round's record
// and a checkpoint.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <utility>

#include "engine/log.hpp"
#include "engine/span_ops.hpp"
#include "run/groups.hpp"
#include "run/stall_watch.hpp"
#include "run/train_run.hpp"

namespace easel {

namespace {

int64_t steps_so_far(const Run& run) {
  int64_t s = 0;
  for (const auto& g : run.groups)
    s += g->steps.load(std::memory_order_relaxed);
  return s;
}

// --clock: the round of `did` iterations after `done` on the described machine's clock, its
// simulated seconds; every group's compute, comm and wait become the simulated ones.
double clock_round(TrainRun& t, int64_t done, int64_t did) {
  const double seconds = t.clock->end_round(done, did);
  for (auto& g : t.run.groups)
    g->times = t.clock->times(g->id);
  return seconds;
}

// A restarted group that keeps failing is dropped after this many restarts (a rate that diverges
// everywhere would otherwise restart it at every step).
constexpr int kMaxRestarts = 8;

}  // namespace

OnFailure record_group_failure(TrainRun& t, Group& g, const std::string& why, bool nonfinite) {
  Run& run = t.run;
  run.lost_steps.fetch_add(1, std::memory_order_relaxed);
  OnFailure mode = run.on_failure;
  const int restarts = t.restarts[static_cast<size_t>(g.id)];
  if (mode == OnFailure::restart && restarts >= kMaxRestarts) mode = OnFailure::drop;
  const char* action = mode == OnFailure::stop   ? "stopped the run"
                       : mode == OnFailure::drop ? "dropped"
                                                 : "restarted";
  GroupFailure f{g.global_id, g.steps.load(std::memory_order_relaxed), action, why, nonfinite};
  if (mode == OnFailure::drop && restarts >= kMaxRestarts)
    f.why += " (after " + std::to_string(restarts) + " restarts)";
  log_warn("train", "group " + std::to_string(f.group) + " failed at step " +
                        std::to_string(f.step) + ": " + f.why + "; " + action +
                        (mode == OnFailure::stop ? "" : ", the other groups go on"));
  std::lock_guard lock(t.failures_mu);
  t.failures.push_back(f);
  return mode;
}

namespace {

// Group g's failure (`why`; `nonfinite`: a non-finite train loss, else a throw), on g's thread,
// recorded (record_group_failure). stop: the others end the round early (Run::failed); drop: g
// leaves the run; restart: g re-enters from the centre. A dropped group's replica is set to the
// centre too, so that a checkpoint holds finite weights. Returns whether g goes on in this round.
bool on_group_failure(TrainRun& t, Group& g, const std::string& why, bool nonfinite) {
  Run& run = t.run;
  const OnFailure mode = record_group_failure(t, g, why, nonfinite);
  if (mode == OnFailure::stop) {
    run.failed.store(true, std::memory_order_relaxed);
    if (run.clock) run.clock->leave(g);
    return false;
  }
  t.algo->rejoin(run, g);
  if (mode == OnFailure::restart) {
    ++t.restarts[static_cast<size_t>(g.id)];
    return true;  // on a clock: its next claim ends the turn it holds
  }
  g.dropped = true;
  if (run.clock) run.clock->leave(g);
  return false;
}

// Group g, given up as stalled (StallWatch, which recorded its failure and decided), back on its
// thread: restarted from the centre (returns true), else it leaves the round.
bool back_from_stall(TrainRun& t, Group& g) {
  Run& run = t.run;
  if (g.dropped || run.on_failure != OnFailure::restart) {
    if (run.clock) run.clock->leave(g);
    return false;
  }
  g.abandoned.store(false, std::memory_order_release);
  if (t.clock) t.clock->enter(g);  // (the watch took it out of the schedule)
  t.algo->rejoin(run, g);
  ++t.restarts[static_cast<size_t>(g.id)];
  return true;
}

// One round of group g on its thread (train_round): the algorithm's run_round, its failures
// handled by on_group_failure where the algorithm survives a lost group (the others' exceptions
// propagate as before). A group failed and not restarted, or dropped, trains no more: where the
// groups meet in collectives (local-sgd, slowmo, diloco) its run_round is still called, in which
// it attends the round's meetings as an absent member that the others count out, so that nobody
// waits for it (algos/periodic.hpp); elsewhere it only leaves the clock's schedule.
void run_group_round(TrainRun& t, Group& g, int64_t k) {
  Run& run = t.run;
  const bool attends = t.algo->survives_group_loss() && t.algo->uses_collectives();
  if (g.dropped && run.clock) run.clock->leave(g);
  if (g.dropped && !attends) return;
  for (;;) {
    try {
      t.algo->run_round(run, g, k);
      return;
    } catch (const Stalled&) {  // recorded (first_stall); the round is over for g
      return;
    } catch (const Abandoned&) {
      if (!back_from_stall(t, g)) return;
    } catch (const GroupFailed& e) {
      if (!on_group_failure(t, g, e.what(), e.nonfinite) && !attends) return;
    } catch (const std::exception& e) {
      if (!t.algo->survives_group_loss()) throw;
      if (!on_group_failure(t, g, std::string("threw: ") + e.what(), false) && !attends) return;
    }
  }
}

// Every group runs up to k iterations of the algorithm on its own thread (fresh: the round's loss
// sums start at zero; else they go on, after a checkpoint taken mid-round); the observer hears of
// the progress meanwhile. Returns the iterations the round did: k, or fewer when the run stopped
// early (Run::stop_at, the drained budget); *seconds: the round's (every rank's round is over;
// with --clock, simulated).
int64_t train_round(TrainRun& t, int64_t k, bool fresh, double* seconds) {
  Run& run = t.run;
  run.budget.store(k * t.local);
  run.lost_steps.store(0);
  for (auto& g : run.groups) {
    if (!fresh) break;
    g->loss_sum = 0;
    g->loss_count = 0;
  }
  const double r0 = now_seconds();
  const int64_t steps_before = steps_so_far(run);
  const int64_t batch = t.cfg.batch;
  if (t.clock) {
    t.clock->begin_round();
    // A dropped group is out of the schedule from the round's start: one given up as stalled
    // whose thread never came back never runs this round to leave it.
    for (auto& g : run.groups)
      if (g->dropped) t.clock->leave(*g);
  }
  StallWatch watch(t);
  run_on_groups(
      run,
      [&](Group& g) {
        TraceBind trace(t.group_tracks.empty() ? nullptr
                                               : t.group_tracks[static_cast<size_t>(g.id)]);
        if (TraceTrack* tr = bound_track()) tr->begin_unit(g.steps.load(std::memory_order_relaxed));
        const double q0 = thread_runqueue_seconds();
        g.in_round.store(true, std::memory_order_release);
        run_group_round(t, g, k);
        g.in_round.store(false, std::memory_order_release);
        g.device->synchronize();  // between rounds every buffer is settled
        const double q1 = q0 >= 0 ? thread_runqueue_seconds() : -1;
        if (q1 >= q0) g.times.preempted += q1 - q0;
      },
      [&] {
        watch.check();
        const int64_t s = steps_so_far(run) * t.ranks;  // the other ranks run in lockstep
        const double el = now_seconds() - r0;
        const double ips =
            el > 0 ? static_cast<double>((s - steps_before * t.ranks) * batch) / el : 0;
        t.report->on_progress(s / t.p, t.total,
                              static_cast<double>(s * batch) / static_cast<double>(t.train_count),
                              0, ips);
      });
  if (t.world) t.world->barrier(t.rank);  // every rank's round is over (async: none in flight)
  *seconds = now_seconds() - r0;
  const int64_t lost = run.lost_steps.load();
  run.lost_before += lost;  // (a checkpoint of this round, mid-round or at its end, holds them)
  if (stall_declared()) return 0;  // the groups stopped where they were
  const bool none_left =
      std::all_of(run.groups.begin(), run.groups.end(), [](const auto& g) { return g->dropped; });
  if (none_left) return (steps_so_far(run) - steps_before) / t.local;  // the run stops (failures)
  // A failed group's lost step was claimed from the budget: it counts as the round's.
  const int64_t group_steps = steps_so_far(run) - steps_before + lost;
  EASEL_CHECK_MSG(group_steps % t.local == 0, "a round's group-steps are not whole iterations");
  const int64_t did = group_steps / t.local;
  if (t.clock) *seconds = clock_round(t, steps_before / t.local, did);
  return did;
}

// The first non-finite value in group g's weights (a host arena), as "group G's SEGMENT (element
// I)"; empty when every weight is finite.
std::string nonfinite_in(const Run& run, const Group& g) {
  const std::string w = first_nonfinite(run.segments(), g.weights.data());
  return w.empty() ? w : "group " + std::to_string(g.global_id) + "'s " + w;
}

// The first non-finite weight of this process's groups, `first`'s before the others'; empty when
// every weight is finite (or the weights live on GPUs, where the loss alone is checked).
std::string nonfinite_weights(const TrainRun& t, const Group* first = nullptr) {
  if (t.run.resident) return {};
  if (first)
    if (std::string w = nonfinite_in(t.run, *first); !w.empty()) return w;
  for (const auto& g : t.run.groups)
    if (std::string w = nonfinite_in(t.run, *g); !w.empty()) return w;
  return {};
}

// The run's end after the round in which groups failed (Run::on_failure), from t.failures, now
// moved into the summary: under stop, or when no group is left (every one dropped), *stop is
// set and the summary says why: diverged (exit 3) when a failure was a non-finite loss, else the
// returned error (exit 1). The run goes on (*stop false) while a group survives.
Status after_failures(TrainRun& t, TrainSummary& sum, int64_t done, bool* stop) {
  *stop = false;
  if (t.failures.empty()) return {};
  for (GroupFailure& f : t.failures)
    sum.group_failures.push_back(std::move(f));
  t.failures.clear();
  bool nonfinite = false;
  std::string what;  // every failure of the run (no group left: each one's)
  for (const GroupFailure& f : sum.group_failures) {
    nonfinite = nonfinite || f.nonfinite;
    what += (what.empty() ? "" : "; ") + std::string("group ") + std::to_string(f.group) +
            " at step " + std::to_string(f.step) + ": " + f.why;
  }
  const bool left = std::any_of(t.run.groups.begin(), t.run.groups.end(),
                                [](const auto& g) { return !g->dropped; });
  if (t.run.on_failure != OnFailure::stop && left) return {};
  *stop = true;
  const std::string m =
      (t.run.on_failure == OnFailure::stop
           ? "a group failed (--on-failure stop ends the run; drop or restart let the others "
             "go on): "
           : "every group failed, none is left: ") +
      what;
  sum.steps = done;
  if (!nonfinite) return internal_error(m);
  sum.stopped = StopReason::diverged;
  sum.stop_message = m + " (lower --lr; the last good checkpoint, if any, is kept)";
  return {};
}

// Stops the run as diverged at `done` iterations: names the first step with a non-finite loss,
// its group and the first layer whose weights are no longer finite.
void stop_diverged(TrainRun& t, TrainSummary& sum, int64_t done) {
  const Group* first = nullptr;
  for (const auto& g : t.run.groups)
    if (g->nonfinite_step >= 0 && (!first || g->nonfinite_step < first->nonfinite_step))
      first = g.get();
  const std::string where = first && !first->nonfinite_where.empty()
                                ? "group " + std::to_string(first->global_id) + "'s " +
                                      first->nonfinite_where + " (at that step)"
                                : nonfinite_weights(t, first);
  std::string m = "training diverged";
  if (first)
    m += " at step " + std::to_string(first->nonfinite_step + 1) + ": group " +
         std::to_string(first->global_id) + "'s train loss is " +
         std::to_string(first->nonfinite_loss);
  m += where.empty() ? std::string("; the weights are finite")
                     : "; first non-finite weight in " + where;
  m += " (lower --lr; the last good checkpoint, if any, is kept)";
  sum.stopped = StopReason::diverged;
  sum.stop_message = m;
  sum.steps = done;
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
    t.world_comm->broadcast(t.rank, t.eval_buf.data(), run.arena_floats(), 0);
    eval_w = t.eval_buf.data();
  }
  return evaluate_groups(run, test, eval_w, t.cfg.eval_images,
                         [&](int64_t done, int64_t all) { t.report->on_eval_progress(done, all); });
}

void log_unwritten_checkpoint(const Status& st) {
  log_error("train", "checkpoint not written: " + st.message() +
                         " (the previous one, if any, is still whole)");
}

// Hands the observer a checkpoint after `done` iterations. A failed write (disk full, --out
// removed) leaves the last good checkpoint; training goes on. Across MPI ranks (at an
// evaluation, every rank there): every rank's groups, gathered, and rank 0's centre, counters
// and algorithm state, which every rank holds alike or rank 0 holds alone (async's centre).
void checkpoint(TrainRun& t, TrainSummary& sum, int64_t done, double wall_seconds,
                int64_t last_images, bool mid_round = false) {
  TraceSpan span("checkpoint", "checkpoint");
  const double c0 = now_seconds();
  if (Status st = t.report->await_checkpoint(); !st.ok()) log_unwritten_checkpoint(st);
  Checkpoint ck = capture_run(t.run, *t.algo, t.identity);
  if (t.world) gather_checkpoint_groups(*t.world, ck);
  ++sum.checkpoints;
  if (t.rank != 0) {
    sum.checkpoint_seconds += now_seconds() - c0;
    return;
  }
  ck.mid_round = mid_round;
  ck.iterations_done = done;
  ck.total_iterations = t.total;
  ck.wall_seconds = wall_seconds;
  ck.train_seconds = sum.train_seconds;
  ck.eval_seconds = sum.eval_seconds;
  ck.best_accuracy = sum.best_accuracy;
  ck.time_to_target_seconds = sum.time_to_target_seconds.value_or(-1);
  ck.images_before_round = last_images;
  ck.failures = sum.group_failures;  // (the round's too: after_failures moved them there)
  if (t.clock) ck.clock_seconds = t.clock->now();
  if (Status st = t.report->on_checkpoint(std::move(ck)); !st.ok()) log_unwritten_checkpoint(st);
  sum.checkpoint_seconds += now_seconds() - c0;
}

// Whether the run writes checkpoints: rank 0's observer says, and across ranks every rank
// learns it (each takes part in every checkpoint). Simulated with injected compute
// (tools/simulate --compute model) no value is computed, so none is kept.
bool wants_checkpoints(const TrainRun& t) {
  int32_t want = t.report->wants_checkpoints() && !values_ignored() ? 1 : 0;
  if (t.world) t.world->broadcast_bytes(&want, sizeof want, 0);
  return want != 0;
}

// The first evaluation after `done` iterations: rounds end at multiples of eval_every (a round
// cut short by a signal goes on to its own end after --resume).
int64_t next_evaluation(int64_t done, int64_t eval_every) {
  return (done / eval_every + 1) * eval_every;
}

// Single process: the signal flag and the divergence check reach the groups' steps.
void arm_early_stop(TrainRun& t, const std::atomic<int>* flag) {
  if (t.world) return;  // across ranks: at evaluations only, where the ranks meet
  Run& run = t.run;
  run.interrupt = flag;
  run.stop_lead = std::max<int64_t>(2, static_cast<int64_t>(run.params.tau) + 1);
  for (auto& g : run.groups) {
    g->diverged = &run.diverged;
    g->fail_on_nonfinite = run.on_failure != OnFailure::stop;
  }
}

// Where the loop stands: its clock's origin, the steps done, the images at the last record and
// whether the next round's loss sums start at zero.
struct LoopState {
  double t0 = 0;
  int64_t done = 0, last_images = 0;
  bool fresh = true;
  int64_t evaluations_since_checkpoint = 0;
  double last_checkpoint = 0;  // now_seconds() at the last one's end
};

// Whether the evaluation that decided `decision` writes a checkpoint (rank 0 decides, every
// rank follows: each takes part): the run's last and a stopping one always; else every
// --checkpoint-every evaluations, or under auto the first evaluation Young/Daly's interval or
// more after the last checkpoint (the first evaluation's: it measures the cost).
bool checkpoint_due(TrainRun& t, TrainSummary& sum, LoopState& s, Decision decision) {
  int32_t due = 0;
  if (t.rank == 0) {
    ++s.evaluations_since_checkpoint;
    if (decision != Decision::go_on || s.done >= t.total) {
      due = 1;
    } else if (t.cfg.checkpoint_every > 0) {
      due = s.evaluations_since_checkpoint >= t.cfg.checkpoint_every;
    } else if (sum.checkpoints == 0) {
      due = 1;
    } else {
      const double cost = sum.checkpoint_seconds / static_cast<double>(sum.checkpoints);
      if (sum.checkpoint_interval_seconds == 0) {  // said once, from the first checkpoint's cost
        char b[240];
        std::snprintf(b, sizeof b,
                      "--checkpoint-every auto: a checkpoint takes %.1f ms from training; with "
                      "--mtbf %g s Young/Daly's interval is %.1f s (a checkpoint at the first "
                      "evaluation past it)",
                      cost * 1e3, t.cfg.mtbf_seconds,
                      young_daly_interval(cost, t.cfg.mtbf_seconds));
        log_info("train", b);
      }
      sum.checkpoint_interval_seconds = young_daly_interval(cost, t.cfg.mtbf_seconds);
      due = now_seconds() - s.last_checkpoint >= sum.checkpoint_interval_seconds;
    }
  }
  if (t.world) t.world->broadcast_bytes(&due, sizeof due, 0);
  return due != 0;
}

// The loop's state and the summary's sums as `resume` left them (checked by restore_from).
LoopState resume_loop(const Checkpoint* resume, TrainSummary& sum) {
  LoopState s;
  s.t0 = now_seconds();
  if (!resume) return s;
  s.done = resume->iterations_done;
  s.last_images = resume->images_before_round;
  s.fresh = !resume->mid_round;
  s.t0 -= resume->wall_seconds;
  sum.train_seconds = resume->train_seconds;
  sum.eval_seconds = resume->eval_seconds;
  sum.best_accuracy = resume->best_accuracy;
  if (resume->time_to_target_seconds >= 0)
    sum.time_to_target_seconds = resume->time_to_target_seconds;
  sum.group_failures = resume->failures;
  return s;
}

int signal_of(const std::atomic<int>* flag) {
  return flag ? flag->load() : 0;
}

// A signal ended the round early, at the same step on every group: the images and times as far
// as the round went (no test: no accuracy), and a checkpoint there.
void stop_mid_round(TrainRun& t, TrainSummary& sum, const LoopState& s, bool checkpoints,
                    const std::atomic<int>* flag) {
  if (!t.world) {
    const EvalRecord part =
        make_record(t, gather_rows(t, std::vector<EvalStats>(t.run.groups.size())));
    sum.images = part.images;
    sum.epochs = part.epoch;
    sum.group_times = part.group_times;
  }
  if (checkpoints) {
    checkpoint(t, sum, s.done, now_seconds() - s.t0, s.last_images, true);
  }
  sum.stopped = StopReason::interrupted;
  sum.stop_signal = signal_of(flag);
  sum.steps = s.done;
}

// Rank 0: the round's record from the evaluation's `rows` (begun at e0), reported, and what the
// run does next.
Decision record_round(TrainRun& t, TrainSummary& sum, const std::vector<double>& rows, double e0,
                      double round_seconds, LoopState& s, const std::atomic<int>* flag,
                      EvalRecord& rec) {
  rec = make_record(t, rows);
  rec.step = s.done;  // the iterations (a failed group's lost steps count: --on-failure)
  rec.eval_seconds = now_seconds() - e0;
  sum.eval_seconds += rec.eval_seconds;
  rec.wall_seconds = now_seconds() - s.t0;
  rec.train_seconds = sum.train_seconds;
  rec.images_per_second =
      round_seconds > 0 ? static_cast<double>(rec.images - s.last_images) / round_seconds : 0;
  s.last_images = rec.images;
  t.report->on_eval(rec);
  Decision decision = add_round(sum, rec, t.cfg.target_accuracy);
  // (Simulated with injected compute the weights are never computed: nothing to check.)
  if (decision == Decision::go_on && !t.world && !values_ignored() && !nonfinite_weights(t).empty())
    decision = Decision::diverged;
  if (decision == Decision::go_on && s.done < t.total && signal_of(flag) != 0)
    decision = Decision::interrupted;
  if (decision == Decision::go_on && t.report->should_stop()) decision = Decision::stopped;
  return decision;
}

// The summary's end as `decision` says (rank 0's, every rank's); false: the run goes on.
bool stop_as_decided(TrainRun& t, TrainSummary& sum, Decision decision, const EvalRecord& rec,
                     int64_t done, const std::atomic<int>* flag) {
  switch (decision) {
    case Decision::target:
      sum.stopped = StopReason::target;
      return true;
    case Decision::stopped:
      sum.stopped = StopReason::requested;
      return true;
    case Decision::interrupted:
      sum.stopped = StopReason::interrupted;
      sum.stop_signal = signal_of(flag);
      return true;
    case Decision::diverged:
      stop_diverged(t, sum, done);
      if (t.rank == 0 && !std::isfinite(rec.train_loss))
        sum.stop_message = "training diverged: train loss is " + std::to_string(rec.train_loss) +
                           " at step " + std::to_string(rec.step) +
                           " (lower --lr; the last good checkpoint, if any, is kept)";
      if (t.rank != 0) sum.stop_message = "training diverged (rank 0 saw a non-finite value)";
      return true;
    case Decision::go_on:
      break;
  }
  return false;
}

}  // namespace

Status run_rounds(TrainRun& t, const Dataset& test, const Checkpoint* resume, TrainSummary& sum) {
  LoopState s = resume_loop(resume, sum);
  TraceBind trace(t.main_track);  // this thread's spans: rounds, evaluations, checkpoints
  int64_t rounds = 0;
  const bool checkpoints = wants_checkpoints(t);
  const std::atomic<int>* flag = t.rank == 0 ? t.report->stop_flag() : nullptr;
  arm_early_stop(t, flag);
  t.restarts.assign(t.run.groups.size(), 0);
  for (const GroupFailure& f : sum.group_failures)  // a resumed run's, before this process
    for (const auto& g : t.run.groups)
      if (g->global_id == f.group && f.action == "restarted")
        ++t.restarts[static_cast<size_t>(g->id)];
  clear_stall();
  while (s.done < t.total) {
    const int64_t k = std::min(next_evaluation(s.done, t.eval_every), t.total) - s.done;
    double round_seconds = 0;
    if (t.main_track) t.main_track->begin_unit(rounds++);
    int64_t did = 0;
    {
      TraceSpan span("round", "round");
      did = train_round(t, k, s.fresh, &round_seconds);
    }
    s.fresh = true;
    sum.train_seconds += round_seconds;
    s.done += did;
    bool failed_stop = false;
    EASEL_RETURN_IF_ERROR(after_failures(t, sum, s.done, &failed_stop));
    if (failed_stop) break;
    if (stall_declared()) {  // the groups are not at one step: no checkpoint of them
      sum.stopped = StopReason::stalled;
      sum.stop_message = first_stall() + "; the run stopped without a checkpoint of this round (" +
                         (s.done > 0 && checkpoints ? "the last good one, at step " +
                                                          std::to_string(s.done) + ", is kept)"
                                                    : std::string("there is none before it)"));
      sum.steps = s.done;
      break;
    }
    if (t.run.diverged.load()) {  // single process: a step's loss (no checkpoint of it)
      stop_diverged(t, sum, s.done);
      break;
    }
    if (did < k) {  // a signal ended the round early
      stop_mid_round(t, sum, s, checkpoints, flag);
      break;
    }
    const double e0 = now_seconds();
    std::vector<double> rows;
    {
      TraceSpan span("evaluation", "evaluation");
      rows = gather_rows(t, evaluate_model(t, test));
    }
    Decision decision = Decision::go_on;  // rank 0 decides; every rank follows
    EvalRecord rec;
    if (t.rank == 0)
      decision = record_round(t, sum, rows, e0, round_seconds, s, flag, rec);
    else
      sum.eval_seconds += now_seconds() - e0;
    // A diverged round keeps the last good checkpoint.
    if (checkpoints && decision != Decision::diverged && checkpoint_due(t, sum, s, decision)) {
      checkpoint(t, sum, s.done, rec.wall_seconds, s.last_images);
      s.evaluations_since_checkpoint = 0;
      s.last_checkpoint = now_seconds();
    }
    if (t.world) t.world->broadcast_bytes(&decision, sizeof decision, 0);
    if (stop_as_decided(t, sum, decision, rec, s.done, flag)) break;
  }
  sum.wall_seconds = now_seconds() - s.t0;
  return {};
}

}  // namespace easel
