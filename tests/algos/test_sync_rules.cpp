// The sync algorithms' rules at the trainer's level: sync-easgd and sync-sgd recomputed by hand
// (double precision) for 1 to 3 groups with alpha > 0 on every exchange path, one group of
// sync-easgd with rho = 0 equal to sgd / msgd bit for bit, and --pack per-layer's messages as
// model/ counts them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "algos/exchange.hpp"
#include "nets/models/models.hpp"
#include "run/trainer.hpp"
#include "tests/algos/small_run.hpp"
#include "tests/support/test_nets.hpp"

namespace easel {
namespace {

using test::small_config;
using test::small_data;

using test::run;

// --pack per-layer sends one message per layer with parameters (weights, bias and batch norm's
// statistics together), as model/ counts them (a layer with fillers is one message): the
// messages tile the arena in order and cover every segment.
TEST(SyncEasgd, PerLayerPackSendsOneMessagePerLayerWithParameters) {
  const std::string bn = test::write_test_net("easel_test_pack_bn_net.toml", test::kBnJoinNet);
  for (const auto& [net_name, in] :
       {std::pair<std::string, ModelInput>{"lenet", {1, 28, 28, 10}}, {bn, {3, 8, 8, 4}}}) {
    auto spec = build_model(net_name, in);
    ASSERT_TRUE(spec.ok()) << spec.status().to_string();
    auto dev = make_cpu_device(ImplChoice::ref);
    auto net = Net::create(spec.value(), 1, Layout::nchw, *dev, MemKind::dram);
    ASSERT_TRUE(net.ok()) << net.status().to_string();
    int layers_with_params = 0;
    for (const LayerSpec& l : spec->layers)
      layers_with_params += l.fillers.empty() ? 0 : 1;
    easel::Run r;  // (Run alone names gtest's)
    r.layout = &net.value()->params();
    r.params.pack = PackMode::per_layer;
    std::vector<std::pair<int64_t, int64_t>> msgs;
    for_each_message(r, [&](int64_t off, int64_t n) { msgs.emplace_back(off, n); });
    EXPECT_EQ(static_cast<int>(msgs.size()), layers_with_params) << net_name;
    if (net_name == "lenet") {
      EXPECT_EQ(msgs.size(), 4u);  // conv1, conv2, ip1, ip2: 8 tensors
    }
    int64_t end = 0;
    for (const auto& [off, n] : msgs) {
      EXPECT_GE(off, end) << net_name;
      end = off + n;
    }
    for (const Segment& sg : r.segments()) {
      const bool covered = std::any_of(msgs.begin(), msgs.end(), [&](const auto& m) {
        return sg.offset >= m.first && sg.offset + sg.count <= m.first + m.second;
      });
      EXPECT_TRUE(covered) << net_name << ": " << sg.name;
    }
    r.params.pack = PackMode::single;
    msgs.clear();
    for_each_message(r, [&](int64_t off, int64_t n) { msgs.emplace_back(off, n); });
    ASSERT_EQ(msgs.size(), 1u);
    EXPECT_EQ(msgs[0].second, r.arena_floats());
  }
}

// A run whose gradient is a fixed function of the weights, the group and the step
// (Group::fake_gradient, different on every group), with its initial weights and segments
// recorded, so that the trainer's exchanges can be recomputed by hand (HandRule).
class HandGradient : public TrainObserver {
 public:
  static float grad(float w, int64_t j, int id, int64_t step) {
    return 0.5f * w + 1e-3f * static_cast<float>((j + id + 3 * step) % 11) - 0.004f;
  }
  Status on_init_weights(std::span<float> w) override {
    init.assign(w.begin(), w.end());
    return {};
  }
  void on_setup(Run& r) override {
    segs.assign(r.segments().begin(), r.segments().end());
    alpha = r.params.alpha_at(0);
    for (auto& g : r.groups) {
      const int64_t n = r.arena_floats();
      g->fake_gradient = [n](Group& grp) {
        const int64_t step = grp.steps.load();
        for (int64_t j = 0; j < n; ++j)
          grp.diff.data()[j] = grad(grp.weights.data()[j], j, grp.id, step);
      };
    }
  }
  std::vector<float> init;
  std::vector<Segment> segs;
  float alpha = -1;
};

// The sync algorithms' rules written out in double precision, P groups from the same initial
// weights: sync-sgd, the mean of the P gradients applied by every group (SGD or heavy ball);
// sync-easgd (docs/DESIGN.md), every tau steps W_i <- W_i - lr (g_i + wd W_i) - alpha (W_i - C)
// (or its momentum form) on every group and C <- C + alpha sum_i (W_i - C), both from the
// values before the exchange, and the local step alone between exchanges.
struct HandRule {
  std::string algo;
  int p = 2, tau = 1;
  double lr = 0.05, wd = 1e-4, mu = 0, alpha = 0;
  bool nesterov = false;
  // Returns the centre (sync-easgd) or group 0's weights (sync-sgd), then group 0's weights.
  std::pair<std::vector<double>, std::vector<double>> train(const HandGradient& h,
                                                            int64_t steps) const {
    const std::vector<double> w0(h.init.begin(), h.init.end());
    std::vector<std::vector<double>> w(static_cast<size_t>(p), w0), v(w), g(w);
    for (auto& x : v)
      std::fill(x.begin(), x.end(), 0.0);
    std::vector<double> c = w0;
    for (int64_t step = 0; step < steps; ++step) {
      for (int i = 0; i < p; ++i)
        for (size_t j = 0; j < w0.size(); ++j)
          g[i][j] = 0.5 * w[i][j] + 1e-3 * static_cast<double>((j + i + 3 * step) % 11) - 0.004;
      if (algo == "sync-sgd") {
        for (size_t j = 0; j < w0.size(); ++j) {
          double sum = 0;
          for (int i = 0; i < p; ++i)
            sum += g[i][j];
          for (int i = 0; i < p; ++i)
            g[i][j] = sum / p;
        }
      }
      const bool exchange = algo == "sync-easgd" && (step + 1) % tau == 0;
      const std::vector<double> c_old = c;
      for (int i = 0; i < p; ++i)
        for (const Segment& s : h.segs)
          for (int64_t j = s.offset; j < s.offset + s.count; ++j) {
            const double r = lr * s.lr_mult, d = wd * s.decay_mult;
            const double e = exchange ? alpha * (w[i][j] - c_old[j]) : 0.0;
            if (exchange) c[j] += e;
            const double vn = mu * v[i][j] - r * (g[i][j] + d * w[i][j]);
            w[i][j] = nesterov ? w[i][j] + (1 + mu) * vn - mu * v[i][j] - e : w[i][j] + vn - e;
            v[i][j] = vn;
          }
    }
    return {algo == "sync-sgd" ? w[0] : c, w[0]};
  }
};

void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t wrong = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5 + 1e-4 * std::fabs(want[i])))
      if (wrong++ == 0) first = static_cast<int64_t>(i);
  EXPECT_EQ(wrong, 0) << what << ": first at [" << first << "] got "
                      << (first >= 0 ? got[static_cast<size_t>(first)] : 0.f) << ", want "
                      << (first >= 0 ? want[static_cast<size_t>(first)] : 0.0);
}

