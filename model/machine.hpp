// A machine description for the performance model (model/model.hpp): what one node can do,
// read from a TOML file. `easel bench --calibrate --out FILE` writes this machine's (measured
// per-net step costs, memory and exchange figures); tools/machines/ holds described ones (a Xeon
// Phi 7250 node, 8 GPUs on PCIe, 8 GPUs on NVLink) from published figures. Every table carries
// a `source` saying where its figures come from; docs/MODEL.md describes the format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/status.hpp"
#include "model/layer_rates.hpp"

namespace easel::model {

// A memory kind's bandwidth (all cores or one device streaming at once; STREAM's count) and
// capacity.
struct MemoryFigure {
  bool present = false;
  double bandwidth_gbs = 0;       // GB/s (1e9 bytes), the whole machine (or one device)
  double core_bandwidth_gbs = 0;  // one core alone; 0: bandwidth_gbs / cores
  double capacity_gb = 0;         // GB (1e9 bytes): the machine's (or one device's)
};

// An exchange transport: a message of B bytes costs latency + B / bandwidth.
struct Transport {
  bool present = false;
  double latency_us = 0;
  double bandwidth_gbs = 0;
  double seconds(double bytes) const { return latency_us * 1e-6 + bytes / (bandwidth_gbs * 1e9); }
};

// A net's training step measured on this machine (easel bench): one group of one thread alone,
// forward + loss + backward + momentum update, at `batch`; and under the group layouts
// calibrated (G groups of one thread all stepping at once, each step ending in sync-easgd's
// exchange, whose modelled cost is taken out).
struct NetCalibration {
  std::string net;
  int64_t batch = 64;
  double step_seconds = 0;    // whole step, one group alone
  double update_seconds = 0;  // the momentum update's part of it
  // This net's compute.oversubscription_overhead, from its own 2C (and 4C) layouts (the cost of
  // sharing a core depends on how much of the cache a step refills); -1: the machine's.
  double oversubscription_overhead = -1;
  struct Layer {
    std::string name, kind;
    double forward_seconds = 0, backward_seconds = 0;
  };
  std::vector<Layer> layers;
};

// A way the machine can be split into localities (a KNL's quadrant, SNC-2 or SNC-4 mode): each
// locality has cores / localities cores and hbw_gb of high-bandwidth memory of its own.
struct LocalityMode {
  std::string name;
  int localities = 1;
  double hbw_gb = 0;  // per locality; 0 when the mode has no high-bandwidth node (cache mode)
  double dram_gb = 0;
};

// One timing of sync-easgd's shared-memory exchange as the trainer runs it (mirrored for two
// groups, partitioned for more): among `groups` groups of one thread, over an arena of `bytes`,
// one group's thread CPU seconds per exchange ([[transport.shared_memory.exchange]], written by
// easel bench --calibrate).
struct ExchangePoint {
  int groups = 2;
  double bytes = 0, seconds = 0;
  // The same after the last-level cache was evicted (the trainer's case when a step's buffers
  // exceed the cache: the model's passes_cold); 0: not timed, `seconds` serves.
  double cold_seconds = 0;
  // The Comm path's slowest group (the root), warm and cold; 0: not timed.
  double slowest_seconds = 0, slowest_cold_seconds = 0;
};

struct Machine {
  std::string file;  // where it was read from
  std::string name;
  bool gpu = false;  // groups are devices (one per GPU), not sets of cores
  int cores = 1;     // physical cores (CPU machine) or host cores (GPU machine)
  int devices = 0;   // GPUs (GPU machine)

