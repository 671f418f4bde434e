// The `easel` command line end to end: help, flag and config errors (one line, non-zero exit),
// a real (tiny) training run and its output files, and that an earlier run's results are never
// overwritten by accident.
#include <gtest/gtest.h>

#include "easel_config.h"
#include "tests/tools/run_easel.hpp"

#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

using easel_test::Out;
using easel_test::slurp;
using easel_test::start_easel;
using easel_test::wait_exit;
using easel_test::wait_for_lines;

fs::path tmp_dir(const std::string& name) {
  return easel_test::tmp_dir("cli", name);
}

Out easel(const std::string& args) {
  return easel_test::run_easel(args);
}

const char* kTiny =
    " --net mlp --data synthetic:512:1x8x8:4 --iterations 40 --eval-every 20 --batch 16"
    " --groups 2 --threads-per-group 1 --oversubscribe --progress none --log-level warn";

TEST(Cli, HelpListsEveryFlagWithItsDefault) {
  Out o = easel("--help");
  EXPECT_EQ(o.code, 0);
  EXPECT_NE(o.out.find("train"), std::string::npos);
  EXPECT_NE(o.out.find("topology"), std::string::npos);
  o = easel("train --help");
  EXPECT_EQ(o.code, 0);
  for (const char* flag :
       {"--config", "--net", "--data", "--algo", "--epochs", "--iterations", "--batch", "--lr",
        "--lr-policy", "--momentum", "--weight-decay", "--seed", "--threads", "--groups",
        "--threads-per-group", "--placement", "--target-accuracy", "--eval-every", "--out"})
    EXPECT_NE(o.out.find(flag), std::string::npos) << flag;
  EXPECT_NE(o.out.find("sync-easgd"), std::string::npos);  // default algorithm shown
  EXPECT_NE(o.out.find("0.01"), std::string::npos);        // default lr shown
}

// `easel --version` (and -V) names the build: version, commit, compiler and -march, oneDNN,
// CUDA and MPI; anything after it is refused. `easel help [COMMAND]` is `--help`.
TEST(Cli, VersionAndHelp) {
  for (const char* flag : {"--version", "-V"}) {
    Out o = easel(flag);
    EXPECT_EQ(o.code, 0) << o.err;
    for (const char* part :
         {"easel 0.", "(commit ", "compiler: ", "-march=", "oneDNN: ", "CUDA: ", "MPI: "})
      EXPECT_NE(o.out.find(part), std::string::npos) << flag << ": " << part << "\n" << o.out;
  }
  Out extra = easel("--version train");
  EXPECT_EQ(extra.code, 2);
  EXPECT_EQ(extra.err, "easel: --version takes nothing after it\n");
  EXPECT_EQ(easel("help").out, easel("--help").out);
  const Out help_train = easel("help train");
  EXPECT_EQ(help_train.code, 0);
  EXPECT_EQ(help_train.out, easel("train --help").out);
  EXPECT_NE(help_train.out.find("--iterations"), std::string::npos);
}

// --precision on the CPU: tf32 and an unknown name refused in one line, exit 2, before any
// data is read; bf16 either trains or is refused with the probe's measured rates.
TEST(Cli, PrecisionOnTheCpu) {
  Out o = easel(std::string("train") + kTiny + " --precision tf32");
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_NE(o.err.find("--precision tf32: TF32 is the tensor-core format"), std::string::npos)
      << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  o = easel(std::string("train") + kTiny + " --precision fp16");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("expected fp32, tf32 or bf16"), std::string::npos) << o.err;
  const fs::path out = tmp_dir("bf16");
  o = easel(std::string("train") + kTiny + " --precision bf16 --out " + out.string());
  if (o.code != 0) {
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_TRUE(o.err.find("bf16 cannot pay") != std::string::npos ||
                o.err.find("no native bf16") != std::string::npos)
        << o.err;
  }
}

TEST(Cli, BadFlagsAreOneLineErrors) {
  for (const char* args :
       {"train --no-such-flag", "train --batch abc", "train --batch 0", "train --lr -1",
        "train --momentum 1.5", "train --algo nope", "train --lr-policy sgdr",
        "train --placement weights=fast", "train --layout chwn", "train --seed -1",
        "train --seed 99999999999999999999", "train --seed 1.5", "train --alpha 0.1 --rho 1",
        "train --collective banana", "train --collective mpi --iterations 1",
        "train --sync-centre both", "bench --collectives --ranks 0", "frobnicate"}) {
    Out o = easel(args);
    EXPECT_EQ(o.code, 2) << args << ": " << o.err;
    EXPECT_FALSE(o.err.empty()) << args;
    EXPECT_LE(std::count(o.err.begin(), o.err.end(), '\n'), 2) << args << ": " << o.err;
  }
  Out o = easel("train --batch 0");
  EXPECT_NE(o.err.find("--batch"), std::string::npos) << o.err;
  o = easel("frobnicate");
  EXPECT_NE(o.err.find("unknown command 'frobnicate' (commands: train, topology, list, bench"),
            std::string::npos)
      << o.err;
  // An empty value (the parser would take the next flag as the value, or a number as 0) and a
  // flag given twice (the last would win silently).
  o = easel("train --out= --overwrite");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--out: empty value"), std::string::npos) << o.err;
  o = easel("train --iterations ''");
  EXPECT_NE(o.err.find("--iterations: empty value"), std::string::npos) << o.err;
  o = easel("train --batch 8 --batch 16");
  EXPECT_NE(o.err.find("--batch: given twice"), std::string::npos) << o.err;
  o = easel("train --prefetch --no-prefetch");  // one flag, two names
  EXPECT_NE(o.err.find("--no-prefetch: the same flag as --prefetch"), std::string::npos) << o.err;
  o = easel("topology --groups 1 --groups 2");
  EXPECT_NE(o.err.find("--groups: given twice (see easel topology --help)"), std::string::npos)
      << o.err;
  o = easel("bench --json=");
  EXPECT_NE(o.err.find("--json: empty value"), std::string::npos) << o.err;
  o = easel("train --overwrite ''");  // a flag without a value: the empty argument is not its
  EXPECT_NE(o.err.find("an empty argument after --overwrite"), std::string::npos) << o.err;
  o = easel("train --alpha 0.1 --rho 1");  // alpha would win silently
  EXPECT_NE(o.err.find("--alpha and --rho: give one"), std::string::npos) << o.err;
  o = easel("train --config /");
  EXPECT_NE(o.err.find("--config: /: not a regular file"), std::string::npos) << o.err;
  o = easel("train --collective banana");
  EXPECT_NE(o.err.find("--collective"), std::string::npos) << o.err;
  o = easel("train --collective mpi --iterations 1");  // one process: no MPI library here
  EXPECT_NE(o.err.find("--collective mpi: the MPI library's own collectives run among the ranks"),
            std::string::npos)
      << o.err;
  o = easel("train --seed -1");  // not wrapped around to 2^64 - 1
  EXPECT_NE(o.err.find("--seed: '-1' is not a whole number"), std::string::npos) << o.err;
}

