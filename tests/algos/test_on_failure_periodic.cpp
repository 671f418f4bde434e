// --on-failure for local-sgd, slowmo and diloco in one process: group 1 of 3 made to fail at its
// step 10 (between the meetings at 8 and 12, --tau 4) leaves the run before the meeting at 12;
// the average there is the survivors' mean (checked against one computed here from their
// replicas); restarted, it re-enters at that meeting from the average with its momentum zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>

#include "run/checkpoint.hpp"
#include "run/trainer.hpp"
#include "tests/algos/small_run.hpp"

namespace easel {
namespace {

constexpr int kGroups = 3, kVictim = 1, kTau = 4;
constexpr int64_t kAt = 10, kMeeting = 12, kIterations = 45;
const char* const kPeriodic[] = {"local-sgd", "slowmo", "diloco"};

TrainConfig failing_config(const std::string& algo, OnFailure mode) {
  TrainConfig c = test::small_config(algo, kGroups);
  c.iterations = kIterations;
  c.eval_every = 9;  // rounds that end between meetings, and one (at 36) at one
  c.tau = kTau;
  c.on_failure = mode;
  return c;
}

std::vector<float> copy_of(const Arena& a) {
  return std::vector<float>(a.data(), a.data() + a.size());
}

bool all_finite(const std::vector<float>& w) {
  return std::all_of(w.begin(), w.end(), [](float v) { return std::isfinite(v); });
}

// Sets the fault on group kVictim at its step kAt; keeps the last checkpoint and what each
// re-entry saw.
struct Saboteur : TrainObserver {
  explicit Saboteur(Fault::Action a) : action(a) {}
  bool wants_checkpoints() const override { return true; }
  Status on_checkpoint(Checkpoint ck) override {
    last = std::move(ck);
    return {};
  }
  void on_setup(Run& run) override {
    run.groups[kVictim]->fault = Fault{action, false, kVictim, kAt};
    run.on_rejoin = [this](const Run& r, const Group& g) {
      std::lock_guard lock(mu);
      rejoined.push_back(g.id);
      rejoin_weights = copy_of(g.weights);
      const float* m = g.momentum.data();
      zero_momentum = std::all_of(m, m + r.arena_floats(), [](float v) { return v == 0; });
      steps_at_rejoin = g.steps.load();
    };
  }
  std::vector<int64_t> group_steps() const {
    std::vector<int64_t> s;
    for (const GroupCheckpoint& g : last->groups)
      s.push_back(g.steps);
    return s;
  }
  Fault::Action action;
  std::optional<Checkpoint> last;
  std::mutex mu;
  std::vector<int> rejoined;
  std::vector<float> rejoin_weights;
  bool zero_momentum = false;
  int64_t steps_at_rejoin = -1;
};

// Each algorithm, throw and nan, drop (and auto, its default) and restart: the run completes
// with its 45 iterations; the survivors do every step; a dropped group's steps stop at its
// failure, a restarted one loses the steps to the next meeting. A throw fails step 10 (steps 10
// and 11 lost); the NaN put in the MLP's first weight at step 10 leaves its loss finite (behind
// the ReLU) and is found in the replica before the meeting: step 11 fails (11 lost).
TEST(OnFailurePeriodic, DropAndRestartComplete) {
  for (const char* algo : kPeriodic)
    for (Fault::Action action : {Fault::Action::raise, Fault::Action::nan})
      for (OnFailure mode : {OnFailure::automatic, OnFailure::drop, OnFailure::restart}) {
        SCOPED_TRACE(std::string(algo) + (action == Fault::Action::raise ? " throw " : " nan ") +
                     std::to_string(static_cast<int>(mode)));
        Saboteur obs(action);
        auto r = train(failing_config(algo, mode), test::small_data(), &obs);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        EXPECT_EQ(r->stopped, StopReason::completed) << r->stop_message;
        EXPECT_EQ(r->steps, kIterations);
        EXPECT_TRUE(all_finite(r->final_weights));  // no average took the failed replica
        ASSERT_EQ(r->group_failures.size(), 1u);
        const GroupFailure& f = r->group_failures[0];
        EXPECT_EQ(f.group, kVictim);
        const int64_t at = action == Fault::Action::raise ? kAt : kMeeting - 1;
        EXPECT_EQ(f.step, at);
        const bool restart = mode == OnFailure::restart;
        EXPECT_EQ(f.action, restart ? "restarted" : "dropped");
        ASSERT_TRUE(obs.last.has_value());
        const std::vector<int64_t> s = obs.group_steps();
        EXPECT_EQ(s[0], kIterations);
        EXPECT_EQ(s[2], kIterations);
        EXPECT_EQ(s[kVictim], restart ? kIterations - (kMeeting - at) : at);
        EXPECT_EQ(obs.rejoined.size(), restart ? 1u : 0u);
        EXPECT_TRUE(all_finite(obs.last->groups[kVictim].weights));
      }
}

// local-sgd without momentum or decay, group 1 dropped at its step 10: the anchor after the
// meeting at 12 is x - ((x - w0) + (x - w2)) / 2, x the anchor of the meeting at 8 and w0, w2
// the survivors' replicas at 12, to the bit; not the sum over the old count of three. Step 11's
// gradient is made zero (its update then leaves the replica as it was at the step's start, where
// it is read).
TEST(OnFailurePeriodic, TheAverageAfterADropIsTheSurvivorsMean) {
  TrainConfig c = failing_config("local-sgd", OnFailure::drop);
  c.momentum = 0;
  c.weight_decay = 0;
  struct Watch : Saboteur {
    using Saboteur::Saboteur;
    void on_setup(easel::Run& run) override {
      Saboteur::on_setup(run);
      for (int id : {0, 2})
        run.groups[static_cast<size_t>(id)]->before_step = [this, id](Group& g) {
          const int64_t s = g.steps.load();
          std::lock_guard lock(mu);
          if (s == kMeeting - kTau) anchor[id] = copy_of(g.weights);
          if (s == kMeeting - 1) {
            replica[id] = copy_of(g.weights);
            g.fake_gradient = [](Group& h) {
              std::fill(h.diff.data(), h.diff.data() + h.diff.size(), 0.f);
            };
          }
          if (s == kMeeting) {
            after[id] = copy_of(g.weights);
            g.fake_gradient = nullptr;
          }
        };
    }
    std::vector<float> anchor[3], replica[3], after[3];
  } w(Fault::Action::raise);
  auto r = train(c, test::small_data(), &w);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->group_failures.size(), 1u);
  const std::vector<float>& x = w.anchor[0];
  ASSERT_FALSE(x.empty());
  ASSERT_EQ(w.anchor[2], x);
  ASSERT_EQ(w.after[0], w.after[2]);
  size_t moved = 0, off_old_count = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    const float mean = x[j] - ((x[j] - w.replica[0][j]) + (x[j] - w.replica[2][j])) * 0.5f;
    ASSERT_EQ(w.after[0][j], mean) << "element " << j;
    EXPECT_NEAR(w.after[0][j], (w.replica[0][j] + w.replica[2][j]) / 2, 1e-5f);
    const float old = x[j] - ((x[j] - w.replica[0][j]) + (x[j] - w.replica[2][j])) / 3.f;
    moved += w.replica[0][j] != x[j];
    off_old_count += old != mean;
  }
  EXPECT_GT(moved, x.size() / 2);          // the survivors trained since the meeting at 8
  EXPECT_GT(off_old_count, x.size() / 2);  // and dividing by three would differ
}

