// Topology through hwloc (the only file that includes hwloc.h) and the worker-group plan.
#include "engine/topology.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cstdio>
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

}  // namespace

int Topology::numa_of_cpu(int cpu) const {
  for (const NumaNode& n : numa) {
    if (std::find(n.cpus.begin(), n.cpus.end(), cpu) != n.cpus.end()) return n.os_index;
  }
  return -1;
}

std::string Topology::to_string() const {
  std::string s = "packages " + std::to_string(packages) + ", cores " +
                  std::to_string(core_count()) + ", NUMA nodes " + std::to_string(numa.size()) +
                  ", memory " + gib(total_memory_bytes) + "\n";
  for (const NumaNode& n : numa) {
    s += "  numa " + std::to_string(n.os_index) + ": " + gib(n.memory_bytes) + ", cpus " +
         cpus_to_string(n.cpus) + (n.memory_only ? " (memory only)" : "") + "\n";
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

Result<Topology> detect_topology() {
  HwlocTopology h;
  if (hwloc_topology_init(&h.t) != 0) return internal_error("hwloc_topology_init failed");
  const unsigned long flags = HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM |
                              HWLOC_TOPOLOGY_FLAG_RESTRICT_TO_CPUBINDING |
                              HWLOC_TOPOLOGY_FLAG_DONT_CHANGE_BINDING;
  if (hwloc_topology_set_flags(h.t, flags) != 0) {
    return internal_error("hwloc_topology_set_flags failed");
  }
  if (hwloc_topology_load(h.t) != 0) return internal_error("hwloc_topology_load failed");

  Topology topo;
  topo.packages = std::max(1, hwloc_get_nbobjs_by_type(h.t, HWLOC_OBJ_PACKAGE));
  hwloc_obj_t root = hwloc_get_root_obj(h.t);
  hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(h.t);

  const int ncores = hwloc_get_nbobjs_by_type(h.t, HWLOC_OBJ_CORE);
  const bool have_cores = ncores > 0;
  const hwloc_obj_type_t unit = have_cores ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  const int nunits = hwloc_get_nbobjs_by_type(h.t, unit);
  for (int i = 0; i < nunits; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(h.t, unit, static_cast<unsigned>(i));
    if (obj == nullptr || obj->cpuset == nullptr) continue;
    hwloc_bitmap_t set = hwloc_bitmap_dup(obj->cpuset);
    if (allowed != nullptr) hwloc_bitmap_and(set, set, allowed);
    std::vector<int> pus = bitmap_to_vector(set);
    hwloc_bitmap_free(set);
    if (!pus.empty()) topo.cores.push_back(std::move(pus));
  }

  const int nnodes = hwloc_get_nbobjs_by_type(h.t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnodes; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(h.t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
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
    topo.numa.push_back(std::move(n));
  }
  topo.total_memory_bytes = root != nullptr ? root->total_memory : 0;
  if (topo.cores.empty()) return internal_error("hwloc found no usable cores for this process");
  return topo;
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
  char line[128];
  std::snprintf(line, sizeof line, "  %-6s %-8s %-5s %s\n", "group", "threads", "numa", "cpus");
  s += line;
  for (const GroupSpec& g : groups) {
    const std::string numa = g.numa_node < 0 ? "-" : std::to_string(g.numa_node);
    std::snprintf(line, sizeof line, "  %-6d %-8zu %-5s ", g.id, g.cpus.size(), numa.c_str());
    s += line;
    s += cpus_to_string(g.cpus);
    if (g.gpu >= 0) s += "  gpu cuda:" + std::to_string(g.gpu);
    s += "\n";
  }
  for (const std::string& n : notes)
    s += "  note: " + n + "\n";
  return s;
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

// --groups as a whole number in [1, 4096]; the error names the flag and what it accepts.
Result<int> parse_group_count(const std::string& groups) {
  int n = 0;
  if (!parse_positive(groups, &n)) {
    return invalid_argument("--groups must be 'auto', 'numa' or a whole number from 1 to " +
                            std::to_string(kMaxCpu) + " (got '" + groups + "')");
  }
  return n;
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
  if (req.groups != "auto" && req.groups != "numa") {
    EASEL_ASSIGN_OR_RETURN(const int asked, parse_group_count(req.groups));
    if (asked != static_cast<int>(plan.groups.size())) {
      return invalid_argument("--groups " + req.groups + " does not match the " +
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

// The plan for explicit --cpus lists (req.cpu_lists not blank).
Result<GroupPlan> plan_cpu_lists(const Topology& topo, const PlanRequest& req) {
  EASEL_ASSIGN_OR_RETURN(GroupPlan plan, groups_from_cpu_lists(topo, req.cpu_lists));
  EASEL_RETURN_IF_ERROR(check_cpu_lists_agree(plan, req));
  plan.notes.push_back("explicit --cpus: " + std::to_string(plan.groups.size()) + " groups");
  if (plan.oversubscribed) plan.notes.push_back("oversubscribed: some cpus carry two threads");
  return plan;
}

// The localities of the machine: for each NUMA node that has cores, in hwloc's order, the
// indices (into topo.cores) of the cores whose first PU it holds; a single locality of every
// core when hwloc saw no node with cores. Never empty, and no locality is empty.
std::vector<std::vector<int>> core_localities(const Topology& topo) {
  const int cores = topo.core_count();
  std::vector<std::vector<int>> out;
  for (const NumaNode& n : topo.numa) {
    if (n.memory_only) continue;
    std::vector<int> idx;
    for (int c = 0; c < cores; ++c) {
      const auto& pus = topo.cores[static_cast<size_t>(c)];
      if (std::find(n.cpus.begin(), n.cpus.end(), pus.front()) != n.cpus.end()) idx.push_back(c);
    }
    if (!idx.empty()) out.push_back(std::move(idx));
  }
  if (out.empty()) {
    std::vector<int> idx(static_cast<size_t>(cores));
    for (int c = 0; c < cores; ++c)
      idx[static_cast<size_t>(c)] = c;
    out.push_back(std::move(idx));
  }
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
  shape.note = "numa: one group per NUMA node with cores (" + std::to_string(ngroups) + ")";
  return shape;
}

// --groups N: N groups of --threads-per-group threads, or of `pool` / N; --threads must agree
// and the product stay within the limit.
Result<PlanShape> shape_count(const PlanRequest& req, int pool, const PlanLimits& lim) {
  EASEL_ASSIGN_OR_RETURN(const int ngroups, parse_group_count(req.groups));
  if (ngroups > lim.max_threads) return lim.too_many("--groups", ngroups);
  if (req.threads > 0 && req.threads_per_group == 0 && req.threads % ngroups != 0)
    return invalid_argument("--threads " + std::to_string(req.threads) +
                            " is not a multiple of --groups " + req.groups);
  const int k = req.threads_per_group > 0 ? req.threads_per_group : std::max(1, pool / ngroups);
  if (static_cast<int64_t>(ngroups) * k > lim.max_threads)
    return lim.too_many(
        "--groups " + req.groups + " x --threads-per-group " + std::to_string(k) + " =",
        static_cast<int64_t>(ngroups) * k);
  if (req.threads > 0 && req.threads_per_group > 0 && ngroups * k != req.threads) {
    return invalid_argument("--threads " + std::to_string(req.threads) + " is not --groups " +
                            req.groups + " x --threads-per-group " + std::to_string(k));
  }
  PlanShape shape;
  shape.sizes.assign(static_cast<size_t>(ngroups), k);
  return shape;
}

// More threads than cores only with --oversubscribe; the error says how many of each.
Status check_oversubscription(const PlanShape& shape, const PlanLimits& lim,
                              const PlanRequest& req) {
  const int total = shape.total_threads();
  if (total <= lim.cores || req.oversubscribe) return Status::ok_status();
  return invalid_argument("asked for " + std::to_string(total) + " threads (" +
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
  return plan;
}

}  // namespace

// Checks the counts, then plans the --cpus lists when given (a numeric --groups must count them),
// else shapes the groups for --groups auto / numa / N, checks the shape fits the cores, places it.
Result<GroupPlan> make_plan(const Topology& topo, const PlanRequest& req) {
  EASEL_ASSIGN_OR_RETURN(const PlanLimits lim, check_counts(topo, req));
  if (!trim(req.cpu_lists).empty()) return plan_cpu_lists(topo, req);
  const int pool = req.threads > 0 ? req.threads : lim.cores;
  Result<PlanShape> shape = req.groups == "auto"   ? shape_auto(req, pool)
                            : req.groups == "numa" ? shape_numa(topo, req)
                                                   : shape_count(req, pool, lim);
  if (!shape.ok()) return shape.status();
  EASEL_RETURN_IF_ERROR(check_oversubscription(shape.value(), lim, req));
  return place_groups(topo, shape.value(), lim);
}

}  // namespace easel
