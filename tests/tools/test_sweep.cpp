// `easel sweep` and `easel sweep report` end to end through the built program, with tiny cells
// (an MLP on synthetic 8x8 images, tens of iterations): the product and its records, a refused
// cell, a sweep stopped by SIGINT and resumed (finished cells kept, the stopped one going on from
// its checkpoint), bad grids and flags, the report (with and without matplotlib). And the
// per-algorithm learning rate (--lr auto) as --help and config.json show it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "run/train_config.hpp"
#include "tests/tools/run_easel.hpp"

namespace {

namespace fs = std::filesystem;
using easel_test::Out;
using easel_test::slurp;
using easel_test::start_easel;
using easel_test::wait_exit;
using nlohmann::json;

fs::path tmp_dir(const std::string& name) {
  return easel_test::tmp_dir("sweep", name);
}

Out easel(const std::string& args, const std::string& env = "") {
  return easel_test::run_easel(args, env, "sweep");
}

const char* kTiny =
    " --net mlp --data synthetic:256:1x8x8:4 --threads-per-group 1 --oversubscribe"
    " --log-level warn";

std::vector<json> records(const fs::path& dir) {
  std::vector<json> out;
  std::istringstream in(slurp(dir / "cells.jsonl"));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

int lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

TEST(Sweep, RunsTheProductAndRecordsEachCell) {
  const fs::path d = tmp_dir("product") / "s";
  Out o = easel("sweep --set algo=sync-easgd,hogwild-sgd --set batch=8,16,32 --set groups=2" +
                std::string(kTiny) + " --iterations 12 --eval-every 6 --out " + d.string());
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  EXPECT_NE(o.out.find("[6/6] algo=hogwild-sgd batch=32 groups=2"), std::string::npos) << o.out;
  const auto rs = records(d);
  ASSERT_EQ(rs.size(), 6u);
  for (const json& r : rs) {
    EXPECT_EQ(r["status"], "done") << r.dump();
    ASSERT_TRUE(r["summary"].is_object());
    EXPECT_EQ(r["summary"]["steps"], 12);
    EXPECT_EQ(r["summary"]["algorithm"], r["flags"]["algo"]);
    EXPECT_EQ(r["summary"]["config"]["batch"], std::stoi(r["flags"]["batch"].get<std::string>()));
    EXPECT_EQ(r["summary"]["groups"], 2);
    EXPECT_TRUE(fs::exists(d / r["dir"].get<std::string>() / "metrics.jsonl"));
  }
  // The last axis varies fastest; the names say the settings.
  EXPECT_EQ(rs[0]["cell"], "1_algo-sync-easgd_batch-8_groups-2");
  EXPECT_EQ(rs[5]["cell"], "6_algo-hogwild-sgd_batch-32_groups-2");

  // The report: a table sorted by time to target, written and printed; without matplotlib
  // (EASEL_PYTHON a program that is not there) the table alone, a warning, exit 0.
  o = easel("sweep report " + d.string() + " --target 0.2", "EASEL_PYTHON=/nonexistent/python3 ");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(lines(o.err), 1) << o.err;
  EXPECT_NE(o.err.find("the report is the table alone"), std::string::npos) << o.err;
  const std::string md = slurp(d / "report.md");
  EXPECT_NE(md.find("| rank | cell | flags | status |"), std::string::npos) << md;
  EXPECT_NE(md.find("time to 0.20"), std::string::npos) << md;
  EXPECT_NE(md.find("**Warning:**"), std::string::npos) << md;
  EXPECT_EQ(md.find(".png"), std::string::npos) << md;
  const json rep = json::parse(slurp(d / "report.json"));
  ASSERT_EQ(rep["cells"].size(), 6u);
  for (size_t i = 1; i < rep["cells"].size(); ++i) {  // sorted: reached first, by time
    const json &a = rep["cells"][i - 1], &b = rep["cells"][i];
    if (!a["time_to_target"].is_null() && !b["time_to_target"].is_null())
      EXPECT_LE(a["time_to_target"].get<double>(), b["time_to_target"].get<double>());
    else
      EXPECT_TRUE(b["time_to_target"].is_null());
  }
  o = easel("sweep report " + d.string() + " --by throughput", "EASEL_PYTHON=/nonexistent ");
  ASSERT_EQ(o.code, 0) << o.err;
  const json by_ips = json::parse(slurp(d / "report.json"));
  for (size_t i = 1; i < by_ips["cells"].size(); ++i)
    EXPECT_GE(by_ips["cells"][i - 1]["images_per_second"].get<double>(),
              by_ips["cells"][i]["images_per_second"].get<double>());
  // With Debian's matplotlib: the four plots beside report.md, linked from it.
  if (std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") == 0) {
    o = easel("sweep report " + d.string());
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_EQ(o.err, "");
    for (const char* png :
         {"accuracy_vs_time.png", "time_to_target.png", "time_shares.png", "throughput.png"}) {
      EXPECT_TRUE(fs::exists(d / png)) << png;
      EXPECT_NE(slurp(d / "report.md").find(std::string("(") + png + ")"), std::string::npos);
    }
  }
}

// A cell that train refuses (exit 2) is recorded with train's reason and the sweep goes on.
TEST(Sweep, RecordsARefusedCellAndGoesOn) {
  const fs::path d = tmp_dir("refused") / "s";
  Out o = easel("sweep --set tau=0,2 --algo sync-easgd --groups 2" + std::string(kTiny) +
                " --iterations 4 --eval-every 2 --out " + d.string());
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  const auto rs = records(d);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0]["status"], "refused");
  EXPECT_EQ(rs[0]["exit_code"], 2);
  EXPECT_NE(rs[0]["reason"].get<std::string>().find("--tau"), std::string::npos) << rs[0].dump();
  EXPECT_EQ(rs[1]["status"], "done");
  EXPECT_NE(o.out.find("[1/2] tau=0: refused: --tau"), std::string::npos) << o.out;
  o = easel("sweep report " + d.string(), "EASEL_PYTHON=/nonexistent ");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(slurp(d / "report.md").find("| tau=0 | refused: --tau"), std::string::npos)
      << slurp(d / "report.md");
  // A one-group algorithm on two groups: refused before any data is read, the sweep goes on.
  const fs::path d2 = tmp_dir("refused-groups") / "s";
  o = easel("sweep --set algo=sgd,sync-easgd --groups 2" + std::string(kTiny) +
            " --iterations 4 --eval-every 2 --out " + d2.string());
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  const auto rs2 = records(d2);
  ASSERT_EQ(rs2.size(), 2u);
  EXPECT_EQ(rs2[0]["status"], "refused") << rs2[0].dump();
  EXPECT_NE(rs2[0]["reason"].get<std::string>().find("--groups: sgd runs on one group"),
            std::string::npos)
      << rs2[0].dump();
  EXPECT_EQ(rs2[1]["status"], "done");
}

