// `easel bench --calibrate [--out FILE]`: measures what the performance model (tools/model/)
// needs on this machine and writes it as a machine description (TOML): the FMA peak and the
// triad; for every --nets net at the first --batches size, one group's step alone (one thread
// and all cores' threads), its layers, and G groups of one thread at once for G = C, 2C (and 4C
// when that is at most 16: oversubscribed), with the algorithm's own split of their time; the
// sync-easgd exchange among C groups over two arenas (mlp's and LeNet's), from which the
// shared-memory latency and bandwidth are fitted. docs/MODEL.md explains each figure.
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nets/models/models.hpp"
#include "tools/bench/bench.hpp"
#include "tools/bench/calibrate.hpp"
#include "tools/cli/cli.hpp"
#include "tools/model/machine.hpp"
#include "tools/model/model.hpp"

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
  int64_t batch = 64;
  int64_t arena_floats = 0;
  double step = 0, update = 0, step_threads = 0, flops_per_image = 0;
  std::vector<LayerTime> layers;
  // Gx1 layouts: groups, group 0's step (s), and the algorithm's split summed over groups.
  struct Shared {
    int groups = 0;
    double step = 0, compute = 0, comm = 0, wait = 0;
  };
  std::vector<Shared> shared;
};

// The sync-easgd exchange the trainer runs among p groups in one process: mirrored for two,
// partitioned for more.
double exchange_us(const ExchangeResult& e) {
  const Traffic want =
      e.groups == 2 ? Traffic::sync_exchange_mirrored : Traffic::sync_exchange_partitioned;
  for (const ExchangeTime& o : e.ops)
    if (o.traffic == want) return o.us.median;
  return 0;
}