  // Compute: FP32 FMA peak of one core (CPU) or one device (GPU), the fraction of it the
  // layers reach, and how a group's step scales with its threads (Amdahl: T / (1 + s (T-1))).
  double peak_gflops = 0;
  double efficiency = 0.5;
  // The same peak at the reduced precisions (tensor cores, AMX, AVX512_BF16), 0 where the
  // machine has none: [compute] tf32_gflops, bf16_gflops. The model's step at --precision p
  // divides its flops by p's rate (compute_rate()).
  double tf32_gflops = 0, bf16_gflops = 0;
  // peak_gflops, tf32_gflops or bf16_gflops by name ("fp32", "tf32", "bf16"); 0: none.
  double compute_rate(const std::string& precision) const {
    return precision == "tf32" ? tf32_gflops : precision == "bf16" ? bf16_gflops : peak_gflops;
  }
  double serial_fraction = 0;
  // Several groups at once: the slowdown of one group's step when every core runs a group
  // (memory and cache contention; 1 = none), and the extra cost of sharing a core among several
  // threads: a step's extra CPU time when groups share the cores (the caches refilled after each
  // switch; the same for any N / C > 1, as the OS switches a group out at every barrier or lock
  // and every time slice whatever their number; 0 = none).
  double contention = 1;
  double oversubscription_overhead = 0;
  // Sync algorithms: the waiting at the exchange's barrier, as a fraction of the compute, when
  // groups share cores (time slices end at different moments).
  double oversubscribed_wait = 0;
  // The floats of one vector of the kernels' ISA (compute.vector_floats, written by the
  // calibration: 16 for AVX-512, 8 for AVX2): a layer's work counts its channels rounded up to
  // whole vectors (layer_work). 1: not described (no rounding, as a calibration before it).
  int vector_floats = 1;

  MemoryFigure dram, hbw, device;
  // The last-level cache of the whole machine (MB, 1e6 bytes; memory.cache_mb): an exchange
  // whose arenas fit it is not bounded by the memory's bandwidth. 0: not described.
  double cache_mb = 0;
  Transport shared_memory, mpi, nccl, host_device;
  // The shared-memory exchange timed by size (model.hpp's shm_exchange_by_size prices from it);
  // empty: priced from shared_memory's latency and bandwidth.
  std::vector<ExchangePoint> shm_exchange;
  // sync-easgd's exchange on the trainer's Comm path, the one a net with running statistics
  // takes (batch norm: the fast exchanges would read them while a step writes them): a group's
  // CPU seconds for what the trainer times as comm (the reduce and the centre's update; the
  // elastic step is its compute) ([[transport.shared_memory.comm_exchange]]); empty: the
  // fast exchange's timings price every net.
  std::vector<ExchangePoint> shm_comm_exchange;
  // One group's locked exchange with the centre (async-easgd's easgd_exchange) timed by size
  // ([[transport.shared_memory.centre_exchange]], groups 1); empty: priced from shared_memory.
  std::vector<ExchangePoint> shm_centre_exchange;
  // A group's momentum update ([[step.update]], also in step.update_by_size) and sync-easgd's
  // elastic momentum step on the Comm path ([[step.elastic_update]]) timed by size (groups 1).
  std::vector<ExchangePoint> update_passes, elastic_passes;
  std::vector<NetCalibration> nets;
  // [step]: one group's step of any net from its layers (layer_rates.hpp): each layer class's
  // fitted rates ([[step.rate]]), the momentum update's bandwidth and the rest per image. Empty
  // rates: no [step] (a described machine; calibrated nets' steps or FLOPs are used).
  StepRates step;
  std::vector<LocalityMode> modes;

  const NetCalibration* calibration(const std::string& net) const;  // nullptr when none
};

// Reads and checks a machine description. Errors are one line naming the file and the key
// (and the line), e.g. "tools/machines/x.toml: compute.peak_gflops: must be a positive number".
Result<Machine> load_machine(const std::string& path);
// Parses a description's text; `origin` names it in errors.
Result<Machine> parse_machine(const std::string& text, const std::string& origin);

// `--machine FILE|this|NAME`: `this` is the calibration `easel bench --calibrate` wrote
// (EASEL_MACHINE, else ~/.config/easel/machine.toml; the error says how to write it); a bare
// name (knl-7250) is looked up in the installed machines (tools/machines, EASEL_SOURCE_ROOT or
// the install's share/easel/machines).
Result<std::string> resolve_machine_path(const std::string& spec);
// Where `easel bench --calibrate` writes when --out is not given.
std::string default_calibration_path();

}  // namespace easel::model
