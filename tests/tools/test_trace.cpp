// --trace (engine/trace.hpp, run/trace_run.cpp): the timeline file of a run is valid Chrome
// trace-event JSON with a track per group and one for the main thread, every span nested within
// its track and within a round of the main thread, a forward and a backward span for each layer;
// it is bounded for a run of any length and written whatever way the run stops; a bad path is
// one line, exit 2, before training.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "algos/list.hpp"
#include "engine/trace.hpp"
#include "tests/algos/small_run.hpp"
#include "tests/tools/run_easel.hpp"

namespace easel {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path tmp_dir(const std::string& name) {
  return easel_test::tmp_dir("trace", name);
}

struct Span {
  int64_t b, e;  // nanoseconds
  std::string name, cat;
  int64_t unit;
};

// A trace file read back: its track names and spans by tid.
struct Trace {
  std::map<int, std::string> names;
  std::map<int, std::vector<Span>> spans;
};

int64_t ns(const json& v) {
  return std::llround(v.get<double>() * 1000.0);
}

Trace read_trace(const fs::path& p) {
  Trace t;
  const json j = json::parse(easel_test::slurp(p));  // throws (fails the test) when not JSON
  for (const json& e : j.at("traceEvents")) {
    const std::string ph = e.at("ph");
    const int tid = e.at("tid");
    if (ph == "M" && e.at("name") == "thread_name") t.names[tid] = e.at("args").at("name");
    if (ph != "X") continue;
    const json& args = e.at("args");
    const int64_t unit = args.begin().value().get<int64_t>();
    const int64_t b = ns(e.at("ts"));
    t.spans[tid].push_back({b, b + ns(e.at("dur")), e.at("name"), e.at("cat"), unit});
  }
  return t;
}

// Every span of each track lies wholly within any span it starts in; every group span lies
// within one of the main thread's rounds.
void expect_nested(const Trace& t) {
  for (const auto& [tid, spans_in] : t.spans) {
    std::vector<Span> s = spans_in;
    std::sort(s.begin(), s.end(),
              [](const Span& a, const Span& b) { return a.b != b.b ? a.b < b.b : a.e > b.e; });
    std::vector<int64_t> open;  // ends of the enclosing spans
    for (const Span& x : s) {
      EXPECT_LE(x.b, x.e);
      while (!open.empty() && open.back() <= x.b)
        open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(x.e, open.back())
            << "track " << tid << ": " << x.name << " at " << x.b << " leaves its enclosing span";
      }
      open.push_back(x.e);
    }
  }
  ASSERT_TRUE(t.spans.count(0));
  std::vector<std::pair<int64_t, int64_t>> rounds;
  for (const Span& x : t.spans.at(0))
    if (x.name == "round") rounds.emplace_back(x.b, x.e);
  ASSERT_FALSE(rounds.empty());
  std::sort(rounds.begin(), rounds.end());
  for (const auto& [tid, spans] : t.spans) {
    if (tid == 0) continue;
    for (const Span& x : spans) {
      auto r = std::upper_bound(rounds.begin(), rounds.end(), std::make_pair(x.b, INT64_MAX));
      ASSERT_NE(r, rounds.begin()) << x.name << " before the first round";
      --r;
      EXPECT_TRUE(x.b >= r->first && x.e <= r->second)
          << "track " << tid << ": " << x.name << " outside its round";
    }
  }
}

std::set<int64_t> units(const std::vector<Span>& spans) {
  std::set<int64_t> u;
  for (const Span& s : spans)
    u.insert(s.unit);
  return u;
}

TEST(Trace, TwoGroupSyncEasgdHasEveryTrackLayerAndPhase) {
  const fs::path d = tmp_dir("two");
  TrainConfig c = test::small_config("sync-easgd", 2);
  c.iterations = 40;
  c.eval_every = 20;
  c.trace = (d / "t.json").string();
  c.trace_steps = 10;
  c.trace_every = 7;
  auto r = train(c, test::small_data(), nullptr);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Trace t = read_trace(d / "t.json");
  EXPECT_EQ(t.names.size(), 3u);  // no centre thread: no centre track
  EXPECT_EQ(t.names.at(1), "group 0");
  EXPECT_EQ(t.names.at(2), "group 1");
  EXPECT_NE(t.names.at(0).find("main"), std::string::npos);
  expect_nested(t);

  int evaluations = 0;
  for (const Span& s : t.spans.at(0))
    evaluations += s.name == "evaluation";
  EXPECT_EQ(evaluations, 2);
  // Steps 0-9 whole, then 10, 17, 24, 31 and 38.
  const std::set<int64_t> kept = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 17, 24, 31, 38};
  for (int tid : {1, 2}) {
    const std::vector<Span>& spans = t.spans.at(tid);
    EXPECT_EQ(units(spans), kept) << "track " << tid;
    std::map<std::string, int> count;
    for (const Span& s : spans)
      count[s.cat + ":" + s.name] += 1;
    const int steps = static_cast<int>(kept.size());
    for (const LayerInfo& l : r->info.layers) {
      EXPECT_EQ(count["forward:" + l.name], steps) << l.name;
      EXPECT_EQ(count["backward:" + l.name], steps) << l.name;
    }
    EXPECT_EQ(count["compute:gradient"], steps);
    EXPECT_EQ(count["compute:forward"], steps);
    EXPECT_EQ(count["compute:backward"], steps);
    EXPECT_EQ(count["comm:elastic exchange"], steps);     // tau 1: every step
    EXPECT_EQ(count["wait:wait for the groups"], steps);  // the mirrored exchange's one wait
  }
}