Result<NetFigures> measure_net(const Topology& topo, const BenchConfig& cfg,
                               const std::string& name, int64_t batch) {
  const int c = topo.core_count();
  const NetSpec spec = spec_of(name);
  NetFigures f;
  f.name = name;
  f.batch = batch;
  EASEL_ASSIGN_OR_RETURN(StepResult one, time_steps(topo, cfg, spec, batch, {1, 1}));
  f.step = one.step_ms.median / 1e3;
  f.flops_per_image = one.flops_per_image;
  std::printf("  %-14s 1x1 step %.3f ms\n", name.c_str(), one.step_ms.median);
  if (c > 1) {
    EASEL_ASSIGN_OR_RETURN(StepResult t, time_steps(topo, cfg, spec, batch, {1, c}));
    f.step_threads = t.step_ms.median / 1e3;
    std::printf("  %-14s 1x%d step %.3f ms\n", name.c_str(), c, t.step_ms.median);
  }
  std::vector<int> counts;
  if (c > 1) counts.push_back(c);
  counts.push_back(2 * c);
  if (4 * c <= 16) counts.push_back(4 * c);
  for (int g : counts) {
    EASEL_ASSIGN_OR_RETURN(StepResult s, time_steps(topo, cfg, spec, batch, {g, 1}));
    f.shared.push_back(
        {g, s.step_ms.median / 1e3, s.compute_seconds, s.comm_seconds, s.wait_seconds});
    std::printf("  %-14s %dx1 step %.3f ms (compute/comm/wait %.0f%%/%.0f%%/%.0f%%)\n",
                name.c_str(), g, s.step_ms.median,
                100 * s.compute_seconds / (s.compute_seconds + s.comm_seconds + s.wait_seconds),
                100 * s.comm_seconds / (s.compute_seconds + s.comm_seconds + s.wait_seconds),
                100 * s.wait_seconds / (s.compute_seconds + s.comm_seconds + s.wait_seconds));
  }
  EASEL_ASSIGN_OR_RETURN(LayerView v, time_layers(topo, cfg, spec, batch));
  f.update = v.update_ms.median / 1e3;
  f.layers = v.layers;
  return f;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace

Status run_calibration(const BenchConfig& base, const Topology& topo, const std::string& out_path) {
  BenchConfig cfg = base;
  cfg.oversubscribe = true;
  const int c = topo.core_count();
  const int64_t batch = cfg.batches[0];
  std::printf("easel bench --calibrate: %d cores (%s), load %s; writing %s\n", c,
              cpu_name().c_str(), load_average().c_str(), out_path.c_str());
  EASEL_ASSIGN_OR_RETURN(Ceilings ceil, measure_ceilings(topo, cfg));
  std::printf("  FMA peak one core %.1f GFLOP/s; triad one core %.1f GB/s, all %.1f GB/s\n",
              ceil.fma_core_gflops.max, ceil.triad_core_gbs.max, ceil.triad_all_gbs.max);

  // The exchange among max(C, 2) groups over two arenas: latency and bandwidth fitted to the
  // model's shared-memory formula (tools/model/model.cpp, sync_exchange).
  const int p = std::max(c, 2);
  EASEL_ASSIGN_OR_RETURN(ExchangeResult small, time_exchange(topo, cfg, spec_of("mlp"), p));
  EASEL_ASSIGN_OR_RETURN(ExchangeResult large, time_exchange(topo, cfg, spec_of("lenet"), p));
  const double t1 = exchange_us(small) * 1e-6, t2 = exchange_us(large) * 1e-6;
  const double n1 = static_cast<double>(small.arena_floats);
  const double n2 = static_cast<double>(large.arena_floats);
  int levels = 0;
  while ((1 << levels) < p)
    ++levels;
  // The model's formula at T = 1: latency x (2 levels + 1) + f n / p / bandwidth.
  const double per_float = model::shm_exchange_floats(p, false) / p;
  const int messages = 2 * levels + 1;
  double bw = t2 > t1 ? per_float * (n2 - n1) / (t2 - t1) : per_float * n2 / std::max(t2, 1e-9);
  double lat = (t1 - per_float * n1 / bw) / messages;
  if (lat < 1e-7) lat = 1e-7;
  std::printf(
      "  sync-easgd exchange among %d groups: %.1f us (%lld floats), %.1f us (%lld floats) -> "
      "latency %.2f us per message, %.1f GB/s\n",
      p, t1 * 1e6, static_cast<long long>(n1), t2 * 1e6, static_cast<long long>(n2), lat * 1e6,
      bw / 1e9);

  std::vector<NetFigures> nets;
  for (const std::string& name : cfg.nets) {
    EASEL_ASSIGN_OR_RETURN(NetFigures f, measure_net(topo, cfg, name, batch));
    f.arena_floats = static_cast<int64_t>(spec_of(name).layers.size());  // replaced below
    nets.push_back(std::move(f));
  }

  // The compute's scaling: Amdahl's serial fraction from one group on every core's thread;
  // contention from C groups at once, oversubscription's overhead and the barrier's wait from
  // 2C (and 4C) groups; each net's own exchange (the model's) taken out of the shared steps.
  std::vector<double> serial, contention, overhead, wait_frac, efficiency;
  for (NetFigures& f : nets) {
    const NetSpec spec = spec_of(f.name);
    auto cost = net_cost(spec);
    if (!cost.ok()) return cost.status();
    f.arena_floats = cost->arena_floats;
    efficiency.push_back(f.flops_per_image * static_cast<double>(f.batch) / f.step /
                         (ceil.fma_core_gflops.max * 1e9));
    if (c > 1 && f.step_threads > 0) {
      const double speedup = f.step / f.step_threads;
      serial.push_back(std::clamp((c / speedup - 1) / (c - 1), 0.0, 1.0));
    }
    for (const NetFigures::Shared& s : f.shared) {
      // The exchange the model predicts among s.groups groups.
      const double lv = std::ceil(std::log2(static_cast<double>(s.groups)));
      const double total =
          model::shm_exchange_floats(s.groups, false) * static_cast<double>(cost->arena_floats);
      const double x = (2 * lv + 1) * lat +
                       std::max(total / s.groups / bw, total / (ceil.triad_all_gbs.max * 1e9));
      const double all = s.compute + s.comm + s.wait;
      const double wait_share = all > 0 ? s.wait / all : 0;
      if (s.groups <= c) {
        contention.push_back(std::max(0.5, (s.step * (1 - wait_share) - x) / f.step));
      } else {
        const double over = static_cast<double>(s.groups) / c;
        const double cont = contention.empty() ? 1 : contention.back();
        const double compute = s.step * (1 - wait_share) - x;
        overhead.push_back(std::max(0.0, (compute / (f.step * cont * over) - 1) / (over - 1)));
        wait_frac.push_back(all > 0 && s.compute > 0 ? s.wait / s.compute : 0);
      }
    }
  }

  std::ostringstream os;
  const std::string when = now_utc();
  char host[256] = "this machine";
  gethostname(host, sizeof host - 1);
  const std::string origin = "easel bench --calibrate on " + std::string(host) + ", " + when +
                             ", load average " + load_average();
  os << "# This machine, as `easel bench --calibrate` measured it (" << when << ").\n"
     << "# Every figure below was measured by that command on this machine; docs/MODEL.md says\n"
     << "# how each one is used. Re-run it after a hardware or build change.\n\n"
     << "[machine]\nname = " << quoted("this machine: " + cpu_name()) << "\nkind = \"cpu\"\n"
     << "cores = " << c << "\nsource = " << quoted(origin + "; hwloc's core count") << "\n\n"
     << "[compute]\n"
     << "peak_gflops = " << num(ceil.fma_core_gflops.max) << "  # one core's FP32 FMA loop ("
     << ceil.isa << ")\n"
     << "efficiency = " << num(std::clamp(median(efficiency), 1e-3, 1.0))
     << "  # the calibrated nets' 1x1 step FLOP/s over that peak (median)\n"
     << "serial_fraction = " << num(median(serial))
     << "  # Amdahl's s from one group on 1 and on all cores' threads (median over nets)\n"
     << "contention = " << num(contention.empty() ? 1.0 : median(contention))
     << "  # a group's step with every core running one, over its step alone (exchange out)\n"
     << "oversubscription_overhead = " << num(median(overhead))
     << "  # per extra thread per core, from 2C (and 4C) groups\n"
     << "oversubscribed_wait = " << num(median(wait_frac))
     << "  # barrier wait / compute of sync-easgd's groups sharing cores (the algorithm's split)\n"
     << "source = " << quoted(origin + "; FMA loop, steps and layouts of easel bench") << "\n\n"
     << "[memory]\nsource = "
     << quoted(origin + "; STREAM-style triad, " + std::to_string(cfg.triad_mib) + " MiB arrays")
     << "\n"
     << "[memory.dram]\nbandwidth_gbs = " << num(ceil.triad_all_gbs.max)
     << "\ncore_bandwidth_gbs = " << num(ceil.triad_core_gbs.max)
     << "\ncapacity_gb = " << num(static_cast<double>(topo.total_memory_bytes) / 1e9)
     << "\nsource = " << quoted("triad, best repeat; capacity from hwloc") << "\n\n"
     << "[transport]\nsource = " << quoted(origin) << "\n"
     << "[transport.shared_memory]\nlatency_us = " << num(lat * 1e6)
     << "\nbandwidth_gbs = " << num(bw / 1e9) << "\nsource = "
     << quoted("sync-easgd's exchange among " + std::to_string(p) + " groups over mlp's (" +
               num(t1 * 1e6) + " us) and LeNet's (" + num(t2 * 1e6) +
               " us) arenas, fitted to latency x (2 levels + 1) + (20 (P-1) + 16 P + 12) n / P "
               "bytes / "
               "bandwidth")
     << "\n";
  for (const NetFigures& f : nets) {
    os << "\n[[net]]\nname = " << quoted(f.name) << "\nbatch = " << f.batch
       << "\nstep_seconds = " << num(f.step) << "\nupdate_seconds = " << num(f.update)
       << "\nsource = "
       << quoted(
              "one group of one thread alone: forward, loss, backward, momentum update; "
              "median of the repeats");
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
  const std::vector<Locality> locs = localities(topo);
  os << "\n[[mode]]\nname = \"this\"\nlocalities = " << locs.size()
     << "\nhbw_gb = " << num(static_cast<double>(locs[0].hbw_bytes) / 1e9)
     << "\ndram_gb = " << num(static_cast<double>(locs[0].dram_bytes) / 1e9)
     << "\nsource = \"engine/topology.cpp's localities of this machine (hwloc)\"\n";
  // What is written must read back.
  if (auto back = model::parse_machine(os.str(), out_path); !back.ok())
    return internal_error("calibration does not parse back: " + back.status().message());
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path parent = fs::path(out_path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (!cli::write_atomic(out_path, os.str())) return io_error("--out: cannot write " + out_path);
  std::printf("machine description written to %s\n", out_path.c_str());
  return Status::ok_status();
}

}  // namespace easel::bench
