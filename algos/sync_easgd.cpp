// sync-easgd: every tau steps all groups exchange with the centre at once (deterministic):
//   S = sum_i W^i                        (reduce: tree collective, or P serial exchanges)
//   W^i <- W^i - eta*dW^i - alpha*(W^i - Wc)   on every group (each reads the centre)
//   Wc  <- Wc + alpha*(S - P*Wc)               on the root
// The groups' local step is plain SGD with --momentum 0, else momentum SGD with delta =
// --momentum (Nesterov or heavy-ball, --momentum-form), i.e. a synchronous EAMSGD: the same
// exchange, with the local step that reaches a target accuracy soonest (docs/DESIGN.md).
// The paper's co-design switches: --reduce tree|serial, --pack single|per-layer, and
// --overlap on, where the reduction and the centre update run on a communication thread while
// the groups compute their next steps; the groups wait for it only at their next exchange. That
// thread sums in the order --reduce says (tree: the shared-memory Comm's tree collective's) and
// one pass per message (--pack), so the result is the same bits as without overlap.
// Across MPI ranks (--reduce tree, --overlap off), --sync-centre master: S is reduced over all P
// groups into global group 0, rank 0 updates Wc and broadcasts it into every rank's copy;
// --sync-centre allreduce (auto's choice across ranks): S is allreduced and every process updates
// its own copy of Wc from it by the same rule, with no broadcast: the same S (the collective's
// reduce and allreduce sum in one order), so the same bits. Either way a run of R ranks x 1
// group equals one process with R groups under the same --collective.
// The overlap path and the fast exchanges sum in the tree's order; the Comm path in the order
// of --collective (the tree's with --collective tree, the paper's co-design).
// In one process on the CPU (--reduce tree, --pack single, --collective tree or auto, --overlap
// off) a faster exchange replaces the Comm's, with the same numbers bit for bit: partitioned (each
// group updates its 1/P slice of Wc) or, with P <= 2, mirrored (each group keeps its own Wc).
// They live beside this file, in algos/sync_easgd_fast.{hpp,cpp}; this file only picks one.
// On GPUs with resident weights (Run::resident, --reduce tree): the same with NCCL: Wc lives
// on group 0's GPU, every other group keeps a copy on its own GPU, S is reduced into group 0's
// GPU and the updated Wc broadcast into the copies; only the batch crosses the host link (Sync
// EASGD2). With --overlap on (Sync EASGD3) that exchange runs on each device's communication
// stream, ordered against its compute stream by events (exchange_on_devices), so still only the
// batch crosses the host link, and the result is the same bits.
// --exchange comm keeps the Comm path (and the overlap path) whatever the other switches say, so
// that --reduce, --pack and --overlap each change one thing (tools/compare codesign).
#include "algos/sync_easgd.hpp"

#include <algorithm>
#include <future>

#include "algos/exchange.hpp"
#include "algos/list.hpp"
#include "algos/sync_easgd_fast.hpp"
#include "engine/comm/comm.hpp"
#include "engine/span_ops.hpp"

namespace easel {

namespace {

class SyncEasgd final : public Algorithm {
 public:
  explicit SyncEasgd(SyncExchange which) : which_(which) {}
  std::string name() const override { return "sync-easgd"; }
  bool uses_centre() const override { return true; }
  bool regroupable() const override { return true; }
  bool multi_process() const override { return true; }
  bool uses_collectives() const override { return fast_ == nullptr; }  // the Comm's path
  std::string exchange_path() const override { return sync_exchange_path_name(path_); }
  bool device_resident() const override { return true; }

