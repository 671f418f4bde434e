// `mpirun -np N easel train` end to end (the binary from EASEL_BUILD_ROOT): sync results
// identical across two runs and equal to one process with the same total number of groups
// (every evaluation's train and test loss compared exactly; nlohmann json prints doubles with
// full precision), async convergence, only rank 0 writing results, and a failing or stalled
// rank stopping the whole job with a message that names it. Skipped when mpirun is missing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
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
using nlohmann::json;

struct Outcome {
  int rc = -1;
  std::string output;
  json summary;
  std::vector<json> metrics;
  double seconds = 0;
};

// EASEL_BUILD_ROOT (meson test sets it), else the build tree holding this test
// (BUILD/tests/mpi/test_mpi_train).
std::string easel_path() {
  if (const char* root = std::getenv("EASEL_BUILD_ROOT")) return std::string(root) + "/tools/easel";
  const fs::path self = fs::read_symlink("/proc/self/exe");
  return (self.parent_path().parent_path().parent_path() / "tools" / "easel").string();
}

bool have_mpirun() {
  return std::system("command -v mpirun > /dev/null 2>&1") == 0;
}

Outcome outcome_of(const fs::path& dir, std::string cmd);

// Runs `easel train ARGS` with `np` ranks (0: without mpirun), its log beside `dir`, and reads
// the results in `dir`.
Outcome run_in(const fs::path& dir, int np, const std::string& args, const std::string& env = "") {
  std::string cmd = env + " timeout 300 ";
  if (np > 0) {
    cmd += "mpirun --allow-run-as-root --oversubscribe --bind-to none -np " + std::to_string(np);
    for (const char* var : {"EASEL_MPI_FAULT", "EASEL_MPI_TIMEOUT"})
      if (env.find(var) != std::string::npos) cmd += std::string(" -x ") + var;
    if (const char* more = std::getenv("EASEL_MPIRUN_ARGS")) cmd += std::string(" ") + more;
    cmd += " ";
  }
  return outcome_of(dir, cmd + easel_path() + " train " + args);
}

// Runs `cmd` (a shell command line), its output to a log beside `dir`, and reads the results
// in `dir`.
Outcome outcome_of(const fs::path& dir, std::string cmd) {
  cmd += " > " + dir.string() + ".log 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  const int st = std::system(cmd.c_str());
  Outcome o;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  o.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  std::ifstream log(dir.string() + ".log");
  std::stringstream ss;
  ss << log.rdbuf();
  o.output = ss.str();
  if (std::ifstream f(dir / "summary.json"); f) o.summary = json::parse(f, nullptr, false);
  if (std::ifstream f(dir / "metrics.jsonl"); f) {
    for (std::string line; std::getline(f, line);)
      o.metrics.push_back(json::parse(line));
  }
  return o;
}

fs::path fresh_dir() {
  static int serial = 0;
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("easel-mpi-" + std::to_string(::getpid()) + "-" + std::to_string(serial++));
  fs::remove_all(dir);
  return dir;
}

// The flags every run here shares but the algorithm, the groups and the length.
const char* kRunFlags =
    " --net mlp --data synthetic:1024:1x8x8:4 --eval-every 20 --lr 0.05 --seed 42"
    " --threads-per-group 1 --oversubscribe --progress none";

// Runs easel train with `np` ranks (0: without mpirun) and reads its results.
Outcome run(int np, const std::string& algo, int groups, const std::string& extra = "",
            const std::string& env = "") {
  const fs::path dir = fresh_dir();
  return run_in(dir, np,
                "--algo " + algo + " --groups " + std::to_string(groups) + kRunFlags +
                    " --iterations 60 --out " + dir.string() + " " + extra,
                env);
}

