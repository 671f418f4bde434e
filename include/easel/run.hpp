// One training run: a Config and a Data in, a Summary and the evaluated model's weights out,
// and, when the config names a run directory (`out`), the files easel train writes there.
// The run trains in rounds of `eval-every` iterations (default: one epoch), each followed by an
// evaluation of the model the algorithm names (the centre for the EASGD family, the replica
// for the SGD family) on the test set. Runs share no state: two runs of the same Config and
// Data (same seed, a deterministic algorithm) give the same numbers, in one process or two.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "easel/config.hpp"
#include "easel/data.hpp"
#include "easel/status.hpp"

namespace easel::api {

// One evaluation: the record that `easel train` writes as one line of metrics.jsonl.
struct Evaluation {
  int64_t step = 0;       // iterations of the run so far (each group steps once per iteration)
  int64_t images = 0;     // training images processed, all groups
  double epoch = 0;       // images / training-set size
  double train_loss = 0;  // mean over the round
  double test_loss = 0, test_accuracy = 0;
  double images_per_second = 0;  // over the round's training time
  double wall_seconds = 0, train_seconds = 0, eval_seconds = 0;
  double compute_seconds = 0, comm_seconds = 0, wait_seconds = 0;  // summed over groups
};

// Progress within a round, and within each evaluation (about 4 times a second).
struct Progress {
  int64_t step = 0, total_steps = 0;
  double epoch = 0;
  double images_per_second = 0;
  // During an evaluation: the test images evaluated so far and in all (across MPI ranks, rank
  // 0's share); step and epoch are those of the round it follows.
  bool evaluating = false;
  int64_t test_images = 0, test_total = 0;
};

// The run as planned, once it is set up (before its first step).
struct RunInfo {
  std::string algorithm, net, data, layout, device;
  int groups = 0, threads_per_group = 0;  // threads of the first group
  int ranks = 1;                          // MPI processes
  int64_t parameters = 0;
  double flops_per_image = 0;  // forward + backward
  int64_t total_steps = 0, steps_per_epoch = 0;
};

// How a run ended: summary.json's "stopped" (stop_reason_name).
enum class StopReason {
  none,         // no run ended: train() was not called, or failed before the run's end
  completed,    // its last iteration
  target,       // the test accuracy reached target-accuracy
  requested,    // a callback returned false, or stop()
  interrupted,  // interrupt(): every group ended its step; the checkpoint was taken there
  diverged,     // a non-finite loss or weight (train() returns internal; no checkpoint of it)
  stalled,      // a group waited past the stall timeout (train() returns internal)
};
// "none", "completed", "target", "requested", "interrupted", "diverged", "stalled".
const char* stop_reason_name(StopReason reason);

struct Summary {
  double test_accuracy = 0, test_loss = 0, best_accuracy = 0;  // of the last evaluation
  // Evaluations this run made: 0 (interrupted before its first) leaves the accuracies and the
  // test loss 0, unmeasured (summary.json: null).
  int64_t evaluations = 0;
  int64_t steps = 0, images = 0;
  double epochs = 0;
  double wall_seconds = 0, train_seconds = 0, eval_seconds = 0, setup_seconds = 0;
  double images_per_second = 0;
  double comm_share = 0, wait_share = 0;  // of compute + comm + wait, over all groups
  // Bytes all groups sent in their exchanges over the run, per training image (each group's
  // payload per exchange: its weights, gradient or step in fp32; for local-sgd's, slowmo's and
  // diloco's bf16 or int8 exchange, what their compressed allreduce sends over the transport);
  // 0 for one-group algorithms.
  double exchanged_bytes_per_image = 0;
  double target_accuracy = 0;          // the setting (0: none)
  double time_to_target_seconds = -1;  // training seconds to target-accuracy; -1: not set/met
  bool reached_target = false;
  bool stopped = false;  // stopped early by a callback or stop()
  StopReason stop_reason = StopReason::none;
  int stop_signal = 0;       // interrupted: the number interrupt() was given
  std::string stop_message;  // diverged, stalled: what happened and where (one line)
  int groups = 0;
  int64_t parameters = 0;  // the net's (weights() adds the alignment padding)
  std::string algorithm, net;
  std::string directory;  // the run directory (the out setting, or resume's); empty: none
  int rank = 0;           // this process's MPI rank: only rank 0 writes the run directory
  // Groups that failed and that the run went on without (dropped) or restarted (the on-failure
  // setting), one line each: "group 1 dropped at step 13: EASEL_FAULT: ... threw".
  std::vector<std::string> group_failures;
};

// A run directory (the `out` setting; `easel train --out`):
//   config.json    the settings a resumed run takes, keyed by name (written before the first
//                  step)
//   metrics.jsonl  one JSON record per evaluation (Evaluation's fields and more: each group's
//                  times and steps, staleness)
//   checkpoint.bin after every evaluation, unless the checkpoint setting is false; written
//                  whole or not at all (a temporary renamed into place)
//   best.bin       the checkpoint of the evaluation of the best test accuracy so far (a
//                  second name of that checkpoint.bin; `easel eval --weights best`)
//   summary.json   how the run ended ("stopped": stop_reason_name) and its figures, the
//                  groups, the layers, the net's input and classes, and config.json's settings
// A run never replaces an earlier run's results unless the overwrite setting is true. The
// `resume` setting (a run directory) goes on from its checkpoint in that directory: the
// settings must be the checkpoint run's (read_run_settings gives them), except those
// Config::may_change_on_resume allows; metrics.jsonl is appended to, past the checkpoint's step.

class Run {
 public:
  Run();
  ~Run();
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  // Called once the run is set up, before its first step, on the thread that called train().
  void on_start(std::function<void(const RunInfo&)> callback);
  // Called after each evaluation on the thread that called train() (after its metrics.jsonl
  // record); returning false stops the run there: its summary's steps are that evaluation's
  // step.
  void on_evaluation(std::function<bool(const Evaluation&)> callback);
  // Called during a round on the thread that called train(); returning false stops the run at
  // the end of the round (its next evaluation).
  void on_progress(std::function<bool(const Progress&)> callback);

