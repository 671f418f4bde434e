// `easel topology`: the machine (each NUMA node with its kind and capacity), its GPUs, and the
// worker-group plan the flags give, as text or (--json) as one JSON object.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "algos/trainer.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "nets/models/models.hpp"
#include "tools/cli/cli.hpp"

namespace easel::cli {
namespace {

using nlohmann::json;

json node_or_null(int node) {
  return node < 0 ? json(nullptr) : json(node);
}

// {"machine", "numa", "localities", "groups", "oversubscribed", "notes"}: see docs/TOPOLOGY.md.
json plan_json(const TrainConfig& cfg, const Topology& topo, const GroupPlan& plan) {
  json j;
  j["machine"] = {
      {"described_by", topo.described_by.empty() ? json(nullptr) : json(topo.described_by)},
      {"packages", topo.packages},
      {"cores", topo.core_count()},
      {"memory_bytes", topo.total_memory_bytes},
      {"hbw_node", topo.has_hbw_node()}};
  j["numa"] = json::array();
  for (const NumaNode& n : topo.numa)
    j["numa"].push_back({{"os_index", n.os_index},
                         {"kind", node_kind_name(n.kind)},
                         {"kind_source", n.kind_source},
                         {"bytes", n.memory_bytes},
                         {"cpus", n.cpus}});
  j["localities"] = json::array();
  for (const Locality& l : localities(topo))
    j["localities"].push_back({{"cores", l.cores.size()},
                               {"dram_node", node_or_null(l.dram_node)},
                               {"hbw_node", node_or_null(l.hbw_node)},
                               {"dram_bytes", l.dram_bytes},
                               {"hbw_bytes", l.hbw_bytes}});
  j["algo"] = cfg.algo;
  j["groups"] = json::array();
  for (const GroupSpec& g : plan.groups)
    j["groups"].push_back({{"id", g.id},
                           {"cpus", g.cpus},
                           {"threads", g.cpus.size()},
                           {"locality", node_or_null(g.locality)},
                           {"dram_node", node_or_null(g.dram_node)},
                           {"hbw_node", node_or_null(g.hbw_node)},
                           {"dram_bytes", g.dram_bytes},
                           {"hbw_bytes", g.hbw_bytes},
                           {"hbw_sharers", g.hbw_sharers},
                           {"gpu", node_or_null(g.gpu)}});
  j["oversubscribed"] = plan.oversubscribed;
  j["notes"] = plan.notes;
  return j;
}

}  // namespace

int run_topology(const TrainConfig& cfg, bool as_json) {
  auto topo = detect_topology();
  if (!topo.ok()) return report(topo.status(), failure_of(topo.status()));
  if (as_json) {
    auto plan = plan_groups(cfg, topo.value());
    if (!plan.ok()) return report(plan.status(), failure_of(plan.status()));
    std::printf("%s\n", plan_json(cfg, *topo, *plan).dump(2).c_str());
    return 0;
  }
  std::printf("%s", topo->to_string().c_str());
  std::printf("high-bandwidth memory (memkind, this machine): %s\n",
              hbw_available() ? "yes" : "no");
  if (auto gpus = list_gpus(); gpus.ok()) {
    std::printf("GPUs: %zu (CUDA%s)\n", gpus->size(), nccl_built() ? ", NCCL" : ", no NCCL");
    for (const GpuInfo& g : *gpus)
      std::printf("  cuda:%d  %s, %.1f GiB, compute capability %d.%d, %d SMs\n", g.ordinal,
                  g.name.c_str(), static_cast<double>(g.memory_bytes) / (1024.0 * 1024 * 1024),
                  g.cc_major, g.cc_minor, g.multiprocessors);
  } else {
    std::printf("GPUs: none (%s)\n", gpus.status().message().c_str());
  }
  auto plan = plan_groups(cfg, topo.value());
  if (!plan.ok()) return report(plan.status(), failure_of(plan.status()));
  std::printf("plan for --algo %s:\n%s", cfg.algo.c_str(), plan->to_string().c_str());
  if (topo->has_hbw_node())
    std::printf(
        "each group's hbw and hbw-preferred buffers go to its hbw node, its dram buffers to its "
        "dram node (capacity / groups sharing the node)\n");
  return 0;
}

int run_list() {
  std::printf("nets:\n");
  for (const auto& m : model_list())
    std::printf("  %-16s %s\n", m.name, m.description);
  std::printf("algorithms:\n");
  for (const auto& a : algo_list())
    std::printf("  %-16s %s\n", a.name, a.summary);
  return 0;
}

}  // namespace easel::cli
