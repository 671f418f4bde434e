// The algorithms' semantics, with worker groups as threads of this process: determinism of the
// sync variants, sync-easgd's exchange paths against each other, easgd-rr's strict round-robin
// service, the locked centre update never torn, and convergence of every algorithm on a small
// problem with 2 and 4 groups (their rules computed by hand: test_sync_rules.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "algos/exchange.hpp"
#include "algos/sync_easgd.hpp"
#include "algos/sync_easgd_fast.hpp"
#include "engine/comm/comm.hpp"
#include "engine/span_ops.hpp"
#include "nets/models/models.hpp"
#include "run/groups.hpp"
#include "run/trainer.hpp"
#include "tests/algos/small_run.hpp"
#include "tests/support/test_nets.hpp"

namespace easel {
namespace {

using test::small_config;
using test::small_data;

using test::run;

// ---- the fused parameter-server kernels against their formulas (algos/exchange.hpp) ----

// Two segments with their own rate and decay multipliers, the second at an aligned offset; the
// floats between them must stay untouched.
struct KernelCase {
  std::vector<Segment> segs;
  std::vector<float> w, g, v, c;
  KernelCase() {
    Segment a, b;
    a.name = "a";
    a.count = 5;
    a.lr_mult = 1.f;
    a.decay_mult = 1.f;
    b.name = "b";
    b.offset = 16;
    b.count = 5;
    b.lr_mult = 2.f;
    b.decay_mult = 0.f;
    segs = {a, b};
    for (int i = 0; i < 21; ++i) {
      w.push_back(0.5f + 0.1f * static_cast<float>(i));
      g.push_back(0.3f - 0.05f * static_cast<float>(i));
      v.push_back(0.02f * static_cast<float>(i % 7) - 0.05f);
      c.push_back(-0.2f + 0.03f * static_cast<float>(i));
    }
  }
};

constexpr float kLr = 0.1f, kWd = 0.01f, kAlpha = 0.3f, kDelta = 0.9f;

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want,
                     const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << what << " [" << i << "]";
}

TEST(ExchangeKernels, EasgdExchangeIsTheElasticStepOnBothSides) {
  for (const bool racy : {false, true}) {
    KernelCase k;
    std::vector<double> w(k.w.begin(), k.w.end()), c(k.c.begin(), k.c.end());
    for (const Segment& s : k.segs)
      for (int64_t j = s.offset; j < s.offset + s.count; ++j) {
        const double e = kAlpha * (w[j] - c[j]);  // both from the values before the exchange
        w[j] = w[j] - kLr * s.lr_mult * (k.g[j] + kWd * s.decay_mult * w[j]) - e;
        c[j] += e;
      }
    if (racy)
      easgd_exchange_racy(k.segs, k.w.data(), k.g.data(), k.c.data(), kLr, kWd, kAlpha);
    else
      easgd_exchange(k.segs, k.w.data(), k.g.data(), k.c.data(), kLr, kWd, kAlpha);
    expect_near_all(k.w, w, racy ? "racy w" : "w");
    expect_near_all(k.c, c, racy ? "racy c" : "c");
  }
}

TEST(ExchangeKernels, EasgdMomentumExchangeNesterovAndHeavyBall) {
  for (const bool nesterov : {true, false}) {
    KernelCase k;
    std::vector<double> w(k.w.begin(), k.w.end()), c(k.c.begin(), k.c.end()),
        v(k.v.begin(), k.v.end());
    for (const Segment& s : k.segs)
      for (int64_t j = s.offset; j < s.offset + s.count; ++j) {
        const double e = kAlpha * (w[j] - c[j]);
        const double vn = kDelta * v[j] - kLr * s.lr_mult * (k.g[j] + kWd * s.decay_mult * w[j]);
        w[j] = nesterov ? w[j] + (1 + kDelta) * vn - kDelta * v[j] - e : w[j] + vn - e;
        v[j] = vn;
        c[j] += e;
      }
    easgd_momentum_exchange(k.segs, k.w.data(), k.g.data(), k.v.data(), k.c.data(), kLr, kDelta,
                            kWd, kAlpha, nesterov);
    expect_near_all(k.w, w, nesterov ? "nesterov w" : "heavy-ball w");
    expect_near_all(k.v, v, "v");
    expect_near_all(k.c, c, "c");
  }
}

TEST(ExchangeKernels, CentrePullAndScaledGradient) {
  KernelCase k;
  std::vector<double> c(k.c.begin(), k.c.end());
  for (size_t j = 0; j < c.size(); ++j)
    c[j] += kAlpha * (k.w[j] - c[j]);
  easgd_centre_pull(k.c.data(), k.w.data(), kAlpha, static_cast<int64_t>(k.c.size()));
  expect_near_all(k.c, c, "centre");

  std::vector<double> g(k.g.begin(), k.g.end());
  for (const Segment& s : k.segs)
    for (int64_t j = s.offset; j < s.offset + s.count; ++j)
      g[j] = kLr * s.lr_mult * (g[j] + kWd * s.decay_mult * k.w[j]);
  scaled_gradient(k.segs, k.g.data(), k.w.data(), kLr, kWd);
  expect_near_all(k.g, g, "scaled gradient");
}

class Deterministic : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(Deterministic, SameSeedSameBits) {
  const auto& [algo, groups] = GetParam();
  TrainConfig c = small_config(algo, groups);
  c.iterations = 40;
  const TrainSummary a = run(c), b = run(c);
  ASSERT_FALSE(a.final_weights.empty());
  EXPECT_EQ(a.final_weights, b.final_weights);
  EXPECT_EQ(a.group0_weights, b.group0_weights);
  EXPECT_EQ(a.test_loss, b.test_loss);
}

INSTANTIATE_TEST_SUITE_P(SyncAlgorithms, Deterministic,
                         ::testing::Combine(::testing::Values("sync-easgd", "sync-sgd"),
                                            ::testing::Values(2, 4)));

TEST(SyncEasgd, DeterministicWithEveryCoDesignSwitch) {
  for (const char* reduce : {"tree", "serial"})
    for (const char* pack : {"single", "per-layer"})
      for (const char* overlap : {"off", "on"}) {
        TrainConfig c = small_config("sync-easgd", 3);
        c.iterations = 30;
        ASSERT_TRUE(set_setting(c, "reduce", reduce).ok());
        ASSERT_TRUE(set_setting(c, "pack", pack).ok());
        ASSERT_TRUE(set_setting(c, "overlap", overlap).ok());
        const TrainSummary a = run(c), b = run(c);
        EXPECT_EQ(a.final_weights, b.final_weights) << reduce << " " << pack << " " << overlap;
      }
}

// A gradient that depends on every weight (so that any misordered read shows in the result),
// with groups lagging by up to a few steps' time at chosen steps (lag = true).
class LaggingGroups : public TrainObserver {
 public:
  explicit LaggingGroups(bool lag) : lag_(lag) {}
  void on_setup(Run& r) override {
    for (auto& g : r.groups) {
      const int64_t n = r.arena_floats();
      g->fake_gradient = [this, n](Group& grp) {
        const int64_t step = grp.steps.load();
        if (lag_ && step % (3 + grp.id) == grp.id % 2)
          std::this_thread::sleep_for(std::chrono::microseconds(300 + 900 * grp.id));
        const float* w = grp.weights.data();
        float* d = grp.diff.data();
        for (int64_t i = 0; i < n; ++i)
          d[i] = 0.5f * w[i] + 1e-3f * static_cast<float>((i + grp.id + step) % 11) - 0.004f;
      };
    }
  }

