// The public API (include/easel/) as an embedding program sees it: only its headers, linked
// against libeasel.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "easel/easel.hpp"

namespace {

using easel::api::Code;
using easel::api::Config;
using easel::api::Data;
using easel::api::Evaluation;
using easel::api::ImageArrays;
using TrainRun = easel::api::Run;

// A small quick run: mlp on 8x8 images, two sync-easgd groups of one thread, evaluations every
// 5 iterations.
Config small_config(int64_t iterations = 20) {
  Config cfg;
  for (auto [k, v] : {std::pair{"net", "mlp"},
                      {"algo", "sync-easgd"},
                      {"groups", "2"},
                      {"threads-per-group", "1"},
                      {"batch", "16"},
                      {"eval-every", "5"},
                      {"seed", "7"}})
    EXPECT_TRUE(cfg.set(k, v).ok()) << k;
  EXPECT_TRUE(cfg.set("iterations", std::to_string(iterations)).ok());
  return cfg;
}

// count images of 1 x 8 x 8 in `classes` classes: class k is bright in row k.
struct Arrays {
  std::vector<float> images;
  std::vector<int32_t> labels;
  ImageArrays view(int64_t count, int64_t classes) const {
    return {count, 1, 8, 8, classes, images, labels};
  }
};
Arrays make_arrays(int64_t count, int64_t classes) {
  Arrays a;
  for (int64_t i = 0; i < count; ++i) {
    const int32_t label = static_cast<int32_t>((i * 7 + 3) % classes);
    a.labels.push_back(label);
    for (int64_t p = 0; p < 64; ++p)
      a.images.push_back(p / 8 == label ? 0.9f
                                        : static_cast<float>((i * 31 + p * 17) % 64) / 256.f);
  }
  return a;
}

Data memory_data() {
  Data d;
  const Arrays train = make_arrays(256, 4), test = make_arrays(64, 4);
  EXPECT_TRUE(d.set_train(train.view(256, 4)).ok());
  EXPECT_TRUE(d.set_test(test.view(64, 4)).ok());
  return d;
}

TEST(ApiConfig, SetsByNameAndNamesTheSettingInErrors) {
  Config cfg;
  EXPECT_TRUE(cfg.set("groups", "3").ok());
  std::string v;
  ASSERT_TRUE(cfg.get("groups", &v).ok());
  EXPECT_EQ(v, "3");
  easel::api::Status st = cfg.set("no-such-setting", "1");
  EXPECT_EQ(st.code(), Code::not_found);
  EXPECT_NE(st.message().find("no-such-setting"), std::string::npos) << st.message();
  st = cfg.set("lr", "fast");
  EXPECT_EQ(st.code(), Code::invalid_argument);
  EXPECT_NE(st.message().find("--lr"), std::string::npos) << st.message();
  EXPECT_FALSE(Config::setting_names().empty());
  // easel train's "did you mean": a typo's nearest setting, none for a name or a far word.
  EXPECT_EQ(Config::nearest_name("lrr"), "lr");
  EXPECT_EQ(Config::nearest_name("eval_every"), "eval-every");
  EXPECT_EQ(Config::nearest_name("lr"), "");
  EXPECT_EQ(Config::nearest_name("xyzzyq"), "");
  // A negation holds the opposite of its setting.
  ASSERT_TRUE(cfg.set("no-prefetch", "true").ok());
  ASSERT_TRUE(cfg.get("prefetch", &v).ok());
  EXPECT_EQ(v, "false");
  ASSERT_TRUE(cfg.get("no-prefetch", &v).ok());
  EXPECT_EQ(v, "true");
  ASSERT_TRUE(cfg.set("prefetch", "true").ok());
  ASSERT_TRUE(cfg.get("no-prefetch", &v).ok());
  EXPECT_EQ(v, "false");
  EXPECT_EQ(cfg.set("no-prefetch", "maybe").code(), Code::invalid_argument);
}

TEST(ApiData, WrongShapeIsAClearStatus) {
  Data d;
  Arrays a = make_arrays(10, 4);
  ImageArrays v = a.view(10, 4);
  v.height = 9;  // 10 x 1 x 9 x 8 needs 720 values, there are 640
  easel::api::Status st = d.set_train(v);
  EXPECT_EQ(st.code(), Code::invalid_argument);
  EXPECT_EQ(st.message(), "train set: images holds 640 values, the shape 10 x 1 x 9 x 8 needs 720");
  v = a.view(10, 4);
  v.count = 0;
  EXPECT_EQ(d.set_test(v).message(), "test set: count is 0 (it must be in [1, 2^31])");
  v = a.view(10, 4);
  v.labels = std::span<const int32_t>(a.labels).first(9);
  EXPECT_EQ(d.set_train(v).message(), "train set: labels holds 9 values, count is 10");
  EXPECT_EQ(d.train_count(), 0);
}

TEST(ApiData, LabelOutOfRangeOrBadPixelIsAClearStatus) {
  Data d;
  Arrays a = make_arrays(10, 4);
  a.labels[3] = 4;
  easel::api::Status st = d.set_train(a.view(10, 4));
  EXPECT_EQ(st.code(), Code::invalid_argument);
  EXPECT_EQ(st.message(), "train set: labels[3] is 4, outside [0, 4)");
  a = make_arrays(10, 4);
  a.labels[0] = -1;
  EXPECT_EQ(d.set_train(a.view(10, 4)).message(), "train set: labels[0] is -1, outside [0, 4)");
  a = make_arrays(10, 4);
  a.images[5] = NAN;
  EXPECT_NE(d.set_train(a.view(10, 4)).message().find("images[5] is nan, outside [0, 1]"),
            std::string::npos);
}

TEST(ApiData, TrainRefusesMissingOrMismatchedSets) {
  Data d;
  const Arrays train = make_arrays(64, 4), test = make_arrays(16, 3);
  ASSERT_TRUE(d.set_train(train.view(64, 4)).ok());
  TrainRun r1;
  easel::api::Status st = r1.train(small_config(), d);
  EXPECT_EQ(st.code(), Code::invalid_argument);
  EXPECT_NE(st.message().find("no test set"), std::string::npos) << st.message();
  ASSERT_TRUE(d.set_test(test.view(16, 3)).ok());
  TrainRun r2;
  st = r2.train(small_config(), d);
  EXPECT_EQ(st.code(), Code::invalid_argument);
  EXPECT_NE(st.message().find("in 3 classes, the training set's 1 x 8 x 8 in 4"), std::string::npos)
      << st.message();
}

TEST(ApiRun, StopsAtTheEvaluationWhoseCallbackSaysSo) {
  Data d = memory_data();
  TrainRun run;
  std::vector<int64_t> steps;
  run.on_evaluation([&](const Evaluation& e) {
    steps.push_back(e.step);
    return e.step < 10;  // stop at step 10
  });
  ASSERT_TRUE(run.train(small_config(40), d).ok());
  EXPECT_EQ(steps, (std::vector<int64_t>{5, 10}));
  EXPECT_EQ(run.summary().steps, 10);
  EXPECT_TRUE(run.summary().stopped);
  EXPECT_EQ(run.summary().groups, 2);
  EXPECT_GE(static_cast<int64_t>(run.weights().size()), run.summary().parameters);  // + padding
}

TEST(ApiRun, StopFromACallbackEndsTheRunAtThatEvaluation) {
  Data d = memory_data();
  TrainRun run;
  int evaluations = 0;
  run.on_evaluation([&](const Evaluation&) {
    ++evaluations;
    run.stop();
    return true;
  });
  ASSERT_TRUE(run.train(small_config(40), d).ok());
  EXPECT_EQ(evaluations, 1);
  EXPECT_EQ(run.summary().steps, 5);
  EXPECT_TRUE(run.summary().stopped);
  // One Run trains once.
  EXPECT_EQ(run.train(small_config(), d).code(), Code::invalid_argument);
}

// Your own net: a description file as the "net" setting (docs/NETS.md), trained on arrays; a
// broken description is a Status naming the file, the layer and the field.
TEST(ApiRun, TrainsANetDescribedInAFile) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/easel_api_net.toml", bad = dir + "/easel_api_bad.toml";
  const char* text = R"(name = "api-net"
[[layer]]
name = "conv1"
type = "conv"
outputs = 4
kernel = 3
pad = 1
[[layer]]
name = "bn1"
type = "batch_norm"
[[layer]]
name = "relu1"
type = "relu"
[[layer]]
name = "fc"
type = "inner_product"
outputs = "classes"
)";
  std::FILE* f = std::fopen(good.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(text, f);
  std::fclose(f);
  f = std::fopen(bad.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("name = \"b\"\n[[layer]]\nname = \"fc\"\ntype = \"fully_connected\"\n", f);
  std::fclose(f);
  Data d = memory_data();
  Config cfg = small_config(10);
  ASSERT_TRUE(cfg.set("net", good).ok());
  TrainRun run;
  ASSERT_TRUE(run.train(cfg, d).ok());
  EXPECT_EQ(run.summary().net, "api-net");
  EXPECT_EQ(run.summary().parameters, 4 * 9 + 4 + 4 * 2 + 4 * 64 * 4 + 4);  // conv, bn, fc
  Config broken = small_config(10);
  ASSERT_TRUE(broken.set("net", bad).ok());
  const auto st = broken.validate();
  EXPECT_EQ(st.code(), Code::invalid_argument);
  EXPECT_NE(st.message().find(bad + ":"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("layer fc: type: unknown layer type 'fully_connected'"),
            std::string::npos)
      << st.message();
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST(ApiRun, TwoRunsInOneProcessShareNoState) {
  Data d = memory_data();
  TrainRun a, b;
  std::vector<double> la, lb;
  a.on_evaluation([&](const Evaluation& e) { return la.push_back(e.train_loss), true; });
  b.on_evaluation([&](const Evaluation& e) { return lb.push_back(e.train_loss), true; });
  ASSERT_TRUE(a.train(small_config(), d).ok());
  ASSERT_TRUE(b.train(small_config(), d).ok());
  ASSERT_EQ(la.size(), 4u);
  EXPECT_EQ(la, lb);
  EXPECT_EQ(a.summary().test_accuracy, b.summary().test_accuracy);
  EXPECT_EQ(a.summary().test_loss, b.summary().test_loss);
  EXPECT_EQ(a.weights(), b.weights());
  EXPECT_FALSE(a.summary().stopped);
  EXPECT_EQ(a.summary().steps, 20);
}

TEST(ApiRun, StartsFromTheCallersWeights) {
  Data d = memory_data();
  TrainRun a;
  ASSERT_TRUE(a.train(small_config(10), d).ok());
  TrainRun wrong;
  wrong.set_initial_weights(std::vector<float>(3, 0.f));
  easel::api::Status st = wrong.train(small_config(10), d);
  EXPECT_EQ(st.code(), Code::invalid_argument);
  EXPECT_EQ(st.message(), "initial weights: 3 values, the net has " +
                              std::to_string(a.weights().size()) + " weights");
  // Two runs from a's weights agree with each other, not with a fresh run.
  TrainRun b, c;
  b.set_initial_weights(a.weights());
  c.set_initial_weights(a.weights());
  ASSERT_TRUE(b.train(small_config(10), d).ok());
  ASSERT_TRUE(c.train(small_config(10), d).ok());
  EXPECT_EQ(b.weights(), c.weights());
  EXPECT_NE(b.weights(), a.weights());
}

// The text of a file ("" when it cannot be read).
std::string slurp(const std::string& path) {
  std::string text;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
      text.append(buf, n);
    std::fclose(f);
  }
  return text;
}

bool exists(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f) std::fclose(f);
  return f != nullptr;
}

// A directory of this process's own under the test's temporary directory, empty.
std::string fresh_dir(const std::string& name) {
  const std::string d =
      ::testing::TempDir() + "easel_api_" + std::to_string(::getpid()) + "_" + name;
  for (const char* f : {"/config.json", "/metrics.jsonl", "/checkpoint.bin", "/summary.json"})
    std::remove((d + f).c_str());
  return d;
}

// (step, train loss, test accuracy) of every evaluation of a run.
using Record = std::tuple<int64_t, double, double>;

// The uninterrupted run of WritesTheRunAndResumesItExactly into `dir`: what it writes, and a
// second run into the same directory refused before anything is written.
std::vector<Record> whole_run(Data& d, const std::string& whole_dir) {
  std::vector<Record> whole;
  Config cfg = small_config(20);
  EXPECT_TRUE(cfg.set("out", whole_dir).ok());
  TrainRun run;
  run.on_evaluation([&](const Evaluation& e) {
    whole.emplace_back(e.step, e.train_loss, e.test_accuracy);
    return true;
  });
  EXPECT_EQ(run.summary().stop_reason, easel::api::StopReason::none);
  EXPECT_TRUE(run.train(cfg, d).ok());
  EXPECT_EQ(run.summary().stop_reason, easel::api::StopReason::completed);
  EXPECT_EQ(run.summary().directory, whole_dir);
  for (const char* f : {"/config.json", "/metrics.jsonl", "/checkpoint.bin", "/summary.json"})
    EXPECT_TRUE(exists(whole_dir + f)) << f;
  EXPECT_NE(slurp(whole_dir + "/summary.json").find("\"stopped\": \"completed\""),
            std::string::npos);
  const std::string metrics = slurp(whole_dir + "/metrics.jsonl");
  EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 4) << metrics;
  // Again into the same directory: refused before anything is written.
  TrainRun again;
  const easel::api::Status st = again.open(cfg);
  EXPECT_EQ(st.code(), Code::invalid_argument);
  EXPECT_NE(st.message().find("already holds the results of a run"), std::string::npos)
      << st.message();
  EXPECT_EQ(slurp(whole_dir + "/metrics.jsonl"), metrics);
  return whole;
}

