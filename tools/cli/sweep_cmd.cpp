// `easel sweep`: the cartesian product of lists of train flags, each cell an ordinary `easel
// train` run directory under --out, run as a child process of this same program (a cell that
// crashes cannot take the sweep down). Resumable: DIR/sweep.json fixes the grid, DIR/cells.jsonl
// holds one line per finished cell, a cell stopped midway goes on from its checkpoint.
// `easel sweep report DIR` (sweep_report.cpp) tabulates and plots a sweep.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/config.hpp"
#include "tools/cli/child.hpp"
#include "tools/cli/cli.hpp"
#include "tools/cli/sweep.hpp"

namespace easel::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kSweepHelp =
    R"(easel sweep: runs `easel train` over the cartesian product of lists of train flags
Usage:
  easel sweep --set KEY=V1,V2,... [--set ...] [train flags] --out DIR
  easel sweep --grid FILE.toml [--set ...] [train flags] --out DIR
  easel sweep --out DIR                 (go on with the sweep DIR holds)
  easel sweep report DIR [--by time-to-target|throughput] [--target ACC]
Options:
  --set KEY=V1,V2,...   sweep the train flag --KEY over these values (a value holding a comma
                        goes in a grid file)
  --grid FILE.toml      a flat TOML table of train flags: a list sweeps that flag, a single
                        value fixes it (e.g. algo = ["sgd", "sync-easgd"]  groups = [1, 2]
                        epochs = 2); its keys are swept in sorted order
  --out DIR             the sweep's directory: one train run directory per cell, sweep.json
                        (the grid), cells.jsonl (one line per finished cell: its flags, status
                        done, diverged, stalled, refused or failed, and summary.json's fields)
  any `easel train` flag (but --out, --resume, --overwrite) is given to every cell
Run again with the same --out, the sweep goes on: finished cells are kept (failed ones run
again), a cell stopped midway resumes from its checkpoint; another grid for that --out is
refused. Ctrl-C (SIGINT, SIGTERM, SIGUSR1) stops the running cell at its next step with a
checkpoint, as train does, and then the sweep. Exit: 0 when every cell finished (see
cells.jsonl for refused and failed ones), 2 for a bad flag or grid, 128 + the signal when stopped.
)";

// The train flags a sweep owns or that make no sense for a cell.
bool sweep_owns(const std::string& name) {
  return name == "out" || name == "resume" || name == "overwrite";
}

Status bad(const std::string& what) {
  return invalid_argument("sweep: " + what);
}

// A train setting named `key` that a sweep may set; errors name `where` (--set or the file).
Result<const Setting*> sweep_setting(const std::string& key, const std::string& where) {
  const Setting* s = find_setting(key);
  if (s == nullptr || !s->takes(kTrainCommand) || key != s->name)
    return bad(where + "'" + printable(key) + "' is not a train flag (see easel train --help)");
  if (sweep_owns(key))
    return bad(where + "'" + key + "' is the sweep's own (its cells' --out is under the sweep's)");
  return s;
}

// Checks one value of setting s as train would read it.
Status check_value(const Setting& s, const std::string& value, const std::string& where) {
  TrainConfig scratch;
  if (Status st = s.field.parse(s, value, scratch); !st.ok()) return bad(where + st.message());
  return {};
}

// Shortest %g / %.17g that reads back.
std::string real_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

Result<std::string> toml_text(const TomlValue& v, const std::string& where) {
  switch (v.type) {
    case TomlValue::Type::string:
      return v.str;
    case TomlValue::Type::integer:
      return std::to_string(v.integer);
    case TomlValue::Type::floating:
      return real_text(v.floating);
    case TomlValue::Type::boolean:
      return std::string(v.boolean ? "true" : "false");
    default:
      return bad(where + "is " + toml_type_name(v.type) + ", not a value or a list of values");
  }
}