TEST(Cli, MissingDataNamesThePath) {
  const fs::path d = tmp_dir("missing");
  Out o = easel("train --data " + (d / "nowhere").string() + " --out " + (d / "run").string());
  EXPECT_EQ(o.code, 2);  // a bad request (README, "Exit codes")
  EXPECT_NE(o.err.find("nowhere"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(d / "run" / "summary.json"));
}

// README's exit codes: every bad request exits 2 with one line, whether the flag parser, the
// settings' checks, the plan or the data set refuses it; nothing is trained or written.
TEST(Cli, EveryBadRequestExits2) {
  const fs::path d = tmp_dir("bad_requests");
  for (const std::string& args : std::vector<std::string>{
           "--groups banana", "--groups 0", "--data " + (d / "nowhere").string(), "--lr -3",
           "--net nosuchnet", "--threads-per-group banana", "--algo nope", "--batch 0",
           "--net " + (d / "missing.toml").string(), "--no-such-flag 1"}) {
    const fs::path out = d / "run";
    Out o = easel("train " + args + " --iterations 2 --progress none --out " + out.string());
    EXPECT_EQ(o.code, 2) << args << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << ": " << o.err;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
}

TEST(Cli, ConfigFileKeysAreFlagsAndFlagsWin) {
  const fs::path d = tmp_dir("config");
  std::ofstream(d / "bad.toml") << "batch = 16\nlearning-rate = 0.1\n";
  Out o = easel("train --config " + (d / "bad.toml").string());
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("bad.toml"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("learning-rate"), std::string::npos) << o.err;

  std::ofstream(d / "broken.toml") << "batch = = 3\n";
  o = easel("train --config " + (d / "broken.toml").string());
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("broken.toml"), std::string::npos) << o.err;

  std::ofstream(d / "empty.toml") << "batch = 16\nout = \"\"\n";  // would be `--out=`
  o = easel("train --config " + (d / "empty.toml").string());
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("empty.toml:2: key 'out' is empty"), std::string::npos) << o.err;

  std::ofstream(d / "typed.toml") << "lr = \"fast\"\n";  // a type error names the file
  o = easel("train --config " + (d / "typed.toml").string());
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("typed.toml: key 'lr'"), std::string::npos) << o.err;
  std::ofstream(d / "named.toml") << "layout = \"chwn\"\n";  // so does a bad name
  o = easel("train --config " + (d / "named.toml").string());
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("named.toml: key 'layout': --layout: unknown layout 'chwn'"),
            std::string::npos)
      << o.err;
  o = easel("train --config " + (d / "named.toml").string() + " --layout nhwc --iterations -1");
  EXPECT_EQ(o.code, 2);  // the flag replaced the file's value: the error is the flag's own
  EXPECT_NE(o.err.find("easel: --iterations: must be >= 0"), std::string::npos) << o.err;

  std::ofstream(d / "good.toml")
      << "algo = \"sync-sgd\"\nbatch = 8\nlr = 0.02\noversubscribe = true\n";
  o = easel("train --config " + (d / "good.toml").string() + kTiny +
            " --out " +  // kTiny: --batch 16
            (d / "run").string());
  ASSERT_EQ(o.code, 0) << o.err;
  const auto s = nlohmann::json::parse(slurp(d / "run" / "summary.json"));
  EXPECT_EQ(s["algorithm"], "sync-sgd");                    // from the file
  EXPECT_EQ(s["config"]["batch"], 16);                      // the flag wins
  EXPECT_DOUBLE_EQ(s["config"]["lr"].get<double>(), 0.02);  // from the file
}

TEST(Cli, TrainWritesMetricsAndSummaryAndNeverOverwrites) {
  const fs::path d = tmp_dir("train");
  const std::string out = " --out " + (d / "run").string();
  Out o = easel(std::string("train") + kTiny + out);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("test accuracy"), std::string::npos);
  std::ifstream m(d / "run" / "metrics.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(m, line)) {
    const auto j = nlohmann::json::parse(line);
    for (const char* k :
         {"wall_seconds", "epoch", "step", "train_loss", "test_accuracy", "images_per_second",
          "compute_seconds", "comm_seconds", "wait_seconds", "preempted_seconds", "groups"})
      EXPECT_TRUE(j.contains(k)) << k;
    ++lines;
  }
  EXPECT_EQ(lines, 2);
  const std::string before = slurp(d / "run" / "summary.json");
  const auto s = nlohmann::json::parse(before);
  for (const char* k :
       {"stopped", "test_accuracy", "epochs", "steps", "wall_seconds", "images_per_second",
        "time_to_target_seconds", "algorithm", "groups", "comm_share", "preempted_share"})
    EXPECT_TRUE(s.contains(k)) << k;
  EXPECT_EQ(s["stopped"], "completed");
  EXPECT_EQ(s["groups"], 2);
  EXPECT_EQ(s["steps"], 40);
  EXPECT_TRUE(s["time_to_target_seconds"].is_null());  // no target was set
  // config.json: the settings a resumed run takes, keyed by flag, with their JSON types; not
  // those each run gives itself.
  const auto c = nlohmann::json::parse(slurp(d / "run" / "config.json"));
  for (const char* k : {"out", "overwrite", "progress", "log-level", "resume"})
    EXPECT_FALSE(c.contains(k)) << k;
  EXPECT_EQ(c["placement"], "dram");
  EXPECT_EQ(c["groups"], "2");
  EXPECT_TRUE(c["batch"].is_number_integer());
  EXPECT_TRUE(c["epochs"].is_number_float());
  EXPECT_EQ(c["oversubscribe"], true);
  EXPECT_EQ(c, s["config"]);

  o = easel(std::string("train") + kTiny + out);
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--overwrite"), std::string::npos) << o.err;
  EXPECT_EQ(slurp(d / "run" / "summary.json"), before);
  o = easel(std::string("train") + kTiny + out + " --overwrite");
  EXPECT_EQ(o.code, 0) << o.err;
  // An --overwrite run that fails (diverges: exit 3) leaves no summary of the run it replaced
  // beside its own config and metrics: only its own, marked diverged.
  o = easel(std::string("train") + kTiny + out + " --overwrite --lr 10 --alpha 1");
  EXPECT_EQ(o.code, 3) << o.err;
  EXPECT_NE(o.err.find("diverged"), std::string::npos) << o.err;
  ASSERT_TRUE(fs::exists(d / "run" / "summary.json"));
  const auto own = nlohmann::json::parse(slurp(d / "run" / "summary.json"));
  EXPECT_EQ(own["stopped"], "diverged");
  EXPECT_EQ(own["config"]["alpha"], 1.0);
  EXPECT_EQ(nlohmann::json::parse(slurp(d / "run" / "config.json"))["alpha"], 1.0);
}

