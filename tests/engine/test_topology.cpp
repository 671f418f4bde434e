#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "engine/topology.hpp"

namespace easel {
namespace {

// A made-up machine: 8 cores with 2 PUs each (cpus c and c+8), two NUMA nodes of 4 cores, and
// one memory-only node (like KNL's MCDRAM in flat mode).
Topology fake_topology() {
  Topology t;
  t.packages = 1;
  for (int c = 0; c < 8; ++c)
    t.cores.push_back({c, c + 8});
  NumaNode n0{0, 1ull << 34, {0, 1, 2, 3, 8, 9, 10, 11}, false};
  NumaNode n1{1, 1ull << 34, {4, 5, 6, 7, 12, 13, 14, 15}, false};
  NumaNode hbm{2, 1ull << 34, {}, true};
  t.numa = {n0, n1, hbm};
  t.total_memory_bytes = 3ull << 34;
  return t;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Topology, DetectFindsCores) {
  auto t = detect_topology();
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_GE(t->core_count(), 1);
  EXPECT_GE(t->packages, 1);
  EXPECT_FALSE(t->numa.empty());
  std::set<int> seen;
  for (const auto& core : t->cores) {
    ASSERT_FALSE(core.empty());
    for (int pu : core)
      EXPECT_TRUE(seen.insert(pu).second) << "pu " << pu << " in two cores";
  }
  EXPECT_GT(t->total_memory_bytes, 0u);
  EXPECT_TRUE(contains(t->to_string(), "cores"));
  EXPECT_GE(t->numa_of_cpu(t->cores[0][0]), 0);
  EXPECT_EQ(t->numa_of_cpu(100000), -1);
}

// This machine's last-level cache is found even where hwloc, which must not move the process to
// read each core's CPUID, sees none (a VM without cache entries in sysfs, as here): easel bench
// --calibrate writes it as cache_mb, and 0 made easel model charge every exchange at DRAM speed.
TEST(Topology, DetectFindsTheLastLevelCache) {
  auto t = detect_topology();
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_GT(t->last_level_cache_bytes, 0u);
}

TEST(Topology, DetectedMachinePlansAuto) {
  auto t = detect_topology();
  ASSERT_TRUE(t.ok());
  auto p = make_plan(*t, PlanRequest{});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(static_cast<int>(p->groups.size()), t->core_count());
  EXPECT_FALSE(p->oversubscribed);
}

TEST(Plan, AutoIsOneGroupPerCore) {
  const Topology t = fake_topology();
  auto p = make_plan(t, PlanRequest{});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->groups.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(p->groups[i].id, i);
    ASSERT_EQ(p->groups[i].cpus.size(), 1u);
    EXPECT_EQ(p->groups[i].cpus[0], i);  // the first PU of core i
    EXPECT_EQ(p->groups[i].numa_node, i < 4 ? 0 : 1);
  }
  EXPECT_EQ(p->total_threads(), 8);
  PlanRequest r;
  r.threads = 3;
  p = make_plan(t, r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->groups.size(), 3u);
}

TEST(Plan, CountSplitsCores) {
  const Topology t = fake_topology();
  PlanRequest r;
  r.groups = GroupCount::of(2);
  auto p = make_plan(t, r);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->groups.size(), 2u);
  EXPECT_EQ(p->groups[0].cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p->groups[1].cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(p->groups[1].numa_node, 1);

  r.groups = GroupCount::of(3);
  r.threads_per_group = 2;
  p = make_plan(t, r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->total_threads(), 6);
  std::set<int> cpus;
  for (const auto& g : p->groups)
    cpus.insert(g.cpus.begin(), g.cpus.end());
  EXPECT_EQ(cpus.size(), 6u) << "threads must get distinct cores";

  r = PlanRequest{};
  r.groups = GroupCount::of(4);
  r.threads = 4;
  p = make_plan(t, r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->total_threads(), 4);
  EXPECT_EQ(p->groups.size(), 4u);
  EXPECT_TRUE(contains(p->to_string(), "group"));
}

TEST(Plan, NumaIsOneGroupPerNodeWithCores) {
  const Topology t = fake_topology();
  PlanRequest r;
  r.groups = GroupCount::numa();
  auto p = make_plan(t, r);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->groups.size(), 2u);  // the memory-only node gets no group
  EXPECT_EQ(p->groups[0].cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p->groups[1].cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(p->groups[0].numa_node, 0);
  EXPECT_EQ(p->groups[1].numa_node, 1);
  r.threads_per_group = 2;
  p = make_plan(t, r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->groups[1].cpus, (std::vector<int>{4, 5}));
}

TEST(Plan, ExplicitCpuLists) {
  const Topology t = fake_topology();
  PlanRequest r;
  r.cpu_lists = "0-1;4,5,6";
  auto p = make_plan(t, r);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->groups.size(), 2u);
  EXPECT_EQ(p->groups[0].cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(p->groups[1].cpus, (std::vector<int>{4, 5, 6}));
  EXPECT_EQ(p->groups[1].numa_node, 1);

  r.cpu_lists = "0-1;99";
  p = make_plan(t, r);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(contains(p.status().message(), "--cpus")) << p.status().message();
  EXPECT_TRUE(contains(p.status().message(), "99"));

  r.cpu_lists = "0-1;1-2";
  p = make_plan(t, r);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(contains(p.status().message(), "--oversubscribe"));
  r.oversubscribe = true;
  p = make_plan(t, r);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->oversubscribed);
}

