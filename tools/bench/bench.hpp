// The measuring parts of `easel bench` (each section in its own file) and what they return.
// Every timed region runs on pinned WorkerThreads (engine/worker.hpp); sections that run on
// several workers start them together and time the span from the first start to the last end.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algos/algorithm.hpp"
#include "engine/topology.hpp"
#include "engine/worker.hpp"
#include "nets/net.hpp"
#include "tools/bench/bench_model.hpp"

namespace easel::bench {

// Monotonic seconds.
double seconds_now();
// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), seconds: what a timing is without the
// moments the thread waited for a core (a loaded machine).
double thread_cpu_seconds();

// Starts fn(i) on workers[i] for every i at (nearly) the same moment: each worker spins until
// all have arrived, then runs its part. Returns the seconds from the earliest start to the
// latest end, and each worker's own seconds in *each (when given).
double run_together(const std::vector<std::unique_ptr<WorkerThread>>& workers,
                    const std::function<void(int)>& fn, std::vector<double>* each = nullptr);

// One worker per core (the core's first PU), pinned.
Result<std::vector<std::unique_ptr<WorkerThread>>> one_worker_per_core(const Topology& topo);

// ---- ceilings (ceilings.cpp) ----
struct Ceilings {
  std::string isa;  // "avx512f", "avx2+fma", "scalar"
  int accumulators = 0, lanes = 0, cores = 0;
  Summary fma_core_gflops, fma_all_gflops;  // over repeats
  int64_t triad_floats = 0;                 // per array
  Summary triad_core_gbs, triad_all_gbs;    // GB/s = 1e9 bytes/s, over repeats
  bool triad_in_child = false;  // measured in a child process (keeps its arrays out of our RSS)
};
// The STREAM triad runs in a forked child (its arrays do not count in this process's peak
// RSS), so call this before anything starts an OpenMP team or a thread in this process.
Result<Ceilings> measure_ceilings(const Topology& topo, const BenchConfig& cfg);

// ---- training steps (steps.cpp) ----
struct StepResult {
  std::string net;
  int64_t batch = 0;
  GroupLayout layout;
  std::vector<std::vector<int>> cpus;  // per group
  int64_t steps_per_repeat = 0;
  double flops_per_image = 0;
  std::vector<Summary> group_ips;  // images/s of each group, over repeats
  Summary aggregate_ips;           // all groups' images / (first start .. last end)
  Summary step_ms;                 // group 0's step time
  long rss_kib = 0;                // peak RSS of this process after the run
  std::string impls;               // "conv1=...,..." of group 0's net
  // The algorithm's own accounting (Group::times) summed over the groups, warm-up included:
  // compute, exchange and waiting seconds (easel bench --calibrate's split under sharing).
  double compute_seconds = 0, comm_seconds = 0, wait_seconds = 0;
  // A group's thread CPU time per step (per repeat the median over the groups): the step as it
  // runs among the others without the time a thread waited for a core.
  Summary cpu_step_ms;
};
Result<StepResult> time_steps(const Topology& topo, const BenchConfig& cfg, const NetSpec& spec,
                              int64_t batch, GroupLayout layout);

// Contention as a primitive (docs/MODEL.md): a net's step (its training step and the momentum
// update) on `groups` pinned one-thread groups that share nothing (no exchange, no barrier),
// against the same step on group 0 alone while the others idle. `rounds` interleaved rounds of
// alone then together, each about cfg.min_time of a thread's CPU; a round's ratio is the
// together step (thread CPU time, median over the groups) over the alone one. Each round's
// ratio, in order.
Result<std::vector<double>> time_corun(const Topology& topo, const BenchConfig& cfg,
                                       const NetSpec& spec, int64_t batch, int groups, int rounds);

// ---- layer view (steps.cpp) ----
struct LayerTime {
  LayerInfo info;
  Summary forward_ms, backward_ms;
  Summary forward_cpu_ms, backward_cpu_ms;  // the thread's CPU time (thread_cpu_seconds)
};
struct LayerView {
  std::string net;
  int64_t batch = 0;
  std::vector<LayerTime> layers;
  Summary step_ms;                     // Net::train_step (forward, loss, backward)
  Summary update_ms;                   // momentum_step over the arena
  Summary step_cpu_ms, update_cpu_ms;  // the two in the thread's CPU time
  double other_ms = 0;  // median step - sum of median layer times (loss, pointer set-up)
  double flops_per_image = 0;
};
// One group on the first core, timing each layer inside whole steps.
Result<LayerView> time_layers(const Topology& topo, const BenchConfig& cfg, const NetSpec& spec,
                              int64_t batch);

// ---- exchange (exchange.cpp) ----
struct ExchangeTime {
  Traffic traffic;
  Summary us;        // microseconds per call
  double bytes = 0;  // per call, from the byte-count model
  double gbs = 0;    // bytes / median time
};
struct ExchangeResult {
  int groups = 0;
  std::vector<std::vector<int>> cpus;
  int64_t arena_floats = 0;
  int64_t calls_per_repeat = 0;
  std::vector<ExchangeTime> ops;
  Summary arena_triad_gbs;  // triad with three arena-sized arrays per group, all groups at once
};
// Exchanges among `groups` groups of one thread each over the arena of `spec` (LeNet).
Result<ExchangeResult> time_exchange(const Topology& topo, const BenchConfig& cfg,
                                     const NetSpec& spec, int groups);

// A pass timed two ways: warm (repeated over the same buffers, which stay in the last-level
// cache where they fit) and cold (each call after a pass over `evict_bytes` of other memory, as
// in the trainer after a step whose activations and other arenas passed through the cache).
struct PassTime {
  double seconds = 0;       // warm: the fastest repeat
  double cold_seconds = 0;  // cold: the median of the calls; 0 when evict_bytes is 0
  // The Comm path's slowest group (the root, which sums and updates the centre), warm and
  // cold: what the other groups wait for at its barriers.
  double slowest_seconds = 0, slowest_cold_seconds = 0;
};

// Sync EASGD's exchange as the trainer runs it (mirrored for two groups, partitioned for more)
// among `groups` groups of one thread (oversubscribed when there are fewer cores) over an arena
// of `floats` floats: a group's thread CPU seconds per exchange, the median over the groups of
// each one's fastest repeat. `comm_path`: the trainer's Comm path instead (a net with running
// statistics takes it): of a group's CPU time only its comm's share (as its wall time splits
// between the comm and compute timers: the elastic step is compute), the mean over the groups
// (the root alone updates the centre). Cold timings with `evict_bytes` > 0 (the Comm path's).
Result<PassTime> time_sync_exchange_cpu(const Topology& topo, const BenchConfig& cfg, int groups,
                                        int64_t floats, bool comm_path = false,
                                        int64_t evict_bytes = 0);

// One group's element-wise pass over an arena of `floats` floats on the first core: the
// thread's CPU seconds per call.
enum class GroupPass {
  centre_exchange,  // async-easgd's locked exchange (easgd_exchange: its SGD step fused)
  momentum_update,  // the momentum update of a step (w, g, v)
  elastic_update,   // sync-easgd's elastic momentum step on the Comm path (w, g, v, centre)
};
Result<PassTime> time_group_pass_cpu(const Topology& topo, const BenchConfig& cfg, int64_t floats,
                                     GroupPass pass, int64_t evict_bytes = 0);

// Completes `run`, whose groups are built (worker, device, arenas, fake gradient), as the trainer
// would for `algo` in one process: the layout (which must outlive the run), the parameters, a
// tree shared-memory Comm among its groups spinning for `spin` seconds, the centre (when algo
// uses one) as a copy of group 0's weights on group 0's thread, then algo.prepare(run).
Status prepare_bench_run(Run& run, Algorithm& algo, const ArenaLayout& layout,
                         const AlgoParams& params, double spin);

// Peak resident set of this process so far, KiB (getrusage ru_maxrss).
long peak_rss_kib();

}  // namespace easel::bench