TEST(Cli, StopsAtTargetAndRecordsTheTime) {
  const fs::path d = tmp_dir("target");
  Out o =
      easel(std::string("train") + kTiny + " --target-accuracy 0.5 --out " + (d / "run").string());
  ASSERT_EQ(o.code, 0) << o.err;
  const auto s = nlohmann::json::parse(slurp(d / "run" / "summary.json"));
  ASSERT_TRUE(s["time_to_target_seconds"].is_number());
  EXPECT_EQ(s["stopped"], "target");
  EXPECT_GE(s["test_accuracy"].get<double>(), 0.5);
  EXPECT_NE(o.out.find("target 0.500 reached"), std::string::npos) << o.out;
}

TEST(Cli, TopologyPrintsThePlanAndRefusesOversubscription) {
  Out o = easel("topology");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("plan"), std::string::npos);
  o = easel("topology --groups 64");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--oversubscribe"), std::string::npos) << o.err;
  o = easel("topology --groups 64 --oversubscribe");
  EXPECT_EQ(o.code, 0) << o.err;
  // No plan that train would refuse: a one-group algorithm on two groups.
  o = easel("topology --algo msgd --groups 2 --oversubscribe");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("msgd runs on one group"), std::string::npos) << o.err;
  EXPECT_EQ(o.out.find("plan for"), std::string::npos) << o.out;
}

}  // namespace

namespace {

// Whether this machine can run the CUDA device (a GPU and a CUDA build): `easel topology`
// lists GPUs then.
bool machine_has_gpu() {
  Out o = easel("topology");
  EXPECT_NE(o.out.find("GPUs: "), std::string::npos) << o.out << o.err;
  return o.out.find("GPUs: none") == std::string::npos;
}

// A run writes checkpoint.bin after every evaluation; --resume goes on from it in the same
// directory, appending to metrics.jsonl (after dropping lines the checkpoint does not cover),
// and every wrong use is one line that leaves the run's files as they were.
// When metrics.jsonl cannot be rewritten (a full disk; here its temporary's path is taken),
// its records past the checkpoint stay and the resumed run appends only later steps, on a line
// of their own: no step is logged twice.
TEST(Cli, ResumeThatCannotTrimMetricsLogsNoStepTwice) {
  const fs::path d = tmp_dir("resume-trim");
  const fs::path run = d / "run";
  Out o = easel("train" + std::string(kTiny) + " --out " + run.string());
  ASSERT_EQ(o.code, 0) << o.err;
  { std::ofstream(run / "metrics.jsonl", std::ios::app) << "{\"step\": 50}\n{\"step\": 6"; }
  fs::create_directories(run / "metrics.jsonl.tmp" / "taken");
  o = easel("train --resume " + run.string() + " --iterations 80 --progress none");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("records up to step 50 stay"), std::string::npos) << o.err;
  std::ifstream m(run / "metrics.jsonl");
  std::string line;
  std::vector<int> steps;
  int bad = 0;
  while (std::getline(m, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded())
      ++bad;
    else
      steps.push_back(j["step"].get<int>());
  }
  EXPECT_EQ(steps, (std::vector<int>{20, 40, 50, 60, 80}));
  EXPECT_EQ(bad, 1);  // the half line stays, alone
}

// An output that cannot be written fails the command, and what stands at its temporary's
// path is not ours to remove.
TEST(Cli, UnwritableOutputsFailAndTouchNothingElse) {
  const fs::path d = tmp_dir("unwritable");
  const fs::path run = d / "run";
  Out o = easel("train" + std::string(kTiny) + " --out " + run.string());
  ASSERT_EQ(o.code, 0) << o.err;
  fs::remove(run / "summary.json");
  fs::create_directories(run / "summary.json" / "taken");  // the rename cannot replace it
  o = easel("train --resume " + run.string() + " --iterations 60 --progress none");
  EXPECT_EQ(o.code, 1) << o.err;
  EXPECT_NE(o.err.find("summary.json"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(run / "summary.json.tmp"));

  fs::create_directories(d / "b.json.tmp");  // someone else's
  o = easel(
      "bench --nets lenet --layouts 1x1 --skip-ceilings --skip-layers --skip-exchange "
      "--repeats 1 --warmup 1 --min-time 0.01 --json " +
      (d / "b.json").string());
  EXPECT_EQ(o.code, 1) << o.err;
  EXPECT_NE(o.err.find("--json: cannot write"), std::string::npos) << o.err;
  EXPECT_TRUE(fs::is_directory(d / "b.json.tmp"));
  EXPECT_FALSE(fs::exists(d / "b.json"));
}

// A config.json the run did not write: a key no flag has, a wrong type or value, a setting the
// checkpoint fixes edited, or not a file: named in one line, nothing run.
TEST(Cli, ResumeRefusesAnOddOrEditedConfig) {
  const fs::path d = tmp_dir("resume-config");
  const fs::path run = d / "run";
  Out o = easel("train" + std::string(kTiny) + " --algo sync-easgd --out " + run.string());
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string config = slurp(run / "config.json");
  {  // a config.json with a key no flag has: named, nothing run
    const fs::path odd = d / "odd";
    fs::create_directories(odd);
    std::ofstream(odd / "config.json") << "{\"algo\": \"msgd\", \"colour\": \"blue\"}";
    o = easel("train --resume " + odd.string());
    EXPECT_EQ(o.code, 2);
    EXPECT_NE(o.err.find("config.json: unknown key 'colour'"), std::string::npos) << o.err;
    std::ofstream(odd / "config.json") << "{\"algo\": \"msgd\", \"batch\": \"16\"}";
    o = easel("train --resume " + odd.string());
    EXPECT_EQ(o.code, 2);
    EXPECT_NE(o.err.find("config.json: key 'batch' has the wrong type"), std::string::npos)
        << o.err;
    std::ofstream(odd / "config.json") << "{\"algo\": \"msgd\", \"reduce\": \"ring\"}";
    o = easel("train --resume " + odd.string());
    EXPECT_EQ(o.code, 2);
    EXPECT_NE(o.err.find("config.json: key 'reduce': --reduce: 'ring'"), std::string::npos)
        << o.err;
  }
  {  // config.json edited in a setting the checkpoint fixes, or not a file: named, nothing run
    const fs::path edited = d / "edited";
    fs::create_directories(edited);
    fs::copy_file(run / "checkpoint.bin", edited / "checkpoint.bin");
    auto j = nlohmann::json::parse(config);
    j["layout"] = "nchw";
    std::ofstream(edited / "config.json") << j.dump(2);
    o = easel("train --resume " + edited.string() + " --iterations 60");
    EXPECT_EQ(o.code, 2);
    EXPECT_NE(o.err.find("config.json: 'layout' is \"nchw\", but the checkpoint's run had"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    fs::remove(edited / "config.json");
    fs::create_directories(edited / "config.json");
    o = easel("train --resume " + edited.string() + " --iterations 60");
    EXPECT_EQ(o.code, 2);
    EXPECT_NE(o.err.find("config.json: not a regular file"), std::string::npos) << o.err;
  }
}

TEST(Cli, ResumeGoesOnFromTheCheckpoint) {
  const fs::path d = tmp_dir("resume");
  const fs::path run = d / "run";
  const std::string tiny_algo = std::string(kTiny) + " --algo sync-easgd";
  Out o = easel("train" + tiny_algo + " --out " + run.string());
  ASSERT_EQ(o.code, 0) << o.err;
  ASSERT_TRUE(fs::exists(run / "checkpoint.bin"));
  // As if the run had been killed after logging an evaluation its checkpoint missed.
  // As if killed while writing a line, too.
  { std::ofstream(run / "metrics.jsonl", std::ios::app) << "{\"step\": 50}\n{\"step\": 6"; }
  const std::string ck = slurp(run / "checkpoint.bin");
  const std::string config = slurp(run / "config.json");

  o = easel("train --resume " + run.string() + " --lr 0.5");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--lr cannot change"), std::string::npos) << o.err;
  o = easel("train --resume " + run.string() + " --out " + (d / "other").string());
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--out"), std::string::npos) << o.err;
  o = easel("train --resume " + (d / "nothing").string());
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("config.json: no such file"), std::string::npos) << o.err;
  o = easel("train --resume=");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--resume: empty value"), std::string::npos) << o.err;
  o = easel("train --resume " + run.string());  // 40 of 40 done: a request refused
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("already did 40 of its 40"), std::string::npos) << o.err;
  o = easel("train --resume " + run.string() + " --iterations 30");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("already did 40 of its 30"), std::string::npos) << o.err;
  EXPECT_EQ(slurp(run / "checkpoint.bin"), ck);
  EXPECT_EQ(slurp(run / "config.json"), config);  // a refused resume changes nothing

  o = easel("train --resume " + run.string() + " --iterations 60 --progress none");
  ASSERT_EQ(o.code, 0) << o.err;
  std::ifstream m(run / "metrics.jsonl");
  std::string line;
  std::vector<int> steps;
  while (std::getline(m, line))
    steps.push_back(nlohmann::json::parse(line)["step"].get<int>());
  EXPECT_EQ(steps, (std::vector<int>{20, 40, 60}));
  const auto s = nlohmann::json::parse(slurp(run / "summary.json"));
  EXPECT_EQ(s["steps"], 60);
  EXPECT_EQ(nlohmann::json::parse(slurp(run / "config.json"))["iterations"], 60);

  // --epochs alone replaces a length given in iterations: 512 images / (2 x 16) = 16 per epoch.
  o = easel("train --resume " + run.string() + " --epochs 5");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(run / "summary.json"))["steps"], 80);

  // A damaged checkpoint: one line naming it, nothing rewritten.
  std::string bad = slurp(run / "checkpoint.bin");
  bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 1);
  { std::ofstream(run / "checkpoint.bin", std::ios::binary | std::ios::trunc) << bad; }
  const std::string metrics = slurp(run / "metrics.jsonl");
  o = easel("train --resume " + run.string() + " --iterations 80");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("checkpoint.bin: corrupted"), std::string::npos) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_EQ(slurp(run / "metrics.jsonl"), metrics);
  EXPECT_EQ(slurp(run / "checkpoint.bin"), bad);

  // --no-checkpoint writes none.
  o = easel("train" + tiny_algo + " --no-checkpoint --out " + (d / "none").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_FALSE(fs::exists(d / "none" / "checkpoint.bin"));
}

