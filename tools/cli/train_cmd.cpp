// `easel train`: validates everything first, then loads the data, prepares the output
// directory (never overwriting an earlier run's results unless --overwrite), trains with a
// progress bar (terminal) or periodic lines, and writes metrics.jsonl and summary.json.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "algos/trainer.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "engine/comm/mpi_comm.hpp"
#include "engine/config.hpp"
#include "engine/log.hpp"
#include "tools/cli/cli.hpp"

namespace easel::cli {

namespace fs = std::filesystem;
using nlohmann::json;

bool write_atomic(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  std::error_code ec, ignored;
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return false;  // not opened: whatever is at tmp is not ours to remove
    if (!(f << text) || !f.flush()) {
      f.close();
      fs::remove(tmp, ignored);  // our half-written file goes
      return false;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ignored);
  return !ec;
}

namespace {

// The signal that asks the run to stop (0: none). The handler only stores into it (a lock-free
// atomic, async-signal-safe); a second signal ends the process at once with _exit, which leaves
// the last checkpoint whole (checkpoints are renamed into place).
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  if (!g_stop_signal.compare_exchange_strong(none, sig)) ::_exit(128 + sig);
}

// SIGINT, SIGTERM and SIGUSR1 (which batch systems send before a time limit) end the run at the
// next step of every group, with a checkpoint and a summary marked interrupted.
void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGUSR1})
    sigaction(sig, &sa, nullptr);
}

// The exit code of a train run that ran to a summary (summary.json's "stopped"); the one place
// that maps them: 0 completed or at its target, 128 + the signal when interrupted (130 SIGINT,
// 143 SIGTERM, 138 SIGUSR1: as a shell reports a process that signal killed), 3 diverged,
// 4 stalled. Anything that fails before or outside training exits with Failure's 1 or 2.
int exit_code(StopReason stopped, int signal) {
  switch (stopped) {
    case StopReason::completed:
    case StopReason::target:
    case StopReason::requested:  // an observer's request; the CLI's never makes one
      return 0;
    case StopReason::interrupted:
      return 128 + signal;
    case StopReason::diverged:
      return 3;
    case StopReason::stalled:
      return 4;
  }
  return static_cast<int>(Failure::run);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
  }
  return "a signal";
}

std::string default_out(const std::string& algo) {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return "runs/" + std::string(buf) + "-" + algo;
}

json times_json(const GroupTimes& t) {
  return {{"compute_seconds", t.compute},
          {"comm_seconds", t.comm},
          {"wait_seconds", t.wait},
          {"preempted_seconds", t.preempted}};
}

// A setting's entry in config.json: a text as given, a number or a boolean as the run uses it.
json setting_json(const Setting& s, const TrainConfig& cfg, const std::string& text) {
  switch (s.field.type) {
    case SettingType::text:
      return text;
    case SettingType::boolean:
      return s.field.show(cfg) == "true";
    case SettingType::integer: {
      const std::string shown = s.field.show(cfg);
      if (shown.front() == '-') return std::stoll(shown);
      return std::stoull(shown);  // the seed may pass 2^63
    }
    case SettingType::real:
      return std::strtod(s.field.show(cfg).c_str(), nullptr);  // show reads back exactly
  }
  return nullptr;
}

// config.json: every setting a resumed run takes from it, keyed by its flag's name.
json config_json(const TrainConfig& cfg, const SettingValues& values) {
  json j = json::object();
  const auto settings = train_settings();
  for (size_t i = 0; i < settings.size(); ++i)
    if (settings[i].kept()) j[settings[i].name] = setting_json(settings[i], cfg, values[i].text);
  return j;
}

std::string hms(double s) {
  if (!std::isfinite(s) || s < 0) s = 0;
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

// Whether the file ends with a newline (or is empty or missing).
bool ends_with_newline(const fs::path& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f || f.tellg() <= 0) return true;
  f.seekg(-1, std::ios::end);
  return f.get() == '\n';
}

