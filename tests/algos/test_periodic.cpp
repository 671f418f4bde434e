// local-sgd, slowmo and diloco (algos/periodic.hpp, algos/outer_ops.hpp): each update rule
// against a hand computation for 2 and 3 groups, the compressed exchange's error bounds and
// error feedback, AdamW's step by its formula, resume equal to the uninterrupted run bit for bit,
// and the flags they take refused, in one line naming the flag, where they do not apply.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include "algos/exchange.hpp"
#include "algos/list.hpp"
#include "algos/periodic.hpp"
#include "engine/comm/comm.hpp"
#include "engine/span_ops.hpp"
#include "run/checkpoint.hpp"
#include "run/groups.hpp"
#include "run/trainer.hpp"
#include "tests/algos/small_run.hpp"
#include "tests/engine/rank_threads.hpp"

namespace easel {
namespace {

// p groups of one thread, an arena of one segment of kN floats, all starting from x0; group i's
// gradient is the constant c_i (j) = 0.1 (i + 1) (j + 1) - 0.05 j, whatever its weights.
constexpr int64_t kN = 5;
float x0(int64_t j) {
  return 1.f - 0.25f * static_cast<float>(j);
}
float grad(int i, int64_t j) {
  return 0.1f * static_cast<float>(i + 1) * static_cast<float>(j + 1) -
         0.05f * static_cast<float>(j);
}

struct Hand {
  std::vector<std::unique_ptr<WorkerThread>> workers;
  ArenaLayout layout;
  Run run;
  std::unique_ptr<Algorithm> algo;

