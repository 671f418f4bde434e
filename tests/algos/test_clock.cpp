// `easel train --clock FILE` (run/sim_clock.hpp): the async schedule is repeatable and orders the
// exchanges by the described machine's prices, a sync algorithm's math is untouched, and the
// simulated seconds per iteration are `easel model`'s.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "model/machine.hpp"
#include "nets/models/models.hpp"
#include "run/checkpoint.hpp"
#include "run/model_request.hpp"
#include "run/run_plan.hpp"
#include "tests/algos/small_run.hpp"

namespace easel {
namespace {

using test::run;
using test::small_config;
using test::small_data;

// The records a run reports (metrics.jsonl's), and the centre's order of service.
struct Recorder : TrainObserver {
  std::vector<EvalRecord> records;
  std::vector<int> served;
  void on_setup(Run& r) override { r.serve_log = &served; }
  void on_eval(const EvalRecord& r) override { records.push_back(r); }
};

TrainConfig clock_config(const std::string& algo, int groups, int tau) {
  TrainConfig c = small_config(algo, groups);
  c.tau = tau;
  c.clock = "gpu8-pcie";
  return c;
}

// Every field of metrics.jsonl's record but the two wall-clock ones (wall_seconds, eval_seconds).
void expect_same_records(const std::vector<EvalRecord>& a, const std::vector<EvalRecord>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("record " + std::to_string(i));
    EXPECT_EQ(a[i].step, b[i].step);
    EXPECT_EQ(a[i].images, b[i].images);
    EXPECT_EQ(a[i].train_loss, b[i].train_loss);
    EXPECT_EQ(a[i].test_loss, b[i].test_loss);
    EXPECT_EQ(a[i].test_accuracy, b[i].test_accuracy);
    EXPECT_EQ(a[i].train_seconds, b[i].train_seconds);
    EXPECT_EQ(a[i].images_per_second, b[i].images_per_second);
    EXPECT_EQ(a[i].group_steps, b[i].group_steps);
    EXPECT_EQ(a[i].staleness_mean, b[i].staleness_mean);
    EXPECT_EQ(a[i].staleness_max, b[i].staleness_max);
    ASSERT_EQ(a[i].group_times.size(), b[i].group_times.size());
    for (size_t g = 0; g < a[i].group_times.size(); ++g) {
      EXPECT_EQ(a[i].group_times[g].compute, b[i].group_times[g].compute);
      EXPECT_EQ(a[i].group_times[g].comm, b[i].group_times[g].comm);
      EXPECT_EQ(a[i].group_times[g].wait, b[i].group_times[g].wait);
    }
  }
}

ClockPrices prices_for(const TrainConfig& c) {
  auto plan = explain_run(c, small_data(), DeviceRegistry{});
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_TRUE(plan.ok() && plan->clock);
  return plan.ok() && plan->clock ? *plan->clock : ClockPrices{};
}

TEST(Clock, AsyncEasgdRunsTwiceTheSameBits) {
  const TrainConfig c = clock_config("async-easgd", 4, 2);
  Recorder a, b;
  run(c, &a);
  run(c, &b);
  ASSERT_EQ(a.records.size(), 2u);
  expect_same_records(a.records, b.records);
  EXPECT_EQ(a.served, b.served);
}

// A clocked run resumes at its checkpoint's simulated time: from the checkpoint at 18 (of 45,
// an evaluation every 9), async-easgd's schedule, centre and simulated seconds go on as in the
// run that never stopped, every later record's fields and the final weights to the bit. A
// checkpoint without a clock does not go on on one, nor one taken on a clock without it.
TEST(Clock, AResumedRunGoesOnAtTheCheckpointsTime) {
  TrainConfig c = clock_config("async-easgd", 3, 2);
  c.iterations = 45;
  c.eval_every = 9;
  struct Keeper : Recorder {
    bool wants_checkpoints() const override { return true; }
    Status on_checkpoint(Checkpoint ck) override {
      if (ck.iterations_done == 18) kept = std::move(ck);
      return {};
    }
    std::optional<Checkpoint> kept;
  };
  Keeper whole;
  auto w = train(c, small_data(), &whole);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_TRUE(whole.kept.has_value());
  EXPECT_GT(whole.kept->clock_seconds, 0);
  EXPECT_EQ(whole.kept->clock_seconds, whole.records[1].train_seconds);
  const Checkpoint ck = decode_checkpoint(encode_checkpoint(*whole.kept), "mem").value();
  Keeper resumed;
  auto r = train(c, small_data(), &resumed, {}, &ck);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(whole.records.size(), 5u);
  expect_same_records(resumed.records,
                      std::vector<EvalRecord>(whole.records.begin() + 2, whole.records.end()));
  EXPECT_EQ(resumed.served, std::vector<int>(whole.served.end() -
                                                 static_cast<std::ptrdiff_t>(resumed.served.size()),
                                             whole.served.end()));
  EXPECT_TRUE(r->final_weights == w->final_weights);
  EXPECT_EQ(r->train_seconds, w->train_seconds);

  TrainConfig plain = c;
  plain.clock.clear();
  auto refused = train(plain, small_data(), nullptr, {}, &ck);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("taken on a clock (--clock)"), std::string::npos)
      << refused.status().message();
  Checkpoint unclocked = ck;
  unclocked.clock_seconds = -1;
  refused = train(c, small_data(), nullptr, {}, &unclocked);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("taken without --clock"), std::string::npos)
      << refused.status().message();
}

