// Topology through hwloc (the only file that includes hwloc.h) and the worker-group plan.
#include "engine/topology.hpp"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <utility>

namespace easel {
namespace {

constexpr int kMaxCpu = 4096;  // cpu indices are below this

std::vector<int> bitmap_to_vector(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (set == nullptr) return out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i))
    out.push_back(i);
  return out;
}

// Compact form of a sorted or unsorted cpu list: "0-3,8".
std::string cpus_to_string(const std::vector<int>& cpus) {
  if (cpus.empty()) return "-";
  std::string s;
  size_t i = 0;
  while (i < cpus.size()) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
      ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]);
    if (j > i) s += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s;
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

// Owns an hwloc topology for the duration of detect_topology().
struct HwlocTopology {
  hwloc_topology_t t = nullptr;
  ~HwlocTopology() {
    if (t != nullptr) hwloc_topology_destroy(t);
  }
};

// Strict positive integer in [1, 4096]; false otherwise.
bool parse_positive(const std::string& s, int* out) {
  if (s.empty() || s.size() > 4) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < 1 || v > kMaxCpu) return false;
  *out = v;
  return true;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

int group_numa(const Topology& topo, const std::vector<int>& cpus) {
  if (topo.numa.size() <= 1 || cpus.empty()) return -1;
  return topo.numa_of_cpu(cpus.front());
}

// The os index of every NUMA node, "0 dram 24.0 GiB cpus 0-16; 4 hbw 4.0 GiB cpus 0-16; ...".
std::string nodes_summary(const Topology& topo) {
  std::string s;
  for (const NumaNode& n : topo.numa) {
    if (!s.empty()) s += "; ";
    s += std::to_string(n.os_index) + " " + node_kind_name(n.kind) + " " + gib(n.memory_bytes) +
         " cpus " + cpus_to_string(n.cpus);
  }
  return s;
}

}  // namespace

const char* node_kind_name(NodeKind k) {
  return k == NodeKind::hbw ? "hbw" : "dram";
}

int Topology::numa_of_cpu(int cpu) const {
  int any = -1;
  for (const NumaNode& n : numa) {
    if (std::find(n.cpus.begin(), n.cpus.end(), cpu) == n.cpus.end()) continue;
    if (n.kind == NodeKind::dram) return n.os_index;
    if (any < 0) any = n.os_index;
  }
  return any;
}

const NumaNode* Topology::node(int os_index) const {
  for (const NumaNode& n : numa)
    if (n.os_index == os_index) return &n;
  return nullptr;
}

bool Topology::has_hbw_node() const {
  return std::any_of(numa.begin(), numa.end(),
                     [](const NumaNode& n) { return n.kind == NodeKind::hbw; });
}

std::string Topology::to_string() const {
  std::string s;
  if (!described_by.empty()) s += "described machine: " + described_by + "\n";
  s += "packages " + std::to_string(packages) + ", cores " + std::to_string(core_count()) +
       ", NUMA nodes " + std::to_string(numa.size()) + ", memory " + gib(total_memory_bytes) + "\n";
  for (const NumaNode& n : numa) {
    s += "  numa " + std::to_string(n.os_index) + ": " + node_kind_name(n.kind) +
         (n.kind_source.empty() ? "" : " (" + n.kind_source + ")") + ", " + gib(n.memory_bytes) +
         ", cpus " + cpus_to_string(n.cpus) + (n.memory_only ? " (memory only)" : "") + "\n";
  }
  if (!has_hbw_node()) {
    s += std::string("  no high-bandwidth NUMA node (KNL cache mode, or no MCDRAM/HBM): ") +
         (described_by.empty() && hbw_available()
              ? "memkind finds high-bandwidth memory all the same"
              : "hbw is refused") +
         "\n";
  }
  constexpr size_t kListedCores = 32;  // a big node gets a summary line instead
  for (size_t i = 0; i < cores.size() && i < kListedCores; ++i) {
    s += "  core " + std::to_string(i) + ": pus " + cpus_to_string(cores[i]) + "\n";
  }
  if (cores.size() > kListedCores) {
    s += "  ... " + std::to_string(cores.size() - kListedCores) + " more cores\n";
  }
  return s;
}

