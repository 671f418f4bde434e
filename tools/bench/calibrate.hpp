// `easel bench --calibrate`: this machine's description for the performance model
// (model/machine.hpp), measured here (calibrate.cpp says what it runs), fitted and written as
// TOML by model/calibration.hpp.
#pragma once

#include <string>

#include "engine/status.hpp"
#include "engine/topology.hpp"
#include "tools/bench/bench_model.hpp"

namespace easel::bench {

// Measures with `cfg` (its nets, its first batch size, warm-up, repeats and minimum time) on
// `topo` and writes the description to out_path (its directory created). Call before any thread
// starts (the triad forks a child).
Status run_calibration(const BenchConfig& cfg, const Topology& topo, const std::string& out_path);

}  // namespace easel::bench
