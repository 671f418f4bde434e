// Checkpoints: a run resumed from one equals the run that never stopped, bit for bit, for every
// deterministic algorithm (including sync-easgd's double-buffered mirrored and partitioned
// exchanges, stopped at an odd exchange count, and its overlapped variant); the asynchronous ones
// go on from their centre and counters; a checkpoint of another run, or a damaged file, gives
// one clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "run/checkpoint.hpp"
#include "run/trainer.hpp"
#include "tests/algos/small_run.hpp"

namespace easel {
namespace {

using test::small_data;

// The shared small problem, in rounds of 9 iterations (sync-easgd's rounds end at odd exchange
// counts) and with a schedule whose rate moves every step.
TrainConfig config(const std::string& algo, int groups) {
  TrainConfig c = test::small_config(algo, groups);
  c.iterations = 45;
  c.eval_every = 9;
  c.lr_policy = LrSchedule::Policy::inv;
  return c;
}

// Keeps the checkpoint taken after `at` iterations.
class Keeper : public TrainObserver {
 public:
  explicit Keeper(int64_t at) : at_(at) {}
  bool wants_checkpoints() const override { return true; }
  Status on_checkpoint(Checkpoint ck) override {
    ++seen;
    if (ck.iterations_done == at_) kept = ck;
    return {};
  }
  std::optional<Checkpoint> kept;
  int seen = 0;

