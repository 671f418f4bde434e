// The calibration's model side (docs/MODEL.md): from the figures `easel bench --calibrate`
// measured on this machine (the plain structs below, which tools/bench/calibrate.cpp fills) to
// the model's rates (the fit_* functions) and to the machine description's TOML
// (describe_machine), which parse_machine (machine.hpp) reads back. Nothing here touches the
// machine or a clock, so a test can feed it figures and read what it writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/status.hpp"
#include "model/layer_rates.hpp"
#include "model/machine.hpp"
#include "nets/net.hpp"

namespace easel::model {

// One timed layer of a net: the median over the repeats of each pass, in wall time (written
// to [[net.layer]]) and in the thread's CPU time (what the rates are fitted to).
struct LayerFigures {
  std::string name, kind;
  double forward_seconds = 0, backward_seconds = 0;
  double forward_cpu_seconds = 0, backward_cpu_seconds = 0;
};

// One net's figures: a probe's, a layer probe's or a --nets net's.
struct NetFigures {
  std::string name;
  NetSpec spec;
  int64_t batch = 64;
  int64_t arena_floats = 0;  // set by fit_scaling
  double step = 0, update = 0, step_threads = 0, flops_per_image = 0;
  std::vector<LayerFigures> layers;
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

// What the machine is: hwloc's view, the FMA loop's peak and the triad's bandwidths, and where
// and when the calibration ran.
struct HostFigures {
  std::string cpu_name;  // /proc/cpuinfo's model name
  std::string when;      // the description's time, UTC (ISO 8601)
  std::string origin;    // "easel bench --calibrate on HOST, WHEN, load average A B C"
  int cores = 1;
  double cache_bytes = 0;   // the last-level caches, summed
  double memory_bytes = 0;  // the whole machine's
  // The localities (engine/topology.hpp's) and the first one's memory of each kind.
  int localities = 1;
  double hbw_bytes = 0, dram_bytes = 0;
  std::string isa;             // the FMA loop's ("avx512f", "avx2+fma", "scalar")
  double fma_core_gflops = 0;  // one core's FP32 FMA loop, the best repeat
  double triad_core_gbs = 0;   // the triad on one core, the best repeat
  double triad_all_gbs = 0;    // on every core at once
  int64_t triad_mib = 256;     // each triad array's size
  int vector_floats = 1;       // floats in a vector of oneDNN's ISA
};

// The shared-memory exchange's primitives and the passes timed by arena size.
struct ExchangeFigures {
  // The fastest round trip between two threads through one cache line (seconds).
  double round_trip_seconds = 0;
  // Sync EASGD's exchange as the trainer runs it, timed by arena size (a group's CPU seconds).
  std::vector<ExchangePoint> points;
  // The same on the trainer's Comm path (nets with running statistics): its comm part only.
  std::vector<ExchangePoint> comm_points;
  // async-easgd's locked exchange with the centre, timed by arena size (the group's CPU seconds).
  std::vector<ExchangePoint> centre_points;
  // The momentum update and the elastic momentum step by arena size (groups 1, the thread's
  // CPU seconds, warm and cold): [[step.update]], [[step.elastic_update]].
  std::vector<ExchangePoint> update_points, elastic_points;
};

// MPI between ranks 0 and 1 (under mpirun with 2 or more ranks): half the fastest round trip
// of a message of kMpiSmallFloats and of kMpiLargeFloats floats.
constexpr int64_t kMpiSmallFloats = 1, kMpiLargeFloats = 1 << 20;  // 4 B and 4 MiB
struct MpiFigures {
  int ranks = 0;  // 0: not measured (no MPI, or one rank)
  double small_seconds = 0, large_seconds = 0;
};

// How the compute scales (docs/MODEL.md): Amdahl's serial fraction from one group on every
// core's thread; contention from C independent copies of the step at once, oversubscription's
// overhead from 2C copies on the C cores against C (the co-run primitive); the barrier's wait
// (written as a comment only) from the 2C (and 4C) sync layouts.
struct Scaling {
  double efficiency = 0, serial = 0, contention = 1, overhead = 0, wait = 0;
};

// Everything measured and fitted: what describe_machine writes.
struct Calibration {
  HostFigures host;
  // The measured nets in the order written: the probes, the --nets nets, the layer probes.
  std::vector<NetFigures> nets;
  ExchangeFigures exchange;
  MpiFigures mpi;
  Scaling scaling;
  Transport shared_memory;  // fit_shared_memory's
  Transport mpi_transport;  // fit_mpi's (present only when mpi.ranks > 1)
  StepRates step;           // fit_step's
};

// Oversubscription's overhead from the co-run primitive: `sharing` is its rounds with 2C copies
// on C cores (two threads time-sliced on each), `with_a_core` its rounds with C copies (the
// contention); both are each copy's thread CPU time per step over the step alone, so the time
// slicing itself is not in them, only what a switch costs the step (the caches refilled).
// Returns median(sharing) / median(with_a_core) - 1, at least 0; 0 when either is empty.
double fit_oversubscription(const std::vector<double>& with_a_core,
                            const std::vector<double>& sharing);

// The shared-memory transport: the latency of one message is half the fastest round trip (at
// least 0.01 us), the bandwidth one thread's element-wise passes, the momentum update's (20
// bytes per arena float over `update` seconds; the median over the nets that timed one; 1 GB/s
// when none did).
Transport fit_shared_memory(double round_trip_seconds, const std::vector<NetFigures>& nets);

// The MPI transport from the ping-pong: latency + bytes / bandwidth through the two messages
// (at least 0.1 us of latency). Requires mpi.ranks > 1.
Transport fit_mpi(const MpiFigures& mpi);

// Scaling from the nets' 1x1, 1xC, co-run and Gx1 figures against `host`'s FMA peak and cores;
// sets each net's arena_floats (from its spec) and, for nets with 2C co-run rounds, its own
// overhead. Fails only when a net's spec has no cost (it was built, so never in practice).
Result<Scaling> fit_scaling(std::vector<NetFigures>& nets, const HostFigures& host);

// The seconds of `f`'s timed layers, both passes in the thread's CPU time.
double timed_layer_seconds(const NetFigures& f);

// The layer classes' rates (layer_rates.hpp) from every timed layer of every net (the GEMM
// classes' flop rates at most `peak_gflops`), the momentum update's bandwidth and the step's
// rest per image (the layer view's step less its layers and update), each the median over
// `nets` (not `layer_probes`, whose layers are fitted to only). Requires fit_scaling to have set
// `nets`' arena_floats; `vector_floats` as Machine::vector_floats.
Result<StepRates> fit_step(const std::vector<NetFigures>& nets,
                           const std::vector<NetFigures>& layer_probes, double peak_gflops,
                           int vector_floats);

// The machine description's text (TOML: [machine], [compute], [memory], [transport], one
// [[net]] per net, [step], one [[mode]]), checked to parse back with parse_machine; `origin`
// names it in that error. Requires c.nets non-empty.
Result<std::string> describe_machine(const Calibration& c, const std::string& origin);

}  // namespace easel::model
