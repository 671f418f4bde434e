#include <gtest/gtest.h>

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
  r.groups = "2";
  auto p = make_plan(t, r);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->groups.size(), 2u);
  EXPECT_EQ(p->groups[0].cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p->groups[1].cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(p->groups[1].numa_node, 1);

  r.groups = "3";
  r.threads_per_group = 2;
  p = make_plan(t, r);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->total_threads(), 6);
  std::set<int> cpus;
  for (const auto& g : p->groups)
    cpus.insert(g.cpus.begin(), g.cpus.end());
  EXPECT_EQ(cpus.size(), 6u) << "threads must get distinct cores";

  r = PlanRequest{};
  r.groups = "4";
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
  r.groups = "numa";
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
  r.groups = "4";
  r.threads_per_group = 4;
  auto p = make_plan(t, r);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::invalid_argument);
  EXPECT_EQ(p.status().message(),
            "asked for 16 threads (4 groups x 4) but this machine has 8 cores; use fewer or "
            "pass --oversubscribe");
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
  r.groups = "4096";
  refused(r, "--groups 4096");
  r.groups = "64";
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
  for (const char* g : {"0", "-1", "abc", ""}) {
    PlanRequest r;
    r.groups = g;
    auto p = make_plan(t, r);
    ASSERT_FALSE(p.ok()) << g;
    EXPECT_TRUE(contains(p.status().message(), "--groups")) << p.status().message();
  }
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
    r.groups = c.groups;
    r.threads = c.threads;
    r.threads_per_group = c.per_group;
    r.cpu_lists = c.cpus;
    r.oversubscribe = true;
    auto p = make_plan(t, r);
    ASSERT_FALSE(p.ok()) << c.says;
    EXPECT_TRUE(contains(p.status().message(), c.says)) << p.status().message();
  }
  PlanRequest r;  // agreeing flags still plan
  r.groups = "numa";
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
  r.groups = "1";
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

}  // namespace
}  // namespace easel
