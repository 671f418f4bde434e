// A group as a failure domain inside one process (--on-failure): group X made to fail at its step
// Y (EASEL_FAULT's throw and nan, set on the group as the trainer sets them) is dropped and the
// others do the run's steps; restarted, it re-enters from the centre with its momentum zero;
// with stop the run stops as before. Algorithms whose groups meet refuse drop and restart.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/worker.hpp"
#include "run/checkpoint.hpp"
#include "run/trainer.hpp"
#include "tests/algos/small_run.hpp"

namespace easel {
namespace {

using test::small_config;
using test::small_data;

constexpr int kGroups = 3, kVictim = 1;
constexpr int64_t kAt = 10, kIterations = 45;
const char* const kSurvivors[] = {"async-easgd", "async-measgd",  "async-sgd",
                                  "async-msgd",  "hogwild-easgd", "hogwild-sgd"};

TrainConfig failing_config(const std::string& algo, OnFailure mode) {
  TrainConfig c = small_config(algo, kGroups);
  c.iterations = kIterations;
  c.eval_every = 9;
  c.on_failure = mode;
  return c;
}

// Sets the fault on group kVictim at its step kAt, and watches every rejoin (a drop's and a
// restart's): whether the replica was then the centre bit for bit and the momentum zero.
struct Saboteur : TrainObserver {
  explicit Saboteur(Fault::Action a) : action(a) {}
  bool wants_checkpoints() const override { return true; }
  Status on_checkpoint(Checkpoint ck) override {
    last = std::move(ck);
    return {};
  }
  void on_setup(Run& run) override {
    run.groups[kVictim]->fault = Fault{action, false, kVictim, at};
    if (paced) pace(run, at);
    run.on_rejoin = [this](const Run& r, const Group& g) {
      const int64_t n = r.arena_floats();
      std::lock_guard lock(mu);
      rejoined.push_back(g.id);
      // (hogwild's centre moves under the others' lock-free writes meanwhile: not compared)
      at_centre.push_back(!locked_centre ||
                          std::equal(g.weights.data(), g.weights.data() + n, r.centre.data()));
      zero_momentum.push_back(
          std::all_of(g.momentum.data(), g.momentum.data() + n, [](float v) { return v == 0; }));
      steps_at_rejoin.push_back(g.steps.load());
    };
  }
  // The others wait before their first step until the victim has done `steps` steps: a round
  // of a tiny net may otherwise be over before the victim's thread is scheduled at all.
  static void pace(Run& run, int64_t steps) {
    const Group* victim = run.groups[kVictim].get();
    for (auto& g : run.groups)
      if (g->id != kVictim)
        g->before_step = [victim, steps](Group& self) {
          while (self.steps.load() == 0 && victim->steps.load() < steps)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        };
  }
  Fault::Action action;
  bool paced = false;
  int64_t at = kAt;  // the victim's step
  bool locked_centre = true;
  std::optional<Checkpoint> last;
  std::mutex mu;
  std::vector<int> rejoined;
  std::vector<bool> at_centre, zero_momentum;
  std::vector<int64_t> steps_at_rejoin;
};

bool all_finite(const std::vector<float>& w) {
  return std::all_of(w.begin(), w.end(), [](float v) { return std::isfinite(v); });
}

// The steps of each group at the run's last checkpoint (its end).
std::vector<int64_t> group_steps(const Checkpoint& ck) {
  std::vector<int64_t> s;
  for (const GroupCheckpoint& g : ck.groups)
    s.push_back(g.steps);
  return s;
}

TEST(OnFailure, DropLetsTheOthersDoTheRunsSteps) {
  for (const char* algo : kSurvivors) {
    for (Fault::Action action : {Fault::Action::raise, Fault::Action::nan}) {
      SCOPED_TRACE(std::string(algo) + (action == Fault::Action::raise ? " throw" : " nan"));
      Saboteur obs(action);
      obs.locked_centre = std::string(algo).rfind("hogwild", 0) != 0;
      auto r = train(failing_config(algo, OnFailure::drop), small_data(), &obs);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_EQ(r->stopped, StopReason::completed);
      EXPECT_EQ(r->steps, kIterations);
      EXPECT_TRUE(all_finite(r->final_weights));  // the centre never saw the failed step
      ASSERT_EQ(r->group_failures.size(), 1u);
      const GroupFailure& f = r->group_failures[0];
      EXPECT_EQ(f.group, kVictim);
      EXPECT_EQ(f.step, kAt);
      EXPECT_EQ(f.action, "dropped");
      EXPECT_NE(f.why.find(action == Fault::Action::raise ? "threw" : "non-finite"),
                std::string::npos)
          << f.why;
      ASSERT_TRUE(obs.last.has_value());
      const std::vector<int64_t> s = group_steps(*obs.last);
      EXPECT_EQ(s[kVictim], kAt);  // its steps stop there
      // The survivors take the rest of the budget: every group-step but the one lost.
      EXPECT_EQ(s[0] + s[2], kIterations * kGroups - kAt - 1);
      EXPECT_TRUE(all_finite(obs.last->groups[kVictim].weights));  // set to the centre
    }
  }
}

TEST(OnFailure, RestartReentersFromTheCentreWithZeroMomentum) {
  for (const char* algo : kSurvivors) {
    SCOPED_TRACE(algo);
    Saboteur obs(Fault::Action::nan);
    obs.locked_centre = std::string(algo).rfind("hogwild", 0) != 0;
    auto r = train(failing_config(algo, OnFailure::restart), small_data(), &obs);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->stopped, StopReason::completed);
    EXPECT_TRUE(all_finite(r->final_weights));
    ASSERT_EQ(r->group_failures.size(), 1u);
    EXPECT_EQ(r->group_failures[0].action, "restarted");
    EXPECT_EQ(r->group_failures[0].step, kAt);
    ASSERT_EQ(obs.rejoined, std::vector<int>{kVictim});
    EXPECT_TRUE(obs.at_centre[0]);
    EXPECT_TRUE(obs.zero_momentum[0]);
    EXPECT_EQ(obs.steps_at_rejoin[0], kAt);
    ASSERT_TRUE(obs.last.has_value());
    const std::vector<int64_t> s = group_steps(*obs.last);
    EXPECT_GT(s[kVictim], kAt);  // it went on
    EXPECT_EQ(s[0] + s[1] + s[2], kIterations * kGroups - 1);
  }
}

// A non-zero momentum before the failure (async-measgd keeps its momentum on the groups): the
// restart zeroes it.
TEST(OnFailure, RestartZeroesAMomentumThatWasThere) {
  bool had_momentum = false;
  struct Watch : Saboteur {
    using Saboteur::Saboteur;
    void on_setup(easel::Run& run) override {
      Saboteur::on_setup(run);
      run.groups[kVictim]->before_step = [this](Group& g) {
        if (g.steps.load() == kAt - 1)
          *had = std::any_of(g.momentum.data(), g.momentum.data() + g.momentum.size(),
                             [](float v) { return v != 0; });
      };
    }
    bool* had = nullptr;
  } watch(Fault::Action::raise);
  watch.had = &had_momentum;
  auto r = train(failing_config("async-measgd", OnFailure::restart), small_data(), &watch);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(had_momentum);
  ASSERT_EQ(watch.zero_momentum.size(), 1u);
  EXPECT_TRUE(watch.zero_momentum[0]);
  EXPECT_TRUE(watch.at_centre[0]);
}

TEST(OnFailure, StopEndsTheRunAsBefore) {
  Saboteur thrown(Fault::Action::raise);
  auto r = train(failing_config("async-easgd", OnFailure::stop), small_data(), &thrown);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("a group failed (--on-failure stop ends the run"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("group 1 at step 10: EASEL_FAULT: group 1 at step 10: threw"),
            std::string::npos)
      << r.status().message();
  Saboteur poisoned(Fault::Action::nan);  // a non-finite loss: diverged, as without the flag
  auto d = train(failing_config("async-easgd", OnFailure::stop), small_data(), &poisoned);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->stopped, StopReason::diverged);
  EXPECT_TRUE(d->group_failures.empty());
  EXPECT_TRUE(poisoned.rejoined.empty());
}

