// Fused kernels of the parameter-server style exchanges (one pass over the arena each) and the
// timing helpers the algorithms share. Symmetric EASGD exchange between a group and the centre,
// both from their values before the exchange:
//   e = alpha*(w - c);  w <- w - lr'*(g + wd'*w) - e;  c <- c + e
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "algos/algorithm.hpp"
#include "engine/trace.hpp"

namespace easel {

// The EASGD exchange fused with the group's SGD step (easgd-rr, async-easgd).
void easgd_exchange(std::span<const Segment> segs, float* w, const float* g, float* c, float lr,
                    float wd, float alpha);
// The same with the group's momentum (async-measgd, EAMSGD):
//   e = alpha*(w - c); v' = d*v - lr'*(g + wd'*w);
//   w <- w + (1+d)*v' - d*v - e  (nesterov)   or   w <- w + v' - e  (heavy-ball);  c <- c + e
void easgd_momentum_exchange(std::span<const Segment> segs, float* w, const float* g, float* v,
                             float* c, float lr, float delta, float wd, float alpha, bool nesterov);
// hogwild-easgd: as easgd_exchange, but c is shared without a lock; every access to c goes
// through relaxed atomic loads and stores (engine/span_ops.hpp's racy_* helpers' rule).
void easgd_exchange_racy(std::span<const Segment> segs, float* w, const float* g, float* c,
                         float lr, float wd, float alpha);

// The centre's side of the EASGD exchange alone, as in the kernels above: for each element
// e = alpha*(w - c); c <- c + e (async-easgd's server for groups on other ranks).
void easgd_centre_pull(float* c, const float* w, float alpha, int64_t n);

// A group's local optimiser step, without an exchange (engine/span_ops.hpp has the rules).
enum class LocalRule { sgd, heavy_ball, nesterov };
// The momentum rule --momentum-form selects (async-measgd, sync-easgd).
inline LocalRule momentum_rule(const AlgoParams& p) {
  return p.nesterov ? LocalRule::nesterov : LocalRule::heavy_ball;
}
// w <- one step of `rule` on g's weights with g.diff (and g.momentum for the momentum rules).
void local_step(Run& run, Group& g, float lr, LocalRule rule);

// Adds [t0, t1] to one of a group's counters (g.times.compute, comm or wait); with a trace,
// the thread's track records it as a span named for that counter's phase in the run's algorithm
// (run/trace_run.cpp).
inline void add_time(double* acc, double t0, double t1) {
  *acc += t1 - t0;
  trace_phase(acc, t0, t1);
}

// Times a scope into one of a group's counters (add_time).
class ScopedTimer {
 public:
  explicit ScopedTimer(double* acc) : acc_(acc), t0_(now_seconds()) {}
  ~ScopedTimer() { add_time(acc_, t0_, now_seconds()); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  double* acc_;
  double t0_;
};

// A Comm collective, timed: the Comm's own barrier-wait growth goes to g.times.wait, the rest
// of the call's duration to g.times.comm. With a trace it is one span of the exchange's phase
// (the Comm's waits are spans within it).
template <typename Fn>
void timed_collective(Run& run, Group& g, Fn fn) {
  const double w0 = run.comm->wait_seconds(g.global_id);
  const double t0 = now_seconds();
  fn();
  const double t1 = now_seconds();
  const double dw = run.comm->wait_seconds(g.global_id) - w0;
  g.times.wait += dw;
  g.times.comm += t1 - t0 - dw;
  trace_phase(&g.times.comm, t0, t1);
}

// Calls fn(offset, count) once for the whole arena (PackMode::single) or once per layer with
// parameters (PackMode::per_layer): over its consecutive segments (Segment::layer), the padding
// between them included (zero in every arena, and zero after every exchange); a segment of no
// layer is a message of its own. The performance model counts the same messages.
template <typename Fn>
void for_each_message(const Run& run, Fn fn) {
  if (run.params.pack == PackMode::single) {
    fn(int64_t{0}, run.arena_floats());
    return;
  }
  const auto& segs = run.segments();
  for (size_t i = 0; i < segs.size();) {
    size_t j = i + 1;
    while (j < segs.size() && segs[i].layer >= 0 && segs[j].layer == segs[i].layer)
      ++j;
    fn(segs[i].offset, segs[j - 1].offset + segs[j - 1].count - segs[i].offset);
    i = j;
  }
}

// Locks a centre lock for group g, giving up as a stall (engine/worker.hpp) after the stall
// timeout, naming g, the lock and its algorithm.
void lock_or_stall(std::unique_lock<std::timed_mutex>& lock, const Group& g,
                   const std::string& algo);

// Async algorithms: claims one group-step of g from the round's shared budget. When the run stops
// early (stop_wanted) the budget is drained to what completes the round's group-steps to a
// multiple of the groups (fewer than P more), so that the run's iterations stay whole. On a
// clock (Run::clock) g first waits for its turn (StepClock::await_turn), holds it through the
// step it claims, and leaves the schedule when the budget is spent.
bool claim_step(Run& run, const Group& g);
// On a clock: g's exchange with the centre after the step claim_step gave it (locked: queued
// at the centre). Nothing without one.
void clock_exchange(Run& run, const Group& g, bool locked);

// Under --on-failure drop or restart (Group::fail_on_nonfinite), before group g's exchange with
// the centre: throws GroupFailed when `a` (g's replica, which the centre is pulled toward, or the
// gradient the centre takes) holds a non-finite value, so that the centre never takes it (a NaN
// behind a ReLU leaves the loss finite). One read pass over the arena; nothing otherwise.
void check_replica(const Run& run, const Group& g, const Arena& a);

// The start of one of group g's steps: its gradient (local_gradient), then the step being taken
// (g's count of steps done) and that step's learning rate (run.params.lr).
struct StepStart {
  int64_t step;
  float lr;
};
StepStart start_step(const Run& run, Group& g);

}  // namespace easel

namespace easel {
// g <- lr'*(g + wd'*w) per segment: the SGD step as a delta (w_new = w - g), for Hogwild.
void scaled_gradient(std::span<const Segment> segs, float* g, const float* w, float lr, float wd);
// Records staleness: centre updates made by others between a group's read and its write.
inline void note_staleness(Group& g, int64_t read_version, int64_t write_version) {
  const int64_t s = write_version - read_version;
  g.staleness_sum += s;
  g.staleness_count += 1;
  if (s > g.staleness_max) g.staleness_max = s;
}
}  // namespace easel