// Keeps the records of metrics.jsonl up to the checkpoint's step: a run killed after an
// evaluation's line but before its checkpoint would otherwise log that step twice, and one
// killed while writing a line leaves half a line. Drops those, and says how many it dropped.
// *last_step: the largest step of a record in the file (-1: none).
Status trim_metrics(const fs::path& path, int64_t step, int64_t* last_step) {
  *last_step = -1;
  std::ifstream in(path);
  if (!in) return {};  // none yet: the resumed run starts it
  std::string kept, line;
  int dropped = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    const bool record =
        !j.is_discarded() && j.is_object() && j.contains("step") && j["step"].is_number_integer();
    if (record) *last_step = std::max(*last_step, j["step"].get<int64_t>());
    if (record && j["step"].get<int64_t>() <= step)
      kept += line + "\n";
    else
      ++dropped;
  }
  in.close();
  if (dropped == 0) return {};
  if (!write_atomic(path, kept)) return io_error("cannot rewrite " + path.string());
  log_warn("train", path.string() + ": dropped " + std::to_string(dropped) +
                        " line(s) past the checkpoint's step " + std::to_string(step) +
                        " or not a metrics record");
  return {};
}

class Reporter final : public TrainObserver {
 public:
  // resume_step >= 0: a resumed run; metrics.jsonl is trimmed to that step and opened for
  // appending at the first evaluation (after the trainer has accepted the checkpoint).
  // config_text: written to config.json at on_start, once the trainer has accepted the
  // checkpoint (a refused --resume leaves the run's files as they were).
  Reporter(std::ofstream& metrics, Progress mode, std::string checkpoint_path,
           fs::path metrics_path, int64_t resume_step, std::string config_text)
      : metrics_(metrics),
        checkpoint_path_(std::move(checkpoint_path)),
        metrics_path_(std::move(metrics_path)),
        resume_step_(resume_step),
        config_text_(std::move(config_text)) {
    bar_ = mode == Progress::bar || (mode == Progress::automatic && isatty(STDERR_FILENO));
    lines_ = mode == Progress::lines || (mode == Progress::automatic && !bar_);
    t0_ = std::chrono::steady_clock::now();
  }

  void on_start(const RunInfo& info) override {
    if (!config_text_.empty() && !metrics_path_.empty() &&
        !write_atomic(metrics_path_.parent_path() / "config.json", config_text_))
      log_error("train",
                "cannot rewrite " + (metrics_path_.parent_path() / "config.json").string());
    std::printf(
        "easel: %s on %s, %zu group(s) x %d thread(s), %lld params, %.2f MFLOP/image, "
        "%lld iterations (%lld per epoch), layout %s\n",
        info.algorithm.c_str(), info.net.c_str(), info.plan.groups.size(),
        info.plan.groups.empty() ? 0 : static_cast<int>(info.plan.groups[0].cpus.size()),
        static_cast<long long>(info.params), info.flops_per_image / 1e6,
        static_cast<long long>(info.total_iterations),
        static_cast<long long>(info.iterations_per_epoch), info.layout.c_str());
    std::fflush(stdout);
  }

  void on_progress(int64_t step, int64_t total, double epoch, double, double ips) override {
    const double el = seconds();
    if (bar_) {
      const int width = 30;
      const double frac = total ? static_cast<double>(step) / static_cast<double>(total) : 0;
      const int fill = static_cast<int>(frac * width);
      std::string b(static_cast<size_t>(fill), '=');
      if (fill < width) b += '>';
      b.resize(width, ' ');
      const double eta = frac > 0 ? el / frac - el : 0;
      std::fprintf(stderr, "\r[%s] %5.1f%% epoch %.2f step %lld/%lld %6.0f img/s ETA %s ",
                   b.c_str(), 100 * frac, epoch, static_cast<long long>(step),
                   static_cast<long long>(total), ips, hms(eta).c_str());
      std::fflush(stderr);
      dirty_ = true;
    } else if (lines_ && el - last_line_ >= 10) {
      last_line_ = el;
      std::fprintf(stderr, "progress: step %lld/%lld epoch %.2f %.0f img/s elapsed %s\n",
                   static_cast<long long>(step), static_cast<long long>(total), epoch, ips,
                   hms(el).c_str());
    }
  }

