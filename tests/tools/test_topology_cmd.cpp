// `easel topology` on described machines (EASEL_TOPOLOGY_XML naming a fixture of
// tests/engine/topologies/): which node is which, the plan per locality, `--json`, and hbw
// refused in cache mode.
#include <gtest/gtest.h>

#include "tests/tools/run_easel.hpp"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
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

std::string fixture(const std::string& name) {
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  return std::string(root != nullptr ? root : ".") + "/tests/engine/topologies/" + name + ".xml";
}

// Runs `easel ARGS` on the machine `xml` describes ("" for this machine).
Out easel_on(const std::string& xml, const std::string& args) {
  return easel_test::run_easel(args, xml.empty() ? "" : "EASEL_TOPOLOGY_XML='" + xml + "' ",
                               "topology");
}

constexpr uint64_t kGiB = uint64_t{1} << 30;

// The machine: 4 groups of 17, each with its cluster's DDR and MCDRAM node.
TEST(TopologyCmd, KnlSnc4FlatJsonIsOneGroupPerCluster) {
  const Out o =
      easel_on(fixture("knl-snc4-flat"), "topology --algo sync-easgd --groups numa --json");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["machine"]["cores"], 68);
  EXPECT_EQ(j["machine"]["described_by"], fixture("knl-snc4-flat"));
  ASSERT_EQ(j["numa"].size(), 8u);
  for (const auto& n : j["numa"]) {
    const bool hbw = n["os_index"].get<int>() >= 4;
    EXPECT_EQ(n["kind"], hbw ? "hbw" : "dram");
    EXPECT_EQ(n["bytes"].get<uint64_t>(), (hbw ? 4 : 24) * kGiB);
    EXPECT_EQ(n["cpus"].size(), 68u);
  }
  ASSERT_EQ(j["groups"].size(), 4u);
  for (int g = 0; g < 4; ++g) {
    const auto& s = j["groups"][static_cast<size_t>(g)];
    EXPECT_EQ(s["id"], g);
    EXPECT_EQ(s["threads"], 17);
    ASSERT_EQ(s["cpus"].size(), 17u);
    EXPECT_EQ(s["cpus"][0], 17 * g);
    EXPECT_EQ(s["dram_node"], g);
    EXPECT_EQ(s["hbw_node"], 4 + g);
    EXPECT_EQ(s["hbw_bytes"].get<uint64_t>(), 4 * kGiB);
  }
  EXPECT_FALSE(j["oversubscribed"].get<bool>());
}

TEST(TopologyCmd, TextSaysWhichNodeIsWhich) {
  const Out o = easel_on(fixture("knl-snc4-flat"), "topology --algo sync-easgd --groups 16");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("numa 4: hbw (MCDRAM), 4.0 GiB"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("numa 0: dram, 24.0 GiB"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("16 groups: 4 in each of 4 localities, 4 cores each"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("4, 4.0 GiB / 4"), std::string::npos) << o.out;
}

// Cache mode: no high-bandwidth node; --json says null, and train refuses hbw saying why.
TEST(TopologyCmd, CacheModeHasNoHbwNodeAndRefusesHbw) {
  const std::string cache = fixture("knl-quadrant-cache");
  Out o = easel_on(cache, "topology --algo sync-easgd --groups 4 --json");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j["groups"].size(), 4u);
  EXPECT_TRUE(j["groups"][0]["hbw_node"].is_null());
  EXPECT_EQ(j["groups"][0]["dram_node"], 0);
  EXPECT_EQ(j["groups"][0]["hbw_bytes"], 0);
  const fs::path out = fs::path(::testing::TempDir()) / "easel_topology_cache_run";
  fs::remove_all(out);
  o = easel_on(cache,
               "train --net mlp --data synthetic:64:1x8x8:4 --iterations 1 --batch 16 "
               "--algo sync-easgd --groups 4 --placement weights=hbw --progress none --out " +
                   out.string());
  EXPECT_EQ(o.code, 1) << o.err;  // the machine lacks what was asked (README, "Exit codes")
  EXPECT_FALSE(fs::exists(out));
  EXPECT_NE(o.err.find("--placement weights=hbw: this machine has no high-bandwidth NUMA node "
                       "(KNL cache mode or no MCDRAM/HBM; nodes: 0 dram 96.0 GiB cpus 0-271)"),
            std::string::npos)
      << o.err;
}

TEST(TopologyCmd, MissingDescriptionIsOneLine) {
  const Out o = easel_on("/nonexistent/knl.xml", "topology --json");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err,
            "easel: topology file /nonexistent/knl.xml: no such file (an hwloc XML file, as "
            "`lstopo --of xml` writes)\n");
  EXPECT_TRUE(o.out.empty()) << o.out;
}

