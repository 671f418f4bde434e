// `easel bench --calibrate [--out FILE]`: measures what the performance model (model/)
// needs on this machine and writes it as a machine description (TOML): the FMA peak and the
// triad; the probe nets (probes.hpp) and every --nets net at the first --batches size: one
// group's step alone and its layers, from which each layer class's rates are fitted
// (model/layer_rates.hpp); for the probes also one group on every core's thread and G
// groups of one thread at once for G = C, 2C (and 4C when that is at most 16: oversubscribed):
// contention and the oversubscription overhead; the shared-memory latency (two threads' round
// trip) and bandwidth (one thread's arena passes). Steps and layers are timed in the threads'
// CPU time. docs/MODEL.md explains each figure.
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "devices/cpu/dnnl_ops.hpp"
#include "engine/comm/mpi_comm.hpp"
#include "model/machine.hpp"
#include "model/model.hpp"
#include "model/probes.hpp"
#include "nets/models/models.hpp"
#include "tools/bench/bench.hpp"
#include "tools/bench/calibrate.hpp"
#include "tools/cli/cli.hpp"

namespace easel::bench {

namespace {

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown cpu";
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// A TOML string: quotes and backslashes escaped, control characters dropped.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

NetSpec spec_of(const std::string& name) {
  const BenchInput in = bench_input(name);
  return build_model(name, {in.channels, in.height, in.width, in.classes}).value();
}

// One net's figures.
struct NetFigures {
  std::string name;
  NetSpec spec;
  int64_t batch = 64;
  int64_t arena_floats = 0;
  double step = 0, update = 0, step_threads = 0, flops_per_image = 0;
  std::vector<LayerTime> layers;
  double step_layers = 0;            // the step's CPU time in the layer view (beside its layers')
  double overhead = -1;              // oversubscription's, from this net's own 2C (and 4C) layouts
  bool layers_only = false;          // a layer probe: its layers timed, nothing else
  std::vector<double> corun;         // contention: C independent copies of the step over one alone
  std::vector<double> corun_shared;  // 2C copies on the C cores over one alone (the probes')
  // Gx1 layouts: groups, group 0's step (s), and the algorithm's split summed over groups.
  struct Shared {
    int groups = 0;
    double step = 0, compute = 0, comm = 0, wait = 0;
  };
  std::vector<Shared> shared;
};

// Interleaved rounds of the contention primitive per net (time_corun).
constexpr int kCorunRounds = 5;

// `layouts`: also one group on every core's thread and the Gx1 layouts (the probes': the
// machine's scaling); otherwise the step alone and its layers.
Result<NetFigures> measure_net(const Topology& topo, const BenchConfig& cfg, const NetSpec& spec,
                               int64_t batch, bool layouts) {
  const int c = topo.core_count();
  const std::string& name = spec.name;
  NetFigures f;
  f.name = name;
  f.spec = spec;
  f.batch = batch;
  EASEL_ASSIGN_OR_RETURN(StepResult one, time_steps(topo, cfg, spec, batch, {1, 1}));
  // Steps in the thread's CPU time, the fastest repeat: on a loaded machine the wall time holds
  // the moments other processes had the core, the CPU time does not.
  f.step = one.cpu_step_ms.min / 1e3;
  f.flops_per_image = one.flops_per_image;
  std::printf("  %-14s 1x1 step %.3f ms (CPU time; wall %.3f)\n", name.c_str(), one.cpu_step_ms.min,
              one.step_ms.median);
  if (c > 1 && layouts) {
    EASEL_ASSIGN_OR_RETURN(StepResult t, time_steps(topo, cfg, spec, batch, {1, c}));
    f.step_threads = t.step_ms.min / 1e3;
    std::printf("  %-14s 1x%d step %.3f ms\n", name.c_str(), c, t.step_ms.median);
  }
  if (c > 1) {
    EASEL_ASSIGN_OR_RETURN(f.corun, time_corun(topo, cfg, spec, batch, c, kCorunRounds));
    std::string each;
    for (double r : f.corun)
      each += (each.empty() ? "" : " ") + std::to_string(r).substr(0, 5);
    std::printf("  %-14s %d copies at once / alone: %s (interleaved rounds)\n", name.c_str(), c,
                each.c_str());
    if (layouts) {
      EASEL_ASSIGN_OR_RETURN(f.corun_shared,
                             time_corun(topo, cfg, spec, batch, 2 * c, kCorunRounds));
      each.clear();
      for (double r : f.corun_shared)
        each += (each.empty() ? "" : " ") + std::to_string(r).substr(0, 5);
      std::printf("  %-14s %d copies on %d cores / alone: %s (interleaved rounds)\n", name.c_str(),
                  2 * c, c, each.c_str());
    }
  }
  std::vector<int> counts;
  if (layouts) {
    counts.push_back(2 * c);
    if (4 * c <= 16) counts.push_back(4 * c);
  }
  for (int g : counts) {
    EASEL_ASSIGN_OR_RETURN(StepResult s, time_steps(topo, cfg, spec, batch, {g, 1}));
    f.shared.push_back(
        {g, s.cpu_step_ms.min / 1e3, s.compute_seconds, s.comm_seconds, s.wait_seconds});
    std::printf("  %-14s %dx1 step %.3f ms CPU a group (compute/comm/wait %.0f%%/%.0f%%/%.0f%%)\n",
                name.c_str(), g, s.cpu_step_ms.min,
                100 * s.compute_seconds / (s.compute_seconds + s.comm_seconds + s.wait_seconds),
                100 * s.comm_seconds / (s.compute_seconds + s.comm_seconds + s.wait_seconds),
                100 * s.wait_seconds / (s.compute_seconds + s.comm_seconds + s.wait_seconds));
  }
  EASEL_ASSIGN_OR_RETURN(LayerView v, time_layers(topo, cfg, spec, batch));
  f.update = v.update_cpu_ms.median / 1e3;
  f.step_layers = v.step_cpu_ms.median / 1e3;
  f.layers = v.layers;
  return f;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The shared-memory exchange's latency and bandwidth (the model's shm_exchange_seconds), from
// two primitives that a loaded machine does not distort: the latency of one message, half the
// fastest of many round trips between two threads through one cache line (some find both
// threads on a core even when other processes hold them most of the time), and the bandwidth
// one thread streams the exchange's element-wise passes at, the momentum update's (the same
// kind of pass over an arena; thread CPU time, median over the nets). `memory` holds the
// machine's DRAM and last-level cache.
struct ExchangeFit {
  int p = 2;
  double round_trip_seconds = 0;
  model::Machine memory;  // dram, cache_mb and the fitted shared_memory
  // Sync EASGD's exchange as the trainer runs it, timed by arena size (a group's CPU seconds).
  std::vector<model::ExchangePoint> points;
  // The same on the trainer's Comm path (nets with running statistics): its comm part only.
  std::vector<model::ExchangePoint> comm_points;
  // async-easgd's locked exchange with the centre, timed by arena size (the group's CPU seconds).
  std::vector<model::ExchangePoint> centre_points;
  // The momentum update and the elastic momentum step by arena size (groups 1, the thread's
  // CPU seconds, warm and cold): [[step.update]], [[step.elastic_update]].
  std::vector<model::ExchangePoint> update_points, elastic_points;
};

// The arena sizes the exchanges are timed at (64 KB to 256 MB: LeNet's 1.7 MB to
// AlexNet-CIFAR's 233 MB lie within, past the last-level cache that hwloc reports here) and the
// group counts (two: mirrored; four: partitioned, as the trainer runs three or more; the Comm
// path also one: the root alone copies its weights and updates the centre).
constexpr int64_t kExchangeBytes[] = {int64_t{1} << 16, int64_t{1} << 20, int64_t{1} << 23,
                                      int64_t{1} << 26, int64_t{1} << 28};
constexpr int kExchangeGroups[] = {2, 4};
constexpr int kCommPathGroups[] = {1, 2, 4};

Status time_exchange_points(const Topology& topo, const BenchConfig& cfg, ExchangeFit& fit) {
  // Cold timings evict twice the last-level cache (64 MB where hwloc reports none) before each
  // call: what the trainer's passes find after a step larger than the cache.
  const int64_t evict = 2 * std::max<int64_t>(topo.last_level_cache_bytes, int64_t{32} << 20);
  for (int g : kExchangeGroups)
    for (int64_t bytes : kExchangeBytes) {
      EASEL_ASSIGN_OR_RETURN(PassTime s, time_sync_exchange_cpu(topo, cfg, g, bytes / 4));
      fit.points.push_back({g, static_cast<double>(bytes), s.seconds});
      std::printf("  sync-easgd exchange, %d groups, %8.3f MB arena: %.3f ms of a group's CPU\n", g,
                  static_cast<double>(bytes) / 1e6, s.seconds * 1e3);
    }
  for (int g : kCommPathGroups)
    for (int64_t bytes : kExchangeBytes) {
      EASEL_ASSIGN_OR_RETURN(PassTime s,
                             time_sync_exchange_cpu(topo, cfg, g, bytes / 4, true, evict));
      fit.comm_points.push_back({g, static_cast<double>(bytes), s.seconds, s.cold_seconds,
                                 s.slowest_seconds, s.slowest_cold_seconds});
      std::printf(
          "  sync-easgd exchange on the Comm path, %d groups, %8.3f MB arena: %.3f ms of a "
          "group's CPU (its comm), %.3f ms cold\n",
          g, static_cast<double>(bytes) / 1e6, s.seconds * 1e3, s.cold_seconds * 1e3);
    }
  const struct {
    GroupPass pass;
    std::vector<model::ExchangePoint>* points;
    const char* what;
  } passes[] = {{GroupPass::centre_exchange, &fit.centre_points, "async-easgd locked exchange"},
                {GroupPass::momentum_update, &fit.update_points, "momentum update"},
                {GroupPass::elastic_update, &fit.elastic_points, "elastic momentum step"}};
  for (const auto& p : passes)
    for (int64_t bytes : kExchangeBytes) {
      EASEL_ASSIGN_OR_RETURN(PassTime s, time_group_pass_cpu(topo, cfg, bytes / 4, p.pass, evict));
      p.points->push_back({1, static_cast<double>(bytes), s.seconds, s.cold_seconds});
      std::printf("  %s, %8.3f MB arena: %.3f ms of the group's CPU, %.3f ms cold\n", p.what,
                  static_cast<double>(bytes) / 1e6, s.seconds * 1e3, s.cold_seconds * 1e3);
    }
  return Status::ok_status();
}

// Half the fastest round trip between this thread and another through one atomic, over at most
// 20000 trips or 0.3 s.
double thread_ping_pong() {
  std::atomic<int> ball{0};
  std::atomic<bool> stop{false};
  std::thread peer([&] {
    int seen = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int spin = 0; spin < 4096 && ball.load(std::memory_order_acquire) == seen; ++spin) {
      }
      const int b = ball.load(std::memory_order_acquire);
      if (b != seen && b % 2 == 1) {
        ball.store(b + 1, std::memory_order_release);
        seen = b + 1;
      } else {
        std::this_thread::yield();
      }
    }
  });
  double best = 1e30;
  const double t_end = seconds_now() + 0.3;
  int b = 0;
  for (int i = 0; i < 20000 && seconds_now() < t_end; ++i) {
    const double t0 = seconds_now();
    ball.store(b + 1, std::memory_order_release);
    while (ball.load(std::memory_order_acquire) != b + 2)
      std::this_thread::yield();
    best = std::min(best, seconds_now() - t0);
    b += 2;
  }
  stop.store(true);
  peer.join();
  return best;
}

