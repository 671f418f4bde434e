// The `easel` command line: subcommand registration and shared helpers.
#pragma once

#include <CLI/CLI.hpp>
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

// Subcommands. Each returns the process exit code.
int run_train(const TrainConfig& cfg);
int run_topology(const TrainConfig& cfg);
int run_list();
// `easel bench`: adds the subcommand with its flags bound to `flags` (tools/bench_cmd.cpp).
CLI::App* add_bench_flags(CLI::App& app, bench::BenchFlags& flags);
int run_bench(const bench::BenchFlags& flags);

}  // namespace easel::cli