 private:
  bool lag_;
};

// The single-process exchanges (mirrored with 2 groups, partitioned with 3) let a group run up to
// about one step ahead of the others (counters instead of barriers, double-buffered weights):
// with groups lagging at random-looking steps they must still give the bits of the
// barrier-based exchange (--pack per-layer, --collective tree).
TEST(SyncEasgd, SingleProcessExchangeWithLaggingGroupsEqualsBarrierExchange) {
  for (int groups : {2, 3})
    for (int tau : {1, 2})
      for (double momentum : {0.9, 0.0}) {
        TrainConfig c = small_config("sync-easgd", groups);
        c.iterations = 40;
        c.eval_every = 20;
        c.tau = tau;
        c.momentum = momentum;
        c.collective = CollectiveAlgo::tree;  // the fast exchanges sum in the tree's order
        LaggingGroups lag(true), steady(false);
        const TrainSummary a = run(c, &lag);
        c.pack = PackMode::per_layer;
        const TrainSummary b = run(c, &steady);
        const std::string what = std::to_string(groups) + " groups, tau " + std::to_string(tau) +
                                 ", momentum " + std::to_string(momentum);
        ASSERT_FALSE(a.final_weights.empty()) << what;
        EXPECT_EQ(a.final_weights, b.final_weights) << what;
        EXPECT_EQ(a.group0_weights, b.group0_weights) << what;
        EXPECT_GT(a.wait_seconds, 0.0) << what;
      }
}

TEST(SyncEasgd, OverlapGivesTheSameModelAsNoOverlap) {
  // Overlap changes when the centre update runs, not what it computes (the sum order of the
  // reduction may differ, so compare closely rather than bitwise).
  TrainConfig c = small_config("sync-easgd", 2);
  c.iterations = 30;
  c.reduce = ReduceMode::serial;
  const TrainSummary a = run(c);
  c.overlap = true;
  const TrainSummary b = run(c);
  ASSERT_EQ(a.final_weights.size(), b.final_weights.size());
  for (size_t i = 0; i < a.final_weights.size(); ++i)
    ASSERT_NEAR(a.final_weights[i], b.final_weights[i], 1e-5) << i;
}

// The partitioned exchange's pieces: the slices tile the arena on 64-byte boundaries, and the
// centre updated slice by slice equals the Comm's reduce_sum into the root followed by
// elastic_centre_sum, bit for bit (the trainer's two paths give the same model).
TEST(SyncEasgd, CentreUpdatedBySlicesEqualsReduceThenUpdate) {
  const int64_t n = 431080 / 7 + 3;  // not a multiple of the chunk nor of the alignment
  for (int p : {1, 2, 3, 4, 5}) {
    std::vector<std::vector<float>> w(static_cast<size_t>(p), std::vector<float>(n));
    std::vector<const float*> ptrs;
    for (int v = 0; v < p; ++v) {
      for (int64_t i = 0; i < n; ++i)
        w[v][i] = std::sin(0.37f * static_cast<float>(i) + static_cast<float>(v)) * 0.1f +
                  1e-3f * static_cast<float>(v);
      ptrs.push_back(w[v].data());
    }
    std::vector<float> c_old(n), sum(n);
    for (int64_t i = 0; i < n; ++i)
      c_old[i] = std::cos(0.11f * static_cast<float>(i)) * 0.05f;
    const float alpha = 0.9f / static_cast<float>(p);

    auto comm = make_shm_comm(p, CollectiveAlgo::tree);
    std::vector<std::thread> ranks;
    for (int r = 0; r < p; ++r)
      ranks.emplace_back([&, r] { comm->reduce_sum(r, ptrs[r], sum.data(), n, 0); });
    for (auto& t : ranks)
      t.join();
    std::vector<float> want = c_old;
    elastic_centre_sum(want.data(), sum.data(), alpha, p, n);

    std::vector<float> got(n, -7.f), tmp;
    int64_t covered = 0;
    for (int id = 0; id < p; ++id) {
      const auto [lo, hi] = centre_slice(n, p, id);
      EXPECT_EQ(lo, covered) << "p=" << p << " slice " << id;
      EXPECT_EQ(lo % kArenaAlign, 0);
      centre_update_slice(ptrs, c_old.data(), got.data(), alpha, lo, hi, tmp);
      covered = hi;
    }
    EXPECT_EQ(covered, n) << "p=" << p;
    EXPECT_EQ(got, want) << "p=" << p;
  }
}

// The mirrored exchange (P <= 2 in the trainer; the kernel takes any P) in one pass equals the
// partitioned exchange's pieces bit for bit: the centre updated from the tree-order sum, and the
// group's elastic step from the old centre, for SGD, heavy-ball and Nesterov, alpha 0 included
// (the plain step; the centre stays), with per-segment multipliers and padding between segments
// left alone; the streamed copy holds the new weights.
TEST(SyncEasgd, MirroredExchangeEqualsCentreUpdateThenElasticStep) {
  std::vector<Segment> segs(3);
  const int64_t counts[3] = {5000, 37, 20011}, mults[3][2] = {{1, 1}, {2, 0}, {1, 1}};
  int64_t off = 0;
  for (size_t k = 0; k < 3; ++k) {
    segs[k].offset = off;
    segs[k].count = counts[k];
    segs[k].lr_mult = static_cast<float>(mults[k][0]);
    segs[k].decay_mult = static_cast<float>(mults[k][1]);
    off = (off + counts[k] + kArenaAlign - 1) / kArenaAlign * kArenaAlign + kArenaAlign;
  }
  const int64_t n = off;
  auto in_segment = [&](int64_t i) {
    for (const Segment& sg : segs)
      if (i >= sg.offset && i < sg.offset + sg.count) return true;
    return false;
  };
  auto wave = [&](float a, float b, float scale) {
    std::vector<float> v(static_cast<size_t>(n), 0.f);  // zero padding, as in an arena
    for (int64_t i = 0; i < n; ++i)
      if (in_segment(i)) v[i] = std::sin(a * static_cast<float>(i) + b) * scale;
    return v;
  };
  for (int p : {1, 2, 3})
    for (int rule = 0; rule < 3; ++rule)  // sgd, heavy-ball, nesterov
      for (float alpha : {0.9f / static_cast<float>(p), 0.f}) {
        const std::string what = "p=" + std::to_string(p) + " rule " + std::to_string(rule) +
                                 " alpha " + std::to_string(alpha);
        std::vector<std::vector<float>> w;
        for (int v = 0; v < p; ++v)
          w.push_back(wave(0.37f, static_cast<float>(v), 0.1f));
        const int self = p - 1;
        const std::vector<float> g = wave(0.13f, 1.f, 0.02f), v0 = wave(0.05f, 2.f, 0.01f),
                                 c0 = wave(0.11f, 0.5f, 0.05f);
        const float lr = 0.05f, delta = 0.9f, wd = 5e-4f;
        std::vector<const float*> ptrs;
        for (auto& x : w)
          ptrs.push_back(x.data());

        std::vector<float> want_c(static_cast<size_t>(n)), tmp;
        centre_update_slice(ptrs, c0.data(), want_c.data(), alpha, 0, n, tmp);
        std::vector<float> want_w = w[self], want_v = v0;
        if (rule == 0)
          elastic_sgd_step(segs, want_w.data(), g.data(), c0.data(), lr, wd, alpha);
        else
          elastic_momentum_step(segs, want_w.data(), g.data(), want_v.data(), c0.data(), lr, delta,
                                wd, alpha, rule == 2);

        std::vector<float> got_w = w[self], got_v = v0, got_c = c0,
                           copy(static_cast<size_t>(n), 0.f);
        ptrs[self] = got_w.data();
        mirrored_exchange(segs, ptrs, got_w.data(), p > 1 ? copy.data() : nullptr, g.data(),
                          rule == 0 ? nullptr : got_v.data(), got_c.data(), lr, delta, wd, alpha,
                          rule == 2, tmp);
        EXPECT_EQ(got_w, want_w) << what;
        EXPECT_EQ(got_c, want_c) << what;
        if (rule != 0) {
          EXPECT_EQ(got_v, want_v) << what;
        }
        if (p > 1) {
          EXPECT_EQ(copy, want_w) << what;
        }
        EXPECT_NE(got_w, w[self]) << what;
      }
}

// A run built by hand, as `easel bench` builds one: p groups of one thread each (not pinned)
// whose gradient is a fixed function of their weights (Group::fake_gradient), the centre a copy
// of group 0's weights, sync-easgd with the exchange `which` prepared on it.
struct HandRun {
  std::vector<std::unique_ptr<WorkerThread>> workers;
  ArenaLayout layout;
  Run run;
  std::unique_ptr<Algorithm> algo;