  void on_eval(const EvalRecord& r) override {
    if (resume_step_ >= 0 && !metrics_path_.empty()) {
      int64_t last = -1;
      if (Status st = trim_metrics(metrics_path_, resume_step_, &last); !st.ok()) {
        // Its records past the checkpoint stay: the resumed run's records up to the last of
        // them are not appended, so that no step is logged twice.
        skip_through_ = last;
        log_error("train",
                  st.message() + (last < 0 ? std::string(" (appending after it)")
                                           : ": its records up to step " + std::to_string(last) +
                                                 " stay as they are, and this run "
                                                 "appends only later ones"));
      }
      const bool cut = !ends_with_newline(metrics_path_);  // a half line a failed trim kept
      metrics_.open(metrics_path_, std::ios::app);
      if (!metrics_) log_error("train", "cannot append to " + metrics_path_.string());
      if (cut) metrics_ << "\n";  // it stays alone
      resume_step_ = -1;
    }
    if (dirty_) {
      std::fprintf(stderr, "\r%*s\r", 110, "");
      dirty_ = false;
    }
    GroupTimes tot;
    json groups = json::array();
    for (size_t i = 0; i < r.group_times.size(); ++i) {
      const GroupTimes& t = r.group_times[i];
      tot.compute += t.compute;
      tot.comm += t.comm;
      tot.wait += t.wait;
      tot.preempted += t.preempted;
      json g = times_json(t);
      g["id"] = i;
      g["steps"] = r.group_steps[i];
      groups.push_back(g);
    }
    json j = {{"wall_seconds", r.wall_seconds},
              {"train_seconds", r.train_seconds},
              {"eval_seconds", r.eval_seconds},
              {"epoch", r.epoch},
              {"step", r.step},
              {"images", r.images},
              {"train_loss", r.train_loss},
              {"test_loss", r.test_loss},
              {"test_accuracy", r.test_accuracy},
              {"images_per_second", r.images_per_second},
              {"compute_seconds", tot.compute},
              {"comm_seconds", tot.comm},
              {"wait_seconds", tot.wait},
              {"preempted_seconds", tot.preempted},
              {"staleness_mean", r.staleness_mean},
              {"staleness_max", r.staleness_max},
              {"groups", groups}};
    if (r.step > skip_through_) {
      metrics_ << j.dump() << "\n";
      metrics_.flush();
    }
    std::printf(
        "epoch %6.2f  step %7lld  train loss %.4f  test loss %.4f  test accuracy %.4f  "
        "%7.0f img/s  [%s]\n",
        r.epoch, static_cast<long long>(r.step), r.train_loss, r.test_loss, r.test_accuracy,
        r.images_per_second, hms(r.wall_seconds).c_str());
    std::fflush(stdout);
  }

  bool wants_checkpoints() const override { return !checkpoint_path_.empty(); }
  const std::atomic<int>* stop_flag() const override { return &g_stop_signal; }
  Status on_checkpoint(const Checkpoint& ck) override {
    const auto t = std::chrono::steady_clock::now();
    Status st = write_checkpoint(checkpoint_path_, ck);
    log_debug(
        "train",
        "checkpoint at step " + std::to_string(ck.iterations_done) + " written in " +
            std::to_string(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count() * 1e3) +
            " ms");
    return st;
  }