  void build(int p, const std::string& name, int tau) {
    Segment s;
    s.count = kN;
    layout.add(s);
    const int64_t n = layout.total_floats();
    for (int i = 0; i < p; ++i) {
      GroupSpec spec;
      spec.id = i;
      spec.cpus = {0};
      auto w = WorkerThread::start(spec, false);
      ASSERT_TRUE(w.ok());
      auto g = std::make_unique<Group>();
      g->id = g->global_id = i;
      g->worker = w->get();
      workers.push_back(std::move(w).value());
      for (Arena* a : {&g->weights, &g->diff, &g->momentum})
        *a = Arena::create(n, MemKind::dram).value();
      for (int64_t j = 0; j < kN; ++j)
        g->weights.data()[j] = x0(j);
      g->fake_gradient = [](Group& gr) {
        for (int64_t j = 0; j < kN; ++j)
          gr.diff.data()[j] = grad(gr.id, j);
      };
      run.groups.push_back(std::move(g));
    }
    run.layout = &layout;
    run.params.lr.policy = LrSchedule::Policy::fixed;
    run.params.lr.base = 0.1;
    run.params.momentum = 0;  // plain SGD inside: w <- w - lr g
    run.params.weight_decay = 0;
    run.params.tau = tau;
    run.comm = make_shm_comm(p, CollectiveAlgo::tree);
    algo = make_algorithm(name).value();
  }
  void prepare() { ASSERT_TRUE(algo->prepare(run).ok()); }
  void steps(int64_t k) {
    run_on_groups(
        run, [&](Group& g) { algo->run_round(run, g, k); }, [] {});
  }
};

// The groups' mean gradient at element j.
double mean_grad(int p, int64_t j) {
  double s = 0;
  for (int i = 0; i < p; ++i)
    s += grad(i, j);
  return s / p;
}

// Two exchanges of tau = 2 plain-SGD steps each, from x0: every group holds the anchor the rule
// gives, computed here by hand in double: after tau steps w_i = x - tau lr c_i, so the mean
// pseudo-gradient is d = tau lr mean(c).
TEST(Periodic, EachRuleMatchesTheHandComputationFor2And3Groups) {
  const double lr = 0.1;
  const int tau = 2;
  for (int p : {2, 3})
    for (const std::string name : {"local-sgd", "slowmo", "diloco"}) {
      SCOPED_TRACE(name + " with " + std::to_string(p) + " groups");
      Hand h;
      h.build(p, name, tau);
      const double alpha = name == "slowmo" ? 1.0 : 0.7, beta = name == "slowmo" ? 0.5 : 0.9;
      h.run.params.outer_lr = static_cast<float>(alpha);
      h.run.params.outer_momentum = static_cast<float>(beta);
      h.prepare();
      h.steps(3);  // one exchange, and one step past it
      h.steps(1);  // the second exchange
      for (int64_t j = 0; j < kN; ++j) {
        const double d = tau * lr * mean_grad(p, j);
        double x = x0(j), u = 0;
        for (int e = 0; e < 2; ++e) {
          if (name == "local-sgd") {
            x -= d;
          } else if (name == "slowmo") {
            u = beta * u + d / lr;
            x -= alpha * lr * u;
          } else {
            u = beta * u + d;
            x -= alpha * (d + beta * u);
          }
        }
        for (int i = 0; i < p; ++i)
          EXPECT_NEAR(h.run.groups[i]->weights.data()[j], x, 1e-5) << "group " << i << " j " << j;
        EXPECT_NEAR(h.algo->eval_weights(h.run)[j], x, 1e-5);
      }
    }
  // One number by hand: local-sgd, 2 groups, element 0: c = 0.1 and 0.2, so after one exchange
  // x = 1 - 2 x 0.1 x 0.15 = 0.97.
  Hand h;
  h.build(2, "local-sgd", 2);
  h.prepare();
  h.steps(2);
  EXPECT_NEAR(h.run.groups[1]->weights.data()[0], 0.97f, 1e-6);
}

// Between exchanges the groups step on their own (no communication): after tau - 1 steps group
// i holds x0 - (tau - 1) lr c_i.
TEST(Periodic, GroupsStepAloneBetweenExchanges) {
  Hand h;
  h.build(3, "diloco", 4);
  h.prepare();
  h.steps(3);
  for (int i = 0; i < 3; ++i)
    for (int64_t j = 0; j < kN; ++j)
      EXPECT_NEAR(h.run.groups[i]->weights.data()[j], x0(j) - 3 * 0.1 * grad(i, j), 1e-6);
}

// --optimizer adamw inside: the groups' steps are AdamW's (checked here against its formula in
// double; tests/algos/adamw_check.py checks the kernel against torch.optim.AdamW).
TEST(Periodic, AdamwInnerStepIsTheFormula) {
  Hand h;
  h.build(2, "local-sgd", 100);
  h.run.params.optimizer = Optimizer::adamw;
  h.run.params.weight_decay = 0.01f;
  h.prepare();
  h.steps(3);
  const double lr = 0.1, wd = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  for (int i = 0; i < 2; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      double w = x0(j), m = 0, v = 0;
      for (int t = 1; t <= 3; ++t) {
        const double g = grad(i, j);
        w *= 1 - lr * wd;
        m = b1 * m + (1 - b1) * g;
        v = b2 * v + (1 - b2) * g * g;
        w -= lr / (1 - std::pow(b1, t)) * m / (std::sqrt(v / (1 - std::pow(b2, t))) + eps);
      }
      EXPECT_NEAR(h.run.groups[i]->weights.data()[j], w, 1e-5) << i << " " << j;
    }
}

TEST(ExchangePrecision, RoundTripErrorBoundsAndPayload) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0, 1);
  const int64_t n = 1000;
  std::vector<float> x(n);
  for (float& v : x)
    v = dist(rng) * (1 + 100 * static_cast<float>(&v - x.data() > 600));  // two scales of block
  std::vector<float> y = x;
  exchange_round_trip(y.data(), n, ExchangePrecision::fp32);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), n * sizeof(float)), 0);
  y = x;
  exchange_round_trip(y.data(), n, ExchangePrecision::bf16);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_LE(std::fabs(y[i] - x[i]), std::ldexp(std::fabs(x[i]), -8)) << i;
  y = x;
  exchange_round_trip(y.data(), n, ExchangePrecision::int8);
  for (int64_t b = 0; b < n; b += kInt8Block) {
    float amax = 0;
    for (int64_t i = b; i < std::min(n, b + kInt8Block); ++i)
      amax = std::max(amax, std::fabs(x[i]));
    const float s = amax / 127;
    for (int64_t i = b; i < std::min(n, b + kInt8Block); ++i) {
      EXPECT_LE(std::fabs(y[i] - x[i]), s / 2 * (1 + 1e-5f)) << i;
      const float q = y[i] / s;  // an integer of at most 127 in magnitude
      EXPECT_NEAR(q, std::nearbyint(q), 1e-3f) << i;
      EXPECT_LE(std::fabs(q), 127.001f);
    }
  }
  EXPECT_EQ(exchange_payload_bytes(1000, ExchangePrecision::fp32), 4000);
  EXPECT_EQ(exchange_payload_bytes(1000, ExchangePrecision::bf16), 2000);
  EXPECT_EQ(exchange_payload_bytes(1000, ExchangePrecision::int8), 1000 + 4 * 4);
}

