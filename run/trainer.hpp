// The training driver: plans the worker groups, builds one Net replica per group on the
// group's own thread, gives every replica the same initial weights, then runs the chosen
// Algorithm in rounds, evaluating the model it names on the test set after each round.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "algos/algorithm.hpp"
#include "devices/list.hpp"
#include "nets/data/dataset.hpp"
#include "run/checkpoint.hpp"
#include "run/train_config.hpp"

namespace easel {

struct RunInfo {
  std::string algorithm, net, data, layout, device;
  std::string exchange_path;  // Algorithm::exchange_path(): sync-easgd's, else empty
  GroupPlan plan;             // all P groups (across MPI ranks on rank 0)
  int ranks = 1;              // MPI processes
  int64_t params = 0;
  int64_t total_iterations = 0, iterations_per_epoch = 0, eval_every = 0;
  double flops_per_image = 0;  // forward + backward
  std::vector<LayerInfo> layers;
  std::string placement;
  std::string clock;  // --clock's machine description (the records' seconds are its); else empty
  std::string clock_placement;  // --clock: where its groups' buffers are priced (ClockPrices)
  // The stall deadline and its source (RunPlan::stall_seconds, stall_source, stall_why).
  double stall_seconds = 0;
  std::string stall_source, stall_why;
  // The net's input image (the data's C x H x W) and classes: summary.json's "input", which
  // `easel predict` builds the net for without the data set.
  int64_t channels = 0, height = 0, width = 0, classes = 0;
};

struct EvalRecord {
  double wall_seconds = 0;   // since the start of training (includes evaluations)
  double train_seconds = 0;  // training only (evaluations excluded)
  double eval_seconds = 0;   // this evaluation
  double epoch = 0;          // images processed / training-set size
  int64_t step = 0;          // iterations of the run (group-steps / groups)
  int64_t images = 0;        // training images processed, all groups
  double train_loss = 0;     // mean over the round
  double test_loss = 0, test_accuracy = 0;
  int64_t test_images = 0;              // the test images evaluated (--eval-images: fewer)
  double images_per_second = 0;         // whole node, over the round's training time
  std::vector<GroupTimes> group_times;  // cumulative per group
  std::vector<int64_t> group_steps;
  double staleness_mean = 0;
  int64_t staleness_max = 0;
};

// How a run ended: summary.json's "stopped". completed: its last iteration; target: at
// --target-accuracy; interrupted: a signal (stop_signal) stopped every group at one step and a
// checkpoint was handed over; diverged: a non-finite loss or weight (no checkpoint of it; the
// last good one stays); stalled: a group waited past the stall timeout (the same).
// How a run ended (summary.json's "stopped"); requested: the observer asked it to stop
// (should_stop, an embedding program's callback), which the CLI never does.
enum class StopReason { completed, target, interrupted, diverged, stalled, requested };
const char* stop_reason_name(StopReason r);

struct TrainSummary {
  RunInfo info;
  // Every group failure, in the order they happened (drop and restart: the run went on).
  std::vector<GroupFailure> group_failures;
  StopReason stopped = StopReason::completed;
  int stop_signal = 0;       // interrupted: the signal's number
  std::string stop_message;  // diverged, stalled: what happened, where (one line)
  // Of the last evaluation, and the best of the run (a resumed one's too); 0 when none was
  // measured (evaluations 0: summary.json says null).
  double test_accuracy = 0, test_loss = 0;
  double best_accuracy = 0;
  int64_t evaluations = 0;  // evaluations this process's run made (not a resumed run's before)
  double epochs = 0;
  int64_t steps = 0, images = 0;
  double wall_seconds = 0, train_seconds = 0, eval_seconds = 0, setup_seconds = 0;
  double images_per_second = 0;
  std::optional<double> time_to_target_seconds;  // training seconds until target reached
  double target_accuracy = 0;
  bool stopped_at_target = false;
  std::vector<GroupTimes> group_times;
  double compute_seconds = 0, comm_seconds = 0, wait_seconds = 0;  // summed over groups
  double comm_share = 0, wait_share = 0;                           // of compute + comm + wait
  double exchanged_bytes_per_image = 0;               // exchanged_bytes_per_image() of the run
  double preempted_seconds = 0, preempted_share = 0;  // within them (GroupTimes::preempted)
  double staleness_mean = 0;
  int64_t staleness_max = 0;
  // Checkpoints handed to the observer by this process's run, and the time they took from
  // training (capture, gather across ranks, hand-off; the write itself is the observer's);
  // under --checkpoint-every auto the last Young/Daly interval (0: not auto).
  int64_t checkpoints = 0;
  double checkpoint_seconds = 0, checkpoint_interval_seconds = 0;
  std::vector<float> final_weights;   // the evaluated model (centre or replica), whole arena
  std::vector<float> group0_weights;  // group 0's replica, whole arena
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  // Once every check has passed and the run is built (plan, memory fit, data, a checkpoint
  // accepted), before the first step: what a refused run must not do (write its files) goes
  // here. An error ends the run, before any step.
  virtual Status on_start(const RunInfo&) { return {}; }
  // After set-up, before the first round: tests may install hooks on the run.
  virtual void on_setup(Run& run) { (void)run; }
  // Called about 4 times a second during a round, from the driver's thread.
  virtual void on_progress(int64_t step, int64_t total_steps, double epoch, double loss,
                           double images_per_second) {
    (void)step, (void)total_steps, (void)epoch, (void)loss, (void)images_per_second;
  }
  // Called about 4 times a second during an evaluation, from the driver's thread: the test
  // images evaluated so far and in all (rank 0's share across MPI ranks).
  virtual void on_eval_progress(int64_t images, int64_t total) { (void)images, (void)total; }
  virtual void on_eval(const EvalRecord&) {}
  // Whether the trainer hands it checkpoints: after every --checkpoint-every evaluations (or
  // auto's), the last evaluation's and a signal's stop always, none after a diverged one; across
  // MPI ranks rank 0's observer, with every rank's groups. The checkpoint is the observer's to
  // keep (it may write it after returning); an error (an earlier write's) is logged and the run
  // goes on, the last good checkpoint kept.
  virtual bool wants_checkpoints() const { return false; }
  virtual Status on_checkpoint(Checkpoint ck) {
    (void)ck;
    return {};
  }
  // Called before the trainer takes a checkpoint's snapshot: waits for the write of the one
  // before, so that one checkpoint at most is in host memory (as run/fit.hpp counts it); its
  // error, if any, as on_checkpoint's.
  virtual Status await_checkpoint() { return {}; }
  // The initial weights, before they go to every replica and the centre (rank 0's, then
  // broadcast): the observer may overwrite them (an embedding program's own). An error ends
  // the run.
  virtual Status on_init_weights(std::span<float> weights) {
    (void)weights;
    return {};
  }
  // Asked after each evaluation and its checkpoint (rank 0): true ends the run there.
  virtual bool should_stop() { return false; }
  // A flag that turns non-zero (the signal's number) when the run must stop: every group ends
  // its current step, the checkpoint is handed over and train() returns an interrupted summary.
  // Read at step boundaries in one process, at evaluations across MPI ranks (rank 0's). Null:
  // none.
  virtual const std::atomic<int>* stop_flag() const { return nullptr; }
};

// The worker-group plan for cfg on topo, for cfg's algorithm `algo` (as made from the run's
// row): the user's request, except that a one-group algorithm (sgd, msgd) on --groups auto
// gets one group of all the threads. An accelerator
// kind (--device cuda) gives each of its units one group: `devices` says which kinds there are
// and how many units each has (tests substitute a stand-in GPU).
Result<GroupPlan> plan_groups(const Algorithm& algo, const TrainConfig& cfg, const Topology& topo,
                              const DeviceRegistry& devices = {});

// Trains. `cfg` has passed validate_config (run/train_config.hpp); `data` is shared read-only
// by all groups.
// Across MPI ranks, data.train is replaced by the images this rank's groups read (keep_shards)
// and the rest is freed; in one process data is left as it is.
// With `resume` (a checkpoint of a run with the same algorithm, net, data, groups and batch,
// single-process), it goes on from there to cfg's end: the deterministic algorithms give the
// same numbers as a run that never stopped.
// `devices`: the device kinds --device chooses from (the built-in list unless a test
// substitutes its own).
Result<TrainSummary> train(const TrainConfig& cfg, DataSplit& data, TrainObserver* obs,
                           const DeviceRegistry& devices = {}, const Checkpoint* resume = nullptr);

// Evaluates `weights` on `ds` with this process's groups' nets in parallel: the group with
// global id q takes batches q, q+P, ... (P = run.total_groups(), so across MPI ranks each rank
// evaluates its share). `images` (0: all of ds) evaluates that many, spread evenly over the set
// (image j * ds.count / images, rounded down, for j < images: every part of a set sorted by
// class).
// Returns one partial per local group, in local id order. While it runs, `tick` (when set) is
// called on the calling thread about every 250 ms with the images this process's groups have
// evaluated and the images they evaluate in all.
using EvalTick = std::function<void(int64_t done, int64_t total)>;
std::vector<EvalStats> evaluate_groups(Run& run, const Dataset& ds, const float* weights,
                                       int64_t images = 0, const EvalTick& tick = {});

}  // namespace easel