// A long run keeps the first trace_steps steps, then a sample whose period doubles: never more
// than trace_steps + kTraceSampledSteps steps per group, spread to the run's end.
TEST(Trace, LongRunIsBounded) {
  const fs::path d = tmp_dir("long");
  TrainConfig c = test::small_config("sync-easgd", 2);
  c.iterations = 700;
  c.eval_every = 350;
  c.trace = (d / "t.json").string();
  c.trace_steps = 3;
  c.trace_every = 1;
  auto r = train(c, test::small_data(), nullptr);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Trace t = read_trace(d / "t.json");
  expect_nested(t);
  // Steps 3.. sampled every step until 256 are kept (3..258), then every 2nd (to 512), then
  // every 4th: 3, 7, ..., 699.
  std::set<int64_t> kept = {0, 1, 2};
  for (int64_t s = 3; s < 700; s += 4)
    kept.insert(s);
  for (int tid : {1, 2}) {
    const std::set<int64_t> u = units(t.spans.at(tid));
    EXPECT_LE(static_cast<int64_t>(u.size()), 3 + kTraceSampledSteps);
    EXPECT_EQ(u, kept) << "track " << tid;
  }
}

TEST(Trace, TrackKeepsAtMostFullPlusSampledUnits) {
  TraceTrack track("t", 1, 5, 3);
  static const char* kName = "x";
  for (int64_t u = 100; u < 1000100; ++u) {
    track.begin_unit(u);
    track.add(kName, kName, 0, 1);
  }
  EXPECT_LE(track.units_kept(), 5 + kTraceSampledSteps);
  EXPECT_GE(track.units_kept(), 5 + kTraceSampledSteps / 2);
  EXPECT_EQ(static_cast<int64_t>(track.spans().size()), track.units_kept());
  EXPECT_EQ(track.spans().front().unit, 100);
  EXPECT_GT(track.spans().back().unit, 1000100 - 2 * 1000000 / kTraceSampledSteps);
}

// Under mpirun each rank writes its own file.
TEST(Trace, RankFilesAreNamedByRank) {
  EXPECT_EQ(trace_path_for_rank("d/t.json", 0), "d/t.json");
  EXPECT_EQ(trace_path_for_rank("d/t.json", 1), "d/t.rank1.json");
  EXPECT_EQ(trace_path_for_rank("t", 12), "t.rank12");
}

// Every algorithm: a valid, nested file with its groups' tracks, their layers and an exchange.
class TraceEveryAlgorithm : public ::testing::TestWithParam<std::string> {};

TEST_P(TraceEveryAlgorithm, WritesANestedTimeline) {
  const std::string algo = GetParam();
  const int groups = algo == "sgd" || algo == "msgd" ? 1 : 2;
  const fs::path d = tmp_dir("algo_" + algo);
  TrainConfig c = test::small_config(algo, groups);
  c.iterations = 12;
  c.eval_every = 6;
  c.trace = (d / "t.json").string();
  auto r = train(c, test::small_data(), nullptr);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Trace t = read_trace(d / "t.json");
  expect_nested(t);
  int stepped = 0;  // groups with spans
  for (int g = 0; g < groups; ++g) {
    EXPECT_EQ(t.names.at(1 + g), "group " + std::to_string(g));
    // An asynchronous algorithm's group may have taken no step of so short a run.
    if (!t.spans.count(1 + g)) continue;
    stepped += 1;
    std::set<std::string> names;
    for (const Span& s : t.spans.at(1 + g))
      names.insert(s.cat + ":" + s.name);
    for (const LayerInfo& l : r->info.layers)
      EXPECT_TRUE(names.count("forward:" + l.name)) << l.name;
    const bool exchanges = groups > 1;
    const bool any_comm = std::any_of(
        names.begin(), names.end(), [](const std::string& n) { return n.rfind("comm:", 0) == 0; });
    EXPECT_EQ(any_comm, exchanges) << algo;
  }
  EXPECT_GE(stepped, 1);
}