TEST(Plan, MoreThreadsThanCoresIsRefused) {
  const Topology t = fake_topology();
  PlanRequest r;
  r.groups = GroupCount::of(4);
  r.threads_per_group = 4;
  auto p = make_plan(t, r);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::invalid_argument);
  EXPECT_EQ(p.status().message(),
            "--groups 4 --threads-per-group 4: asked for 16 threads (4 groups x 4) but this "
            "machine has 8 cores; use fewer or pass --oversubscribe");
  r.oversubscribe = true;
  p = make_plan(t, r);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->oversubscribed);
  EXPECT_EQ(p->total_threads(), 16);
  EXPECT_FALSE(p->notes.empty());
  EXPECT_EQ(p->groups[2].cpus, (std::vector<int>{0, 1, 2, 3}));  // wrapped round-robin
}

// Even with --oversubscribe, a thread count past 64 per core is refused before anything is
// allocated for it (2e9 threads per group took gigabytes before the plan was refused).
TEST(Plan, OversubscriptionHasALimit) {
  const Topology t = fake_topology();  // 8 cores: at most 512 threads
  const auto refused = [&](PlanRequest r, const char* flag) {
    r.oversubscribe = true;
    auto p = make_plan(t, r);
    ASSERT_FALSE(p.ok()) << flag;
    EXPECT_EQ(p.status().code(), Code::invalid_argument);
    EXPECT_TRUE(contains(p.status().message(), flag)) << p.status().message();
    EXPECT_TRUE(contains(p.status().message(), "more than 512 threads")) << p.status().message();
  };
  PlanRequest r;
  r.threads_per_group = 2000000000;
  refused(r, "--threads-per-group 2000000000");
  r = PlanRequest{};
  r.threads = 2000000000;
  refused(r, "--threads 2000000000");
  r = PlanRequest{};
  r.groups = GroupCount::of(4096);
  refused(r, "--groups 4096");
  r.groups = GroupCount::of(64);
  r.threads_per_group = 9;
  refused(r, "--groups 64 x --threads-per-group 9 = 576");
  r.threads_per_group = 8;  // 512: at the limit
  r.oversubscribe = true;
  auto p = make_plan(t, r);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->total_threads(), 512);
}

TEST(Plan, BadValuesNameTheFlag) {
  const Topology t = fake_topology();
  for (const char* g : {"0", "-1", "abc", "", "40960", "Numa"}) {
    auto p = parse_group_count(g);
    ASSERT_FALSE(p.ok()) << g;
    EXPECT_TRUE(contains(p.status().message(), "--groups")) << p.status().message();
  }
  for (const char* g : {"auto", "numa", "1", "4096"})
    EXPECT_EQ(parse_group_count(g).value().text(), g);
  PlanRequest r;
  r.threads_per_group = -1;
  auto p = make_plan(t, r);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(contains(p.status().message(), "--threads-per-group"));
  r = PlanRequest{};
  r.threads = -2;
  p = make_plan(t, r);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(contains(p.status().message(), "--threads"));
  r = PlanRequest{};
  r.cpu_lists = "0-x";
  p = make_plan(t, r);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(contains(p.status().message(), "--cpus"));
}