TEST(OnFailure, NoGroupLeftStopsTheRun) {
  TrainConfig c = failing_config("async-easgd", OnFailure::drop);
  c.lr = 1e30;  // every group's loss overflows
  auto r = train(c, small_data(), nullptr);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->stopped, StopReason::diverged);
  EXPECT_NE(r->stop_message.find("every group failed, none is left"), std::string::npos)
      << r->stop_message;
  EXPECT_EQ(r->group_failures.size(), static_cast<size_t>(kGroups));
}

// A checkpoint taken after a group failed resumes (it once refused: "the checkpoint's step
// counts do not add up"): the step the group lost is in it, and a dropped group stays out. The
// victim's 10 steps come before the others' first (paced), so it fails in the first round or,
// starved after its 10th step while the others drained a round, in a later one: the first
// checkpoint after its failure, with the run's end still ahead.
TEST(OnFailure, ACheckpointAfterAFailureResumes) {
  struct Keeper : Saboteur {
    using Saboteur::Saboteur;
    Status on_checkpoint(Checkpoint ck) override {
      if (!first && !ck.failures.empty()) first = ck;
      return Saboteur::on_checkpoint(std::move(ck));
    }
    void on_setup(easel::Run& run) override {
      if (armed) Saboteur::on_setup(run);
    }
    bool armed = true;
    std::optional<Checkpoint> first;
  };
  for (const char* algo : {"async-easgd", "async-msgd", "hogwild-sgd"})
    for (OnFailure mode : {OnFailure::drop, OnFailure::restart}) {
      SCOPED_TRACE(std::string(algo) + (mode == OnFailure::drop ? " drop" : " restart"));
      const TrainConfig c = failing_config(algo, mode);
      Keeper whole(Fault::Action::raise);
      whole.paced = true;
      auto w = train(c, small_data(), &whole);
      ASSERT_TRUE(w.ok()) << w.status().to_string();
      ASSERT_EQ(w->group_failures.size(), 1u);
      ASSERT_TRUE(whole.first.has_value());
      const Checkpoint& ck = *whole.first;
      ASSERT_LT(ck.iterations_done, kIterations);
      EXPECT_EQ(ck.lost_steps, 1);
      EXPECT_EQ(ck.groups[kVictim].dropped, mode == OnFailure::drop);
      const Checkpoint back = decode_checkpoint(encode_checkpoint(ck), "mem").value();
      EXPECT_EQ(back.lost_steps, 1);
      EXPECT_EQ(back.groups[kVictim].dropped, mode == OnFailure::drop);
      Keeper resumed(Fault::Action::raise);
      resumed.armed = false;
      auto r = train(c, small_data(), &resumed, {}, &back);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_EQ(r->stopped, StopReason::completed) << r->stop_message;
      EXPECT_EQ(r->steps, kIterations);
      // The failure before the checkpoint is the run's still (summary.json's group_failures).
      ASSERT_EQ(r->group_failures.size(), 1u);
      EXPECT_EQ(r->group_failures[0].group, kVictim);
      EXPECT_EQ(r->group_failures[0].step, kAt);
      EXPECT_EQ(back.failures.size(), 1u);
      ASSERT_TRUE(resumed.last.has_value());
      const std::vector<int64_t> s = group_steps(*resumed.last);
      if (mode == OnFailure::drop) {
        EXPECT_EQ(s[kVictim], kAt);  // it stays out
      }
      EXPECT_EQ(s[0] + s[1] + s[2] + resumed.last->lost_steps, kIterations * kGroups);
      // Under stop the dropped group could not be left out: refused, saying so.
      if (mode == OnFailure::drop) {
        TrainConfig stop = c;
        stop.on_failure = OnFailure::stop;
        auto refused = train(stop, small_data(), nullptr, {}, &back);
        ASSERT_FALSE(refused.ok());
        EXPECT_NE(refused.status().message().find("had dropped a failed group"), std::string::npos)
            << refused.status().message();
      }
    }
}