// The file's otherData holds the bytes the run exchanges per image, summary.json's figure: for
// diloco's int8 exchange what its compressed ring sends.
TEST(Trace, OtherDataHoldsTheBytesExchangedPerImage) {
  for (const char* precision : {"fp32", "int8"}) {
    const fs::path d = tmp_dir(std::string("bytes_") + precision);
    TrainConfig c = test::small_config("diloco", 3);
    c.iterations = 8;
    c.eval_every = 8;
    c.tau = 4;
    c.trace = (d / "t.json").string();
    ASSERT_TRUE(set_setting(c, "exchange-precision", precision).ok());
    auto r = train(c, test::small_data(), nullptr);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const json j = json::parse(easel_test::slurp(d / "t.json"));
    const double b =
        std::stod(j.at("otherData").at("exchanged_bytes_per_image").get<std::string>());
    EXPECT_GT(r->exchanged_bytes_per_image, 0);
    EXPECT_NEAR(b, r->exchanged_bytes_per_image, 1e-5 * r->exchanged_bytes_per_image) << precision;
  }
}

std::vector<std::string> algo_names() {
  std::vector<std::string> v;
  for (const AlgoEntry& a : algo_list())
    v.push_back(a.name);
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, TraceEveryAlgorithm, ::testing::ValuesIn(algo_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// A signal mid-round: the run stops interrupted, and the file is whole, with the checkpoint.
class Interrupter : public TrainObserver {
 public:
  bool wants_checkpoints() const override { return true; }
  void on_setup(Run& run) override {
    run.groups[0]->before_step = [this](Group& g) {
      if (g.steps.load() == 5) flag.store(SIGINT);
    };
  }
  const std::atomic<int>* stop_flag() const override { return &flag; }
  std::atomic<int> flag{0};
};

TEST(Trace, InterruptedRunWritesAWholeFile) {
  const fs::path d = tmp_dir("interrupted");
  TrainConfig c = test::small_config("sync-easgd", 2);
  c.iterations = 40;
  c.eval_every = 20;
  c.trace = (d / "t.json").string();
  Interrupter obs;
  auto r = train(c, test::small_data(), &obs);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->stopped, StopReason::interrupted);
  const Trace t = read_trace(d / "t.json");
  expect_nested(t);
  bool checkpoint = false;
  for (const Span& s : t.spans.at(0))
    checkpoint = checkpoint || s.name == "checkpoint";
  EXPECT_TRUE(checkpoint);
  EXPECT_LT(*units(t.spans.at(1)).rbegin(), 10);
}

const char* kTiny =
    " --net mlp --data synthetic:512:1x8x8:4 --iterations 20 --eval-every 10 --batch 16"
    " --groups 2 --threads-per-group 1 --oversubscribe --progress none --log-level warn";

TEST(Trace, CliWritesTheFileAndRefusesABadPathBeforeTraining) {
  const fs::path d = tmp_dir("cli");
  easel_test::Out o = easel_test::run_easel("train --help", "", "trace");
  EXPECT_NE(o.out.find("--trace "), std::string::npos);
  EXPECT_NE(o.out.find("trace-steps + 256"), std::string::npos);  // the bound

  for (const std::string& bad : {(d / "no" / "such" / "t.json").string(), d.string()}) {
    o = easel_test::run_easel(
        "train" + std::string(kTiny) + " --out " + (d / "bad").string() + " --trace " + bad, "",
        "trace");
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_NE(o.err.find("--trace"), std::string::npos) << o.err;
    EXPECT_FALSE(fs::exists(d / "bad")) << "training started";
  }
  o = easel_test::run_easel(
      "train" + std::string(kTiny) + " --out " + (d / "bad").string() + " --trace-every 0", "",
      "trace");
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_NE(o.err.find("--trace-every"), std::string::npos) << o.err;

  o = easel_test::run_easel("train" + std::string(kTiny) + " --out " + (d / "run").string() +
                                " --trace " + (d / "t.json").string(),
                            "", "trace");
  ASSERT_EQ(o.code, 0) << o.err;
  const Trace t = read_trace(d / "t.json");
  expect_nested(t);
  std::set<std::string> main;
  for (const Span& s : t.spans.at(0))
    main.insert(s.name);
  EXPECT_EQ(main, (std::set<std::string>{"round", "evaluation", "checkpoint"}));
  EXPECT_TRUE(t.spans.count(1) && t.spans.count(2));
}

}  // namespace
}  // namespace easel