// Thread flags that contradict the group flags are refused, not quietly ignored (8 cores, two
// NUMA nodes of 4).
TEST(Plan, ContradictoryThreadFlagsAreRefused) {
  const Topology t = fake_topology();
  struct Case {
    const char* groups;
    int threads, per_group;
    const char* cpus;
    const char* says;
  };
  for (const Case& c :
       {Case{"auto", 3, 2, "", "--threads 3 is not a multiple of --threads-per-group 2"},
        Case{"auto", 1, 2, "", "--threads 1 is not a multiple"},
        Case{"numa", 10, 0, "", "--threads 10 (5 per node): a NUMA node has only 4 core(s)"},
        Case{"numa", 0, 5, "", "--threads-per-group 5: a NUMA node has only 4"},
        Case{"numa", 3, 0, "", "--threads 3 is not a multiple of the 2 NUMA"},
        Case{"numa", 4, 1, "", "--threads 4 is not --groups numa (2)"},
        Case{"auto", 0, 1, "0-1;2-3", "--threads-per-group 1: --cpus gives group 0 2 cpu(s)"},
        Case{"auto", 5, 0, "0-1;2-3", "--threads 5: --cpus gives 4 cpu(s) in all"},
        Case{"2", 7, 0, "", "--threads 7 is not a multiple of --groups 2"}}) {
    PlanRequest r;
    r.groups = parse_group_count(c.groups).value();
    r.threads = c.threads;
    r.threads_per_group = c.per_group;
    r.cpu_lists = c.cpus;
    r.oversubscribe = true;
    auto p = make_plan(t, r);
    ASSERT_FALSE(p.ok()) << c.says;
    EXPECT_TRUE(contains(p.status().message(), c.says)) << p.status().message();
  }
  PlanRequest r;  // agreeing flags still plan
  r.groups = GroupCount::numa();
  r.threads = 4;
  r.threads_per_group = 2;
  auto p = make_plan(t, r);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->groups.size(), 2u);
  EXPECT_EQ(p->groups[0].cpus.size(), 2u);
  r = PlanRequest{};
  r.threads = 6;
  r.threads_per_group = 2;
  p = make_plan(t, r);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->groups.size(), 3u);
  r = PlanRequest{};  // as tools/weak-scaling runs its one-core runs
  r.groups = GroupCount::of(1);
  r.threads_per_group = 1;
  r.threads = 1;
  r.cpu_lists = "3";
  p = make_plan(t, r);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->groups[0].cpus, std::vector<int>{3});
}

TEST(CpuList, Parses) {
  auto r = parse_cpu_list("0-3,8");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<int>{0, 1, 2, 3, 8}));
  r = parse_cpu_list(" 5 ");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<int>{5}));
  r = parse_cpu_list("4095");
  EXPECT_TRUE(r.ok());
}

TEST(CpuList, RejectsBadTokens) {
  for (const char* bad : {"3-1", "x", "", "-1", "1,,2", "4097", "5000", "0-99999", "1-", "2,2"}) {
    auto r = parse_cpu_list(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' parsed";
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::invalid_argument);
    }
  }
  auto r = parse_cpu_list("0-3,3-1");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.status().message(), "'3-1'")) << r.status().message();
}

// ---- Described machines: hwloc XML files (tests/engine/topologies/, written by
// make_fixtures.py from lstopo's synthetic descriptions), loaded through hwloc itself so that a
// high-bandwidth node carries its cluster's cpus and its subtype, as on the real machines.

constexpr uint64_t kGiB = uint64_t{1} << 30;

Topology described(const std::string& name) {
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  const std::string path =
      std::string(root != nullptr ? root : ".") + "/tests/engine/topologies/" + name + ".xml";
  auto t = load_topology_xml(path);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(t).value() : Topology{};
}

GroupPlan plan_of(const Topology& t, const std::string& groups, int threads_per_group = 0) {
  PlanRequest r;
  r.groups = parse_group_count(groups).value();
  r.threads_per_group = threads_per_group;
  auto p = make_plan(t, r);
  EXPECT_TRUE(p.ok()) << groups << ": " << p.status().to_string();
  return p.ok() ? std::move(p).value() : GroupPlan{};
}

// cpus first .. first + n - 1: the first PU of n consecutive cores (PU = core + cores * thread).
std::vector<int> run_of(int first, int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i)
    v.push_back(first + i);
  return v;
}

bool has_note(const GroupPlan& p, const std::string& part) {
  for (const std::string& n : p.notes)
    if (contains(n, part)) return true;
  return false;
}

