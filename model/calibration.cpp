// The calibration's fits and the writer of the machine description (calibration.hpp).
#include "model/calibration.hpp"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "nets/graph.hpp"

namespace easel::model {

namespace {

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

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Every timed layer pass of `f` as the fit's samples.
void add_layer_samples(const NetFigures& f, const std::vector<LayerWork>& work,
                       std::vector<LayerSample>& samples) {
  for (const LayerFigures& t : f.layers) {
    const double fwd = t.forward_cpu_seconds, bwd = t.backward_cpu_seconds;
    for (const LayerWork& w : work) {
      if (w.name != t.name) continue;
      samples.push_back({w.cls, false, w.forward.flops(f.batch), w.forward.bytes(f.batch), fwd,
                         w.forward.bytes_per_batch, w.forward.pixels(f.batch)});
      samples.push_back({w.cls, true, w.backward.flops(f.batch), w.backward.bytes(f.batch), bwd,
                         w.backward.bytes_per_batch, w.backward.pixels(f.batch)});
    }
  }
}

}  // namespace

double fit_oversubscription(const std::vector<double>& with_a_core,
                            const std::vector<double>& sharing) {
  if (with_a_core.empty() || sharing.empty()) return 0;
  return std::max(0.0, median(sharing) / median(with_a_core) - 1);
}

Transport fit_shared_memory(double round_trip_seconds, const std::vector<NetFigures>& nets) {
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
  return {true, std::max(round_trip_seconds / 2, 1e-8) * 1e6, median_gbs};
}

Transport fit_mpi(const MpiFigures& mpi) {
  const double small = mpi.small_seconds, large = mpi.large_seconds;
  const double bytes = 4.0 * (kMpiLargeFloats - kMpiSmallFloats);
  const double bw = large > small ? bytes / (large - small) : bytes / std::max(large, 1e-9);
  return {true, std::max(small - 4.0 * kMpiSmallFloats / bw, 1e-7) * 1e6, bw / 1e9};
}

Result<Scaling> fit_scaling(std::vector<NetFigures>& nets, const HostFigures& host) {
  const int c = host.cores;
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
                         (host.fma_core_gflops * 1e9));
    if (c > 1 && f.step_threads > 0) {
      const double speedup = f.step / f.step_threads;
      serial.push_back(std::clamp((c / speedup - 1) / (c - 1), 0.0, 1.0));
    }
    // The sync layouts' split: the share of their compute spent waiting (written as a comment
    // only).
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

double timed_layer_seconds(const NetFigures& f) {
  double layers = 0;
  for (const LayerFigures& t : f.layers)
    layers += t.forward_cpu_seconds + t.backward_cpu_seconds;
  return layers;
}

Result<StepRates> fit_step(const std::vector<NetFigures>& nets,
                           const std::vector<NetFigures>& layer_probes, double peak_gflops,
                           int vector_floats) {
  std::vector<LayerSample> samples;
  std::vector<double> update_gbs, other;
  for (const NetFigures& f : layer_probes) {
    EASEL_ASSIGN_OR_RETURN(std::vector<LayerWork> work, layer_work(f.spec, vector_floats));
    add_layer_samples(f, work, samples);
  }
  for (const NetFigures& f : nets) {
    EASEL_ASSIGN_OR_RETURN(std::vector<LayerWork> work, layer_work(f.spec, vector_floats));
    add_layer_samples(f, work, samples);
    if (f.update > 0)
      update_gbs.push_back(20.0 * static_cast<double>(f.arena_floats) / f.update / 1e9);
    // The rest: the whole training step timed in the same loop as its layers (so that the
    // machine's load moves both alike) less its layers and update: the loss, what no layer
    // times.
    other.push_back(std::max(0.0, f.step_layers - timed_layer_seconds(f) - f.update) /
                    static_cast<double>(f.batch));
  }
  StepRates r;
  r.rates = fit_layer_rates(samples, peak_gflops);
  r.update_gbs = std::max(median(update_gbs), 1e-3);
  r.other_per_image = median(other);
  return r;
}

namespace {

// Passes timed by size, one [[table]] each: bytes, seconds and cold_seconds (groups 1).
void write_sized(std::ostream& os, const std::string& table, const std::string& comment,
                 const std::vector<ExchangePoint>& points) {
  for (const ExchangePoint& x : points)
    os << "[[" << table << "]]  # " << comment << "\nbytes = " << num(x.bytes)
       << "\nseconds = " << num(x.seconds) << "\ncold_seconds = " << num(x.cold_seconds) << "\n";
}

// The header and [machine]: which machine, when, and where its core count came from.
void write_machine(std::ostream& os, const HostFigures& host) {
  os << "# This machine, as `easel bench --calibrate` measured it (" << host.when << ").\n"
     << "# Every figure below was measured by that command on this machine; docs/MODEL.md says\n"
     << "# how each one is used. Re-run it after a hardware or build change.\n\n"
     << "[machine]\nname = " << quoted("this machine: " + host.cpu_name) << "\nkind = \"cpu\"\n"
     << "cores = " << host.cores << "\nsource = " << quoted(host.origin + "; hwloc's core count")
     << "\n\n";
}

// [compute]: the FMA peak and the scaling figures fitted to the nets' steps and layouts.
void write_compute(std::ostream& os, const HostFigures& host, const Scaling& sc) {
  os << "[compute]\n"
     << "peak_gflops = " << num(host.fma_core_gflops) << "  # one core's FP32 FMA loop ("
     << host.isa << ")\n"
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
     << "vector_floats = " << host.vector_floats
     << "  # floats in a vector of oneDNN's ISA: layers' channels count in whole vectors\n"
     << "oversubscribed_wait = 0.0  # groups sharing a core wait while another of them runs: "
        "that time is in N / C (their split showed "
     << num(sc.wait) << " of the compute waiting)\n"
     << "source = " << quoted(host.origin + "; FMA loop, steps and layouts of easel bench")
     << "\n\n";
}

// [memory] and [memory.dram]: the caches and the triad's bandwidths, and the capacity.
void write_memory(std::ostream& os, const HostFigures& host) {
  os << "[memory]\ncache_mb = " << num(host.cache_bytes / 1e6)
     << "  # hwloc's last-level caches, summed (a VM may report its host's)\n"
     << "source = "
     << quoted(host.origin + "; STREAM-style triad, " + std::to_string(host.triad_mib) +
               " MiB arrays")
     << "\n"
     << "[memory.dram]\nbandwidth_gbs = " << num(host.triad_all_gbs)
     << "\ncore_bandwidth_gbs = " << num(host.triad_core_gbs)
     << "\ncapacity_gb = " << num(host.memory_bytes / 1e9)
     << "\nsource = " << quoted("triad, best repeat; capacity from hwloc") << "\n\n";
}

// [transport]: shared memory's latency, bandwidth and timed exchanges, and the MPI ping-pong's
// fit when the calibration ran under mpirun.
void write_transport(std::ostream& os, const Calibration& c) {
  const ExchangeFigures& ex = c.exchange;
  os << "[transport]\nsource = " << quoted(c.host.origin) << "\n"
     << "[transport.shared_memory]\nlatency_us = " << num(c.shared_memory.latency_us)
     << "\nbandwidth_gbs = " << num(c.shared_memory.bandwidth_gbs) << "\nsource = "
     << quoted("latency: half the fastest round trip between two threads (" +
               num(ex.round_trip_seconds * 1e6) +
               " us); bandwidth: one thread's momentum update over each net's arena (20 bytes "
               "per float, thread CPU time, median over the nets)")
     << "\n";
  for (const ExchangePoint& x : ex.points)
    os << "[[transport.shared_memory.exchange]]  # sync-easgd's exchange, a group's CPU seconds\n"
       << "groups = " << x.groups << "\nbytes = " << num(x.bytes)
       << "\nseconds = " << num(x.seconds) << "\n";
  for (const ExchangePoint& x : ex.comm_points)
    os << "[[transport.shared_memory.comm_exchange]]  # sync-easgd's exchange on the Comm path "
          "(nets with running statistics), a group's CPU seconds less its elastic step\n"
       << "groups = " << x.groups << "\nbytes = " << num(x.bytes)
       << "\nseconds = " << num(x.seconds) << "\ncold_seconds = " << num(x.cold_seconds)
       << "\nslowest_seconds = " << num(x.slowest_seconds)
       << "\nslowest_cold_seconds = " << num(x.slowest_cold_seconds) << "\n";
  write_sized(os, "transport.shared_memory.centre_exchange",
              "async-easgd's locked exchange, the group's CPU seconds", ex.centre_points);
  const MpiFigures& mpi = c.mpi;
  if (mpi.ranks > 1)
    os << "[transport.mpi]\nlatency_us = " << num(c.mpi_transport.latency_us)
       << "\nbandwidth_gbs = " << num(c.mpi_transport.bandwidth_gbs) << "\nsource = "
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
    for (const LayerFigures& l : f.layers)
      os << "[[net.layer]]\nname = " << quoted(l.name) << "\nkind = " << quoted(l.kind)
         << "\nforward_seconds = " << num(l.forward_seconds)
         << "\nbackward_seconds = " << num(l.backward_seconds) << "\n";
  }
}

// [step]: the fitted step model (update, rest, by-size passes and each layer class's rates).
void write_step(std::ostream& os, const Calibration& c) {
  const std::vector<NetFigures>& nets = c.nets;
  const StepRates& step = c.step;
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
     << quoted(c.host.origin + "; each layer of " + fitted + " timed inside whole steps at batch " +
               std::to_string(nets.front().batch) +
               ", per class and pass seconds = flops / gflops + bytes / gbs + pixels / gpixels, "
               "the GEMM classes' "
               "weights at weight_gbs and flops at most at the FMA peak (least squares on the "
               "relative error); medians over the nets")
     << "\n";
  write_sized(os, "step.update", "the momentum update by arena size, one thread's CPU seconds",
              c.exchange.update_points);
  write_sized(os, "step.elastic_update",
              "sync-easgd's elastic momentum step (the Comm path), one thread's CPU seconds",
              c.exchange.elastic_points);
  for (const LayerRate& r : step.rates)
    os << "[[step.rate]]\nclass = " << quoted(r.cls)
       << "\npass = " << (r.backward ? "\"backward\"" : "\"forward\"")
       << "\ngflops = " << num(r.gflops) << "\ngbs = " << num(r.gbs)
       << (r.weight_gbs ? "\nweight_gbs = " + num(*r.weight_gbs) : "")
       << (r.gpixels > 0 ? "\ngpixels = " + num(r.gpixels) : "") << "\nsamples = " << r.samples
       << "\n";
}

// The one [[mode]]: this machine's localities as hwloc shows them.
void write_mode(std::ostream& os, const HostFigures& host) {
  os << "\n[[mode]]\nname = \"this\"\nlocalities = " << host.localities
     << "\nhbw_gb = " << num(host.hbw_bytes / 1e9) << "\ndram_gb = " << num(host.dram_bytes / 1e9)
     << "\nsource = \"engine/topology.cpp's localities of this machine (hwloc)\"\n";
}

}  // namespace

Result<std::string> describe_machine(const Calibration& c, const std::string& origin) {
  std::ostringstream os;
  write_machine(os, c.host);
  write_compute(os, c.host, c.scaling);
  write_memory(os, c.host);
  write_transport(os, c);
  write_nets(os, c.nets);
  write_step(os, c);
  write_mode(os, c.host);
  // What is written must read back.
  if (auto back = parse_machine(os.str(), origin); !back.ok())
    return internal_error("calibration does not parse back: " + back.status().message());
  return os.str();
}

}  // namespace easel::model
