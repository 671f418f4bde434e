#include <cstdio>

#include "algos/trainer.hpp"
#include "devices/cuda/cuda_device.hpp"
#include "nets/models/models.hpp"
#include "tools/cli/cli.hpp"

namespace easel::cli {

int run_topology(const TrainConfig& cfg) {
  auto topo = detect_topology();
  if (!topo.ok()) return report(topo.status(), Failure::run);
  std::printf("%s", topo->to_string().c_str());
  std::printf("high-bandwidth memory (memkind): %s\n", hbw_available() ? "yes" : "no");
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