// Resume into another layout (docs/FAULTS.md): an EASGD run goes on with another --groups; the
// others are refused before anything runs, one line with the reason, exit 2.
TEST(Cli, ResumeIntoAnotherGroupCount) {
  const fs::path d = tmp_dir("regroup");
  for (const char* algo : {"sync-easgd", "sync-sgd"}) {
    const fs::path run = d / algo;
    Out o = easel("train" + std::string(kTiny) + " --algo " + algo + " --out " + run.string());
    ASSERT_EQ(o.code, 0) << o.err;
    const std::string ck = slurp(run / "checkpoint.bin");
    o = easel("train --resume " + run.string() + " --groups 3 --iterations 60");
    if (std::string(algo) == "sync-easgd") {
      ASSERT_EQ(o.code, 0) << o.err;
      const auto s = nlohmann::json::parse(slurp(run / "summary.json"));
      EXPECT_EQ(s["groups"], 3);
      EXPECT_EQ(s["steps"], 60);
      EXPECT_EQ(nlohmann::json::parse(slurp(run / "config.json"))["groups"], "3");
      continue;
    }
    EXPECT_EQ(o.code, 2);
    EXPECT_EQ(o.err.rfind("easel: --groups: a checkpoint of sync-sgd resumes only with its 2 "
                          "group(s), not 3: ",
                          0),
              0u)
        << o.err;
    EXPECT_NE(o.err.find("cannot be re-split"), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_EQ(slurp(run / "checkpoint.bin"), ck);
    o = easel("train --resume " + run.string() + " --groups 2 --iterations 60");
    EXPECT_EQ(o.code, 0) << o.err;
  }
}

// diloco goes on in another group count from a checkpoint at a meeting (40 iterations, tau 4);
// one between two meetings (tau 3) is refused: exit 2, one line, the checkpoint untouched.
TEST(Cli, PeriodicResumesIntoAnotherGroupCountAtAMeeting) {
  const fs::path d = tmp_dir("regroup-periodic");
  for (const char* tau : {"4", "3"}) {
    const fs::path run = d / tau;
    Out o = easel("train" + std::string(kTiny) + " --algo diloco --exchange-precision int8 --tau " +
                  tau + " --out " + run.string());
    ASSERT_EQ(o.code, 0) << o.err;
    const std::string ck = slurp(run / "checkpoint.bin");
    o = easel("train --resume " + run.string() + " --groups 3 --iterations 60");
    if (std::string(tau) == "4") {
      ASSERT_EQ(o.code, 0) << o.err;
      const auto s = nlohmann::json::parse(slurp(run / "summary.json"));
      EXPECT_EQ(s["groups"], 3);
      EXPECT_EQ(s["steps"], 60);
      continue;
    }
    EXPECT_EQ(o.code, 2);
    EXPECT_EQ(o.err.rfind("easel: --groups: a checkpoint of diloco taken between two meetings "
                          "(iteration 40, --tau 3) resumes only with its 2 group(s), not 3: ",
                          0),
              0u)
        << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_EQ(slurp(run / "checkpoint.bin"), ck);
  }
}

}  // namespace

namespace {

// metrics.jsonl's records without their timings: what a resumed run must repeat exactly.
std::vector<nlohmann::json> metric_values(const fs::path& file) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(file));
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    out.push_back({j["step"], j["train_loss"], j["test_loss"], j["test_accuracy"]});
  }
  return out;
}

std::vector<std::string> split_args(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string a; in >> a;)
    out.push_back(a);
  return out;
}

}  // namespace