// Checks a plan of `groups` groups of `cores` cores each, group g on locality g / per (of
// `first_core + l * stride` onwards), with that locality's dram node `dram0 + l` and hbw node
// `hbw0 + l` (-1: none) of `hbw_bytes`.
void expect_by_locality(const GroupPlan& p, int groups, int cores, int per, int stride, int dram0,
                        int hbw0, uint64_t hbw_bytes) {
  ASSERT_EQ(static_cast<int>(p.groups.size()), groups);
  EXPECT_FALSE(p.oversubscribed);
  EXPECT_FALSE(has_note(p, "straddle")) << p.to_string();
  for (int g = 0; g < groups; ++g) {
    const GroupSpec& s = p.groups[static_cast<size_t>(g)];
    const int l = g / per;
    SCOPED_TRACE("group " + std::to_string(g));
    EXPECT_EQ(s.cpus, run_of(l * stride + (g % per) * cores, cores));
    EXPECT_EQ(s.locality, l);
    EXPECT_EQ(s.dram_node, dram0 + l);
    EXPECT_EQ(s.hbw_node, hbw0 < 0 ? -1 : hbw0 + l);
    EXPECT_EQ(s.hbw_bytes, hbw0 < 0 ? 0 : hbw_bytes);
    EXPECT_EQ(s.hbw_sharers, hbw0 < 0 ? 0 : per);
  }
}

// The machine: KNL SNC-4 flat, 4 clusters of 17 cores x 4 threads, each with a 24 GiB
// DDR node (0-3) and a 4 GiB MCDRAM node (4-7) that hwloc gives the cluster's cpus. --groups
// numa once counted 8 nodes and refused 8 x 17 threads; it is one group per cluster.
TEST(Described, KnlSnc4FlatIsOneGroupPerCluster) {
  const Topology t = described("knl-snc4-flat");
  EXPECT_EQ(t.core_count(), 68);
  ASSERT_EQ(t.numa.size(), 8u);
  for (const NumaNode& n : t.numa) {
    const bool hbw = n.os_index >= 4;
    EXPECT_EQ(n.kind, hbw ? NodeKind::hbw : NodeKind::dram) << n.os_index;
    EXPECT_EQ(n.kind_source, hbw ? "MCDRAM" : "");
    EXPECT_EQ(n.memory_bytes, (hbw ? 4 : 24) * kGiB);
    EXPECT_EQ(n.cpus.size(), 68u) << "17 cores x 4 threads";
    EXPECT_FALSE(n.memory_only);
  }
  EXPECT_EQ(t.cores[1], (std::vector<int>{1, 69, 137, 205}));
  ASSERT_EQ(localities(t).size(), 4u);
  expect_by_locality(plan_of(t, "numa"), 4, 17, 1, 17, 0, 4, 4 * kGiB);
  // The paper's partitions of the chip: 4, 8 and 16 groups stay inside the clusters.
  expect_by_locality(plan_of(t, "4"), 4, 17, 1, 17, 0, 4, 4 * kGiB);
  expect_by_locality(plan_of(t, "8"), 8, 8, 2, 17, 0, 4, 4 * kGiB);
  expect_by_locality(plan_of(t, "16"), 16, 4, 4, 17, 0, 4, 4 * kGiB);
  expect_by_locality(plan_of(t, "numa", 16), 4, 16, 1, 17, 0, 4, 4 * kGiB);
  EXPECT_TRUE(check_hbw_placement(t, *parse_placement("hbw")).ok());
  EXPECT_TRUE(contains(t.to_string(), "numa 4: hbw (MCDRAM), 4.0 GiB")) << t.to_string();
}

// One group for the whole chip, or a count that is not a multiple of 4, straddles clusters:
// the plan says so, and the group's memory is its first cpu's cluster's.
TEST(Described, KnlSnc4FlatSaysWhenAGroupStraddles) {
  const Topology t = described("knl-snc4-flat");
  GroupPlan p = plan_of(t, "1");
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].cpus.size(), 68u);
  EXPECT_EQ(p.groups[0].locality, -1);
  EXPECT_EQ(p.groups[0].dram_node, 0);
  EXPECT_EQ(p.groups[0].hbw_node, 4);
  EXPECT_TRUE(has_note(p, "group(s) 0 straddle localities")) << p.to_string();
  p = plan_of(t, "6");
  ASSERT_EQ(p.groups.size(), 6u);
  EXPECT_TRUE(has_note(p, "a multiple of 4 keeps each group in one")) << p.to_string();
  EXPECT_EQ(p.groups[0].locality, 0);   // cores 0-10
  EXPECT_EQ(p.groups[1].locality, -1);  // cores 11-21
}

