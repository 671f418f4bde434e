// async-easgd and async-measgd: the EASGD exchange every tau steps, first come first served,
// with the centre update under the centre lock. async-measgd keeps momentum delta on the
// groups (Nesterov as in EAMSGD by default, heavy-ball selectable).
//
// Across MPI ranks the centre lives on rank 0, served by a dedicated thread there, first come
// first served (MPI_Recv from any source): a group on another rank sends its weights W^i (before
// its step) and alpha; the server, under the same centre lock as rank 0's own groups, replies
// with the centre before the update and its version, then applies Wc <- Wc + alpha*(W^i - Wc);
// the group applies its side of the same exchange from that copy. The effect on both sides is
// exactly the locked exchange of one process.
//
// Where MPI gives one thread only (MPI_THREAD_SINGLE: SimGrid's SMPI) and each rank has one
// group, rank 0 has no server thread: its group serves the requests waiting after each of its
// own steps, and at the end of its round serves until every other rank has said its round is
// over (a one-float request). Same exchanges, first come first served at rank 0's step
// boundaries.
#include <cstring>
#include <mutex>
#include <thread>

#include "algos/exchange.hpp"
#include "algos/list.hpp"
#include "engine/span_ops.hpp"

namespace easel {

namespace {

// Message layout: a request is [W^i (n floats) | alpha | group global id (int32 bits) | 2 spare];
// a reply is [Wc before the update (n floats) | version (int64 bits, 2 floats)]. A shorter
// request to the server stops it.
constexpr int kTagRequest = 100;
constexpr int kTagReply = 1000;  // + the requesting group's local id
constexpr int64_t kRequestExtra = 4, kReplyExtra = 2;

class AsyncEasgd final : public Algorithm {
 public:
  explicit AsyncEasgd(bool momentum) : momentum_(momentum) {}
  std::string name() const override { return momentum_ ? "async-measgd" : "async-easgd"; }
  bool uses_centre() const override { return true; }
  bool regroupable() const override { return true; }
  bool multi_process() const override { return true; }
  bool survives_group_loss() const override { return true; }

  void rejoin(Run& run, Group& g) override {
    std::unique_lock lock(centre_mu_, std::defer_lock);
    lock_or_stall(lock, g, name());
    rejoin_from_centre(run, g, false);
  }

  Status prepare(Run& run) override {
    if (run.ranks == 1) return {};
    polled_ = !run.world->thread_multiple();
    if (polled_ && run.size() != 1)
      return unavailable(name() +
                         " across MPI ranks: the centre's server thread needs "
                         "MPI_THREAD_MULTIPLE, which this MPI library does not provide (with one "
                         "group per rank, rank 0's group serves the centre itself)");
    const int64_t n = run.arena_floats();
    // Arenas (zeroed), which under tools/simulate --compute model share SMPI's pages unfilled.
    for (int i = 0; i < run.size(); ++i) {
      EASEL_ASSIGN_OR_RETURN(Arena req, Arena::create(n + kRequestExtra, MemKind::dram));
      EASEL_ASSIGN_OR_RETURN(Arena rep, Arena::create(n + kReplyExtra, MemKind::dram));
      request_.push_back(std::move(req));
      reply_.push_back(std::move(rep));
    }
    if (polled_) {
      EASEL_ASSIGN_OR_RETURN(in_, Arena::create(n + kRequestExtra, MemKind::dram));
      EASEL_ASSIGN_OR_RETURN(out_, Arena::create(n + kReplyExtra, MemKind::dram));
    } else if (run.rank == 0) {
      server_ = std::thread([this, &run] { serve(run); });
    }
    return {};
  }

  void finish(Run& run) override {
    if (!server_.joinable()) return;
    const float stop = 0;
    run.world->send(&stop, 1, 0, kTagRequest);
    server_.join();
  }

  void run_round(Run& run, Group& g, int64_t) override {
    const AlgoParams& p = run.params;
    while (claim_step(run, g)) {
      const auto [step, lr] = start_step(run, g);
      if ((step + 1) % p.tau == 0) check_replica(run, g, g.weights);
      if ((step + 1) % p.tau == 0 && run.rank != 0) {
        remote_exchange(run, g, lr, p.alpha_at(step));
      } else if ((step + 1) % p.tau == 0) {
        clock_exchange(run, g, true);
        const double t0 = now_seconds();
        std::unique_lock lock(centre_mu_, std::defer_lock);
        lock_or_stall(lock, g, name());
        const double t1 = now_seconds();
        add_time(&g.times.wait, t0, t1);
        const int64_t v = run.centre_version.fetch_add(1, std::memory_order_relaxed);
        note_staleness(g, g.centre_read_version, v);
        if (momentum_)
          easgd_momentum_exchange(run.segments(), g.weights.data(), g.diff.data(),
                                  g.momentum.data(), run.centre.data(), lr, p.momentum,
                                  p.weight_decay, p.alpha_at(step), p.nesterov);
        else
          easgd_exchange(run.segments(), g.weights.data(), g.diff.data(), run.centre.data(), lr,
                         p.weight_decay, p.alpha_at(step));
        if (run.serve_log) run.serve_log->push_back(g.id);
        g.centre_read_version = v + 1;
        lock.unlock();
        add_time(&g.times.comm, t1, now_seconds());
      } else {
        ScopedTimer t(&g.times.compute);
        local_step(run, g, lr, momentum_ ? momentum_rule(p) : LocalRule::sgd);
      }
      g.steps.fetch_add(1, std::memory_order_relaxed);
      if (polled_ && run.rank == 0) {  // the requests that came in meanwhile
        while (run.world->probe(kTagRequest))
          if (!serve_one(run, 0)) ++rounds_over_;
      }
    }
    if (polled_ && run.ranks > 1) {
      if (run.rank != 0) {
        const float done = 1;
        run.world->send(&done, 1, 0, kTagRequest);
      } else {  // serve until every other rank's round is over
        while (rounds_over_ < run.ranks - 1)
          if (!serve_one(run, -1)) ++rounds_over_;
        rounds_over_ = 0;
      }
    }
  }