// Every evaluation's losses and accuracy, and the summary's, in full precision.
std::vector<double> trajectory(const Outcome& o) {
  std::vector<double> t;
  for (const json& m : o.metrics)
    for (const char* k : {"train_loss", "test_loss", "test_accuracy"})
      t.push_back(m.at(k).get<double>());
  t.push_back(o.summary.at("test_loss").get<double>());
  t.push_back(o.summary.at("test_accuracy").get<double>());
  return t;
}

class MpiTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not found (apt-get install openmpi-bin)";
  }
};

void expect_ok(const Outcome& o) {
  ASSERT_EQ(o.rc, 0) << o.output;
  ASSERT_TRUE(o.summary.is_object()) << o.output;
  ASSERT_EQ(o.metrics.size(), 3u) << o.output;  // 60 iterations, an evaluation every 20
}

struct Layout {
  const char* algo;
  int ranks, groups;
};

class SyncEqualsOneProcess : public MpiTrain, public ::testing::WithParamInterface<Layout> {};

// sync-sgd and sync-easgd promise the single-process result for R ranks x L groups = R*L groups
// (the algorithm runs over all R*L groups on the composed shm+MPI transport), L a power of two
// or not.
TEST_P(SyncEqualsOneProcess, TwiceIdenticalAndEqualToOneProcess) {
  const Layout l = GetParam();
  const Outcome a = run(l.ranks, l.algo, l.groups);
  expect_ok(a);
  EXPECT_EQ(a.summary.at("groups").get<int>(), l.ranks * l.groups);
  const Outcome b = run(l.ranks, l.algo, l.groups);
  expect_ok(b);
  EXPECT_EQ(trajectory(a), trajectory(b)) << "two runs with the same layout differ";
  const Outcome one = run(0, l.algo, l.ranks * l.groups);
  expect_ok(one);
  EXPECT_EQ(trajectory(a), trajectory(one)) << "differs from one process with the same P";
  EXPECT_GE(a.summary.at("test_accuracy").get<double>(), 0.9);
}

