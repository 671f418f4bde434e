// The exchange of the flat arena among P groups (one pinned thread each): the shared-memory
// Comm's reduce_sum and broadcast (tree and ring), the fused elastic updates, the momentum
// update, and Sync EASGD's whole exchange as the algorithm itself runs it (algos/sync_easgd.cpp's
// run_round at tau 1 with no momentum, the gradient left as it is): through the Comm;
// partitioned, as training runs it in one process with three groups or more; mirrored, as it
// runs it with two. Each as bytes moved (bench_model.hpp) per second.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "algos/exchange.hpp"
#include "algos/sync_easgd.hpp"
#include "engine/arena.hpp"
#include "engine/comm/comm.hpp"
#include "engine/span_ops.hpp"
#include "tools/bench/bench.hpp"

namespace easel::bench {

Status prepare_bench_run(Run& run, Algorithm& algo, const ArenaLayout& layout,
                         const AlgoParams& params, double spin) {
  run.layout = &layout;
  run.params = params;
  run.spin_seconds = spin;
  run.comm = make_shm_comm(run.size(), CollectiveAlgo::tree, spin);
  if (algo.uses_centre()) {
    Group& g0 = *run.groups[0];
    EASEL_ASSIGN_OR_RETURN(run.centre, arena_on(g0, layout.total_floats(), MemKind::dram));
    span_copy(run.centre.data(), g0.weights.data(), layout.total_floats());
  }
  return algo.prepare(run);
}

namespace {

using Workers = std::vector<std::unique_ptr<WorkerThread>>;

// Group i of the exchange's run: its arenas first touched on its own thread, the weights a
// fixed wave per group, a small fixed gradient that stays (its fake gradient leaves it).
Status add_group(Run& run, WorkerThread& worker, Device& device, int64_t n) {
  auto gp = std::make_unique<Group>();
  Group& g = *gp;
  g.id = g.global_id = run.size();
  g.worker = &worker;
  g.device = &device;
  g.fake_gradient = [](Group&) {};
  Status st;
  worker.run([&] {
    for (Arena* a : {&g.weights, &g.diff, &g.momentum}) {
      auto r = Arena::create(n, MemKind::dram);
      if (!r.ok()) {
        st = r.status();
        return;
      }
      *a = std::move(r).value();
    }
    for (int64_t j = 0; j < n; ++j) {
      g.weights.data()[j] = 0.01f * static_cast<float>((j + g.id) % 97) - 0.48f;
      g.diff.data()[j] = 1e-4f * static_cast<float>(j % 13);
    }
  });
  EASEL_RETURN_IF_ERROR(st);
  run.groups.push_back(std::move(gp));
  return {};
}

// Times `call(i)` on every group at once (root_only: on group 0 alone), calibrated to about
// cfg.min_time / 4 per repeat, and adds the figure to out.
class Measure {
 public:
  Measure(const Workers& workers, const BenchConfig& cfg, ExchangeResult& out)
      : workers_(workers), cfg_(cfg), out_(out) {}

  void operator()(Traffic t, const std::function<void(int)>& call, bool root_only = false) {
    auto span = [&](int64_t k) {
      auto body = [&, k](int i) {
        for (int64_t c = 0; c < k; ++c)
          call(i);
      };
      if (!root_only) return run_together(workers_, body);
      const double t0 = seconds_now();
      workers_[0]->run([&] { body(0); });
      return seconds_now() - t0;
    };
    const double t_one = std::max(span(5) / 5, 1e-7);  // warm-up and calibration
    const int64_t k = std::max<int64_t>(
        5, static_cast<int64_t>(std::ceil(std::max(cfg_.min_time / 4, 0.01) / t_one)));
    std::vector<double> us;
    for (int r = 0; r < cfg_.repeats; ++r)
      us.push_back(1e6 * span(k) / static_cast<double>(k));
    ExchangeTime e;
    e.traffic = t;
    e.us = summarize(us);
    e.bytes = traffic_bytes(t, out_.arena_floats, out_.groups);
    e.gbs = e.bytes / (e.us.median * 1e-6) / 1e9;
    out_.calls_per_repeat = std::max(out_.calls_per_repeat, k);
    out_.ops.push_back(e);
  }