// STREAM's triad a = b + s c on `threads` threads at once, each over arrays of its own of n
// floats: per thread the fastest of three passes in its CPU time (other processes' turns left
// out), and the sum over the threads of 12 n bytes / that, GB/s.
double cpu_triad_gbs(int threads, int64_t n) {
  std::vector<double> gbs(static_cast<size_t>(threads));
  std::vector<std::thread> team;
  for (int t = 0; t < threads; ++t)
    team.emplace_back([&, t] {
      std::vector<float> a(static_cast<size_t>(n), 0.f), b(static_cast<size_t>(n), 1.f),
          c(static_cast<size_t>(n), 2.f);
      double best = 1e30;
      for (int r = 0; r < 3; ++r) {
        const double c0 = thread_cpu_seconds();
        for (int64_t i = 0; i < n; ++i)
          a[static_cast<size_t>(i)] = b[static_cast<size_t>(i)] + 0.5f * c[static_cast<size_t>(i)];
        best = std::min(best, thread_cpu_seconds() - c0);
        b[static_cast<size_t>(r)] = a[static_cast<size_t>(n - 1 - r)];  // keep the passes
      }
      gbs[static_cast<size_t>(t)] = 12.0 * static_cast<double>(n) / std::max(best, 1e-9) / 1e9;
    });
  for (std::thread& t : team)
    t.join();
  double sum = 0;
  for (double g : gbs)
    sum += g;
  return sum;
}