// An int8 exchange is the compressed allreduce of the groups' pseudo-gradients (each d_i =
// tau lr c_i after tau plain-SGD steps from x0), so every group ends on the same bits: x0 less
// the mean of that allreduce.
TEST(Periodic, Int8ExchangeIsTheCompressedAllreduce) {
  const int p = 3, tau = 2;
  Hand h;
  h.build(p, "local-sgd", tau);
  h.run.params.precision = ExchangePrecision::int8;
  // Dyadic gradients and lr: every step and pseudo-gradient exact, whatever the compiler fuses.
  auto dyadic = [](int i, int64_t j) {
    return static_cast<float>((i + 1) * (j + 1)) / 8 - j / 16.f;
  };
  for (auto& g : h.run.groups)
    g->fake_gradient = [dyadic](Group& gr) {
      for (int64_t j = 0; j < kN; ++j)
        gr.diff.data()[j] = dyadic(gr.id, j);
    };
  h.run.params.lr.base = 0.125;
  h.prepare();
  h.steps(tau);
  const int64_t n = h.run.arena_floats();  // kN and the arena's padding (zero)
  std::vector<std::vector<float>> d(p, std::vector<float>(n, 0.f));
  for (int i = 0; i < p; ++i)
    for (int64_t j = 0; j < kN; ++j) {  // the same float ops as the groups'
      float w = x0(j);
      for (int k = 0; k < tau; ++k)
        w -= 0.125f * dyadic(i, j);
      d[i][j] = x0(j) - w;
    }
  auto comm = make_shm_comm(p, CollectiveAlgo::tree);
  test::run_ranks(p, [&](int r) {
    comm->allreduce_compressed(r, d[r].data(), d[r].data(), n, WireFormat::int8, nullptr);
  });
  for (int64_t j = 0; j < kN; ++j) {
    volatile float mean = d[0][j] * (1.f / p);  // two roundings, as span_scale then x -= d
    const float x = x0(j) - mean;
    for (int i = 0; i < p; ++i)
      EXPECT_EQ(h.run.groups[i]->weights.data()[j], x) << "group " << i << " j " << j;
    EXPECT_NEAR(x, x0(j) - tau * 0.125 * (dyadic(0, j) + dyadic(1, j) + dyadic(2, j)) / 3, 0.01);
  }
}