 private:
  const Workers& workers_;
  const BenchConfig& cfg_;
  ExchangeResult& out_;
};

// The Comm's collectives and the update kernels alone, on the run's groups.
Status time_pieces(Run& run, double spin, Measure& measure) {
  const int p = run.size();
  const int64_t n = run.arena_floats();
  const std::span<const Segment> segs = run.segments();
  Arena sum;
  EASEL_ASSIGN_OR_RETURN(sum, arena_on(*run.groups[0], n, MemKind::dram));
  span_copy(sum.data(), run.centre.data(), n);
  auto g = [&](int i) -> Group& { return *run.groups[static_cast<size_t>(i)]; };
  std::unique_ptr<Comm> ring = make_shm_comm(p, CollectiveAlgo::ring, spin);
  Comm& tree = *run.comm;
  if (p > 1) {
    measure(Traffic::tree_reduce,
            [&](int i) { tree.reduce_sum(i, g(i).weights.data(), sum.data(), n, 0); });
    measure(Traffic::tree_broadcast, [&](int i) { tree.broadcast(i, g(i).weights.data(), n, 0); });
    measure(Traffic::ring_reduce,
            [&](int i) { ring->reduce_sum(i, g(i).weights.data(), sum.data(), n, 0); });
    measure(Traffic::ring_broadcast, [&](int i) { ring->broadcast(i, g(i).weights.data(), n, 0); });
  }
  const float lr = static_cast<float>(run.params.lr.base), wd = run.params.weight_decay;
  const float alpha = run.params.alpha;
  measure(Traffic::elastic_sgd_step, [&](int i) {
    elastic_sgd_step(segs, g(i).weights.data(), g(i).diff.data(), run.centre.data(), lr, wd, alpha);
  });
  measure(
      Traffic::elastic_centre_sum,
      [&](int) { elastic_centre_sum(run.centre.data(), sum.data(), alpha / 8, p, n); }, true);
  measure(Traffic::momentum_step, [&](int i) {
    momentum_step(segs, g(i).weights.data(), g(i).diff.data(), g(i).momentum.data(), lr, 0.9f, wd);
  });
  return {};
}

// Sync EASGD's exchange, each way, as the algorithm runs it: one run_round iteration per call
// (tau 1, the fake gradient costs nothing), on the same groups; comm_path is the run's
// algorithm, prepared (its Comm path).
Status time_sync_exchanges(Run& run, Algorithm& comm_path, Measure& measure) {
  struct Way {
    Traffic traffic;
    SyncExchange which;
    bool runs;
  };
  const int p = run.size();
  for (const Way& w : {Way{Traffic::sync_exchange, SyncExchange::comm, p > 1},
                       Way{Traffic::sync_exchange_partitioned, SyncExchange::partitioned, p > 1},
                       Way{Traffic::sync_exchange_mirrored, SyncExchange::mirrored, p == 2}}) {
    if (!w.runs) continue;
    std::unique_ptr<Algorithm> fast;
    if (w.which != SyncExchange::comm) {
      fast = make_sync_easgd(w.which);
      EASEL_RETURN_IF_ERROR(fast->prepare(run));
    }
    Algorithm& algo = fast ? *fast : comm_path;
    measure(w.traffic, [&](int i) { algo.run_round(run, *run.groups[static_cast<size_t>(i)], 1); });
  }
  return {};
}

// The triad over three arena-sized arrays per group (the exchange's own working-set size).
Summary arena_triad(Run& run, const Workers& workers, const BenchConfig& cfg) {
  const int64_t n = run.arena_floats();
  std::vector<double> gbs;
  const double bytes = traffic_bytes(Traffic::triad, n, 1) * run.size();
  auto triad = [&](int i) {
    Group& g = *run.groups[static_cast<size_t>(i)];
    float* a = g.momentum.data();
    const float* b = g.weights.data();
    const float* c = g.diff.data();
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      a[j] = b[j] + 0.5f * c[j];
  };
  const double t_one = std::max(run_together(workers, triad), 1e-7);
  const int64_t k = std::max<int64_t>(5, static_cast<int64_t>(std::ceil(0.02 / t_one)));
  for (int r = 0; r < cfg.repeats; ++r) {
    const double s = run_together(workers, [&](int i) {
      for (int64_t c = 0; c < k; ++c)
        triad(i);
    });
    gbs.push_back(bytes * static_cast<double>(k) / s / 1e9);
  }
  return summarize(gbs);
}

// One group per worker as the trainer builds them, and sync-easgd's parameters for timing its
// exchange: a fixed rate, no momentum, tau 1, alpha = 0.9 / P.
Result<AlgoParams> sync_easgd_groups(Run& run, Workers& workers, Device& device, int64_t floats) {
  for (auto& w : workers)
    EASEL_RETURN_IF_ERROR(add_group(run, *w, device, floats));
  AlgoParams params;
  params.lr.policy = LrSchedule::Policy::fixed;
  params.lr.base = 0.01;
  params.momentum = 0;
  params.alpha = 0.9f / static_cast<float>(run.size());
  return params;
}

}  // namespace

Result<ExchangeResult> time_exchange(const Topology& topo, const BenchConfig& cfg,
                                     const NetSpec& spec, int groups) {
  PlanRequest req;
  req.groups = GroupCount::of(groups);
  req.threads_per_group = 1;
  req.oversubscribe = cfg.oversubscribe;
  EASEL_ASSIGN_OR_RETURN(GroupPlan plan, make_plan(topo, req));
  Workers workers;
  for (const GroupSpec& g : plan.groups) {
    EASEL_ASSIGN_OR_RETURN(auto w, WorkerThread::start(g, true));
    workers.push_back(std::move(w));
  }

  // The arena's layout, from a one-image net (only its parameter segments are used).
  EASEL_ASSIGN_OR_RETURN(ImplChoice impl, parse_impl_choice(cfg.impl));
  std::unique_ptr<Device> device = make_cpu_device(impl);
  ArenaLayout layout;
  Status st;
  workers[0]->run([&] {
    auto net = Net::create(spec, 1, Layout::nchw, *device, MemKind::dram);
    if (net.ok())
      layout = net.value()->params();
    else
      st = net.status();
  });
  EASEL_RETURN_IF_ERROR(st);

  // The groups as the trainer builds them (waiters spin when every group has a core of its
  // own), with sync-easgd's parameters: no momentum, tau 1, alpha = 0.9 / P.
  Run run;
  EASEL_ASSIGN_OR_RETURN(AlgoParams params,
                         sync_easgd_groups(run, workers, *device, layout.total_floats()));
  const double spin = plan.oversubscribed ? 0 : kShmSpinSeconds;
  std::unique_ptr<Algorithm> comm_path = make_sync_easgd(SyncExchange::comm);
  EASEL_RETURN_IF_ERROR(prepare_bench_run(run, *comm_path, layout, params, spin));

  ExchangeResult out;
  out.groups = run.size();
  out.arena_floats = layout.total_floats();
  for (const GroupSpec& gs : plan.groups)
    out.cpus.push_back(gs.cpus);
  Measure measure(workers, cfg, out);
  EASEL_RETURN_IF_ERROR(time_pieces(run, spin, measure));
  EASEL_RETURN_IF_ERROR(time_sync_exchanges(run, *comm_path, measure));
  out.arena_triad_gbs = arena_triad(run, workers, cfg);
  return out;
}

namespace {

// A pass over `bytes` of memory that no timed pass touches (read and written), so that the next
// pass finds its buffers out of the last-level cache. A no-op for 0 bytes.
class Evictor {
 public:
  explicit Evictor(int64_t bytes) : floats_(std::max<int64_t>(bytes, 0) / 4) {}
  Status prepare() {
    if (floats_ == 0) return Status::ok_status();
    EASEL_ASSIGN_OR_RETURN(buf_, Arena::create(floats_, MemKind::dram));
    for (int64_t j = 0; j < floats_; ++j)
      buf_.data()[j] = static_cast<float>(j % 7);
    return Status::ok_status();
  }
  void pass() {
    float* b = buf_.data();
    for (int64_t j = 0; j < floats_; ++j)
      b[j] = b[j] * 0.5f + 1.f;
  }
  bool on() const { return floats_ > 0; }