ExchangeFit fit_exchange(const Topology& topo, const Ceilings& ceil,
                         const std::vector<NetFigures>& nets) {
  ExchangeFit fit;
  fit.p = std::max(topo.core_count(), 2);
  fit.memory.cores = topo.core_count();
  fit.memory.dram.present = true;
  fit.memory.dram.bandwidth_gbs = ceil.triad_all_gbs.max;
  fit.memory.cache_mb = static_cast<double>(topo.last_level_cache_bytes) / 1e6;
  fit.round_trip_seconds = thread_ping_pong() * 2;
  std::vector<double> gbs;
  for (const NetFigures& f : nets)
    if (f.update > 0) {
      const NetCost cost = net_cost(f.spec).value();  // measured: it was built
      gbs.push_back(20.0 * static_cast<double>(cost.arena_floats) / f.update / 1e9);
    }
  double median_gbs = 1;
  if (!gbs.empty()) {
    std::sort(gbs.begin(), gbs.end());
    median_gbs = gbs[gbs.size() / 2];
  }
  fit.memory.shared_memory = {true, std::max(fit.round_trip_seconds / 2, 1e-8) * 1e6, median_gbs};
  std::printf(
      "  shared memory: round trip between two threads %.2f us (fastest) -> latency %.3f us per "
      "message; one thread's element-wise passes %.1f GB/s; last-level cache %.0f MB\n",
      fit.round_trip_seconds * 1e6, fit.memory.shared_memory.latency_us, median_gbs,
      fit.memory.cache_mb);
  return fit;
}

// MPI between ranks 0 and 1 (under mpirun with 2 or more ranks): ping-pongs of a small and a
// large message, half the fastest round trip of each, fitted to latency + bytes / bandwidth
// (the model's [transport.mpi]). Ranks other than 0 and 1 only wait.
struct MpiFit {
  int ranks = 0;  // 0: not measured (no MPI, or one rank)
  double small_seconds = 0, large_seconds = 0;
  model::Transport transport;
};

