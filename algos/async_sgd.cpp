// async-sgd and async-msgd: a parameter server in shared memory. A group computes its gradient
// at its copy of the centre, then under the centre lock (first come, first served) the centre
// takes the step W <- W - eta*dW (async-msgd: with momentum on the centre) and the group copies
// the new centre back. State the step updated (batch norm's running statistics) is copied into
// the centre, so the centre's statistics follow the latest groups' batches.
#include <mutex>

#include "algos/exchange.hpp"
#include "algos/list.hpp"
#include "engine/span_ops.hpp"

namespace easel {

namespace {

class AsyncSgd final : public Algorithm {
 public:
  explicit AsyncSgd(bool momentum) : momentum_(momentum) {}
  std::string name() const override { return momentum_ ? "async-msgd" : "async-sgd"; }
  bool uses_centre() const override { return true; }
  bool survives_group_loss() const override { return true; }

  void rejoin(Run& run, Group& g) override {
    std::unique_lock lock(centre_mu_, std::defer_lock);
    lock_or_stall(lock, g, name());
    rejoin_from_centre(run, g, false);
  }

  Status prepare(Run& run) override {
    if (momentum_) {
      EASEL_ASSIGN_OR_RETURN(centre_momentum_,
                             Arena::create(run.arena_floats(), run.centre.kind()));
    }
    return {};
  }

  void run_round(Run& run, Group& g, int64_t) override {
    const AlgoParams& p = run.params;
    while (claim_step(run, g)) {
      const int64_t read_version = g.centre_read_version;
      local_gradient(g);
      const float lr = static_cast<float>(p.lr.at(g.steps.load(std::memory_order_relaxed)));
      check_replica(run, g, g.weights);  // (the centre's copy, unless the step poisoned it)
      check_replica(run, g, g.diff);
      clock_exchange(run, g, true);
      const double t0 = now_seconds();
      std::unique_lock lock(centre_mu_, std::defer_lock);
      lock_or_stall(lock, g, name());
      const double t1 = now_seconds();
      add_time(&g.times.wait, t0, t1);
      if (momentum_)
        momentum_step(run.segments(), run.centre.data(), g.diff.data(), centre_momentum_.data(), lr,
                      p.momentum, p.weight_decay);
      else
        sgd_step(run.segments(), run.centre.data(), g.diff.data(), lr, p.weight_decay);
      // The running statistics the step updated (batch norm) go to the centre as they are.
      copy_state(run.segments(), run.centre.data(), g.weights.data());
      const int64_t v = run.centre_version.fetch_add(1, std::memory_order_relaxed);
      note_staleness(g, read_version, v);
      span_copy(g.weights.data(), run.centre.data(), run.arena_floats());
      g.centre_read_version = v + 1;
      lock.unlock();
      add_time(&g.times.comm, t1, now_seconds());
      g.steps.fetch_add(1, std::memory_order_relaxed);
    }
  }

  const float* eval_weights(Run& run) override { return run.centre.data(); }

  AlgoState save_state(Run& run) override {
    AlgoState s;
    if (momentum_) {
      s.buffer.resize(static_cast<size_t>(run.arena_floats()));
      copy_bytes(s.buffer.data(), MemKind::dram, centre_momentum_.data(), centre_momentum_.kind(),
                 s.buffer.size() * sizeof(float));
    }
    return s;
  }

  Status restore_state(Run&, const AlgoState& s) override {
    if (!momentum_) return expect_no_state(s, name());
    if (s.turn != 0 || s.buffer.size() != static_cast<size_t>(centre_momentum_.size()))
      return invalid_argument("--resume: the checkpoint's centre momentum does not fit " + name());
    copy_bytes(centre_momentum_.data(), centre_momentum_.kind(), s.buffer.data(), MemKind::dram,
               s.buffer.size() * sizeof(float));
    return {};
  }

 private:
  bool momentum_;
  Arena centre_momentum_;       // async-msgd: the centre's momentum, beside run.centre
  std::timed_mutex centre_mu_;  // guards run.centre, centre_momentum_ and the version's order
};

}  // namespace

std::unique_ptr<Algorithm> make_async_sgd() {
  return std::make_unique<AsyncSgd>(false);
}
std::unique_ptr<Algorithm> make_async_msgd() {
  return std::make_unique<AsyncSgd>(true);
}

}  // namespace easel
