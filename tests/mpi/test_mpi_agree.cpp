// The ranks of an mpirun job agree on what they do (engine/comm/run_env.hpp): rank 0's
// EASEL_MPI_PIECE_MB, EASEL_RANKS_PER_NODE, EASEL_COLLECTIVE_LINKS, EASEL_MPI_TIMEOUT and
// EASEL_MPI_FAULT are the run's. A rank whose own environment sets one otherwise is refused in
// one line naming the variable, the rank and both values (exit 2, nothing written); a rank that
// does not set it takes rank 0's; and every receive of the MPI transport checks its count against
// the plan, a mismatch named (exit 2), never summed. Each rank gets its own environment through
// an mpirun app context (`-np 1 env A=a prog : -np 1 env A=b prog`). Skipped without mpirun.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string build_root() {
  if (const char* root = std::getenv("EASEL_BUILD_ROOT")) return root;
  const fs::path self = fs::read_symlink("/proc/self/exe");  // BUILD/tests/mpi/test_mpi_agree
  return self.parent_path().parent_path().parent_path().string();
}

struct Outcome {
  int rc = -1;
  std::string output;
  // The lines easel itself wrote ("easel: ..."), not mpirun's.
  std::vector<std::string> easel_lines() const {
    std::vector<std::string> lines;
    std::istringstream in(output);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("easel: ", 0) == 0) lines.push_back(l);
    return lines;
  }
};

fs::path fresh_dir() {
  static int serial = 0;
  const fs::path dir =
      fs::path(::testing::TempDir()) /
      ("easel-agree-" + std::to_string(::getpid()) + "-" + std::to_string(serial++));
  fs::remove_all(dir);
  return dir;
}

// mpirun with one rank per entry of `rank_env` (each `env` arguments: "A=1", "-u A"), every rank
// running `program`.
Outcome mpirun(const std::vector<std::string>& rank_env, const std::string& program) {
  std::string cmd = "timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none";
  for (size_t r = 0; r < rank_env.size(); ++r)
    cmd += std::string(r == 0 ? "" : " :") + " -np 1 env " + rank_env[r] + " " + program;
  const fs::path log = fresh_dir().string() + ".log";
  const int st = std::system((cmd + " > " + log.string() + " 2>&1").c_str());
  Outcome o;
  o.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  std::ifstream f(log);
  std::stringstream ss;
  ss << f.rdbuf();
  o.output = "$ " + cmd + "\n" + ss.str();
  return o;
}

// `easel train` of sync-sgd (the mlp: 4420 floats) writing to `out`.
std::string train(const fs::path& out) {
  return build_root() +
         "/tools/easel train --algo sync-sgd --groups 1 --net mlp --data synthetic:1024:1x8x8:4 "
         "--iterations 20 --eval-every 10 --lr 0.05 --seed 42 --threads-per-group 1 "
         "--oversubscribe --progress none --out " +
         out.string();
}

// The refusal: exit 2, one line of easel's naming every part of `names`, nothing written.
void expect_refused(const Outcome& o, const fs::path& out, const std::vector<std::string>& names) {
  EXPECT_EQ(o.rc, 2) << o.output;
  const std::vector<std::string> lines = o.easel_lines();
  ASSERT_EQ(lines.size(), 1u) << o.output;
  for (const std::string& n : names)
    EXPECT_NE(lines[0].find(n), std::string::npos) << n << "\n" << o.output;
  EXPECT_FALSE(fs::exists(out)) << o.output;
}

class Agree : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v mpirun > /dev/null 2>&1") != 0)
      GTEST_SKIP() << "mpirun not found (apt-get install openmpi-bin)";
  }
};

