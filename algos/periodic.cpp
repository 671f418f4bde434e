#include "algos/periodic.hpp"

#include <algorithm>
#include <vector>

#include "algos/exchange.hpp"
#include "algos/list.hpp"
#include "engine/span_ops.hpp"

namespace easel {

namespace {

class Periodic final : public Algorithm {
 public:
  Periodic(std::string name, OuterRule rule) : name_(std::move(name)), rule_(rule) {}
  std::string name() const override { return name_; }
  bool multi_process() const override { return true; }  // the allreduce spans every rank
  bool uses_collectives() const override { return true; }

  Status prepare(Run& run) override {
    const AlgoParams& p = run.params;
    const int64_t n = run.arena_floats();
    if (p.precision != ExchangePrecision::fp32 && !run.comm->compressed_refusal().empty())
      return invalid_argument(std::string("--exchange-precision ") +
                              exchange_precision_name(p.precision) + ": " +
                              run.comm->compressed_refusal());
    per_.resize(run.groups.size());
    for (size_t i = 0; i < run.groups.size(); ++i) {
      Group& g = *run.groups[i];
      PerGroup& s = per_[i];
      EASEL_ASSIGN_OR_RETURN(s.anchor, arena_on(g, n, MemKind::dram));
      EASEL_ASSIGN_OR_RETURN(s.send, arena_on(g, n, MemKind::dram));
      if (rule_ != OuterRule::average) {
        EASEL_ASSIGN_OR_RETURN(s.outer, arena_on(g, n, MemKind::dram));
      }
      if (p.optimizer == Optimizer::adamw) {
        EASEL_ASSIGN_OR_RETURN(s.second, arena_on(g, n, MemKind::dram));
      }
      if (feedback(p)) {
        EASEL_ASSIGN_OR_RETURN(s.residual, arena_on(g, n, MemKind::dram));
      }
      copy_bytes(s.anchor.data(), MemKind::dram, g.weights.data(), g.weights.kind(),
                 static_cast<size_t>(n) * sizeof(float));
    }
    return {};
  }

  void run_round(Run& run, Group& g, int64_t iterations) override {
    const AlgoParams& p = run.params;
    PerGroup& s = per_[static_cast<size_t>(g.id)];
    for (int64_t i = 0; i < iterations; ++i) {
      if (stop_here(run, g)) break;  // every group at the same step
      const auto [step, lr] = start_step(run, g);
      {
        ScopedTimer t(&g.times.compute);
        if (p.optimizer == Optimizer::adamw)
          adamw_step(run.segments(), g.weights.data(), g.diff.data(), g.momentum.data(),
                     s.second.data(), lr, p.weight_decay, p.adamw, step + 1);
        else
          local_step(run, g, lr, p.momentum > 0 ? LocalRule::heavy_ball : LocalRule::sgd);
      }
      g.steps.fetch_add(1, std::memory_order_relaxed);
      if ((step + 1) % p.tau == 0) exchange(run, g, s, lr);
    }
  }

  // The anchor: the model of the groups' last meeting.
  const float* eval_weights(Run& run) override {
    (void)run;
    return per_[0].anchor.data();
  }

  // [anchor][outer momentum, slowmo and diloco][each group's second moment, adamw][each group's
  // residual, int8]: the anchor and outer momentum are the same on every group.
  AlgoState save_state(Run& run) override {
    AlgoState st;
    const size_t n = static_cast<size_t>(run.arena_floats());
    auto put = [&](const Arena& a) { st.buffer.insert(st.buffer.end(), a.data(), a.data() + n); };
    for (Arena* a : shared_arenas(per_[0]))
      put(*a);
    for (PerGroup& s : per_)
      for (Arena* a : own_arenas(s, run.params))
        put(*a);
    return st;
  }

  // At a meeting every group's weights are the anchor, so a checkpoint taken there re-splits
  // into any number of groups: each starts from the anchor with the old groups' mean momentum
  // (AdamW's first moment; restore_state takes the mean of the second), the outer momentum
  // carried over. Between meetings each group's steps since the last one are its own: refused.
  bool regroupable() const override { return true; }
  Result<RegroupStart> regroup_start(const Run& run, std::span<const float> centre,
                                     const AlgoState& st, int64_t step, size_t had) const override {
    (void)centre;
    const int64_t tau = run.params.tau;
    if (step % tau != 0)
      return invalid_argument(
          "--groups: a checkpoint of " + name_ + " taken between two meetings (iteration " +
          std::to_string(step) + ", --tau " + std::to_string(tau) + ") resumes only with its " +
          std::to_string(had) + " group(s), not " + std::to_string(run.groups.size()) +
          ": each group's steps since the meeting at iteration " +
          std::to_string(step / tau * tau) +
          " are its own and cannot be re-split (a checkpoint at a multiple of --tau can: give "
          "--eval-every a multiple of it)");
    if (st.buffer.size() < static_cast<size_t>(run.arena_floats()))
      return invalid_argument("--resume: the checkpoint holds no " + name_ + " anchor");
    return RegroupStart{st.buffer.data(), true};
  }

