// Run: train() (algos/trainer.hpp) with an observer that turns its records into the public
// ones, asks the callbacks whether to go on and puts the caller's initial weights in place.
#include "easel/run.hpp"

#include <exception>

#include "algos/trainer.hpp"
#include "api/convert.hpp"
#include "engine/log.hpp"

#ifndef EASEL_VERSION
#error "api/meson.build defines EASEL_VERSION"
#endif

namespace easel::api {

class Run::Observer final : public TrainObserver {
 public:
  explicit Observer(Run& run) : run_(run) {}

  void on_start(const RunInfo& info) override {
    run_.summary_.groups = static_cast<int>(info.plan.groups.size());
    run_.summary_.parameters = info.params;
    run_.summary_.algorithm = info.algorithm;
    run_.summary_.net = info.net;
    total_ = info.total_iterations;
  }

  void on_progress(int64_t step, int64_t total_steps, double epoch, double,
                   double images_per_second) override {
    if (!run_.on_progress_) return;
    if (!run_.on_progress_(Progress{step, total_steps, epoch, images_per_second})) run_.stop();
  }

  void on_eval(const EvalRecord& r) override {
    if (!run_.on_eval_) return;
    Evaluation e;
    e.step = r.step;
    e.images = r.images;
    e.epoch = r.epoch;
    e.train_loss = r.train_loss;
    e.test_loss = r.test_loss;
    e.test_accuracy = r.test_accuracy;
    e.images_per_second = r.images_per_second;
    e.wall_seconds = r.wall_seconds;
    e.train_seconds = r.train_seconds;
    e.eval_seconds = r.eval_seconds;
    for (const GroupTimes& g : r.group_times) {
      e.compute_seconds += g.compute;
      e.comm_seconds += g.comm;
      e.wait_seconds += g.wait;
    }
    if (!run_.on_eval_(e)) run_.stop();
  }

  ::easel::Status on_init_weights(std::span<float> weights) override {
    const std::vector<float>& w = run_.initial_;
    if (w.empty()) return {};
    if (w.size() != weights.size())
      return invalid_argument("initial weights: " + std::to_string(w.size()) +
                              " values, the net has " + std::to_string(weights.size()) +
                              " weights");
    std::copy(w.begin(), w.end(), weights.begin());
    return {};
  }

  bool should_stop() override { return run_.stop_.load(std::memory_order_relaxed); }

  int64_t total() const { return total_; }

 private:
  Run& run_;
  int64_t total_ = 0;
};

Run::Run() = default;
Run::~Run() = default;

void Run::on_evaluation(std::function<bool(const Evaluation&)> callback) {
  on_eval_ = std::move(callback);
}
void Run::on_progress(std::function<bool(const Progress&)> callback) {
  on_progress_ = std::move(callback);
}
void Run::set_initial_weights(std::vector<float> weights) {
  initial_ = std::move(weights);
}
void Run::stop() {
  stop_.store(true, std::memory_order_relaxed);
}

namespace {

// What train() needs of the data beyond what Data checked: both sets, of one shape.
Status check_split(const Data::Impl& d) {
  if (!d.has_train || !d.has_test)
    return {Code::invalid_argument, std::string("data: no ") + (d.has_train ? "test" : "training") +
                                        " set (Data::set_train/set_test or Data::load)"};
  const Dataset &a = d.split.train, &b = d.split.test;
  if (a.channels != b.channels || a.height != b.height || a.width != b.width ||
      a.classes != b.classes)
    return {Code::invalid_argument,
            "data: the test set's images are " + std::to_string(b.channels) + " x " +
                std::to_string(b.height) + " x " + std::to_string(b.width) + " in " +
                std::to_string(b.classes) + " classes, the training set's " +
                std::to_string(a.channels) + " x " + std::to_string(a.height) + " x " +
                std::to_string(a.width) + " in " + std::to_string(a.classes)};
  return {};
}

void fill_summary(const TrainSummary& s, Summary& out) {
  out.test_accuracy = s.test_accuracy;
  out.test_loss = s.test_loss;
  out.best_accuracy = s.best_accuracy;
  out.steps = s.steps;
  out.images = s.images;
  out.epochs = s.epochs;
  out.wall_seconds = s.wall_seconds;
  out.train_seconds = s.train_seconds;
  out.eval_seconds = s.eval_seconds;
  out.setup_seconds = s.setup_seconds;
  out.images_per_second = s.images_per_second;
  out.comm_share = s.comm_share;
  out.wait_share = s.wait_share;
  out.time_to_target_seconds = s.time_to_target_seconds.value_or(-1);
  out.reached_target = s.stopped_at_target;
}

}  // namespace

Status Run::train(const Config& config, Data& data) {
  if (trained_)
    return {Code::invalid_argument, "this Run has trained already: make a new Run for another"};
  trained_ = true;
  TrainConfig cfg = config.impl().cfg;
  if (!cfg.resume.empty())
    return {Code::invalid_argument, "resume: the API does not resume runs (easel train does)"};
  cfg.checkpoint = false;
  cfg.out.clear();
  if (Status st = check_split(data.impl()); !st.ok()) return st;
  cfg.data = data.impl().name;
  if (Status st = from_internal(validate_config(cfg)); !st.ok()) return st;
  if (cfg.log_level) set_log_level(*cfg.log_level);
  Observer obs(*this);
  try {
    auto result = ::easel::train(cfg, data.impl().split, &obs);
    if (!result.ok()) return from_internal(result.status());
    // A run that diverged or stalled ended with a summary (the CLI writes it); here it is the
    // failure it was before, with its message.
    if (result->stopped == StopReason::diverged || result->stopped == StopReason::stalled)
      return {Code::internal, result->stop_message};
    fill_summary(*result, summary_);
    summary_.stopped = result->stopped == StopReason::requested;
    weights_ = std::move(result->final_weights);
  } catch (const std::exception& e) {  // nothing crosses the API
    return {Code::internal, std::string("training failed: ") + e.what()};
  } catch (...) {
    return {Code::internal, "training failed: an unknown exception"};
  }
  return {};
}

const char* version() {
  return EASEL_VERSION;
}

}  // namespace easel::api