// SIGINT to the sweep while its second cell runs: that cell checkpoints and stops, the sweep
// exits 130 with the first cell recorded. Run again: the first is kept (not run again), the
// second resumes from its checkpoint and ends where an unstopped run ends.
TEST(Sweep, StoppedBySigintAndResumed) {
  const fs::path base = tmp_dir("resume");
  const fs::path d = base / "s";
  std::vector<std::string> args = {"sweep",  "--set",        "iterations=20,2000",
                                   "--algo", "sync-easgd",   "--groups",
                                   "2",      "--eval-every", "40",
                                   "--out",  d.string()};
  std::istringstream tiny(kTiny);
  for (std::string a; tiny >> a;)
    args.push_back(a);
  const pid_t pid = start_easel(args, base);
  ASSERT_GT(pid, 0);
  const fs::path second = d / "2_iterations-2000";
  bool started = false;  // its first evaluation (and checkpoint) written
  for (int i = 0; i < 6000 && !started; ++i) {
    started = fs::exists(second / "checkpoint.bin") && lines(slurp(second / "metrics.jsonl")) >= 1;
    if (!started) ::usleep(10000);
  }
  ASSERT_TRUE(started) << slurp(base / "out") << slurp(base / "err");
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 130) << slurp(base / "out") << slurp(base / "err");
  EXPECT_NE(slurp(base / "out").find("[2/2] iterations=2000: stopped at step"), std::string::npos)
      << slurp(base / "out");
  ASSERT_EQ(records(d).size(), 1u);
  EXPECT_EQ(json::parse(slurp(second / "summary.json"))["stopped"], "interrupted");
  const auto first_summary = fs::last_write_time(d / "1_iterations-20" / "summary.json");

  // Again, with only --out: the directory's own grid.
  Out o = easel("sweep --out " + d.string());
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  EXPECT_NE(o.out.find("[1/2] iterations=20: kept"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("[2/2] iterations=2000: resuming from its checkpoint"), std::string::npos)
      << o.out;
  const auto rs = records(d);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[1]["status"], "done");
  EXPECT_EQ(rs[1]["summary"]["steps"], 2000);
  EXPECT_EQ(lines(slurp(second / "metrics.jsonl")), 50);  // every 40 steps, none twice
  EXPECT_EQ(fs::last_write_time(d / "1_iterations-20" / "summary.json"), first_summary);
  // A finished sweep run again runs nothing.
  o = easel("sweep --out " + d.string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("(0 run now, 2 kept"), std::string::npos) << o.out;
}