 private:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  std::ofstream& metrics_;
  std::string checkpoint_path_;  // empty: none
  fs::path metrics_path_;
  int64_t resume_step_ = -1;
  int64_t skip_through_ = -1;  // records up to this step are in metrics.jsonl already
  std::string config_text_;
  bool bar_ = false, lines_ = false, dirty_ = false;
  double last_line_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

json summary_json(const TrainSummary& s, json config) {
  json groups = json::array();
  for (size_t i = 0; i < s.group_times.size(); ++i) {
    json g = times_json(s.group_times[i]);
    g["id"] = i;
    g["cpus"] = s.info.plan.groups[i].cpus;
    groups.push_back(g);
  }
  json layers = json::array();
  for (const auto& l : s.info.layers)
    layers.push_back({{"name", l.name},
                      {"kind", l.kind},
                      {"impl", l.impl},
                      {"params", l.params},
                      {"dst", l.dst.to_string()}});
  return {
      {"stopped", stop_reason_name(s.stopped)},
      {"test_accuracy", s.test_accuracy},
      {"test_loss", s.test_loss},
      {"best_accuracy", s.best_accuracy},
      {"epochs", s.epochs},
      {"steps", s.steps},
      {"images", s.images},
      {"wall_seconds", s.wall_seconds},
      {"train_seconds", s.train_seconds},
      {"eval_seconds", s.eval_seconds},
      {"setup_seconds", s.setup_seconds},
      {"images_per_second", s.images_per_second},
      {"gflops_per_second", s.images_per_second * s.info.flops_per_image / 1e9},
      {"time_to_target_seconds",
       s.time_to_target_seconds ? json(*s.time_to_target_seconds) : json(nullptr)},
      {"target_accuracy", s.target_accuracy},
      {"algorithm", s.info.algorithm},
      {"groups", s.info.plan.groups.size()},
      {"ranks", s.info.ranks},
      {"threads_per_group", s.info.plan.groups.empty() ? 0 : s.info.plan.groups[0].cpus.size()},
      {"net", s.info.net},
      {"data", s.info.data},
      {"params", s.info.params},
      {"flops_per_image", s.info.flops_per_image},
      {"compute_seconds", s.compute_seconds},
      {"comm_seconds", s.comm_seconds},
      {"wait_seconds", s.wait_seconds},
      {"comm_share", s.comm_share},
      {"wait_share", s.wait_share},
      {"preempted_seconds", s.preempted_seconds},
      {"preempted_share", s.preempted_share},
      {"staleness_mean", s.staleness_mean},
      {"staleness_max", s.staleness_max},
      {"placement", s.info.placement},
      {"group_times", groups},
      {"layers", layers},
      {"config", std::move(config)},
  };
}

// Whether the flag `name` (without dashes) may be given with --resume.
bool may_change_on_resume(const std::string& name) {
  if (name == "help") return true;
  const Setting* s = find_setting(name);
  return s && s->may_change();
}

// config.json's value of setting s as its flag's text; errors name the file and the key.
Result<std::string> flag_text(const Setting& s, const json& v, const std::string& file) {
  const auto wrong = [&] {
    return data_error("--resume: " + file + ": key '" + s.name + "' has the wrong type");
  };
  switch (s.field.type) {
    case SettingType::boolean:
      if (!v.is_boolean()) return wrong();
      return std::string(v.get<bool>() ? "true" : "false");
    case SettingType::text:
      if (!v.is_string()) return wrong();
      return v.get<std::string>();
    case SettingType::integer:
      if (!v.is_number_integer()) return wrong();
      return v.dump();
    case SettingType::real:
      if (!v.is_number()) return wrong();
      return v.dump();
  }
  return wrong();
}

}  // namespace

Result<std::vector<std::string>> resume_args(const std::string& dir,
                                             const std::vector<std::string>& given) {
  for (const std::string& g : given)
    if (!may_change_on_resume(g))
      return invalid_argument("--resume: --" + g +
                              " cannot change when a run continues (its config.json fixes it)");
  const fs::path path = fs::path(dir) / "config.json";
  std::error_code ec;
  if (!fs::exists(path, ec))
    return not_found("--resume: " + path.string() + ": no such file (not a run's --out?)");
  if (!fs::is_regular_file(path, ec))
    return data_error("--resume: " + path.string() + ": not a regular file");
  std::ifstream f(path);
  if (!f) return io_error("--resume: " + path.string() + ": cannot be read");
  json j = json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return data_error("--resume: " + path.string() + ": not a JSON object");
  // --epochs alone replaces the run's length in iterations, if it had one.
  const auto given_has = [&](const char* f) {
    return std::find(given.begin(), given.end(), f) != given.end();
  };
  const bool epochs_only = given_has("epochs") && !given_has("iterations");
  std::vector<std::string> args;
  for (const auto& [key, v] : j.items()) {
    if (epochs_only && key == "iterations") continue;
    const Setting* s = find_setting(key);
    if (!s || key != s->name || !s->takes(kTrainCommand))
      return data_error("--resume: " + path.string() + ": unknown key '" + printable(key) + "'");
    EASEL_ASSIGN_OR_RETURN(std::string value, flag_text(*s, v, path.string()));
    if (s->field.type == SettingType::text && value.empty()) continue;  // an unset list (cpus)
    args.push_back("--" + key + "=" + value);
  }
  return args;
}