namespace {

// Every usable core's PUs (cpuset restricted to `allowed`), in hwloc's order.
std::vector<std::vector<int>> read_cores(hwloc_topology_t t, hwloc_const_cpuset_t allowed) {
  std::vector<std::vector<int>> cores;
  const bool have_cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0;
  const hwloc_obj_type_t unit = have_cores ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  const int nunits = hwloc_get_nbobjs_by_type(t, unit);
  for (int i = 0; i < nunits; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(t, unit, static_cast<unsigned>(i));
    if (obj == nullptr || obj->cpuset == nullptr) continue;
    hwloc_bitmap_t set = hwloc_bitmap_dup(obj->cpuset);
    if (allowed != nullptr) hwloc_bitmap_and(set, set, allowed);
    std::vector<int> pus = bitmap_to_vector(set);
    hwloc_bitmap_free(set);
    if (!pus.empty()) cores.push_back(std::move(pus));
  }
  return cores;
}

// The node's bandwidth from its own cpus as hwloc's memory attributes say (firmware's HMAT, or
// an XML that carries them); 0 when unknown.
uint64_t node_bandwidth(hwloc_topology_t t, hwloc_obj_t obj) {
  if (obj->cpuset == nullptr || hwloc_bitmap_iszero(obj->cpuset)) return 0;
  hwloc_location loc;
  loc.type = HWLOC_LOCATION_TYPE_CPUSET;
  loc.location.cpuset = obj->cpuset;
  hwloc_uint64_t value = 0;
  if (hwloc_memattr_get_value(t, HWLOC_MEMATTR_ID_BANDWIDTH, obj, &loc, 0, &value) != 0) return 0;
  return value;
}

// Every NUMA node with its kind: hwloc's subtype MCDRAM or HBM makes it hbw; so does a
// bandwidth at least 1.5 times that of another node with the same cpus.
std::vector<NumaNode> read_nodes(hwloc_topology_t t, hwloc_const_cpuset_t allowed) {
  std::vector<NumaNode> nodes;
  std::vector<uint64_t> bandwidth;
  const int nnodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnodes; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    if (obj == nullptr) continue;
    NumaNode n;
    n.os_index = static_cast<int>(obj->os_index);
    n.memory_bytes = obj->attr != nullptr ? obj->attr->numanode.local_memory : 0;
    if (obj->cpuset != nullptr) {
      hwloc_bitmap_t set = hwloc_bitmap_dup(obj->cpuset);
      if (allowed != nullptr) hwloc_bitmap_and(set, set, allowed);
      n.cpus = bitmap_to_vector(set);
      hwloc_bitmap_free(set);
    }
    n.memory_only = n.cpus.empty();
    if (obj->subtype != nullptr &&
        (std::strcmp(obj->subtype, "MCDRAM") == 0 || std::strcmp(obj->subtype, "HBM") == 0)) {
      n.kind = NodeKind::hbw;
      n.kind_source = obj->subtype;
    }
    nodes.push_back(std::move(n));
    bandwidth.push_back(node_bandwidth(t, obj));
  }
  for (size_t a = 0; a < nodes.size(); ++a) {
    for (size_t b = 0; b < nodes.size(); ++b) {
      if (a == b || nodes[a].kind == NodeKind::hbw || nodes[a].cpus != nodes[b].cpus) continue;
      if (bandwidth[a] > 0 && bandwidth[b] > 0 && bandwidth[a] * 2 >= bandwidth[b] * 3) {
        nodes[a].kind = NodeKind::hbw;
        nodes[a].kind_source = "bandwidth";
      }
    }
  }
  return nodes;
}

// On this machine, MEMKIND_HBW_NODES (a node list, "0" or "4-7") names the nodes memkind takes
// for hbw: they count as hbw here too, so that the plan and the allocator agree.
void apply_memkind_hbw_nodes(Topology& topo) {
  const char* env = std::getenv("MEMKIND_HBW_NODES");
  if (env == nullptr) return;
  auto listed = parse_cpu_list(env);  // the same list syntax
  if (!listed.ok()) return;           // memkind then refuses it itself
  for (NumaNode& n : topo.numa) {
    if (n.kind == NodeKind::dram &&
        std::find(listed->begin(), listed->end(), n.os_index) != listed->end()) {
      n.kind = NodeKind::hbw;
      n.kind_source = "MEMKIND_HBW_NODES";
    }
  }
}