 private:
  int64_t at_;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class ResumeEqualsUninterrupted
    : public ::testing::TestWithParam<std::tuple<std::string, int, int, std::string>> {};

TEST_P(ResumeEqualsUninterrupted, SameBits) {
  const auto& [algo, groups, tau, overlap] = GetParam();
  TrainConfig c = config(algo, groups);
  c.tau = tau;
  ASSERT_TRUE(set_setting(c, "overlap", overlap).ok());
  Keeper keep(27);
  auto whole = train(c, small_data(), &keep);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  EXPECT_EQ(keep.seen, 5);
  ASSERT_TRUE(keep.kept.has_value());
  // Through the file format too.
  const Checkpoint ck = decode_checkpoint(encode_checkpoint(*keep.kept), "mem").value();
  c.seed = 7;  // ignored: the weights, the centre and the data positions come from ck
  auto resumed = train(c, small_data(), nullptr, {}, &ck);
  ASSERT_TRUE(resumed.ok()) << resumed.status().to_string();
  EXPECT_EQ(resumed->steps, 45);
  EXPECT_EQ(resumed->images, whole->images);
  EXPECT_TRUE(same_bits(resumed->final_weights, whole->final_weights)) << algo;
  EXPECT_TRUE(same_bits(resumed->group0_weights, whole->group0_weights)) << algo;
  EXPECT_EQ(resumed->test_loss, whole->test_loss);
  EXPECT_EQ(resumed->best_accuracy, whole->best_accuracy);
}

// A net with dropout: each group draws its masks from its own stream at its step
// (Net::set_draw), so a resumed run, with the run's seed as `easel train --resume` takes it from
// config.json, draws the masks of the uninterrupted one: the same bits. (With a counter that
// starts at 0 in every process the resumed run redrew the first masks and its weights differed.)
TEST(Resume, DropoutDrawsWhatTheUninterruptedRunDrew) {
  const std::string path = ::testing::TempDir() + "/easel-mlp-dropout.toml";
  {
    std::ofstream f(path);
    f << "name = \"mlp-dropout\"\n"
         "[[layer]]\nname = \"ip1\"\ntype = \"inner_product\"\noutputs = 64\n"
         "[[layer]]\nname = \"relu1\"\ntype = \"relu\"\n"
         "[[layer]]\nname = \"drop1\"\ntype = \"dropout\"\nratio = 0.5\n"
         "[[layer]]\nname = \"ip2\"\ntype = \"inner_product\"\noutputs = \"classes\"\n";
  }
  for (const auto& [algo, groups] : {std::pair{"sgd", 1}, std::pair{"sync-easgd", 2}}) {
    SCOPED_TRACE(algo);
    TrainConfig c = config(algo, groups);
    c.net = path;
    Keeper keep(27);
    auto whole = train(c, small_data(), &keep);
    ASSERT_TRUE(whole.ok()) << whole.status().to_string();
    ASSERT_TRUE(keep.kept.has_value());
    const Checkpoint ck = decode_checkpoint(encode_checkpoint(*keep.kept), "mem").value();
    auto resumed = train(c, small_data(), nullptr, {}, &ck);
    ASSERT_TRUE(resumed.ok()) << resumed.status().to_string();
    EXPECT_TRUE(same_bits(resumed->final_weights, whole->final_weights));
    EXPECT_TRUE(same_bits(resumed->group0_weights, whole->group0_weights));
    EXPECT_EQ(resumed->test_loss, whole->test_loss);
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ResumeEqualsUninterrupted,
                         ::testing::Values(std::make_tuple("msgd", 1, 1, "off"),
                                           std::make_tuple("sgd", 1, 1, "off"),
                                           std::make_tuple("sync-sgd", 2, 1, "off"),
                                           std::make_tuple("sync-easgd", 2, 1, "off"),
                                           std::make_tuple("sync-easgd", 2, 2, "off"),
                                           std::make_tuple("sync-easgd", 3, 2, "off"),
                                           std::make_tuple("sync-easgd", 2, 1, "on"),
                                           std::make_tuple("easgd-rr", 2, 1, "off")));

// A signal (the observer's stop flag, raised at the first evaluation) ends the next round early
// at the same step on every group; the checkpoint taken there, resumed, gives the numbers of the
// run that never stopped: every later evaluation, bit for bit.
class Interrupter : public TrainObserver {
 public:
  bool wants_checkpoints() const override { return true; }
  Status on_checkpoint(Checkpoint ck) override {
    last = ck;
    return {};
  }
  void on_eval(const EvalRecord& r) override { records.push_back(r); }
  // Group 0 raises the flag as it begins step raise_at.
  void on_setup(Run& run) override {
    if (raise_at >= 0)
      run.groups[0]->before_step = [this](Group& g) {
        if (g.steps.load() == raise_at) flag.store(SIGTERM);
      };
  }
  const std::atomic<int>* stop_flag() const override { return &flag; }
  std::atomic<int> flag{0};
  int64_t raise_at = -1;
  std::optional<Checkpoint> last;
  std::vector<EvalRecord> records;
};

TEST_P(ResumeEqualsUninterrupted, AfterASignalMidRound) {
  const auto& [algo, groups, tau, overlap] = GetParam();
  TrainConfig c = config(algo, groups);
  c.tau = tau;
  ASSERT_TRUE(set_setting(c, "overlap", overlap).ok());
  Interrupter whole_obs;
  auto whole = train(c, small_data(), &whole_obs);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  EXPECT_EQ(whole->stopped, StopReason::completed);

  Interrupter cut;
  cut.raise_at = 11;
  auto stopped = train(c, small_data(), &cut);
  ASSERT_TRUE(stopped.ok()) << stopped.status().to_string();
  EXPECT_EQ(stopped->stopped, StopReason::interrupted);
  EXPECT_EQ(stopped->stop_signal, SIGTERM);
  ASSERT_TRUE(cut.last.has_value());
  EXPECT_TRUE(cut.last->mid_round);
  const int64_t at = cut.last->iterations_done;
  EXPECT_GT(at, 11) << algo;  // within the second round (9 to 18), not at its end
  EXPECT_LT(at, 18) << algo;
  EXPECT_EQ(stopped->steps, at);
  for (const GroupCheckpoint& g : cut.last->groups)
    EXPECT_EQ(g.steps, at);
  ASSERT_EQ(cut.records.size(), 1u);

  const Checkpoint ck = decode_checkpoint(encode_checkpoint(*cut.last), "mem").value();
  Interrupter resumed_obs;
  auto resumed = train(c, small_data(), &resumed_obs, {}, &ck);
  ASSERT_TRUE(resumed.ok()) << resumed.status().to_string();
  EXPECT_EQ(resumed->stopped, StopReason::completed);
  ASSERT_EQ(resumed_obs.records.size(), whole_obs.records.size() - 1);
  for (size_t i = 0; i < resumed_obs.records.size(); ++i) {
    const EvalRecord& a = resumed_obs.records[i];
    const EvalRecord& b = whole_obs.records[i + 1];
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.train_loss, b.train_loss) << algo << " at step " << a.step;
    EXPECT_EQ(a.test_loss, b.test_loss) << algo << " at step " << a.step;
    EXPECT_EQ(a.test_accuracy, b.test_accuracy);
  }
  EXPECT_TRUE(same_bits(resumed->final_weights, whole->final_weights)) << algo;
  EXPECT_TRUE(same_bits(resumed->group0_weights, whole->group0_weights)) << algo;
}

// The asynchronous algorithms are not deterministic; they go on from the centre, its version
// and every group's counters.
TEST(Resume, AsyncAlgorithmsGoOnFromTheirCentre) {
  for (const char* algo : {"async-msgd", "async-easgd", "hogwild-sgd", "hogwild-easgd"}) {
    TrainConfig c = config(algo, 2);
    c.iterations = 18;
    Keeper keep(18);
    auto first = train(c, small_data(), &keep);
    ASSERT_TRUE(first.ok()) << algo << ": " << first.status().to_string();
    ASSERT_TRUE(keep.kept.has_value()) << algo;
    EXPECT_GT(keep.kept->centre_version, 0) << algo;
    c.iterations = 36;
    auto second = train(c, small_data(), nullptr, {}, &*keep.kept);
    ASSERT_TRUE(second.ok()) << algo << ": " << second.status().to_string();
    EXPECT_EQ(second->steps, 36) << algo;
    EXPECT_GE(second->train_seconds, first->train_seconds) << algo;
    EXPECT_TRUE(std::isfinite(second->test_loss)) << algo;
  }
}

// Interrupted, the asynchronous algorithms drain the round's shared budget: the groups stop
// within a step each, their steps add up to whole iterations, and the run goes on from there.
TEST(Resume, AsyncAlgorithmsStopWithinAStepOnASignal) {
  for (const char* algo : {"async-sgd", "async-measgd", "hogwild-sgd", "hogwild-easgd"}) {
    TrainConfig c = config(algo, 3);
    Interrupter cut;
    cut.raise_at = 4;
    auto stopped = train(c, small_data(), &cut);
    ASSERT_TRUE(stopped.ok()) << algo << ": " << stopped.status().to_string();
    EXPECT_EQ(stopped->stopped, StopReason::interrupted) << algo;
    ASSERT_TRUE(cut.last.has_value()) << algo;
    EXPECT_LT(cut.last->iterations_done, 45) << algo;
    int64_t steps = 0;
    for (const GroupCheckpoint& g : cut.last->groups)
      steps += g.steps;
    EXPECT_EQ(steps, cut.last->iterations_done * 3) << algo;
    auto resumed = train(c, small_data(), nullptr, {}, &*cut.last);
    ASSERT_TRUE(resumed.ok()) << algo << ": " << resumed.status().to_string();
    EXPECT_EQ(resumed->steps, 45) << algo;
  }
}

// An algorithm's own state goes into the checkpoint and back through the algorithm
// (Algorithm::save_state / restore_state), which refuses a state that does not fit it.
TEST(Resume, AlgorithmStateGoesThroughTheAlgorithm) {
  struct Case {
    const char* algo;
    bool buffer;  // async-msgd: the centre's momentum
  };
  for (const Case& k :
       {Case{"easgd-rr", false}, Case{"async-msgd", true}, Case{"sync-easgd", false}}) {
    TrainConfig c = config(k.algo, 2);
    c.iterations = 9;
    Keeper keep(9);
    ASSERT_TRUE(train(c, small_data(), &keep).ok()) << k.algo;
    ASSERT_TRUE(keep.kept.has_value()) << k.algo;
    const Checkpoint& ck = *keep.kept;
    EXPECT_EQ(ck.algo.buffer.size(), k.buffer ? ck.centre.size() : 0u) << k.algo;
    EXPECT_EQ(ck.algo.turn, 0) << k.algo;  // easgd-rr: 18 exchanges of 2 groups, back to 0
    c.iterations = 18;
    EXPECT_TRUE(train(c, small_data(), nullptr, {}, &ck).ok()) << k.algo;
    Checkpoint bad = ck;
    bad.algo.turn = 2;  // no such group
    auto r = train(c, small_data(), nullptr, {}, &bad);
    ASSERT_FALSE(r.ok()) << k.algo;
    EXPECT_EQ(r.status().message().rfind("--resume: ", 0), 0u) << r.status().message();
    bad = ck;
    bad.algo.buffer.assign(3, 1.f);
    r = train(c, small_data(), nullptr, {}, &bad);
    ASSERT_FALSE(r.ok()) << k.algo;
    EXPECT_EQ(r.status().message().rfind("--resume: ", 0), 0u) << r.status().message();
  }
}

TEST(Resume, RefusesAnotherRunsCheckpoint) {
  TrainConfig c = config("sync-easgd", 2);
  c.iterations = 9;
  Keeper keep(9);
  ASSERT_TRUE(train(c, small_data(), &keep).ok());
  ASSERT_TRUE(keep.kept.has_value());
  c.iterations = 18;
  for (auto tweak :
       {+[](TrainConfig& t) { t.algo = "sync-sgd"; }, +[](TrainConfig& t) { t.batch = 8; }}) {
    TrainConfig t = c;
    tweak(t);
    auto r = train(t, small_data(), nullptr, {}, &*keep.kept);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("--resume: the checkpoint is of another run"),
              std::string::npos)
        << r.status().message();
  }
  // Nothing left to do.
  c.iterations = 9;
  auto r = train(c, small_data(), nullptr, {}, &*keep.kept);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("already did 9 of its 9"), std::string::npos);
}

TEST(Resume, RefusesWhatCannotGoOnAndSurvivesAFailedWrite) {
  TrainConfig c = config("sync-easgd", 2);
  c.iterations = 18;
  c.lr_policy = LrSchedule::Policy::poly;
  c.lr_power = 1.0;
  Keeper keep(9);
  ASSERT_TRUE(train(c, small_data(), &keep).ok());
  ASSERT_TRUE(keep.kept.has_value());
  EXPECT_EQ(keep.kept->total_iterations, 18);
  // poly's rate depends on the length.
  c.iterations = 27;
  auto r = train(c, small_data(), nullptr, {}, &*keep.kept);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--lr-policy poly"), std::string::npos);
  c.iterations = 18;
  EXPECT_TRUE(train(c, small_data(), nullptr, {}, &*keep.kept).ok());
  // Counts that do not add up (a hand-made or damaged checkpoint with a valid hash).
  Checkpoint bad = *keep.kept;
  bad.algo.turn = 5;
  r = train(c, small_data(), nullptr, {}, &bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("do not add up"), std::string::npos);
  bad = *keep.kept;
  bad.groups[1].steps += 1;
  EXPECT_FALSE(train(c, small_data(), nullptr, {}, &bad).ok());
  // A target already reached.
  c.target_accuracy = keep.kept->best_accuracy > 0 ? keep.kept->best_accuracy : 0.01;
  bad = *keep.kept;
  bad.best_accuracy = c.target_accuracy;
  r = train(c, small_data(), nullptr, {}, &bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("already reached --target-accuracy"), std::string::npos);

  // A checkpoint that cannot be written (disk full, --out gone) is logged; training goes on.
  struct Failing : TrainObserver {
    bool wants_checkpoints() const override { return true; }
    Status on_checkpoint(Checkpoint) override {
      ++calls;
      return io_error("no space left");
    }
    int calls = 0;
  } failing;
  TrainConfig f = config("msgd", 1);
  auto ok = train(f, small_data(), &failing);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->steps, 45);
  EXPECT_EQ(failing.calls, 5);
}