namespace {

// The settings a resumed run may not change, as JSON: part of a checkpoint's identity.
json fixed_settings(const TrainConfig& cfg, const SettingValues& values) {
  json j = config_json(cfg, values);
  for (auto it = j.begin(); it != j.end();)
    it = may_change_on_resume(it.key()) ? j.erase(it) : std::next(it);
  return j;
}

// A resumed run's settings against its checkpoint's: the first key that differs, named with
// the run's config.json (an edit there would otherwise go on silently with other settings).
Status check_settings(const Checkpoint& ck, const TrainConfig& cfg, const SettingValues& values) {
  const size_t at = ck.identity.find(kSettingsMark);
  if (at == std::string::npos) return {};  // not written by easel train: the identity decides
  const json had = json::parse(ck.identity.substr(at + std::strlen(kSettingsMark)), nullptr, false);
  if (had.is_discarded() || !had.is_object()) return {};
  const json now = fixed_settings(cfg, values);
  std::string changeable;  // the config.json keys a resumed run may change
  for (const Setting& s : train_settings())
    if (s.kept() && s.may_change())
      changeable += (changeable.empty() ? "--" : ", --") + std::string(s.name);
  const std::string file = (fs::path(cfg.resume) / "config.json").string();
  for (const auto& [key, v] : now.items()) {
    // A setting added after the checkpoint was written: its run had the default.
    if (const Setting* s = find_setting(key);
        !had.contains(key) && s && v == setting_json(*s, TrainConfig{}, s->default_text()))
      continue;
    if (!had.contains(key) || had[key] != v)
      return invalid_argument("--resume: " + file + ": '" + key + "' is " + v.dump() +
                              ", but the checkpoint's run had " +
                              (had.contains(key) ? had[key].dump() : std::string("no such key")) +
                              " (only " + changeable + " may change)");
  }
  return {};
}

}  // namespace

namespace {

// The text of the setting `name` among `values`.
const std::string& text_of(const SettingValues& values, const char* name) {
  return values[static_cast<size_t>(find_setting(name) - train_settings().data())].text;
}

// --resume: the checkpoint, after checking that the run may go on from it here; cfg.out becomes
// the run's directory.
Status read_resume(TrainConfig& cfg, const SettingValues& values, std::optional<Checkpoint>* ck) {
  if (process_count() > 1)
    return invalid_argument("--resume: checkpoints are for single-process runs");
  if (!cfg.out.empty() && fs::path(cfg.out) != fs::path(cfg.resume))
    return invalid_argument("--out: a resumed run goes on in its own directory (" + cfg.resume +
                            ")");
  cfg.out = cfg.resume;
  auto read = read_checkpoint((fs::path(cfg.resume) / "checkpoint.bin").string());
  if (!read.ok()) return Status(read.status().code(), "--resume: " + read.status().message());
  *ck = std::move(read).value();
  return check_settings(**ck, cfg, values);
}

// Whether --out may take this run's results (never an earlier run's, unless --overwrite).
Status check_out(const TrainConfig& cfg, bool resumed) {
  const fs::path out(cfg.out);
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    return invalid_argument("--out: " + cfg.out + " exists and is not a directory");
  if (!resumed && !cfg.overwrite &&
      (fs::exists(out / "summary.json", ec) || fs::exists(out / "metrics.jsonl", ec)))
    return invalid_argument("--out: " + cfg.out +
                            " already holds the results of a run (pass --overwrite to replace "
                            "them, or choose another --out)");
  return {};
}

// The data set, placed as --placement says (GPU groups: in pinned host memory unless
// --placement is given, so that each batch is copied to the GPU asynchronously).
Result<DataSplit> load_train_data(const TrainConfig& cfg, const SettingValues& values) {
  MemKind dataset_kind = cfg.placement[BufferClass::dataset];
  if (cfg.device.gpu) {
    if (Status s = prepare_gpu_memory(); !s.ok())
      return Status(s.code(), "--device " + device_text(cfg.device) + ": " + s.message());
    if (text_of(values, "placement") == find_setting("placement")->default_text())
      dataset_kind = MemKind::pinned_host;
  }
  return load_data(cfg.data, dataset_kind, cfg.seed);
}

// Removes the checkpoint temporaries (checkpoint.bin.tmp.PID.RANDOM) that a killed run left in
// `out`: those of processes that are gone.
void remove_stale_temporaries(const fs::path& out) {
  const std::string prefix = "checkpoint.bin.tmp.";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::error_code ignored;
      fs::remove(e.path(), ignored);
    }
  }
}

