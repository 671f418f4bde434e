// The `easel` command line: subcommand registration and shared helpers.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/config.hpp"

namespace easel::bench {
struct BenchFlags;
}

namespace easel::cli {

// Adds every TrainConfig flag to `app`, bound to `cfg`, with its default shown in --help.
// Returns the names of the boolean flags (for config files).
std::vector<std::string> add_train_flags(CLI::App& app, TrainConfig& cfg);
// All long flag names of `app` (without dashes), for config-file key checking.
std::vector<std::string> flag_names(const CLI::App& app);

// `easel train --resume DIR`: DIR/config.json as flags (placed before the real ones, as a
// config file's), after checking that `given` (the flags on the command line, without dashes
// or values) change nothing a checkpoint fixes. Every key must be one of `known_flags`.
// Errors name the file and key, or the flag.
Result<std::vector<std::string>> resume_args(const std::string& dir,
                                             const std::vector<std::string>& given,
                                             const std::vector<std::string>& known_flags,
                                             const std::vector<std::string>& boolean_flags);

// Writes text to path atomically: a temporary file beside it, then a rename; on failure the
// file is as it was and no temporary is left. False on failure.
bool write_atomic(const std::filesystem::path& path, const std::string& text);

// Subcommands. Each returns the process exit code.
int run_train(const TrainConfig& cfg);
int run_topology(const TrainConfig& cfg);
int run_list();
// `easel bench`: adds the subcommand with its flags bound to `flags` (tools/bench_cmd.cpp).
CLI::App* add_bench_flags(CLI::App& app, bench::BenchFlags& flags);
int run_bench(const bench::BenchFlags& flags);

}  // namespace easel::cli