  // with_state: the middle segment is state its step updates in place (as batch norm's running
  // statistics are), with multipliers 0 and gradient 0.
  Status build(int p, SyncExchange which, PackMode pack, bool with_state = false,
               CollectiveAlgo collective = CollectiveAlgo::tree,
               SyncCentre centre = SyncCentre::master) {
    for (int64_t count : {1000, 37, 5003}) {
      Segment s;
      s.count = count;
      if (with_state && count == 37) {
        s.state = true;
        s.lr_mult = s.decay_mult = 0.f;
      }
      layout.add(s);
    }
    const int64_t n = layout.total_floats();
    for (int i = 0; i < p; ++i) {
      GroupSpec spec;
      spec.id = i;
      spec.cpus = {0};
      EASEL_ASSIGN_OR_RETURN(auto w, WorkerThread::start(spec, false));
      auto g = std::make_unique<Group>();
      g->id = g->global_id = i;
      g->worker = w.get();
      workers.push_back(std::move(w));
      for (Arena* a : {&g->weights, &g->diff, &g->momentum}) {
        EASEL_ASSIGN_OR_RETURN(*a, Arena::create(n, MemKind::dram));
      }
      for (const Segment& sg : layout.segments())  // the padding stays 0, as in a net's arena
        for (int64_t j = sg.offset; j < sg.offset + sg.count; ++j)
          g->weights.data()[j] = std::sin(0.37f * static_cast<float>(j) + static_cast<float>(i));
      g->fake_gradient = [this](Group& gr) {
        for (const Segment& sg : layout.segments())
          for (int64_t j = sg.offset; j < sg.offset + sg.count; ++j) {
            float& w = gr.weights.data()[j];
            if (sg.state) w = 0.9f * w + 0.1f * static_cast<float>(gr.id + 1);  // a running mean
            gr.diff.data()[j] = sg.state ? 0.f : 0.5f * w + 1e-3f * static_cast<float>(gr.id);
          }
      };
      run.groups.push_back(std::move(g));
    }
    run.layout = &layout;
    run.params.lr.policy = LrSchedule::Policy::fixed;
    run.params.alpha = 0.9f / static_cast<float>(p);
    run.params.pack = pack;
    run.params.collective = collective;
    run.params.sync_centre = centre;
    run.comm = make_shm_comm(p, collective);
    EASEL_ASSIGN_OR_RETURN(run.centre, Arena::create(n, MemKind::dram));
    span_copy(run.centre.data(), run.groups[0]->weights.data(), n);
    algo = make_sync_easgd(which);
    return algo->prepare(run);
  }