// The trainer's sync exchanges (every path: the fast exchanges, the Comm with --pack per-layer,
// --reduce serial) against HandRule with 2 and 3 groups, alpha > 0, SGD and momentum, tau 1 and
// 2: the centre and group 0's weights after 8 steps. An exchange that drops a term, reads the
// wrong centre, or an allreduce that does nothing gives other weights.
TEST(SyncAlgorithms, TrainerExchangeEqualsTheRuleComputedByHand) {
  struct Case {
    std::string algo;
    int p, tau;
    double mu;
    bool nesterov;
    const char* pack;
    const char* reduce;
  };
  const std::vector<Case> cases = {
      {"sync-easgd", 2, 1, 0, false, "single", "tree"},
      {"sync-easgd", 3, 1, 0, false, "single", "tree"},
      {"sync-easgd", 2, 2, 0, false, "single", "tree"},
      {"sync-easgd", 3, 2, 0, false, "per-layer", "tree"},
      {"sync-easgd", 3, 1, 0.9, true, "single", "tree"},
      {"sync-easgd", 2, 1, 0.9, false, "single", "tree"},
      {"sync-easgd", 3, 1, 0.9, true, "per-layer", "serial"},
      {"sync-sgd", 2, 1, 0, false, "single", "tree"},
      {"sync-sgd", 3, 1, 0.9, false, "single", "tree"},
      {"sync-sgd", 3, 1, 0, false, "per-layer", "tree"},
  };
  for (const Case& k : cases) {
    const std::string what = k.algo + ", " + std::to_string(k.p) + " groups, tau " +
                             std::to_string(k.tau) + ", momentum " + std::to_string(k.mu) +
                             (k.nesterov ? " nesterov" : "") + ", pack " + k.pack + ", reduce " +
                             k.reduce;
    TrainConfig c = small_config(k.algo, k.p);
    c.iterations = 8;
    c.eval_every = 8;
    c.tau = k.tau;
    c.momentum = k.mu;
    c.momentum_form = k.nesterov ? MomentumForm::nesterov : MomentumForm::heavy_ball;
    c.rho = -1;
    c.alpha = 0.3;
    ASSERT_TRUE(set_setting(c, "pack", k.pack).ok());
    ASSERT_TRUE(set_setting(c, "reduce", k.reduce).ok());
    HandGradient h;
    const TrainSummary s = run(c, &h);
    ASSERT_FALSE(h.init.empty()) << what;
    if (k.algo == "sync-easgd") {
      ASSERT_FLOAT_EQ(h.alpha, 0.3f) << what;
    }
    HandRule rule{k.algo, k.p, k.tau, c.lr, c.weight_decay, k.mu, 0.3, k.nesterov};
    const auto [want_eval, want_g0] = rule.train(h, 8);
    expect_close(s.final_weights, want_eval, what + ": evaluated weights");
    expect_close(s.group0_weights, want_g0, what + ": group 0");
  }
}

