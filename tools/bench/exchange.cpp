// The exchange of the flat arena among P groups (one pinned thread each): the shared-memory
// Comm's reduce_sum and broadcast (tree and ring), the fused elastic updates, the momentum
// update, and Sync EASGD's whole exchange (through the Comm; partitioned, as the trainer runs it
// in one process with three groups or more; mirrored, as it runs it with two); each as bytes
// moved (bench_model.hpp) per second.
#include <array>
#include <cmath>

#include "algos/exchange.hpp"
#include "algos/sync_easgd_fast.hpp"
#include "engine/arena.hpp"
#include "engine/comm/comm.hpp"
#include "engine/span_ops.hpp"
#include "tools/bench/bench.hpp"

namespace easel::bench {

namespace {

struct Side {
  Arena weights, diff, momentum;
};

}  // namespace

Result<ExchangeResult> time_exchange(const Topology& topo, const BenchConfig& cfg,
                                     const NetSpec& spec, int groups) {
  PlanRequest req;
  req.groups = std::to_string(groups);
  req.threads_per_group = 1;
  req.oversubscribe = cfg.oversubscribe;
  EASEL_ASSIGN_OR_RETURN(GroupPlan plan, make_plan(topo, req));
  std::vector<std::unique_ptr<WorkerThread>> workers;
  for (const GroupSpec& g : plan.groups) {
    EASEL_ASSIGN_OR_RETURN(auto w, WorkerThread::start(g, true));
    workers.push_back(std::move(w));
  }
  const int p = static_cast<int>(workers.size());

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
  const int64_t n = layout.total_floats();
  const std::span<const Segment> segs = layout.segments();

  // Each group's arenas, first touched on its own thread; the centre and the reduced sum on
  // the root's (group 0).
  std::vector<Side> sides(static_cast<size_t>(p));
  Arena centre, centre2, sum;
  for (int i = 0; i < p; ++i) {
    workers[static_cast<size_t>(i)]->run([&, i] {
      Side& s = sides[static_cast<size_t>(i)];
      for (Arena* a : {&s.weights, &s.diff, &s.momentum}) {
        auto r = Arena::create(n, MemKind::dram);
        if (!r.ok()) {
          st = r.status();
          return;
        }
        *a = std::move(r).value();
      }
      for (int64_t j = 0; j < n; ++j) {
        s.weights.data()[j] = 0.01f * static_cast<float>((j + i) % 97) - 0.48f;
        s.diff.data()[j] = 1e-4f * static_cast<float>(j % 13);
      }
      if (i == 0) {
        auto c = Arena::create(n, MemKind::dram);
        auto c2 = Arena::create(n, MemKind::dram);
        auto m = Arena::create(n, MemKind::dram);
        for (const Status* e : {&c.status(), &c2.status(), &m.status()})
          if (!e->ok()) {
            st = *e;
            return;
          }
        centre = std::move(c).value();
        centre2 = std::move(c2).value();
        sum = std::move(m).value();
        span_copy(centre.data(), s.weights.data(), n);
        span_copy(centre2.data(), s.weights.data(), n);
      }
    });
    EASEL_RETURN_IF_ERROR(st);
  }
  // As the trainer builds them: waiters spin when every group has a core of its own.
  const double spin = plan.oversubscribed ? 0 : kShmSpinSeconds;
  std::unique_ptr<Comm> tree = make_shm_comm(p, CollectiveAlgo::tree, spin);
  std::unique_ptr<Comm> ring = make_shm_comm(p, CollectiveAlgo::ring, spin);
  const float lr = 0.01f, wd = 5e-4f, alpha = 0.9f / static_cast<float>(p);
  auto w = [&](int i) { return sides[static_cast<size_t>(i)].weights.data(); };
  auto g = [&](int i) { return sides[static_cast<size_t>(i)].diff.data(); };
  auto v = [&](int i) { return sides[static_cast<size_t>(i)].momentum.data(); };

  ExchangeResult out;
  out.groups = p;
  out.arena_floats = n;
  for (const GroupSpec& gs : plan.groups)
    out.cpus.push_back(gs.cpus);

  // Times `call(i)` on every group at once (root_only: on group 0 alone), `calls` per repeat.
  auto measure = [&](Traffic t, const std::function<void(int)>& call, bool root_only) {
    auto body = [&](int64_t k) {
      return [&, k](int i) {
        for (int64_t c = 0; c < k; ++c)
          call(i);
      };
    };
    auto span = [&](int64_t k) {
      if (!root_only) return run_together(workers, body(k));
      const double t0 = seconds_now();
      workers[0]->run([&] { body(k)(0); });
      return seconds_now() - t0;
    };
    const double t_one = std::max(span(5) / 5, 1e-7);  // warm-up and calibration
    const int64_t k = std::max<int64_t>(
        5, static_cast<int64_t>(std::ceil(std::max(cfg.min_time / 4, 0.01) / t_one)));
    std::vector<double> us;
    for (int r = 0; r < cfg.repeats; ++r)
      us.push_back(1e6 * span(k) / static_cast<double>(k));
    ExchangeTime e;
    e.traffic = t;
    e.us = summarize(us);
    e.bytes = traffic_bytes(t, n, p);
    e.gbs = e.bytes / (e.us.median * 1e-6) / 1e9;
    out.calls_per_repeat = std::max(out.calls_per_repeat, k);
    out.ops.push_back(e);
  };

  if (p > 1) {
    measure(
        Traffic::tree_reduce, [&](int i) { tree->reduce_sum(i, w(i), sum.data(), n, 0); }, false);
    measure(
        Traffic::tree_broadcast, [&](int i) { tree->broadcast(i, w(i), n, 0); }, false);
    measure(
        Traffic::ring_reduce, [&](int i) { ring->reduce_sum(i, w(i), sum.data(), n, 0); }, false);
    measure(
        Traffic::ring_broadcast, [&](int i) { ring->broadcast(i, w(i), n, 0); }, false);
  }
  measure(
      Traffic::elastic_sgd_step,
      [&](int i) { elastic_sgd_step(segs, w(i), g(i), centre.data(), lr, wd, alpha); }, false);
  measure(
      Traffic::elastic_centre_sum,
      [&](int) { elastic_centre_sum(centre.data(), sum.data(), alpha / 8, p, n); }, true);
  measure(
      Traffic::momentum_step, [&](int i) { momentum_step(segs, w(i), g(i), v(i), lr, 0.9f, wd); },
      false);
  if (p > 1) {
    // Sync EASGD's exchange as algos/sync_easgd.cpp runs it with tau = 1 and no momentum.
    measure(
        Traffic::sync_exchange,
        [&](int i) {
          tree->reduce_sum(i, w(i), sum.data(), n, 0);
          elastic_sgd_step(segs, w(i), g(i), centre.data(), lr, wd, alpha);
          tree->barrier(i);
          if (i == 0) elastic_centre_sum(centre.data(), sum.data(), alpha, p, n);
          tree->barrier(i);
        },
        false);
    // The work of algos/sync_easgd.cpp's partitioned exchange: each group updates its slice of
    // the centre into the other buffer in one pass, then takes its elastic step from the old
    // centre (the stores other groups read streamed); the buffers swap at every call. Ordered
    // here by two barriers (the trainer uses counters and double-buffered weights).
    std::vector<const float*> ws;
    for (int i = 0; i < p; ++i)
      ws.push_back(w(i));
    std::vector<std::vector<float>> tmp(static_cast<size_t>(p));
    std::vector<int64_t> calls(static_cast<size_t>(p), 0);
    measure(
        Traffic::sync_exchange_partitioned,
        [&](int i) {
          const bool odd = calls[static_cast<size_t>(i)]++ % 2 == 1;
          const float* c_old = odd ? centre2.data() : centre.data();
          float* c_new = odd ? centre.data() : centre2.data();
          const auto [lo, hi] = centre_slice(n, p, i);
          tree->barrier(i);
          centre_update_slice(ws, c_old, c_new, alpha, lo, hi, tmp[static_cast<size_t>(i)]);
          tree->barrier(i);
          elastic_sgd_step_streamed(segs, w(i), w(i), g(i), c_old, lr, wd, alpha, lo, hi);
        },
        false);
  }
  if (p == 2) {
    // algos/sync_easgd.cpp's exchange for two groups (mirrored): each group updates its own
    // copy of the whole centre from both weights, fused with its elastic step, in one pass, and
    // streams its new weights into the copy the other reads next (two copies, by parity).
    // Ordered here by a barrier (the trainer uses a counter per group); a second one, which its
    // order does not need, makes its call pay the same synchronisation as the partitioned one's
    // above, so that the two figures differ by their work only.
    std::vector<std::array<Arena, 3>> mir(2);  // per group: its centre, its two shared copies
    for (int i = 0; i < 2; ++i)
      for (Arena& a : mir[static_cast<size_t>(i)]) {
        EASEL_ASSIGN_OR_RETURN(a, Arena::create(n, MemKind::dram));
        span_copy(a.data(), w(i), n);
      }
    std::vector<std::vector<float>> tmp(2);
    std::vector<int64_t> calls(2, 0);
    measure(
        Traffic::sync_exchange_mirrored,
        [&](int i) {
          const size_t me = static_cast<size_t>(i), other = 1 - me;
          const int64_t e = calls[me]++;
          std::array<const float*, 2> ws{};
          ws[me] = w(i);
          ws[other] = mir[other][1 + e % 2].data();
          tree->barrier(i);
          mirrored_exchange(segs, ws, w(i), mir[me][1 + (e + 1) % 2].data(), g(i), nullptr,
                            mir[me][0].data(), lr, 0.f, wd, alpha, false, tmp[me]);
          tree->barrier(i);
        },
        false);
  }

  // The triad over three arena-sized arrays per group (the exchange's own working-set size).
  std::vector<double> gbs;
  const double bytes = traffic_bytes(Traffic::triad, n, 1) * p;
  auto triad = [&](int i) {
    float* a = v(i);
    const float* b = w(i);
    const float* c = g(i);
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
  out.arena_triad_gbs = summarize(gbs);
  return out;
}

}  // namespace easel::bench