constexpr int kPingTag = 7301, kDoneTag = 7302;
constexpr int64_t kSmallFloats = 1, kLargeFloats = 1 << 20;  // 4 B and 4 MiB

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Rank 0's fastest round trip of n floats with rank 1 (rank 1 echoes), over `repeats` trips.
double ping_pong(MpiComm& world, int64_t n, int repeats) {
  std::vector<float> buf(static_cast<size_t>(n), 1.0f);
  double best = 1e30;
  int64_t count = 0;
  for (int r = 0; r < repeats; ++r) {
    if (world.rank() == 0) {
      const double t0 = steady_seconds();
      world.send(buf.data(), n, 1, kPingTag);
      world.recv(buf.data(), n, 1, kPingTag, &count);
      best = std::min(best, steady_seconds() - t0);
    } else if (world.rank() == 1) {
      world.recv(buf.data(), n, 0, kPingTag, &count);
      world.send(buf.data(), n, 0, kPingTag);
    }
  }
  return best;
}

MpiFit fit_mpi(MpiComm& world) {
  MpiFit fit;
  fit.ranks = world.size();
  if (world.rank() > 1) return fit;
  ping_pong(world, kLargeFloats, 3);  // warm-up: connections and buffers
  const double small = ping_pong(world, kSmallFloats, 200) / 2;
  const double large = ping_pong(world, kLargeFloats, 20) / 2;
  if (world.rank() != 0) return fit;
  const double bytes = 4.0 * (kLargeFloats - kSmallFloats);
  const double bw = large > small ? bytes / (large - small) : bytes / std::max(large, 1e-9);
  fit.small_seconds = small;
  fit.large_seconds = large;
  fit.transport = {true, std::max(small - 4.0 * kSmallFloats / bw, 1e-7) * 1e6, bw / 1e9};
  std::printf(
      "  MPI between ranks 0 and 1 of %d: %.2f us (4 B), %.1f us (4 MiB) -> latency %.2f "
      "us, %.2f GB/s\n",
      fit.ranks, small * 1e6, large * 1e6, fit.transport.latency_us, fit.transport.bandwidth_gbs);
  return fit;
}

// How the compute scales (docs/MODEL.md): Amdahl's serial fraction from one group on every
// core's thread; contention from C independent copies of the step at once, oversubscription's
// overhead from 2C copies on the C cores against C (the co-run primitive, time_corun); the
// barrier's wait (printed only) from the 2C (and 4C) sync layouts.
struct Scaling {
  double efficiency = 0, serial = 0, contention = 1, overhead = 0, wait = 0;
};

Result<Scaling> fit_scaling(std::vector<NetFigures>& nets, const Ceilings& ceil, int c) {
  std::vector<double> serial, corun, wait_frac, efficiency;
  std::vector<double> corun_probes, corun_shared;  // the nets with both co-run layouts
  // Contention: every round of every net's co-run primitive, pooled (the median of them all).
  for (const NetFigures& f : nets)
    corun.insert(corun.end(), f.corun.begin(), f.corun.end());
  // Oversubscription: the same primitive with 2C copies (two time-sliced on each core) against
  // C copies, thread CPU time per step: what a switch costs the step, no barrier, no exchange.
  for (const NetFigures& f : nets) {
    if (f.corun_shared.empty()) continue;
    corun_probes.insert(corun_probes.end(), f.corun.begin(), f.corun.end());
    corun_shared.insert(corun_shared.end(), f.corun_shared.begin(), f.corun_shared.end());
  }
  const double contention = corun.empty() ? 1.0 : std::max(0.5, median(corun));
  for (NetFigures& f : nets) {
    auto cost = net_cost(f.spec);
    if (!cost.ok()) return cost.status();
    f.arena_floats = cost->arena_floats;
    efficiency.push_back(f.flops_per_image * static_cast<double>(f.batch) / f.step /
                         (ceil.fma_core_gflops.max * 1e9));
    if (c > 1 && f.step_threads > 0) {
      const double speedup = f.step / f.step_threads;
      serial.push_back(std::clamp((c / speedup - 1) / (c - 1), 0.0, 1.0));
    }
    // The sync layouts' split: the share of their compute spent waiting (printed only).
    for (const NetFigures::Shared& s : f.shared) {
      if (s.groups <= c) continue;
      const double all = s.compute + s.comm + s.wait;
      wait_frac.push_back(all > 0 && s.compute > 0 ? s.wait / s.compute : 0);
    }
    if (!f.corun_shared.empty()) f.overhead = fit_oversubscription(f.corun, f.corun_shared);
  }
  Scaling out;
  out.efficiency = std::clamp(median(efficiency), 1e-3, 1.0);
  out.serial = median(serial);
  out.contention = contention;
  out.overhead = fit_oversubscription(corun_probes, corun_shared);
  out.wait = median(wait_frac);
  return out;
}