// A non-finite loss stops the run at once (checked every step), naming the step, the group and
// the first layer whose weights are no longer finite; the last good checkpoint is the one kept
// (none is taken of the diverged round).
TEST(Divergence, StopsAtTheStepNamingTheGroupAndTheLayer) {
  for (const char* algo : {"sync-easgd", "easgd-rr", "async-easgd", "msgd"}) {
    const int groups = std::string(algo) == "msgd" ? 1 : 2;
    TrainConfig c = config(algo, groups);
    c.on_failure = OnFailure::stop;  // async-easgd's default drops the group instead
    struct Poison : Interrupter {
      void on_setup(easel::Run& run) override {
        Group& g = *run.groups.back();
        segment = run.segments().back();  // the last layer's bias: the loss turns nan
        g.before_step = [this](Group& grp) {
          if (grp.steps.load() == 13) grp.weights.data()[segment.offset] = std::nanf("");
        };
      }
      Segment segment;
    } obs;
    auto r = train(c, small_data(), &obs);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->stopped, StopReason::diverged) << algo;
    const std::string& m = r->stop_message;
    EXPECT_NE(m.find("training diverged at step 14: group " + std::to_string(groups - 1) +
                     "'s train loss is nan"),
              std::string::npos)
        << algo << ": " << m;
    EXPECT_NE(m.find(obs.segment.name), std::string::npos) << m;
    // The last good checkpoint is the evaluation's before the diverged round; none of that round
    // (async-easgd's group 1 shares the round's steps with group 0: when group 0 is starved it can
    // take its 14th step in the first round, and then there is no checkpoint at all).
    const int64_t last_good = (r->steps - 1) / 9 * 9;
    if (last_good == 0 && std::string(algo) == "async-easgd") {
      EXPECT_FALSE(obs.last.has_value()) << algo;
      continue;
    }
    ASSERT_TRUE(obs.last.has_value()) << algo;
    EXPECT_EQ(obs.last->iterations_done, last_good) << algo;
    // The sync algorithms stop within the round of step 14 (async-easgd's group 1 may reach its
    // 14th step in a later round).
    if (std::string(algo) != "async-easgd") {
      EXPECT_LT(r->steps, 18) << algo;
    }
  }
  // A non-finite weight that the loss does not show (a bias behind a ReLU): found when the round
  // ends, before its checkpoint.
  TrainConfig masked = config("sync-easgd", 2);
  struct Masked : Interrupter {
    void on_setup(easel::Run& run) override {
      segment = run.segments()[1];
      run.groups[1]->before_step = [this](Group& g) {
        if (g.steps.load() == 13) g.weights.data()[segment.offset] = std::nanf("");
      };
    }
    Segment segment;
  } mobs;
  auto m = train(masked, small_data(), &mobs);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->stopped, StopReason::diverged);
  EXPECT_NE(m->stop_message.find(mobs.segment.name), std::string::npos) << m->stop_message;
  ASSERT_TRUE(mobs.last.has_value());
  EXPECT_EQ(mobs.last->iterations_done, 9);
  // A rate far too high: the loss itself goes non-finite.
  TrainConfig c = config("sync-sgd", 2);
  c.lr = 1e30;
  c.lr_policy = LrSchedule::Policy::fixed;
  Interrupter obs;
  auto r = train(c, small_data(), &obs);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->stopped, StopReason::diverged);
  EXPECT_NE(r->stop_message.find("lower --lr"), std::string::npos) << r->stop_message;
  EXPECT_LT(r->steps, 45);
}

