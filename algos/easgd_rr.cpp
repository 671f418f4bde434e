// easgd-rr: the original EASGD. Every tau steps a group exchanges with the master, and the
// master serves ONE group at a time in strict round-robin order of group id:
//   group:  W^i <- W^i - eta*dW^i - alpha*(W^i - Wc);   master: Wc <- Wc + alpha*(W^i - Wc)
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "algos/exchange.hpp"
#include "algos/list.hpp"
#include "engine/span_ops.hpp"

namespace easel {

namespace {

class EasgdRoundRobin final : public Algorithm {
 public:
  std::string name() const override { return "easgd-rr"; }
  bool uses_centre() const override { return true; }
  bool regroupable() const override { return true; }

  void run_round(Run& run, Group& g, int64_t iterations) override {
    const AlgoParams& p = run.params;
    for (int64_t i = 0; i < iterations; ++i) {
      if (stop_here(run, g)) break;  // every group at the same step
      const auto [step, lr] = start_step(run, g);
      if ((step + 1) % p.tau == 0) {
        std::unique_lock lock(turn_mu_);
        {
          ScopedTimer t(&g.times.wait);
          wait_turn(lock, g);
        }
        {
          ScopedTimer t(&g.times.comm);
          easgd_exchange(run.segments(), g.weights.data(), g.diff.data(), run.centre.data(), lr,
                         p.weight_decay, p.alpha_at(step));
          if (run.serve_log) run.serve_log->push_back(g.id);
          run.centre_version.fetch_add(1, std::memory_order_relaxed);
        }
        turn_.store((g.id + 1) % run.size());
        lock.unlock();
        turn_cv_.notify_all();
      } else {
        ScopedTimer t(&g.times.compute);
        local_step(run, g, lr, LocalRule::sgd);
      }
      g.steps.fetch_add(1, std::memory_order_relaxed);
    }
  }

  const float* eval_weights(Run& run) override { return run.centre.data(); }

  AlgoState save_state(Run&) override { return {.turn = turn_.load(), .buffer = {}}; }

  Status restore_state(Run& run, const AlgoState& s) override {
    if (s.turn < 0 || s.turn >= run.size() || !s.buffer.empty())
      return invalid_argument("--resume: the checkpoint's step counts or turn do not add up");
    turn_.store(s.turn);
    return {};
  }

 private:
  // Waits (holding turn_mu_ through `lock`) for g's turn; a stall after the stall timeout.
  void wait_turn(std::unique_lock<std::mutex>& lock, const Group& g) {
    const double limit = stall_timeout_seconds();
    const double t0 = now_seconds();
    while (turn_.load() != g.id) {
      throw_if_stalled();
      const double waited = now_seconds() - t0;
      if (waited >= limit)
        stalled("group " + std::to_string(g.id) + " waited " + std::to_string(waited) +
                " s for its turn at the centre (easgd-rr: it is group " +
                std::to_string(turn_.load()) + "'s turn; EASEL_STALL_TIMEOUT)");
      turn_cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
  }

  std::atomic<int> turn_{0};  // whose turn it is (a group id); guarded by turn_mu_ for waiters
  std::mutex turn_mu_;
  std::condition_variable turn_cv_;
};

}  // namespace

std::unique_ptr<Algorithm> make_easgd_rr() {
  return std::make_unique<EasgdRoundRobin>();
}

}  // namespace easel