// Creates --out and its files for this run: a fresh run's metrics.jsonl and config.json (the
// earlier run's checkpoint and summary go, so that a run that fails leaves no results of
// another beside its own); a resumed run's metrics.jsonl is appended to at the first evaluation
// (Reporter).
Status prepare_out(const TrainConfig& cfg, const json& config, const Checkpoint* resume,
                   std::ofstream& metrics) {
  const fs::path out(cfg.out);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return io_error("--out: cannot create " + cfg.out + ": " + ec.message());
  remove_stale_temporaries(out);
  if (resume) {
    if (fs::exists(out / "metrics.jsonl", ec) &&
        !std::ofstream(out / "metrics.jsonl", std::ios::app))
      return io_error("--resume: cannot append to " + (out / "metrics.jsonl").string());
    if (!cfg.checkpoint)
      log_warn("train", "--no-checkpoint: " + (out / "checkpoint.bin").string() +
                            " stays at step " + std::to_string(resume->iterations_done) +
                            "; a later --resume goes on from there");
    return {};
  }
  fs::remove(out / "checkpoint.bin", ec);
  fs::remove(out / "summary.json", ec);
  metrics.open(out / "metrics.jsonl", std::ios::trunc);
  if (!metrics) return io_error("--out: cannot write " + (out / "metrics.jsonl").string());
  if (!write_atomic(out / "config.json", config.dump(2) + "\n"))
    return io_error("--out: cannot write " + (out / "config.json").string());
  return {};
}

// The run's last line(s): how it stopped, where its results are.
void print_done(const TrainSummary& s, const std::string& out, bool checkpoint) {
  if (s.stopped == StopReason::interrupted) {
    std::printf("interrupted by %s at step %lld; %s\nresults in %s\n", signal_name(s.stop_signal),
                static_cast<long long>(s.steps),
                checkpoint
                    ? ("checkpoint taken there: go on with easel train --resume " + out).c_str()
                    : "no checkpoint (--no-checkpoint)",
                out.c_str());
    return;
  }
  if (s.stopped == StopReason::diverged || s.stopped == StopReason::stalled) {
    std::fprintf(stderr, "easel: %s\n", s.stop_message.c_str());
    std::printf("results in %s\n", out.c_str());
    return;
  }
  std::printf(
      "done: test accuracy %.4f (best %.4f) after %.2f epochs, %lld steps; %.1f s training "
      "(+%.1f s evaluation), %.0f img/s; compute/comm/wait %.0f%%/%.0f%%/%.0f%%",
      s.test_accuracy, s.best_accuracy, s.epochs, static_cast<long long>(s.steps), s.train_seconds,
      s.eval_seconds, s.images_per_second, 100 * (1 - s.comm_share - s.wait_share),
      100 * s.comm_share, 100 * s.wait_share);
  if (s.target_accuracy > 0) {
    if (s.time_to_target_seconds)
      std::printf("; target %.3f reached in %.1f s", s.target_accuracy, *s.time_to_target_seconds);
    else
      std::printf("; target %.3f not reached", s.target_accuracy);
  }
  std::printf("\nresults in %s\n", out.c_str());
}

}  // namespace

int run_train(const TrainConfig& cfg_in, const SettingValues& values) {
  TrainConfig cfg = cfg_in;
  cfg.settings = fixed_settings(cfg, values).dump();
  std::optional<Checkpoint> resume;
  if (!cfg.resume.empty())
    if (Status st = read_resume(cfg, values, &resume); !st.ok())
      return report(st, Failure::request);
  if (cfg.out.empty()) cfg.out = default_out(cfg.algo);
  const bool writer = process_rank() == 0;  // under mpirun only rank 0 writes results
  if (writer)
    if (Status st = check_out(cfg, resume.has_value()); !st.ok())
      return report(st, Failure::request);
  auto data = load_train_data(cfg, values);
  if (!data.ok()) return report(data.status(), Failure::run);
  const json config = config_json(cfg, values);
  std::ofstream metrics;
  if (writer)
    if (Status st = prepare_out(cfg, config, resume ? &*resume : nullptr, metrics); !st.ok())
      return report(st, Failure::run);

  const fs::path out(cfg.out);
  Reporter reporter(metrics, cfg.progress,
                    writer && cfg.checkpoint ? (out / "checkpoint.bin").string() : "",
                    writer ? out / "metrics.jsonl" : fs::path(),
                    resume ? resume->iterations_done : -1, resume ? config.dump(2) + "\n" : "");
  catch_stop_signals();
  auto result = train(cfg, data.value(), &reporter, {}, resume ? &*resume : nullptr);
  if (!result.ok()) return report(result.status(), Failure::run);
  const int code = exit_code(result->stopped, result->stop_signal);
  if (!writer) return code;
  if (!write_atomic(out / "summary.json", summary_json(*result, config).dump(2) + "\n"))
    return report(io_error("cannot write " + (out / "summary.json").string()), Failure::run);
  print_done(*result, cfg.out, cfg.checkpoint);
  return code;
}

}  // namespace easel::cli