// With rho = 0 (alpha = 0, the kernels' plain-step shortcut) one group of sync-easgd is sgd bit
// for bit; with alpha > 0 its elastic step and centre update follow HandRule (one group: the
// weights pulled towards a centre that trails them).
TEST(SyncEasgd, OneGroupRhoZeroEqualsSgdBitForBit) {
  TrainConfig e = small_config("sync-easgd", 1);
  e.rho = 0;  // alpha = lr * 0
  e.momentum = 0;
  TrainConfig s = small_config("sgd", 1);
  const TrainSummary a = run(e), b = run(s);
  ASSERT_FALSE(a.group0_weights.empty());
  EXPECT_EQ(a.group0_weights, b.group0_weights);

  for (const double mu : {0.0, 0.9}) {
    e.iterations = 8;
    e.eval_every = 8;
    e.momentum = mu;
    e.momentum_form = MomentumForm::nesterov;
    e.rho = 4;  // alpha = 0.05 * 4 = 0.2
    HandGradient h;
    const TrainSummary r = run(e, &h);
    ASSERT_FLOAT_EQ(h.alpha, 0.2f);
    HandRule rule{"sync-easgd", 1, 1, e.lr, e.weight_decay, mu, 0.2, true};
    const auto [want_c, want_w] = rule.train(h, 8);
    const std::string what = "one group, alpha 0.2, momentum " + std::to_string(mu);
    expect_close(r.final_weights, want_c, what + ": centre");
    expect_close(r.group0_weights, want_w, what + ": weights");
    EXPECT_NE(r.final_weights, r.group0_weights) << what;
  }
}

TEST(SyncEasgd, OneGroupRhoZeroWithMomentumEqualsMsgdBitForBit) {
  TrainConfig e = small_config("sync-easgd", 1);
  e.rho = 0;
  e.momentum_form = MomentumForm::heavy_ball;  // Caffe's momentum SGD, as msgd
  TrainConfig s = small_config("msgd", 1);
  const TrainSummary a = run(e), b = run(s);
  ASSERT_FALSE(a.group0_weights.empty());
  EXPECT_EQ(a.group0_weights, b.group0_weights);
  EXPECT_NE(a.group0_weights, run(small_config("sgd", 1)).group0_weights);
}

}  // namespace
}  // namespace easel
