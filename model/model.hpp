// The performance model behind `easel model` and `easel plan`: for a net, an algorithm, groups x
// threads, tau and a machine description (machine.hpp), the time of one iteration (every group
// steps once) and its compute / communication / wait split. docs/MODEL.md gives the formulas and
// checks them against runs here and against the paper's figures.
//
//   compute   one group's step: this machine's measured step (easel bench --calibrate), else
//             FLOPs / (peak x efficiency) + bytes / bandwidth of the memory kind the buffers are
//             in; T threads speed it up by T / (1 + s (T - 1)); groups at once slow it by the
//             calibrated contention (or share the memory bandwidth); N threads on C < N cores
//             take N / C as long, plus an overhead per extra thread.
//   exchange  latency x messages + bytes / bandwidth of the transport (shared memory, NCCL, the
//             host link, MPI), in the algorithm's pattern: a tree of ceil(log2 P) levels or P
//             serial exchanges, one message or one per layer, overlapped with the next step or
//             not, every tau steps.
//   wait      the locked centre's queue (async), the round-robin turn (easgd-rr), the barrier
//             of groups that share cores (sync).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algos/list.hpp"
#include "engine/status.hpp"
#include "model/machine.hpp"
#include "nets/graph.hpp"

namespace easel::model {

struct ModelRequest {
  std::string net = "lenet";
  NetCost cost;  // net_cost of the net on its input
  // Its layers' work (layer_rates.hpp): a machine with [step] rates prices the step from them;
  // empty: the calibrated net's measured step, else FLOPs and bytes.
  std::vector<LayerWork> layers;
  int64_t input_floats = 0;  // one image: C x H x W
  int param_layers = 1;      // layers with parameters: the messages of --pack per-layer
  int64_t batch = 64;        // per group
  std::string algo = kDefaultAlgo;
  int groups = 1;
  int threads_per_group = 1;  // CPU machines
  int tau = 1;
  std::string placement = "dram";        // where the groups' buffers are: dram or hbw
  ReduceMode reduce = ReduceMode::tree;  // sync-easgd: tree or serial (P exchanges)
  PackMode pack = PackMode::single;      // single (one message) or per-layer
  bool overlap = false;                  // sync-easgd: exchange overlapped with the next step
  // sync-easgd's --exchange: the path is the trainer's choice (choose_sync_exchange).
  SyncExchange exchange = SyncExchange::automatic;
  bool resident = true;  // GPU: weights stay on the devices (only the batch crosses)
  int ranks = 1;         // MPI ranks, `groups` groups each (sync algorithms)
  // Ranks that share one machine (its cores and memory bandwidth split evenly among them); 1:
  // every rank a machine of its own, as on a cluster.
  int ranks_per_node = 1;
  // The collective across ranks (and among GPUs without NCCL's own): --collective's names; auto
  // is the cost model's choice (engine/comm/collective_cost.hpp).
  CollectiveAlgo collective = CollectiveAlgo::automatic;
  // sync-easgd's centre across ranks: master (reduce + broadcast) or allreduce; auto: allreduce
  // across ranks.
  std::string sync_centre = "auto";
  // The arithmetic of the step: fp32, tf32 or bf16 (the machine's rate for it; the bytes stay
  // f32's, as easel keeps activations and the arena in f32).
  std::string precision = "fp32";
  // local-sgd, slowmo, diloco: what each group sends (--exchange-precision).
  ExchangePrecision exchange_precision = ExchangePrecision::fp32;
};

struct Prediction {
  double seconds_per_iteration = 0;
  double compute_seconds = 0, comm_seconds = 0, wait_seconds = 0;  // per group, per iteration
  double compute_share = 0, comm_share = 0, wait_share = 0;
  double images_per_second = 0;
  // The parts.
  double step_seconds = 0;      // one group's step as it runs among the others
  double exchange_seconds = 0;  // one exchange (every tau steps), before overlap
  // Of exchange_seconds: the groups sharing a core waiting for one another's turns at the
  // exchange's barriers (the trainer counts it as wait, not comm); 0 unless oversubscribed.
  double exchange_turns_seconds = 0;
  // Of one exchange: what the other groups wait for the Comm path's root (its reduce and the
  // centre's update) at the barriers, spinning on their cores (groups not sharing cores).
  double exchange_root_wait_seconds = 0;
  double exchange_bytes = 0;        // bytes one exchange moves on its critical path
  int exchange_messages = 0;        // messages on its critical path
  double exchanges_per_step = 0;    // of one group: 1, 1 / tau, or 0 (one group)
  double group_exchange_bytes = 0;  // what one group sends per exchange (its payload)
  std::string transport;            // "shared_memory", "nccl", "host_device", ...
  // sync-easgd's exchange path, the trainer's choice (summary.json's "exchange_path"):
  // partitioned, mirrored or comm; empty for the other algorithms.
  std::string exchange_path;
  std::string compute_source;  // "calibrated" or "described"
  bool oversubscribed = false;
  std::vector<std::string> notes;
  // compute_source "layer rates": each layer's forward and backward seconds alone (one group,
  // one thread), in the net's graph order.
  struct LayerPart {
    std::string name, cls;
    double forward = 0, backward = 0;
  };
  std::vector<LayerPart> layers;
};

// Checks the request against the machine (one line naming the flag) and predicts.
Result<Prediction> predict(const Machine& m, const ModelRequest& req);

// One partition of a machine as `easel plan` ranks them.
struct PlanRow {
  std::string mode;  // the machine's locality mode ("quadrant", "snc4", "this", "gpus")
  int localities = 1;
  int groups = 1, threads = 1;
  int64_t batch = 0;  // per group: the node's batch split evenly
  std::string precision = "fp32";
  Prediction p;
  double seconds = 0;              // to the budget
  double group_bytes = 0;          // one group's weights, gradients, momentum, activations
  double hbw_bytes_per_group = 0;  // the fast memory one group may use (its locality's, shared)
  bool fits_fast = false;          // P replicas fit in the fast memory (MCDRAM/HBM/device)
  std::string fit_note;
};

// Every partition of the machine (for each locality mode: 1, 2, 4, ... groups up to its cores
// or devices, and one per locality, each group inside one locality), each predicted for `base`
// with its groups, threads and base.batch split evenly over the groups (the node's batch per
// iteration, as the paper's KNL partitions split theirs), placement hbw where P replicas fit in
// the fast memory and dram otherwise; ranked by the time of `iterations` iterations.
// base.precision "all": every precision the machine has a rate for, each partition at each.
Result<std::vector<PlanRow>> plan_partitions(const Machine& m, const ModelRequest& base,
                                             int64_t iterations);

// STREAM-counted bytes per arena float of sync-easgd's (sgd: sync-sgd's) whole shared-memory
// exchange among p groups: 20 (p - 1) + 16 p + 12 (sync-sgd: 20 (p - 1) + 20 p; for p = 1,
// sync-easgd's elastic steps 28 and sync-sgd's 0).
double shm_exchange_floats(int p, bool sgd);
// ceil(log2 p): the levels of the exchange's tree.
int shm_exchange_levels(int p);

// That exchange's time among p groups of `threads` threads over an arena of n floats in `msgs`
// messages: latency x msgs x (2 ceil(log2 p) + 1) + max(bytes / p / (T x link bandwidth),
// bytes / mem's bandwidth), where the second term (every byte through memory) is left out when
// the exchange's arenas (each group's weights and send buffer, and the centre: (2p + 1) x 4n
// bytes) fit the machine's last-level cache (memory.cache_mb; 0: not described, never).
// easel bench --calibrate fits the latency and bandwidth to it and prices its layouts with it.
double shm_exchange_seconds(const Machine& m, const MemoryFigure& mem, int p, bool sgd, double n,
                            int msgs, int threads);
// The same exchange from the calibration's timings of it by size (Machine::shm_exchange): the
// points of the timed group count nearest p (the larger on a tie), interpolated linearly in
// log(bytes) -> log(seconds) at the arena's 4n bytes (beyond the ends: proportional to the
// bytes), scaled from that count to p by the per-group bytes (shm_exchange_floats(p) / p), plus
// the latency of each message past the first; one group's seconds (its threads' share). -1 when
// there are no points. `comm_path`: points of the Comm path ([[...comm_exchange]]), scaled by
// shm_comm_path_floats(p) / p instead. `cold`: the points' cold timings where they have them.
double shm_exchange_by_size(const std::vector<ExchangePoint>& points, const Machine& m, int p,
                            bool sgd, double n, int msgs, int threads, bool comm_path = false,
                            bool cold = false);
// The Comm path's comm bytes per arena float among p groups, all groups together: the reduce
// reads the p arenas and writes the sum (4 (p + 1); one group: its copy), the root's centre
// update reads the centre and the sum and writes the centre (12). The root does most of it, so
// one group alone does more comm than each of two.
double shm_comm_path_floats(int p);
// Seconds at `bytes` from points of one group count: interpolated linearly in log(bytes) ->
// log(seconds) between the two timed sizes around it, proportional to the bytes beyond the
// ends. -1 when there are no points. `cold`: each point's cold_seconds where it has one.
double seconds_by_size(std::vector<ExchangePoint> points, double bytes, bool cold = false);
// Whether that exchange's arenas fit m's last-level cache.
bool shm_exchange_cached(const Machine& m, int p, double n);

// Bytes one group holds: weights, gradients and momentum (and the algorithm's extra arenas) plus
// the activations of its batch and their gradients.
double group_bytes(const ModelRequest& req);
// Whether the passes over the arenas (the update, the exchanges) find them out of m's last-level
// cache: the groups' bytes (group_bytes) and the centre exceed half of it (the other half holds
// what else streams through it: the data, the libraries' scratch, on a VM other guests).
bool passes_cold(const Machine& m, const ModelRequest& req);
}  // namespace easel::model