  Status prepare(Run& run) override {
    EASEL_RETURN_IF_ERROR(check_switches(run));
    EASEL_ASSIGN_OR_RETURN(fast_, choose_fast(run));
    if (fast_) return fast_->prepare(run);
    EASEL_ASSIGN_OR_RETURN(allreduce_, centre_by_allreduce(run));
    if (allreduce_) {  // every group's own sum buffer; no scratch on the root
      sums_.resize(run.groups.size());
      for (size_t i = 0; i < run.groups.size(); ++i) {
        EASEL_ASSIGN_OR_RETURN(sums_[i],
                               arena_on(*run.groups[i], run.arena_floats(), run.centre.kind()));
      }
      return {};
    }
    // S is reduced into the root.
    EASEL_ASSIGN_OR_RETURN(scratch_,
                           arena_on(*run.groups[0], run.arena_floats(), run.centre.kind()));
    if (run.resident && run.size() > 1) {  // a copy of Wc on every other group's GPU
      centre_copies_.resize(run.groups.size());
      for (size_t i = 1; i < run.groups.size(); ++i) {
        Arena& c = centre_copies_[i];
        EASEL_ASSIGN_OR_RETURN(c, arena_on(*run.groups[i], run.arena_floats(), MemKind::device));
        copy_bytes(c.data(), c.kind(), run.centre.data(), run.centre.kind(),
                   static_cast<size_t>(run.arena_floats()) * sizeof(float));
      }
    }
    return run.params.overlap ? prepare_overlap(run) : Status{};
  }

  // The paper's rule, every tau steps; the local step alone between exchanges.
  void run_round(Run& run, Group& g, int64_t iterations) override {
    const AlgoParams& p = run.params;
    for (int64_t i = 0; i < iterations; ++i) {
      if (stop_here(run, g)) break;  // every group at the same step
      const int64_t step = g.steps.load(std::memory_order_relaxed);
      const bool exchanging = (step + 1) % p.tau == 0;
      if (fast_ && exchanging) fast_->publish(run, g);  // its weights for this exchange are final
      local_gradient(g);
      const float lr = static_cast<float>(p.lr.at(step));
      if (exchanging) {
        if (fast_)
          fast_->exchange(run, g, lr, p.alpha_at(step));
        else if (p.overlap)
          exchange_overlapped(run, g, lr, p.alpha_at(step));
        else if (allreduce_)
          exchange_allreduce(run, g, lr, p.alpha_at(step));
        else
          exchange(run, g, lr, p.alpha_at(step));
      } else {
        ScopedTimer t(&g.times.compute);
        local_step(run, g, lr, p.momentum == 0 ? LocalRule::sgd : momentum_rule(p));
      }
      g.steps.fetch_add(1, std::memory_order_relaxed);
    }
    if (p.overlap) finish_pending(run, g);
  }

  // Between rounds every group has made the same number of exchanges.
  const float* eval_weights(Run& run) override {
    return fast_ ? fast_->centre(run) : run.centre.data();
  }

 private:
  // The switches that cannot go together, each refusal naming its flag.
  static Status check_switches(const Run& run) {
    if (run.resident && run.params.reduce == ReduceMode::serial)
      return invalid_argument(
          "--reduce serial: the P serial exchanges read the other groups' weights in shared "
          "memory; with the weights resident on GPUs use --reduce tree (NCCL)");
    if (run.ranks > 1 && run.params.reduce == ReduceMode::serial)
      return invalid_argument(
          "--reduce serial: the P serial exchanges run through one process's shared memory; "
          "across MPI ranks use --reduce tree");
    if (run.ranks > 1 && run.params.overlap)
      return invalid_argument(
          "--overlap on: the communication thread runs within one process; across MPI ranks use "
          "--overlap off");
    return {};
  }

  // --sync-centre: whether the Comm path allreduces S into every process's centre.
  static Result<bool> centre_by_allreduce(const Run& run) {
    const AlgoParams& p = run.params;
    if (p.sync_centre == SyncCentre::master) return false;
    const bool ok = !run.resident && !p.overlap && p.reduce == ReduceMode::tree;
    if (p.sync_centre == SyncCentre::allreduce && !ok)
      return invalid_argument(
          "--sync-centre allreduce: runs on the CPU's Comm path with --reduce tree and "
          "--overlap off (with GPU-resident weights or --overlap on the centre is a master's)");
    return p.sync_centre == SyncCentre::allreduce || (ok && run.ranks > 1);
  }

