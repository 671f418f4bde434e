// `easel topology` on described machines (EASEL_TOPOLOGY_XML naming a fixture of
// tests/engine/topologies/): which node is which, the plan per locality, `--json`, and hbw
// refused in cache mode.
#include <gtest/gtest.h>

#include "tests/tools/run_easel.hpp"

#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

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
  o = easel_on(cache,
               "train --net mlp --data synthetic:64:1x8x8:4 --iterations 1 --batch 16 "
               "--algo sync-easgd --groups 4 --placement weights=hbw --progress none --out " +
                   (fs::path(::testing::TempDir()) / "easel_topology_cache_run").string() +
                   " --overwrite");
  EXPECT_EQ(o.code, 1) << o.err;  // train reports what its plan refuses as a failed run
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

}  // namespace