// A net timed layer by layer only (layer_probe_nets): its layers, update and the step they
// were timed in.
Result<NetFigures> measure_layers(const Topology& topo, const BenchConfig& cfg, const NetSpec& spec,
                                  int64_t batch) {
  NetFigures f;
  f.name = spec.name;
  f.spec = spec;
  f.batch = batch;
  f.layers_only = true;
  EASEL_ASSIGN_OR_RETURN(LayerView v, time_layers(topo, cfg, spec, batch));
  f.update = v.update_cpu_ms.median / 1e3;
  f.step = f.step_layers = v.step_cpu_ms.median / 1e3;
  f.layers = v.layers;
  std::printf("  %-14s layers timed in a step of %.3f ms (CPU time)\n", f.name.c_str(),
              f.step * 1e3);
  return f;
}

// Every timed layer pass of `f` as the fit's samples; returns the sum of their seconds.
double add_layer_samples(const NetFigures& f, const std::vector<model::LayerWork>& work,
                         std::vector<model::LayerSample>& samples) {
  double layers = 0;
  for (const LayerTime& t : f.layers) {
    const double fwd = t.forward_cpu_ms.median / 1e3, bwd = t.backward_cpu_ms.median / 1e3;
    layers += fwd + bwd;
    for (const model::LayerWork& w : work) {
      if (w.name != t.info.name) continue;
      samples.push_back({w.cls, false, w.forward.flops(f.batch), w.forward.bytes(f.batch), fwd,
                         w.forward.bytes_per_batch, w.forward.pixels(f.batch)});
      samples.push_back({w.cls, true, w.backward.flops(f.batch), w.backward.bytes(f.batch), bwd,
                         w.backward.bytes_per_batch, w.backward.pixels(f.batch)});
    }
  }
  return layers;
}

// The layer classes' rates (model/layer_rates.hpp) from every timed layer of every net
// (the probes', the layer probes' and --nets'; the GEMM classes' flop rates at most the FMA
// peak), the momentum update's bandwidth and the step's rest per image (the whole 1x1 step less
// its layers and update), each the median over `nets` (not the layer probes).
Result<model::StepRates> fit_step(const std::vector<NetFigures>& nets,
                                  const std::vector<NetFigures>& layer_probes, double peak_gflops) {
  std::vector<model::LayerSample> samples;
  std::vector<double> update_gbs, other;
  for (const NetFigures& f : layer_probes) {
    EASEL_ASSIGN_OR_RETURN(std::vector<model::LayerWork> work,
                           model::layer_work(f.spec, dnnl_vector_floats()));
    add_layer_samples(f, work, samples);
  }
  for (const NetFigures& f : nets) {
    EASEL_ASSIGN_OR_RETURN(std::vector<model::LayerWork> work,
                           model::layer_work(f.spec, dnnl_vector_floats()));
    const double layers = add_layer_samples(f, work, samples);
    if (f.update > 0)
      update_gbs.push_back(20.0 * static_cast<double>(f.arena_floats) / f.update / 1e9);
    // The rest: the whole training step timed in the same loop as its layers (so that the
    // machine's load moves both alike) less its layers and update: the loss, what no layer
    // times.
    other.push_back(std::max(0.0, f.step_layers - layers - f.update) /
                    static_cast<double>(f.batch));
    std::printf(
        "  %-14s step %.3f ms (the layer view's %.3f = layers %.3f + update %.3f + rest %.3f)\n",
        f.name.c_str(), f.step * 1e3, f.step_layers * 1e3, layers * 1e3, f.update * 1e3,
        (f.step_layers - layers - f.update) * 1e3);
  }
  model::StepRates r;
  r.rates = model::fit_layer_rates(samples, peak_gflops);
  r.update_gbs = std::max(median(update_gbs), 1e-3);
  r.other_per_image = median(other);
  for (const model::LayerRate& x : r.rates) {
    std::printf("  layer class %-22s %-8s %2d samples: %8.2f GFLOP/s, %8.2f GB/s", x.cls.c_str(),
                x.backward ? "backward" : "forward", x.samples, x.gflops, x.gbs);
    if (x.weight_gbs) std::printf(", weights %.2f GB/s", *x.weight_gbs);
    if (x.gpixels > 0) std::printf(", %.3f Gpixels/s", x.gpixels);
    std::printf("\n");
  }
  std::printf("  momentum update %.2f GB/s; rest of the step %.2f us per image\n", r.update_gbs,
              r.other_per_image * 1e6);
  return r;
}

// Passes timed by size, one [[table]] each: bytes, seconds and cold_seconds (groups 1).
void write_sized(std::ostream& os, const std::string& table, const std::string& comment,
                 const std::vector<model::ExchangePoint>& points) {
  for (const model::ExchangePoint& x : points)
    os << "[[" << table << "]]  # " << comment << "\nbytes = " << num(x.bytes)
       << "\nseconds = " << num(x.seconds) << "\ncold_seconds = " << num(x.cold_seconds) << "\n";
}