  // Sync EASGD on an allreduce: S = the allreduce of the groups' weights into every group's own
  // buffer, the elastic step from the old Wc, then group 0 of each process updates its copy of
  // Wc from S: Wc <- Wc + alpha*(S - P*Wc), the master's rule on the same S, and no broadcast.
  void exchange_allreduce(Run& run, Group& g, float lr, float alpha) {
    const int64_t n = run.arena_floats();
    float* s = sums_[static_cast<size_t>(g.id)].data();
    {
      ScopedTimer t(&g.times.comm);
      g.kernels->copy(s, g.weights.data(), n);
    }
    timed_collective(run, g, [&] {
      for_each_message(
          run, [&](int64_t off, int64_t m) { run.comm->allreduce_sum(g.global_id, s + off, m); });
    });
    {
      ScopedTimer t(&g.times.compute);
      elastic_step(run, g, lr, alpha);
    }
    // Only this process's groups share its Wc: one group alone meets nobody.
    const bool meet = run.size() > 1;
    if (meet) timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });  // Wc read
    if (g.id == 0) {
      ScopedTimer t(&g.times.comm);
      g.kernels->elastic_centre_sum(run.centre.data(), s, alpha, run.total_groups(), n);
    }
    if (meet) timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });  // Wc updated
  }

  // The single-process fast exchange this run takes (null: the Comm or the overlap path), as
  // choose_sync_exchange() says: the trainer's run asks for its plan's path (run/run_plan.cpp,
  // resolve_plan), which this checks; a Run built by hand (the benchmarks, the tests) may ask
  // for auto. which_ (the benchmark's) overrides --exchange.
  Result<std::unique_ptr<FastExchange>> choose_fast(const Run& run) {
    const AlgoParams& p = run.params;
    const SyncExchange which = which_ != SyncExchange::automatic ? which_ : p.exchange;
    const bool state = std::any_of(run.segments().begin(), run.segments().end(),
                                   [](const Segment& x) { return x.state; });
    EASEL_ASSIGN_OR_RETURN(
        const SyncExchangeChoice choice,
        choose_sync_exchange(which, sync_switches(p, run.ranks, run.resident), state, run.size()));
    path_ = choice.path;
    switch (path_) {
      case SyncExchangePath::partitioned:
        return make_partitioned_exchange();
      case SyncExchangePath::mirrored:
        return make_mirrored_exchange();
      case SyncExchangePath::comm:
        break;
    }
    return std::unique_ptr<FastExchange>();
  }

  // The overlap path's buffers: every group's snapshot (on its GPU when resident), and on the
  // CPU the communication thread (on all the groups' cpus). On GPUs each device's communication
  // stream does that thread's work (exchange_on_devices).
  Status prepare_overlap(Run& run) {
    for (auto& g : run.groups) {
      EASEL_ASSIGN_OR_RETURN(Arena a, arena_on(*g, run.arena_floats(), g->weights.kind()));
      send_.push_back(std::move(a));
    }
    if (run.resident) return {};
    GroupSpec spec;
    spec.id = -1;
    for (const auto& g : run.groups)
      for (int c : g->worker->spec().cpus)
        spec.cpus.push_back(c);
    EASEL_ASSIGN_OR_RETURN(comm_thread_, WorkerThread::start(spec, false));
    return {};
  }

  // Wc as group g reads it: the shared centre, or g's copy on its GPU.
  float* centre_of(Run& run, const Group& g) {
    const size_t i = static_cast<size_t>(g.id);
    return i < centre_copies_.size() && i > 0 ? centre_copies_[i].data() : run.centre.data();
  }

  // The local step with the elastic pull towards the centre, from the weights before both.
  void elastic_step(Run& run, Group& g, float lr, float alpha) {
    const AlgoParams& p = run.params;
    if (p.momentum == 0)
      g.kernels->elastic_sgd_step(run.segments(), g.weights.data(), g.diff.data(),
                                  centre_of(run, g), lr, p.weight_decay, alpha);
    else
      g.kernels->elastic_momentum_step(run.segments(), g.weights.data(), g.diff.data(),
                                       g.momentum.data(), centre_of(run, g), lr, p.momentum,
                                       p.weight_decay, alpha, p.nesterov);
  }

  // S = sum of the groups' weights into scratch_ on the root (group 0).
  void reduce_weights(Run& run, Group& g) {
    if (run.params.reduce == ReduceMode::tree) {
      timed_collective(run, g, [&] {
        for_each_message(run, [&](int64_t off, int64_t n) {
          run.comm->reduce_sum(g.global_id, g.weights.data() + off, scratch_.data() + off, n, 0);
        });
      });
      return;
    }
    // Serial: the root pulls the P replicas one after the other; the others wait.
    timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });
    if (g.id == 0) {
      ScopedTimer t(&g.times.comm);
      for_each_message(run, [&](int64_t off, int64_t n) {
        span_copy(scratch_.data() + off, run.groups[0]->weights.data() + off, n);
        for (int j = 1; j < run.size(); ++j)
          span_axpy(scratch_.data() + off, 1.f,
                    run.groups[static_cast<size_t>(j)]->weights.data() + off, n);
      });
    }
    timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });
  }

  void exchange(Run& run, Group& g, float lr, float alpha) {
    reduce_weights(run, g);
    {
      ScopedTimer t(&g.times.compute);
      elastic_step(run, g, lr, alpha);
    }
    timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });  // everyone has read Wc
    if (g.global_id == 0) {
      ScopedTimer t(&g.times.comm);
      g.kernels->elastic_centre_sum(run.centre.data(), scratch_.data(), alpha, run.total_groups(),
                                    run.arena_floats());
    }
    if (run.ranks == 1 && centre_copies_.empty()) {
      timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });  // Wc is updated
      return;
    }
    // Across ranks every process keeps a copy of Wc, and on GPUs every group: the root's update
    // is broadcast into all of them (the local groups of a process pass the same buffer; the
    // broadcast ends when Wc is updated).
    timed_collective(run, g, [&] {
      for_each_message(run, [&](int64_t off, int64_t n) {
        run.comm->broadcast(g.global_id, centre_of(run, g) + off, n, 0);
      });
    });
  }

  void exchange_overlapped(Run& run, Group& g, float lr, float alpha) {
    if (run.resident) return exchange_on_devices(run, g, lr, alpha);
    finish_pending(run, g);  // the previous exchange's centre update is done
    const int64_t n = run.arena_floats();
    {
      ScopedTimer t(&g.times.comm);
      span_copy(send_[static_cast<size_t>(g.id)].data(), g.weights.data(), n);
    }
    {
      ScopedTimer t(&g.times.compute);
      elastic_step(run, g, lr, alpha);
    }
    timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });  // snapshots taken, Wc read
    if (g.id == 0) {
      float* centre = run.centre.data();
      float* scratch = scratch_.data();
      pending_ = comm_thread_->post([this, centre, scratch, n, alpha, &run] {
        update_centre_from_snapshots(run, centre, scratch, alpha, n);
      });
    }
  }

  // Sync EASGD3 on GPUs: the exchange runs on every device's communication stream while its
  // compute stream goes on, and only events order the two; nothing crosses the host link (as in
  // Sync EASGD2). Exchange e of group g, queued from its thread, which never waits:
  //   compute waits for comm         exchange e-1 is done: Wc_e is in g's copy, and its reduce
  //                                  has read g's snapshot
  //   compute: snapshot <- W; the elastic step from W and g's copy of Wc_e
  //   comm waits for compute         the snapshot is taken and the copy of Wc_e read
  //   comm: S = reduce of the snapshots into the root (NCCL); on the root Wc <- Wc + alpha*(S -
  //   P*Wc); Wc broadcast into every copy
  // The same arithmetic as without overlap, in the same order (the Comm's reduce): the same bits.
  void exchange_on_devices(Run& run, Group& g, float lr, float alpha) {
    Device& d = *g.device;
    const int64_t n = run.arena_floats();
    float* send = send_[static_cast<size_t>(g.id)].data();
    {
      ScopedTimer t(&g.times.compute);
      d.compute_waits_for_comm();
      g.kernels->copy(send, g.weights.data(), n);
      elastic_step(run, g, lr, alpha);
    }
    ScopedTimer t(&g.times.comm);  // queueing only: the transfers overlap the next steps
    d.comm_waits_for_compute();
    for_each_message(run, [&](int64_t off, int64_t m) {
      run.comm->reduce_sum_queued(g.global_id, send + off, scratch_.data() + off, m, 0);
    });
    if (g.id == 0)
      d.comm_kernels().elastic_centre_sum(run.centre.data(), scratch_.data(), alpha, run.size(), n);
    for_each_message(run, [&](int64_t off, int64_t m) {
      run.comm->broadcast_queued(g.global_id, centre_of(run, g) + off, m, 0);
    });
  }

  // Waits (as group g) until the last exchange's centre update is done: the communication
  // thread's job, or on GPUs g's communication stream; then every group meets (Wc is whole).
  void finish_pending(Run& run, Group& g) {
    if (run.resident) {
      ScopedTimer t(&g.times.wait);
      g.device->synchronize_comm();
    } else if (g.id == 0 && pending_.valid()) {
      ScopedTimer t(&g.times.wait);
      pending_.get();
    }
    timed_collective(run, g, [&] { run.comm->barrier(g.global_id); });
  }

  // The overlap path's reduction and centre update on the communication thread, from the groups'
  // snapshots, in the order --reduce says and one pass per message (--pack), so that --overlap
  // on changes when they run and nothing else: tree, the shared-memory Comm's binomial-tree
  // order (centre_update_slice, the partitioned exchange's kernel); serial, the root adding the
  // P snapshots in turn, as reduce_weights does.
  void update_centre_from_snapshots(Run& run, float* centre, float* scratch, float alpha,
                                    int64_t n) {
    const int p = run.size();
    if (run.params.reduce == ReduceMode::tree) {
      std::vector<const float*> w(send_.size());
      for (size_t j = 0; j < send_.size(); ++j)
        w[j] = send_[j].data();
      for_each_message(run, [&](int64_t off, int64_t m) {
        centre_update_slice(w, centre, centre, alpha, off, off + m, tree_tmp_);
      });
      return;
    }
    for_each_message(run, [&](int64_t off, int64_t m) {
      span_copy(scratch + off, send_[0].data() + off, m);
      for (size_t j = 1; j < send_.size(); ++j)
        span_axpy(scratch + off, 1.f, send_[j].data() + off, m);
      elastic_centre_sum(centre + off, scratch + off, alpha, p, m);
    });
    (void)n;
  }

  SyncExchange which_;
  std::unique_ptr<FastExchange> fast_;  // the single-process fast exchange, when it runs
  SyncExchangePath path_ = SyncExchangePath::comm;
  std::vector<Arena> send_;           // overlap: each group's weights at the exchange
  std::vector<Arena> centre_copies_;  // resident on GPUs: [i] is group i's copy of Wc (i > 0)
  bool allreduce_ = false;            // --sync-centre: S allreduced into sums_
  std::vector<Arena> sums_;           // [i]: group i's S (allreduce centre)
  Arena scratch_;                     // the Comm path: S, reduced into the root (group 0)
  std::unique_ptr<WorkerThread> comm_thread_;
  std::vector<float> tree_tmp_;  // overlap, --reduce tree: the communication thread's chunks
  std::future<void> pending_;    // touched by group 0 only
};

}  // namespace