// SIGTERM, SIGINT and SIGUSR1 sent after the first evaluation: every group ends its step, the
// run writes its checkpoint and a summary marked interrupted and exits with 128 + the signal;
// --resume then gives the metrics of the run that never stopped. A second signal exits at once
// and leaves the last checkpoint whole.
TEST(Cli, SignalsStopWithACheckpointAndResumeExactly) {
  const fs::path d = tmp_dir("signals");
  const std::string common =
      "train --net mlp --data synthetic:512:1x8x8:4 --batch 16 --groups 2 --threads-per-group 1"
      " --oversubscribe --progress none --log-level warn --algo sync-easgd --iterations 2000"
      " --eval-every 40";
  Out o = easel(common + " --out " + (d / "whole").string());
  ASSERT_EQ(o.code, 0) << o.err;
  const auto whole = metric_values(d / "whole" / "metrics.jsonl");
  ASSERT_EQ(whole.size(), 50u);
  for (const int sig : {SIGTERM, SIGINT, SIGUSR1}) {
    const fs::path run = d / ("run" + std::to_string(sig));
    auto args = split_args(common + " --out " + run.string());
    const pid_t pid = start_easel(args, d);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(wait_for_lines(d / "out", 2)) << slurp(d / "err");  // the start, an evaluation
    ::kill(pid, sig);
    EXPECT_EQ(wait_exit(pid), 128 + sig) << slurp(d / "err");
    EXPECT_NE(slurp(d / "out").find("interrupted by SIG"), std::string::npos) << slurp(d / "out");
    const auto s = nlohmann::json::parse(slurp(run / "summary.json"));
    EXPECT_EQ(s["stopped"], "interrupted");
    ASSERT_TRUE(fs::exists(run / "checkpoint.bin"));
    o = easel("train --resume " + run.string() + " --progress none");
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_EQ(nlohmann::json::parse(slurp(run / "summary.json"))["stopped"], "completed");
    EXPECT_EQ(metric_values(run / "metrics.jsonl"), whole) << sig;
  }
  // Two signals: the second ends the process at once; the checkpoint stays whole (or absent,
  // if none had been written yet), never half-written.
  const fs::path twice = d / "twice";
  const pid_t pid = start_easel(split_args(common + " --out " + twice.string()), d);
  ASSERT_TRUE(wait_for_lines(d / "out", 2));
  ::kill(pid, SIGTERM);
  ::kill(pid, SIGTERM);
  const int code = wait_exit(pid);
  EXPECT_EQ(code, 143);
  if (fs::exists(twice / "checkpoint.bin")) {
    o = easel("train --resume " + twice.string() + " --progress none --iterations 2040");
    EXPECT_EQ(o.code, 0) << o.err;
  }
}

// --checkpoint-every K and auto from the command line: summary.json counts the checkpoints, the
// time they took from training and the writes' own (a thread of the writer's), and auto's
// interval; a run killed two evaluations past its last checkpoint resumes from it into the
// numbers of the run never killed.
TEST(Cli, CheckpointCadenceAndTheBackgroundWrite) {
  const fs::path d = tmp_dir("cadence");
  const std::string common =
      "train --net mlp --data synthetic:512:1x8x8:4 --batch 16 --groups 2 --threads-per-group 1"
      " --oversubscribe --progress none --log-level warn --algo sync-easgd --eval-every 40";
  Out o = easel(common + " --iterations 200 --out " + (d / "every").string());
  ASSERT_EQ(o.code, 0) << o.err;
  auto s = nlohmann::json::parse(slurp(d / "every" / "summary.json"));
  EXPECT_EQ(s["checkpoints"], 5);
  EXPECT_GT(s["checkpoint_write_seconds"].get<double>(), 0);
  EXPECT_TRUE(s["checkpoint_interval_seconds"].is_null());
  o = easel(common + " --iterations 200 --checkpoint-every auto --mtbf 1e-9 --out " +
            (d / "auto").string());
  ASSERT_EQ(o.code, 0) << o.err;
  s = nlohmann::json::parse(slurp(d / "auto" / "summary.json"));
  EXPECT_EQ(s["checkpoints"], 5);
  EXPECT_GT(s["checkpoint_interval_seconds"].get<double>(), 0);
  // Every third evaluation: killed (EASEL_FAULT) at step 170, after the evaluation at 160, with
  // the checkpoint of 120; resumed from it (metrics.jsonl trimmed to 120), the run that
  // checkpointed at every evaluation.
  o = easel_test::run_easel(
      common + " --iterations 400 --checkpoint-every 3 --out " + (d / "third").string(),
      "EASEL_FAULT=kill:group0@170 ", "cadence");
  ASSERT_NE(o.code, 0) << "the fault did not kill the run";
  ASSERT_EQ(metric_values(d / "third" / "metrics.jsonl").size(), 4u);
  o = easel("train --resume " + (d / "third").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(d / "third" / "summary.json"))["checkpoints"], 3);
  o = easel(common + " --iterations 400 --out " + (d / "whole").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(metric_values(d / "third" / "metrics.jsonl"),
            metric_values(d / "whole" / "metrics.jsonl"));
  o = easel(common + " --checkpoint-every auto --out " + (d / "refused").string());
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--checkpoint-every auto: needs --mtbf"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(d / "refused"));
}

// --on-failure from the command line, with EASEL_FAULT's throw: async-easgd drops group 1 at its
// step 3 (its default; early, and a long run, so that a thread starved on a loaded machine still
// gets there) and completes with the others, exit 0, the last line and summary.json
// naming the group, the step and why, and its checkpoint resumes; restart goes on with it; stop
// exits 1 in one line; an algorithm whose groups meet refuses drop in one line, exit 2, and so does
// a throw injected into it, nothing written.
TEST(Cli, OnFailureDropsOrRestartsAGroupThatThrows) {
  const fs::path d = tmp_dir("onfail");
  const std::string common =
      "train --net mlp --data synthetic:512:1x8x8:4 --batch 16 --groups 3 --threads-per-group 1"
      " --oversubscribe --progress none --log-level error --iterations 200 --eval-every 100";
  Out o = easel_test::run_easel(common + " --algo async-easgd --out " + (d / "drop").string(),
                                "EASEL_FAULT=throw:group1@3 ", "onfail");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("completed with the surviving groups after 1 group failure(s); group 1 "
                       "dropped at step 3: EASEL_FAULT: group 1 at step 3: threw"),
            std::string::npos)
      << o.out;
  auto s = nlohmann::json::parse(slurp(d / "drop" / "summary.json"));
  EXPECT_EQ(s["stopped"], "completed");
  EXPECT_EQ(s["steps"], 200);
  ASSERT_EQ(s["group_failures"].size(), 1u);
  EXPECT_EQ(s["group_failures"][0]["group"], 1);
  EXPECT_EQ(s["group_failures"][0]["step"], 3);
  EXPECT_EQ(s["group_failures"][0]["action"], "dropped");
  EXPECT_EQ(metric_values(d / "drop" / "metrics.jsonl").size(), 2u);  // metrics go on
  // Its checkpoint, taken after the failure, resumes: group 1 stays out, the failure is kept.
  o = easel("train --resume " + (d / "drop").string() + " --iterations 300");
  ASSERT_EQ(o.code, 0) << o.err;
  s = nlohmann::json::parse(slurp(d / "drop" / "summary.json"));
  EXPECT_EQ(s["steps"], 300);
  ASSERT_EQ(s["group_failures"].size(), 1u);
  EXPECT_EQ(s["group_failures"][0]["step"], 3);
  o = easel_test::run_easel(
      common + " --algo async-measgd --on-failure restart --out " + (d / "restart").string(),
      "EASEL_FAULT=nan:group2@2 ", "onfail");
  ASSERT_EQ(o.code, 0) << o.err;
  s = nlohmann::json::parse(slurp(d / "restart" / "summary.json"));
  ASSERT_EQ(s["group_failures"].size(), 1u);
  EXPECT_EQ(s["group_failures"][0]["action"], "restarted");
  o = easel_test::run_easel(
      common + " --algo async-sgd --on-failure stop --out " + (d / "stop").string(),
      "EASEL_FAULT=throw:group1@3 ", "onfail");
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("a group failed (--on-failure stop ends the run"), std::string::npos)
      << o.err;
  o = easel(common + " --algo sync-easgd --on-failure drop --out " + (d / "sync").string());
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err.rfind("easel: --on-failure drop: sync-easgd's groups meet", 0), 0u) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_FALSE(fs::exists(d / "sync"));
  o = easel_test::run_easel(common + " --algo sync-easgd --out " + (d / "sync").string(),
                            "EASEL_FAULT=throw:group1@10 ", "onfail");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("EASEL_FAULT: throw: sync-easgd's groups wait"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(d / "sync"));
}

