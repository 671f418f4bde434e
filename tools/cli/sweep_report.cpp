// `easel sweep report DIR`: DIR/report.md, a Markdown table of the sweep's cells sorted by time
// to a target accuracy (or by throughput), also printed; DIR/report.json, the same rows for the
// plots; and the plots (PNG, beside report.md) drawn by sweep_plots.py with Debian's matplotlib.
// Without matplotlib (or python3) the report is the table alone, with a warning in report.md and
// one line on stderr, and the exit code is still 0.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/config.hpp"
#include "tools/cli/cli.hpp"
#include "tools/cli/sweep.hpp"

#ifndef EASEL_INSTALLED_PLOTS
#define EASEL_INSTALLED_PLOTS ""
#endif

namespace easel::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kReportHelp =
    R"(easel sweep report: tabulates and plots a sweep's cells
Usage: easel sweep report DIR [--by time-to-target|throughput] [--target ACC]
  DIR                 an `easel sweep --out` directory (its cells.jsonl)
  --by KEY            the table's order: time-to-target (default; cells that never reached the
                      target follow, by best accuracy) or throughput (images/s)
  --target ACC        the test accuracy of the time to target (default: the cells'
                      --target-accuracy when they share one, else 0.8)
Writes DIR/report.md (the table, printed too, and the plots below), DIR/report.json (its rows)
and, with Debian's python3-matplotlib (tools/setup installs it), DIR/accuracy_vs_time.png,
time_to_target.png, time_shares.png and throughput.png. Without matplotlib the report is the
table alone (a warning says so) and the exit code is 0.
)";

// The plots the script writes, in report order, with their captions.
constexpr std::pair<const char*, const char*> kPlots[] = {
    {"accuracy_vs_time.png", "Test accuracy against training time, one line per run"},
    {"time_to_target.png", "Time to the target accuracy against the number of groups"},
    {"time_shares.png", "Compute, communication and wait shares of each run's training time"},
    {"throughput.png", "Throughput and weak-scaling efficiency against the number of groups"},
};

struct Row {
  json record;
  std::string status;
  std::string flags;  // "algo=sgd groups=1"
  std::optional<double> ttt;
  double test_accuracy = 0, best_accuracy = 0, train_seconds = 0, ips = 0;
  double comm_share = 0, wait_share = 0;
  bool ran = false;  // done, diverged or stalled: it has a summary
};

