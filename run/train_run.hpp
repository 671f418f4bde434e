// The pieces of train() (run/trainer.cpp), each a step of its own: building the run
// (run_builder.cpp), restoring it from a checkpoint, the loop of rounds (train_loop.cpp) and
// the round's statistics and the summary (round_stats.cpp). Internal to algos/.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/trace.hpp"
#include "engine/worker.hpp"
#include "nets/models/models.hpp"
#include "run/comm_list.hpp"
#include "run/fit.hpp"
#include "run/run_plan.hpp"
#include "run/sim_clock.hpp"
#include "run/trainer.hpp"

namespace easel {

// Everything a run being trained holds. Members are declared in the order they must outlive
// each other: the devices outlive the run (its nets, arenas and Comm use their streams and
// handles); the destructor stops the algorithm, then drops the Comm, the groups and their
// threads, in that order.
struct TrainRun {
  TrainRun(const TrainConfig& config, TrainObserver* observer) : cfg(config), obs(observer) {}
  TrainRun(const TrainRun&) = delete;
  TrainRun& operator=(const TrainRun&) = delete;
  ~TrainRun();

  const TrainConfig& cfg;
  TrainObserver* obs;               // the caller's (never null)
  TrainObserver null_observer;      // what ranks other than 0 report to
  TrainObserver* report = nullptr;  // obs on rank 0, else &null_observer

  std::unique_ptr<Algorithm> algo;  // cfg.algo's
  DeviceRequest dev_req;            // cfg.device, bound to the run's device list

  // Across MPI ranks: rank 0 reports (the observer), every rank trains its groups.
  MpiComm* world = nullptr;
  // The processes' own broadcasts of whole arenas (the initial weights, each evaluation's): the
  // collective the run picked among the ranks (bandwidth-optimal for large arenas). Null in one
  // process.
  std::unique_ptr<Comm> world_comm;
  int ranks = 1, rank = 0;
  GroupPlan plan;  // this rank's groups
  // What the run does, resolved once by plan_run (run/run_plan.hpp): its residence, sync-easgd's
  // exchange path, the Comm and its collective, the memory fit. The rest of the trainer reads it.
  RunPlan resolved;
  std::optional<Fault> fault;  // EASEL_FAULT's (engine/fault.hpp), checked against the plan
  // The PUs of the cores no group of this rank uses: where the data pipelines' threads run
  // (empty: on each group's own cores).
  std::vector<int> data_cpus;
  int local = 0;  // this rank's groups
  int p = 0;      // P, the groups of the whole run
  NetSpec spec;
  int64_t train_count = 0;                           // the whole training set, on every rank
  int64_t per_epoch = 0, total = 0, eval_every = 0;  // iterations
  std::string identity;                              // what a checkpoint must match
  size_t arena_bytes = 0;                            // one replica's parameters