// The schedule's rule, written out: the group of the smallest (time, id) takes the next
// group-step of the round's budget; every tau-th step of a group ends in an exchange that waits
// for the centre and holds it for its price. One round (the whole run): the order the centre
// serves the groups, each group's simulated times and the round's end.
struct Schedule {
  std::vector<int> served;
  std::vector<GroupTimes> times;
  double end = 0;
};
Schedule expected_schedule(const ClockPrices& p, int groups, int64_t budget, int tau) {
  Schedule out;
  out.times.resize(static_cast<size_t>(groups));
  std::vector<double> t(static_cast<size_t>(groups), 0.0);
  std::vector<int64_t> steps(static_cast<size_t>(groups), 0);
  double free = 0;
  for (; budget > 0; --budget) {
    const auto g = static_cast<size_t>(std::min_element(t.begin(), t.end()) - t.begin());
    t[g] += p.step_seconds;
    out.times[g].compute += p.step_seconds;
    if (++steps[g] % tau == 0) {
      const double start = std::max(t[g], free);
      out.times[g].wait += start - t[g];
      out.times[g].comm += p.exchange_seconds;
      t[g] = start + p.exchange_seconds;
      free = t[g];
      out.served.push_back(static_cast<int>(g));
    }
  }
  out.end = *std::max_element(t.begin(), t.end());
  return out;
}

// 3 groups whose exchanges (every 2 steps) take longer than 2 steps: the centre is the
// bottleneck, so the groups queue at it.
TEST(Clock, ExchangesFollowThePrices) {
  TrainConfig c = clock_config("async-easgd", 3, 2);
  c.iterations = 40;
  c.eval_every = 40;
  const ClockPrices p = prices_for(c);
  ASSERT_TRUE(p.scheduled);
  ASSERT_GT(p.exchange_seconds, 2 * p.step_seconds);
  Recorder r;
  run(c, &r);
  const Schedule want = expected_schedule(p, 3, 40 * 3, 2);
  EXPECT_EQ(r.served, want.served);
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_DOUBLE_EQ(r.records[0].train_seconds, want.end);
  for (size_t g = 0; g < 3; ++g) {
    SCOPED_TRACE("group " + std::to_string(g));
    EXPECT_DOUBLE_EQ(r.records[0].group_times[g].compute, want.times[g].compute);
    EXPECT_DOUBLE_EQ(r.records[0].group_times[g].comm, want.times[g].comm);
    EXPECT_DOUBLE_EQ(r.records[0].group_times[g].wait, want.times[g].wait);
  }
}

TEST(Clock, SyncEasgdKeepsItsBits) {
  TrainConfig c = small_config("sync-easgd", 2);
  c.tau = 2;
  Recorder plain, clocked;
  run(c, &plain);
  c.clock = "gpu8-pcie";
  run(c, &clocked);
  ASSERT_EQ(plain.records.size(), 2u);
  ASSERT_EQ(clocked.records.size(), plain.records.size());
  for (size_t i = 0; i < plain.records.size(); ++i) {
    EXPECT_EQ(plain.records[i].train_loss, clocked.records[i].train_loss);
    EXPECT_EQ(plain.records[i].test_loss, clocked.records[i].test_loss);
    EXPECT_EQ(plain.records[i].test_accuracy, clocked.records[i].test_accuracy);
  }
}

// `easel model`'s seconds per iteration for c on its clock's machine.
double model_seconds(const TrainConfig& c, int groups) {
  auto m = model::load_machine(model::resolve_machine_path(c.clock).value());
  EXPECT_TRUE(m.ok());
  const DataSplit& d = small_data();
  auto spec = build_model(c.net, {d.train.channels, d.train.height, d.train.width, 4});
  EXPECT_TRUE(spec.ok());
  auto req = model_request(c, *spec, *m, groups);
  EXPECT_TRUE(req.ok()) << req.status().to_string();
  auto p = model::predict(*m, *req);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p->seconds_per_iteration;
}

TEST(Clock, SecondsPerIterationAreTheModels) {
  for (const char* algo : {"sync-easgd", "async-easgd"}) {
    SCOPED_TRACE(algo);
    const TrainConfig c = clock_config(algo, 4, 4);
    const TrainSummary s = run(c);
    ASSERT_EQ(s.steps, c.iterations);
    const double simulated = s.train_seconds / static_cast<double>(s.steps);
    const double predicted = model_seconds(c, 4);
    EXPECT_NEAR(simulated, predicted, 0.05 * predicted);
  }
}

}  // namespace
}  // namespace easel