std::string md(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The first train_seconds at which the cell's test accuracy reached `target`.
std::optional<double> time_to_target(const fs::path& metrics, double target) {
  std::ifstream f(metrics);
  std::string line;
  while (std::getline(f, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;  // a line cut short
    const auto a = j.find("test_accuracy");
    const auto t = j.find("train_seconds");
    if (a == j.end() || t == j.end() || !a->is_number() || !t->is_number()) continue;
    if (a->get<double>() >= target) return t->get<double>();
  }
  return std::nullopt;
}

fs::path exe_dir() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : p.parent_path();
}

// sweep_plots.py: $EASEL_SWEEP_PLOTS, else beside the program (the build tree), else the
// installed copy (PREFIX/share/easel, found from the program's bin/ and from the configured
// prefix).
std::string find_plots_script() {
  if (const char* e = std::getenv("EASEL_SWEEP_PLOTS"); e != nullptr && *e != '\0') return e;
  std::error_code ec;
  const fs::path dir = exe_dir();
  for (const fs::path& p :
       {dir / "sweep_plots.py", dir / ".." / "share" / "easel" / "sweep_plots.py",
        fs::path(EASEL_INSTALLED_PLOTS)})
    if (!p.empty() && fs::is_regular_file(p, ec)) return p.string();
  return {};
}

// Runs PYTHON SCRIPT REPORT_JSON DIR; its exit code (127: it could not start).
int run_plots(const std::string& python, const std::string& script, const fs::path& dir) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    const std::string json_path = (dir / "report.json").string(), d = dir.string();
    ::execlp(python.c_str(), python.c_str(), script.c_str(), json_path.c_str(), d.c_str(),
             static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 127;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The command line: DIR, --by and --target.
struct ReportArgs {
  std::string dir;
  std::string by = "time-to-target";
  std::optional<double> target;
  bool help = false;
};

Status set_report_flag(ReportArgs& out, const std::string& name, const std::string& v) {
  if (v.empty()) return invalid_argument("sweep report: " + name + ": needs a value");
  if (name == "--by") {
    if (v != "time-to-target" && v != "throughput")
      return invalid_argument("sweep report: --by: '" + printable(v) +
                              "' (accepted: time-to-target, throughput)");
    out.by = v;
    return {};
  }
  char* end = nullptr;
  const double t = std::strtod(v.c_str(), &end);
  if (end != v.c_str() + v.size() || !(t > 0 && t <= 1))
    return invalid_argument("sweep report: --target: '" + printable(v) +
                            "' is not an accuracy in (0, 1]");
  out.target = t;
  return {};
}

Result<ReportArgs> parse_report_args(const std::vector<std::string>& args) {
  ReportArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out.help = true;
      return out;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    if (name == "--by" || name == "--target") {
      std::string v;
      if (eq != std::string::npos)
        v = a.substr(eq + 1);
      else if (i + 1 < args.size())
        v = args[++i];
      EASEL_RETURN_IF_ERROR(set_report_flag(out, name, v));
    } else if (a.rfind("-", 0) == 0) {
      return invalid_argument("sweep report: " + printable(a) +
                              ": no such flag (see easel sweep report --help)");
    } else if (!out.dir.empty()) {
      return invalid_argument("sweep report: one directory, not '" + out.dir + "' and '" +
                              printable(a) + "'");
    } else {
      out.dir = a;
    }
  }
  if (out.dir.empty())
    return invalid_argument("sweep report: DIR: required (an easel sweep --out)");
  return out;
}

// cells.jsonl's records, in the sweep's order; each line must be a cell's record.
Result<std::vector<json>> read_cells(const fs::path& cells) {
  std::ifstream f(cells);
  if (!f)
    return invalid_argument("sweep report: " + cells.string() +
                            ": cannot be read (not an easel sweep --out, or no cell finished yet)");
  std::vector<json> records;
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("cell") || !j["cell"].is_string() ||
        !j.contains("status") || !j["status"].is_string() || !j.contains("flags") ||
        !j["flags"].is_object())
      return invalid_argument("sweep report: " + cells.string() + ": line " + std::to_string(n) +
                              " is not a cell's record");
    records.push_back(std::move(j));
  }
  if (records.empty())
    return invalid_argument("sweep report: " + cells.string() + ": no cell finished yet");
  std::sort(records.begin(), records.end(),
            [](const json& a, const json& b) { return a.value("index", 0) < b.value("index", 0); });
  return records;
}

// The target accuracy the cells ran to when they share one, else 0.8.
double shared_target(const std::vector<json>& records) {
  std::optional<double> shared;
  bool same = true;
  for (const json& r : records)
    if (r.contains("summary") && r["summary"].is_object()) {
      const double t = r["summary"].value("target_accuracy", 0.0);
      if (shared && *shared != t) same = false;
      shared = t;
    }
  return same && shared && *shared > 0 ? *shared : 0.8;
}

// One row per record, in the table's order (runs first, by time to target or throughput).
std::vector<Row> make_rows(const std::vector<json>& records, const fs::path& dir, double target,
                           bool by_ttt) {
  std::vector<Row> rows;
  for (const json& r : records) {
    Row row;
    row.record = r;
    row.status = r["status"].get<std::string>();
    for (const auto& [k, v] : r["flags"].items())
      row.flags += (row.flags.empty() ? "" : " ") + k + "=" +
                   (v.is_string() ? v.get<std::string>() : v.dump());
    if (r.contains("summary") && r["summary"].is_object()) {
      const json& s = r["summary"];
      const auto number = [&](const char* key) { return summary_number(s, key); };
      row.ran = true;
      row.test_accuracy = number("test_accuracy");
      row.best_accuracy = number("best_accuracy");
      row.train_seconds = number("train_seconds");
      row.ips = number("images_per_second");
      row.comm_share = number("comm_share");
      row.wait_share = number("wait_share");
      row.ttt = time_to_target(dir / r.value("dir", r["cell"].get<std::string>()) / "metrics.jsonl",
                               target);
    }
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    if (a.ran != b.ran) return a.ran;
    if (!a.ran) return false;
    if (!by_ttt) return a.ips > b.ips;
    if (a.ttt.has_value() != b.ttt.has_value()) return a.ttt.has_value();
    if (a.ttt) return *a.ttt < *b.ttt;
    return a.best_accuracy > b.best_accuracy;
  });
  return rows;
}