// The run's summary counts the bytes sent per image: a compressed exchange's, what its ring
// sends (all groups: 2 (p - 1) packed chunks each) over the images of tau steps of every group;
// sync-sgd's, its fp32 arena per step.
TEST(Periodic, SummaryCountsExchangedBytesPerImage) {
  TrainConfig c = test::small_config("diloco", 3);
  c.iterations = 8;
  c.tau = 4;
  ASSERT_TRUE(set_setting(c, "exchange-precision", "int8").ok());
  auto r = train(c, test::small_data(), nullptr);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const int64_t n = static_cast<int64_t>(r->final_weights.size());
  int64_t packed = 0;  // the three chunks, int8 with their scales, in whole floats
  for (int j = 0; j < 3; ++j) {
    const int64_t m = (n * (j + 1)) / 3 - (n * j) / 3;
    packed += 4 * ((m + 255) / 256 + (m + 3) / 4);
  }
  EXPECT_DOUBLE_EQ(r->exchanged_bytes_per_image, 2.0 * 2 * packed / (3 * 4.0 * 16));
  c = test::small_config("sync-sgd", 2);
  c = test::small_config("sync-sgd", 2);
  c.iterations = 4;
  r = train(c, test::small_data(), nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->exchanged_bytes_per_image, 4.0 * static_cast<double>(n) / 16);
  c = test::small_config("msgd", 1);
  c.iterations = 4;
  r = train(c, test::small_data(), nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exchanged_bytes_per_image, 0);
}