const char* fast_exchange_lacks(const SyncSwitches& s) {
  if (s.ranks > 1) return "more than one MPI rank";
  if (s.on_devices) return "--device (a GPU)";
  if (s.reduce != ReduceMode::tree) return "--reduce serial";
  if (s.pack != PackMode::single) return "--pack per-layer";
  if (s.overlap) return "--overlap on";
  if (s.collective != CollectiveAlgo::tree && s.collective != CollectiveAlgo::automatic)
    return "--collective other than tree or auto";
  return nullptr;
}

const char* sync_exchange_path_name(SyncExchangePath path) {
  switch (path) {
    case SyncExchangePath::partitioned:
      return "partitioned";
    case SyncExchangePath::mirrored:
      return "mirrored";
    case SyncExchangePath::comm:
      break;
  }
  return "comm";
}

bool takes_sync_exchange(std::string_view algo) {
  return algo == "sync-easgd";
}

Result<SyncExchangeChoice> choose_sync_exchange(SyncExchange asked, const SyncSwitches& s,
                                                bool state, int groups) {
  const char* lacks = fast_exchange_lacks(s);
  const auto fast = [&](bool partitioned, std::string why) {
    return SyncExchangeChoice{
        partitioned ? SyncExchangePath::partitioned : SyncExchangePath::mirrored, std::move(why)};
  };
  if (asked == SyncExchange::comm)
    return SyncExchangeChoice{SyncExchangePath::comm, "--exchange comm"};
  if (asked == SyncExchange::automatic) {
    // The fast exchanges read the other groups' weights as soon as they are published, before
    // those groups' steps: state a step updates in place (batch norm's running statistics)
    // would be read while it is written. A net with state takes the Comm path, which reads
    // every group's weights after its step.
    if (lacks != nullptr)
      return SyncExchangeChoice{SyncExchangePath::comm,
                                std::string("auto: the fast exchanges do not run with ") + lacks};
    if (state)
      return SyncExchangeChoice{SyncExchangePath::comm,
                                "auto: the net has running statistics, which the fast exchanges "
                                "would read while a step writes them"};
    return fast(groups > 2,
                std::string("auto: one process on the CPU with the default switches, ") +
                    (groups > 2 ? "more than 2 groups" : "at most 2 groups"));
  }
  const bool partitioned = asked == SyncExchange::partitioned;
  const std::string flag = std::string("--exchange ") + (partitioned ? "partitioned" : "mirrored");
  if (lacks != nullptr)
    return invalid_argument(flag +
                            ": sync-easgd's fast exchanges run in one process on the CPU with "
                            "--reduce tree, --pack single, --collective tree (or auto) and "
                            "--overlap off, not " +
                            lacks + " (--exchange comm runs every combination)");
  if (state)
    return invalid_argument(flag +
                            ": sync-easgd's fast exchanges would read the net's running "
                            "statistics while a step writes them (use --exchange comm)");
  return fast(partitioned, flag);
}