TEST(OnFailure, AutoDropsForTheAsyncCentreAndDropOnAClockDoesNotHang) {
  TrainConfig c = failing_config("async-easgd", OnFailure::automatic);
  c.clock = "gpu8-pcie";
  Saboteur obs(Fault::Action::raise);
  auto r = train(c, small_data(), &obs);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->stopped, StopReason::completed);
  ASSERT_EQ(r->group_failures.size(), 1u);
  EXPECT_EQ(r->group_failures[0].action, "dropped");
  ASSERT_TRUE(obs.last.has_value());
  EXPECT_EQ(group_steps(*obs.last)[kVictim], kAt);
}

// EASEL_FAULT's stall (the group's thread blocks until it is given up) with a short deadline.
TrainConfig stalling_config(const std::string& algo, OnFailure mode) {
  TrainConfig c = failing_config(algo, mode);
  c.stall_timeout = 0.5;
  return c;
}

TEST(OnFailure, DropGoesOnWithoutAStalledGroup) {
  for (const char* algo : kSurvivors) {
    SCOPED_TRACE(algo);
    Saboteur obs(Fault::Action::stall);
    obs.paced = true;
    const double t0 = now_seconds();
    auto r = train(stalling_config(algo, OnFailure::drop), small_data(), &obs);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_LT(now_seconds() - t0, 20.0);
    EXPECT_EQ(r->stopped, StopReason::completed);
    EXPECT_EQ(r->steps, kIterations);
    EXPECT_EQ(r->info.stall_seconds, 0.5);
    EXPECT_EQ(r->info.stall_source, "--stall-timeout");
    ASSERT_EQ(r->group_failures.size(), 1u);
    const GroupFailure& f = r->group_failures[0];
    EXPECT_EQ(f.group, kVictim);
    EXPECT_EQ(f.step, kAt);
    EXPECT_EQ(f.action, "dropped");
    EXPECT_EQ(f.why.rfind("stalled: no step done in ", 0), 0u) << f.why;
    ASSERT_TRUE(obs.last.has_value());
    const std::vector<int64_t> s = group_steps(*obs.last);
    EXPECT_EQ(s[kVictim], kAt);
    EXPECT_EQ(s[0] + s[2], kIterations * kGroups - kAt - 1);
    EXPECT_TRUE(obs.rejoined.empty());  // nothing of it touched the centre
  }
}