// The sizes of the deepest cache level hwloc found (L3, else L2), summed over its objects. On
// this machine hwloc finds the caches from sysfs, or on x86 from CPUID on each core, which it
// skips under HWLOC_TOPOLOGY_FLAG_DONT_CHANGE_BINDING: a VM without cache entries in sysfs then
// shows none, and the C library's size of one last-level cache (a lower bound) stands in.
uint64_t last_level_cache(hwloc_topology_t t, bool this_system) {
  for (hwloc_obj_type_t type : {HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE}) {
    const int n = hwloc_get_nbobjs_by_type(t, type);
    if (n <= 0) continue;
    uint64_t sum = 0;
    for (int i = 0; i < n; ++i)
      if (hwloc_obj_t o = hwloc_get_obj_by_type(t, type, static_cast<unsigned>(i)))
        sum += o->attr->cache.size;
    return sum;
  }
  if (!this_system) return 0;
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long size = sysconf(name);
    if (size > 0) return static_cast<uint64_t>(size);
  }
  return 0;
}

// Loads `xml` (a described machine) or, when empty, this machine restricted to this process's
// cpu binding; reads it into a Topology.
Result<Topology> read_topology(const std::string& xml) {
  HwlocTopology h;
  if (hwloc_topology_init(&h.t) != 0) return internal_error("hwloc_topology_init failed");
  if (!xml.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(xml, ec))
      return invalid_argument("topology file " + xml + ": no such file (an hwloc XML file, " +
                              "as `lstopo --of xml` writes)");
    if (hwloc_topology_set_xml(h.t, xml.c_str()) != 0)
      return invalid_argument("topology file " + xml + ": hwloc cannot read it");
  } else {
    const unsigned long flags = HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM |
                                HWLOC_TOPOLOGY_FLAG_RESTRICT_TO_CPUBINDING |
                                HWLOC_TOPOLOGY_FLAG_DONT_CHANGE_BINDING;
    if (hwloc_topology_set_flags(h.t, flags) != 0) {
      return internal_error("hwloc_topology_set_flags failed");
    }
  }
  if (hwloc_topology_load(h.t) != 0) {
    if (!xml.empty()) return invalid_argument("topology file " + xml + ": hwloc cannot load it");
    return internal_error("hwloc_topology_load failed");
  }

  Topology topo;
  topo.described_by = xml;
  topo.packages = std::max(1, hwloc_get_nbobjs_by_type(h.t, HWLOC_OBJ_PACKAGE));
  hwloc_obj_t root = hwloc_get_root_obj(h.t);
  hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(h.t);
  topo.cores = read_cores(h.t, allowed);
  topo.numa = read_nodes(h.t, allowed);
  topo.total_memory_bytes = root != nullptr ? root->total_memory : 0;
  topo.last_level_cache_bytes = last_level_cache(h.t, xml.empty());
  if (xml.empty()) apply_memkind_hbw_nodes(topo);
  if (topo.cores.empty()) {
    return xml.empty() ? internal_error("hwloc found no usable cores for this process")
                       : invalid_argument("topology file " + xml + ": it describes no cores");
  }
  return topo;
}

}  // namespace

Result<Topology> detect_topology() {
  const char* xml = std::getenv("EASEL_TOPOLOGY_XML");
  if (xml == nullptr || *xml == '\0') xml = std::getenv("HWLOC_XMLFILE");
  return read_topology(xml != nullptr ? xml : "");
}

Result<Topology> load_topology_xml(const std::string& path) {
  if (path.empty()) return invalid_argument("topology file: the path is empty");
  return read_topology(path);
}

std::vector<Locality> localities(const Topology& topo) {
  const int cores = topo.core_count();
  std::vector<Locality> out;
  std::vector<const std::vector<int>*> seen;  // the cpusets already made localities
  for (const NumaNode& n : topo.numa) {
    if (n.memory_only) continue;
    if (std::any_of(seen.begin(), seen.end(), [&](const auto* c) { return *c == n.cpus; }))
      continue;
    seen.push_back(&n.cpus);
    Locality loc;
    for (int c = 0; c < cores; ++c) {
      const auto& pus = topo.cores[static_cast<size_t>(c)];
      if (std::find(n.cpus.begin(), n.cpus.end(), pus.front()) != n.cpus.end())
        loc.cores.push_back(c);
    }
    if (loc.cores.empty()) continue;
    for (const NumaNode& m : topo.numa) {
      if (m.cpus != n.cpus) continue;
      int& node = m.kind == NodeKind::hbw ? loc.hbw_node : loc.dram_node;
      if (node >= 0) continue;  // a second node of one kind: the first one serves
      node = m.os_index;
      (m.kind == NodeKind::hbw ? loc.hbw_bytes : loc.dram_bytes) = m.memory_bytes;
    }
    if (loc.dram_node < 0) {  // its only memory is high-bandwidth (MEMKIND_HBW_NODES=0)
      loc.dram_node = loc.hbw_node;
      loc.dram_bytes = loc.hbw_bytes;
    }
    out.push_back(std::move(loc));
  }
  if (out.empty()) {
    Locality loc;
    for (int c = 0; c < cores; ++c)
      loc.cores.push_back(c);
    for (const NumaNode& m : topo.numa) {
      if (m.kind == NodeKind::dram && loc.dram_node < 0) {
        loc.dram_node = m.os_index;
        loc.dram_bytes = m.memory_bytes;
      }
    }
    out.push_back(std::move(loc));
  }
  return out;
}