// The grid file's keys into axes (lists) and fixed flags (single values).
Status read_grid(const std::string& path, SweepSpec* spec) {
  std::ifstream f(path);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || !f) return bad(path + ": cannot be read");
  std::stringstream text;
  text << f.rdbuf();
  auto doc = parse_toml(text.str(), path);
  if (!doc.ok()) return bad(doc.status().message());
  if (doc->fields.empty()) return bad(path + ": no keys (nothing to sweep)");
  for (const auto& [key, v] : doc->fields) {
    const std::string where =
        path + ":" + std::to_string(v.line) + ": key '" + printable(key) + "': ";
    EASEL_ASSIGN_OR_RETURN(const Setting* s, sweep_setting(key, path + ": key "));
    if (v.type == TomlValue::Type::array) {
      if (v.items.empty()) return bad(where + "an empty list");
      SweepAxis axis{key, {}};
      for (const TomlValue& item : v.items) {
        EASEL_ASSIGN_OR_RETURN(std::string t, toml_text(item, where));
        EASEL_RETURN_IF_ERROR(check_value(*s, t, where));
        axis.values.push_back(t);
      }
      spec->axes.push_back(std::move(axis));
    } else {
      EASEL_ASSIGN_OR_RETURN(std::string t, toml_text(v, where));
      EASEL_RETURN_IF_ERROR(check_value(*s, t, where));
      spec->fixed.push_back("--" + key + "=" + t);
    }
  }
  return {};
}

// The key a fixed flag ("--name=value" or "--name") sets.
std::string flag_key(const std::string& flag) {
  const std::string name = flag.substr(2, flag.find('=') - 2);
  const Setting* s = find_setting(name);
  return s ? s->name : name;
}

Status check_duplicates(const SweepSpec& spec) {
  std::set<std::string> seen;
  for (const SweepAxis& a : spec.axes)
    if (!seen.insert(a.key).second) return bad("'" + a.key + "' is swept twice");
  for (const std::string& f : spec.fixed)
    if (!seen.insert(flag_key(f)).second)
      return bad("--" + flag_key(f) + " is given twice (swept, or by the grid file and a flag)");
  return {};
}

json spec_json(const SweepSpec& spec) {
  json axes = json::array();
  for (const SweepAxis& a : spec.axes)
    axes.push_back({{"key", a.key}, {"values", a.values}});
  return {{"axes", axes}, {"fixed", spec.fixed}};
}

Result<SweepSpec> spec_of(const json& j, const std::string& file) {
  SweepSpec spec;
  const auto wrong = [&] { return bad(file + ": not a sweep's description (axes, fixed)"); };
  if (!j.is_object() || !j.contains("axes") || !j["axes"].is_array() || !j.contains("fixed") ||
      !j["fixed"].is_array())
    return wrong();
  for (const json& a : j["axes"]) {
    if (!a.is_object() || !a.contains("key") || !a["key"].is_string() || !a.contains("values") ||
        !a["values"].is_array() || a["values"].empty())
      return wrong();
    SweepAxis axis{a["key"].get<std::string>(), {}};
    for (const json& v : a["values"]) {
      if (!v.is_string()) return wrong();
      axis.values.push_back(v.get<std::string>());
    }
    spec.axes.push_back(std::move(axis));
  }
  for (const json& f : j["fixed"]) {
    if (!f.is_string() || f.get<std::string>().rfind("--", 0) != 0) return wrong();
    spec.fixed.push_back(f.get<std::string>());
  }
  return spec;
}

// A value as part of a directory name: [A-Za-z0-9.+-], anything else '_'.
std::string name_part(const std::string& v) {
  std::string out;
  for (char c : v)
    out +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '+' || c == '-') ? c : '_';
  if (out.size() > 40) out = out.substr(out.size() - 40);  // a path's end names it best
  return out;
}

}  // namespace

