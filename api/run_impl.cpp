// Run: train() (run/trainer.hpp) with an observer that turns its records into the public
// ones, writes the run directory (api/run_dir.hpp), asks the callbacks whether to go on and
// puts the caller's initial weights in place.
#include "easel/run.hpp"

#include <exception>
#include <optional>

#include "api/convert.hpp"
#include "engine/comm/mpi_comm.hpp"
#include "engine/log.hpp"
#include "run/trainer.hpp"

#ifndef EASEL_VERSION
#error "api/meson.build defines EASEL_VERSION"
#endif

namespace easel::api {

// The run as opened: its settings, a resumed run's checkpoint, the run directory's writer.
struct Run::Impl {
  TrainConfig cfg;
  run_dir::SettingTexts texts;
  std::optional<Checkpoint> resume;
  bool writer = false;  // writes the run directory (out given; rank 0)
  run_dir::Writer files;
};

class Run::Observer final : public TrainObserver {
 public:
  explicit Observer(Run& run) : run_(run), impl_(*run.impl_) {}

  // The run directory's files are written here, once the trainer has accepted the run (its
  // plan, memory fit, data and checkpoint): a refused run writes nothing.
  ::easel::Status on_start(const ::easel::RunInfo& info) override {
    run_.summary_.groups = static_cast<int>(info.plan.groups.size());
    run_.summary_.parameters = info.params;
    run_.summary_.algorithm = info.algorithm;
    run_.summary_.net = info.net;
    if (impl_.writer)
      EASEL_RETURN_IF_ERROR(impl_.files.prepare(impl_.cfg,
                                                run_dir::config_json(impl_.cfg, impl_.texts),
                                                impl_.resume ? &*impl_.resume : nullptr));
    if (!run_.on_start_) return {};
    api::RunInfo r;
    r.algorithm = info.algorithm;
    r.net = info.net;
    r.data = info.data;
    r.layout = info.layout;
    r.device = info.device;
    r.groups = static_cast<int>(info.plan.groups.size());
    r.threads_per_group =
        info.plan.groups.empty() ? 0 : static_cast<int>(info.plan.groups[0].cpus.size());
    r.ranks = info.ranks;
    r.parameters = info.params;
    r.flops_per_image = info.flops_per_image;
    r.total_steps = info.total_iterations;
    r.steps_per_epoch = info.iterations_per_epoch;
    run_.on_start_(r);
    return {};
  }

  void on_progress(int64_t step, int64_t total_steps, double epoch, double,
                   double images_per_second) override {
    last_ = Progress{step, total_steps, epoch, images_per_second};
    if (!run_.on_progress_) return;
    if (!run_.on_progress_(last_)) run_.stop();
  }

  void on_eval_progress(int64_t images, int64_t total) override {
    if (!run_.on_progress_) return;
    Progress p = last_;
    p.evaluating = true;
    p.test_images = images;
    p.test_total = total;
    if (!run_.on_progress_(p)) run_.stop();
  }

