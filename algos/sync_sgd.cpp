// sync-sgd: every step, an allreduce of the gradients over the Comm (tree or ring), then every
// group applies the same (momentum) update, so every replica holds the same weights. The
// paper's KNL intra-chip scheme: each group keeps its own copy of the weights and its data.
// Across MPI ranks the same allreduce spans all P groups (hierarchical Comm), so every replica
// on every rank holds the same weights.
#include "algos/exchange.hpp"
#include "algos/list.hpp"

namespace easel {

namespace {

class SyncSgd final : public Algorithm {
 public:
  std::string name() const override { return "sync-sgd"; }
  bool multi_process() const override { return true; }  // the allreduce spans every rank
  bool uses_collectives() const override { return true; }
  bool device_resident() const override { return true; }  // on GPUs: NCCL allreduce

  void run_round(Run& run, Group& g, int64_t iterations) override {
    const AlgoParams& p = run.params;
    const float inv_p = 1.f / static_cast<float>(run.total_groups());
    for (int64_t i = 0; i < iterations; ++i) {
      if (stop_here(run, g)) break;  // every group at the same step
      local_gradient(g);
      timed_collective(run, g, [&] {
        for_each_message(run, [&](int64_t off, int64_t n) {
          run.comm->allreduce_sum(g.global_id, g.diff.data() + off, n);
        });
      });
      ScopedTimer t(&g.times.compute);
      g.kernels->scale(g.diff.data(), inv_p, run.arena_floats());
      const float lr = static_cast<float>(p.lr.at(g.steps.load(std::memory_order_relaxed)));
      local_step(run, g, lr, p.momentum > 0 ? LocalRule::heavy_ball : LocalRule::sgd);
      g.steps.fetch_add(1, std::memory_order_relaxed);
    }
  }

  const float* eval_weights(Run& run) override { return run.groups[0]->weights.data(); }
};

}  // namespace

std::unique_ptr<Algorithm> make_sync_sgd() {
  return std::make_unique<SyncSgd>();
}

}  // namespace easel