// A group that stalls (an injected sleep past the stall timeout) is named by the group that waits
// for it, with what it waits for; the run stops as stalled with the last good checkpoint.
TEST(Stall, AWaitingGroupNamesTheStalledOneAndTheRunStops) {
  struct Case {
    const char* algo;
    const char* says;
  };
  for (const Case& k :
       {Case{"sync-sgd", "group 1 has not reached it"},
        Case{"easgd-rr", "for its turn at the centre (easgd-rr: it is group 1's"}}) {
    TrainConfig c = config(k.algo, 2);
    c.stall_timeout = 0.3;
    struct Sleepy : Interrupter {
      void on_setup(easel::Run& run) override {
        run.groups[1]->before_step = [](Group& g) {
          if (g.steps.load() == 12) std::this_thread::sleep_for(std::chrono::milliseconds(1200));
        };
      }
    } obs;
    const double t0 = now_seconds();
    auto r = train(c, small_data(), &obs);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->stopped, StopReason::stalled) << k.algo;
    EXPECT_NE(r->stop_message.find("group 0 waited"), std::string::npos) << r->stop_message;
    EXPECT_NE(r->stop_message.find(k.says), std::string::npos) << r->stop_message;
    EXPECT_NE(r->stop_message.find("the last good one, at step 9, is kept"), std::string::npos)
        << r->stop_message;
    ASSERT_TRUE(obs.last.has_value());
    EXPECT_EQ(obs.last->iterations_done, 9);
    EXPECT_LT(now_seconds() - t0, 10.0);
  }
  // The next run starts clean (its deadline its own).
  auto ok = train(config("sync-sgd", 2), small_data(), nullptr);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->stopped, StopReason::completed);
}