TEST(Sweep, BadGridsAndFlagsAreOneLine) {
  const fs::path d = tmp_dir("bad");
  const auto write = [&](const char* name, const char* text) {
    std::ofstream(d / name) << text;
    return (d / name).string();
  };
  const std::string out = " --out " + (d / "s").string();
  struct Case {
    std::string args, says;
  };
  const std::vector<Case> cases = {
      {"sweep --grid " + write("syntax.toml", "algo = [\"sgd\"\n") + out, "syntax.toml:"},
      {"sweep --grid " + write("key.toml", "algorithm = [\"sgd\"]\n") + out,
       "key 'algorithm' is not a train flag"},
      {"sweep --grid " + write("empty.toml", "lr = []\n") + out, "key 'lr': an empty list"},
      {"sweep --grid " + write("type.toml", "lr = [0.1, \"fast\"]\n") + out,
       "key 'lr': --lr: 'fast' is not a number"},
      {"sweep --grid " + write("table.toml", "[lr]\nx = 1\n") + out, "key 'lr': is a table"},
      {"sweep --grid " + write("own.toml", "out = [\"a\"]\n") + out, "'out' is the sweep's own"},
      {"sweep --grid " + (d / "missing.toml").string() + out, "missing.toml: cannot be read"},
      {"sweep --set lr=0.1,abc" + out, "--set lr: --lr: 'abc' is not a number"},
      {"sweep --set lr=0.1,,0.2" + out, "--set lr: an empty value"},
      {"sweep --set nosuch=1,2" + out, "'nosuch' is not a train flag"},
      {"sweep --set lr" + out, "--set lr: not KEY=V1,V2,..."},
      {"sweep --set lr=0.1 --set lr=0.2" + out, "'lr' is swept twice"},
      {"sweep --set lr=0.1 --lr 0.2" + out, "--lr is given twice"},
      {"sweep --set lr=0.1 --resume x" + out, "--resume: the sweep's own"},
      {"sweep --set lr=0.1 --bogus 3" + out, "--bogus: not a sweep or train flag"},
      {"sweep --set lr=0.1 --batch x" + out, "--batch: 'x' is not a whole number"},
      {"sweep --set lr=0.1", "--out: required"},
      {"sweep" + out, "nothing to sweep"},
      {"sweep report", "DIR: required"},
      {"sweep report " + d.string(), "cells.jsonl: cannot be read"},
      {"sweep report " + d.string() + " --by speed", "--by: 'speed'"},
      {"sweep report " + d.string() + " --target 2", "--target: '2'"},
  };
  for (const Case& c : cases) {
    const Out o = easel(c.args);
    EXPECT_EQ(o.code, 2) << c.args << "\n" << o.err;
    EXPECT_EQ(lines(o.err), 1) << c.args << "\n" << o.err;
    EXPECT_NE(o.err.find(c.says), std::string::npos) << c.args << "\n" << o.err;
    EXPECT_FALSE(fs::exists(d / "s" / "cells.jsonl")) << c.args;
  }
  // Another grid for a sweep's directory is refused; a directory that is not a sweep's too.
  Out o = easel("sweep --set tau=0" + std::string(kTiny) + " --iterations 2" + out);
  ASSERT_EQ(o.code, 0) << o.err;
  o = easel("sweep --set tau=0,1" + std::string(kTiny) + " --iterations 2" + out);
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("holds another sweep"), std::string::npos) << o.err;
  EXPECT_EQ(lines(o.err), 1) << o.err;
  o = easel("sweep --set tau=0 --out " + d.string());  // holds the grid files above
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("no sweep.json"), std::string::npos) << o.err;
}