std::vector<SweepCell> sweep_cells(const SweepSpec& spec) {
  size_t n = 1;
  for (const SweepAxis& a : spec.axes)
    n *= a.values.size();
  const int width = static_cast<int>(std::to_string(n).size());
  std::vector<SweepCell> cells;
  for (size_t i = 0; i < n; ++i) {
    SweepCell c;
    size_t rest = i;
    std::vector<size_t> pick(spec.axes.size());
    for (size_t k = spec.axes.size(); k-- > 0;) {  // the last axis varies fastest
      pick[k] = rest % spec.axes[k].values.size();
      rest /= spec.axes[k].values.size();
    }
    char idx[24];
    std::snprintf(idx, sizeof idx, "%0*zu", width, i + 1);
    c.name = idx;
    for (size_t k = 0; k < spec.axes.size(); ++k) {
      const std::string& v = spec.axes[k].values[pick[k]];
      c.settings.emplace_back(spec.axes[k].key, v);
      c.name += "_" + spec.axes[k].key + "-" + name_part(v);
    }
    cells.push_back(std::move(c));
  }
  return cells;
}

namespace {

// The last "easel: ..." line of a cell's log (train's one-line error), without the prefix.
std::string last_error(const fs::path& log) {
  std::ifstream f(log);
  std::string line, found;
  while (std::getline(f, line))
    // "easel: ALGO on NET, G group(s) x T thread(s), ..." is the run's first line, not an error.
    if (line.rfind("easel: ", 0) == 0 && line.find(" group(s) x ") == std::string::npos)
      found = line;
  return found.empty() ? found : found.substr(7);
}

std::optional<json> read_json(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return std::nullopt;
  json j = json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// A summary.json's "stopped" as a cell's status; empty when the run has not finished.
std::string finished_status(const json& summary) {
  const std::string stopped = summary.value("stopped", "");
  if (stopped == "completed" || stopped == "target" || stopped == "requested") return "done";
  if (stopped == "diverged" || stopped == "stalled") return stopped;
  return "";
}

// cells.jsonl's records by cell name; cut or foreign lines are dropped, and so are failed cells
// (they run again). Rewrites the file when it dropped anything.
std::map<std::string, json> read_records(const fs::path& path) {
  std::map<std::string, json> out;
  std::ifstream f(path);
  if (!f) return out;
  std::string line, kept;
  bool dropped = false;
  while (std::getline(f, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("cell") || !j["cell"].is_string() ||
        !j.contains("status") || !j["status"].is_string() || j["status"] == "failed") {
      dropped = dropped || !line.empty();
      continue;
    }
    out[j["cell"].get<std::string>()] = j;
    kept += line + "\n";
  }
  f.close();
  if (dropped) write_atomic(path, kept);
  return out;
}

std::string settings_text(const SweepCell& c) {
  std::string s;
  for (const auto& [k, v] : c.settings)
    s += (s.empty() ? "" : " ") + k + "=" + v;
  return s.empty() ? "(no swept flag)" : s;
}

// The cell's result line.
std::string result_text(const json& r) {
  const std::string status = r["status"].get<std::string>();
  if (status == "refused") return "refused: " + r.value("reason", std::string());
  if (status == "failed")
    return "failed with exit code " + std::to_string(r.value("exit_code", -1)) +
           (r.value("reason", std::string()).empty() ? ""
                                                     : ": " + r.value("reason", std::string()));
  const json& s = r["summary"];
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s: test accuracy %.4f (best %.4f), %.1f s training, %.0f img/s",
                status.c_str(), summary_number(s, "test_accuracy"),
                summary_number(s, "best_accuracy"), summary_number(s, "train_seconds"),
                summary_number(s, "images_per_second"));
  std::string out = buf;
  if (s.contains("time_to_target_seconds") && s["time_to_target_seconds"].is_number()) {
    std::snprintf(buf, sizeof buf, ", target in %.1f s", s["time_to_target_seconds"].get<double>());
    out += buf;
  }
  return out;
}

// --set's KEY=V1,V2,...: the axis of train setting KEY, each value checked as train reads it.
Result<SweepAxis> parse_set(const std::string& kv) {
  const size_t e = kv.find('=');
  if (e == std::string::npos || e == 0)
    return bad("--set " + printable(kv) + ": not KEY=V1,V2,...");
  const std::string key = kv.substr(0, e);
  EASEL_ASSIGN_OR_RETURN(const Setting* s, sweep_setting(key, "--set "));
  SweepAxis axis{s->name, {}};
  std::string rest = kv.substr(e + 1);
  size_t from = 0;
  while (true) {
    const size_t comma = rest.find(',', from);
    const std::string v = rest.substr(from, comma == std::string::npos ? comma : comma - from);
    if (v.empty()) return bad("--set " + key + ": an empty value in '" + printable(rest) + "'");
    EASEL_RETURN_IF_ERROR(check_value(*s, v, "--set " + key + ": "));
    axis.values.push_back(v);
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return axis;
}

// The refusal of --NAME, neither a sweep flag nor a train one, naming the nearest that is.
Status unknown_flag(const std::string& name) {
  std::vector<std::string> known = {"--set", "--grid", "--out", "--config"};
  for (const std::string& n : setting_names(kTrainCommand))
    known.push_back("--" + n);
  return bad("--" + printable(name) + ": not a sweep or train flag" +
             did_you_mean("--" + name, known) + " (see easel sweep --help)");
}

Status parse_sweep_args(const std::vector<std::string>& args, SweepSpec* spec, std::string* out,
                        bool* help) {
  std::string grid;
  std::vector<SweepAxis> sets;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      *help = true;
      return {};
    }
    if (a.rfind("--", 0) != 0 || a.size() == 2)
      return bad("'" + printable(a) + "' is not a flag (see easel sweep --help)");
    const size_t eq = a.find('=');
    const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::optional<std::string> value;
    if (eq != std::string::npos) value = a.substr(eq + 1);
    const auto take = [&]() -> Result<std::string> {
      if (!value) {
        if (i + 1 >= args.size()) return bad("--" + name + ": needs a value");
        value = args[++i];
      }
      if (value->empty()) return bad("--" + name + ": empty value");
      return *value;
    };
    if (name == "set") {
      EASEL_ASSIGN_OR_RETURN(std::string kv, take());
      EASEL_ASSIGN_OR_RETURN(SweepAxis axis, parse_set(kv));
      sets.push_back(std::move(axis));
    } else if (name == "grid") {
      if (!grid.empty()) return bad("--grid: given twice");
      EASEL_ASSIGN_OR_RETURN(grid, take());
    } else if (name == "out") {
      if (!out->empty()) return bad("--out: given twice");
      EASEL_ASSIGN_OR_RETURN(*out, take());
    } else if (name == "config") {
      EASEL_ASSIGN_OR_RETURN(std::string file, take());
      spec->fixed.push_back("--config=" + file);
    } else {
      const Setting* s = find_setting(name);
      if (s == nullptr || !s->takes(kTrainCommand)) return unknown_flag(name);
      if (sweep_owns(s->name))
        return bad("--" + name +
                   ": the sweep's own (run easel sweep again with the same --out to " + "go on)");
      if (s->field.type == SettingType::boolean) {
        if (value && *value != "true" && *value != "false")
          return bad("--" + name + ": '" + printable(*value) + "' is not true or false");
        spec->fixed.push_back(a);
        continue;
      }
      EASEL_ASSIGN_OR_RETURN(std::string v, take());
      EASEL_RETURN_IF_ERROR(check_value(*s, v, ""));
      spec->fixed.push_back("--" + std::string(s->name) + "=" + v);
    }
  }
  if (!grid.empty()) {
    SweepSpec from_file;
    EASEL_RETURN_IF_ERROR(read_grid(grid, &from_file));
    spec->axes.insert(spec->axes.begin(), from_file.axes.begin(), from_file.axes.end());
    spec->fixed.insert(spec->fixed.begin(), from_file.fixed.begin(), from_file.fixed.end());
  }
  spec->axes.insert(spec->axes.end(), sets.begin(), sets.end());
  if (out->empty()) return bad("--out: required (the sweep's directory)");
  return check_duplicates(*spec);
}