// Each variable set otherwise on rank 1 than on rank 0, or set on rank 1 only.
TEST_F(Agree, RankWhoseOwnValueDiffersIsRefusedInOneLine) {
  struct Case {
    const char *rank0, *rank1;
    std::vector<std::string> named;
  };
  const Case cases[] = {
      {"EASEL_MPI_PIECE_MB=4",
       "EASEL_MPI_PIECE_MB=8",
       {"EASEL_MPI_PIECE_MB='8' on rank 1", "'4' on rank 0"}},
      {"EASEL_RANKS_PER_NODE=1",
       "EASEL_RANKS_PER_NODE=2",
       {"EASEL_RANKS_PER_NODE='2' on rank 1", "'1' on rank 0"}},
      {"-u EASEL_COLLECTIVE_LINKS",
       "EASEL_COLLECTIVE_LINKS=1,24,1,24",
       {"EASEL_COLLECTIVE_LINKS='1,24,1,24' on rank 1", "rank 0 does not set it"}},
      {"EASEL_MPI_TIMEOUT=300",
       "EASEL_MPI_TIMEOUT=60",
       {"EASEL_MPI_TIMEOUT='60' on rank 1", "'300' on rank 0"}},
      {"-u EASEL_MPI_FAULT",
       "EASEL_MPI_FAULT=stall:1",
       {"EASEL_MPI_FAULT='stall:1' on rank 1", "rank 0 does not set it"}},
  };
  for (const Case& c : cases) {
    const fs::path out = fresh_dir();
    expect_refused(mpirun({c.rank0, c.rank1}, train(out)), out, c.named);
  }
}

TEST_F(Agree, MalformedValueIsRefusedInOneLine) {
  for (const char* bad :
       {"EASEL_MPI_PIECE_MB=abc", "EASEL_RANKS_PER_NODE=0", "EASEL_COLLECTIVE_LINKS=1,24",
        "EASEL_MPI_TIMEOUT=-1", "EASEL_MPI_FAULT=crash:1"}) {
    const fs::path out = fresh_dir();
    const std::string name(bad, std::string(bad).find('='));
    const std::string value = std::string(bad).substr(name.size() + 1);
    expect_refused(mpirun({bad, bad}, train(out)), out, {name + "='" + value + "' is not"});
  }
}

// Rank 0 cuts messages into pieces of 1048 floats; rank 1, without the variable, takes rank 0's:
// it would otherwise post one receive of the whole 4420 floats and get a piece (named, exit 2).
// Rank 0 (under EASEL_LOG=info) logs the run's settings once.
TEST_F(Agree, RankWithoutTheVariableTakesRankZeros) {
  const fs::path out = fresh_dir();
  const Outcome o =
      mpirun({"EASEL_LOG=info EASEL_MPI_PIECE_MB=0.004", "-u EASEL_MPI_PIECE_MB"}, train(out));
  ASSERT_EQ(o.rc, 0) << o.output;
  EXPECT_TRUE(fs::exists(out / "summary.json")) << o.output;
  const std::string line = "rank 0's settings for every rank: EASEL_MPI_PIECE_MB=0.004";
  const size_t at = o.output.find(line);
  EXPECT_NE(at, std::string::npos) << o.output;
  EXPECT_EQ(o.output.find(line, at + 1), std::string::npos) << "logged twice\n" << o.output;
}

// A message of another length than the receive's plan, on each path of the MPI transport
// (tests/mpi/test_mpi_comm.cpp, MpiPlan.DISABLED_*): the receiver names the sender and both
// counts.
TEST_F(Agree, ReceiveOfAnotherLengthIsNamed) {
  struct Case {
    const char* test;
    const char* named;
  };
  const Case cases[] = {
      {"ShortStep",
       "easel: rank 1: rank 0 sent 10 floats in a short step where the plan expects 20"},
      {"LongStep",
       "easel: rank 1: rank 0 sent more than 10 floats in a long step where the plan expects 10"},
      {"ShortStream",
       "easel: rank 1: rank 0 sent 10 floats in a short stream where the plan expects 20"},
      {"ShortComposedStep",
       "easel: rank 1: rank 0 sent 10 floats in a short composed step where the plan expects 20"},
      {"ShortGather", "easel: rank 0: rank 1 sent 8 bytes in gather where the plan expects 16"},
  };
  for (const Case& c : cases) {
    const std::string program = build_root() +
                                "/tests/mpi/test_mpi_comm --gtest_also_run_disabled_tests "
                                "--gtest_filter=MpiPlan.DISABLED_" +
                                c.test;
    const Outcome o = mpirun({"-u EASEL_MPI_PIECE_MB", "-u EASEL_MPI_PIECE_MB"}, program);
    EXPECT_EQ(o.rc, 2) << c.test << "\n" << o.output;
    EXPECT_NE(o.output.find(c.named), std::string::npos) << c.test << "\n" << o.output;
  }
}

}  // namespace