  // The shared arenas go to every group. The own ones, from as many groups as the checkpoint
  // had: each its own, or (resumed into another number of groups, at a meeting) AdamW's second
  // moment the old groups' mean and the int8 residual zero (what the old groups had not yet
  // sent is dropped: at most the last exchange's rounding error).
  Status restore_state(Run& run, const AlgoState& st) override {
    const size_t n = static_cast<size_t>(run.arena_floats());
    const size_t shared = shared_arenas(per_[0]).size();
    const size_t own = own_arenas(per_[0], run.params).size();
    const size_t arenas = st.buffer.size() / n;
    const size_t had = own == 0 ? per_.size() : (arenas - std::min(arenas, shared)) / own;
    if (st.turn != 0 || st.buffer.size() % n != 0 || had == 0 || arenas != shared + had * own)
      return invalid_argument("--resume: the checkpoint's " + name_ +
                              " state does not fit this run (its --optimizer or "
                              "--exchange-precision differ)");
    const float* src = st.buffer.data();
    for (PerGroup& s : per_) {
      const float* p = src;
      for (Arena* a : shared_arenas(s)) {
        span_copy(a->data(), p, static_cast<int64_t>(n));
        p += n;
      }
    }
    src += shared * n;
    if (had == per_.size()) {
      for (PerGroup& s : per_)
        for (Arena* a : own_arenas(s, run.params)) {
          span_copy(a->data(), src, static_cast<int64_t>(n));
          src += n;
        }
      return {};
    }
    for (size_t k = 0; k < own; ++k) {
      std::vector<float> v(n, 0.f);
      const bool second = run.params.optimizer == Optimizer::adamw && k == 0;
      if (second) {
        for (size_t old = 0; old < had; ++old) {
          const float* q = src + (old * own + k) * n;
          for (size_t j = 0; j < n; ++j)
            v[j] += q[j];
        }
        span_scale(v.data(), 1.f / static_cast<float>(had), static_cast<int64_t>(n));
      }
      for (PerGroup& s : per_)
        span_copy(own_arenas(s, run.params)[k]->data(), v.data(), static_cast<int64_t>(n));
    }
    return {};
  }

 private:
  struct PerGroup {
    Arena anchor;    // x: the weights of the last meeting (the same on every group)
    Arena outer;     // u: the outer momentum (slowmo, diloco; the same on every group)
    Arena second;    // v: AdamW's second moment (--optimizer adamw; m is Group::momentum)
    Arena residual;  // e: the error-feedback residual (int8)
    Arena send;      // what the group sends, then the groups' mean
  };

  static bool feedback(const AlgoParams& p) { return p.precision == ExchangePrecision::int8; }

  std::vector<Arena*> shared_arenas(PerGroup& s) const {
    std::vector<Arena*> v{&s.anchor};
    if (rule_ != OuterRule::average) v.push_back(&s.outer);
    return v;
  }
  static std::vector<Arena*> own_arenas(PerGroup& s, const AlgoParams& p) {
    std::vector<Arena*> v;
    if (p.optimizer == Optimizer::adamw) v.push_back(&s.second);
    if (feedback(p)) v.push_back(&s.residual);
    return v;
  }

  // d_i = x - w_i, rounded as sent; the mean over all groups; the outer rule; w_i <- x.
  void exchange(Run& run, Group& g, PerGroup& s, float lr) {
    const AlgoParams& p = run.params;
    const int64_t n = run.arena_floats();
    float* d = s.send.data();
    float* x = s.anchor.data();
    float* e = feedback(p) ? s.residual.data() : nullptr;
    {
      ScopedTimer t(&g.times.comm);
      const float* w = g.weights.data();
      for (int64_t j = 0; j < n; ++j)
        d[j] = x[j] - w[j];
      if (e != nullptr)
        for (int64_t j = 0; j < n; ++j)
          d[j] += e[j];
    }
    // fp32: the plain allreduce; bf16, int8: the compressed one, every transfer packed; int8's
    // roundings of d and of the partial sums this group re-encodes (what the ring did not send)
    // carried to the next exchange in e.
    timed_collective(run, g, [&] {
      for_each_message(run, [&](int64_t off, int64_t m) {
        if (p.precision == ExchangePrecision::fp32)
          run.comm->allreduce_sum(g.global_id, d + off, m);
        else
          run.comm->allreduce_compressed(g.global_id, d + off, d + off, m, wire_format(p.precision),
                                         e ? e + off : nullptr);
      });
    });
    ScopedTimer t(&g.times.comm);
    span_scale(d, 1.f / static_cast<float>(run.total_groups()), n);
    switch (rule_) {
      case OuterRule::average:
        outer_average(x, d, n);
        break;
      case OuterRule::slowmo:
        outer_slowmo(x, s.outer.data(), d, n, p.outer_lr, p.outer_momentum, lr);
        break;
      case OuterRule::nesterov:
        outer_nesterov(x, s.outer.data(), d, n, p.outer_lr, p.outer_momentum);
        break;
    }
    copy_bytes(g.weights.data(), g.weights.kind(), x, MemKind::dram,
               static_cast<size_t>(n) * sizeof(float));
  }

  std::string name_;
  OuterRule rule_;
  std::vector<PerGroup> per_;
};

}  // namespace

std::vector<ExtraArena> periodic_arenas(const ArenaQuery& q, bool outer) {
  using C = BufferClass;
  std::vector<ExtraArena> v;
  for (int g = 0; g < q.groups; ++g) {
    v.push_back({C::weights, g});  // the anchor
    v.push_back({C::grads, g});    // what it sends
    if (outer) v.push_back({C::momentum, g});
    if (q.adamw) v.push_back({C::momentum, g});
    if (q.feedback) v.push_back({C::grads, g});
  }
  return v;
}

std::unique_ptr<Algorithm> make_periodic(std::string name, OuterRule rule) {
  return std::make_unique<Periodic>(std::move(name), rule);
}

}  // namespace easel