int GroupPlan::total_threads() const {
  int t = 0;
  for (const GroupSpec& g : groups)
    t += static_cast<int>(g.cpus.size());
  return t;
}

std::string GroupPlan::to_string() const {
  std::string s = std::to_string(groups.size()) + " groups, " + std::to_string(total_threads()) +
                  " threads" + (oversubscribed ? " (oversubscribed)" : "") + "\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %-6s %-8s %-5s %-5s %-22s %s\n", "group", "threads", "numa",
                "dram", "hbw (node, capacity)", "cpus");
  s += line;
  const auto node = [](int n) { return n < 0 ? std::string("-") : std::to_string(n); };
  for (const GroupSpec& g : groups) {
    std::string hbw = "-";
    if (g.hbw_node >= 0) {
      hbw = std::to_string(g.hbw_node) + ", " + gib(g.hbw_bytes);
      if (g.hbw_sharers > 1) hbw += " / " + std::to_string(g.hbw_sharers);
    }
    std::snprintf(line, sizeof line, "  %-6d %-8zu %-5s %-5s %-22s ", g.id, g.cpus.size(),
                  node(g.numa_node).c_str(), node(g.dram_node).c_str(), hbw.c_str());
    s += line;
    s += cpus_to_string(g.cpus);
    if (g.gpu >= 0) s += "  gpu cuda:" + std::to_string(g.gpu);
    s += "\n";
  }
  for (const std::string& n : notes)
    s += "  note: " + n + "\n";
  return s;
}

Status check_hbw_placement(const Topology& topo, const Placement& placement) {
  if (topo.has_hbw_node() || (topo.described_by.empty() && hbw_available())) return {};
  for (int c = 0; c < kBufferClassCount; ++c) {
    if (placement.kind[c] != MemKind::hbw) continue;
    // As the flag was given: "hbw" (every class), else the first class placed there.
    const std::string asked =
        placement_text(placement) == "hbw"
            ? std::string("hbw")
            : std::string(buffer_class_name(static_cast<BufferClass>(c))) + "=hbw";
    return unavailable("--placement " + asked +
                       ": this machine has no high-bandwidth NUMA node (KNL cache mode or no "
                       "MCDRAM/HBM; nodes: " +
                       nodes_summary(topo) + "); use hbw-preferred or dram");
  }
  return {};
}

Result<std::vector<int>> parse_cpu_list(const std::string& text) {
  const std::string all = trim(text);
  if (all.empty()) return invalid_argument("cpu list is empty (expected e.g. \"0-3,8\")");
  std::vector<int> out;
  std::set<int> seen;
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t end = all.find(',', pos);
    if (end == std::string::npos) end = all.size();
    const std::string tok = trim(all.substr(pos, end - pos));
    pos = end + 1;
    auto bad = [&](const std::string& why) {
      return invalid_argument("cpu list '" + all + "': '" + tok + "' " + why);
    };
    if (tok.empty()) return bad("is empty (expected a cpu or a range like 0-3)");
    const size_t dash = tok.find('-', 1);  // a leading '-' is a negative number, not a range
    auto parse_index = [&](const std::string& s, int* v) {
      if (s.empty() || s.size() > 5) return false;
      long x = 0;
      for (char c : s) {
        if (c < '0' || c > '9') return false;
        x = x * 10 + (c - '0');
      }
      if (x >= kMaxCpu) return false;
      *v = static_cast<int>(x);
      return true;
    };
    int lo = 0, hi = 0;
    if (dash == std::string::npos) {
      if (!parse_index(tok, &lo)) {
        return bad("is not a cpu index (0-" + std::to_string(kMaxCpu - 1) + ")");
      }
      hi = lo;
    } else {
      if (!parse_index(tok.substr(0, dash), &lo) || !parse_index(tok.substr(dash + 1), &hi)) {
        return bad("is not a range of cpu indices (0-" + std::to_string(kMaxCpu - 1) + ")");
      }
      if (hi < lo) return bad("runs backwards");
    }
    for (int c = lo; c <= hi; ++c) {
      if (!seen.insert(c).second) return bad("lists cpu " + std::to_string(c) + " twice");
      out.push_back(c);
    }
  }
  return out;
}

