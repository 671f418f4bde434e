// `easel sweep` and `easel sweep report`: the grid, its cells and the report (sweep_cmd.cpp,
// sweep_report.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace easel::cli {

// One swept train flag (its setting's name) and its values as flag texts.
struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};

struct SweepSpec {
  std::vector<SweepAxis> axes;     // the grid's order: the last varies fastest
  std::vector<std::string> fixed;  // "--name=value" (or a boolean's "--name") for every cell
};

// One cell of the product: its directory's name under the sweep's (the index from 1, then
// KEY-VALUE per axis) and its swept settings.
struct SweepCell {
  std::string name;
  std::vector<std::pair<std::string, std::string>> settings;
};

// The cartesian product of the axes, in order.
std::vector<SweepCell> sweep_cells(const SweepSpec& spec);

// `easel sweep ARGS` (the arguments after "sweep"); the process exit code.
int run_sweep(const std::vector<std::string>& args);
// `easel sweep report ARGS` (the arguments after "report").
int run_sweep_report(const std::vector<std::string>& args);

}  // namespace easel::cli