INSTANTIATE_TEST_SUITE_P(Layouts, SyncEqualsOneProcess,
                         ::testing::Values(Layout{"sync-sgd", 2, 1}, Layout{"sync-easgd", 2, 1},
                                           Layout{"sync-sgd", 4, 1}, Layout{"sync-easgd", 4, 1},
                                           Layout{"sync-sgd", 2, 2}, Layout{"sync-easgd", 2, 2},
                                           Layout{"sync-sgd", 2, 3}, Layout{"sync-easgd", 2, 3}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.algo) + "_" +
                                           std::to_string(info.param.ranks) + "x" +
                                           std::to_string(info.param.groups);
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// diloco with the int8 exchange (the compressed ring over the world's transport, or over the
// composed one with 2 groups a process) promises the same: every evaluation equal to one
// process of as many groups, and the bytes it counts the same. With 2 groups a process and the
// MPI library's own collectives the groups would sum in fp32 first: refused, naming the flag.
TEST_F(MpiTrain, DilocoInt8EqualsOneProcess) {
  const std::string flags = "--tau 4 --exchange-precision int8";
  for (int groups : {1, 2}) {
    const Outcome a = run(2, "diloco", groups, flags);
    expect_ok(a);
    const Outcome one = run(0, "diloco", 2 * groups, flags);
    expect_ok(one);
    EXPECT_EQ(trajectory(a), trajectory(one)) << groups << " group(s) a process";
    EXPECT_EQ(a.summary.at("exchanged_bytes_per_image").get<double>(),
              one.summary.at("exchanged_bytes_per_image").get<double>());
    EXPECT_GT(a.summary.at("exchanged_bytes_per_image").get<double>(), 0);
  }
  // Every rank refuses at once: the ranks agree on it and end together (no MPI_Abort, whose
  // racing calls once crashed Open MPI's launcher with 139), and rank 0 alone says it.
  const Outcome refused = run(2, "diloco", 2, flags + " --collective mpi");
  EXPECT_EQ(refused.rc, 2) << refused.output;
  const std::string line = "easel: --exchange-precision int8";
  const size_t at = refused.output.find(line);
  ASSERT_NE(at, std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find(line, at + 1), std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find("MPI_ABORT"), std::string::npos) << refused.output;
}

// Issue 43's check: a sync algorithm's accuracies on a described machine's clock (one process of
// 2 groups, --clock gpu8-pcie: the time simulated, every step computed) equal, bit for bit, the
// same run's under mpirun (2 ranks of one group). Across mpirun's ranks --clock itself is
// refused, once, naming the flag (tools/simulate --compute clock runs it under SMPI).
TEST_F(MpiTrain, SyncEasgdOnAClockEqualsMpirun) {
  const Outcome a = run(2, "sync-easgd", 1);
  expect_ok(a);
  const Outcome clocked = run(0, "sync-easgd", 2, "--clock gpu8-pcie");
  expect_ok(clocked);
  EXPECT_EQ(clocked.metrics.back().at("clock"), "gpu8-pcie");
  EXPECT_EQ(trajectory(clocked), trajectory(a));
  const Outcome refused = run(2, "sync-easgd", 1, "--clock gpu8-pcie");
  EXPECT_EQ(refused.rc, 2) << refused.output;
  const std::string line = "easel: --clock gpu8-pcie: runs in one process or under SMPI";
  const size_t at = refused.output.find(line);
  ASSERT_NE(at, std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find(line, at + 1), std::string::npos) << refused.output;
}

TEST_F(MpiTrain, SyncEasgdPerLayerMessagesEqualOneProcess) {
  const Outcome a = run(2, "sync-easgd", 1, "--pack per-layer --momentum 0.9 --tau 2");
  expect_ok(a);
  const Outcome one = run(0, "sync-easgd", 2, "--pack per-layer --momentum 0.9 --tau 2");
  expect_ok(one);
  EXPECT_EQ(trajectory(a), trajectory(one));
}

// Checkpoints across ranks: a run of 2 ranks stopped after its first evaluation and resumed
// under mpirun gives every evaluation of the run that never stopped, bit for bit (sync-easgd,
// diloco); the same checkpoint resumed in one process with the same 2 groups, and a one-process
// checkpoint resumed on 2 ranks, too (they promise one process's result). Into another number
// of groups: async-easgd regroups from the centre; sync-sgd's replicas cannot be re-split,
// refused in one line before anything is written.
TEST_F(MpiTrain, ResumeAcrossRanks) {
  for (const char* algo : {"sync-easgd", "diloco --tau 4"}) {
    const std::string flags = std::string("--algo ") + algo + kRunFlags;
    const Outcome whole = run(2, algo, 1);
    expect_ok(whole);
    for (const int first : {2, 0}) {
      for (const int then : {2, 0}) {
        const fs::path dir = fresh_dir();
        const std::string groups = first > 0 ? " --groups 1" : " --groups 2";
        const Outcome a =
            run_in(dir, first, flags + groups + " --iterations 20 --out " + dir.string());
        ASSERT_EQ(a.rc, 0) << a.output;
        ASSERT_TRUE(fs::exists(dir / "checkpoint.bin")) << algo;
        const Outcome b = run_in(dir, then,
                                 "--resume " + dir.string() + " --iterations 60" +
                                     (then > 0 ? " --groups 1" : " --groups 2"));
        expect_ok(b);
        EXPECT_EQ(trajectory(b), trajectory(whole))
            << algo << ": " << first << " then " << then << " rank(s)\n"
            << b.output;
      }
    }
  }
  const fs::path dir = fresh_dir();
  const Outcome a = run_in(dir, 2,
                           std::string("--algo async-easgd --groups 1") + kRunFlags +
                               " --iterations 20 --out " + dir.string());
  ASSERT_EQ(a.rc, 0) << a.output;
  const Outcome b = run_in(dir, 2, "--resume " + dir.string() + " --iterations 60 --groups 2");
  expect_ok(b);
  EXPECT_EQ(b.summary.at("groups").get<int>(), 4);
  const fs::path sdir = fresh_dir();
  const Outcome s = run_in(sdir, 2,
                           std::string("--algo sync-sgd --groups 1") + kRunFlags +
                               " --iterations 20 --out " + sdir.string());
  ASSERT_EQ(s.rc, 0) << s.output;
  const std::string before = std::to_string(fs::file_size(sdir / "checkpoint.bin"));
  const Outcome r = run_in(sdir, 2, "--resume " + sdir.string() + " --iterations 60 --groups 2");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("--groups: a checkpoint of sync-sgd resumes only with its 2 group(s), "
                          "not 4"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(std::to_string(fs::file_size(sdir / "checkpoint.bin")), before);
}

// easel launch relaunches a job that lost a rank (EASEL_FAULT=kill: SIGKILL, mpirun's 137) from
// the run directory's checkpoint: the run completes with every evaluation of the undisturbed run,
// bit for bit (sync-easgd), and summary.json counts the restart; a rank killed before the first
// checkpoint relaunches from the start. No restart left: the job's exit. A refusal is not
// relaunched, and launch's own bad flags are one line, exit 2.
TEST_F(MpiTrain, LaunchRelaunchesAfterAKilledRank) {
  const Outcome whole = run(2, "sync-easgd", 1);
  expect_ok(whole);
  const std::string launch = easel_path() +
                             " launch -np 2 --mpirun-args '--allow-run-as-root --oversubscribe "
                             "--bind-to none' ";
  const std::string flags =
      std::string("-- --algo sync-easgd --groups 1") + kRunFlags + " --iterations 60 --out ";
  for (const char* fault : {"kill:rank1@45", "kill:group0@5"}) {
    const fs::path dir = fresh_dir();
    const Outcome o = outcome_of(
        dir, std::string("EASEL_FAULT=") + fault + " timeout 300 " + launch + flags + dir.string());
    expect_ok(o);
    EXPECT_EQ(trajectory(o), trajectory(whole)) << fault << "\n" << o.output;
    EXPECT_EQ(o.summary.at("restarts"), 1) << fault;
    EXPECT_EQ(o.summary.at("failures")[0].at("exit"), 137) << fault;
    // Killed at 45: the checkpoint of 20 landed by the evaluation at 40 (its record waits for
    // it); 40's may still have been in its write.
    const int64_t at = o.summary.at("failures")[0].at("checkpoint_step");
    if (fault[5] == 'r')
      EXPECT_TRUE(at == 20 || at == 40) << at;
    else
      EXPECT_EQ(at, 0);
    EXPECT_NE(o.output.find("easel launch: restart 1 of 3: a rank died on signal 9"),
              std::string::npos)
        << o.output;
  }
  const fs::path none = fresh_dir();
  const Outcome last = outcome_of(none, "EASEL_FAULT=kill:rank1@45 timeout 300 " + launch +
                                            "--max-restarts 0 " + flags + none.string());
  EXPECT_EQ(last.rc, 137) << last.output;
  EXPECT_NE(last.output.find("no restart left (--max-restarts 0)"), std::string::npos);
  const fs::path refused = fresh_dir();
  const Outcome r = outcome_of(
      refused, "EASEL_FAULT=kill:rank5@3 timeout 300 " + launch + flags + refused.string());
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("EASEL_FAULT: rank 5: the run has 2 rank(s)"), std::string::npos);
  EXPECT_EQ(r.output.find("restart"), std::string::npos) << r.output;
  for (const std::string bad : {"-np 2 -- ls", "-np 2 --min-ranks 3 -- --net lenet --out x",
                                "-np 2 -- --net lenet", "-np two -- --out x"}) {
    const fs::path dir = fresh_dir();
    const Outcome b = outcome_of(dir, easel_path() + " launch " + bad);
    EXPECT_EQ(b.rc, 2) << bad << "\n" << b.output;
    EXPECT_EQ(b.output.rfind("easel: easel launch: ", 0), 0u) << bad << "\n" << b.output;
    EXPECT_EQ(std::count(b.output.begin(), b.output.end(), '\n'), 1) << bad << "\n" << b.output;
  }
}

class AsyncConverges : public MpiTrain, public ::testing::WithParamInterface<Layout> {};

TEST_P(AsyncConverges, ReachesAccuracy) {
  const Layout l = GetParam();
  const Outcome a = run(l.ranks, l.algo, l.groups);
  expect_ok(a);
  EXPECT_EQ(a.summary.at("groups").get<int>(), l.ranks * l.groups);
  EXPECT_GE(a.summary.at("test_accuracy").get<double>(), 0.9) << a.output;
  // Every group exchanged with rank 0's centre, one centre version each time: a group's
  // staleness is the number of exchanges (all ranks') between two of its own. Over the run the
  // mean is sum_g (v_last(g) + 1) / N - 1 for N = 60 P exchanges, and no group's last version
  // is more than the final round's 20 P exchanges before the end, so the mean is at least
  // P - 1 - 20 P^2 / N = P - 1 - P / 3, whatever the timing. A centre faked on each rank (its
  // groups counting only their own exchanges) gives about L - 1, below that bound.
  const int p = l.ranks * l.groups;
  EXPECT_GE(a.summary.at("staleness_mean").get<double>(), p - 1 - p / 3.0 - 1e-9) << a.output;
  EXPECT_GE(a.summary.at("staleness_max").get<int64_t>(), 1);
  // Every group, on every rank, took its steps (each rank's budget is its groups' share).
  int64_t steps = 0;
  for (const json& g : a.metrics.back().at("groups"))
    steps += g.at("steps").get<int64_t>();
  EXPECT_EQ(steps, 60 * p);
}

INSTANTIATE_TEST_SUITE_P(Layouts, AsyncConverges,
                         ::testing::Values(Layout{"async-easgd", 2, 1},
                                           Layout{"async-measgd", 2, 1},
                                           Layout{"async-easgd", 4, 1},
                                           Layout{"async-measgd", 2, 2}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.algo) + "_" +
                                           std::to_string(info.param.ranks) + "x" +
                                           std::to_string(info.param.groups);
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST_F(MpiTrain, OnlyRankZeroReports) {
  const Outcome a = run(2, "sync-sgd", 1);
  expect_ok(a);
  size_t starts = 0;
  for (size_t at = a.output.find("easel: sync-sgd on"); at != std::string::npos;
       at = a.output.find("easel: sync-sgd on", at + 1))
    ++starts;
  EXPECT_EQ(starts, 1u) << a.output;
  EXPECT_EQ(a.summary.at("group_times").size(), 2u);
}

TEST_F(MpiTrain, OneProcessAlgorithmIsRefused) {
  const Outcome a = run(2, "easgd-rr", 1);
  EXPECT_NE(a.rc, 0);
  EXPECT_NE(a.output.find("across MPI ranks"), std::string::npos) << a.output;
}

TEST_F(MpiTrain, FailingRankStopsTheJobAndIsNamed) {
  const Outcome a = run(2, "sync-easgd", 1, "", "EASEL_MPI_FAULT=fail:1");
  EXPECT_NE(a.rc, 0);
  EXPECT_NE(a.output.find("rank 1"), std::string::npos) << a.output;
  EXPECT_LT(a.seconds, 120);
}

TEST_F(MpiTrain, StalledRankStopsTheJobAndIsNamed) {
  const Outcome a = run(2, "sync-sgd", 1, "", "EASEL_MPI_FAULT=stall:1 EASEL_MPI_TIMEOUT=3");
  EXPECT_NE(a.rc, 0);
  EXPECT_NE(a.output.find("rank 1 "), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("stalled or died"), std::string::npos) << a.output;
  EXPECT_LT(a.seconds, 120);
}

}  // namespace
