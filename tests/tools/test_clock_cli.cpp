// `easel train --clock FILE` through the program: metrics.jsonl and summary.json carry the
// described machine's simulated seconds and say so, two async runs write the same records (the
// wall-clock fields aside) and so does one resumed half-way, and what the clock cannot price is one
// line, exit 2, nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/machines_dirs.h"
#include "tests/tools/run_easel.hpp"

namespace {

namespace fs = std::filesystem;
using easel_test::Out;
using easel_test::slurp;

const char* kAsync =
    "train --net mlp --data synthetic:512:1x8x8:4 --iterations 40 --eval-every 20 --batch 16"
    " --algo async-easgd --tau 2 --groups 4 --threads-per-group 1 --oversubscribe"
    " --progress none --log-level warn --clock gpu8-pcie";

// metrics.jsonl's records without their wall-clock fields (wall_seconds, eval_seconds).
std::vector<std::string> simulated_records(const fs::path& run) {
  std::ifstream m(run / "metrics.jsonl");
  std::vector<std::string> out;
  for (std::string line; std::getline(m, line);) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j.value("clock", ""), "gpu8-pcie");
    j.erase("wall_seconds");
    j.erase("eval_seconds");
    out.push_back(j.dump());
  }
  return out;
}

TEST(ClockCli, AsyncRunsWriteTheSameSimulatedRecords) {
  const fs::path d = easel_test::tmp_dir("clock", "repeat");
  for (const char* run : {"a", "b"}) {
    Out o = easel_test::run_easel(std::string(kAsync) + " --out " + (d / run).string());
    ASSERT_EQ(o.code, 0) << o.err;
  }
  const std::vector<std::string> a = simulated_records(d / "a");
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(a, simulated_records(d / "b"));
  const auto s = nlohmann::json::parse(slurp(d / "a" / "summary.json"));
  EXPECT_EQ(s.value("clock", ""), "gpu8-pcie");
  // The simulated seconds of a K80 node's tiny MLP steps, far below this machine's wall time.
  EXPECT_LT(s["train_seconds"].get<double>(), 0.1 * s["wall_seconds"].get<double>());
  // Half the run, resumed to its end: the same records as the whole run's (the schedule goes on
  // at the checkpoint's simulated time).
  std::string half = kAsync;
  half.replace(half.find("--iterations 40"), 15, "--iterations 20");
  Out o = easel_test::run_easel(half + " --out " + (d / "half").string());
  ASSERT_EQ(o.code, 0) << o.err;
  o = easel_test::run_easel("train --resume " + (d / "half").string() +
                            " --iterations 40 --progress none");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(simulated_records(d / "half"), a);
}

TEST(ClockCli, WhatTheClockCannotPriceIsOneLine) {
  const fs::path d = easel_test::tmp_dir("clock", "refused");
  fs::create_directories(d);
  {  // a described machine without its compute.peak_gflops
    std::ifstream in(std::string(EASEL_MACHINES_SOURCE_DIR) + "/knl-7250.toml");
    std::ofstream nopeak(d / "nopeak.toml");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("peak_gflops", 0) != 0) nopeak << line << "\n";
  }
  const std::string tiny =
      "train --net mlp --data synthetic:512:1x8x8:4 --iterations 2 --progress none --log-level "
      "warn";
  struct Case {
    std::string args, says;
  };
  for (const Case& c : std::vector<Case>{
           {"--clock nosuch", "--clock nosuch: 'nosuch' is neither a file"},
           {"--clock " + (d / "nopeak.toml").string(), "compute.peak_gflops: missing"},
           {"--clock knl-7250 --groups 2 --placement interleave", "--placement"},
           {"--clock gpu8-pcie --groups 9 --oversubscribe", "--groups: 9 groups"}}) {
    const fs::path out = d / "run";
    Out o = easel_test::run_easel(tiny + " " + c.args + " --out " + out.string());
    EXPECT_EQ(o.code, 2) << c.args << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << c.args << ": " << o.err;
    EXPECT_NE(o.err.find(c.says), std::string::npos) << c.args << ": " << o.err;
    EXPECT_NE(o.err.find("--clock"), std::string::npos) << c.args << ": " << o.err;
    EXPECT_FALSE(fs::exists(out)) << c.args;
  }
}

// --placement on --clock is the described machine's: hbw is priced (never allocated here, where
// there is no high-bandwidth memory), refused when the groups do not fit in it, and with
// hbw-preferred priced in DRAM, which the summary says.
TEST(ClockCli, PlacementIsTheDescribedMachines) {
  const fs::path d = easel_test::tmp_dir("clock", "placement");
  fs::create_directories(d);
  {  // knl-7250 with 10 kB of MCDRAM: four MLP groups do not fit
    std::ifstream in(std::string(EASEL_MACHINES_SOURCE_DIR) + "/knl-7250.toml");
    std::ofstream small(d / "small-hbw.toml");
    bool hbw = false;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("[", 0) == 0) hbw = line == "[memory.hbw]";
      small << (hbw && line.rfind("capacity_gb", 0) == 0 ? "capacity_gb = 0.00001" : line) << "\n";
    }
  }
  const std::string tiny =
      "train --net mlp --data synthetic:512:1x8x8:4 --iterations 2 --groups 4 --oversubscribe "
      "--progress none --log-level warn --algo async-easgd";
  const auto summary = [&](const std::string& run) {
    return nlohmann::json::parse(slurp(d / run / "summary.json"));
  };
  Out fits = easel_test::run_easel(tiny + " --clock knl-7250 --placement hbw --out " +
                                   (d / "fits").string());
  ASSERT_EQ(fits.code, 0) << fits.err;
  EXPECT_EQ(summary("fits").value("clock_placement", ""), "hbw");
  const std::string small = (d / "small-hbw.toml").string();
  Out strict = easel_test::run_easel(tiny + " --clock " + small + " --placement hbw --out " +
                                     (d / "strict").string());
  EXPECT_EQ(strict.code, 2) << strict.err;
  EXPECT_EQ(std::count(strict.err.begin(), strict.err.end(), '\n'), 1) << strict.err;
  EXPECT_NE(strict.err.find("--placement hbw: 4 group(s) and the centre need"), std::string::npos)
      << strict.err;
  EXPECT_FALSE(fs::exists(d / "strict"));
  Out preferred =
      easel_test::run_easel(tiny + " --clock " + small + " --placement hbw-preferred --out " +
                            (d / "preferred").string());
  ASSERT_EQ(preferred.code, 0) << preferred.err;
  EXPECT_EQ(summary("preferred").value("clock_placement", "").rfind("dram (4 group(s)", 0), 0u)
      << summary("preferred").dump();
}

}  // namespace