class Keeper : public TrainObserver {
 public:
  bool wants_checkpoints() const override { return true; }
  Status on_checkpoint(Checkpoint ck) override {
    if (ck.iterations_done == 27) kept = ck;
    return {};
  }
  std::optional<Checkpoint> kept;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Checkpointed mid-period (27 is not a multiple of tau 4), with the outer momentum, AdamW's
// moments and the error-feedback residuals in it: the resumed run ends on the same bits.
TEST(Periodic, ResumeEqualsUninterrupted) {
  struct Case {
    const char* algo;
    int groups;
    const char* optimizer;
    const char* precision;
  };
  for (const Case& k : {Case{"local-sgd", 3, "msgd", "fp32"}, Case{"slowmo", 2, "msgd", "bf16"},
                        Case{"diloco", 2, "adamw", "int8"}, Case{"diloco", 3, "msgd", "int8"}}) {
    SCOPED_TRACE(std::string(k.algo) + " " + k.optimizer + " " + k.precision);
    TrainConfig c = test::small_config(k.algo, k.groups);
    c.iterations = 45;
    c.eval_every = 9;
    c.tau = 4;
    c.lr = k.optimizer == std::string("adamw") ? 0.002 : 0.05;
    ASSERT_TRUE(set_setting(c, "optimizer", k.optimizer).ok());
    ASSERT_TRUE(set_setting(c, "exchange-precision", k.precision).ok());
    Keeper keep;
    auto whole = train(c, test::small_data(), &keep);
    ASSERT_TRUE(whole.ok()) << whole.status().to_string();
    ASSERT_TRUE(keep.kept.has_value());
    const Checkpoint ck = decode_checkpoint(encode_checkpoint(*keep.kept), "mem").value();
    auto resumed = train(c, test::small_data(), nullptr, {}, &ck);
    ASSERT_TRUE(resumed.ok()) << resumed.status().to_string();
    EXPECT_TRUE(same_bits(resumed->final_weights, whole->final_weights));
    EXPECT_TRUE(same_bits(resumed->group0_weights, whole->group0_weights));
    EXPECT_EQ(resumed->test_loss, whole->test_loss);
    EXPECT_GT(whole->best_accuracy, 0.5);  // it learns
  }
}

// A pseudo-gradient that is not finite (a group's weight turned NaN by its step, unseen by any
// loss before the meeting) stops the run as diverged in every precision under --on-failure stop:
// the compressed exchange puts it in every group's anchor as the fp32 allreduce does, and the
// run's check finds it. Under drop (the default) the replica is checked before the meeting and
// its group dropped: the run completes with the other, its anchor finite.
TEST(Periodic, NonFiniteExchangeStopsTheRunAsInFp32) {
  for (const char* precision : {"fp32", "bf16", "int8"})
    for (OnFailure mode : {OnFailure::stop, OnFailure::drop}) {
      SCOPED_TRACE(std::string(precision) + (mode == OnFailure::stop ? " stop" : " drop"));
      TrainConfig c = test::small_config("local-sgd", 2);
      c.iterations = 36;
      c.eval_every = 9;
      c.tau = 4;
      c.on_failure = mode;
      c.momentum = 0;  // no state that would carry the NaN past the meeting on its own
      ASSERT_TRUE(set_setting(c, "exchange-precision", precision).ok());
      struct Poison : TrainObserver {
        // The last group's gradient: zero (its loss is not computed), NaN at one weight at step 13.
        void on_setup(easel::Run& run) override {
          run.groups.back()->fake_gradient = [](Group& g) {
            std::fill(g.diff.data(), g.diff.data() + g.diff.size(), 0.f);
            if (g.steps.load() == 13) g.diff.data()[0] = std::nanf("");
          };
        }
      } poison;
      auto r = train(c, test::small_data(), &poison);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      if (mode == OnFailure::drop) {
        EXPECT_EQ(r->stopped, StopReason::completed) << r->stop_message;
        ASSERT_EQ(r->group_failures.size(), 1u);
        EXPECT_EQ(r->group_failures[0].step, 15);  // its replica, before the meeting at 16
        EXPECT_TRUE(std::all_of(r->final_weights.begin(), r->final_weights.end(),
                                [](float v) { return std::isfinite(v); }));
        continue;
      }
      EXPECT_EQ(r->stopped, StopReason::diverged) << r->stop_message;
      EXPECT_LE(r->steps, 18);  // the round of the meeting at 16
    }
}

// Where an option does not apply the request is refused, naming the flag and why.
TEST(Periodic, OptionsRefusedWhereNotDefined) {
  struct Bad {
    const char* algo;
    const char* flag;
    const char* value;
  };
  for (const Bad& b :
       {Bad{"sync-easgd", "optimizer", "adamw"}, Bad{"sync-sgd", "exchange-precision", "int8"},
        Bad{"local-sgd", "outer-lr", "0.5"}, Bad{"local-sgd", "outer-momentum", "0.5"},
        Bad{"diloco", "outer-momentum", "1"}, Bad{"diloco", "outer-lr", "0"},
        Bad{"diloco", "adam-beta2", "1.5"}, Bad{"diloco", "adam-epsilon", "0"}}) {
    TrainConfig c = test::small_config(b.algo, 2);
    ASSERT_TRUE(set_setting(c, b.flag, b.value).ok()) << b.flag;
    const Status st = validate_config(c);
    EXPECT_FALSE(st.ok()) << b.algo << " --" << b.flag << " " << b.value;
    EXPECT_NE(st.message().find(std::string("--") + b.flag), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos);
  }
  TrainConfig c = test::small_config("sync-easgd", 2);
  ASSERT_TRUE(set_setting(c, "optimizer", "adamw").ok());
  EXPECT_NE(validate_config(c).message().find("diloco"), std::string::npos);
  EXPECT_FALSE(set_setting(c, "exchange-precision", "fp16").ok());
  EXPECT_FALSE(set_setting(c, "optimizer", "adam").ok());
}

// ---- Resume into another number of groups ----

// Checks, once the resumed run is set up, that every group starts from the checkpoint's anchor
// with the old groups' mean momentum, at the checkpoint's step.
class AnchorWatcher : public TrainObserver {
 public:
  explicit AnchorWatcher(const Checkpoint& ck) : ck_(ck) {}
  void on_setup(Run& run) override {
    groups = run.size();
    const size_t n = static_cast<size_t>(run.arena_floats());
    const std::vector<float> anchor(ck_.algo.buffer.begin(), ck_.algo.buffer.begin() + n);
    for (const auto& g : run.groups) {
      from_anchor = from_anchor && same_bits({g->weights.data(), g->weights.data() + n}, anchor);
      for (size_t j = 0; j < n; ++j) {
        double mean = 0;
        for (const GroupCheckpoint& old : ck_.groups)
          mean += old.momentum[j];
        mean /= static_cast<double>(ck_.groups.size());
        max_momentum_error = std::max(max_momentum_error, std::abs(g->momentum.data()[j] - mean));
        momentum_scale = std::max(momentum_scale, std::abs(mean));
      }
      at_step = at_step && g->steps.load() == ck_.iterations_done;
    }
  }
  int groups = 0;
  bool from_anchor = true, at_step = true;
  double max_momentum_error = 0, momentum_scale = 0;