// DIR/sweep.json against the spec: a fresh directory takes it; one with the same grid goes on;
// an empty spec (only --out given) takes the directory's.
Status settle_spec(const fs::path& dir, SweepSpec* spec) {
  const fs::path file = dir / "sweep.json";
  std::error_code ec;
  const bool given = !spec->axes.empty() || !spec->fixed.empty();
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    return bad("--out: " + dir.string() + " exists and is not a directory");
  if (!fs::exists(file, ec)) {
    if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
      return bad("--out: " + dir.string() +
                 " holds files but no sweep.json (not a sweep's directory; choose another --out)");
    if (!given) return bad("--set or --grid: nothing to sweep (see easel sweep --help)");
    fs::create_directories(dir, ec);
    if (ec) return io_error("sweep: --out: cannot create " + dir.string() + ": " + ec.message());
    if (!write_atomic(file, spec_json(*spec).dump(2) + "\n"))
      return io_error("sweep: cannot write " + file.string());
    return {};
  }
  auto j = read_json(file);
  if (!j) return bad(file.string() + ": not a JSON object");
  EASEL_ASSIGN_OR_RETURN(SweepSpec had, spec_of(*j, file.string()));
  if (!given) {
    *spec = had;
    return {};
  }
  if (spec_json(*spec) != spec_json(had))
    return bad("--out: " + dir.string() + " holds another sweep (" + file.string() + ": " +
               spec_json(had)["axes"].dump() + " with the fixed flags " +
               spec_json(had)["fixed"].dump() +
               "); give the same grid and flags to go on, or choose another --out");
  return {};
}