// A run with a directory (`out`) writes what easel train writes; interrupt() (as a signal
// handler calls it) stops it with a checkpoint, and a resume through read_run_settings goes on
// to the numbers of the run that never stopped; an earlier run's results and a changed setting
// are refused by open().
TEST(ApiRunDirectory, WritesTheRunAndResumesItExactly) {
  Data d = memory_data();
  const std::vector<Record> whole = whole_run(d, fresh_dir("whole"));
  ASSERT_EQ(whole.size(), 4u);

  const std::string part_dir = fresh_dir("part");
  std::vector<Record> part;
  {
    Config cfg = small_config(20);
    ASSERT_TRUE(cfg.set("out", part_dir).ok());
    TrainRun run;
    run.on_evaluation([&](const Evaluation& e) {
      part.emplace_back(e.step, e.train_loss, e.test_accuracy);
      if (e.step == 10) run.interrupt(15);
      return true;
    });
    ASSERT_TRUE(run.train(cfg, d).ok());
    EXPECT_EQ(run.summary().stop_reason, easel::api::StopReason::interrupted);
    EXPECT_EQ(run.summary().stop_signal, 15);
    EXPECT_EQ(run.summary().steps, 10);
    EXPECT_FALSE(run.summary().stopped);  // not a callback's request
    EXPECT_TRUE(exists(part_dir + "/checkpoint.bin"));
    EXPECT_NE(slurp(part_dir + "/summary.json").find("\"stopped\": \"interrupted\""),
              std::string::npos);
  }
  std::vector<std::pair<std::string, std::string>> settings;
  ASSERT_TRUE(easel::api::read_run_settings(part_dir, &settings).ok());
  EXPECT_TRUE(Config::may_change_on_resume("iterations"));
  EXPECT_FALSE(Config::may_change_on_resume("lr"));
  EXPECT_FALSE(Config::may_change_on_resume("out"));
  EXPECT_FALSE(Config::may_change_on_resume("no-such-setting"));
  {  // a setting the checkpoint fixes, changed: refused, naming it
    Config cfg;
    for (const auto& [name, text] : settings)
      ASSERT_TRUE(cfg.set(name, text).ok()) << name;
    ASSERT_TRUE(cfg.set("resume", part_dir).ok());
    ASSERT_TRUE(cfg.set("lr", "0.02").ok());
    TrainRun run;
    const easel::api::Status st = run.open(cfg);
    EXPECT_EQ(st.code(), Code::invalid_argument);
    EXPECT_NE(st.message().find("'lr' is 0.02, but the checkpoint's run had 0.01"),
              std::string::npos)
        << st.message();
  }
  Config cfg;
  for (const auto& [name, text] : settings)
    ASSERT_TRUE(cfg.set(name, text).ok()) << name;
  ASSERT_TRUE(cfg.set("resume", part_dir).ok());
  TrainRun run;
  run.on_evaluation([&](const Evaluation& e) {
    part.emplace_back(e.step, e.train_loss, e.test_accuracy);
    return true;
  });
  ASSERT_TRUE(run.train(cfg, d).ok());
  EXPECT_EQ(run.summary().stop_reason, easel::api::StopReason::completed);
  EXPECT_EQ(run.summary().directory, part_dir);
  EXPECT_EQ(part, whole);
  const std::string metrics = slurp(part_dir + "/metrics.jsonl");
  EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 4) << metrics;
  EXPECT_EQ(easel::api::read_run_settings(fresh_dir("none"), &settings).code(), Code::not_found);
}