std::unique_ptr<Algorithm> make_sync_easgd(SyncExchange which) {
  return std::make_unique<SyncEasgd>(which);
}

std::unique_ptr<Algorithm> make_sync_easgd() {
  return make_sync_easgd(SyncExchange::automatic);
}

PhaseNames sync_easgd_phases(const AlgoParams& p) {
  const char* exchange = p.overlap                        ? "elastic exchange (overlapped)"
                         : p.reduce == ReduceMode::serial ? "elastic exchange (serial)"
                         : p.pack == PackMode::per_layer  ? "elastic exchange (per layer)"
                                                          : "elastic exchange";
  return {exchange, p.overlap ? "wait for the centre job" : "wait for the groups"};
}

// Beyond the centre: the shared-memory exchanges' (partitioned, P > 2: a second centre and a
// second weights arena per group; mirrored, P <= 2: a copy of the centre on every group but 0
// and, P > 1, two published weights arenas per group), else the Comm path's scratch centre and,
// with --overlap, a snapshot of each group's weights (allocated on the main thread: counted on
// the group's node).
std::vector<ExtraArena> sync_easgd_arenas(const ArenaQuery& q) {
  using C = BufferClass;
  const int p = q.groups;
  std::vector<ExtraArena> v;
  if (!q.sync_fast) {
    v.push_back({C::centre, -1});  // the reduction's scratch
    if (q.overlap)
      for (int g = 0; g < p; ++g)
        v.push_back({C::weights, g});
  } else if (p > 2) {  // partitioned
    v.push_back({C::centre, -1});
    for (int g = 0; g < p; ++g)
      v.push_back({C::weights, g});
  } else {  // mirrored
    for (int g = 0; g < p; ++g) {
      if (g > 0) v.push_back({C::centre, g});
      for (int b = 0; b < 2 && p > 1; ++b)
        v.push_back({C::weights, g});
    }
  }
  return v;
}

}  // namespace easel
