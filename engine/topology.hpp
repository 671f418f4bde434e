// The node's topology, read through hwloc (only topology.cpp includes hwloc.h), restricted to
// the cores this process may run on; and the worker-group plan built from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/status.hpp"

namespace easel {

struct NumaNode {
  int os_index = 0;
  uint64_t memory_bytes = 0;
  std::vector<int> cpus;     // OS indices of the PUs local to it (empty for memory-only nodes)
  bool memory_only = false;  // a node with memory but no cores (KNL MCDRAM in flat mode, HBM)
};

struct Topology {
  int packages = 1;
  // One entry per physical core the process may use: the OS index of each of its PUs.
  std::vector<std::vector<int>> cores;
  std::vector<NumaNode> numa;
  uint64_t total_memory_bytes = 0;

  int core_count() const { return static_cast<int>(cores.size()); }
  // The NUMA node (os index) whose cpus hold `cpu`, or -1.
  int numa_of_cpu(int cpu) const;
  // Multi-line human-readable description.
  std::string to_string() const;
};

// Reads the machine through hwloc. Fails only if hwloc itself fails.
Result<Topology> detect_topology();

// One worker group's place on the node.
struct GroupSpec {
  int id = 0;
  std::vector<int> cpus;  // OS cpu indices, one thread each; never shared unless oversubscribed
  int numa_node = -1;     // where its buffers go, -1 when the machine has one node
  int gpu = -1;           // the GPU (CUDA ordinal) the group drives; -1 for a CPU group
};

// What the user asked for (flags --groups, --threads-per-group, --threads, --cpus,
// --oversubscribe). `groups` is a count ("2"), "numa" (one per NUMA node with cores), or
// "auto" (one group per core: the right layout for small nets, see PERF-NOTES.md).
struct PlanRequest {
  std::string groups = "auto";
  int threads_per_group = 0;  // 0: derive from threads / groups
  int threads = 0;            // total threads; 0: all cores
  std::string cpu_lists;      // explicit, e.g. "0-3;4-7" (one list per group, ';' separated)
  bool oversubscribe = false;
};

struct GroupPlan {
  std::vector<GroupSpec> groups;
  bool oversubscribed = false;     // some core carries more than one thread
  std::vector<std::string> notes;  // why the plan is what it is (each a line)
  int total_threads() const;
  std::string to_string() const;
};

// Builds the plan. Asking for more threads than cores is refused (invalid_argument, saying how
// many cores there are and naming --oversubscribe) unless req.oversubscribe, in which case
// threads wrap around the cores and the plan says so.
Result<GroupPlan> make_plan(const Topology& topo, const PlanRequest& req);

// Parses "0-3,8" into {0,1,2,3,8}; error names the bad token.
Result<std::vector<int>> parse_cpu_list(const std::string& text);

}  // namespace easel
