#include "run/sim_clock.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#include "engine/worker.hpp"

namespace easel {

SimClock::SimClock(const ClockPrices& prices, int groups)
    : prices_(prices),
      t_(static_cast<size_t>(groups), 0.0),
      in_(static_cast<size_t>(groups), 0),
      times_(static_cast<size_t>(groups)) {}

void SimClock::begin_round() {
  std::lock_guard lock(mu_);
  std::fill(in_.begin(), in_.end(), 1);
  holder_ = -1;
}

double SimClock::end_round(int64_t done, int64_t k) {
  std::lock_guard lock(mu_);
  const double start = now_;
  if (prices_.scheduled) {
    for (double t : t_)
      now_ = std::max(now_, t);
  } else {
    // Exchanges after steps s (0-based) with (s + 1) % steps_per_exchange == 0.
    const int64_t e = prices_.steps_per_exchange;
    const double exchanges =
        e > 0 ? static_cast<double>((done + k) / e - done / e) : static_cast<double>(k);
    const double kd = static_cast<double>(k);
    for (GroupTimes& g : times_) {
      g.compute += kd * prices_.step_seconds;
      g.comm += exchanges * prices_.sync_comm_seconds;
      g.wait += exchanges * prices_.sync_wait_seconds;
    }
    now_ += kd * prices_.step_seconds +
            exchanges * (prices_.sync_comm_seconds + prices_.sync_wait_seconds);
  }
  std::fill(t_.begin(), t_.end(), now_);
  centre_free_ = std::min(centre_free_, now_);
  return now_ - start;
}

void SimClock::resume_at(double now, const std::vector<GroupTimes>& times) {
  std::lock_guard lock(mu_);
  now_ = centre_free_ = now;
  std::fill(t_.begin(), t_.end(), now);
  for (size_t i = 0; i < times.size() && i < times_.size(); ++i) {
    times_[i] = times[i];
    times_[i].preempted = 0;
  }
}

GroupTimes SimClock::times(int g) const {
  std::lock_guard lock(mu_);
  return times_[static_cast<size_t>(g)];
}

int SimClock::next_locked() const {
  int best = -1;
  for (size_t i = 0; i < t_.size(); ++i)
    if (in_[i] && (best < 0 || t_[i] < t_[static_cast<size_t>(best)])) best = static_cast<int>(i);
  return best;
}

void SimClock::await_turn(const Group& g) {
  std::unique_lock lock(mu_);
  if (holder_ == g.id) {  // its previous step is over
    holder_ = -1;
    turn_cv_.notify_all();
  }
  while (holder_ != -1 || next_locked() != g.id) {
    // Given up as stalled after its step (the watch took it out of the schedule): it never gets
    // the turn again unless it is restarted.
    if (g.abandoned.load(std::memory_order_acquire))
      throw Abandoned("group " + std::to_string(g.global_id) + " came back after it was given up");
    // A bounded wait: a group that stalled holding the turn stops the others as stalled too.
    if (turn_cv_.wait_for(lock, std::chrono::milliseconds(100)) == std::cv_status::timeout) {
      lock.unlock();
      throw_if_stalled();
      lock.lock();
    }
  }
  holder_ = g.id;
}

void SimClock::step(const Group& g) {
  std::lock_guard lock(mu_);
  const auto i = static_cast<size_t>(g.id);
  t_[i] += prices_.step_seconds;
  times_[i].compute += prices_.step_seconds;
}

void SimClock::exchange(const Group& g, bool locked) {
  std::lock_guard lock(mu_);
  const auto i = static_cast<size_t>(g.id);
  const double start = locked ? std::max(t_[i], centre_free_) : t_[i];
  times_[i].wait += start - t_[i];
  t_[i] = start + prices_.exchange_seconds;
  times_[i].comm += prices_.exchange_seconds;
  if (locked) centre_free_ = t_[i];
}

int SimClock::holder() const {
  std::lock_guard lock(mu_);
  return holder_;
}

void SimClock::enter(const Group& g) {
  std::lock_guard lock(mu_);
  in_[static_cast<size_t>(g.id)] = 1;
  turn_cv_.notify_all();
}

void SimClock::leave(const Group& g) {
  std::lock_guard lock(mu_);
  in_[static_cast<size_t>(g.id)] = 0;
  if (holder_ == g.id) holder_ = -1;
  turn_cv_.notify_all();
}

}  // namespace easel
