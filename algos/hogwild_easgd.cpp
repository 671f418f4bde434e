// hogwild-easgd: async-easgd without the lock; the centre is read and written through relaxed
// atomics (exchange.hpp easgd_exchange_racy), element by element, while other groups do the
// same.
#include "algos/exchange.hpp"
#include "algos/list.hpp"
#include "engine/span_ops.hpp"

namespace easel {

namespace {

class HogwildEasgd final : public Algorithm {
 public:
  std::string name() const override { return "hogwild-easgd"; }
  bool uses_centre() const override { return true; }
  bool survives_group_loss() const override { return true; }
  void rejoin(Run& run, Group& g) override { rejoin_from_centre(run, g, true); }
  bool regroupable() const override { return true; }

  void run_round(Run& run, Group& g, int64_t) override {
    const AlgoParams& p = run.params;
    while (claim_step(run, g)) {
      const auto [step, lr] = start_step(run, g);
      if ((step + 1) % p.tau == 0) {
        check_replica(run, g, g.weights);
        clock_exchange(run, g, false);
        ScopedTimer t(&g.times.comm);
        const int64_t v = run.centre_version.fetch_add(1, std::memory_order_relaxed);
        note_staleness(g, g.centre_read_version, v);
        easgd_exchange_racy(run.segments(), g.weights.data(), g.diff.data(), run.centre.data(), lr,
                            p.weight_decay, p.alpha_at(step));
        g.centre_read_version = v + 1;
      } else {
        ScopedTimer t(&g.times.compute);
        local_step(run, g, lr, LocalRule::sgd);
      }
      g.steps.fetch_add(1, std::memory_order_relaxed);
    }
  }

  const float* eval_weights(Run& run) override { return run.centre.data(); }
};

}  // namespace

std::unique_ptr<Algorithm> make_hogwild_easgd() {
  return std::make_unique<HogwildEasgd>();
}

}  // namespace easel