// Whether the sweep's flags set --progress themselves (else each cell gets --progress=lines).
bool progress_given(const SweepSpec& spec) {
  bool given = false;
  for (const std::string& f : spec.fixed)
    given |= flag_key(f) == "progress";
  for (const SweepAxis& a : spec.axes)
    given |= a.key == "progress";
  return given;
}

// The train arguments that run cell c in cdir: resume from its checkpoint, or start it (over
// what a start without results left); nullopt when its summary.json says it finished (the sweep
// stopped before recording it). Says which on stdout after `head`.
std::optional<std::vector<std::string>> cell_args(const SweepSpec& spec, const SweepCell& c,
                                                  const fs::path& cdir, const std::string& head) {
  std::vector<std::string> args = {"train"};
  std::error_code ec;
  const std::optional<json> summary = read_json(cdir / "summary.json");
  if (summary && !finished_status(*summary).empty()) return std::nullopt;
  if (fs::exists(cdir / "checkpoint.bin", ec)) {
    args.push_back("--resume=" + cdir.string());
    std::printf("%s: resuming from its checkpoint\n", head.c_str());
  } else {
    args.insert(args.end(), spec.fixed.begin(), spec.fixed.end());
    for (const auto& [k, v] : c.settings)
      args.push_back("--" + k + "=" + v);
    args.push_back("--out=" + cdir.string());
    if (fs::exists(cdir, ec)) args.push_back("--overwrite");  // a start without results
    std::printf("%s: running\n", head.c_str());
  }
  return args;
}

// How cell cdir's run (exit code rc) ended, as its record's status, exit_code and summary or
// reason in *r. When a signal stopped the sweep during the cell: says on stdout how to go on and
// returns the sweep's exit code (the cell is not recorded).
std::optional<int> settle_cell(int rc, const fs::path& cdir, const fs::path& dir,
                               const std::string& exe, const std::string& head, json* r) {
  const std::optional<json> done = read_json(cdir / "summary.json");
  const std::string status = done ? finished_status(*done) : "";
  if ((rc == 0 || rc == 3 || rc == 4) && !status.empty()) {
    json s = *done;
    s.erase("layers");
    (*r)["status"] = status;
    (*r)["exit_code"] = rc;
    (*r)["summary"] = s;
  } else if (rc >= 128 + 1 && done && done->value("stopped", "") == "interrupted") {
    std::printf(
        "%s: stopped at step %lld with a checkpoint; run easel sweep --out %s again "
        "to go on\n",
        head.c_str(), static_cast<long long>(done->value("steps", 0LL)), dir.c_str());
    return child_signal() != 0 ? 128 + child_signal() : rc;
  } else if (rc == static_cast<int>(Failure::request)) {
    (*r)["status"] = "refused";
    (*r)["exit_code"] = rc;
    (*r)["reason"] = last_error(cdir / "train.log");
  } else {
    if (child_signal() != 0 && rc > 128) {
      std::printf(
          "%s: stopped before its first checkpoint; run easel sweep --out %s again to "
          "start it again\n",
          head.c_str(), dir.c_str());
      return 128 + child_signal();
    }
    (*r)["status"] = "failed";
    (*r)["exit_code"] = rc;
    (*r)["reason"] = rc == -1 ? "could not start " + exe : last_error(cdir / "train.log");
  }
  return std::nullopt;
}