TEST(CheckpointFile, DamagedFilesGiveOneErrorNamingThem) {
  Checkpoint ck;
  ck.identity = "x";
  ck.iterations_done = 3;
  ck.centre = {1, 2, 3};
  ck.algo.turn = 1;
  ck.algo.buffer = {10, 11, 12};
  GroupCheckpoint g;
  g.steps = 3;
  g.weights = {4, 5, 6};
  g.momentum = {7, 8, 9};
  g.stream = {1, 2, {3, 4, 5, 6}};
  ck.groups.push_back(g);
  const std::string bytes = encode_checkpoint(ck);
  auto back = decode_checkpoint(bytes, "f.bin");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->groups[0].weights, g.weights);
  EXPECT_EQ(back->groups[0].stream.rng, g.stream.rng);
  EXPECT_EQ(back->centre, ck.centre);
  EXPECT_EQ(back->algo.turn, 1);
  EXPECT_EQ(back->algo.buffer, ck.algo.buffer);
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    auto r = decode_checkpoint(std::string_view(bytes).substr(0, cut), "f.bin");
    ASSERT_FALSE(r.ok()) << cut;
    EXPECT_EQ(r.status().message().rfind("f.bin: ", 0), 0u) << r.status().message();
  }
  for (size_t at = 0; at < bytes.size(); at += 5) {
    std::string bad = bytes;
    bad[at] = static_cast<char>(bad[at] ^ 0x40);
    EXPECT_FALSE(decode_checkpoint(bad, "f.bin").ok()) << at;
  }
  // A count far beyond the bytes left, under a valid checksum: refused, nothing allocated.
  Checkpoint huge = ck;
  huge.identity = std::string(8, 'x');
  std::string h = encode_checkpoint(huge);
  const size_t id_count = 8 + 8 + 16;  // magic, version and byte order, length, hash
  const uint64_t big = uint64_t{1} << 60;
  std::memcpy(&h[id_count], &big, sizeof big);
  // Re-hash the payload so that only the count is wrong.
  uint64_t fnv = 0xcbf29ce484222325ull;
  for (size_t i = id_count; i < h.size(); ++i) {
    fnv ^= static_cast<unsigned char>(h[i]);
    fnv *= 0x100000001b3ull;
  }
  std::memcpy(&h[24], &fnv, sizeof fnv);
  auto r = decode_checkpoint(h, "f.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated at the identity field"), std::string::npos)
      << r.status().message();

  const auto dir = std::filesystem::temp_directory_path() / "easel-ck-test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "checkpoint.bin").string();
  ASSERT_TRUE(write_checkpoint(path, ck).ok());
  auto read = read_checkpoint(path);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(read->groups[0].momentum, g.momentum);
  // No temporary is left beside it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            1);
  EXPECT_EQ(read_checkpoint((dir / "none.bin").string()).status().code(), Code::not_found);
  // A rename that fails (the path is a directory that holds a file) removes the temporary.
  const auto blocked = dir / "blocked";
  std::filesystem::create_directories(blocked / "inside");
  const Status st = write_checkpoint(blocked.string(), ck);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot rename"), std::string::npos) << st.message();
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            2);  // checkpoint.bin and the directory
  std::filesystem::remove_all(dir);
}