// Restarted at its failure, group 1 re-enters at the meeting at 12: its replica then is the
// average the survivors start step 12 from, bit for bit, its momentum (non-zero before) zero.
TEST(OnFailurePeriodic, RestartReentersFromTheAverageWithZeroMomentum) {
  for (const char* algo : kPeriodic) {
    SCOPED_TRACE(algo);
    struct Watch : Saboteur {
      using Saboteur::Saboteur;
      void on_setup(easel::Run& run) override {
        Saboteur::on_setup(run);
        run.groups[0]->before_step = [this](Group& g) {
          if (g.steps.load() == kMeeting) survivor_at_meeting = copy_of(g.weights);
        };
        run.groups[kVictim]->before_step = [this](Group& g) {
          if (g.steps.load() == kAt - 1)
            had_momentum = std::any_of(g.momentum.data(), g.momentum.data() + g.momentum.size(),
                                       [](float v) { return v != 0; });
        };
      }
      std::vector<float> survivor_at_meeting;
      bool had_momentum = false;
    } w(Fault::Action::raise);
    auto r = train(failing_config(algo, OnFailure::restart), test::small_data(), &w);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(w.rejoined, std::vector<int>{kVictim});
    EXPECT_TRUE(w.had_momentum);
    EXPECT_TRUE(w.zero_momentum);
    EXPECT_EQ(w.steps_at_rejoin, kAt);
    ASSERT_FALSE(w.survivor_at_meeting.empty());
    EXPECT_TRUE(w.rejoin_weights == w.survivor_at_meeting);
  }
}

