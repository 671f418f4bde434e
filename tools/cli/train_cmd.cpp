// `easel train`: a user of the public API (include/easel/, docs/API.md). The flags and the
// config file fill an easel::api::Config; the Run checks the request, loads the data, plans the
// run and, once nothing refuses it, writes the run directory (--out: config.json,
// metrics.jsonl, checkpoints, summary.json) and trains; this file prints the progress bar
// (terminal) or periodic lines, each evaluation and the end, turns SIGINT/SIGTERM/SIGUSR1 into
// Run::interrupt, and maps how the run ended to the exit code.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <string>

#include "devices/list.hpp"
#include "easel/easel.hpp"
#include "tools/cli/cli.hpp"

namespace easel::cli {

namespace {

// The run the stop signals interrupt, and the first signal (0: none). The handler only touches
// lock-free atomics and Run::interrupt (async-signal-safe); a second signal ends the process at
// once with _exit, which leaves the last checkpoint whole (checkpoints are renamed into place).
std::atomic<api::Run*> g_run{nullptr};
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<api::Run*>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  if (!g_stop_signal.compare_exchange_strong(none, sig)) ::_exit(128 + sig);
  if (api::Run* run = g_run.load()) run->interrupt(sig);
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
// 4 stalled. Anything that fails before or outside training exits with Failure's 1 or 2
// (failure_of: 2 for a request the run refused, whenever it found out).
int exit_code(api::StopReason stopped, int signal) {
  switch (stopped) {
    case api::StopReason::completed:
    case api::StopReason::target:
    case api::StopReason::requested:  // a callback's request; the CLI's never make one
      return 0;
    case api::StopReason::interrupted:
      return 128 + signal;
    case api::StopReason::diverged:
      return 3;
    case api::StopReason::stalled:
      return 4;
    case api::StopReason::none:
      break;
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

std::string hms(double s) {
  if (!std::isfinite(s) || s < 0) s = 0;
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

// What the run prints while it trains: its start line, a progress bar on a terminal (or a
// line every 10 s), and one line per evaluation.
class Printer {
 public:
  explicit Printer(const std::string& progress) {
    const bool automatic = progress == "auto";
    bar_ = progress == "bar" || (automatic && isatty(STDERR_FILENO));
    lines_ = progress == "lines" || (automatic && !bar_);
    t0_ = std::chrono::steady_clock::now();
  }

  void start(const api::RunInfo& info) {
    std::printf(
        "easel: %s on %s, %d group(s) x %d thread(s), %lld params, %.2f MFLOP/image, "
        "%lld iterations (%lld per epoch), layout %s\n",
        info.algorithm.c_str(), info.net.c_str(), info.groups, info.threads_per_group,
        static_cast<long long>(info.parameters), info.flops_per_image / 1e6,
        static_cast<long long>(info.total_steps), static_cast<long long>(info.steps_per_epoch),
        info.layout.c_str());
    std::fflush(stdout);
  }

  void progress(const api::Progress& p) {
    if (p.evaluating) return evaluating(p);
    const double el = seconds();
    if (bar_) {
      const int width = 30;
      const double frac =
          p.total_steps ? static_cast<double>(p.step) / static_cast<double>(p.total_steps) : 0;
      const int fill = static_cast<int>(frac * width);
      std::string b(static_cast<size_t>(fill), '=');
      if (fill < width) b += '>';
      b.resize(width, ' ');
      const double eta = frac > 0 ? el / frac - el : 0;
      std::fprintf(stderr, "\r[%s] %5.1f%% epoch %.2f step %lld/%lld %6.0f img/s ETA %s ",
                   b.c_str(), 100 * frac, p.epoch, static_cast<long long>(p.step),
                   static_cast<long long>(p.total_steps), p.images_per_second, hms(eta).c_str());
      std::fflush(stderr);
      dirty_ = true;
    } else if (lines_ && el - last_line_ >= 10) {
      last_line_ = el;
      std::fprintf(stderr, "progress: step %lld/%lld epoch %.2f %.0f img/s elapsed %s\n",
                   static_cast<long long>(p.step), static_cast<long long>(p.total_steps), p.epoch,
                   p.images_per_second, hms(el).c_str());
    }
  }

  // An evaluation's progress: the bar's line, or a line every 10 s (a large test set takes a
  // while, and the run would look stalled).
  void evaluating(const api::Progress& p) {
    const double el = seconds();
    if (bar_) {
      std::fprintf(stderr, "\r%*s\revaluating: %lld/%lld test images after step %lld ", 110, "",
                   static_cast<long long>(p.test_images), static_cast<long long>(p.test_total),
                   static_cast<long long>(p.step));
      std::fflush(stderr);
      dirty_ = true;
    } else if (lines_ && el - last_line_ >= 10) {
      last_line_ = el;
      std::fprintf(stderr, "progress: evaluating %lld/%lld test images elapsed %s\n",
                   static_cast<long long>(p.test_images), static_cast<long long>(p.test_total),
                   hms(el).c_str());
    }
  }

  void evaluation(const api::Evaluation& e) {
    if (dirty_) {
      std::fprintf(stderr, "\r%*s\r", 110, "");
      dirty_ = false;
    }
    std::printf(
        "epoch %6.2f  step %7lld  train loss %.4f  test loss %.4f  test accuracy %.4f  "
        "%7.0f img/s  [%s]\n",
        e.epoch, static_cast<long long>(e.step), e.train_loss, e.test_loss, e.test_accuracy,
        e.images_per_second, hms(e.wall_seconds).c_str());
    std::fflush(stdout);
  }

 private:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  bool bar_ = false, lines_ = false, dirty_ = false;
  double last_line_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

// The run's last line(s): how it stopped, where its results are; `clock`: --clock's machine,
// whose simulated seconds the training time is.
void print_done(const api::Summary& s, bool checkpoint, const std::string& clock) {
  const std::string& out = s.directory;
  if (s.stop_reason == api::StopReason::interrupted) {
    std::printf("interrupted by %s at step %lld; %s\nresults in %s\n", signal_name(s.stop_signal),
                static_cast<long long>(s.steps),
                checkpoint
                    ? ("checkpoint taken there: go on with easel train --resume " + out).c_str()
                    : "no checkpoint (--no-checkpoint)",
                out.c_str());
    return;
  }
  if (s.stop_reason == api::StopReason::diverged || s.stop_reason == api::StopReason::stalled) {
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
  // The groups the run went on without, or restarted (--on-failure): it completed with the others.
  if (!s.group_failures.empty())
    std::printf("; completed with the surviving groups after %zu group failure(s)",
                s.group_failures.size());
  for (const std::string& f : s.group_failures)
    std::printf("; %s", f.c_str());
  if (s.target_accuracy > 0) {
    if (s.time_to_target_seconds >= 0)
      std::printf("; target %.3f reached in %.1f s", s.target_accuracy, s.time_to_target_seconds);
    else
      std::printf("; target %.3f not reached", s.target_accuracy);
  }
  if (!clock.empty()) std::printf("; training seconds simulated on %s's clock", clock.c_str());
  std::printf("\nresults in %s\n", out.c_str());
}

// The setting's text (it exists: the names are the table's).
std::string setting(const api::Config& config, const char* name) {
  std::string text;
  (void)config.get(name, &text);
  return text;
}

// A GPU run asked of a machine without a usable GPU (or of a build without CUDA) is refused
// before any data is read: one line naming the flag, exit 1 (the machine lacks what was asked,
// as for --placement hbw). The settings' own checks report a --device that does not parse.
Status check_gpus_exist(const std::string& device) {
  if (device.empty()) return {};
  auto req = parse_device(device);
  if (!req.ok() || !req->gpu) return {};
  auto units = req->kind->unit_count();
  if (!units.ok())
    return Status(units.status().code(), "--device " + device + ": " + units.status().message());
  return {};
}

}  // namespace

int run_train(SettingValues& values, const std::vector<std::string>& given,
              const std::string& source) {
  api::Config config;
  if (api::Status st = train_settings_config(values, given, source, &config); !st.ok())
    return report(st, Failure::request);
  // Every run has a directory: --out, a resumed run's own, or a new one under runs/.
  if (setting(config, "out").empty() && setting(config, "resume").empty())
    if (api::Status st = config.set("out", default_out(setting(config, "algo"))); !st.ok())
      return report(st, Failure::request);

  if (Status st = check_gpus_exist(setting(config, "device")); !st.ok())
    return report(st, failure_of(st));

  api::Run run;
  Printer printer(setting(config, "progress"));
  run.on_start([&](const api::RunInfo& info) { printer.start(info); });
  run.on_progress([&](const api::Progress& p) { return printer.progress(p), true; });
  run.on_evaluation([&](const api::Evaluation& e) { return printer.evaluation(e), true; });
  if (api::Status st = run.open(config); !st.ok()) return report(st, failure_of(st));

  g_run.store(&run);
  catch_stop_signals();
  const api::Status st = run.train();
  g_run.store(nullptr);
  const api::Summary& s = run.summary();
  // A diverged or stalled run ended with its summary written: its exit code says so.
  const bool ended_badly =
      s.stop_reason == api::StopReason::diverged || s.stop_reason == api::StopReason::stalled;
  // Bad data (a corrupt image, a broken shard, a bad class file) exits 2 (failure_of), as a bad
  // image found while the batches stream does (nets/data/stream_source.hpp).
  if (!st.ok() && !(ended_badly && st.code() == api::Code::internal))
    return report(st, failure_of(st));
  const int code = exit_code(s.stop_reason, s.stop_signal);
  if (s.rank != 0) return code;  // under mpirun rank 0 reports
  print_done(s, setting(config, "checkpoint") == "true", setting(config, "clock"));
  return code;
}

}  // namespace easel::cli