// The Markdown table and report.json's rows.
struct Table {
  std::string markdown;
  json rows = json::array();
};

// A row's cells after its flags, and its entry of report.json.
std::string row_cells(const Row& r, json& jr) {
  if (!r.ran) {
    const std::string reason = r.record.value("reason", std::string());
    jr["reason"] = reason;
    return r.status +
           (r.status == "failed" ? " (exit " + std::to_string(r.record.value("exit_code", -1)) + ")"
                                 : std::string()) +
           (reason.empty() ? "" : ": " + md(reason)) + " | | | | | | |\n";
  }
  const double compute = 1 - r.comm_share - r.wait_share;
  const json& s = r.record["summary"];
  jr["algorithm"] = s.value("algorithm", std::string());
  jr["groups"] = s.value("groups", 0);
  jr["time_to_target"] = r.ttt ? json(*r.ttt) : json(nullptr);
  jr["test_accuracy"] = r.test_accuracy;
  jr["best_accuracy"] = r.best_accuracy;
  jr["train_seconds"] = r.train_seconds;
  jr["images_per_second"] = r.ips;
  jr["compute_share"] = compute;
  jr["comm_share"] = r.comm_share;
  jr["wait_share"] = r.wait_share;
  return r.status + " | " + fmt("%.4f", r.test_accuracy) + " | " + fmt("%.4f", r.best_accuracy) +
         " | " + (r.ttt ? fmt("%.1f", *r.ttt) : "not reached") + " | " +
         fmt("%.1f", r.train_seconds) + " | " + fmt("%.0f", r.ips) + " | " +
         fmt("%.0f%%", 100 * compute) + " / " + fmt("%.0f%%", 100 * r.comm_share) + " / " +
         fmt("%.0f%%", 100 * r.wait_share) + " |\n";
}

Table make_table(const std::vector<Row>& rows, const std::string& tgt) {
  Table t;
  // rank: the row's place in the order; cell: the cell's number in the sweep (its directory's
  // prefix), which a rank is not.
  t.markdown = "| rank | cell | flags | status | test accuracy | best | time to " + tgt +
               " (s) | training (s) | images/s | compute / comm / wait |\n"
               "|---|---|---|---|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const std::string flags = md(r.flags.empty() ? r.record["cell"].get<std::string>() : r.flags);
    json jr = {{"cell", r.record["cell"]},
               {"dir", r.record.value("dir", r.record["cell"].get<std::string>())},
               {"index", r.record.value("index", 0)},
               {"flags", r.record["flags"]},
               {"status", r.status}};
    t.markdown += "| " + std::to_string(i + 1) + " | " +
                  std::to_string(r.record.value("index", 0)) + " | " + flags + " | " +
                  row_cells(r, jr);
    t.rows.push_back(std::move(jr));
  }
  return t;
}

// The sweep's axes as sweep.json lists them (empty when it cannot be read).
json sweep_axes(const fs::path& dir) {
  std::ifstream sf(dir / "sweep.json");
  json j = json::parse(sf, nullptr, false);
  if (!sf || j.is_discarded() || !j.is_object() || !j.contains("axes") || !j["axes"].is_array())
    return json::array();
  return j["axes"];
}

// The PNGs sweep_plots.py wrote into dir, or why there are none.
struct Plots {
  std::string warning;
  std::vector<std::string> pngs;
};

