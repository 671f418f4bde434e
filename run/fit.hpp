// The memory fit, the paper's rule: P replicas of the weights, gradients, momentum and
// activations, plus the data set, must fit in the memory kind they are placed in; beside them
// the kernels' own buffers (measured) and the run's copies of the weights. Counted node
// by node: each group's buffers go to its own locality's DRAM or high-bandwidth node (the
// plan's dram_node / hbw_node), so an SNC-4 KNL's groups are held to their cluster's 4 GiB of
// MCDRAM, not to the chip's 16 GiB. `easel topology` prints it, `easel train` logs its summary
// and refuses a placement that cannot fit before any group's arena is allocated.
// docs/TOPOLOGY.md "Fit" shows it on the described machines.
#pragma once

#include <optional>

#include <cstdint>
#include <string>
#include <vector>

#include "algos/list.hpp"
#include "algos/sync_easgd.hpp"
#include "engine/memory.hpp"
#include "engine/status.hpp"
#include "engine/topology.hpp"
#include "nets/data/dataset.hpp"
#include "nets/graph.hpp"
#include "run/train_config.hpp"

namespace easel {

// The fit's rows: the buffer classes, then what the run holds in the C++ heap beside them (in
// DRAM whatever --placement says): each host group's kernels' own buffers (measured,
// FitRequest::kernel_bytes), and the run's copies of the weights in host memory, two arenas
// (the initial weights while the groups are built; the final and group 0's weights for the
// summary at the end, while every group still holds its buffers), and, when the run writes
// checkpoints, one checkpoint's snapshot (the centre, each group's weights and momentum; the
// trainer waits for a write before its next snapshot; across ranks rank 0 gathers every rank's
// groups, each rank's encoded beside them).
constexpr int kFitKernels = kBufferClassCount, kFitCopies = kBufferClassCount + 1,
              kFitCheckpoint = kBufferClassCount + 2, kFitRows = kBufferClassCount + 3;
// "weights", ..., "kernels", "copies", "checkpoint".
const char* fit_row_name(int row);

// What the fit is computed from; fit_request() fills it from a run's settings.
struct FitRequest {
  NetCost cost;              // the net on the data's input
  int64_t input_floats = 0;  // one image: C * H * W
  int64_t batch = 64;        // per group
  std::string algo = kDefaultAlgo;
  bool prefetch = true;  // the batch stream keeps more batches ready
  // sync-easgd's shared-memory exchanges (one process on the CPU, --reduce tree, --pack single,
  // --collective tree, --overlap off): they keep more arenas (fit.cpp says which).
  bool sync_fast = true;
  bool overlap = false;   // sync-easgd --overlap on: a snapshot of every group's weights
  bool adamw = false;     // --optimizer adamw: a second moment per group
  bool feedback = false;  // --exchange-precision int8: a residual per group
  bool gpu = false;       // GPU groups: their buffers live on the devices, not counted
  Placement placement;
  uint64_t dataset_bytes = 0;  // training and test images as held in memory
  // Per host group: what its net's kernels allocate for themselves (run/fit_probe.hpp). 0: not
  // measured.
  uint64_t kernel_bytes = 0;
  bool checkpoints = false;  // the run writes checkpoints (kFitCheckpoint)
  int ranks = 1;             // MPI ranks, each with the plan's groups
  bool root = true;          // this is rank 0, which gathers every rank's groups
};

// One buffer class over the run.
struct FitClass {
  MemKind kind = MemKind::dram;  // as placed
  int arenas = 0;                // arenas (or sets of activations) per group: weights 2 with
                                 // sync-easgd's partitioned exchange; 0 for the centre and data set
  uint64_t per_group = 0;        // the largest one group holds
  uint64_t total = 0;            // all groups and the run's own (the centre, the data set)
  uint64_t spilled = 0;          // hbw-preferred bytes that go to DRAM because the node is full
};

// One NUMA node: what lands there.
struct FitNode {
  int os_index = 0;
  NodeKind kind = NodeKind::dram;
  uint64_t capacity = 0;
  uint64_t need = 0;              // all bytes placed here, after spills
  uint64_t bytes[kFitRows] = {};  // by row (class, kernels, copies)
  uint64_t bound = 0;             // hbw bytes that may not go elsewhere
  std::vector<int> groups;        // groups whose own buffers land here
  bool fits() const { return need <= capacity; }
};

struct Fit {
  int groups = 0;
  FitClass classes[kFitRows];  // by row: each class, then the kernels' and the copies
  std::vector<FitNode> nodes;  // every node of the machine, in hwloc's order
  uint64_t need = 0;           // all of it
  uint64_t machine_bytes = 0;  // the machine's memory
  // Not ok when it cannot fit: an hbw node whose bound bytes exceed its capacity, or more than
  // the machine's memory. One line naming the classes, the node, the need and the capacity.
  Status refusal;
  std::vector<std::string> spills;  // per hbw node: the hbw-preferred classes that go to DRAM
  std::vector<std::string> notes;   // DRAM nodes over their capacity (the kernel spills), GPUs

  const FitClass& operator[](BufferClass c) const { return classes[static_cast<int>(c)]; }
  const FitNode* node(int os_index) const;  // nullptr when there is none
  // The table `easel topology` prints: one group and all groups per class, then every node
  // with what it holds and its capacity, then the refusal, spills and notes.
  std::string to_string() const;
  // The few lines `easel train` logs at its start.
  std::vector<std::string> summary_lines() const;
};

// The request for a run of cfg on the net's cost and the data as held (data.train after MPI
// keeps this rank's shards, and data.test).
// `exchange`: sync-easgd's path as the run's plan chose it (none for the other algorithms).
FitRequest fit_request(const TrainConfig& cfg, const NetCost& cost, const DataSplit& data,
                       const std::optional<SyncExchangeChoice>& exchange);

// Where every buffer of the run goes and whether it fits. Requires a plan of topo; errors only
// for an unknown algorithm. The refusal is in Fit::refusal, not in the result's status.
Result<Fit> compute_fit(const FitRequest& req, const Topology& topo, const GroupPlan& plan);

// compute_fit for cfg's net (built on the data's shape) and data, sync-easgd's path chosen for
// the plan's groups in one process on the host (`easel topology --net`: no run is planned),
// the kernels' bytes measured (host groups).
Result<Fit> fit_of(const TrainConfig& cfg, const Topology& topo, const GroupPlan& plan,
                   const DataSplit& data);

// The check `easel train` makes after the data is loaded and before any group's arena is
// allocated: the fit of cfg on the plan, its summary logged (info) and its spills (warn, once)
// when `root` (rank 0 of `ranks`, which gathers the checkpoints); returns the refusal
// (invalid_argument) or ok, and the fit in *kept. `spec`: the run's net, whose kernels' bytes
// are measured for host groups.
Status check_run_fit(const TrainConfig& cfg, const Topology& topo, const GroupPlan& plan,
                     const DataSplit& data, const NetSpec& spec, const NetCost& cost,
                     const std::optional<SyncExchangeChoice>& exchange, int ranks, bool root,
                     Fit* kept = nullptr);

// "233.3 MB", "17.3 GB" (decimal, as the paper gives sizes).
std::string fit_bytes(uint64_t bytes);

}  // namespace easel
