// hogwild-sgd: async-sgd without the lock. Groups add their steps to the shared centre and read
// it back element by element while others write; the races are intended and go through the
// relaxed atomic helpers (span_ops.hpp racy_*), never through a bare racy float pointer.
#include "algos/exchange.hpp"
#include "algos/list.hpp"
#include "engine/span_ops.hpp"

namespace easel {

namespace {

class HogwildSgd final : public Algorithm {
 public:
  std::string name() const override { return "hogwild-sgd"; }
  bool uses_centre() const override { return true; }
  bool survives_group_loss() const override { return true; }
  void rejoin(Run& run, Group& g) override { rejoin_from_centre(run, g, true); }

  void run_round(Run& run, Group& g, int64_t) override {
    const AlgoParams& p = run.params;
    while (claim_step(run, g)) {
      const int64_t read_version = run.centre_version.load(std::memory_order_relaxed);
      local_gradient(g);
      check_replica(run, g, g.weights);  // (the centre's copy, unless the step poisoned it)
      check_replica(run, g, g.diff);
      clock_exchange(run, g, false);
      ScopedTimer t(&g.times.comm);
      const float lr = static_cast<float>(p.lr.at(g.steps.load(std::memory_order_relaxed)));
      scaled_gradient(run.segments(), g.diff.data(), g.weights.data(), lr, p.weight_decay);
      racy_axpy(run.centre.data(), -1.f, g.diff.data(), run.arena_floats());
      racy_copy_state(run.segments(), run.centre.data(), g.weights.data());  // batch norm's
      const int64_t v = run.centre_version.fetch_add(1, std::memory_order_relaxed);
      note_staleness(g, read_version, v);
      racy_copy_from(g.weights.data(), run.centre.data(), run.arena_floats());
      g.steps.fetch_add(1, std::memory_order_relaxed);
    }
  }

  const float* eval_weights(Run& run) override { return run.centre.data(); }
};

}  // namespace

std::unique_ptr<Algorithm> make_hogwild_sgd() {
  return std::make_unique<HogwildSgd>();
}

}  // namespace easel
