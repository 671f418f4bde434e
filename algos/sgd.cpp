// sgd and msgd: one group, plain SGD / Caffe momentum SGD (V <- mu V - eta dW; W <- W + V).
#include "algos/algorithm.hpp"
#include "algos/exchange.hpp"
#include "algos/list.hpp"
#include "engine/span_ops.hpp"

namespace easel {

namespace {

class Sgd final : public Algorithm {
 public:
  explicit Sgd(bool momentum) : momentum_(momentum) {}
  std::string name() const override { return momentum_ ? "msgd" : "sgd"; }
  int max_groups() const override { return 1; }
  bool device_resident() const override { return true; }

  void run_round(Run& run, Group& g, int64_t iterations) override {
    const AlgoParams& p = run.params;
    for (int64_t i = 0; i < iterations; ++i) {
      if (stop_here(run, g)) break;  // every group at the same step
      local_gradient(g);
      const double t0 = now_seconds();
      const int64_t it = g.steps.load(std::memory_order_relaxed);
      const float lr = static_cast<float>(p.lr.at(it));
      local_step(run, g, lr, momentum_ ? LocalRule::heavy_ball : LocalRule::sgd);
      add_time(&g.times.compute, t0, now_seconds());
      g.steps.fetch_add(1, std::memory_order_relaxed);
    }
  }

  const float* eval_weights(Run& run) override { return run.groups[0]->weights.data(); }

 private:
  bool momentum_;
};

}  // namespace

std::unique_ptr<Algorithm> make_sgd() {
  return std::make_unique<Sgd>(false);
}
std::unique_ptr<Algorithm> make_msgd() {
  return std::make_unique<Sgd>(true);
}

}  // namespace easel