 private:
  int64_t floats_;
  Arena buf_;
};

constexpr int kColdCalls = 5;  // cold calls timed, each after an eviction

// An arena of `floats` floats as one segment: what the exchanges and passes are timed over.
ArenaLayout one_segment_layout(int64_t floats) {
  ArenaLayout layout;
  Segment seg;
  seg.name = "exchange.weights";
  seg.dims = {floats};
  seg.count = floats;
  layout.add(seg);
  return layout;
}

// The groups' figures as one PassTime: `best` each group's fastest warm repeat, `cold` each
// one's cold calls. The Comm path's groups differ (the root alone updates the centre; the
// trainer's comm share sums them): their mean, and the slowest apart. The fused exchanges' are
// alike: their median.
PassTime combine_group_times(const std::vector<double>& best,
                             const std::vector<std::vector<double>>& cold, bool comm_path) {
  std::vector<double> cold_each;
  for (const auto& c : cold)
    if (!c.empty()) cold_each.push_back(summarize(c).median);
  PassTime out;
  if (comm_path) {
    out.seconds = std::accumulate(best.begin(), best.end(), 0.0) / static_cast<double>(best.size());
    out.cold_seconds = cold_each.empty()
                           ? 0
                           : std::accumulate(cold_each.begin(), cold_each.end(), 0.0) /
                                 static_cast<double>(cold_each.size());
    out.slowest_seconds = *std::max_element(best.begin(), best.end());
    out.slowest_cold_seconds =
        cold_each.empty() ? 0 : *std::max_element(cold_each.begin(), cold_each.end());
    return out;
  }
  out.seconds = summarize(best).median;
  out.cold_seconds = summarize(cold_each).median;
  return out;
}

}  // namespace

Result<PassTime> time_sync_exchange_cpu(const Topology& topo, const BenchConfig& cfg, int groups,
                                        int64_t floats, bool comm_path, int64_t evict_bytes) {
  PlanRequest req;
  req.groups = GroupCount::of(groups);
  req.threads_per_group = 1;
  req.oversubscribe = true;
  EASEL_ASSIGN_OR_RETURN(GroupPlan plan, make_plan(topo, req));
  Workers workers;
  for (const GroupSpec& g : plan.groups) {
    EASEL_ASSIGN_OR_RETURN(auto w, WorkerThread::start(g, true));
    workers.push_back(std::move(w));
  }
  const ArenaLayout layout = one_segment_layout(floats);
  EASEL_ASSIGN_OR_RETURN(ImplChoice impl, parse_impl_choice(cfg.impl));
  std::unique_ptr<Device> device = make_cpu_device(impl);
  Run run;
  EASEL_ASSIGN_OR_RETURN(AlgoParams params,
                         sync_easgd_groups(run, workers, *device, layout.total_floats()));
  const double spin = plan.oversubscribed ? 0 : kShmSpinSeconds;
  std::unique_ptr<Algorithm> algo = make_sync_easgd(comm_path     ? SyncExchange::comm
                                                    : groups == 2 ? SyncExchange::mirrored
                                                                  : SyncExchange::partitioned);
  EASEL_RETURN_IF_ERROR(prepare_bench_run(run, *algo, layout, params, spin));
  Evictor evict(evict_bytes);
  EASEL_RETURN_IF_ERROR(evict.prepare());
  auto round = [&](int i) { algo->run_round(run, *run.groups[static_cast<size_t>(i)], 1); };
  // Warm-up (first touches, the partition's buffers), then about 20 ms of CPU a repeat.
  std::vector<double> cpu(static_cast<size_t>(groups));
  // A group's CPU time for k rounds, per round; on the Comm path only its comm's share of it
  // (the round's CPU split as its wall time is between the timers comm and compute: the elastic
  // step is compute in the trainer, a barrier's wait neither).
  auto timed = [&](int i, int64_t k) {
    Group& g = *run.groups[static_cast<size_t>(i)];
    const GroupTimes t0 = g.times;
    const double c0 = thread_cpu_seconds();
    for (int64_t c = 0; c < k; ++c)
      round(i);
    double cpu_s = thread_cpu_seconds() - c0;
    if (comm_path) {
      const double comm = g.times.comm - t0.comm, compute = g.times.compute - t0.compute;
      cpu_s *= comm + compute > 0 ? comm / (comm + compute) : 0;
    }
    return cpu_s / static_cast<double>(k);
  };
  run_together(workers, [&](int i) { cpu[static_cast<size_t>(i)] = timed(i, 1); });
  const double one = std::max(*std::max_element(cpu.begin(), cpu.end()), 1e-7);
  const int64_t k = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(0.02 / one)), 1, 1000);
  std::vector<double> best(static_cast<size_t>(groups), 1e30);
  for (int r = 0; r < std::max(cfg.repeats, 3); ++r)
    run_together(workers, [&](int i) {
      best[static_cast<size_t>(i)] = std::min(best[static_cast<size_t>(i)], timed(i, k));
    });
  // Cold: one round at a time, each after group 0 evicted the cache the groups share.
  std::vector<std::vector<double>> cold(static_cast<size_t>(groups));
  for (int r = 0; evict.on() && r < kColdCalls; ++r) {
    run_together(workers, [&](int i) {
      if (i == 0) evict.pass();
    });
    run_together(workers, [&](int i) { cold[static_cast<size_t>(i)].push_back(timed(i, 1)); });
  }
  return combine_group_times(best, cold, comm_path);
}