namespace {

// What every request is checked against: the machine's cores and the most threads a plan may
// hold in all. Even oversubscribed, that is 64 threads per core (every group is a replica of
// the net with its own arenas): a count past it is a typo, not a study, and would take the
// machine's memory before anything ran.
struct PlanLimits {
  int cores = 0;
  int64_t max_threads = 0;

  // "WHAT N is more than M threads (64 per core of this machine's C)".
  Status too_many(const std::string& what, int64_t n) const {
    return invalid_argument(
        what + " " + std::to_string(n) + " is more than " + std::to_string(max_threads) +
        " threads (64 per core of this machine's " + std::to_string(cores) + ")");
  }
};

// How many groups of how many threads, before any core is picked.
struct PlanShape {
  std::vector<int> sizes;  // threads of each group; never empty
  // Per group, the core indices (into Topology::cores) its threads take in order; empty: the
  // threads of all groups take the cores round-robin, wrapping when oversubscribed.
  std::vector<std::vector<int>> cores;
  std::string note;  // why the shape is what it is; empty for none

  int total_threads() const {
    int t = 0;
    for (int s : sizes)
      t += s;
    return t;
  }
};

// Requires nothing; returns the limits when --threads and --threads-per-group are each in
// [0, max_threads] and the machine has a core, else the flag's one-line error.
Result<PlanLimits> check_counts(const Topology& topo, const PlanRequest& req) {
  if (req.threads < 0) {
    return invalid_argument("--threads must be >= 0 (0: all cores), got " +
                            std::to_string(req.threads));
  }
  if (req.threads_per_group < 0) {
    return invalid_argument("--threads-per-group must be >= 0 (0: derive from --threads), got " +
                            std::to_string(req.threads_per_group));
  }
  PlanLimits lim;
  lim.cores = topo.core_count();
  if (lim.cores == 0) return unavailable("the topology has no cores");
  lim.max_threads = std::max<int64_t>(64, 64 * static_cast<int64_t>(lim.cores));
  if (req.threads > lim.max_threads) return lim.too_many("--threads", req.threads);
  if (req.threads_per_group > lim.max_threads) {
    return lim.too_many("--threads-per-group", req.threads_per_group);
  }
  return lim;
}

// --cpus "0-3;4-7": one group per ';'-separated list, exactly those cpus, each of which must be
// available to this process. A cpu in two lists marks the plan oversubscribed (refused later
// unless --oversubscribe). No notes yet.
Result<GroupPlan> groups_from_cpu_lists(const Topology& topo, const std::string& lists) {
  std::set<int> known;
  for (const auto& c : topo.cores)
    known.insert(c.begin(), c.end());
  GroupPlan plan;
  std::set<int> used;
  size_t pos = 0;
  while (pos <= lists.size()) {
    size_t end = lists.find(';', pos);
    if (end == std::string::npos) end = lists.size();
    const std::string item = lists.substr(pos, end - pos);
    pos = end + 1;
    auto cpus = parse_cpu_list(item);
    if (!cpus.ok()) return invalid_argument("--cpus: " + cpus.status().message());
    for (int c : *cpus) {
      if (known.count(c) == 0) {
        return invalid_argument("--cpus: cpu " + std::to_string(c) +
                                " is not available to this process (usable cpus: " +
                                cpus_to_string(std::vector<int>(known.begin(), known.end())) + ")");
      }
      if (!used.insert(c).second) plan.oversubscribed = true;
    }
    GroupSpec g;
    g.id = static_cast<int>(plan.groups.size());
    g.cpus = std::move(cpus).value();
    g.numa_node = group_numa(topo, g.cpus);
    plan.groups.push_back(std::move(g));
  }
  return plan;
}

// The other flags may repeat what --cpus says, never contradict it: a numeric --groups must
// count the lists, --threads-per-group each list's cpus, --threads all of them; a shared cpu
// needs --oversubscribe.
Status check_cpu_lists_agree(const GroupPlan& plan, const PlanRequest& req) {
  if (req.groups.is_count()) {
    if (req.groups.n != static_cast<int>(plan.groups.size())) {
      return invalid_argument("--groups " + req.groups.text() + " does not match the " +
                              std::to_string(plan.groups.size()) + " lists given to --cpus");
    }
  }
  if (plan.oversubscribed && !req.oversubscribe) {
    return invalid_argument(
        "--cpus gives some cpu to more than one group; use distinct cpus "
        "or pass --oversubscribe");
  }
  size_t total = 0;
  for (const GroupSpec& g : plan.groups) {
    total += g.cpus.size();
    if (req.threads_per_group > 0 && g.cpus.size() != static_cast<size_t>(req.threads_per_group))
      return invalid_argument("--threads-per-group " + std::to_string(req.threads_per_group) +
                              ": --cpus gives group " + std::to_string(g.id) + " " +
                              std::to_string(g.cpus.size()) + " cpu(s)");
  }
  if (req.threads > 0 && total != static_cast<size_t>(req.threads))
    return invalid_argument("--threads " + std::to_string(req.threads) + ": --cpus gives " +
                            std::to_string(total) + " cpu(s) in all");
  return Status::ok_status();
}

// Gives each group its locality's memory nodes (those of its first cpu's locality when its cpus
// straddle two, which a note then says) and counts the groups that share each hbw node.
void assign_memory(const Topology& topo, GroupPlan& plan) {
  const std::vector<Locality> locs = localities(topo);
  int max_pu = 0;
  for (const auto& pus : topo.cores)
    max_pu = std::max(max_pu, *std::max_element(pus.begin(), pus.end()));
  std::vector<int> loc_of_pu(static_cast<size_t>(max_pu) + 1, -1);
  for (size_t l = 0; l < locs.size(); ++l)
    for (int c : locs[l].cores)
      for (int pu : topo.cores[static_cast<size_t>(c)])
        loc_of_pu[static_cast<size_t>(pu)] = static_cast<int>(l);
  std::string straddle;
  for (GroupSpec& g : plan.groups) {
    std::set<int> seen;
    for (int cpu : g.cpus)
      seen.insert(loc_of_pu[static_cast<size_t>(cpu)]);
    const int first = g.cpus.empty() ? -1 : loc_of_pu[static_cast<size_t>(g.cpus.front())];
    g.locality = seen.size() == 1 ? first : -1;
    if (seen.size() > 1) straddle += (straddle.empty() ? "" : ", ") + std::to_string(g.id);
    if (first < 0) continue;
    const Locality& l = locs[static_cast<size_t>(first)];
    g.dram_node = l.dram_node;
    g.dram_bytes = l.dram_bytes;
    g.hbw_node = l.hbw_node;
    g.hbw_bytes = l.hbw_bytes;
  }
  for (GroupSpec& g : plan.groups)
    g.hbw_sharers = g.hbw_node < 0
                        ? 0
                        : static_cast<int>(std::count_if(
                              plan.groups.begin(), plan.groups.end(),
                              [&](const GroupSpec& o) { return o.hbw_node == g.hbw_node; }));
  if (!straddle.empty())
    plan.notes.push_back("group(s) " + straddle + " straddle localities (cores of " +
                         std::to_string(locs.size()) +
                         " localities that do not share their nearest memory): their buffers go "
                         "to the nodes of their first cpu; --groups numa or a multiple of " +
                         std::to_string(locs.size()) + " keeps each group in one");
}

// The plan for explicit --cpus lists (req.cpu_lists not blank).
Result<GroupPlan> plan_cpu_lists(const Topology& topo, const PlanRequest& req) {
  EASEL_ASSIGN_OR_RETURN(GroupPlan plan, groups_from_cpu_lists(topo, req.cpu_lists));
  EASEL_RETURN_IF_ERROR(check_cpu_lists_agree(plan, req));
  plan.notes.push_back("explicit --cpus: " + std::to_string(plan.groups.size()) + " groups");
  if (plan.oversubscribed) plan.notes.push_back("oversubscribed: some cpus carry two threads");
  assign_memory(topo, plan);
  return plan;
}

// The cores of each locality (indices into topo.cores).
std::vector<std::vector<int>> core_localities(const Topology& topo) {
  std::vector<std::vector<int>> out;
  for (Locality& l : localities(topo))
    out.push_back(std::move(l.cores));
  return out;
}

// --groups auto: groups of --threads-per-group threads (1 by default) out of `pool` threads;
// --threads must be a multiple of the group size.
Result<PlanShape> shape_auto(const PlanRequest& req, int pool) {
  const int k = req.threads_per_group > 0 ? req.threads_per_group : 1;
  if (req.threads > 0 && req.threads % k != 0)
    return invalid_argument("--threads " + std::to_string(req.threads) +
                            " is not a multiple of --threads-per-group " + std::to_string(k));
  PlanShape shape;
  shape.sizes.assign(static_cast<size_t>(std::max(1, pool / k)), k);
  shape.note =
      k == 1 ? "auto: one group per core" : "auto: groups of " + std::to_string(k) + " threads";
  return shape;
}

// --groups numa: one group per locality, each kept on its own cores: all of them, or the
// first --threads-per-group (or --threads / localities) of them, which every locality must have.
Result<PlanShape> shape_numa(const Topology& topo, const PlanRequest& req) {
  PlanShape shape;
  shape.cores = core_localities(topo);
  const int ngroups = static_cast<int>(shape.cores.size());
  int cap = req.threads_per_group;
  if (cap == 0 && req.threads > 0) cap = std::max(1, req.threads / ngroups);
  if (req.threads > 0 && req.threads_per_group > 0 &&
      req.threads != req.threads_per_group * ngroups)
    return invalid_argument("--threads " + std::to_string(req.threads) + " is not --groups numa (" +
                            std::to_string(ngroups) + ") x --threads-per-group " +
                            std::to_string(req.threads_per_group));
  if (req.threads > 0 && req.threads % ngroups != 0)
    return invalid_argument("--threads " + std::to_string(req.threads) +
                            " is not a multiple of the " + std::to_string(ngroups) +
                            " NUMA node(s) with cores (--groups numa)");
  for (auto& idx : shape.cores) {
    if (cap > static_cast<int>(idx.size()))
      return invalid_argument((req.threads_per_group > 0
                                   ? "--threads-per-group " + std::to_string(req.threads_per_group)
                                   : "--threads " + std::to_string(req.threads) + " (" +
                                         std::to_string(cap) + " per node)") +
                              ": a NUMA node has only " + std::to_string(idx.size()) +
                              " core(s) (--groups numa keeps each group on its node)");
    if (cap > 0) idx.resize(static_cast<size_t>(cap));
    shape.sizes.push_back(static_cast<int>(idx.size()));
  }
  shape.note = "numa: one group per locality, the cores that share their nearest memory (" +
               std::to_string(ngroups) + ")";
  return shape;
}

// --groups N: N groups of --threads-per-group threads, or of `pool` / N; --threads must agree
// and the product stay within the limit.
Result<PlanShape> shape_count(const PlanRequest& req, int pool, const PlanLimits& lim) {
  const int ngroups = req.groups.n;
  if (ngroups > lim.max_threads) return lim.too_many("--groups", ngroups);
  if (req.threads > 0 && req.threads_per_group == 0 && req.threads % ngroups != 0)
    return invalid_argument("--threads " + std::to_string(req.threads) +
                            " is not a multiple of --groups " + req.groups.text());
  const int k = req.threads_per_group > 0 ? req.threads_per_group : std::max(1, pool / ngroups);
  if (static_cast<int64_t>(ngroups) * k > lim.max_threads)
    return lim.too_many(
        "--groups " + req.groups.text() + " x --threads-per-group " + std::to_string(k) + " =",
        static_cast<int64_t>(ngroups) * k);
  if (req.threads > 0 && req.threads_per_group > 0 && ngroups * k != req.threads) {
    return invalid_argument("--threads " + std::to_string(req.threads) + " is not --groups " +
                            req.groups.text() + " x --threads-per-group " + std::to_string(k));
  }
  PlanShape shape;
  shape.sizes.assign(static_cast<size_t>(ngroups), k);
  return shape;
}

// --groups N on L > 1 localities with N a multiple of L: N / L groups in each locality, in
// order, when every locality has cores for all of them; the shape is left as it is otherwise
// (its groups then take the cores round-robin and may straddle: place_groups notes it).
void keep_groups_in_localities(const Topology& topo, PlanShape& shape) {
  const std::vector<std::vector<int>> locs = core_localities(topo);
  const size_t nloc = locs.size(), ngroups = shape.sizes.size();
  if (nloc <= 1 || ngroups % nloc != 0) return;
  const size_t per = ngroups / nloc, k = static_cast<size_t>(shape.sizes.front());
  for (const auto& cores : locs)
    if (per * k > cores.size()) return;
  for (const auto& cores : locs)
    for (size_t j = 0; j < per; ++j)
      shape.cores.emplace_back(cores.begin() + static_cast<ptrdiff_t>(j * k),
                               cores.begin() + static_cast<ptrdiff_t>((j + 1) * k));
  shape.note = std::to_string(ngroups) + " groups: " + std::to_string(per) + " in each of " +
               std::to_string(nloc) + " localities, " + std::to_string(k) + " cores each";
}

// More threads than cores only with --oversubscribe; the error says how many of each.
Status check_oversubscription(const PlanShape& shape, const PlanLimits& lim,
                              const PlanRequest& req) {
  const int total = shape.total_threads();
  if (total <= lim.cores || req.oversubscribe) return Status::ok_status();
  std::string flags;  // the flags that asked for them, as given
  if (req.groups.is_count()) flags += " --groups " + req.groups.text();
  if (req.threads > 0) flags += " --threads " + std::to_string(req.threads);
  if (req.threads_per_group > 0)
    flags += " --threads-per-group " + std::to_string(req.threads_per_group);
  if (!flags.empty()) flags = flags.substr(1) + ": ";
  return invalid_argument(flags + "asked for " + std::to_string(total) + " threads (" +
                          std::to_string(shape.sizes.size()) + " groups x " +
                          std::to_string(shape.sizes.front()) + ") but this machine has " +
                          std::to_string(lim.cores) + " cores; use fewer or pass --oversubscribe");
}

// Gives each group's threads their cores (each thread the core's first PU): the shape's own
// cores, or round-robin over all cores. Notes the shape's reason, then an oversubscription.
GroupPlan place_groups(const Topology& topo, const PlanShape& shape, const PlanLimits& lim) {
  GroupPlan plan;
  if (!shape.note.empty()) plan.notes.push_back(shape.note);
  int next = 0;  // next core, round-robin
  for (size_t gi = 0; gi < shape.sizes.size(); ++gi) {
    GroupSpec g;
    g.id = static_cast<int>(gi);
    for (int t = 0; t < shape.sizes[gi]; ++t) {
      int core;
      if (!shape.cores.empty()) {
        core = shape.cores[gi][static_cast<size_t>(t)];
      } else {
        core = next % lim.cores;
        ++next;
      }
      g.cpus.push_back(topo.cores[static_cast<size_t>(core)].front());
    }
    g.numa_node = group_numa(topo, g.cpus);
    plan.groups.push_back(std::move(g));
  }
  const int total = shape.total_threads();
  if (total > lim.cores) {
    plan.oversubscribed = true;
    plan.notes.push_back("oversubscribed: " + std::to_string(total) + " threads on " +
                         std::to_string(lim.cores) +
                         " cores (threads share cores round-robin; timings will not scale)");
  }
  assign_memory(topo, plan);
  return plan;
}

}  // namespace