// The periodic algorithms from the command line: diloco drops group 1 that throws at its step 10
// by default (auto) and completes, exit 0, summary.json naming it; local-sgd restarts group 0,
// poisoned at its step 3 (it decides the lockstep's stops), and completes with every iteration.
TEST(Cli, OnFailureDropsOrRestartsAPeriodicGroup) {
  const fs::path d = tmp_dir("onfail-periodic");
  const std::string common =
      "train --net mlp --data synthetic:512:1x8x8:4 --batch 16 --groups 3 --threads-per-group 1"
      " --oversubscribe --progress none --log-level error --iterations 40 --eval-every 20";
  Out o = easel_test::run_easel(common + " --algo diloco --out " + (d / "drop").string(),
                                "EASEL_FAULT=throw:group1@10 ", "onfail-periodic");
  ASSERT_EQ(o.code, 0) << o.err;
  auto s = nlohmann::json::parse(slurp(d / "drop" / "summary.json"));
  EXPECT_EQ(s["stopped"], "completed");
  EXPECT_EQ(s["steps"], 40);
  ASSERT_EQ(s["group_failures"].size(), 1u);
  EXPECT_EQ(s["group_failures"][0]["group"], 1);
  EXPECT_EQ(s["group_failures"][0]["step"], 10);
  EXPECT_EQ(s["group_failures"][0]["action"], "dropped");
  o = easel_test::run_easel(
      common + " --algo local-sgd --tau 4 --on-failure restart --out " + (d / "restart").string(),
      "EASEL_FAULT=throw:group0@3 ", "onfail-periodic");
  ASSERT_EQ(o.code, 0) << o.err;
  s = nlohmann::json::parse(slurp(d / "restart" / "summary.json"));
  EXPECT_EQ(s["steps"], 40);
  ASSERT_EQ(s["group_failures"].size(), 1u);
  EXPECT_EQ(s["group_failures"][0]["action"], "restarted");
  EXPECT_EQ(metric_values(d / "restart" / "metrics.jsonl").size(), 2u);
}

// A group stalled by EASEL_FAULT past --stall-timeout: dropped or restarted, exit 0; under stop
// exit 4. Without --stall-timeout the deadline is the model's on EASEL_MACHINE's calibration,
// said in the log and summary.json; without a calibration 300 s, saying why.
TEST(Cli, OnFailureDropsOrRestartsAGroupThatStalls) {
  const fs::path d = tmp_dir("onstall");
  const std::string common =
      "train --net mlp --data synthetic:512:1x8x8:4 --batch 16 --groups 3 --threads-per-group 1"
      " --oversubscribe --progress none --log-level info --iterations 40 --eval-every 20"
      " --algo async-easgd";
  const std::string stall = "EASEL_FAULT=stall:group1@3 ";  // early: a starved thread gets there
  Out o = easel_test::run_easel(common + " --stall-timeout 1 --out " + (d / "drop").string(), stall,
                                "onstall");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("stall deadline 1 s (--stall-timeout)"), std::string::npos) << o.err;
  auto s = nlohmann::json::parse(slurp(d / "drop" / "summary.json"));
  EXPECT_EQ(s["stopped"], "completed");
  EXPECT_EQ(s["steps"], 40);
  ASSERT_EQ(s["group_failures"].size(), 1u);
  EXPECT_EQ(s["group_failures"][0]["group"], 1);
  EXPECT_EQ(s["group_failures"][0]["action"], "dropped");
  EXPECT_EQ(s["group_failures"][0]["why"].get<std::string>().rfind("stalled: ", 0), 0u);
  EXPECT_EQ(s["stall_deadline"]["seconds"], 1.0);
  EXPECT_EQ(s["stall_deadline"]["source"], "--stall-timeout");
  o = easel_test::run_easel(
      common + " --on-failure restart --stall-timeout 1 --out " + (d / "restart").string(), stall,
      "onstall");
  ASSERT_EQ(o.code, 0) << o.err;
  s = nlohmann::json::parse(slurp(d / "restart" / "summary.json"));
  ASSERT_EQ(s["group_failures"].size(), 1u);
  EXPECT_EQ(s["group_failures"][0]["action"], "restarted");
  // A thread that never comes back (hang: deaf to the flag): left behind, the run ends anyway.
  o = easel_test::run_easel(common + " --stall-timeout 1 --out " + (d / "hang").string(),
                            "EASEL_FAULT=hang:group1@3 ", "onstall");
  ASSERT_EQ(o.code, 0) << o.err;
  s = nlohmann::json::parse(slurp(d / "hang" / "summary.json"));
  EXPECT_EQ(s["stopped"], "completed");
  EXPECT_EQ(s["steps"], 40);
  ASSERT_EQ(s["group_failures"].size(), 1u);
  EXPECT_EQ(s["group_failures"][0]["action"], "dropped");
  EXPECT_EQ(metric_values(d / "hang" / "metrics.jsonl").size(), 2u);  // evaluated without it
  // On --clock it held the turn the others wait for: given up, it leaves the schedule.
  o = easel_test::run_easel(
      common + " --clock gpu8-pcie --stall-timeout 1 --out " + (d / "clock").string(),
      "EASEL_FAULT=hang:group1@3 ", "onstall");
  ASSERT_EQ(o.code, 0) << o.err;
  s = nlohmann::json::parse(slurp(d / "clock" / "summary.json"));
  EXPECT_EQ(s["steps"], 40);
  ASSERT_EQ(s["group_failures"].size(), 1u);
  EXPECT_EQ(s["group_failures"][0]["action"], "dropped");
  o = easel_test::run_easel(
      common + " --on-failure stop --stall-timeout 1 --out " + (d / "stop").string(), stall,
      "onstall");
  EXPECT_EQ(o.code, 4) << o.err;
  EXPECT_NE(o.err.find("group 1 at step 3: stalled: no step done in"), std::string::npos) << o.err;
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  const std::string knl = std::string(root ? root : ".") + "/tools/machines/knl-7250.toml";
  o = easel_test::run_easel(common + " --out " + (d / "model").string(),
                            "EASEL_MACHINE=" + knl + " ", "onstall");
  ASSERT_EQ(o.code, 0) << o.err;
  s = nlohmann::json::parse(slurp(d / "model" / "summary.json"));
  EXPECT_EQ(s["stall_deadline"]["source"], "model");
  const double model_seconds = s["stall_deadline"]["seconds"];
  EXPECT_GE(model_seconds, 30.0);
  char said[64];
  std::snprintf(said, sizeof said, "stall deadline %.4g s (model: 10 x", model_seconds);
  EXPECT_NE(o.err.find(said), std::string::npos) << o.err;
  o = easel_test::run_easel(common + " --out " + (d / "none").string(),
                            "EASEL_MACHINE=/nonexistent.toml ", "onstall");
  ASSERT_EQ(o.code, 0) << o.err;
  s = nlohmann::json::parse(slurp(d / "none" / "summary.json"));
  EXPECT_EQ(s["stall_deadline"]["source"], "default");
  EXPECT_EQ(s["stall_deadline"]["seconds"], 300.0);
  EXPECT_NE(o.err.find("stall deadline 300 s (default: the model gave none: no calibration"),
            std::string::npos)
      << o.err;
}