  std::vector<std::unique_ptr<Device>> devices;  // one shared, or one per accelerator group
  // --clock: the described machine's clock (resolved.clock's prices); the async algorithms'
  // groups take turns on it (run.clock). Null otherwise.
  std::unique_ptr<SimClock> clock;
  Run run;
  std::vector<std::unique_ptr<WorkerThread>> workers;
  bool prepared = false;  // algo->prepare(run) was called: finish(run) is due
  // With --trace (trace_run.cpp): the timeline, its main thread's track and this process's
  // groups' tracks (by local id); else null and empty.
  std::unique_ptr<Tracer> tracer;
  TraceTrack* main_track = nullptr;
  std::vector<TraceTrack*> group_tracks;
  // The evaluated model in host memory: across ranks rank 0's, broadcast for sharded
  // evaluation; on GPUs with resident weights, downloaded from the device.
  Arena eval_buf;
  // --on-failure: the groups' failures since the loop last took them (the groups' threads add
  // them, under failures_mu), and how often each local group was restarted.
  std::mutex failures_mu;
  std::vector<GroupFailure> failures;
  std::vector<int> restarts;
};

// ---- a group's failure (train_loop.cpp) ----

// Records group g's failure (`why`; `nonfinite`: a non-finite train loss) under --on-failure:
// logged, added to t.failures, the step it failed in counted lost (Run::lost_steps). Returns
// what the run does with g: the run's mode, restart turned drop after g's 8th restart. Called on
// g's thread, or on the trainer's for a stalled g (StallWatch) while g's thread does nothing.
OnFailure record_group_failure(TrainRun& t, Group& g, const std::string& why, bool nonfinite);

// ---- building the run (run_builder.cpp) ----

// cfg's algorithm and device into t, then plan_run: everything a run decides before it
// allocates, refused as train() refuses it (train(), --explain and --time-exchange call it).
Status plan_new_run(TrainRun& t, DataSplit& data, const DeviceRegistry& devices);
// train()'s setup: plan_new_run, build_run, init_weights, the trace (cfg.trace), restore_from
// `resume` (when given) and prepare_algorithm, each refusal agreed across MPI ranks.
Status set_up_run(TrainRun& t, DataSplit& data, const DeviceRegistry& devices,
                  const Checkpoint* resume);

// P groups (over all ranks) for `algo`, or why not (names --groups).
Status check_group_count(const Algorithm& algo, int p);

// Plans the groups (across MPI ranks each rank its own), the net, the run's length and its
// parameters (t.run.params), and resolves the rest of the run (t.resolved: resolve_plan, then the
// memory fit); keeps this rank's shards of data.train.
Status plan_run(TrainRun& t, DataSplit& data, const DeviceRegistry& devices);
// t.resolved's decisions for a run planned up to its parameters, each by its one function: the
// residence, sync-easgd's path (which the algorithm is then given in t.run.params.exchange), the
// Comm and its collective, the deadline. Refuses what the run cannot do (naming the flag).
Status resolve_plan(TrainRun& t, const NetCost& cost);
// Makes the devices, the groups (each on its own thread) and the Comm.
Status build_run(TrainRun& t, const Dataset& train);
// Whether the groups' weights stay on their devices (Run::resident), once t is planned.
bool resident_for(const TrainRun& t);
// What the run asks of its Comm (comm_list.hpp), once t is planned and t.run.params made.
CommNeeds comm_needs(const TrainRun& t, int64_t arena_floats, std::span<Device* const> devices);
// The same initial weights everywhere (rank 0's, broadcast: every rank reaches it), and the
// centre where the algorithm has one.
Status init_weights(TrainRun& t);
// Across MPI ranks, every rank's outcome of a setup step, agreed before the next collective
// (engine/comm/mpi_comm.hpp, agree_on_outcome): a refusal ends every rank together, with one
// report. One process: `mine`.
Status agreed_outcome(const TrainRun& t, Status mine);
// With a checkpoint: puts its state into the run and checks that cfg may continue it.
Status restore_from(TrainRun& t, const Checkpoint& resume);
// The algorithm's own buffers (after the weights are in place), and from a checkpoint the
// centre's momentum.
Status prepare_algorithm(TrainRun& t, const Checkpoint* resume);
// What the run is (on rank 0 with every rank's groups).
void describe_run(TrainRun& t, RunInfo& info);

// ---- the loop (train_loop.cpp) ----

// Trains from the start (or from `resume`) to cfg's end or its target: rounds of eval_every
// iterations, each followed by an evaluation on `test`, its record and, single-process, a
// checkpoint. Fills sum's per-round fields and how the run stopped (sum.stopped): at its end, its
// target, a signal (the observer's stop_flag: every group ends its step, the checkpoint is taken
// there) or a non-finite loss or weight (named; no checkpoint of it).
Status run_rounds(TrainRun& t, const Dataset& test, const Checkpoint* resume, TrainSummary& sum);

// ---- the timeline (trace_run.cpp) ----

// With cfg.trace (after build_run, before prepare_algorithm): the tracer and its tracks, the
// main thread's, each group's (its spans named for the algorithm's phases) and the centre's
// (run.centre_trace), on every rank (the ranks' clocks start at rank 0's).
void start_trace(TrainRun& t);
// Writes the trace file (cfg.trace; rank R > 0: trace_path_for_rank), once no thread records:
// after the algorithm finished. A failure is logged; the run's results stand.
void write_trace(TrainRun& t);

// ---- the round's statistics (round_stats.cpp) ----

// Every group's row of the round (its steps, losses, times, staleness and its part of the
// evaluation), in global group order on rank 0 (other ranks: their own rows, sent to rank 0).
std::vector<double> gather_rows(const TrainRun& t, const std::vector<EvalStats>& eval_part);
// The round's record from all P rows (rank 0), timings aside.
EvalRecord make_record(const TrainRun& t, const std::vector<double>& rows);
// How a round ends the run.
enum class Decision : int32_t { go_on = 0, target = 1, diverged = 2, interrupted = 3, stopped = 4 };
// Takes the round's record into the summary; whether the run reached its target or diverged.
Decision add_round(TrainSummary& sum, const EvalRecord& rec, double target_accuracy);
// The run's totals and shares, and the final weights (before the algorithm is finished).
void finish_summary(TrainRun& t, TrainSummary& sum);

}  // namespace easel