  // The weights the run starts from (every replica and the centre), instead of the seed's
  // initialisation: a vector laid out as weights() returns it, of its size (train() says so
  // when it is not); e.g. another run's weights() or load_weights().
  void set_initial_weights(std::vector<float> weights);

  // Checks a run before anything is loaded or written: the settings (Config::validate), and
  // with `out` the run directory (never an earlier run's results without `overwrite`), with
  // `resume` its checkpoint and that the settings are its run's. An error here is the
  // caller's request (easel train exits 2). Sets the process's log level (`log-level`).
  // One Run opens once: a second open() or train() is invalid_argument.
  Status open(const Config& config);
  // After open(): trains (blocking) on `data`, or without it on the config's `data` setting,
  // loaded as easel train loads it (placed where `placement` and `device` put the data set).
  // With `out` it writes the run directory once every check has passed (the plan, the memory
  // fit, the data, a checkpoint; a run refused writes nothing), just before the first step and
  // on_start, and its summary.json last. Returns ok when
  // the run ended (completed, target, requested, interrupted: summary().stop_reason) and its
  // files are written; a diverged or stalled run is `internal` with summary().stop_message
  // (its summary filled and written too); any other error means no run ended.
  Status train(Data& data);
  Status train();
  // open(config), then train(data).
  Status train(const Config& config, Data& data);

  // May be called from any thread (a callback, a UI thread): the run stops after its next
  // evaluation.
  void stop();
  // Async-signal-safe (it stores into a lock-free atomic and does nothing else): call it from
  // a signal handler with the signal's number. Every group ends its current step, the
  // checkpoint is taken there (with `out`), and the run ends interrupted with stop_signal set.
  void interrupt(int signal) noexcept;

  // After train(): its summary, and the evaluated model's weights (the centre's for the EASGD
  // family) as easel holds them: one flat vector, the layers' weights and biases in the net's
  // order, each starting on a 16-float boundary (the gaps are padding, so its size is a little
  // more than summary().parameters).
  const Summary& summary() const { return summary_; }
  const std::vector<float>& weights() const { return weights_; }

  struct Impl;  // the run as opened (api/run_impl.cpp)

 private:
  class Observer;
  Status train_impl(Data* data);  // data: null for the config's `data` setting
  std::function<void(const RunInfo&)> on_start_;
  std::function<bool(const Evaluation&)> on_eval_;
  std::function<bool(const Progress&)> on_progress_;
  std::vector<float> initial_;
  std::atomic<bool> stop_{false};
  std::atomic<int> interrupt_{0};
  static_assert(std::atomic<int>::is_always_lock_free);
  std::unique_ptr<Impl> impl_;
  bool trained_ = false;
  Summary summary_;
  std::vector<float> weights_;
};

// The settings a run directory's config.json holds, as (name, text) pairs that Config::set
// takes, in the file's order (settings it leaves unset, an empty cpus list, are left out).
// Errors name the file and the key (not_found: no config.json there).
Status read_run_settings(const std::string& dir,
                         std::vector<std::pair<std::string, std::string>>* settings);

// A weights file: "EASELW1\n", the count as a little-endian uint64, the floats (little-endian
// IEEE-754). Errors name the file.
Status save_weights(const std::string& path, const std::vector<float>& weights);
Status load_weights(const std::string& path, std::vector<float>* weights);

// easel's version ("0.1.0").
const char* version();

}  // namespace easel::api
