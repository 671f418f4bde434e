// `easel bench --calibrate [--out FILE]`: measures what the performance model (model/)
// needs on this machine and writes it as a machine description (TOML): the FMA peak and the
// triad; the probe nets (probes.hpp) and every --nets net at the first --batches size: one
// group's step alone and its layers, from which each layer class's rates are fitted
// (model/layer_rates.hpp); for the probes also one group on every core's thread and G
// groups of one thread at once for G = C, 2C (and 4C when that is at most 16: oversubscribed):
// contention and the oversubscription overhead; the shared-memory latency (two threads' round
// trip) and bandwidth (one thread's arena passes). Steps and layers are timed in the threads'
// CPU time. docs/MODEL.md explains each figure. This file measures; model/calibration.hpp fits
// the figures to the model's rates and writes the description.
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "devices/cpu/dnnl_ops.hpp"
#include "engine/comm/mpi_comm.hpp"
#include "model/calibration.hpp"
#include "model/probes.hpp"
#include "nets/models/models.hpp"
#include "tools/bench/bench.hpp"
#include "tools/bench/calibrate.hpp"
#include "tools/cli/cli.hpp"

namespace easel::bench {

namespace {

using model::ExchangeFigures;
using model::ExchangePoint;
using model::NetFigures;

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

NetSpec spec_of(const std::string& name) {
  const BenchInput in = bench_input(name);
  return build_model(name, {in.channels, in.height, in.width, in.classes}).value();
}

// Times `f`'s layers inside whole steps (one group on the first core): its layers, update and
// the step they were timed in, in the thread's CPU time (the layers in wall time too).
Status time_net_layers(const Topology& topo, const BenchConfig& cfg, NetFigures& f) {
  EASEL_ASSIGN_OR_RETURN(LayerView v, time_layers(topo, cfg, f.spec, f.batch));
  f.update = v.update_cpu_ms.median / 1e3;
  f.step_layers = v.step_cpu_ms.median / 1e3;
  for (const LayerTime& t : v.layers)
    f.layers.push_back({t.info.name, t.info.kind, t.forward_ms.median / 1e3,
                        t.backward_ms.median / 1e3, t.forward_cpu_ms.median / 1e3,
                        t.backward_cpu_ms.median / 1e3});
  return Status::ok_status();
}

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
  EASEL_RETURN_IF_ERROR(time_net_layers(topo, cfg, f));
  return f;
}

// The arena sizes the exchanges are timed at (64 KB to 256 MB: LeNet's 1.7 MB to
// AlexNet-CIFAR's 233 MB lie within, past the last-level cache that hwloc reports here) and the
// group counts (two: mirrored; four: partitioned, as the trainer runs three or more; the Comm
// path also one: the root alone copies its weights and updates the centre).
constexpr int64_t kExchangeBytes[] = {int64_t{1} << 16, int64_t{1} << 20, int64_t{1} << 23,
                                      int64_t{1} << 26, int64_t{1} << 28};
constexpr int kExchangeGroups[] = {2, 4};
constexpr int kCommPathGroups[] = {1, 2, 4};

Status time_exchange_points(const Topology& topo, const BenchConfig& cfg, ExchangeFigures& ex) {
  // Cold timings evict twice the last-level cache (64 MB where hwloc reports none) before each
  // call: what the trainer's passes find after a step larger than the cache.
  const int64_t evict = 2 * std::max<int64_t>(topo.last_level_cache_bytes, int64_t{32} << 20);
  for (int g : kExchangeGroups)
    for (int64_t bytes : kExchangeBytes) {
      EASEL_ASSIGN_OR_RETURN(PassTime s, time_sync_exchange_cpu(topo, cfg, g, bytes / 4));
      ex.points.push_back({g, static_cast<double>(bytes), s.seconds});
      std::printf("  sync-easgd exchange, %d groups, %8.3f MB arena: %.3f ms of a group's CPU\n", g,
                  static_cast<double>(bytes) / 1e6, s.seconds * 1e3);
    }
  for (int g : kCommPathGroups)
    for (int64_t bytes : kExchangeBytes) {
      EASEL_ASSIGN_OR_RETURN(PassTime s,
                             time_sync_exchange_cpu(topo, cfg, g, bytes / 4, true, evict));
      ex.comm_points.push_back({g, static_cast<double>(bytes), s.seconds, s.cold_seconds,
                                s.slowest_seconds, s.slowest_cold_seconds});
      std::printf(
          "  sync-easgd exchange on the Comm path, %d groups, %8.3f MB arena: %.3f ms of a "
          "group's CPU (its comm), %.3f ms cold\n",
          g, static_cast<double>(bytes) / 1e6, s.seconds * 1e3, s.cold_seconds * 1e3);
    }
  const struct {
    GroupPass pass;
    std::vector<ExchangePoint>* points;
    const char* what;
  } passes[] = {{GroupPass::centre_exchange, &ex.centre_points, "async-easgd locked exchange"},
                {GroupPass::momentum_update, &ex.update_points, "momentum update"},
                {GroupPass::elastic_update, &ex.elastic_points, "elastic momentum step"}};
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

constexpr int kPingTag = 7301, kDoneTag = 7302;

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

// MPI between ranks 0 and 1 (under mpirun with 2 or more ranks): ping-pongs of a small and a
// large message, half the fastest round trip of each (model::fit_mpi fits them to the model's
// [transport.mpi]). Ranks other than 0 and 1 only wait; rank 0's figures are the ones written.
model::MpiFigures measure_mpi(MpiComm& world) {
  model::MpiFigures m;
  m.ranks = world.size();
  if (world.rank() > 1) return m;
  ping_pong(world, model::kMpiLargeFloats, 3);  // warm-up: connections and buffers
  m.small_seconds = ping_pong(world, model::kMpiSmallFloats, 200) / 2;
  m.large_seconds = ping_pong(world, model::kMpiLargeFloats, 20) / 2;
  return m;
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
  EASEL_RETURN_IF_ERROR(time_net_layers(topo, cfg, f));
  f.step = f.step_layers;
  std::printf("  %-14s layers timed in a step of %.3f ms (CPU time)\n", f.name.c_str(),
              f.step * 1e3);
  return f;
}

// The FMA peak and the triad, the triad also in the threads' CPU time (the wall-clock triad
// holds other processes' turns on a loaded machine): one thread, and every core's at once.
Result<Ceilings> measure_node_ceilings(const Topology& topo, const BenchConfig& cfg) {
  EASEL_ASSIGN_OR_RETURN(Ceilings ceil, measure_ceilings(topo, cfg));
  std::printf("  FMA peak one core %.1f GFLOP/s; triad one core %.1f GB/s, all %.1f GB/s\n",
              ceil.fma_core_gflops.max, ceil.triad_core_gbs.max, ceil.triad_all_gbs.max);
  const int64_t triad_floats = cfg.triad_mib * (int64_t{1} << 20) / 4;
  ceil.triad_core_gbs.max = std::max(ceil.triad_core_gbs.max, cpu_triad_gbs(1, triad_floats));
  ceil.triad_all_gbs.max =
      std::max(ceil.triad_all_gbs.max, cpu_triad_gbs(topo.core_count(), triad_floats));
  std::printf("  triad in CPU time: one core %.1f GB/s, all %.1f GB/s\n", ceil.triad_core_gbs.max,
              ceil.triad_all_gbs.max);
  return ceil;
}

// What the model's description says of the machine itself: hwloc's view and the ceilings.
model::HostFigures host_figures(const Topology& topo, const BenchConfig& cfg,
                                const Ceilings& ceil) {
  model::HostFigures h;
  h.cpu_name = cpu_name();
  h.cores = topo.core_count();
  h.cache_bytes = static_cast<double>(topo.last_level_cache_bytes);
  h.memory_bytes = static_cast<double>(topo.total_memory_bytes);
  const std::vector<Locality> locs = localities(topo);
  h.localities = static_cast<int>(locs.size());
  h.hbw_bytes = static_cast<double>(locs[0].hbw_bytes);
  h.dram_bytes = static_cast<double>(locs[0].dram_bytes);
  h.isa = ceil.isa;
  h.fma_core_gflops = ceil.fma_core_gflops.max;
  h.triad_core_gbs = ceil.triad_core_gbs.max;
  h.triad_all_gbs = ceil.triad_all_gbs.max;
  h.triad_mib = cfg.triad_mib;
  h.vector_floats = dnnl_vector_floats();
  return h;
}

// The shared-memory exchange's latency and bandwidth (the model's shm_exchange_seconds), from
// two primitives that a loaded machine does not distort: the latency of one message, half the
// fastest of many round trips between two threads through one cache line (some find both
// threads on a core even when other processes hold them most of the time), and the bandwidth
// one thread streams the exchange's element-wise passes at, the momentum update's (the same
// kind of pass over an arena; thread CPU time, median over the nets).
void measure_shared_memory(model::Calibration& cal) {
  cal.exchange.round_trip_seconds = thread_ping_pong() * 2;
  cal.shared_memory = model::fit_shared_memory(cal.exchange.round_trip_seconds, cal.nets);
  std::printf(
      "  shared memory: round trip between two threads %.2f us (fastest) -> latency %.3f us per "
      "message; one thread's element-wise passes %.1f GB/s; last-level cache %.0f MB\n",
      cal.exchange.round_trip_seconds * 1e6, cal.shared_memory.latency_us,
      cal.shared_memory.bandwidth_gbs, cal.host.cache_bytes / 1e6);
}

// The step fit's inputs and outputs: each net's layer view split, then each class's rates.
void print_net_steps(const std::vector<NetFigures>& nets) {
  for (const NetFigures& f : nets) {
    const double layers = model::timed_layer_seconds(f);
    std::printf(
        "  %-14s step %.3f ms (the layer view's %.3f = layers %.3f + update %.3f + rest %.3f)\n",
        f.name.c_str(), f.step * 1e3, f.step_layers * 1e3, layers * 1e3, f.update * 1e3,
        (f.step_layers - layers - f.update) * 1e3);
  }
}
void print_rates(const model::StepRates& r) {
  for (const model::LayerRate& x : r.rates) {
    std::printf("  layer class %-22s %-8s %2d samples: %8.2f GFLOP/s, %8.2f GB/s", x.cls.c_str(),
                x.backward ? "backward" : "forward", x.samples, x.gflops, x.gbs);
    if (x.weight_gbs) std::printf(", weights %.2f GB/s", *x.weight_gbs);
    if (x.gpixels > 0) std::printf(", %.3f Gpixels/s", x.gpixels);
    std::printf("\n");
  }
  std::printf("  momentum update %.2f GB/s; rest of the step %.2f us per image\n", r.update_gbs,
              r.other_per_image * 1e6);
}

// The description of `cal` (when and where it was measured stamped now) to out_path, its
// directory created.
Status write_description(model::Calibration& cal, const std::string& out_path) {
  cal.host.when = now_utc();
  char host[256] = "this machine";
  gethostname(host, sizeof host - 1);
  cal.host.origin = "easel bench --calibrate on " + std::string(host) + ", " + cal.host.when +
                    ", load average " + load_average();
  EASEL_ASSIGN_OR_RETURN(std::string text, model::describe_machine(cal, out_path));
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path parent = fs::path(out_path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (!cli::write_atomic(out_path, text)) return io_error("--out: cannot write " + out_path);
  std::printf("machine description written to %s\n", out_path.c_str());
  return Status::ok_status();
}

// Everything but the MPI transport (cal.mpi, measured before), on this process alone.
Status calibrate_node(const BenchConfig& cfg, const Topology& topo, const std::string& out_path,
                      model::Calibration& cal) {
  EASEL_ASSIGN_OR_RETURN(Ceilings ceil, measure_node_ceilings(topo, cfg));
  cal.host = host_figures(topo, cfg, ceil);
  // The probes first (they span the layer classes), then the --nets nets.
  std::vector<NetSpec> specs = model::probe_nets();
  const size_t probes = specs.size();
  for (const std::string& name : cfg.nets)
    specs.push_back(spec_of(name));
  for (size_t i = 0; i < specs.size(); ++i) {
    EASEL_ASSIGN_OR_RETURN(NetFigures f,
                           measure_net(topo, cfg, specs[i], cfg.batches[0], i < probes));
    cal.nets.push_back(std::move(f));
  }
  measure_shared_memory(cal);
  EASEL_RETURN_IF_ERROR(time_exchange_points(topo, cfg, cal.exchange));
  EASEL_ASSIGN_OR_RETURN(cal.scaling, model::fit_scaling(cal.nets, cal.host));
  std::vector<NetFigures> layer_probes;
  for (const NetSpec& spec : model::layer_probe_nets()) {
    EASEL_ASSIGN_OR_RETURN(NetFigures f, measure_layers(topo, cfg, spec, cfg.batches[0]));
    layer_probes.push_back(std::move(f));
  }
  print_net_steps(cal.nets);
  EASEL_ASSIGN_OR_RETURN(cal.step, model::fit_step(cal.nets, layer_probes, cal.host.fma_core_gflops,
                                                   cal.host.vector_floats));
  print_rates(cal.step);
  // Described with the rest.
  cal.nets.insert(cal.nets.end(), layer_probes.begin(), layer_probes.end());
  return write_description(cal, out_path);
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
  model::Calibration cal;
  MpiComm* world = mpi_world();
  if (world != nullptr && world->size() > 1) {
    cal.mpi = measure_mpi(*world);
    if (world->rank() != 0) {
      float done = 0;
      int64_t count = 0;
      while (!world->probe(kDoneTag))  // 100 wake-ups a second: rank 0's cores stay its own
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      world->recv(&done, 1, 0, kDoneTag, &count);
      return done > 0 ? Status::ok_status() : internal_error("rank 0's calibration failed");
    }
    cal.mpi_transport = model::fit_mpi(cal.mpi);
    std::printf(
        "  MPI between ranks 0 and 1 of %d: %.2f us (4 B), %.1f us (4 MiB) -> latency %.2f "
        "us, %.2f GB/s\n",
        cal.mpi.ranks, cal.mpi.small_seconds * 1e6, cal.mpi.large_seconds * 1e6,
        cal.mpi_transport.latency_us, cal.mpi_transport.bandwidth_gbs);
  }
  Status st = calibrate_node(cfg, topo, out_path, cal);
  if (world != nullptr && world->size() > 1) {
    const float done = st.ok() ? 1.0f : 0.0f;
    for (int r = 1; r < world->size(); ++r)
      world->send(&done, 1, r, kDoneTag);
  }
  return st;
}

}  // namespace easel::bench