TEST(Described, KnlQuadrantFlatIsOneLocalityWithItsMcdram) {
  const Topology t = described("knl-quadrant-flat");
  ASSERT_EQ(t.numa.size(), 2u);
  EXPECT_EQ(t.numa[1].kind, NodeKind::hbw);
  expect_by_locality(plan_of(t, "numa"), 1, 68, 1, 68, 0, 1, 16 * kGiB);
  expect_by_locality(plan_of(t, "4"), 4, 17, 4, 68, 0, 1, 16 * kGiB);
  expect_by_locality(plan_of(t, "16"), 16, 4, 16, 68, 0, 1, 16 * kGiB);
}

TEST(Described, KnlSnc2FlatIsTwoGroups) {
  const Topology t = described("knl-snc2-flat");
  ASSERT_EQ(t.numa.size(), 4u);
  expect_by_locality(plan_of(t, "numa"), 2, 34, 1, 34, 0, 2, 8 * kGiB);
  expect_by_locality(plan_of(t, "8"), 8, 8, 4, 34, 0, 2, 8 * kGiB);
}

TEST(Described, KnlSnc4HybridHasHalfTheMcdram) {
  const Topology t = described("knl-snc4-hybrid");
  expect_by_locality(plan_of(t, "numa"), 4, 17, 1, 17, 0, 4, 2 * kGiB);
}

// Cache mode: MCDRAM is a memory-side cache, no NUMA node is high-bandwidth. The plan is by
// cluster all the same, and hbw is refused with that reason.
TEST(Described, KnlCacheModePlansByClusterAndRefusesHbw) {
  const Topology snc4 = described("knl-snc4-cache");
  EXPECT_FALSE(snc4.has_hbw_node());
  expect_by_locality(plan_of(snc4, "numa"), 4, 17, 1, 17, 0, -1, 0);
  expect_by_locality(plan_of(snc4, "16"), 16, 4, 4, 17, 0, -1, 0);
  const Topology quad = described("knl-quadrant-cache");
  expect_by_locality(plan_of(quad, "numa"), 1, 68, 1, 68, 0, -1, 0);
  EXPECT_TRUE(contains(quad.to_string(), "no high-bandwidth NUMA node")) << quad.to_string();
  const Status st = check_hbw_placement(quad, *parse_placement("weights=hbw"));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::unavailable);
  EXPECT_EQ(st.message(),
            "--placement weights=hbw: this machine has no high-bandwidth NUMA node (KNL cache "
            "mode or no MCDRAM/HBM; nodes: 0 dram 96.0 GiB cpus 0-271); use hbw-preferred or "
            "dram");
  // Every class hbw: named as the flag was given.
  EXPECT_EQ(check_hbw_placement(quad, *parse_placement("hbw"))
                .message()
                .rfind("--placement hbw: this machine has no high-bandwidth NUMA node", 0),
            0u);
  EXPECT_TRUE(check_hbw_placement(quad, *parse_placement("hbw-preferred")).ok());
  EXPECT_TRUE(check_hbw_placement(quad, *parse_placement("dram")).ok());
}

// Xeon Max: two sockets in SNC-4, 8 clusters of 14 cores x 2 threads, DDR nodes 0-7 and 16 GiB
// HBM nodes 8-15.
TEST(Described, XeonMaxSnc4FlatIsOneGroupPerCluster) {
  const Topology t = described("xeon-max-snc4-flat");
  EXPECT_EQ(t.core_count(), 112);
  EXPECT_EQ(t.packages, 2);
  ASSERT_EQ(t.numa.size(), 16u);
  EXPECT_EQ(t.node(8)->kind, NodeKind::hbw);
  EXPECT_EQ(t.node(8)->kind_source, "HBM");
  EXPECT_EQ(t.node(7)->kind, NodeKind::dram);
  expect_by_locality(plan_of(t, "numa"), 8, 14, 1, 14, 0, 8, 16 * kGiB);
  expect_by_locality(plan_of(t, "16"), 16, 7, 2, 14, 0, 8, 16 * kGiB);
}