// The header states the format version and the byte order; both are checked, and format 1 (no
// version, the magic EASELCK1, written at evaluations) is still read.
TEST(CheckpointFile, VersionAndByteOrderAreStatedAndChecked) {
  Checkpoint ck;
  ck.identity = "x";
  ck.iterations_done = 3;
  ck.mid_round = true;
  GroupCheckpoint g;
  g.steps = 3;
  g.weights = {4, 5};
  g.momentum = {7, 8};
  g.loss_sum = 1.25;
  g.loss_count = 2;
  ck.groups.push_back(g);
  const std::string bytes = encode_checkpoint(ck);
  ASSERT_EQ(bytes.substr(0, 8), "EASELCKV");
  uint32_t version = 0, mark = 0;
  std::memcpy(&version, &bytes[8], 4);
  std::memcpy(&mark, &bytes[12], 4);
  EXPECT_EQ(version, kCheckpointVersion);
  EXPECT_EQ(mark, 0x01020304u);
  auto back = decode_checkpoint(bytes, "f.bin");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_TRUE(back->mid_round);
  EXPECT_EQ(back->groups[0].loss_sum, 1.25);
  EXPECT_EQ(back->groups[0].loss_count, 2);

  std::string other = bytes;  // the other byte order (the mark is outside the hash)
  std::swap(other[12], other[15]);
  std::swap(other[13], other[14]);
  auto r = decode_checkpoint(other, "f.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("f.bin: written on a machine of the other byte order"),
            std::string::npos)
      << r.status().message();
  std::string later = bytes;
  later[8] = 9;
  r = decode_checkpoint(later, "f.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("f.bin: checkpoint format 9 (this easel reads formats 1 to"),
            std::string::npos)
      << r.status().message();

  // Format 1: "EASELCK1", the length and the hash, then the payload without the mid-round mark,
  // format 3's lost steps, clock, failures and words, and the groups' loss sums and dropped marks.
  std::string payload = bytes.substr(32);
  const size_t group_bytes = 8 + (8 + 2 * 4) + (8 + 2 * 4) + 8 + 8 + 4 * 8 + 8 + 4 * 8 + 3 * 8 + 8 +
                             8 + 4;  // the one group, with its loss sums and dropped mark
  // The mark, the lost steps, the clock, the counts of failures and words (none), then the
  // groups' count.
  const size_t groups_at = payload.size() - group_bytes - 8 - 4 * 8 - 4;
  payload.erase(groups_at, 4 + 4 * 8);
  payload.erase(payload.size() - 20);
  uint64_t fnv = 0xcbf29ce484222325ull;
  for (unsigned char c : payload) {
    fnv ^= c;
    fnv *= 0x100000001b3ull;
  }
  const uint64_t n = payload.size();
  std::string v1 = "EASELCK1";
  v1.append(reinterpret_cast<const char*>(&n), 8);
  v1.append(reinterpret_cast<const char*>(&fnv), 8);
  v1 += payload;
  auto old = decode_checkpoint(v1, "old.bin");
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_FALSE(old->mid_round);
  EXPECT_EQ(old->groups[0].weights, g.weights);
  EXPECT_EQ(old->groups[0].loss_count, 0);
}

// ---- Resume into another layout ----

// Checks, once the resumed run is set up, that every group starts from the checkpoint's centre
// with zero momentum at the checkpoint's step, and keeps the first evaluation after it.
class RegroupWatcher : public TrainObserver {
 public:
  explicit RegroupWatcher(const Checkpoint& ck) : ck_(ck) {}
  void on_setup(Run& run) override {
    groups = run.size();
    const size_t n = static_cast<size_t>(run.arena_floats());
    std::vector<float> centre(run.centre.data(), run.centre.data() + n);
    from_centre = same_bits(centre, ck_.centre);
    for (const auto& g : run.groups) {
      const std::vector<float> w(g->weights.data(), g->weights.data() + n);
      from_centre = from_centre && same_bits(w, ck_.centre);
      for (size_t i = 0; i < n; ++i)
        zero_momentum = zero_momentum && g->momentum.data()[i] == 0.f;
      at_step = at_step && g->steps.load() == ck_.iterations_done;
      epochs.push_back(g->data->state().epoch);
    }
  }
  void on_eval(const EvalRecord& e) override {
    if (!first) first = e;
  }
  int groups = 0;
  bool from_centre = false, zero_momentum = true, at_step = true;
  std::vector<int64_t> epochs;
  std::optional<EvalRecord> first;

 private:
  const Checkpoint& ck_;
};

// Keeps the checkpoint taken after `at` iterations and the evaluation there.
class KeeperWithEval : public Keeper {
 public:
  explicit KeeperWithEval(int64_t at) : Keeper(at), at_(at) {}
  void on_eval(const EvalRecord& e) override {
    if (e.step == at_) eval = e;
  }
  std::optional<EvalRecord> eval;

 private:
  int64_t at_;
};

class Regroup : public ::testing::TestWithParam<std::string> {};

// A 2-group run of every EASGD algorithm goes on in 3 groups: the centre and the step carry
// over, every new group starts from the centre with zero momentum on a fresh epoch of its data.
// With nothing moving afterwards (lr 0, alpha 0), the first evaluation after the resume is the
// checkpoint's (the same accuracy; the loss to round-off, as 3 groups sum the test set's shares
// in another order) and the final weights are the checkpoint's centre, bit for bit.
TEST_P(Regroup, IntoThreeGroupsFromTheCentre) {
  const std::string algo = GetParam();
  TrainConfig c = config(algo, 2);
  KeeperWithEval keep(27);
  ASSERT_TRUE(train(c, small_data(), &keep).ok());
  ASSERT_TRUE(keep.kept.has_value() && keep.eval.has_value());
  const Checkpoint ck = decode_checkpoint(encode_checkpoint(*keep.kept), "mem").value();
  int64_t old_epoch = 0;
  for (const GroupCheckpoint& g : ck.groups)
    old_epoch = std::max(old_epoch, g.stream.epoch);

  TrainConfig still = config(algo, 3);
  still.lr = 0;
  still.rho = 0;
  RegroupWatcher w(ck);
  auto r = train(still, small_data(), &w, {}, &ck);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(w.groups, 3);
  EXPECT_TRUE(w.from_centre) << algo;
  EXPECT_TRUE(w.zero_momentum) << algo;
  EXPECT_TRUE(w.at_step) << algo;
  EXPECT_EQ(w.epochs, std::vector<int64_t>(3, old_epoch + 1));
  ASSERT_TRUE(w.first.has_value());
  EXPECT_EQ(w.first->step, 36);
  EXPECT_EQ(w.first->test_accuracy, keep.eval->test_accuracy) << algo;
  EXPECT_NEAR(w.first->test_loss, keep.eval->test_loss, 1e-6 * keep.eval->test_loss) << algo;
  EXPECT_TRUE(same_bits(r->final_weights, ck.centre)) << algo;
  EXPECT_EQ(r->steps, 45);

  // Training on from there: to the run's end, twice the same (the new streams' order is drawn
  // from the seed, the step and the group) where the algorithm is deterministic.
  auto a = train(config(algo, 3), small_data(), nullptr, {}, &ck);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->steps, 45);
  EXPECT_TRUE(std::isfinite(a->test_loss));
  EXPECT_FALSE(same_bits(a->final_weights, ck.centre));
  if (algo == "sync-easgd" || algo == "easgd-rr") {
    auto b = train(config(algo, 3), small_data(), nullptr, {}, &ck);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_TRUE(same_bits(a->final_weights, b->final_weights)) << algo;
  }
}