 private:
  const Checkpoint& ck_;
};

// Checkpointed at a meeting (iteration 27, tau 3) with 2 or 3 groups and resumed into 3 or 2:
// every group starts from the anchor with the old groups' mean momentum. diloco's outer
// momentum carries over: with nothing moving inside afterwards (lr 0, no momentum) every
// meeting's pseudo-gradient is 0, so each of the 6 meetings to iteration 45 moves the anchor
// by -eta mu u_k with u_k = mu^k u_0, u_0 the checkpoint's outer momentum: computed here.
TEST(Periodic, RegroupAtAMeetingStartsFromTheAnchor) {
  struct Case {
    const char* algo;
    int had, now;
    const char* optimizer;
    const char* precision;
  };
  for (const Case& k : {Case{"diloco", 2, 3, "msgd", "int8"}, Case{"slowmo", 3, 2, "msgd", "fp32"},
                        Case{"local-sgd", 2, 3, "adamw", "bf16"}}) {
    SCOPED_TRACE(std::string(k.algo) + " " + k.optimizer + " " + k.precision);
    TrainConfig c = test::small_config(k.algo, k.had);
    c.iterations = 45;
    c.eval_every = 9;
    c.tau = 3;
    c.lr = k.optimizer == std::string("adamw") ? 0.002 : 0.05;
    ASSERT_TRUE(set_setting(c, "optimizer", k.optimizer).ok());
    ASSERT_TRUE(set_setting(c, "exchange-precision", k.precision).ok());
    Keeper keep;
    ASSERT_TRUE(train(c, test::small_data(), &keep).ok());
    ASSERT_TRUE(keep.kept.has_value());
    const Checkpoint ck = decode_checkpoint(encode_checkpoint(*keep.kept), "mem").value();
    EXPECT_TRUE(check_resume_groups(ck, k.algo, GroupCount::of(k.now)).ok());

    TrainConfig more = c;
    more.plan.groups = GroupCount::of(k.now);
    AnchorWatcher w(ck);
    auto r = train(more, test::small_data(), &w, {}, &ck);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(w.groups, k.now);
    EXPECT_TRUE(w.from_anchor);
    EXPECT_TRUE(w.at_step);
    EXPECT_GT(w.momentum_scale, 0);
    EXPECT_LE(w.max_momentum_error, 1e-6 * w.momentum_scale);
    EXPECT_EQ(r->steps, 45);
    EXPECT_GT(r->best_accuracy, 0.5);  // it goes on learning

    if (std::string(k.algo) != "diloco") continue;
    TrainConfig still = more;
    still.lr = 0;
    still.momentum = 0;
    auto s = train(still, test::small_data(), nullptr, {}, &ck);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    const size_t n = s->final_weights.size();
    ASSERT_EQ(ck.algo.buffer.size(), 2 * n + static_cast<size_t>(k.had) * n);  // x, u, residuals
    const double eta = 0.7, mu = 0.9;
    double worst = 0, scale = 0;
    for (size_t j = 0; j < n; ++j) {
      double x = ck.algo.buffer[j], u = ck.algo.buffer[n + j];
      for (int m = 0; m < 6; ++m) {
        u *= mu;
        x -= eta * mu * u;
      }
      worst = std::max(worst, std::abs(s->final_weights[j] - x));
      scale = std::max(scale, std::abs(x));
    }
    EXPECT_LE(worst, 1e-5 * scale);
    EXPECT_FALSE(same_bits(s->final_weights,
                           {ck.algo.buffer.begin(), ck.algo.buffer.begin() + n}));  // u moved it
  }
}

// AdamW's second moment in a regrouped run is the old groups' mean, the int8 residual zero, the
// anchor and outer momentum the same: restore_state on 3 groups of 2 groups' state.
TEST(Periodic, RegroupTakesTheMeanSecondMomentAndDropsTheResiduals) {
  Hand two;
  two.build(2, "diloco", 2);
  two.run.params.optimizer = Optimizer::adamw;
  two.run.params.precision = ExchangePrecision::int8;
  two.run.params.outer_lr = 0.7f;
  two.run.params.outer_momentum = 0.9f;
  two.prepare();
  two.steps(4);  // two meetings
  const AlgoState st = two.algo->save_state(two.run);
  const int64_t n = two.run.arena_floats();                           // kN, padded
  ASSERT_EQ(st.buffer.size(), static_cast<size_t>((2 + 2 * 2) * n));  // x u [v e] [v e]
  auto start = two.algo->regroup_start(two.run, {}, st, 4, 2);
  ASSERT_TRUE(start.ok()) << start.status().to_string();
  EXPECT_EQ(start->weights, st.buffer.data());
  EXPECT_TRUE(start->mean_momentum);
  EXPECT_EQ(two.algo->regroup_start(two.run, {}, st, 3, 2).status().code(),
            Code::invalid_argument);  // between meetings

  Hand three;
  three.build(3, "diloco", 2);
  three.run.params.optimizer = Optimizer::adamw;
  three.run.params.precision = ExchangePrecision::int8;
  three.run.params.outer_lr = 0.7f;
  three.run.params.outer_momentum = 0.9f;
  three.prepare();
  ASSERT_TRUE(three.algo->restore_state(three.run, st).ok());
  const AlgoState back = three.algo->save_state(three.run);
  ASSERT_EQ(back.buffer.size(), static_cast<size_t>((2 + 3 * 2) * n));
  for (int64_t j = 0; j < 2 * n; ++j)
    EXPECT_EQ(back.buffer[j], st.buffer[j]) << j;  // the anchor and u
  bool any_residual = false;
  for (int g = 0; g < 3; ++g)
    for (int64_t j = 0; j < kN; ++j) {
      const double v0 = st.buffer[2 * n + j], v1 = st.buffer[4 * n + j];
      EXPECT_NEAR(back.buffer[(2 + 2 * g) * n + j], (v0 + v1) / 2, 1e-7 * (v0 + v1));
      EXPECT_EQ(back.buffer[(3 + 2 * g) * n + j], 0.f);
      any_residual = any_residual || st.buffer[3 * n + j] != 0.f;
    }
  EXPECT_TRUE(any_residual);  // there was one to drop
  EXPECT_GT(st.buffer[2 * n], 0.f);
}

// Between meetings the groups' own steps cannot be re-split: one line naming --groups, the
// iteration, --tau and what can; the same count goes on.
TEST(Periodic, RegroupBetweenMeetingsIsRefused) {
  TrainConfig c = test::small_config("diloco", 2);
  c.iterations = 45;
  c.eval_every = 9;
  c.tau = 4;
  Keeper keep;
  ASSERT_TRUE(train(c, test::small_data(), &keep).ok());
  ASSERT_TRUE(keep.kept.has_value());
  TrainConfig more = c;
  more.plan.groups = GroupCount::of(3);
  auto r = train(more, test::small_data(), nullptr, {}, &*keep.kept);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::invalid_argument);
  EXPECT_EQ(r.status().message().rfind("--groups: a checkpoint of diloco taken between two "
                                       "meetings (iteration 27, --tau 4) resumes only with its 2 "
                                       "group(s), not 3",
                                       0),
            0u)
      << r.status().message();
  EXPECT_NE(r.status().message().find("multiple of --tau"), std::string::npos);
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  EXPECT_TRUE(train(c, test::small_data(), nullptr, {}, &*keep.kept).ok());
}

}  // namespace
}  // namespace easel