// A stalled group that wakes by itself after it was given up (it never looks at the flag while
// it sleeps), within the second deadline the round waits for it: it writes nothing into the centre
// (async-easgd's serve log: its exchanges stop at its stall) and it is dropped as the deadline
// said.
TEST(OnFailure, AStalledGroupThatWakesLaterNeverWritesTheCentre) {
  std::vector<int> served;
  struct Sleepy : Saboteur {
    using Saboteur::Saboteur;
    void on_setup(easel::Run& run) override {
      run.serve_log = served;
      pace(run, kAt);
      run.groups[kVictim]->before_step = [](Group& g) {
        if (g.steps.load() == kAt) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      };
    }
    std::vector<int>* served = nullptr;
  } obs(Fault::Action::kill);
  obs.served = &served;
  TrainConfig c = stalling_config("async-easgd", OnFailure::drop);
  c.tau = 1;
  c.stall_timeout = 1;  // given up after 1 s, back at 1.5 s, before the round would leave it (2 s)
  auto r = train(c, small_data(), &obs);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->stopped, StopReason::completed);
  ASSERT_EQ(r->group_failures.size(), 1u);
  EXPECT_EQ(r->group_failures[0].action, "dropped");
  EXPECT_EQ(std::count(served.begin(), served.end(), kVictim), kAt);  // tau 1: one a step
  ASSERT_TRUE(obs.last.has_value());
  EXPECT_EQ(group_steps(*obs.last)[kVictim], kAt);
}

TEST(OnFailure, RestartBringsAStalledGroupBackFromTheCentre) {
  for (const char* algo : {"async-easgd", "async-measgd", "hogwild-sgd"}) {
    SCOPED_TRACE(algo);
    Saboteur obs(Fault::Action::stall);
    obs.paced = true;
    obs.at = 1;  // in the first round: the others drain that round's budget while it stalls
    obs.locked_centre = std::string(algo).rfind("hogwild", 0) != 0;
    auto r = train(stalling_config(algo, OnFailure::restart), small_data(), &obs);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->stopped, StopReason::completed);
    ASSERT_EQ(r->group_failures.size(), 1u);
    EXPECT_EQ(r->group_failures[0].action, "restarted");
    EXPECT_EQ(r->group_failures[0].why.rfind("stalled: ", 0), 0u);
    ASSERT_EQ(obs.rejoined, std::vector<int>{kVictim});
    EXPECT_TRUE(obs.at_centre[0]);
    EXPECT_TRUE(obs.zero_momentum[0]);
    EXPECT_EQ(obs.steps_at_rejoin[0], 1);
    ASSERT_TRUE(obs.last.has_value());
    const std::vector<int64_t> s = group_steps(*obs.last);
    // Every group-step but the stalled one is done. (Its steps after the re-entry are the
    // scheduler's: on a loaded machine the others may take every later round's budget first.)
    EXPECT_GE(s[kVictim], 1);
    EXPECT_EQ(s[0] + s[1] + s[2], kIterations * kGroups - 1);
  }
}

TEST(OnFailure, StopEndsTheRunAsStalled) {
  Saboteur obs(Fault::Action::stall);
  obs.paced = true;
  auto r = train(stalling_config("async-sgd", OnFailure::stop), small_data(), &obs);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->stopped, StopReason::stalled);
  EXPECT_NE(r->stop_message.find("group 1 at step 10: stalled: no step done in"), std::string::npos)
      << r->stop_message;
  EXPECT_TRUE(r->group_failures.empty());
}