// A checkpoint taken after a failure resumes as the run went on: group 1 fails at step 10, the
// checkpoint at 11 (--eval-every 11) holds it absent (restart: until the meeting at 12; drop:
// for good) with its step 10 lost; resumed from it, every later evaluation and the final weights
// are the uninterrupted run's, bit for bit (and a dropped group stays out).
TEST(OnFailurePeriodic, ACheckpointAfterAFailureResumesAsTheRunWentOn) {
  struct Recorder : Saboteur {
    using Saboteur::Saboteur;
    Status on_checkpoint(Checkpoint ck) override {
      if (ck.iterations_done == kAt + 1) at_11 = ck;
      return {};
    }
    void on_eval(const EvalRecord& r) override { records.push_back(r); }
    void on_setup(easel::Run& run) override {
      if (armed) Saboteur::on_setup(run);
    }
    bool armed = true;
    std::optional<Checkpoint> at_11;
    std::vector<EvalRecord> records;
  };
  for (const char* algo : kPeriodic)
    for (OnFailure mode : {OnFailure::drop, OnFailure::restart}) {
      SCOPED_TRACE(std::string(algo) + (mode == OnFailure::drop ? " drop" : " restart"));
      TrainConfig c = failing_config(algo, mode);
      c.eval_every = kAt + 1;
      Recorder whole(Fault::Action::raise);
      auto w = train(c, test::small_data(), &whole);
      ASSERT_TRUE(w.ok()) << w.status().to_string();
      ASSERT_EQ(w->group_failures.size(), 1u);
      ASSERT_TRUE(whole.at_11.has_value());
      EXPECT_EQ(whole.at_11->lost_steps, 1);
      EXPECT_EQ(whole.at_11->groups[kVictim].dropped, mode == OnFailure::drop);
      const Checkpoint ck = decode_checkpoint(encode_checkpoint(*whole.at_11), "mem").value();
      Recorder resumed(Fault::Action::raise);
      resumed.armed = false;
      auto r = train(c, test::small_data(), &resumed, {}, &ck);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_EQ(r->stopped, StopReason::completed) << r->stop_message;
      EXPECT_EQ(r->steps, kIterations);
      EXPECT_EQ(r->group_failures.size(), 1u);  // the failure before the checkpoint
      ASSERT_EQ(resumed.records.size(), whole.records.size() - 1);
      for (size_t i = 0; i < resumed.records.size(); ++i) {
        const EvalRecord& a = resumed.records[i];
        const EvalRecord& b = whole.records[i + 1];
        EXPECT_EQ(a.step, b.step);
        EXPECT_EQ(a.train_loss, b.train_loss) << "at step " << a.step;
        EXPECT_EQ(a.test_loss, b.test_loss) << "at step " << a.step;
      }
      EXPECT_TRUE(r->final_weights == w->final_weights);
      // A presence or restart that does not fit (a damaged or hand-made file): refused.
      for (const auto& [word, value] : {std::pair{2 * kVictim, 7}, {2 * kVictim + 1, 99}}) {
        Checkpoint bad = ck;
        ASSERT_EQ(bad.algo.words.size(), 2u * kGroups);
        bad.algo.words[word] = value;
        auto refused = train(c, test::small_data(), nullptr, {}, &bad);
        ASSERT_FALSE(refused.ok());
        EXPECT_NE(refused.status().message().find("state of group 1 does not add up"),
                  std::string::npos)
            << refused.status().message();
      }
    }
}

// Under stop a throw ends the run as for the async algorithms (the others do not wait for the
// group at the meeting); across ranks drop is refused (tests/mpi).
TEST(OnFailurePeriodic, StopEndsTheRunWithoutWaiting) {
  Saboteur obs(Fault::Action::raise);
  auto r = train(failing_config("diloco", OnFailure::stop), test::small_data(), &obs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("group 1 at step 10: EASEL_FAULT: group 1 at step 10: threw"),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace easel
