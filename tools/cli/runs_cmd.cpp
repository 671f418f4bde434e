// `easel runs [DIR]`: the runs under a folder (default runs/, where `easel train` puts them),
// one row each from its files: algorithm, net, groups, steps, accuracy, its state and whether
// `easel train --resume` can go on from it. A run directory is one with a config.json (written
// before the first step) or a summary.json (written last); DIR itself may be one, and the
// folders of a sweep (easel sweep --out) are looked into.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tools/cli/cli.hpp"

namespace easel::cli {

namespace fs = std::filesystem;
using nlohmann::json;

double summary_number(const json& summary, const char* key, double otherwise) {
  const auto it = summary.find(key);
  return it != summary.end() && it->is_number() ? it->get<double>() : otherwise;
}

namespace {

// A JSON file's object; nullopt when it is missing, unreadable or not an object.
std::optional<json> read_object(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return std::nullopt;
  json j = json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// metrics.jsonl's last whole record (a run without a summary: the last evaluation it made).
std::optional<json> last_record(const fs::path& p) {
  std::ifstream f(p);
  std::optional<json> last;
  std::string line;
  while (std::getline(f, line)) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("step")) last = std::move(j);
  }
  return last;
}

struct RunRow {
  std::string run, algorithm, net, state, resume;
  int64_t groups = 0, steps = 0;
  std::optional<double> accuracy;  // the last evaluation's; none measured: nullopt
};

std::string text_of(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() ? "" : it->is_string() ? it->get<std::string>() : it->dump();
}

// summary.json's "stopped" as the state users ask about.
std::string state_of(const std::string& stopped) {
  if (stopped == "completed" || stopped == "target" || stopped == "requested") return "finished";
  return stopped.empty() ? "unknown" : stopped;
}

// One run directory's row (it has a config.json or a summary.json).
RunRow read_run(const fs::path& dir, const fs::path& root) {
  RunRow r;
  r.run = dir == root ? dir.string() : fs::relative(dir, root).string();
  const std::optional<json> config = read_object(dir / "config.json");
  const std::optional<json> summary = read_object(dir / "summary.json");
  if (config) {
    r.algorithm = text_of(*config, "algo");
    r.net = text_of(*config, "net");
  }
  if (summary) {
    r.algorithm = text_of(*summary, "algorithm");
    r.net = text_of(*summary, "net");
    r.groups = static_cast<int64_t>(summary_number(*summary, "groups", 0));
    r.steps = static_cast<int64_t>(summary_number(*summary, "steps", 0));
    if (summary->contains("test_accuracy") && (*summary)["test_accuracy"].is_number())
      r.accuracy = (*summary)["test_accuracy"].get<double>();
    r.state = state_of(text_of(*summary, "stopped"));
  } else {  // no summary yet: training now, or killed without one (kill -9, a crash)
    r.state = "unfinished";
    if (const std::optional<json> m = last_record(dir / "metrics.jsonl")) {
      r.steps = static_cast<int64_t>(summary_number(*m, "step", 0));
      if (m->contains("test_accuracy") && (*m)["test_accuracy"].is_number())
        r.accuracy = (*m)["test_accuracy"].get<double>();
      if (m->contains("groups") && (*m)["groups"].is_array())
        r.groups = static_cast<int64_t>((*m)["groups"].size());
    }
  }
  std::error_code ec;
  const bool checkpoint = fs::is_regular_file(dir / "checkpoint.bin", ec);
  r.resume = checkpoint                                             ? "yes"
             : config && config->value("checkpoint", true) == false ? "no (--no-checkpoint)"
                                                                    : "no (no checkpoint)";
  return r;
}

bool is_run_dir(const fs::path& d) {
  std::error_code ec;
  return fs::is_regular_file(d / "config.json", ec) || fs::is_regular_file(d / "summary.json", ec);
}

// The run directories at or under `root` (a run's own folders are not looked into), sorted.
std::vector<fs::path> find_runs(const fs::path& root) {
  std::vector<fs::path> out;
  if (is_run_dir(root)) return {root};
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(
           root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_directory(ec)) continue;
    if (is_run_dir(it->path())) {
      out.push_back(it->path());
      it.disable_recursion_pending();
    } else if (it.depth() >= 3) {  // runs/, a sweep, its cells: no deeper
      it.disable_recursion_pending();
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string accuracy_text(const std::optional<double>& a) {
  if (!a) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", *a);
  return buf;
}

void print_table(const std::vector<RunRow>& rows) {
  size_t w = 3;
  for (const RunRow& r : rows)
    w = std::max(w, r.run.size());
  std::printf("%-*s  %-13s %-14s %6s %8s %8s  %-11s %s\n", static_cast<int>(w), "run", "algorithm",
              "net", "groups", "steps", "accuracy", "state", "resume");
  for (const RunRow& r : rows)
    std::printf("%-*s  %-13s %-14s %6lld %8lld %8s  %-11s %s\n", static_cast<int>(w), r.run.c_str(),
                r.algorithm.c_str(), r.net.c_str(), static_cast<long long>(r.groups),
                static_cast<long long>(r.steps), accuracy_text(r.accuracy).c_str(), r.state.c_str(),
                r.resume.c_str());
}

json rows_json(const std::vector<RunRow>& rows) {
  json out = json::array();
  for (const RunRow& r : rows)
    out.push_back({{"run", r.run},
                   {"algorithm", r.algorithm},
                   {"net", r.net},
                   {"groups", r.groups},
                   {"steps", r.steps},
                   {"test_accuracy", r.accuracy ? json(*r.accuracy) : json(nullptr)},
                   {"state", r.state},
                   {"resumable", r.resume == "yes"}});
  return out;
}

struct RunsFlags {
  std::string dir = "runs";
  bool json = false;
};

int run_runs(const RunsFlags& f) {
  std::error_code ec;
  if (!fs::is_directory(f.dir, ec))
    return report(invalid_argument("runs: " + f.dir +
                                   ": no such directory (easel train puts its "
                                   "runs under runs/; name another with easel runs DIR)"),
                  Failure::request);
  std::vector<RunRow> rows;
  for (const fs::path& d : find_runs(f.dir))
    rows.push_back(read_run(d, f.dir));
  if (f.json) {
    std::printf("%s\n", json{{"dir", f.dir}, {"runs", rows_json(rows)}}.dump(2).c_str());
    return 0;
  }
  if (rows.empty()) {
    std::printf("no runs under %s\n", f.dir.c_str());
    return 0;
  }
  print_table(rows);
  return 0;
}

}  // namespace

RunsCommand add_runs_command(CLI::App& app) {
  auto f = std::make_shared<RunsFlags>();
  CLI::App* runs = app.add_subcommand(
      "runs",
      "list the runs under a folder: algorithm, net, groups, steps, accuracy, state "
      "(finished, interrupted, diverged, stalled, unfinished) and whether --resume can go on");
  runs->add_option("DIR", f->dir, "the folder (an --out, a sweep's, or a folder of them)")
      ->capture_default_str();
  runs->add_flag("--json", f->json, "print them as one JSON object");
  return [runs, f]() { return runs->parsed() ? run_runs(*f) : -1; };
}

}  // namespace easel::cli