// The header and [machine]: which machine, when, and where its core count came from.
void write_machine(std::ostream& os, const std::string& when, const std::string& origin,
                   int cores) {
  os << "# This machine, as `easel bench --calibrate` measured it (" << when << ").\n"
     << "# Every figure below was measured by that command on this machine; docs/MODEL.md says\n"
     << "# how each one is used. Re-run it after a hardware or build change.\n\n"
     << "[machine]\nname = " << quoted("this machine: " + cpu_name()) << "\nkind = \"cpu\"\n"
     << "cores = " << cores << "\nsource = " << quoted(origin + "; hwloc's core count") << "\n\n";
}

// [compute]: the FMA peak and the scaling figures fitted to the nets' steps and layouts.
void write_compute(std::ostream& os, const Ceilings& ceil, const Scaling& sc,
                   const std::string& origin) {
  os << "[compute]\n"
     << "peak_gflops = " << num(ceil.fma_core_gflops.max) << "  # one core's FP32 FMA loop ("
     << ceil.isa << ")\n"
     << "efficiency = " << num(sc.efficiency)
     << "  # the calibrated nets' 1x1 step FLOP/s over that peak (median)\n"
     << "serial_fraction = " << num(sc.serial)
     << "  # Amdahl's s from one group on 1 and on all cores' threads (median over nets)\n"
     << "contention = " << num(sc.contention)
     << "  # a step's CPU time with every core running a copy, over it alone (median of "
        "every net's interleaved rounds)\n"
     << "oversubscription_overhead = " << num(sc.overhead)
     << "  # the co-run primitive's step CPU time with 2C copies on C cores over it with C "
        "copies, less 1 (medians of the probes' rounds)\n"
     << "vector_floats = " << dnnl_vector_floats()
     << "  # floats in a vector of oneDNN's ISA: layers' channels count in whole vectors\n"
     << "oversubscribed_wait = 0.0  # groups sharing a core wait while another of them runs: "
        "that time is in N / C (their split showed "
     << num(sc.wait) << " of the compute waiting)\n"
     << "source = " << quoted(origin + "; FMA loop, steps and layouts of easel bench") << "\n\n";
}

// [memory] and [memory.dram]: the caches and the triad's bandwidths, and the capacity.
void write_memory(std::ostream& os, const Topology& topo, const BenchConfig& cfg,
                  const Ceilings& ceil, const ExchangeFit& fit, const std::string& origin) {
  os << "[memory]\ncache_mb = " << num(fit.memory.cache_mb)
     << "  # hwloc's last-level caches, summed (a VM may report its host's)\n"
     << "source = "
     << quoted(origin + "; STREAM-style triad, " + std::to_string(cfg.triad_mib) + " MiB arrays")
     << "\n"
     << "[memory.dram]\nbandwidth_gbs = " << num(ceil.triad_all_gbs.max)
     << "\ncore_bandwidth_gbs = " << num(ceil.triad_core_gbs.max)
     << "\ncapacity_gb = " << num(static_cast<double>(topo.total_memory_bytes) / 1e9)
     << "\nsource = " << quoted("triad, best repeat; capacity from hwloc") << "\n\n";
}

// [transport]: shared memory's latency, bandwidth and timed exchanges, and the MPI ping-pong's
// fit when the calibration ran under mpirun.
void write_transport(std::ostream& os, const ExchangeFit& fit, const MpiFit& mpi,
                     const std::string& origin) {
  os << "[transport]\nsource = " << quoted(origin) << "\n"
     << "[transport.shared_memory]\nlatency_us = " << num(fit.memory.shared_memory.latency_us)
     << "\nbandwidth_gbs = " << num(fit.memory.shared_memory.bandwidth_gbs) << "\nsource = "
     << quoted("latency: half the fastest round trip between two threads (" +
               num(fit.round_trip_seconds * 1e6) +
               " us); bandwidth: one thread's momentum update over each net's arena (20 bytes "
               "per float, thread CPU time, median over the nets)")
     << "\n";
  for (const model::ExchangePoint& x : fit.points)
    os << "[[transport.shared_memory.exchange]]  # sync-easgd's exchange, a group's CPU seconds\n"
       << "groups = " << x.groups << "\nbytes = " << num(x.bytes)
       << "\nseconds = " << num(x.seconds) << "\n";
  for (const model::ExchangePoint& x : fit.comm_points)
    os << "[[transport.shared_memory.comm_exchange]]  # sync-easgd's exchange on the Comm path "
          "(nets with running statistics), a group's CPU seconds less its elastic step\n"
       << "groups = " << x.groups << "\nbytes = " << num(x.bytes)
       << "\nseconds = " << num(x.seconds) << "\ncold_seconds = " << num(x.cold_seconds)
       << "\nslowest_seconds = " << num(x.slowest_seconds)
       << "\nslowest_cold_seconds = " << num(x.slowest_cold_seconds) << "\n";
  write_sized(os, "transport.shared_memory.centre_exchange",
              "async-easgd's locked exchange, the group's CPU seconds", fit.centre_points);
  if (mpi.ranks > 1)
    os << "[transport.mpi]\nlatency_us = " << num(mpi.transport.latency_us)
       << "\nbandwidth_gbs = " << num(mpi.transport.bandwidth_gbs) << "\nsource = "
       << quoted("ping-pong between ranks 0 and 1 of " + std::to_string(mpi.ranks) +
                 " (mpirun on this machine): half the fastest round trip of 4 B (" +
                 num(mpi.small_seconds * 1e6) + " us) and of 4 MiB (" +
                 num(mpi.large_seconds * 1e6) + " us), fitted to latency + bytes / bandwidth")
       << "\n";
}