INSTANTIATE_TEST_SUITE_P(Easgd, Regroup,
                         ::testing::Values("sync-easgd", "easgd-rr", "async-easgd", "async-measgd",
                                           "hogwild-easgd"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// The others' replicas cannot be re-split: refused naming --groups and why, before the run is
// built when --groups is a count (check_resume_groups, what easel train calls), else by the
// restore.
TEST(Regroup, OtherAlgorithmsRefuseWithTheReason) {
  for (const std::string algo : {"sync-sgd", "async-sgd", "async-msgd", "hogwild-sgd"}) {
    TrainConfig c = config(algo, 2);
    c.iterations = 9;
    Keeper keep(9);
    ASSERT_TRUE(train(c, small_data(), &keep).ok()) << algo;
    ASSERT_TRUE(keep.kept.has_value());
    const std::string why = "--groups: a checkpoint of " + algo +
                            " resumes only with its 2 group(s), not 3: each group's replica";
    TrainConfig t = config(algo, 3);
    t.iterations = 18;
    auto r = train(t, small_data(), nullptr, {}, &*keep.kept);
    ASSERT_FALSE(r.ok()) << algo;
    EXPECT_EQ(r.status().code(), Code::invalid_argument);
    EXPECT_EQ(r.status().message().rfind(why, 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find("cannot be re-split"), std::string::npos);
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
    const Status early = check_resume_groups(*keep.kept, algo, GroupCount::of(3));
    EXPECT_EQ(early.code(), Code::invalid_argument) << algo;
    EXPECT_EQ(early.message(), r.status().message());
    EXPECT_TRUE(check_resume_groups(*keep.kept, algo, GroupCount::of(2)).ok());
    EXPECT_TRUE(check_resume_groups(*keep.kept, algo, GroupCount{}).ok());  // left to the restore
    EXPECT_TRUE(check_resume_groups(*keep.kept, "sync-easgd", GroupCount::of(3)).ok());
    t.plan.groups = GroupCount::of(2);  // its own layout goes on
    EXPECT_TRUE(train(t, small_data(), nullptr, {}, &*keep.kept).ok()) << algo;
  }
}

// --checkpoint-every: every K-th evaluation, and the last one always (45 iterations evaluated
// every 5: 9 evaluations, K = 4 writes at the 4th, the 8th and the 9th); auto writes at the
// first evaluation (its cost measured), then at the first evaluation Young/Daly's interval past
// the last checkpoint: an MTBF of a year spaces them past the run's end (the last one alone
// follows), one of a nanosecond writes at every evaluation.
TEST(CheckpointCadence, EveryKthEvaluationAndTheLast) {
  struct Steps : TrainObserver {
    bool wants_checkpoints() const override { return true; }
    Status on_checkpoint(Checkpoint ck) override {
      steps.push_back(ck.iterations_done);
      return {};
    }
    std::vector<int64_t> steps;
  };
  TrainConfig c = config("sync-easgd", 2);
  c.eval_every = 5;
  const auto steps_of = [&](const std::string& every, const std::string& mtbf) {
    TrainConfig k = c;
    EXPECT_TRUE(set_setting(k, "checkpoint-every", every).ok());
    if (!mtbf.empty()) {
      EXPECT_TRUE(set_setting(k, "mtbf", mtbf).ok());
    }
    EXPECT_TRUE(validate_config(k).ok()) << validate_config(k).to_string();
    Steps obs;
    auto r = train(k, small_data(), &obs);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r.ok() ? r->checkpoints : -1, static_cast<int64_t>(obs.steps.size()));
    if (every == "auto" && r.ok() && obs.steps.size() > 1) {
      EXPECT_GT(r->checkpoint_interval_seconds, 0);
    }
    return obs.steps;
  };
  EXPECT_EQ(steps_of("1", ""), (std::vector<int64_t>{5, 10, 15, 20, 25, 30, 35, 40, 45}));
  EXPECT_EQ(steps_of("4", ""), (std::vector<int64_t>{20, 40, 45}));
  EXPECT_EQ(steps_of("auto", "3.2e7"), (std::vector<int64_t>{5, 45}));
  EXPECT_EQ(steps_of("auto", "1e-9"), steps_of("1", ""));
}

TEST(CheckpointCadence, YoungDalyAndTheRefusals) {
  EXPECT_DOUBLE_EQ(young_daly_interval(0.5, 3600), 60);  // sqrt(2 x 0.5 x 3600)
  EXPECT_DOUBLE_EQ(young_daly_interval(2, 86400), std::sqrt(2 * 2 * 86400.0));
  EXPECT_DOUBLE_EQ(young_daly_interval(0, 86400), 0);
  const auto refusal = [](std::initializer_list<std::pair<const char*, const char*>> set) {
    TrainConfig c = config("sgd", 1);
    for (const auto& [k, v] : set) {
      Status st = set_setting(c, k, v);
      if (!st.ok()) return st.message();
    }
    return validate_config(c).message();
  };
  EXPECT_NE(refusal({{"checkpoint-every", "auto"}}).find("--checkpoint-every auto: needs --mtbf"),
            std::string::npos);
  EXPECT_NE(refusal({{"mtbf", "3600"}}).find("--mtbf: only with --checkpoint-every auto"),
            std::string::npos);
  EXPECT_NE(refusal({{"checkpoint-every", "0"}}).find("--checkpoint-every: 0 must be >= 1"),
            std::string::npos);
  EXPECT_NE(refusal({{"checkpoint-every", "auto"}, {"mtbf", "-5"}}).find("--checkpoint-every auto"),
            std::string::npos);
  EXPECT_NE(refusal({{"checkpoint-every", "auto"}, {"mtbf", "0"}}).find("--checkpoint-every auto"),
            std::string::npos);
  EXPECT_NE(refusal({{"checkpoint-every", "2"}, {"checkpoint", "false"}})
                .find("--checkpoint-every: with --no-checkpoint"),
            std::string::npos);
  EXPECT_EQ(refusal({{"checkpoint-every", "auto"}, {"mtbf", "86400"}}), "");
}

}  // namespace
}  // namespace easel
