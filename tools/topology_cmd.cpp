#include <cstdio>

#include "algos/trainer.hpp"
#include "nets/models/models.hpp"
#include "tools/cli.hpp"

namespace easel::cli {

int run_topology(const TrainConfig& cfg) {
  auto topo = detect_topology();
  if (!topo.ok()) {
    std::fprintf(stderr, "easel: %s\n", topo.status().message().c_str());
    return 1;
  }
  std::printf("%s", topo->to_string().c_str());
  std::printf("high-bandwidth memory (memkind): %s\n", hbw_available() ? "yes" : "no");
  std::printf("GPUs: none (this build has no CUDA device)\n");
  auto plan = plan_groups(cfg, topo.value());
  if (!plan.ok()) {
    std::fprintf(stderr, "easel: %s\n", plan.status().message().c_str());
    return 2;
  }
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
