// `easel launch -np N [--max-restarts K] [--min-ranks M] [--mpirun-args TEXT] -- TRAIN_FLAGS`:
// torchrun's role for MPI. Debian's Open MPI has no fault tolerance (ULFM), so a rank that dies
// ends the whole mpirun job; launch runs `mpirun -np N easel train TRAIN_FLAGS`, tells a job that
// lost a rank (a signal, an exit code other than a refusal or a divergence, a stall) from one that
// ended as train decided, and relaunches it from the run directory's newest checkpoint (every
// rank's groups, run/checkpoint.hpp), up to K times, with N ranks or, when a relaunch makes no
// progress, one fewer down to M. EASEL_FAULT (engine/fault.hpp) reaches the first job only.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "run/checkpoint.hpp"
#include "run/train_config.hpp"
#include "tools/cli/child.hpp"
#include "tools/cli/cli.hpp"

namespace easel::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct LaunchArgs {
  int ranks = 0, max_restarts = 3, min_ranks = 0;
  std::vector<std::string> mpirun_args;
  std::vector<std::string> train;  // the train flags, as given
  std::string dir;                 // --out, or --resume's
};

Result<int> whole_number(const std::string& flag, const std::string& text) {
  if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos)
    return invalid_argument("easel launch: " + flag + ": '" + text + "' is not a whole number");
  return std::stoi(text);
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;)
    out.push_back(w);
  return out;
}

// The train flags' run directory (--out, else --resume), or an error.
Result<std::string> run_dir_of(const std::vector<std::string>& train) {
  std::string out, resume;
  for (size_t i = 0; i < train.size(); ++i) {
    const std::string& a = train[i];
    for (const char* f : {"--out", "--resume"}) {
      std::string* into = std::string(f) == "--out" ? &out : &resume;
      if (a == f && i + 1 < train.size()) *into = train[i + 1];
      if (a.rfind(std::string(f) + "=", 0) == 0) *into = a.substr(std::string(f).size() + 1);
    }
  }
  if (!out.empty()) return out;
  if (!resume.empty()) return resume;
  return invalid_argument(
      "easel launch: the train flags need --out DIR (the run directory a relaunch resumes from)");
}

Result<LaunchArgs> parse_launch(const std::vector<std::string>& args) {
  LaunchArgs l;
  size_t i = 0;
  for (; i < args.size() && args[i] != "--"; ++i) {
    const std::string& a = args[i];
    if (i + 1 >= args.size())
      return invalid_argument("easel launch: " + a + " needs a value (see easel launch --help)");
    const std::string& v = args[++i];
    if (a == "-np" || a == "--np") {
      EASEL_ASSIGN_OR_RETURN(l.ranks, whole_number("-np", v));
    } else if (a == "--max-restarts") {
      EASEL_ASSIGN_OR_RETURN(l.max_restarts, whole_number(a, v));
    } else if (a == "--min-ranks") {
      EASEL_ASSIGN_OR_RETURN(l.min_ranks, whole_number(a, v));
    } else if (a == "--mpirun-args") {
      l.mpirun_args = words(v);
    } else {
      return invalid_argument("easel launch: " + a +
                              ": no such flag (-np, --max-restarts, --min-ranks, --mpirun-args; "
                              "then -- and easel train's flags)");
    }
  }
  if (l.ranks < 1) return invalid_argument("easel launch: -np: give the number of ranks (>= 1)");
  if (l.min_ranks == 0) l.min_ranks = l.ranks;
  if (l.min_ranks < 1 || l.min_ranks > l.ranks)
    return invalid_argument("easel launch: --min-ranks " + std::to_string(l.min_ranks) +
                            ": between 1 and -np (" + std::to_string(l.ranks) + ")");
  if (i < args.size()) l.train.assign(args.begin() + static_cast<long>(i) + 1, args.end());
  if (!l.train.empty() && l.train.front() == "train") l.train.erase(l.train.begin());
  if (l.train.empty() || l.train.front().rfind("--", 0) != 0)
    return invalid_argument(
        "easel launch: after -- come easel train's flags (e.g. --net lenet --out DIR), not '" +
        (l.train.empty() ? std::string() : l.train.front()) + "'");
  EASEL_ASSIGN_OR_RETURN(l.dir, run_dir_of(l.train));
  return l;
}

// The flags a relaunch gives with --resume DIR: those of the settings that may change when a run
// continues (its length, target, log level and the like); config.json holds the rest.
std::vector<std::string> resume_flags(const LaunchArgs& l) {
  std::vector<std::string> out = {"--resume", l.dir};
  for (size_t i = 0; i < l.train.size(); ++i) {
    const std::string& a = l.train[i];
    if (a.rfind("--", 0) != 0) continue;
    const size_t eq = a.find('=');
    const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const Setting* s = find_setting(name);
    const bool bare = s ? s->field.type == SettingType::boolean
                        : name == "overwrite" || name == "explain" || name == "json";
    const bool has_value = eq == std::string::npos && !bare;
    if (s && s->may_change() && name != "resume" && name != "out") {
      out.push_back(a);
      if (has_value && i + 1 < l.train.size()) out.push_back(l.train[i + 1]);
    }
    if (has_value) ++i;
  }
  return out;
}

