// Checkpoints: a run resumed from one equals the run that never stopped, bit for bit, for every
// deterministic algorithm (including sync-easgd's double-buffered mirrored and partitioned
// exchanges, stopped at an odd exchange count, and its overlapped variant); the asynchronous ones
// go on from their centre and counters; a checkpoint of another run, or a damaged file, gives
// one clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "algos/checkpoint.hpp"
#include "algos/trainer.hpp"
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
  Status on_checkpoint(const Checkpoint& ck) override {
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

INSTANTIATE_TEST_SUITE_P(Algorithms, ResumeEqualsUninterrupted,
                         ::testing::Values(std::make_tuple("msgd", 1, 1, "off"),
                                           std::make_tuple("sgd", 1, 1, "off"),
                                           std::make_tuple("sync-sgd", 2, 1, "off"),
                                           std::make_tuple("sync-easgd", 2, 1, "off"),
                                           std::make_tuple("sync-easgd", 2, 2, "off"),
                                           std::make_tuple("sync-easgd", 3, 2, "off"),
                                           std::make_tuple("sync-easgd", 2, 1, "on"),
                                           std::make_tuple("easgd-rr", 2, 1, "off")));

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
       {+[](TrainConfig& t) { t.algo = "sync-sgd"; }, +[](TrainConfig& t) { t.plan.groups = "3"; },
        +[](TrainConfig& t) { t.batch = 8; }}) {
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
    Status on_checkpoint(const Checkpoint&) override {
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
  const size_t id_count = 8 + 16;  // magic, length, hash
  const uint64_t big = uint64_t{1} << 60;
  std::memcpy(&h[id_count], &big, sizeof big);
  // Re-hash the payload so that only the count is wrong.
  uint64_t fnv = 0xcbf29ce484222325ull;
  for (size_t i = id_count; i < h.size(); ++i) {
    fnv ^= static_cast<unsigned char>(h[i]);
    fnv *= 0x100000001b3ull;
  }
  std::memcpy(&h[16], &fnv, sizeof fnv);
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
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(read_checkpoint((dir / "none.bin").string()).status().code(), Code::not_found);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace easel