// This machine: --json parses and every core is in some group.
TEST(TopologyCmd, ThisMachineJson) {
  const Out o = easel_on("", "topology --json");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_TRUE(j["machine"]["described_by"].is_null());
  EXPECT_FALSE(j["groups"].empty());
  EXPECT_FALSE(j["numa"].empty());
}

// ---- The memory fit (run/fit.hpp, docs/TOPOLOGY.md "Fit"): the paper's AlexNet-CIFAR case.

const std::string kAlexNet =
    " --net alexnet-cifar --data synthetic:5000:3x32x32:10 --batch 128 --algo sync-easgd ";
const std::string kAllHbw =
    " --placement weights=hbw,grads=hbw,momentum=hbw,activations=hbw,dataset=hbw-preferred ";

// 16 groups on an SNC-4 flat KNL are 4 per cluster, held to its 4 GiB of MCDRAM: --json's fit
// says it does not fit, naming node 4, the need and the capacity.
TEST(TopologyCmd, FitJsonRefusesSixteenAlexNetsPerCluster) {
  const Out o =
      easel_on(fixture("knl-snc4-flat"), "topology --groups 16 --json" + kAlexNet + kAllHbw);
  ASSERT_EQ(o.code, 0) << o.err;
  const auto f = nlohmann::json::parse(o.out)["fit"];
  ASSERT_TRUE(f.is_object()) << o.out;
  EXPECT_FALSE(f["fits"].get<bool>());
  EXPECT_EQ(f["groups"], 16);
  EXPECT_EQ(f["classes"]["weights"]["arenas"], 2);
  EXPECT_EQ(f["classes"]["weights"]["kind"], "hbw");
  const uint64_t arena = f["classes"]["grads"]["per_group"].get<uint64_t>();
  EXPECT_EQ(f["classes"]["weights"]["total"].get<uint64_t>(), 16 * 2 * arena);
  for (const auto& n : f["nodes"]) {
    if (n["kind"] != "hbw") continue;
    EXPECT_EQ(n["capacity"].get<uint64_t>(), 4 * kGiB);
    EXPECT_GT(n["bound"].get<uint64_t>(), n["capacity"].get<uint64_t>());
    EXPECT_EQ(n["groups"].size(), 4u);
  }
  const std::string why = f["refusal"].get<std::string>();
  EXPECT_NE(why.find("4 groups x 466.6 MB of weights"), std::string::npos) << why;
  EXPECT_NE(why.find(" of hbw on node 4 (4.0 GiB, 4 group(s))"), std::string::npos) << why;
}

// Without --net or --data the output has no fit (as before).
TEST(TopologyCmd, NoFitWithoutNetOrData) {
  const Out o = easel_on(fixture("knl-snc4-flat"), "topology --groups 4 --json");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_FALSE(nlohmann::json::parse(o.out).contains("fit"));
  const Out t = easel_on(fixture("knl-snc4-flat"), "topology --groups 4");
  EXPECT_EQ(t.out.find("memory fit"), std::string::npos) << t.out;
}