// The last step metrics.jsonl records (the newest checkpoint's: one follows each record), or 0.
// The step of DIR's checkpoint.bin, as a relaunch will read it (0: none, or one that does not
// read). Not metrics.jsonl's last step: a checkpoint's background write may not have landed when
// its job died, and the relaunch goes on from the one before.
int64_t checkpoint_step(const std::string& dir) {
  const fs::path p = fs::path(dir) / "checkpoint.bin";
  std::error_code ec;
  if (!fs::exists(p, ec)) return 0;
  auto ck = read_checkpoint(p.string());
  return ck.ok() ? ck->iterations_done : 0;
}

std::string cause_of(int rc) {
  if (rc < 0) return "mpirun did not start";
  if (rc > 128) return "a rank died on signal " + std::to_string(rc - 128);
  if (rc == 4) return "a rank stalled past its deadline";
  return "a rank failed (exit " + std::to_string(rc) + ")";
}

// Whether a job's exit is train's own decision (done, refused, diverged, stopped by a signal
// this launcher passed on): no relaunch.
bool final_exit(int rc) {
  return rc == 0 || rc == 2 || rc == 3 || child_signal() != 0;
}

// summary.json gains the restarts and their causes.
void note_restarts(const std::string& dir, const json& failures) {
  const fs::path p = fs::path(dir) / "summary.json";
  std::ifstream f(p);
  json s = json::parse(f, nullptr, false);
  if (!s.is_object()) return;
  s["restarts"] = failures.size();
  s["failures"] = failures;
  if (!write_atomic(p, s.dump(2) + "\n")) log_error("launch", "cannot rewrite " + p.string());
}

int launch(const LaunchArgs& l) {
  const std::string exe = self_exe();
  if (exe.empty()) return report(io_error("easel launch: cannot find this program"), Failure::run);
  forward_signals_to_child();
  json failures = json::array();
  int ranks = l.ranks, rc = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> flags = l.train;
  for (int attempt = 0;; ++attempt) {
    std::vector<std::string> args = {"-np", std::to_string(ranks)};
    args.insert(args.end(), l.mpirun_args.begin(), l.mpirun_args.end());
    args.push_back(exe);
    args.push_back("train");
    args.insert(args.end(), flags.begin(), flags.end());
    const int64_t before = checkpoint_step(l.dir);
    rc = run_child("mpirun", args, "");
    if (final_exit(rc)) break;
    const int64_t at = checkpoint_step(l.dir);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    failures.push_back({{"cause", cause_of(rc)},
                        {"exit", rc},
                        {"ranks", ranks},
                        {"checkpoint_step", at},
                        {"seconds", s}});
    if (attempt >= l.max_restarts) {
      std::fprintf(stderr, "easel launch: %s; no restart left (--max-restarts %d)\n",
                   cause_of(rc).c_str(), l.max_restarts);
      return rc;
    }
    if (attempt > 0 && at == before && ranks > l.min_ranks) --ranks;  // no progress: fewer
    ::unsetenv("EASEL_FAULT");  // the injected fault is the first job's
    const bool checkpoint = fs::exists(fs::path(l.dir) / "checkpoint.bin");
    flags = checkpoint ? resume_flags(l) : l.train;
    if (!checkpoint) flags.push_back("--overwrite");
    std::fprintf(stderr, "easel launch: restart %d of %d: %s; %d rank(s) from %s\n", attempt + 1,
                 l.max_restarts, cause_of(rc).c_str(), ranks,
                 checkpoint ? ("the checkpoint at step " + std::to_string(at)).c_str()
                            : "the start (no checkpoint yet)");
  }
  if (rc == 0 && !failures.empty()) note_restarts(l.dir, failures);
  return rc;
}

}  // namespace

int run_launch(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::printf(
        "easel launch -np N [--max-restarts K=3] [--min-ranks M=N] [--mpirun-args TEXT] -- "
        "TRAIN_FLAGS\n"
        "runs mpirun -np N easel train TRAIN_FLAGS (TRAIN_FLAGS with --out DIR) and, when a "
        "rank dies (a signal, a failure, a stall), relaunches the job from DIR's newest "
        "checkpoint, up to K times, one line per restart; a relaunch that makes no progress "
        "takes one rank fewer, down to M. A refusal (exit 2), a divergence (3) or a signal "
        "given to launch ends it. summary.json gains restarts and failures.\n");
    return 0;
  }
  auto l = parse_launch(args);
  if (!l.ok()) return report(l.status(), Failure::request);
  return launch(*l);
}

}  // namespace easel::cli