// One [[net]] per measured net: its step, update and layouts, then its [[net.layer]] times.
void write_nets(std::ostream& os, const std::vector<NetFigures>& nets) {
  for (const NetFigures& f : nets) {
    os << "\n[[net]]\nname = " << quoted(f.name) << "\nbatch = " << f.batch
       << "\nstep_seconds = " << num(f.step) << "\nupdate_seconds = " << num(f.update);
    if (f.overhead >= 0)
      os << "\noversubscription_overhead = " << num(f.overhead)
         << "  # this net's own, from its co-run rounds (2C copies over C)";
    os << "\nsource = "
       << quoted(f.layers_only
                     ? "a layer probe: the whole step its layers were timed in (CPU time, "
                       "median of the repeats); fitted to, no layouts"
                     : "one group of one thread alone: forward, loss, backward, "
                       "momentum update; median of the repeats");
    os << "\n# group layouts measured (step s of group 0; the algorithm's compute/comm/wait):";
    for (const NetFigures::Shared& s : f.shared)
      os << "\n#   " << s.groups << "x1: " << num(s.step) << " s; " << num(s.compute) << " / "
         << num(s.comm) << " / " << num(s.wait);
    os << "\n";
    for (const LayerTime& l : f.layers)
      os << "[[net.layer]]\nname = " << quoted(l.info.name) << "\nkind = " << quoted(l.info.kind)
         << "\nforward_seconds = " << num(l.forward_ms.median / 1e3)
         << "\nbackward_seconds = " << num(l.backward_ms.median / 1e3) << "\n";
  }
}

// [step]: the fitted step model (update, rest, by-size passes and each layer class's rates).
void write_step(std::ostream& os, const ExchangeFit& fit, const std::vector<NetFigures>& nets,
                const model::StepRates& step, const std::string& origin) {
  std::string fitted;
  for (const NetFigures& f : nets)
    fitted += (fitted.empty() ? "" : ", ") + f.name;
  os << "\n# Any net's step from its layers (docs/MODEL.md): each layer class's rates, fitted to "
        "the\n"
     << "# timed layers of " << fitted << ".\n"
     << "[step]\nupdate_gbs = " << num(step.update_gbs)
     << "  # the momentum update: 20 bytes per arena float\nother_seconds_per_image = "
     << num(step.other_per_image) << "  # the step less its layers and update, per image\n"
     << "source = "
     << quoted(origin + "; each layer of " + fitted + " timed inside whole steps at batch " +
               std::to_string(nets.front().batch) +
               ", per class and pass seconds = flops / gflops + bytes / gbs + pixels / gpixels, "
               "the GEMM classes' "
               "weights at weight_gbs and flops at most at the FMA peak (least squares on the "
               "relative error); medians over the nets")
     << "\n";
  write_sized(os, "step.update", "the momentum update by arena size, one thread's CPU seconds",
              fit.update_points);
  write_sized(os, "step.elastic_update",
              "sync-easgd's elastic momentum step (the Comm path), one thread's CPU seconds",
              fit.elastic_points);
  for (const model::LayerRate& r : step.rates)
    os << "[[step.rate]]\nclass = " << quoted(r.cls)
       << "\npass = " << (r.backward ? "\"backward\"" : "\"forward\"")
       << "\ngflops = " << num(r.gflops) << "\ngbs = " << num(r.gbs)
       << (r.weight_gbs ? "\nweight_gbs = " + num(*r.weight_gbs) : "")
       << (r.gpixels > 0 ? "\ngpixels = " + num(r.gpixels) : "") << "\nsamples = " << r.samples
       << "\n";
}

// The one [[mode]]: this machine's localities as hwloc shows them.
void write_mode(std::ostream& os, const Topology& topo) {
  const std::vector<Locality> locs = localities(topo);
  os << "\n[[mode]]\nname = \"this\"\nlocalities = " << locs.size()
     << "\nhbw_gb = " << num(static_cast<double>(locs[0].hbw_bytes) / 1e9)
     << "\ndram_gb = " << num(static_cast<double>(locs[0].dram_bytes) / 1e9)
     << "\nsource = \"engine/topology.cpp's localities of this machine (hwloc)\"\n";
}