// The text: one group and all groups per class, every node with its capacity; hbw-preferred
// names what spills to DRAM; quadrant flat's one 16 GiB node takes 16 groups' weights.
TEST(TopologyCmd, FitTablePerClassAndNode) {
  Out o = easel_on(fixture("knl-snc4-flat"),
                   "topology --groups 16" + kAlexNet + " --placement hbw-preferred");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("memory fit of alexnet-cifar on synthetic:5000:3x32x32:10"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("  weights      hbw-preferred  2 x 233.3 MB       7.5 GB"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("  4     hbw   4.0 GiB   4.3 GB    0-3"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("hbw-preferred: node 4 (4.0 GiB) is full; "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("spill to DRAM node 0"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\n  fits\n"), std::string::npos) << o.out;
  o = easel_on(fixture("knl-quadrant-flat"),
               "topology --groups 16" + kAlexNet + " --placement weights=hbw");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("  1     hbw   16.0 GiB  7.5 GB    0-15"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\n  fits\n"), std::string::npos) << o.out;
}

// easel train refuses the placement before any group is built (no layer is set up), in one line.
TEST(TopologyCmd, TrainRefusesWhatCannotFitBeforeBuilding) {
  const fs::path out = fs::path(::testing::TempDir()) / "easel_fit_refused";
  fs::remove_all(out);
  const Out o = easel_on(fixture("knl-snc4-flat"),
                         "train --groups 16 --iterations 1 --progress none --log-level info" +
                             kAlexNet + kAllHbw + "--out " + out.string());
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_FALSE(fs::exists(out));  // a refused run writes nothing
  EXPECT_NE(o.err.find("[easel:train] fit: one group 1.6 GB (weights 2 x 233.3 MB hbw"),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("easel: --placement weights=hbw,grads=hbw,momentum=hbw,activations=hbw: "
                       "4 groups x 466.6 MB of weights + "),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find(" of hbw on node 4 (4.0 GiB, 4 group(s)); "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find(" MB hbw, kernels "), std::string::npos) << o.err;  // measured, in DRAM
  EXPECT_EQ(o.err.find("[easel:net]"), std::string::npos) << o.err;        // no group was built
}

}  // namespace

// `easel train --explain` says what the run does, and the run does it: the groups, sync-easgd's
// exchange path and the collective the run reports, for a net without and with running
// statistics; nothing is written; --json alone is refused.
namespace explain {

nlohmann::json summary_of(const fs::path& out) {
  return nlohmann::json::parse(easel_test::slurp(out / "summary.json"));
}

// The peak resident memory of `easel ARGS` run with no shell between (wait4 on the child
// itself), in bytes; its exit code in *code.
uint64_t peak_rss_of(const std::vector<std::string>& args, int* code) {
  const char* root = std::getenv("EASEL_BUILD_ROOT");
  const std::string exe = std::string(root != nullptr ? root : ".") + "/tools/easel";
  std::vector<char*> argv{const_cast<char*>(exe.c_str())};
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // Linux: kB
}

// The fit holds what a run holds: AlexNet-CIFAR's kernels (oneDNN's reordered weights and
// scratchpads, im2col columns, LRN's buffers) and the run's host copies of its weights are
// counted, so a run's peak resident memory is its fit's need and the program's own pages
// (about 35 MB here), not the half gigabyte more that once got 16 groups killed.
TEST(TopologyCmd, FitHoldsARunsPeakMemory) {
  const std::vector<std::string> flags = {
      "--net", "alexnet-cifar", "--data", "synthetic:64:3x32x32:10", "--groups",
      "1",     "--batch",       "16",     "--threads-per-group",     "1"};
  std::string args = "topology --json";
  for (const std::string& f : flags)
    args += " " + f;
  const Out o = easel_on("", args);
  ASSERT_EQ(o.code, 0) << o.err;
  const uint64_t need = nlohmann::json::parse(o.out)["fit"]["need"].get<uint64_t>();
  const fs::path out = easel_test::tmp_dir("topology", "peak");
  std::vector<std::string> run = {"train", "--iterations",  "2",     "--eval-every",
                                  "2",     "--eval-images", "16",    "--progress",
                                  "none",  "--overwrite",   "--out", out.string()};
  run.insert(run.end(), flags.begin(), flags.end());
  int code = -1;
  const uint64_t peak = peak_rss_of(run, &code);
  ASSERT_EQ(code, 0);
  EXPECT_LE(peak, need + 80'000'000) << "need " << need;  // the program, libraries, stacks
  EXPECT_GE(peak, need * 9 / 10) << "need " << need;      // and the fit does not overcount
  fs::remove_all(out);                                    // its 700 MB checkpoint
}

TEST(TrainExplain, SaysWhatTheRunDoes) {
  const char* src = std::getenv("EASEL_SOURCE_ROOT");
  const std::string resnet =
      std::string(src != nullptr ? src : ".") + "/tests/fuzz/corpus/net/small-resnet.toml";
  const std::string cases[] = {
      "--net mlp --data synthetic:64 --groups 3 --oversubscribe",
      "--net mlp --data synthetic:64 --groups 2 --pack per-layer --collective auto",
      "--net " + resnet + " --data synthetic:64:3x16x16:10 --groups 2",
  };
  int k = 0;
  for (const std::string& flags : cases) {
    const fs::path out = fs::path(::testing::TempDir()) / ("explain_" + std::to_string(k++));
    fs::remove_all(out);
    const Out e = easel_test::run_easel(
        "train --explain --json --algo sync-easgd --out " + out.string() + " " + flags, "",
        "explain");
    ASSERT_EQ(e.code, 0) << flags << "\n" << e.err;
    EXPECT_FALSE(fs::exists(out)) << "--explain wrote " << out;
    const auto plan = nlohmann::json::parse(e.out);
    const Out t = easel_test::run_easel(
        "train --algo sync-easgd --iterations 2 --log-level info "
        "--out " +
            out.string() + " " + flags,
        "", "explain_run");
    ASSERT_EQ(t.code, 0) << flags << "\n" << t.err;
    const auto s = summary_of(out);
    fs::remove_all(out);
    EXPECT_EQ(plan["groups"], s["groups"]) << flags;
    EXPECT_EQ(plan["exchange_path"], s["exchange_path"]) << flags;
    EXPECT_EQ(plan["net"]["params"], s["params"]) << flags;
    // The collective auto chose, as the run says it (only where the run uses one).
    if (!plan["collective_why"].is_null())
      EXPECT_NE(t.err.find(plan["collective_why"].get<std::string>()), std::string::npos)
          << flags << "\n"
          << t.err;
    else
      EXPECT_EQ(t.err.find("collective auto:"), std::string::npos) << flags << "\n" << t.err;
  }
  const Out alone = easel_test::run_easel("train --json", "", "explain");
  EXPECT_EQ(alone.code, 2);
  EXPECT_NE(alone.err.find("--json: only with --explain"), std::string::npos) << alone.err;
}

// --time-exchange times the plan's own exchange: the run built as planned, each algorithm's
// rounds timed with its own accounting (an exchange that ran has comm time, every round a wall
// time), nothing written; refused without --explain and for an algorithm that exchanges nothing.
TEST(TrainExplain, TimesThePlansOwnExchange) {
  for (const char* algo : {"sync-easgd", "sync-sgd", "async-easgd", "diloco --tau 2"}) {
    const fs::path out = fs::path(::testing::TempDir()) / "explain_timed";
    fs::remove_all(out);
    const Out e = easel_test::run_easel(
        std::string("train --explain --json --time-exchange 3 --net mlp --data synthetic:64 "
                    "--groups 2 --oversubscribe --out ") +
            out.string() + " --algo " + algo,
        "", "explain_timed");
    ASSERT_EQ(e.code, 0) << algo << "\n" << e.err;
    EXPECT_FALSE(fs::exists(out)) << "--time-exchange wrote " << out;
    const auto j = nlohmann::json::parse(e.out)["exchange_timing"];
    EXPECT_EQ(j["rounds"], 3) << algo;
    EXPECT_EQ(j["groups"], 2) << algo;
    EXPECT_EQ(j["iterations_per_round"],
              std::string(algo).find("tau 2") != std::string::npos ? 2 : 1)
        << algo;
    ASSERT_EQ(j["round_ms"].size(), 3u) << algo;
    for (const auto& ms : j["round_ms"])
      EXPECT_GT(ms.get<double>(), 0) << algo;
    EXPECT_GT(j["comm_ms_per_group"].get<double>(), 0) << algo << ": no exchange was timed";
  }
  const Out alone = easel_test::run_easel("train --time-exchange 3", "", "explain_timed");
  EXPECT_EQ(alone.code, 2);
  EXPECT_NE(alone.err.find("--time-exchange: only with --explain"), std::string::npos) << alone.err;
  const Out one = easel_test::run_easel(
      "train --explain --time-exchange 3 --algo msgd --net mlp --data synthetic:64", "",
      "explain_timed");
  EXPECT_EQ(one.code, 2);
  EXPECT_NE(one.err.find("--time-exchange: msgd runs one group and exchanges nothing"),
            std::string::npos)
      << one.err;
}

// On a described machine (no run): one group per KNL cluster, the fast exchange for four.
TEST(TrainExplain, DescribedMachinePlan) {
  const Out o = easel_on(fixture("knl-snc4-flat"),
                         "train --explain --algo sync-easgd --groups numa --data synthetic:64 "
                         "--oversubscribe");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("groups      4 (1 rank(s) x 4)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("exchange    partitioned"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("memory fit:"), std::string::npos) << o.out;
}

}  // namespace explain
