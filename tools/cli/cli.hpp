// The `easel` command line: subcommand registration and shared helpers.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "api/run_dir.hpp"
#include "run/train_config.hpp"

namespace easel::api {  // the public API (include/easel/), which `easel train` uses
class Config;
class Status;
}  // namespace easel::api

namespace easel::bench {
struct BenchFlags;
}

namespace easel::cli {

// How a command failed (kExitCodes, tools/cli/exit_codes.hpp: README's "Exit codes"): the
// request is wrong (a flag, the config file, a resumed run's files; a file, net or data set
// that does not exist or holds malformed data; more than this machine has room for) or the
// run failed (the machine lacks a kind of hardware asked for, reading or writing, training).
enum class Failure { request = 2, run = 1 };
// The one mapping from a status: request for invalid_argument, not_found and data_error, run
// for unavailable, io_error and internal.
Failure failure_of(const Status& st);
Failure failure_of(const api::Status& st);
// Prints "easel: MESSAGE" (one line) to stderr; returns the exit code of `failure` (0 when st
// is ok, printing nothing).
int report(const Status& st, Failure failure);
int report(const api::Status& st, Failure failure);

// The train settings as the command line gives them: one per entry of train_settings(), its
// text (the flag's value, else the config file's or the resumed run's config.json, else the
// default); `on` holds a boolean's value while the flag parser runs.
struct SettingValue {
  std::string text;
  bool on = false;
};
using SettingValues = std::vector<SettingValue>;

// Defaults for every setting.
SettingValues default_setting_values();
// Adds the flags of the settings `command` takes (a SettingCommand) to `app`, bound to
// `values`, each with its help and default.
void add_setting_flags(CLI::App& app, unsigned command, SettingValues& values);
// easel's --help layout (set on the app before its subcommands, which inherit it): CLI11's, but
// a boolean pair shows its names and its default, not the value its second name sets.
std::shared_ptr<CLI::Formatter> help_formatter();
// " (did you mean X?)" for the candidate nearest `word` when it is near enough to be a typo
// (easel::nearest, engine/nearest.hpp), else "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);
// The names of the settings `command` takes (the config file's keys) and of its booleans.
std::vector<std::string> setting_names(unsigned command, bool booleans_only = false);
// After the flag parser: every setting of `command` into a TrainConfig, validated. A setting
// that `given` (the flags on the command line) does not name came from `source` (the config
// file or the resumed run's config.json, when not empty): its error names that file and key.
Result<TrainConfig> parse_settings(SettingValues& values, unsigned command,
                                   const std::vector<std::string>& given,
                                   const std::string& source);

// `easel train`'s settings into `config` (easel::api::Config::set, then validate), with
// parse_settings' errors.
api::Status train_settings_config(SettingValues& values, const std::vector<std::string>& given,
                                  const std::string& source, api::Config* config);

// `easel train --resume DIR`: DIR/config.json (easel::api::read_run_settings) as flags
// (placed before the real ones, as a config file's), after checking that `given` (the flags on
// the command line, without dashes or values) change nothing a checkpoint fixes (the table's
// resume rule). Errors name the file and key, or the flag.
Result<std::vector<std::string>> resume_args(const std::string& dir,
                                             const std::vector<std::string>& given);

// Writes text to path atomically (api/run_dir.hpp: a temporary file beside it, then a rename;
// on failure the file is as it was and no temporary is left). False on failure.
using run_dir::write_atomic;

// Subcommands. Each returns the process exit code.
// `easel train` (tools/cli/train_cmd.cpp, through the public API): the settings as
// train_settings_config takes them.
int run_train(SettingValues& values, const std::vector<std::string>& given,
              const std::string& source);
// `easel topology [--json]`: the machine and the plan (tools/topology_cmd.cpp); with `fit`
// (--net or --data given) also the memory fit of that net and data on the plan (run/fit.hpp).
int run_topology(const TrainConfig& cfg, bool as_json, bool fit);
// `easel train --explain [--json] [--time-exchange N]`: what the run will do
// (run/run_plan.hpp), nothing written; with N, its exchange timed over N rounds
// (tools/bench/plan_exchange.hpp).
struct ExplainFlags {
  bool explain = false, json = false;
  int time_exchange = 0;
};
int run_explain(const TrainConfig& cfg, const ExplainFlags& flags);
// `easel list [--json]`: the built-in nets (params, weight bytes, FLOPs) and the algorithms;
// with `net` (--net: a built-in name or a description file) only that net's line, on the input
// its description declares.
int run_list(bool as_json, const std::string& net = "");
// `easel --version` (tools/cli/version_cmd.cpp).
int run_version();
// `easel launch -np N ... -- TRAIN_FLAGS` (launch_cmd.cpp): the arguments after "launch".
int run_launch(const std::vector<std::string>& args);
// `easel bench`: adds the subcommand with its flags bound to `flags` (tools/bench/bench_cmd.cpp).
CLI::App* add_bench_flags(CLI::App& app, bench::BenchFlags& flags);
int run_bench(const bench::BenchFlags& flags);
// `easel model` and `easel plan` (tools/cli/model_cmd.cpp): adds both subcommands with their
// flags; the function returned runs the one that was parsed and returns its exit code, or -1
// when neither was.
using ModelCommands = std::function<int()>;
ModelCommands add_model_commands(CLI::App& app);
// `easel data pack` (tools/cli/data_cmd.cpp): adds the subcommand; the function returned runs it
// and returns its exit code, or -1 when it was not parsed.
using DataCommands = std::function<int()>;
DataCommands add_data_commands(CLI::App& app);
// `easel runs [DIR] [--json]` (tools/cli/runs_cmd.cpp): adds the subcommand; the function
// returned runs it and returns its exit code, or -1 when it was not parsed.
using RunsCommand = std::function<int()>;
RunsCommand add_runs_command(CLI::App& app);
// `easel export RUN_DIR --format onnx --out FILE` (tools/cli/export_cmd.cpp): adds the
// subcommand; the function returned runs it and returns its exit code, or -1 when it was not
// parsed.
using ExportCommand = std::function<int()>;
ExportCommand add_export_command(CLI::App& app);
// `easel eval RUN_DIR` (tools/cli/eval_cmd.cpp) and `easel predict RUN_DIR INPUT...`
// (tools/cli/predict_cmd.cpp): each adds its subcommand; the function returned runs it and
// returns its exit code, or -1 when it was not parsed.
using EvalCommand = std::function<int()>;
EvalCommand add_eval_command(CLI::App& app);
using PredictCommand = std::function<int()>;
PredictCommand add_predict_command(CLI::App& app);
// `easel completion bash|zsh` (tools/cli/completion_cmd.cpp): adds the subcommand, whose script
// covers every command and flag `app` has when it runs (add it last); the function returned
// prints it and returns 0, or -1 when it was not parsed.
using CompletionCommand = std::function<int()>;
CompletionCommand add_completion_command(CLI::App& app);
// A summary.json's (or a metrics record's) figure `key`; `otherwise` where it is missing or not
// a number (null: not measured, as the accuracy of a run stopped before its first evaluation).
double summary_number(const nlohmann::json& summary, const char* key, double otherwise = 0);

}  // namespace easel::cli