  // `rounds` rounds of `iterations` on every group's thread; returns the centre then every
  // group's weights.
  std::vector<float> train(int rounds, int64_t iterations) {
    for (int r = 0; r < rounds; ++r)
      run_on_groups(
          run, [&](Group& g) { algo->run_round(run, g, iterations); }, [] {});
    const float* c = algo->eval_weights(run);
    std::vector<float> out(c, c + run.arena_floats());
    for (auto& g : run.groups)
      out.insert(out.end(), g->weights.data(), g->weights.data() + run.arena_floats());
    return out;
  }
};

// Every exchange the benchmark can force (SyncExchange) gives the bits of the Comm path, with
// SGD and momentum, tau 1 and 2; the forced ones refuse what they cannot run.
TEST(SyncEasgd, EveryForcedExchangeGivesTheCommPathsBits) {
  for (bool with_state : {false, true})
    for (int p : {2, 3})
      for (int tau : {1, 2})
        for (float momentum : {0.f, 0.9f}) {
          const std::string what = std::to_string(p) + " groups, tau " + std::to_string(tau) +
                                   ", momentum " + std::to_string(momentum) +
                                   (with_state ? ", state updated by the step" : "");
          auto trained = [&](SyncExchange which) {
            HandRun h;
            EXPECT_TRUE(h.build(p, which, PackMode::single, with_state).ok()) << what;
            h.run.params.tau = tau;
            h.run.params.momentum = momentum;
            return h.train(3, 4);
          };
          const std::vector<float> want = trained(SyncExchange::comm);
          EXPECT_EQ(trained(SyncExchange::automatic), want) << what;
          if (with_state) {  // the fast exchanges would read state while a step writes it
            for (SyncExchange fast : {SyncExchange::partitioned, SyncExchange::mirrored}) {
              HandRun h;
              EXPECT_FALSE(h.build(p, fast, PackMode::single, true).ok()) << what;
            }
            continue;
          }
          EXPECT_EQ(trained(SyncExchange::partitioned), want) << what;
          if (p == 2) {
            EXPECT_EQ(trained(SyncExchange::mirrored), want) << what;
          }
        }
  HandRun three, per_layer;
  EXPECT_FALSE(three.build(3, SyncExchange::mirrored, PackMode::single).ok());
  EXPECT_FALSE(per_layer.build(2, SyncExchange::partitioned, PackMode::per_layer).ok());
}

// Sync EASGD on an allreduce (--sync-centre allreduce) gives the master's bits with every
// collective algorithm: the allreduced S equals the reduced S, and the centre update is the same.
// The master's path itself is checked against the fast exchanges above.
TEST(SyncEasgd, AllreduceCentreGivesTheMastersBits) {
  for (CollectiveAlgo collective : {CollectiveAlgo::tree, CollectiveAlgo::ring,
                                    CollectiveAlgo::halving_doubling, CollectiveAlgo::hierarchical})
    for (int p : {2, 3, 5}) {
      const std::string what =
          std::string(collective_algo_name(collective)) + ", " + std::to_string(p) + " groups";
      auto trained = [&](SyncCentre centre) {
        HandRun h;
        EXPECT_TRUE(
            h.build(p, SyncExchange::comm, PackMode::single, false, collective, centre).ok())
            << what;
        h.run.params.momentum = 0.9f;
        return h.train(3, 2);
      };
      const std::vector<float> master = trained(SyncCentre::master);
      EXPECT_EQ(trained(SyncCentre::allreduce), master) << what;
      if (collective == CollectiveAlgo::tree) {
        EXPECT_EQ(trained(SyncCentre::automatic), master) << what << " (auto: master here)";
      }
    }
}

class ServeLog : public TrainObserver {
 public:
  void on_setup(Run& r) override { r.serve_log = &log; }
  void on_eval(const EvalRecord& rec) override { steps = rec.group_steps; }
  std::vector<int> log;
  std::vector<int64_t> steps;  // each group's, at the last evaluation
};

TEST(EasgdRoundRobin, ServesGroupsStrictlyInIdOrder) {
  TrainConfig c = small_config("easgd-rr", 3);
  c.iterations = 20;
  c.tau = 2;
  ServeLog obs;
  run(c, &obs);
  ASSERT_EQ(obs.log.size(), 3u * 10u);
  for (size_t i = 0; i < obs.log.size(); ++i)
    EXPECT_EQ(obs.log[i], static_cast<int>(i % 3)) << i;
}

TEST(AsyncEasgd, ServesEveryExchangeOnceFirstComeFirstServed) {
  TrainConfig c = small_config("async-easgd", 4);
  c.iterations = 20;
  ServeLog obs;
  const TrainSummary s = run(c, &obs);
  EXPECT_EQ(obs.log.size(), 80u);  // the round's budget of 4 x 20 group-steps, each exchanging
  EXPECT_GE(s.staleness_mean, 0.0);
  // Each group is served once per step it took...
  ASSERT_EQ(obs.steps.size(), 4u);
  for (int g = 0; g < 4; ++g)
    EXPECT_EQ(std::count(obs.log.begin(), obs.log.end(), g), obs.steps[static_cast<size_t>(g)]);
  // ...and in the order of the centre's versions: the k-th entry wrote version k, so a group's
  // staleness at an exchange is the number of others served since its previous one. The run's
  // staleness, recomputed from the order alone, must be the one the algorithm measured (a
  // served order that is not the centre's order, or a group that does not read the centre it
  // was served, gives other numbers).
  std::vector<int64_t> read(4, 0);
  int64_t sum = 0, most = 0;
  for (size_t k = 0; k < obs.log.size(); ++k) {
    const size_t g = static_cast<size_t>(obs.log[k]);
    const int64_t st = static_cast<int64_t>(k) - read[g];
    sum += st;
    most = std::max(most, st);
    read[g] = static_cast<int64_t>(k) + 1;
  }
  EXPECT_DOUBLE_EQ(s.staleness_mean, static_cast<double>(sum) / 80.0);
  EXPECT_EQ(s.staleness_max, most);
}

// Every fake gradient is -1 with lr 1 and no decay, and the run starts from all-zero weights, so
// each centre update adds exactly lr_mult to each element. A group's copy of the centre, taken
// under the lock, must therefore be uniform within each segment; a torn read or write would
// mix two versions.
class TornCheck : public TrainObserver {
 public:
  void on_setup(Run& r) override {
    span_zero(r.centre.data(), r.arena_floats());
    for (auto& g : r.groups) {
      span_zero(g->weights.data(), r.arena_floats());
      const ArenaLayout* layout = r.layout;
      g->fake_gradient = [this, layout](Group& grp) {
        for (const Segment& s : layout->segments()) {
          const float* w = grp.weights.data() + s.offset;
          for (int64_t i = 1; i < s.count; ++i)
            if (w[i] != w[0]) torn.fetch_add(1);
        }
        float* d = grp.diff.data();
        for (int64_t i = 0; i < layout->total_floats(); ++i)
          d[i] = -1.f;
      };
    }
    for (const Segment& s : r.layout->segments())
      segments.push_back(s);
  }
  std::atomic<int64_t> torn{0};
  std::vector<Segment> segments;
};

TEST(AsyncSgd, LockedCentreUpdateIsNeverTornAndTakesEveryStepOnce) {
  for (const char* algo : {"async-sgd", "async-msgd"}) {
    TrainConfig c = small_config(algo, 4);
    c.iterations = 50;
    c.lr = 1;
    c.weight_decay = 0;
    c.momentum = 0;
    TornCheck obs;
    const TrainSummary s = run(c, &obs);
    EXPECT_EQ(obs.torn.load(), 0) << algo;
    ASSERT_FALSE(s.final_weights.empty());
    ASSERT_FALSE(obs.segments.empty());
    for (const Segment& seg : obs.segments)
      for (int64_t i = 0; i < seg.count; ++i)
        ASSERT_EQ(s.final_weights[static_cast<size_t>(seg.offset + i)], 200.f * seg.lr_mult)
            << algo << " " << seg.name << "[" << i << "]";
  }
}

class Converges : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

// At each evaluation (between rounds, every group idle): how many groups' weights differ from
// the evaluated model's (sync-sgd evaluates group 0's; every replica must hold the same).
class ReplicasAgree : public TrainObserver {
 public:
  void on_setup(Run& r) override { run_ = &r; }
  void on_eval(const EvalRecord&) override {
    ++evals;
    const int64_t n = run_->arena_floats();
    const float* w0 = run_->groups[0]->weights.data();
    for (const auto& g : run_->groups)
      differing += !std::equal(w0, w0 + n, g->weights.data());
  }
  int evals = 0, differing = 0;