// Appends record r to cells.jsonl; false when it cannot be written.
bool append_record(const fs::path& records_path, const json& r) {
  std::ofstream f(records_path, std::ios::app);
  f << r.dump() << "\n";
  return static_cast<bool>(f.flush());
}

// The records whose status is `status`.
size_t count_status(const std::map<std::string, json>& records, const char* status) {
  size_t n = 0;
  for (const auto& [name, r] : records)
    n += r["status"] == status;
  return n;
}

}  // namespace

int run_sweep(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "report")
    return run_sweep_report(std::vector<std::string>(args.begin() + 1, args.end()));
  SweepSpec spec;
  std::string out;
  bool help = false;
  if (Status st = parse_sweep_args(args, &spec, &out, &help); !st.ok())
    return report(st, Failure::request);
  if (help) {
    std::fputs(kSweepHelp, stdout);
    return 0;
  }
  const fs::path dir(out);
  if (Status st = settle_spec(dir, &spec); !st.ok()) return report(st, failure_of(st));
  const std::string exe = self_exe();
  if (exe.empty())
    return report(io_error("sweep: cannot find this program (/proc/self/exe)"), Failure::run);
  const bool progress = progress_given(spec);

  const std::vector<SweepCell> cells = sweep_cells(spec);
  const fs::path records_path = dir / "cells.jsonl";
  std::map<std::string, json> records = read_records(records_path);
  forward_signals_to_child();
  const size_t n = cells.size();
  size_t kept = 0, ran = 0;
  std::printf("sweep: %zu cell(s) in %s\n", n, dir.c_str());
  for (size_t i = 0; i < n; ++i) {
    const SweepCell& c = cells[i];
    const fs::path cdir = dir / c.name;
    const std::string head =
        "[" + std::to_string(i + 1) + "/" + std::to_string(n) + "] " + settings_text(c);
    if (auto it = records.find(c.name); it != records.end()) {
      std::printf("%s: kept, %s\n", head.c_str(), result_text(it->second).c_str());
      ++kept;
      continue;
    }
    if (const int sig = child_signal(); sig != 0) break;
    int rc = 0;
    if (std::optional<std::vector<std::string>> a = cell_args(spec, c, cdir, head)) {
      if (!progress) a->push_back("--progress=lines");
      std::error_code ec;
      fs::create_directories(cdir, ec);
      rc = run_child(exe, *a, cdir / "train.log");
      ++ran;
    }
    json r = {{"cell", c.name}, {"index", i + 1}, {"flags", json::object()}, {"dir", c.name}};
    for (const auto& [k, v] : c.settings)
      r["flags"][k] = v;
    r["fixed"] = spec.fixed;
    if (const std::optional<int> stop = settle_cell(rc, cdir, dir, exe, head, &r)) return *stop;
    if (!append_record(records_path, r))
      return report(io_error("sweep: cannot append to " + records_path.string()), Failure::run);
    records[c.name] = r;
    std::printf("%s: %s\n", head.c_str(), result_text(r).c_str());
    std::fflush(stdout);
  }
  if (const int sig = child_signal(); sig != 0) {
    std::printf("sweep: stopped; run easel sweep --out %s again to go on\n", dir.c_str());
    return 128 + sig;
  }
  std::printf(
      "sweep: %zu cell(s) finished (%zu run now, %zu kept; %zu refused, %zu failed); "
      "results in %s, report with easel sweep report %s\n",
      n, ran, kept, count_status(records, "refused"), count_status(records, "failed"),
      records_path.c_str(), dir.c_str());
  return 0;
}

}  // namespace easel::cli