// --lr auto (the default) is the algorithm's own rate: --help lists them, config.json keeps the
// number the run took, a given --lr wins.
TEST(AlgoDefaults, LrFollowsTheAlgorithm) {
  Out o = easel("train --help");
  ASSERT_EQ(o.code, 0);
  EXPECT_NE(o.out.find("--lr FLOAT=auto"), std::string::npos) << o.out;
  for (const easel::AlgoLr& a : easel::kAlgoDefaultLr)
    EXPECT_NE(o.out.find(std::string(a.algo) + " "), std::string::npos) << a.algo;
  const fs::path d = tmp_dir("lr");
  for (const char* algo : {"sgd", "hogwild-sgd", "sync-easgd", "async-msgd"}) {
    const fs::path run = d / algo;
    const std::string groups = std::string(algo) == "sgd" ? "1" : "2";
    o = easel("train --algo " + std::string(algo) + " --groups " + groups + kTiny +
              " --iterations 2 --progress none --out " + run.string());
    ASSERT_EQ(o.code, 0) << o.err;
    const json cfg = json::parse(slurp(run / "config.json"));
    EXPECT_EQ(cfg["lr"].get<double>(), easel::default_lr(algo)) << algo;
  }
  o = easel("train --algo hogwild-sgd --groups 2 --lr 0.0123" + std::string(kTiny) +
            " --iterations 2 --progress none --out " + (d / "given").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(json::parse(slurp(d / "given" / "config.json"))["lr"].get<double>(), 0.0123);
  // A resumed run keeps the rate its config.json holds.
  o = easel("train --resume " + (d / "given").string() + " --iterations 4 --progress none");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(json::parse(slurp(d / "given" / "config.json"))["lr"].get<double>(), 0.0123);
  // The rule holds whichever of --algo and --lr a config file sets first (set_setting).
  easel::TrainConfig c;
  ASSERT_TRUE(easel::set_setting(c, "lr", "auto").ok());
  ASSERT_TRUE(easel::set_setting(c, "algo", "hogwild-sgd").ok());
  EXPECT_EQ(c.lr, easel::default_lr("hogwild-sgd"));
  ASSERT_TRUE(easel::set_setting(c, "lr", "0.5").ok());
  ASSERT_TRUE(easel::set_setting(c, "algo", "sgd").ok());
  EXPECT_EQ(c.lr, 0.5);
}

}  // namespace