// README's "Exit codes" rows, each (code, meaning) without its backquotes.
std::vector<std::pair<std::string, std::string>> readme_exit_codes() {
  std::vector<std::pair<std::string, std::string>> rows;
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  std::ifstream readme(fs::path(root != nullptr ? root : ".") / "README.md");
  bool in_section = false;
  for (std::string line; std::getline(readme, line);) {
    if (line.starts_with("## ")) in_section = line == "## Exit codes";
    const size_t mid = line.find(" | ", 2);
    if (!in_section || !line.starts_with("| ") || !line.ends_with(" |") || mid == line.npos)
      continue;
    std::string code = line.substr(2, mid - 2), meaning = line.substr(mid + 3);
    meaning.resize(meaning.size() - 2);
    std::erase(meaning, '`');
    if (code != "code") rows.emplace_back(code, meaning);
  }
  return rows;
}

// One table of exit codes (tools/cli/exit_codes.hpp): `easel --help` ends with README's "Exit
// codes" rows, each a code and its meaning wrapped under a column of its own.
TEST(Cli, ExitCodeTableIsTheReadmes) {
  const Out help = easel("--help");
  ASSERT_EQ(help.code, 0) << help.err;
  const size_t at = help.out.find("\nExit codes:\n");
  ASSERT_NE(at, std::string::npos) << help.out;
  std::vector<std::pair<std::string, std::string>> shown;
  std::istringstream lines(help.out.substr(at + 13));
  for (std::string line; std::getline(lines, line) && line.size() > 11;) {
    std::string code = line.substr(2, 9);
    code.erase(code.find_last_not_of(' ') + 1);
    if (code.empty() && !shown.empty()) {  // a wrapped meaning goes on
      shown.back().second += " " + line.substr(11);
      continue;
    }
    shown.emplace_back(code, line.substr(11));
  }
  const auto readme = readme_exit_codes();
  EXPECT_EQ(readme.size(), 6u);
  EXPECT_EQ(shown, readme) << help.out;
}

// Every refusal of a train request exits with the table's code in one line naming the flag and
// writes nothing: no --out directory, and with the default --out no runs/DATE-TIME-ALGO/ (a
// corrected command then runs into the same --out). Without high-bandwidth memory (memkind's
// MEMKIND_HBW_NODES unset) and without a GPU the machine lacks what was asked: exit 1.
TEST(Cli, RefusedRunsWriteNothing) {
  const fs::path d = tmp_dir("refused");
  struct Refusal {
    std::string args;
    int code;
    std::string names;
  };
  const int cores = nlohmann::json::parse(easel("topology --json").out)["machine"]["cores"];
  const std::string more = std::to_string(cores + 1);  // groups than this machine's cores
  std::vector<Refusal> refusals = {
      {"--groups 0", 2, "--groups"},
      {"--groups " + more, 2, "--groups " + more + ": asked for " + more + " threads"},
      {"--cpus 4000", 2, "--cpus: cpu 4000 is not available"},
      {"--placement weights=hbw", 1, "--placement weights=hbw: this machine has no high-band"},
      {"--placement dataset=hbw", 1, "--placement dataset=hbw: this machine has no high-band"},
      {"--placement hbw", 1, "--placement hbw: this machine has no high-bandwidth"},
      {"--placement all=hbw", 1, "--placement hbw: this machine has no high-bandwidth"}};
  if (!machine_has_gpu()) refusals.push_back({"--device cuda", 1, "--device cuda: "});
  const Out topo = easel("topology");
  const bool has_hbw = topo.out.find("hbw (") != std::string::npos;
  const fs::path cwd = d / "cwd";
  fs::create_directories(cwd);
  for (const Refusal& r : refusals) {
    if (has_hbw && r.args.find("hbw") != std::string::npos) continue;
    for (const bool default_out : {false, true}) {
      const std::string out = default_out ? "" : " --out " + (d / "run").string();
      const Out o = easel_test::run_easel(
          "train --net mlp --data synthetic:64:1x8x8:4 --iterations 2 --progress none " + r.args +
              out,
          "cd " + cwd.string() + " && env -u MEMKIND_HBW_NODES ", "refused");
      EXPECT_EQ(o.code, r.code) << r.args << ": " << o.err;
      EXPECT_EQ(o.err.rfind("easel: ", 0), 0u) << r.args << ": " << o.err;
      EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << r.args << ": " << o.err;
      EXPECT_NE(o.err.find(r.names), std::string::npos) << r.args << ": " << o.err;
      EXPECT_FALSE(fs::exists(d / "run")) << r.args;
      EXPECT_TRUE(fs::is_empty(cwd)) << r.args << ": runs/ written";
    }
  }
  // A refused --overwrite leaves the earlier run's results as they were.
  const fs::path run = d / "done";
  Out o = easel("train" + std::string(kTiny) + " --out " + run.string());
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string summary = slurp(run / "summary.json"), metrics = slurp(run / "metrics.jsonl");
  o = easel("train" + std::string(kTiny) + " --cpus 4000 --overwrite --out " + run.string());
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_EQ(slurp(run / "summary.json"), summary);
  EXPECT_EQ(slurp(run / "metrics.jsonl"), metrics);
  EXPECT_TRUE(fs::exists(run / "checkpoint.bin"));
}