Plots draw_plots(const fs::path& dir) {
  Plots out;
  const std::string script = find_plots_script();
  const char* py_env = std::getenv("EASEL_PYTHON");
  std::error_code ec;
  const std::string python = py_env != nullptr && *py_env != '\0' ? py_env
                             : fs::exists("/usr/bin/python3", ec) ? "/usr/bin/python3"
                                                                  : "python3";
  if (script.empty()) {
    out.warning =
        "sweep_plots.py not found beside the program nor in its share/easel (set "
        "EASEL_SWEEP_PLOTS); the report is the table alone";
    return out;
  }
  for (const auto& [png, caption] : kPlots)
    fs::remove(dir / png, ec);
  const int rc = run_plots(python, script, dir);
  if (rc == 3)
    out.warning = "matplotlib is missing for " + python +
                  " (tools/setup installs python3-matplotlib; apt-get install python3-matplotlib); "
                  "the report is the table alone";
  else if (rc == 127)
    out.warning = "cannot run " + python +
                  " (tools/setup installs python3-matplotlib); the report is the table alone";
  else if (rc != 0)
    out.warning =
        script + " failed (exit " + std::to_string(rc) + "); the report is the table alone";
  for (const auto& [png, caption] : kPlots)
    if (fs::exists(dir / png, ec)) out.pngs.push_back(png);
  return out;
}

// report.md: the order, the table, the warning and the plots with their captions.
std::string report_doc(const fs::path& dir, bool by_ttt, const std::string& tgt,
                       const std::string& table, const Plots& plots) {
  std::string doc = "# Sweep " + dir.filename().string() + "\n\n" +
                    (by_ttt ? "Sorted by the time to test accuracy " + tgt +
                                  " (training seconds; cells that never reached it follow, "
                                  "by best accuracy)."
                            : std::string("Sorted by throughput (training images per second).")) +
                    "\n\n" + table;
  if (!plots.warning.empty()) doc += "\n**Warning:** " + plots.warning + ".\n";
  for (const auto& [png, caption] : kPlots)
    if (std::find(plots.pngs.begin(), plots.pngs.end(), png) != plots.pngs.end())
      doc += "\n" + std::string(caption) + ":\n\n![" + caption + "](" + png + ")\n";
  return doc;
}

Status write_report(const ReportArgs& a) {
  const fs::path dir(a.dir);
  EASEL_ASSIGN_OR_RETURN(std::vector<json> records, read_cells(dir / "cells.jsonl"));
  const double target = a.target ? *a.target : shared_target(records);
  const bool by_ttt = a.by == "time-to-target";
  const std::string tgt = fmt("%.2f", target);
  const Table table = make_table(make_rows(records, dir, target, by_ttt), tgt);
  const json rj = {
      {"target", target}, {"by", a.by}, {"axes", sweep_axes(dir)}, {"cells", table.rows}};
  if (!write_atomic(dir / "report.json", rj.dump(2) + "\n"))
    return io_error("sweep report: cannot write " + (dir / "report.json").string());
  const Plots plots = draw_plots(dir);
  if (!write_atomic(dir / "report.md", report_doc(dir, by_ttt, tgt, table.markdown, plots)))
    return io_error("sweep report: cannot write " + (dir / "report.md").string());
  std::fputs(table.markdown.c_str(), stdout);
  if (!plots.warning.empty())
    std::fprintf(stderr, "easel: sweep report: warning: %s\n", plots.warning.c_str());
  std::printf("report in %s%s\n", (dir / "report.md").c_str(),
              plots.pngs.empty()
                  ? ""
                  : (" with " + std::to_string(plots.pngs.size()) + " plot(s)").c_str());
  return {};
}

}  // namespace

int run_sweep_report(const std::vector<std::string>& args) {
  auto a = parse_report_args(args);
  if (!a.ok()) return report(a.status(), Failure::request);
  if (a->help) {
    std::fputs(kReportHelp, stdout);
    return 0;
  }
  const Status st = write_report(*a);
  return report(st, failure_of(st));
}

}  // namespace easel::cli