// A run that diverges ends with its summary: internal, with the reason and the message.
// Every public StopReason prints the name include/easel/run.hpp lists (and summary.json uses).
TEST(ApiRun, EveryStopReasonHasItsName) {
  using easel::api::StopReason;
  const std::pair<StopReason, const char*> names[] = {
      {StopReason::none, "none"},
      {StopReason::completed, "completed"},
      {StopReason::target, "target"},
      {StopReason::requested, "requested"},
      {StopReason::interrupted, "interrupted"},
      {StopReason::diverged, "diverged"},
      {StopReason::stalled, "stalled"},
  };
  for (const auto& [reason, name] : names)
    EXPECT_STREQ(easel::api::stop_reason_name(reason), name);
}

TEST(ApiRun, DivergedIsInternalWithItsReason) {
  Data d;
  ASSERT_TRUE(d.load("synthetic:512:1x8x8:4").ok());
  Config cfg = small_config(40);
  ASSERT_TRUE(cfg.set("seed", "1").ok());
  ASSERT_TRUE(cfg.set("eval-every", "20").ok());
  ASSERT_TRUE(cfg.set("lr", "10").ok());
  ASSERT_TRUE(cfg.set("alpha", "1").ok());
  TrainRun run;
  const easel::api::Status st = run.train(cfg, d);
  EXPECT_EQ(st.code(), Code::internal);
  EXPECT_EQ(run.summary().stop_reason, easel::api::StopReason::diverged);
  EXPECT_EQ(st.message(), run.summary().stop_message);
  EXPECT_NE(st.message().find("diverged"), std::string::npos) << st.message();
  EXPECT_STREQ(easel::api::stop_reason_name(run.summary().stop_reason), "diverged");
}

TEST(ApiWeights, SaveAndLoadRoundTripAndBadFilesAreNamed) {
  const std::string path = ::testing::TempDir() + "easel_api_weights.bin";
  const std::vector<float> w = {1.5f, -2.f, 0.f, 3.25f};
  ASSERT_TRUE(easel::api::save_weights(path, w).ok());
  std::vector<float> back;
  ASSERT_TRUE(easel::api::load_weights(path, &back).ok());
  EXPECT_EQ(back, w);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("not weights at all", f);
  std::fclose(f);
  easel::api::Status st = easel::api::load_weights(path, &back);
  EXPECT_EQ(st.code(), Code::data_error);
  EXPECT_NE(st.message().find(path), std::string::npos);
  EXPECT_EQ(easel::api::load_weights(path + ".none", &back).code(), Code::not_found);
  std::remove(path.c_str());
}

}  // namespace
