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
      s.pos = s.met = s.end = g.steps.load();  // (a resumed run's groups: all at its step)
    }
    return {};
  }

  // The groups stand in lockstep at PerGroup::pos. A group that failed in the round (called
  // again: restarted, dropped or stopped) or was dropped before (its later rounds) walks on with
  // the others (skip_step) and meets them as an absent member, so that nobody waits for it and
  // the averages are over the groups present; a restarted one re-enters at the next meeting.
  void run_round(Run& run, Group& g, int64_t iterations) override {
    PerGroup& s = per_[static_cast<size_t>(g.id)];
    if (!s.midround) {  // the round's first call (not one after g's failure in it)
      s.met = s.pos;
      s.end = s.pos + iterations;
      if (g.dropped) s.live = false;
    }
    s.midround = false;
    if (!s.live && s.met < s.pos && s.pos % run.params.tau == 0) meet(run, g, s);  // owed
    while (s.pos < s.end && !stop_here(run, g, s.pos)) {  // every group at the same step
      if (s.live)
        train_step(run, g, s);
      else
        skip_step(run, g, s);
    }
  }

  // --on-failure drop and restart, at g's failure: its replica the anchor (finite, for a
  // checkpoint), its inner optimiser's state zero; restart re-enters at the next meeting.
  void rejoin(Run& run, Group& g) override {
    PerGroup& s = per_[static_cast<size_t>(g.id)];
    copy_bytes(g.weights.data(), g.weights.kind(), s.anchor.data(), MemKind::dram,
               static_cast<size_t>(run.arena_floats()) * sizeof(float));
    zero_inner_state(run, g, s);
    s.rejoining = true;  // (not once dropped: meet)
  }

  bool survives_group_loss() const override { return true; }

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
    // After a failure: each group's presence (restore_presence) and where its inner optimiser
    // restarted, by global id (one process: the local order).
    const bool failed = std::any_of(per_.begin(), per_.end(), [](const PerGroup& s) {
      return !s.live || s.rejoining || s.fresh_at != 0;
    });
    for (size_t i = 0; failed && i < per_.size(); ++i) {
      const PerGroup& s = per_[i];
      const int64_t presence = s.live ? 1 : s.rejoining && !run.groups[i]->dropped ? 2 : 0;
      st.words.insert(st.words.end(), {presence, s.fresh_at});
    }
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
    EASEL_RETURN_IF_ERROR(restore_presence(run, st));
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
    // Where the group stands in the lockstep: the steps the groups have walked (its own lost
    // ones included: Group::steps counts those it did), the round's end, its last meeting's.
    int64_t pos = 0, end = 0, met = 0;
    int64_t fresh_at = 0;    // pos where its inner optimiser's state was last zero (AdamW's t)
    bool live = true;        // training; else failed: absent from the meetings
    bool rejoining = false;  // failed under --on-failure restart: re-enters at the next meeting
    bool midround = false;   // failed in this round: run_round is called again to go on in it
  };

  // Every group at the checkpoint's step (a group's own count leaves out the steps it lost),
  // present or not as it was: save_state's words, two per group of the run (by global id), each
  // checked (presence 1 live, 2 absent until the next meeting, 0 absent for good: dropped; the
  // inner optimiser's restart within the run's steps). None when no group had failed, or from
  // another number of groups (regrouped at a meeting): every group afresh.
  Status restore_presence(const Run& run, const AlgoState& st) {
    const bool same = st.words.size() == 2 * static_cast<size_t>(run.total_groups());
    for (size_t i = 0; i < per_.size(); ++i) {
      PerGroup& s = per_[i];
      const Group& g = *run.groups[i];
      const size_t w = 2 * static_cast<size_t>(g.global_id);
      const int64_t presence = same ? st.words[w] : 1, fresh_at = same ? st.words[w + 1] : 0;
      if (presence < 0 || presence > 2 || (presence == 0) != g.dropped || fresh_at < 0 ||
          fresh_at > st.step)
        return invalid_argument("--resume: the checkpoint's " + name_ + " state of group " +
                                std::to_string(g.global_id) +
                                " does not add up (its presence or its optimiser's restart)");
      s.pos = s.met = s.end = st.step;
      s.live = presence == 1;
      s.rejoining = presence == 2;
      s.fresh_at = fresh_at;
    }
    return {};
  }

  // One step of a live group at s.pos: gradient, inner update, and every --tau steps the
  // meeting (its replica checked first under drop and restart). A failure in it loses the step:
  // the group is absent from then on (the trainer counts the step lost and says what follows).
  void train_step(Run& run, Group& g, PerGroup& s) {
    const AlgoParams& p = run.params;
    const float lr = static_cast<float>(p.lr.at(s.pos));
    try {
      local_gradient(g);
      {
        ScopedTimer t(&g.times.compute);
        if (p.optimizer == Optimizer::adamw)
          adamw_step(run.segments(), g.weights.data(), g.diff.data(), g.momentum.data(),
                     s.second.data(), lr, p.weight_decay, p.adamw, s.pos - s.fresh_at + 1);
        else
          local_step(run, g, lr, p.momentum > 0 ? LocalRule::heavy_ball : LocalRule::sgd);
      }
      if ((s.pos + 1) % p.tau == 0) check_replica(run, g, g.weights);
    } catch (...) {
      ++s.pos;
      s.live = false;
      s.rejoining = false;  // (rejoin sets it under restart)
      s.midround = true;
      throw;
    }
    g.steps.fetch_add(1, std::memory_order_relaxed);
    ++s.pos;
    if (s.pos % p.tau == 0) meet(run, g, s);
  }

  // A step an absent group does not do (a lost group-step of the round), and its meeting.
  void skip_step(Run& run, Group& g, PerGroup& s) {
    run.lost_steps.fetch_add(1, std::memory_order_relaxed);
    ++s.pos;
    if (s.pos % run.params.tau == 0) meet(run, g, s);
  }

  // The meeting at s.pos (exchange); then a restarted group re-enters from its anchor, the
  // post-average weights every group starts from, its inner optimiser's state zero.
  void meet(Run& run, Group& g, PerGroup& s) {
    s.met = s.pos;
    exchange(run, g, s, static_cast<float>(run.params.lr.at(s.pos - 1)));
    if (s.live || !s.rejoining || g.dropped) return;
    zero_inner_state(run, g, s);
    s.fresh_at = s.pos;
    s.live = true;
    s.rejoining = false;
    if (run.on_rejoin) run.on_rejoin(run, g);
  }

  void zero_inner_state(const Run& run, Group& g, PerGroup& s) const {
    span_zero(g.momentum.data(), run.arena_floats());
    if (s.second.size() > 0) span_zero(s.second.data(), run.arena_floats());
  }

  // The groups at this meeting: under --on-failure drop or restart (one process) the sum of one
  // float of each group's presence, so that every group divides by the same count; under stop
  // every group of the run (a failure ends the run after its round, none of it kept).
  static float groups_present(Run& run, Group& g, bool present) {
    if (run.on_failure == OnFailure::stop) return static_cast<float>(run.total_groups());
    float count = present ? 1.f : 0.f;
    timed_collective(run, g, [&] { run.comm->allreduce_sum(g.global_id, &count, 1); });
    return count;
  }

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

  // The outer rule on s's anchor from d, the groups' mean pseudo-gradient.
  void outer_step(const Run& run, PerGroup& s, const float* d, float lr) const {
    const AlgoParams& p = run.params;
    const int64_t n = run.arena_floats();
    float* x = s.anchor.data();
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
  }

  // d_i = x - w_i (an absent group's 0), rounded as sent; the mean over the groups present
  // (the sum, to which an absent group adds exact zeros, over their count); the outer rule (none
  // when no group is present); every w_i <- x.
  void exchange(Run& run, Group& g, PerGroup& s, float lr) {
    const AlgoParams& p = run.params;
    const int64_t n = run.arena_floats();
    float* d = s.send.data();
    float* x = s.anchor.data();
    float* e = feedback(p) ? s.residual.data() : nullptr;
    {
      ScopedTimer t(&g.times.comm);
      const float* w = g.weights.data();
      if (s.live)
        for (int64_t j = 0; j < n; ++j)
          d[j] = x[j] - w[j];
      else
        span_zero(d, n);
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
    const float present = groups_present(run, g, s.live);
    ScopedTimer t(&g.times.comm);
    if (present > 0) {
      span_scale(d, 1.f / present, n);
      outer_step(run, s, d, lr);
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