 private:
  Run* run_ = nullptr;
};

TEST_P(Converges, ReachesAccuracyOnASmallProblem) {
  const auto& [algo, groups] = GetParam();
  const bool one = algo == "sgd" || algo == "msgd";
  TrainConfig c = small_config(algo, one ? 1 : groups);
  // Momentum on a centre fed stale gradients acts as a larger step (eta / (1 - mu) with
  // staleness ~P): it needs a smaller eta, as a user tuning it would pick.
  if (algo == "async-msgd") c.lr = 0.01;
  ReplicasAgree agree;
  const TrainSummary s = run(c, &agree);
  EXPECT_GE(s.test_accuracy, 0.9) << algo << " with " << groups << " groups: loss " << s.test_loss;
  EXPECT_LT(s.test_loss, 0.5);
  // sync-sgd evaluates group 0's replica: every other group must hold the same model (an
  // allreduce that did nothing leaves each group with its own).
  if (algo == "sync-sgd") {
    EXPECT_GE(agree.evals, 1);
    EXPECT_EQ(agree.differing, 0) << "replicas differing from the evaluated one, over "
                                  << agree.evals << " evaluations of " << groups << " groups";
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryAlgorithm, Converges,
    ::testing::Combine(::testing::Values("sgd", "msgd", "sync-sgd", "async-sgd", "async-msgd",
                                         "hogwild-sgd", "easgd-rr", "async-easgd", "async-measgd",
                                         "hogwild-easgd", "sync-easgd"),
                       ::testing::Values(2, 4)),
    [](const auto& info) {
      std::string n = std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param));
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

// A graph net with batch norm, a residual add and a concat (a description file), on 3-channel
// data: every algorithm trains it, and the evaluated model's running statistics are those of
// training batches (the parameter-server algorithms copy the stepping group's into the centre,
// whose update takes only gradients; without that copy they would stay at mean 0, variance 1).
TEST(BatchNormNet, EveryAlgorithmTrainsItAndItsStatisticsFollowTheBatches) {
  const std::string path = test::write_test_net("easel_test_bn_net.toml", test::kBnJoinNet);
  static DataSplit data = [] {
    auto r = load_data("synthetic:1024:3x8x8:4", MemKind::dram, 3);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(r).value();
  }();
  auto spec = build_model(path, {3, 8, 8, 4});
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto dev = make_cpu_device(ImplChoice::ref);
  auto net = Net::create(spec.value(), 1, Layout::nchw, *dev, MemKind::dram);
  ASSERT_TRUE(net.ok()) << net.status().to_string();
  const ArenaLayout& layout = net.value()->params();
  for (const char* algo :
       {"sgd", "msgd", "sync-sgd", "async-sgd", "async-msgd", "hogwild-sgd", "easgd-rr",
        "async-easgd", "async-measgd", "hogwild-easgd", "sync-easgd"}) {
    const bool one = std::string(algo) == "sgd" || std::string(algo) == "msgd";
    TrainConfig c = small_config(algo, one ? 1 : 2);
    c.net = path;
    c.iterations = 100;
    c.eval_every = 100;
    c.lr = 0.05;
    auto r = train(c, data, nullptr);
    ASSERT_TRUE(r.ok()) << algo << ": " << r.status().to_string();
    EXPECT_TRUE(std::isfinite(r->test_loss)) << algo;
    const std::vector<float>& w = r->final_weights;
    ASSERT_EQ(static_cast<int64_t>(w.size()), layout.total_floats()) << algo;
    int state = 0;
    for (const Segment& s : layout.segments()) {
      if (!s.state) continue;
      ++state;
      const float init = s.name.ends_with("running_var") ? 1.f : 0.f;
      int64_t moved = 0;
      for (int64_t i = 0; i < s.count; ++i)
        moved += w[static_cast<size_t>(s.offset + i)] != init;
      EXPECT_EQ(moved, s.count) << algo << ": " << s.name << " kept its initial value";
    }
    EXPECT_EQ(state, 4) << algo;  // two batch norms
  }
}

TEST(Trainer, TimesAddUpAndCommIsMeasured) {
  TrainConfig c = small_config("sync-easgd", 2);
  const TrainSummary s = run(c);
  EXPECT_GT(s.compute_seconds, 0);
  EXPECT_GT(s.comm_seconds, 0);
  // The shares are of compute + comm + wait, and those are the groups' own training time: no
  // more than the training wall time of the 2 groups together, and most of it.
  const double busy = s.compute_seconds + s.comm_seconds + s.wait_seconds;
  EXPECT_NEAR(s.comm_share, s.comm_seconds / busy, 1e-9);
  EXPECT_NEAR(s.wait_share, s.wait_seconds / busy, 1e-9);
  EXPECT_GT(s.comm_share, 0);
  EXPECT_LT(s.comm_share + s.wait_share, 1);
  EXPECT_LE(busy, 2 * s.train_seconds * 1.001) << "train_seconds " << s.train_seconds;
  EXPECT_GE(busy, 2 * s.train_seconds * 0.5) << "train_seconds " << s.train_seconds;
  EXPECT_EQ(s.steps, 120);
  EXPECT_EQ(s.images, 120 * 2 * 16);
}

TEST(Trainer, StopsAtTargetAccuracy) {
  TrainConfig c = small_config("sync-easgd", 2);
  c.iterations = 2000;
  c.eval_every = 20;
  c.target_accuracy = 0.8;
  const TrainSummary s = run(c);
  ASSERT_TRUE(s.time_to_target_seconds.has_value());
  EXPECT_TRUE(s.stopped_at_target);
  EXPECT_LT(s.steps, 2000);
  EXPECT_GE(s.test_accuracy, 0.8);
}

// The settings table: one entry per name, and every field's text reads back to its value, so
// that --help shows the defaults the trainer uses and config.json holds what the run used.
TEST(TrainSettings, DefaultsAndTextsReadBack) {
  std::set<std::string> names;
  for (const Setting& s : train_settings()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    if (s.negation) {
      EXPECT_TRUE(names.insert(s.negation).second) << s.negation;
    }
    EXPECT_EQ(find_setting(s.name), &s);
    TrainConfig c = small_config("sync-easgd", 2);
    const std::string text = s.field.show(c);
    TrainConfig d;
    ASSERT_TRUE(s.field.parse(s, text, d).ok()) << s.name << " " << text;
    EXPECT_EQ(s.field.show(d), text) << s.name;
    TrainConfig e;
    ASSERT_TRUE(s.field.parse(s, s.default_text(), e).ok()) << s.name;
    EXPECT_EQ(s.field.show(e), s.field.show(TrainConfig{})) << s.name;
  }
  TrainConfig c;
  ASSERT_TRUE(set_setting(c, "placement", "weights=hbw,all=interleave").ok());
  EXPECT_EQ(placement_text(c.placement),
            "centre=interleave,weights=hbw,grads=interleave,"
            "momentum=interleave,activations=interleave,"
            "dataset=interleave");
  ASSERT_TRUE(set_setting(c, "device", "cuda:1,0").ok());
  EXPECT_EQ(device_text(c.device), "cuda:1,0");
  EXPECT_EQ(resolve_layout(c), Layout::nchw);
  ASSERT_TRUE(set_setting(c, "lr-gamma", "1e-4").ok());
  EXPECT_EQ(c.lr_gamma, 1e-4);
  EXPECT_NE(set_setting(c, "batch", "1.5").message().find("--batch: '1.5'"), std::string::npos);
  EXPECT_NE(set_setting(c, "reduce", "ring").message().find("accepted: tree, serial"),
            std::string::npos);
  EXPECT_NE(set_setting(c, "seed", "-1").message().find("--seed"), std::string::npos);
  EXPECT_FALSE(set_setting(c, "no-such", "1").ok());
}

TEST(Trainer, RefusesBadConfigurations) {
  TrainConfig c = small_config("sync-easgd", 2);
  c.batch = 0;
  EXPECT_NE(validate_config(c).message().find("--batch"), std::string::npos);
  c = small_config("nope", 2);
  EXPECT_NE(validate_config(c).message().find("--algo"), std::string::npos);
  c = small_config("sgd", 2);
  auto r = train(c, small_data(), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--groups"), std::string::npos);
  c = small_config("sync-easgd", 2);
  c.lr = -1;
  EXPECT_NE(validate_config(c).message().find("--lr"), std::string::npos);
  c = small_config("sync-easgd", 2);
  c.momentum = 1.5;
  EXPECT_NE(validate_config(c).message().find("--momentum"), std::string::npos);
  c = small_config("sync-easgd", 64);
  c.plan.oversubscribe = false;
  auto r2 = train(c, small_data(), nullptr);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("--oversubscribe"), std::string::npos);
}

}  // namespace
}  // namespace easel