// Checks the counts, then plans the --cpus lists when given (a numeric --groups must count them),
// else shapes the groups for --groups auto / numa / N, checks the shape fits the cores, places it.
Result<GroupPlan> make_plan(const Topology& topo, const PlanRequest& req) {
  EASEL_ASSIGN_OR_RETURN(const PlanLimits lim, check_counts(topo, req));
  if (!trim(req.cpu_lists).empty()) return plan_cpu_lists(topo, req);
  const int pool = req.threads > 0 ? req.threads : lim.cores;
  using Kind = GroupCount::Kind;
  Result<PlanShape> shape = req.groups.kind == Kind::automatic ? shape_auto(req, pool)
                            : req.groups.kind == Kind::numa    ? shape_numa(topo, req)
                                                               : shape_count(req, pool, lim);
  if (!shape.ok()) return shape.status();
  if (req.groups.is_count()) keep_groups_in_localities(topo, *shape);
  EASEL_RETURN_IF_ERROR(check_oversubscription(shape.value(), lim, req));
  return place_groups(topo, shape.value(), lim);
}

std::string GroupCount::text() const {
  switch (kind) {
    case Kind::automatic:
      return "auto";
    case Kind::numa:
      return "numa";
    case Kind::count:
      break;
  }
  return std::to_string(n);
}

Result<GroupCount> parse_group_count(std::string_view text) {
  if (text == "auto") return GroupCount{};
  if (text == "numa") return GroupCount::numa();
  int n = 0;
  if (!parse_positive(std::string(text), &n))
    return invalid_argument("--groups must be 'auto', 'numa' or a whole number from 1 to " +
                            std::to_string(kMaxCpu) + " (got '" + std::string(text) + "')");
  return GroupCount::of(n);
}

}  // namespace easel