Result<PassTime> time_group_pass_cpu(const Topology& topo, const BenchConfig& cfg, int64_t floats,
                                     GroupPass pass, int64_t evict_bytes) {
  GroupSpec gs;
  gs.cpus = {topo.cores[0][0]};
  EASEL_ASSIGN_OR_RETURN(std::unique_ptr<WorkerThread> worker, WorkerThread::start(gs, true));
  const ArenaLayout layout = one_segment_layout(floats);
  PassTime out;
  out.seconds = 1e30;
  Status st;
  worker->run([&] {
    Evictor evict(evict_bytes);
    st = evict.prepare();
    if (!st.ok()) return;
    Arena w, g, v, c;
    for (Arena* a : {&w, &g, &v, &c}) {
      auto r = Arena::create(floats, MemKind::dram);
      if (!r.ok()) {
        st = r.status();
        return;
      }
      *a = std::move(r).value();
    }
    for (int64_t j = 0; j < floats; ++j) {
      w.data()[j] = 0.01f * static_cast<float>(j % 97) - 0.48f;
      g.data()[j] = 1e-4f * static_cast<float>(j % 13);
      v.data()[j] = 1e-3f * static_cast<float>(j % 11);
      c.data()[j] = 0.01f * static_cast<float>((j + 1) % 97) - 0.48f;
    }
    const auto segs = layout.segments();
    auto once = [&] {
      switch (pass) {
        case GroupPass::centre_exchange:
          easgd_exchange(segs, w.data(), g.data(), c.data(), 0.01f, 5e-4f, 0.45f);
          break;
        case GroupPass::momentum_update:
          momentum_step(segs, w.data(), g.data(), v.data(), 0.01f, 0.9f, 5e-4f);
          break;
        case GroupPass::elastic_update:
          elastic_momentum_step(segs, w.data(), g.data(), v.data(), c.data(), 0.01f, 0.9f, 5e-4f,
                                0.45f, false);
          break;
      }
    };
    double c0 = thread_cpu_seconds();
    once();  // warm-up
    const double one = std::max(thread_cpu_seconds() - c0, 1e-7);
    const int64_t k = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(0.02 / one)), 1, 1000);
    for (int r = 0; r < std::max(cfg.repeats, 3); ++r) {
      c0 = thread_cpu_seconds();
      for (int64_t i = 0; i < k; ++i)
        once();
      out.seconds = std::min(out.seconds, (thread_cpu_seconds() - c0) / static_cast<double>(k));
    }
    std::vector<double> cold;
    for (int r = 0; evict.on() && r < kColdCalls; ++r) {
      evict.pass();
      c0 = thread_cpu_seconds();
      once();
      cold.push_back(thread_cpu_seconds() - c0);
    }
    out.cold_seconds = summarize(std::move(cold)).median;
  });
  EASEL_RETURN_IF_ERROR(st);
  return out;
}

}  // namespace easel::bench