// On --clock one group runs at a time, the others waiting for its turn: the watch looks at the
// one holding the turn, gives it up and takes it out of the schedule, so that the others go on
// (drop: the run's steps without it; restart: it re-enters the schedule) or end the round
// (stop: stalled). The stall takes no simulated time.
TEST(OnFailure, AStalledGroupOnAClockIsGivenUp) {
  for (OnFailure mode : {OnFailure::drop, OnFailure::restart, OnFailure::stop}) {
    SCOPED_TRACE(static_cast<int>(mode));
    TrainConfig c = stalling_config("async-easgd", mode);
    c.clock = "gpu8-pcie";
    Saboteur obs(Fault::Action::stall);
    const double t0 = now_seconds();
    auto r = train(c, small_data(), &obs);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_LT(now_seconds() - t0, 20.0);
    if (mode == OnFailure::stop) {
      EXPECT_EQ(r->stopped, StopReason::stalled);
      EXPECT_NE(r->stop_message.find("group 1 at step 10: stalled: no step done in"),
                std::string::npos)
          << r->stop_message;
      continue;
    }
    EXPECT_EQ(r->stopped, StopReason::completed) << r->stop_message;
    EXPECT_EQ(r->steps, kIterations);
    ASSERT_EQ(r->group_failures.size(), 1u);
    EXPECT_EQ(r->group_failures[0].step, kAt);
    EXPECT_EQ(r->group_failures[0].action, mode == OnFailure::drop ? "dropped" : "restarted");
    EXPECT_EQ(r->group_failures[0].why.rfind("stalled: ", 0), 0u);
    ASSERT_TRUE(obs.last.has_value());
    const std::vector<int64_t> s = group_steps(*obs.last);
    if (mode == OnFailure::drop) {
      EXPECT_EQ(s[kVictim], kAt);
    } else {
      EXPECT_GT(s[kVictim], kAt);  // back in the schedule
    }
  }
}

// The deadline: --stall-timeout's; else 10x the model's step and exchange on this machine's
// calibration (EASEL_MACHINE), at least 30 s; else 300 s, saying why.
TEST(OnFailure, TheStallDeadlineComesFromTheModel) {
  const char* root = std::getenv("EASEL_SOURCE_ROOT");
  const std::string machine = std::string(root ? root : ".") + "/tools/machines/knl-7250.toml";
  setenv("EASEL_MACHINE", machine.c_str(), 1);
  auto m = train(failing_config("async-easgd", OnFailure::drop), small_data(), nullptr);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->info.stall_source, "model") << m->info.stall_why;
  EXPECT_GE(m->info.stall_seconds, 30.0);
  EXPECT_NE(m->info.stall_why.find("10 x the model's step and exchange"), std::string::npos)
      << m->info.stall_why;
  EXPECT_EQ(stall_timeout_seconds(), m->info.stall_seconds);  // every bounded wait's too
  TrainConfig c = failing_config("async-easgd", OnFailure::drop);
  c.stall_timeout = 7;
  auto o = train(c, small_data(), nullptr);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->info.stall_source, "--stall-timeout");
  EXPECT_EQ(o->info.stall_seconds, 7.0);
  setenv("EASEL_MACHINE", "/nonexistent/machine.toml", 1);
  auto d = train(failing_config("async-easgd", OnFailure::drop), small_data(), nullptr);
  unsetenv("EASEL_MACHINE");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->info.stall_source, "default");
  EXPECT_EQ(d->info.stall_seconds, 300.0);
  EXPECT_NE(d->info.stall_why.find("no calibration of this machine"), std::string::npos)
      << d->info.stall_why;
}

TEST(OnFailure, AlgorithmsWhoseGroupsMeetRefuseDropAndRestart) {
  for (const char* algo : {"sync-easgd", "sync-sgd", "easgd-rr"}) {
    for (OnFailure mode : {OnFailure::drop, OnFailure::restart}) {
      auto r = train(failing_config(algo, mode), small_data(), nullptr);
      ASSERT_FALSE(r.ok()) << algo;
      EXPECT_EQ(r.status().code(), Code::invalid_argument);
      EXPECT_EQ(r.status().message().rfind("--on-failure ", 0), 0u) << r.status().message();
      EXPECT_NE(r.status().message().find(std::string(algo) + "'s groups meet"), std::string::npos)
          << r.status().message();
    }
    // auto is stop for them: a non-finite loss stops the run as diverged.
    auto ok = train(failing_config(algo, OnFailure::automatic), small_data(), nullptr);
    ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  }
}

}  // namespace
}  // namespace easel
