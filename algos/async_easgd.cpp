// async-easgd and async-measgd: the EASGD exchange every tau steps, first come first served,
// with the centre update under the centre lock. async-measgd keeps momentum delta on the
// groups (Nesterov as in EAMSGD by default, heavy-ball selectable).
#include "algos/exchange.hpp"
#include "algos/list.hpp"
#include "engine/span_ops.hpp"

namespace easel {

namespace {

class AsyncEasgd final : public Algorithm {
 public:
  explicit AsyncEasgd(bool momentum) : momentum_(momentum) {}
  std::string name() const override { return momentum_ ? "async-measgd" : "async-easgd"; }
  bool uses_centre() const override { return true; }

  void run_round(Run& run, Group& g, int64_t) override {
    const AlgoParams& p = run.params;
    while (claim_step(run)) {
      local_gradient(g);
      const int64_t step = g.steps.load(std::memory_order_relaxed);
      const float lr = static_cast<float>(p.lr.at(step));
      if ((step + 1) % p.tau == 0) {
        const double t0 = now_seconds();
        std::unique_lock lock(run.centre_mu);
        const double t1 = now_seconds();
        g.times.wait += t1 - t0;
        const int64_t v = run.centre_version.fetch_add(1, std::memory_order_relaxed);
        note_staleness(g, g.centre_read_version, v);
        if (momentum_)
          easgd_momentum_exchange(run.segments(), g.weights.data(), g.diff.data(),
                                  g.momentum.data(), run.centre.data(), lr, p.momentum,
                                  p.weight_decay, p.alpha_at(step), p.nesterov);
        else
          easgd_exchange(run.segments(), g.weights.data(), g.diff.data(), run.centre.data(), lr,
                         p.weight_decay, p.alpha_at(step));
        if (run.serve_log) run.serve_log->push_back(g.id);
        g.centre_read_version = v + 1;
        lock.unlock();
        g.times.comm += now_seconds() - t1;
      } else {
        ScopedTimer t(&g.times.compute);
        if (!momentum_)
          sgd_step(run.segments(), g.weights.data(), g.diff.data(), lr, p.weight_decay);
        else if (p.nesterov)
          nesterov_step(run.segments(), g.weights.data(), g.diff.data(), g.momentum.data(), lr,
                        p.momentum, p.weight_decay);
        else
          momentum_step(run.segments(), g.weights.data(), g.diff.data(), g.momentum.data(), lr,
                        p.momentum, p.weight_decay);
      }
      g.steps.fetch_add(1, std::memory_order_relaxed);
    }
  }

  const float* eval_weights(Run& run) override { return run.centre.data(); }

 private:
  bool momentum_;
};

}  // namespace

std::unique_ptr<Algorithm> make_async_easgd() {
  return std::make_unique<AsyncEasgd>(false);
}
std::unique_ptr<Algorithm> make_async_measgd() {
  return std::make_unique<AsyncEasgd>(true);
}

}  // namespace easel