TEST(Cli, DeviceFlagErrorsAreOneLine) {
  for (const char* args : {"train --device gpu", "train --device cuda:", "train --device cuda:x",
                           "train --device cuda:0,x", "topology --device tpu",
                           "train --placement dataset=pinned-host"}) {
    Out o = easel(args);
    EXPECT_EQ(o.code, 2) << args << ": " << o.err;
    EXPECT_NE(o.err.find("--device"), std::string::npos) << args << ": " << o.err;
    EXPECT_LE(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << ": " << o.err;
    if (std::string(args).find("--placement") != std::string::npos) {
      EXPECT_NE(o.err.find("--placement"), std::string::npos) << o.err;
    }
  }
}

TEST(Cli, CudaWithoutAGpuSaysWhyAndWritesNothing) {
  if (machine_has_gpu())
    GTEST_SKIP() << "this machine has a GPU: the GPU tests cover --device cuda";
  const fs::path d = tmp_dir("nogpu");
  // The machine lacks what was asked: one line, exit 1, whichever GPUs it names (cuda:0,0: two
  // groups on GPU 0). A build without the CUDA toolkit says that instead of looking for GPUs.
  const std::string why =
      EASEL_HAVE_CUDA ? ": no usable GPU" : ": this build of easel has no CUDA device";
  for (const char* device : {"cuda", "cuda:0,0"}) {
    Out o = easel(std::string("train --device ") + device + " --iterations 2 --out " +
                  (d / "run").string());
    EXPECT_EQ(o.code, 1) << o.err;
    EXPECT_NE(o.err.find(std::string("--device ") + device + why), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_FALSE(fs::exists(d / "run"));
  }
  Out o = easel("topology --device cuda:1");
  EXPECT_EQ(o.code, 1) << o.err;
  EXPECT_NE(o.out.find("GPUs: none ("), std::string::npos) << o.out;
  EXPECT_NE(o.err.find("--device cuda:1"), std::string::npos) << o.err;
}

namespace {

// --augment and --data-threads end to end: a run on 3-channel data with augmentation; the
// pipeline's threads change nothing (the same losses with 1 and 3, and on a resume that
// changes them); config.json keeps both; bad values are one line naming the flag.
TEST(Cli, AugmentAndDataThreads) {
  const fs::path d = tmp_dir("augment");
  const std::string common =
      "train --net mlp --data synthetic:512:3x8x8:4 --batch 16 --groups 2 --threads-per-group 1"
      " --oversubscribe --progress none --log-level warn --eval-every 20"
      " --augment crop-pad=2,flip,normalize=cifar10";
  Out o = easel(common + " --iterations 80 --data-threads 1 --out " + (d / "one").string());
  ASSERT_EQ(o.code, 0) << o.err;
  const auto c = nlohmann::json::parse(slurp(d / "one" / "config.json"));
  EXPECT_EQ(c["augment"], "crop-pad=2,flip,normalize=cifar10");  // as given
  EXPECT_EQ(c["data-threads"], 1);
  const auto one = metric_values(d / "one" / "metrics.jsonl");
  ASSERT_EQ(one.size(), 4u);
  o = easel(common + " --iterations 80 --data-threads 3 --out " + (d / "three").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(metric_values(d / "three" / "metrics.jsonl"), one);
  // Without augmentation the run differs (the augmentation is used at all).
  o = easel(std::string("train --net mlp --data synthetic:512:3x8x8:4 --batch 16 --groups 2 ") +
            "--threads-per-group 1 --oversubscribe --progress none --log-level warn " +
            "--eval-every 20 --iterations 80 --out " + (d / "plain").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(metric_values(d / "plain" / "metrics.jsonl"), one);
  // Stopped at 40 and resumed with other data threads: the same run; --augment is fixed.
  o = easel(common + " --iterations 40 --data-threads 2 --out " + (d / "half").string());
  ASSERT_EQ(o.code, 0) << o.err;
  o = easel("train --resume " + (d / "half").string() + " --augment flip --progress none");
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_NE(o.err.find("--augment"), std::string::npos) << o.err;
  o = easel("train --resume " + (d / "half").string() +
            " --iterations 80 --data-threads 4 --progress none");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(metric_values(d / "half" / "metrics.jsonl"), one);

  for (const char* args :
       {"train --augment crop-pad=0", "train --augment rotate", "train --augment flip,flip",
        "train --data-threads -1", "train --data-threads 257", "train --data-threads x"}) {
    o = easel(args);
    EXPECT_EQ(o.code, 2) << args << ": " << o.err;
    const std::string flag = std::string(args).substr(6, std::string(args).find(' ', 6) - 6);
    EXPECT_EQ(o.err.rfind("easel: " + flag, 0), 0u) << args << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << ": " << o.err;
  }
  // Means for 3 channels on 1-channel data: named before anything trains.
  o = easel(
      "train --net mlp --data synthetic:64:1x8x8:4 --iterations 2 --progress none "
      "--augment mean=0.5/0.5/0.5,std=1/1/1 --out " +
      (d / "channels").string());
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.err.find("--augment"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("1 channel"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(d / "channels" / "summary.json"));
}

// easel bench --data: the pipeline's rates, compared with the timed net of the same images.
TEST(Cli, BenchTimesTheDataPipeline) {
  const fs::path d = tmp_dir("bench_data");
  const std::string json = (d / "b.json").string();
  Out o = easel(
      "bench --data synthetic:256:3x32x32:10 --augment crop-pad=4,flip --data-threads 2 "
      "--nets cifar10-quick,lenet --batches 16 --layouts 1x1 --skip-ceilings "
      "--skip-layers --skip-exchange --repeats 1 --min-time 0.05 --warmup 1 --json " +
      json);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("== data pipeline: synthetic/train"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("lenet takes 1x28x28 images, not 3x32x32: not compared"), std::string::npos)
      << o.out;
  const auto j = nlohmann::json::parse(slurp(json))["data"];
  EXPECT_EQ(j["threads_per_stream"], 2);
  EXPECT_EQ(j["augment"], "crop-pad=4,flip");
  ASSERT_EQ(j["rows"].size(), 1u);
  EXPECT_GT(j["rows"][0]["images_per_second"]["median"].get<double>(), 0);
  ASSERT_EQ(j["compared"].size(), 1u);
  EXPECT_EQ(j["compared"][0]["net"], "cifar10-quick");
  const bool ahead = j["compared"][0]["keeps_ahead"];
  EXPECT_NE(o.out.find(ahead ? "keeps ahead of cifar10-quick 1x1" : "FALLS BEHIND cifar10-quick"),
            std::string::npos)
      << o.out;
  for (const char* args : {"bench --augment flip", "bench --data-threads 2",
                           "bench --data synthetic --augment crop", "bench --data-threads -1"}) {
    o = easel(args);
    EXPECT_EQ(o.code, 2) << args << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << ": " << o.err;
  }
}

}  // namespace