// The description's text (it must parse back: run_calibration checks).
std::string describe(const Topology& topo, const BenchConfig& cfg, const Ceilings& ceil,
                     const ExchangeFit& fit, const Scaling& sc, const MpiFit& mpi,
                     const std::vector<NetFigures>& nets, const model::StepRates& step) {
  std::ostringstream os;
  const std::string when = now_utc();
  char host[256] = "this machine";
  gethostname(host, sizeof host - 1);
  const std::string origin = "easel bench --calibrate on " + std::string(host) + ", " + when +
                             ", load average " + load_average();
  write_machine(os, when, origin, topo.core_count());
  write_compute(os, ceil, sc, origin);
  write_memory(os, topo, cfg, ceil, fit, origin);
  write_transport(os, fit, mpi, origin);
  write_nets(os, nets);
  write_step(os, fit, nets, step, origin);
  write_mode(os, topo);
  return os.str();
}

// Everything but the MPI transport, on this process alone.
Status calibrate_node(const BenchConfig& cfg, const Topology& topo, const std::string& out_path,
                      const MpiFit& mpi) {
  const int c = topo.core_count();
  EASEL_ASSIGN_OR_RETURN(Ceilings ceil, measure_ceilings(topo, cfg));
  std::printf("  FMA peak one core %.1f GFLOP/s; triad one core %.1f GB/s, all %.1f GB/s\n",
              ceil.fma_core_gflops.max, ceil.triad_core_gbs.max, ceil.triad_all_gbs.max);
  // The memory's bandwidth in the threads' CPU time (the wall-clock triad holds other
  // processes' turns on a loaded machine): one thread, and every core's at once.
  const int64_t triad_floats = cfg.triad_mib * (int64_t{1} << 20) / 4;
  ceil.triad_core_gbs.max = std::max(ceil.triad_core_gbs.max, cpu_triad_gbs(1, triad_floats));
  ceil.triad_all_gbs.max = std::max(ceil.triad_all_gbs.max, cpu_triad_gbs(c, triad_floats));
  std::printf("  triad in CPU time: one core %.1f GB/s, all %.1f GB/s\n", ceil.triad_core_gbs.max,
              ceil.triad_all_gbs.max);
  // The probes first (they span the layer classes), then the --nets nets.
  std::vector<NetSpec> specs = model::probe_nets();
  const size_t probes = specs.size();
  for (const std::string& name : cfg.nets)
    specs.push_back(spec_of(name));
  std::vector<NetFigures> nets;
  for (size_t i = 0; i < specs.size(); ++i) {
    EASEL_ASSIGN_OR_RETURN(NetFigures f,
                           measure_net(topo, cfg, specs[i], cfg.batches[0], i < probes));
    nets.push_back(std::move(f));
  }
  ExchangeFit fit = fit_exchange(topo, ceil, nets);
  EASEL_RETURN_IF_ERROR(time_exchange_points(topo, cfg, fit));
  EASEL_ASSIGN_OR_RETURN(Scaling sc, fit_scaling(nets, ceil, c));
  std::vector<NetFigures> layer_probes;
  for (const NetSpec& spec : model::layer_probe_nets()) {
    EASEL_ASSIGN_OR_RETURN(NetFigures f, measure_layers(topo, cfg, spec, cfg.batches[0]));
    layer_probes.push_back(std::move(f));
  }
  EASEL_ASSIGN_OR_RETURN(model::StepRates step,
                         fit_step(nets, layer_probes, ceil.fma_core_gflops.max));
  nets.insert(nets.end(), layer_probes.begin(), layer_probes.end());  // described with the rest
  const std::string text = describe(topo, cfg, ceil, fit, sc, mpi, nets, step);
  // What is written must read back.
  if (auto back = model::parse_machine(text, out_path); !back.ok())
    return internal_error("calibration does not parse back: " + back.status().message());
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path parent = fs::path(out_path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (!cli::write_atomic(out_path, text)) return io_error("--out: cannot write " + out_path);
  std::printf("machine description written to %s\n", out_path.c_str());
  return Status::ok_status();
}

}  // namespace

Status run_calibration(const BenchConfig& base, const Topology& topo, const std::string& out_path) {
  BenchConfig cfg = base;
  cfg.oversubscribe = true;
  const int c = topo.core_count();
  if (process_rank() == 0)
    std::printf("easel bench --calibrate: %d cores (%s), load %s; writing %s\n", c,
                cpu_name().c_str(), load_average().c_str(), out_path.c_str());
  // Under mpirun: the MPI transport first, then rank 0 alone measures the rest while the other
  // ranks wait idle for its word (they would share its cores).
  MpiFit mpi;
  MpiComm* world = mpi_world();
  if (world != nullptr && world->size() > 1) {
    mpi = fit_mpi(*world);
    if (world->rank() != 0) {
      float done = 0;
      int64_t count = 0;
      while (!world->probe(kDoneTag))  // 100 wake-ups a second: rank 0's cores stay its own
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      world->recv(&done, 1, 0, kDoneTag, &count);
      return done > 0 ? Status::ok_status() : internal_error("rank 0's calibration failed");
    }
  }
  Status st = calibrate_node(cfg, topo, out_path, mpi);
  if (world != nullptr && world->size() > 1) {
    const float done = st.ok() ? 1.0f : 0.0f;
    for (int r = 1; r < world->size(); ++r)
      world->send(&done, 1, r, kDoneTag);
  }
  return st;
}

}  // namespace easel::bench
