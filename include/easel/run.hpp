// One training run: a Config and a Data in, a Summary and the evaluated model's weights out.
// The run trains in rounds of `eval-every` iterations (default: one epoch), each followed by an
// evaluation of the model the algorithm names (the centre for the EASGD family, the replica
// for the SGD family) on the test set. Runs share no state: two runs of the same Config and
// Data (same seed, a deterministic algorithm) give the same numbers, in one process or two.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
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

// Progress within a round (about 4 times a second).
struct Progress {
  int64_t step = 0, total_steps = 0;
  double epoch = 0;
  double images_per_second = 0;
};

struct Summary {
  double test_accuracy = 0, test_loss = 0, best_accuracy = 0;  // of the last evaluation
  int64_t steps = 0, images = 0;
  double epochs = 0;
  double wall_seconds = 0, train_seconds = 0, eval_seconds = 0, setup_seconds = 0;
  double images_per_second = 0;
  double comm_share = 0, wait_share = 0;  // of compute + comm + wait, over all groups
  double time_to_target_seconds = -1;     // training seconds to target-accuracy; -1: not set/met
  bool reached_target = false;
  bool stopped = false;  // stopped early by a callback or stop()
  int groups = 0;
  int64_t parameters = 0;  // the net's (weights() adds the alignment padding)
  std::string algorithm, net;
};

class Run {
 public:
  Run();
  ~Run();
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  // Called after each evaluation on the thread that called train(); returning false stops the
  // run there: its summary's steps are that evaluation's step.
  void on_evaluation(std::function<bool(const Evaluation&)> callback);
  // Called during a round on the thread that called train(); returning false stops the run at
  // the end of the round (its next evaluation).
  void on_progress(std::function<bool(const Progress&)> callback);

  // The weights the run starts from (every replica and the centre), instead of the seed's
  // initialisation: a vector laid out as weights() returns it, of its size (train() says so
  // when it is not); e.g. another run's weights() or load_weights().
  void set_initial_weights(std::vector<float> weights);

  // Validates config and data, then trains (blocking). Errors name the setting or the data; a
  // diverged run is `internal`. One run trains once: a second train() is invalid_argument.
  // Settings the API does not use: out, overwrite, checkpoint, progress (it writes no files and
  // draws nothing); resume is refused.
  Status train(const Config& config, Data& data);

  // May be called from any thread (a callback, a signal handler's thread): the run stops after
  // its next evaluation.
  void stop();

  // After train(): its summary, and the evaluated model's weights (the centre's for the EASGD
  // family) as easel holds them: one flat vector, the layers' weights and biases in the net's
  // order, each starting on a 16-float boundary (the gaps are padding, so its size is a little
  // more than summary().parameters).
  const Summary& summary() const { return summary_; }
  const std::vector<float>& weights() const { return weights_; }

 private:
  class Observer;
  std::function<bool(const Evaluation&)> on_eval_;
  std::function<bool(const Progress&)> on_progress_;
  std::vector<float> initial_;
  std::atomic<bool> stop_{false};
  bool trained_ = false;
  Summary summary_;
  std::vector<float> weights_;
};

// A weights file: "EASELW1\n", the count as a little-endian uint64, the floats (little-endian
// IEEE-754). Errors name the file.
Status save_weights(const std::string& path, const std::vector<float>& weights);
Status load_weights(const std::string& path, std::vector<float>* weights);

// easel's version ("0.1.0").
const char* version();

}  // namespace easel::api
