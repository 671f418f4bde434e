#include "run/stall_watch.hpp"

#include <cstdio>
#include <string>

#include "engine/worker.hpp"

namespace easel {

StallWatch::StallWatch(TrainRun& t) : t_(t) {
  const double now = now_seconds();
  for (const auto& g : t.run.groups) {
    steps_.push_back(g->steps.load(std::memory_order_relaxed));
    since_.push_back(now);
  }
}

void StallWatch::check() {
  // Where the groups wait for each other, the waits name a stalled group already. (A periodic
  // algorithm's groups wait for each other at its averages: not watched there.)
  if (t_.world || !t_.algo->survives_group_loss() || t_.algo->uses_collectives()) return;
  const double now = now_seconds(), limit = stall_timeout_seconds();
  // On --clock one group runs at a time and the others wait for its turn: it alone is watched.
  const int holder = t_.clock ? t_.clock->holder() : -1;
  Group* idlest = nullptr;  // past the deadline, the longest
  for (size_t i = 0; i < since_.size(); ++i) {
    Group& g = *t_.run.groups[i];
    const int64_t s = g.steps.load(std::memory_order_relaxed);
    // A group not in its round (done, not begun) or given up already is not watched.
    const bool watched = g.in_round.load(std::memory_order_acquire) &&
                         !g.abandoned.load(std::memory_order_acquire) &&
                         (!t_.clock || g.id == holder);
    if (!watched || s != steps_[i]) {
      steps_[i] = s;
      since_[i] = now;
    } else if (now - since_[i] >= limit &&
               (!idlest || since_[i] < since_[static_cast<size_t>(idlest->id)])) {
      idlest = &g;
    }
  }
  // One a pass, the longest idle (the first to stall); the others are looked at again after it.
  if (idlest) give_up(*idlest, now - since_[static_cast<size_t>(idlest->id)]);
}

void StallWatch::give_up(Group& g, double idle) {
  Run& run = t_.run;
  char b[200];
  std::snprintf(b, sizeof b, "stalled: no step done in %.1f s (the stall deadline, %.4g s: %s)",
                idle, stall_timeout_seconds(), t_.resolved.stall_source.c_str());
  if (run.on_failure == OnFailure::stop) {
    declare_stall("group " + std::to_string(g.global_id) + " at step " +
                  std::to_string(g.steps.load(std::memory_order_relaxed)) + ": " + b);
    run.failed.store(true, std::memory_order_relaxed);  // the others end the round
  } else if (record_group_failure(t_, g, b, false) == OnFailure::drop) {
    g.dropped = true;  // read by g's thread after it sees `abandoned`
  }
  // On a clock the others go on (or, under stop, end the round): g gives up the turn it holds,
  // before it can see `abandoned` (a restarted g enters the schedule again once it comes back).
  if (t_.clock) t_.clock->leave(g);
  g.abandoned.store(true, std::memory_order_release);
}

}  // namespace easel