  void on_eval(const EvalRecord& r) override {
    if (impl_.writer) impl_.files.record(r);
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

  bool wants_checkpoints() const override {
    return impl_.writer && impl_.files.wants_checkpoints();
  }
  ::easel::Status on_checkpoint(Checkpoint ck) override {
    return impl_.files.checkpoint(std::move(ck));
  }
  ::easel::Status await_checkpoint() override { return impl_.files.finish_checkpoint(); }

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
  const std::atomic<int>* stop_flag() const override { return &run_.interrupt_; }

 private:
  Run& run_;
  Run::Impl& impl_;
  Progress last_;  // the round's last, which an evaluation's progress goes on from
};

Run::Run() = default;
Run::~Run() = default;

void Run::on_start(std::function<void(const RunInfo&)> callback) {
  on_start_ = std::move(callback);
}
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
void Run::interrupt(int signal) noexcept {
  int none = 0;
  interrupt_.compare_exchange_strong(none, signal > 0 ? signal : 1);
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

// Borrowed pixels (Data::borrow_train) stay in the memory the caller took them from: a
// --placement that puts the dataset class elsewhere cannot be honoured, and is refused rather
// than ignored.
Status check_borrowed_placement(const Data::Impl& d, const TrainConfig& cfg) {
  const MemKind kind = host_placement(cfg)[BufferClass::dataset];
  if (kind == MemKind::dram || !(d.split.train.pixels.borrowed() || d.split.test.pixels.borrowed()))
    return {};
  return {Code::invalid_argument,
          std::string("--placement: dataset=") + mem_kind_name(kind) +
              " cannot be honoured: the data set's pixels are borrowed from the caller's 8-bit "
              "arrays, which stay where the caller allocated them (leave the dataset class at "
              "dram)"};
}

StopReason public_reason(::easel::StopReason r) {
  switch (r) {
    case ::easel::StopReason::completed:
      return StopReason::completed;
    case ::easel::StopReason::target:
      return StopReason::target;
    case ::easel::StopReason::interrupted:
      return StopReason::interrupted;
    case ::easel::StopReason::diverged:
      return StopReason::diverged;
    case ::easel::StopReason::stalled:
      return StopReason::stalled;
    case ::easel::StopReason::requested:
      return StopReason::requested;
  }
  return StopReason::none;
}

void fill_summary(const TrainSummary& s, Summary& out) {
  out.test_accuracy = s.test_accuracy;
  out.test_loss = s.test_loss;
  out.best_accuracy = s.best_accuracy;
  out.evaluations = s.evaluations;
  out.steps = s.steps;
  out.images = s.images;
  out.epochs = s.epochs;
  out.wall_seconds = s.wall_seconds;
  out.train_seconds = s.train_seconds;
  out.eval_seconds = s.eval_seconds;
  out.setup_seconds = s.setup_seconds;
  out.images_per_second = s.images_per_second;
  out.comm_share = s.comm_share;
  out.exchanged_bytes_per_image = s.exchanged_bytes_per_image;
  out.wait_share = s.wait_share;
  out.target_accuracy = s.target_accuracy;
  out.time_to_target_seconds = s.time_to_target_seconds.value_or(-1);
  out.reached_target = s.stopped_at_target;
  out.stop_reason = public_reason(s.stopped);
  out.stopped = s.stopped == ::easel::StopReason::requested;
  out.stop_signal = s.stop_signal;
  out.stop_message = s.stop_message;
  out.group_failures.clear();
  for (const GroupFailure& f : s.group_failures)
    out.group_failures.push_back("group " + std::to_string(f.group) + " " + f.action + " at step " +
                                 std::to_string(f.step) + ": " + f.why);
}

}  // namespace

// The names are the trainer's (stop_reason_name in run/trainer.hpp, summary.json's "stopped"),
// so the two enums cannot drift apart in what they print.
const char* stop_reason_name(StopReason reason) {
  for (::easel::StopReason r : {::easel::StopReason::completed, ::easel::StopReason::target,
                                ::easel::StopReason::requested, ::easel::StopReason::interrupted,
                                ::easel::StopReason::diverged, ::easel::StopReason::stalled})
    if (public_reason(r) == reason) return ::easel::stop_reason_name(r);
  return "none";
}

Status Run::open(const Config& config) {
  if (trained_)
    return {Code::invalid_argument, "this Run has trained already: make a new Run for another"};
  if (impl_)
    return {Code::invalid_argument, "this Run is open already: make a new Run for another"};
  auto impl = std::make_unique<Impl>();
  impl->cfg = config.impl().cfg;
  impl->texts = config.impl().texts;
  TrainConfig& cfg = impl->cfg;
  if (Status st = from_internal(validate_config(cfg)); !st.ok()) return st;
  if (cfg.log_level) set_log_level(*cfg.log_level);
  try {  // (JSON refuses text that is not UTF-8)
    cfg.settings = run_dir::fixed_settings(cfg, impl->texts);
    if (!cfg.resume.empty())
      if (Status st = from_internal(run_dir::read_resume(cfg, impl->texts, &impl->resume));
          !st.ok())
        return st;
    impl->writer = !cfg.out.empty() && process_rank() == 0;  // under mpirun only rank 0 writes
    if (impl->writer)
      if (Status st = from_internal(run_dir::check_out(cfg, impl->resume.has_value())); !st.ok())
        return st;
  } catch (const std::exception& e) {
    return {Code::invalid_argument, std::string("the settings: ") + e.what()};
  }
  // A bare --trace file name goes into the run directory, beside the run's other files (a path
  // with a '/' is taken as it is).
  if (!cfg.trace.empty() && !cfg.out.empty() && cfg.trace.find('/') == std::string::npos)
    cfg.trace = cfg.out + "/" + cfg.trace;
  summary_.directory = cfg.out;
  summary_.rank = process_rank();
  impl_ = std::move(impl);
  return {};
}

Status Run::train(const Config& config, Data& data) {
  if (Status st = open(config); !st.ok()) return st;
  return train(data);
}

Status Run::train(Data& data) {
  return train_impl(&data);
}

Status Run::train() {
  return train_impl(nullptr);
}

Status Run::train_impl(Data* given) {
  if (!impl_) return {Code::invalid_argument, "Run::train: open() the run first"};
  if (trained_)
    return {Code::invalid_argument, "this Run has trained already: make a new Run for another"};
  Impl& impl = *impl_;
  DataSplit* data = nullptr;
  if (given) {
    if (Status st = check_split(given->impl()); !st.ok()) return st;
    if (Status st = check_borrowed_placement(given->impl(), impl.cfg); !st.ok()) return st;
    data = &given->impl().split;
    impl.cfg.data = given->impl().name;  // what the run's info names (config.json keeps the
                                         // setting, as the checkpoint's settings do)
  }
  trained_ = true;
  const TrainConfig& cfg = impl.cfg;
  try {
    std::optional<DataSplit> loaded;
    if (!data) {
      auto split = run_dir::load_train_data(cfg, impl.texts);
      if (!split.ok()) return from_internal(split.status());
      loaded = std::move(split).value();
      data = &*loaded;
    }
    Observer obs(*this);
    auto result = ::easel::train(cfg, *data, &obs, {}, impl.resume ? &*impl.resume : nullptr);
    if (!result.ok()) return from_internal(result.status());
    fill_summary(*result, summary_);
    weights_ = std::move(result->final_weights);
    if (impl.writer)
      if (Status st = from_internal(impl.files.write_summary(*result)); !st.ok()) return st;
    // A run that diverged or stalled ended with a summary (written with the run's files); it
    // is the failure it was before, with its message.
    if (result->stopped == ::easel::StopReason::diverged ||
        result->stopped == ::easel::StopReason::stalled)
      return {Code::internal, result->stop_message};
  } catch (const std::exception& e) {  // nothing crosses the API
    return {Code::internal, std::string("training failed: ") + e.what()};
  } catch (...) {
    return {Code::internal, "training failed: an unknown exception"};
  }
  return {};
}

Status read_run_settings(const std::string& dir,
                         std::vector<std::pair<std::string, std::string>>* settings) {
  auto read = run_dir::read_settings(dir);
  if (!read.ok()) return from_internal(read.status());
  *settings = std::move(read).value();
  return {};
}

const char* version() {
  return EASEL_VERSION;
}

}  // namespace easel::api