  const float* eval_weights(Run& run) override { return run.centre.data(); }

 private:
  // A group on rank != 0: one round trip to the server, then its side of the exchange from the
  // centre it was served (the copy's own update is discarded).
  void remote_exchange(Run& run, Group& g, float lr, float alpha) {
    const AlgoParams& p = run.params;
    const int64_t n = run.arena_floats();
    const double t0 = now_seconds();
    float* req = request_[static_cast<size_t>(g.id)].data();
    float* rep = reply_[static_cast<size_t>(g.id)].data();
    span_copy(req, g.weights.data(), n);
    req[n] = alpha;
    const int32_t gid = g.global_id;
    std::memcpy(&req[n + 1], &gid, sizeof gid);
    run.world->send(req, n + kRequestExtra, 0, kTagRequest);
    int64_t got = 0;
    run.world->recv(rep, n + kReplyExtra, 0, kTagReply + g.id, &got);
    EASEL_CHECK(got == n + kReplyExtra);
    int64_t v = 0;
    std::memcpy(&v, &rep[n], sizeof v);
    const double t1 = now_seconds();
    note_staleness(g, g.centre_read_version, v);
    if (momentum_)
      easgd_momentum_exchange(run.segments(), g.weights.data(), g.diff.data(), g.momentum.data(),
                              rep, lr, p.momentum, p.weight_decay, alpha, p.nesterov);
    else
      easgd_exchange(run.segments(), g.weights.data(), g.diff.data(), rep, lr, p.weight_decay,
                     alpha);
    g.centre_read_version = v + 1;
    add_time(&g.times.comm, t0, t1);
    add_time(&g.times.compute, t1, now_seconds());
  }

  // Rank 0 without a server thread: receives one message (waiting up to timeout_s; 0: forever)
  // and serves it; false for a short (round over) message.
  bool serve_one(Run& run, double timeout_s) {
    const int64_t n = run.arena_floats();
    int64_t got = 0;
    const int src =
        run.world->recv(in_.data(), n + kRequestExtra, -1, kTagRequest, &got, timeout_s);
    if (got != n + kRequestExtra) return false;
    const float alpha = in_.data()[n];
    // One group per rank here: its global id is its rank. (Under tools/simulate --compute model
    // the request's payload, in SMPI's shared pages, is not copied: its id could be another's.)
    const int32_t gid = src;
    const int64_t v = run.centre_version.fetch_add(1, std::memory_order_relaxed);
    std::memcpy(&out_.data()[n], &v, sizeof v);
    span_copy(out_.data(), run.centre.data(), n);
    easgd_centre_pull(run.centre.data(), in_.data(), alpha, n);
    if (run.serve_log) run.serve_log->push_back(gid);
    run.world->send(out_.data(), n + kReplyExtra, src, kTagReply + (gid - src * run.size()));
    return true;
  }

  // Rank 0's server thread: serves requests in arrival order until a short (stop) message.
  void serve(Run& run) {
    TraceBind trace(run.centre_trace);  // a span per request served
    int64_t served = 0;
    const int64_t n = run.arena_floats();
    std::vector<float> in(static_cast<size_t>(n + kRequestExtra));
    std::vector<float> out(static_cast<size_t>(n + kReplyExtra));
    for (;;) {
      int64_t got = 0;
      const int src = run.world->recv(in.data(), n + kRequestExtra, -1, kTagRequest, &got, 0);
      if (got != n + kRequestExtra) return;
      if (run.centre_trace) run.centre_trace->begin_unit(served++);
      TraceSpan span("serve a remote group", "comm");
      const float alpha = in[static_cast<size_t>(n)];
      int32_t gid = 0;
      std::memcpy(&gid, &in[static_cast<size_t>(n + 1)], sizeof gid);
      {
        std::lock_guard lock(centre_mu_);
        const int64_t v = run.centre_version.fetch_add(1, std::memory_order_relaxed);
        std::memcpy(&out[static_cast<size_t>(n)], &v, sizeof v);
        span_copy(out.data(), run.centre.data(), n);
        easgd_centre_pull(run.centre.data(), in.data(), alpha, n);
        if (run.serve_log) run.serve_log->push_back(gid);
      }
      run.world->send(out.data(), n + kReplyExtra, src, kTagReply + (gid - src * run.size()));
    }
  }

  bool momentum_;
  bool polled_ = false;                 // no server thread (MPI_THREAD_SINGLE, one group per rank)
  int rounds_over_ = 0;                 // rank 0, polled: the other ranks whose round is over
  Arena in_, out_;                      // rank 0's request and reply, polled
  std::vector<Arena> request_, reply_;  // per local group, its thread only
  std::thread server_;                  // rank 0, across ranks
  std::timed_mutex centre_mu_;  // guards run.centre: this process's groups and the server thread
};

}  // namespace

std::unique_ptr<Algorithm> make_async_easgd() {
  return std::make_unique<AsyncEasgd>(false);
}
std::unique_ptr<Algorithm> make_async_measgd() {
  return std::make_unique<AsyncEasgd>(true);
}

}  // namespace easel