// Firmware that reports bandwidths (HMAT) but no subtype: the node with 200 GB/s against its
// cluster's 30 GB/s DRAM is the high-bandwidth one.
TEST(Described, BandwidthMarksHbwNodesWithoutASubtype) {
  const Topology t = described("hbm-bandwidth-only");
  ASSERT_EQ(t.numa.size(), 4u);
  for (const NumaNode& n : t.numa) {
    EXPECT_EQ(n.kind, n.os_index >= 2 ? NodeKind::hbw : NodeKind::dram) << n.os_index;
    EXPECT_EQ(n.kind_source, n.os_index >= 2 ? "bandwidth" : "") << n.os_index;
  }
  expect_by_locality(plan_of(t, "numa"), 2, 8, 1, 8, 0, 2, 16 * kGiB);
}

// A two-socket box without HBM plans as it always did: one group per socket.
TEST(Described, TwoSocketIsTwoGroups) {
  const Topology t = described("two-socket");
  ASSERT_EQ(t.numa.size(), 2u);
  EXPECT_EQ(t.core_count(), 32);
  for (const char* g : {"numa", "2"}) {
    const GroupPlan p = plan_of(t, g);
    expect_by_locality(p, 2, 16, 1, 16, 0, -1, 0);
    EXPECT_EQ(p.groups[0].numa_node, 0);
    EXPECT_EQ(p.groups[1].numa_node, 1);
  }
  expect_by_locality(plan_of(t, "4"), 4, 8, 2, 16, 0, -1, 0);
  EXPECT_EQ(plan_of(t, "auto").groups.size(), 32u);
}

// The last-level cache (easel model's cache_mb) is every socket's L3 summed; a described machine
// without caches says 0 (nothing stands in for what the file does not say).
TEST(Described, LastLevelCachesAreSummed) {
  EXPECT_EQ(described("two-socket").last_level_cache_bytes, 2 * 22 * (uint64_t{1} << 20));
  EXPECT_EQ(described("one-core").last_level_cache_bytes, 0u);
}

TEST(Described, OneCoreIsOneGroup) {
  const Topology t = described("one-core");
  ASSERT_EQ(t.core_count(), 1);
  for (const char* g : {"numa", "auto", "1"}) {
    const GroupPlan p = plan_of(t, g);
    ASSERT_EQ(p.groups.size(), 1u);
    EXPECT_EQ(p.groups[0].cpus, std::vector<int>{0});
    EXPECT_EQ(p.groups[0].numa_node, -1);  // one node: nothing to choose
    EXPECT_EQ(p.groups[0].dram_node, 0);
    EXPECT_EQ(p.groups[0].hbw_node, -1);
  }
  PlanRequest r;
  r.groups = GroupCount::of(2);
  EXPECT_FALSE(make_plan(t, r).ok());
}

// detect_topology reads a described machine when EASEL_TOPOLOGY_XML (or HWLOC_XMLFILE) names
// one; a missing file is one line naming it.
TEST(Described, DetectReadsTheNamedFile) {
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  const std::string path =
      std::string(root != nullptr ? root : ".") + "/tests/engine/topologies/knl-snc4-flat.xml";
  ASSERT_EQ(setenv("EASEL_TOPOLOGY_XML", path.c_str(), 1), 0);
  auto t = detect_topology();
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->described_by, path);
  EXPECT_EQ(t->core_count(), 68);
  EXPECT_EQ(t->node(0)->kind, NodeKind::dram) << "MEMKIND_HBW_NODES is this machine's";
  ASSERT_EQ(setenv("EASEL_TOPOLOGY_XML", "/nonexistent/knl.xml", 1), 0);
  t = detect_topology();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "topology file /nonexistent/knl.xml: no such file (an hwloc XML file, as `lstopo "
            "--of xml` writes)");
  ASSERT_EQ(unsetenv("EASEL_TOPOLOGY_XML"), 0);
  EXPECT_TRUE(detect_topology()->described_by.empty());
}

// The made-up machine's memory-only node has no cpus: it belongs to no locality.
TEST(Plan, MemoryWithoutCpusBelongsToNoGroup) {
  const Topology t = fake_topology();
  const auto locs = localities(t);
  ASSERT_EQ(locs.size(), 2u);
  EXPECT_EQ(locs[1].dram_node, 1);
  EXPECT_EQ(locs[1].hbw_node, -1);
  const GroupPlan p = plan_of(t, "numa");
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[1].dram_node, 1);
  EXPECT_EQ(p.groups[1].hbw_node, -1);
}

}  // namespace
}  // namespace easel
