// The node's topology, read through hwloc (only topology.cpp includes hwloc.h), restricted to
// the cores this process may run on; and the worker-group plan built from it.
// docs/TOPOLOGY.md shows the plan of each described machine in tests/engine/topologies/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/memory.hpp"
#include "engine/status.hpp"

namespace easel {

// What a NUMA node's memory is: ordinary DRAM, or high-bandwidth memory (KNL's MCDRAM in flat
// or hybrid mode, Xeon Max's HBM).
enum class NodeKind { dram, hbw };
const char* node_kind_name(NodeKind k);  // "dram", "hbw"

struct NumaNode {
  int os_index = 0;
  uint64_t memory_bytes = 0;
  // OS indices of the PUs local to it: hwloc 2 gives a high-bandwidth node its cluster's cpus;
  // empty only for memory that no core is near.
  std::vector<int> cpus;
  bool memory_only = false;  // no cpus at all
  NodeKind kind = NodeKind::dram;
  // Why it is that kind: hwloc's subtype ("MCDRAM", "HBM"), "bandwidth" (hwloc's memory
  // attributes), "MEMKIND_HBW_NODES"; empty for plain DRAM.
  std::string kind_source;
};

// A set of cores that share their nearest memory (a KNL quadrant or SNC cluster, a socket, a
// NUMA node with cores) and the memory nodes of that set: those whose cpus are exactly its cpus.
struct Locality {
  std::vector<int> cores;  // indices into Topology::cores, in order
  int dram_node = -1;      // os index of its DRAM node, -1 when none
  int hbw_node = -1;       // os index of its high-bandwidth node, -1 when none (cache mode)
  uint64_t dram_bytes = 0;
  uint64_t hbw_bytes = 0;
};

struct Topology {
  int packages = 1;
  // One entry per physical core the process may use: the OS index of each of its PUs.
  std::vector<std::vector<int>> cores;
  std::vector<NumaNode> numa;
  uint64_t total_memory_bytes = 0;
  // The last-level caches (L3, else L2) of the usable cores, summed; on this machine, when
  // hwloc sees none, one cache's size as the C library reports it; 0 when nothing says.
  uint64_t last_level_cache_bytes = 0;
  // Where it came from: empty for this machine, else the hwloc XML file that describes another
  // one (a described machine is planned, never run on).
  std::string described_by;

  int core_count() const { return static_cast<int>(cores.size()); }
  // The NUMA node (os index) nearest `cpu`: a DRAM node whose cpus hold it, else any node, else -1.
  int numa_of_cpu(int cpu) const;
  const NumaNode* node(int os_index) const;  // nullptr when there is none
  bool has_hbw_node() const;
  // Multi-line human-readable description: every node with its kind and capacity.
  std::string to_string() const;
};

// The localities of `topo`, in hwloc's order of their first node: one per distinct non-empty
// cpuset among the NUMA nodes that holds a usable core; a single locality of every core (with
// the first DRAM node) when there is none. Never empty, and no locality is empty.
std::vector<Locality> localities(const Topology& topo);

// Reads the machine through hwloc. With EASEL_TOPOLOGY_XML or HWLOC_XMLFILE set (the first
// wins), reads the machine that hwloc XML file describes instead (described_by says which; the
// file must exist: the error names it), whole, without this process's binding: for planning
// (`easel topology`); a run on it pins only where the cpus exist here (a failed pin is logged). On
// this machine MEMKIND_HBW_NODES marks nodes hbw as memkind would; a described machine keeps its
// own kinds. Fails only if hwloc fails.
Result<Topology> detect_topology();
// The machine an hwloc XML file describes (written by `lstopo --of xml`); error names the file.
Result<Topology> load_topology_xml(const std::string& path);

// One worker group's place on the node.
struct GroupSpec {
  int id = 0;
  std::vector<int> cpus;  // OS cpu indices, one thread each; never shared unless oversubscribed
  int numa_node = -1;     // where its buffers go, -1 when the machine has one node
  int gpu = -1;           // the GPU (CUDA ordinal) the group drives; -1 for a CPU group
  // Its locality (index into localities(topo); -1 for none, as in --cpus lists that straddle)
  // and that locality's memory: dram buffers go to dram_node, hbw and hbw-preferred ones to
  // hbw_node (-1 when none); hbw_bytes is that node's capacity, shared by hbw_sharers groups.
  int locality = -1;
  int dram_node = -1;
  int hbw_node = -1;
  uint64_t dram_bytes = 0;
  uint64_t hbw_bytes = 0;
  int hbw_sharers = 0;
};

// What the user asked for (flags --groups, --threads-per-group, --threads, --cpus,
// --oversubscribe). `groups` is a count ("2"; a multiple of the localities splits each evenly),
// "numa" (one per locality), or "auto" (one group per core: the right layout for small nets,
// see PERF-NOTES.md).
// --groups, parsed once from the flag's text (parse_group_count) and read typed everywhere:
// auto (from the threads and the cores), numa (one group a locality) or a count in [1, 4096].
struct GroupCount {
  enum class Kind { automatic, numa, count };
  Kind kind = Kind::automatic;
  int n = 0;  // with Kind::count

  static GroupCount of(int count) { return {Kind::count, count}; }
  static GroupCount numa() { return {Kind::numa, 0}; }
  bool is_count() const { return kind == Kind::count; }
  bool is_auto() const { return kind == Kind::automatic; }
  std::string text() const;  // as the flag takes it: "auto", "numa" or the count
  bool operator==(const GroupCount&) const = default;
};
// The flag's text; the error names --groups and what it accepts.
Result<GroupCount> parse_group_count(std::string_view text);

struct PlanRequest {
  GroupCount groups;
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
  std::string to_string() const;  // a table: group, threads, numa, dram, hbw node, cpus; notes
};

// Builds the plan. Asking for more threads than cores is refused (invalid_argument, saying how
// many cores there are and naming --oversubscribe) unless req.oversubscribe, in which case
// threads wrap around the cores and the plan says so.
// Every group gets its locality's memory nodes; a group whose cores straddle localities gets
// those of its first cpu's, and the plan notes it.
Result<GroupPlan> make_plan(const Topology& topo, const PlanRequest& req);

// hbw placement (any class placed `hbw`) on a machine without a high-bandwidth NUMA node is
// refused, `unavailable` (the machine lacks what was asked: exit 1, as --device cuda without a
// GPU): "--placement CLASS=hbw (or hbw): this machine has no high-bandwidth NUMA node (KNL cache
// mode or no MCDRAM/HBM; nodes: ...); use hbw-preferred or dram". On this machine it is
// refused only when memkind finds none either.
Status check_hbw_placement(const Topology& topo, const Placement& placement);

// Parses "0-3,8" into {0,1,2,3,8}; error names the bad token.
Result<std::vector<int>> parse_cpu_list(const std::string& text);

}  // namespace easel
