// The Comms a run's groups exchange over, as an explicit list like the algorithms' (name,
// description, factory): the first entry that serves the run is its Comm. The trainer states
// what the run needs; it names no transport.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "devices/list.hpp"
#include "engine/comm/comm.hpp"
#include "engine/comm/mpi_comm.hpp"

namespace easel {

// What the run asks of its Comm.
struct CommNeeds {
  int local_groups = 1;                                   // this process's groups, one rank each
  CollectiveAlgo collective = CollectiveAlgo::automatic;  // --collective, host-memory collectives
  int64_t arena_floats = 0;  // the span an exchange sums (what --collective auto prices)
  MpiComm* world = nullptr;  // across MPI ranks; null in one process
  bool has_cores = false;    // every thread of this process has a core of its own
  // The groups' arenas live on their devices (Run::resident) and the algorithm exchanges: only
  // the device kind's own Comm reaches them.
  bool on_devices = false;
  const DeviceEntry* kind = nullptr;  // the groups' device kind
  std::span<Device* const> devices;   // the groups' devices, in local group order (on_devices)
};

struct CommEntry {
  const char* name;
  const char* description;
  bool (*serves)(const CommNeeds&);
  // Makes it with the run's pick (pick_collective's, decided once in the run's plan).
  Result<std::unique_ptr<Comm>> (*make)(const CommNeeds&, const struct CollectivePick&);
  // How long a group spins before it sleeps when it waits outside the Comm (Run::spin_seconds).
  double (*spin_seconds)(const CommNeeds&);
};

// In the order they are tried.
std::span<const CommEntry> comm_list();

// The first entry of comm_list() that serves `needs`; every run is served by one.
const CommEntry& choose_comm(const CommNeeds& needs);

// The algorithm a host Comm runs for `needs`: --collective itself, or for auto the cost model's
// choice (engine/comm/collective_cost.hpp) for the arena, the ranks and the ranks per node; `why`
// says which and why in one line (empty unless auto). For arenas on devices (needs.on_devices)
// auto is the tree where two groups share a GPU (said in `why`) and NCCL's own choice otherwise
// (no line). Fails on a malformed EASEL_COLLECTIVE_LINKS.
struct CollectivePick {
  CollectiveAlgo algo = CollectiveAlgo::tree;
  CollectiveAlgo inter = CollectiveAlgo::ring;
  // Across ranks, when the composed transport is unavailable or under --collective mpi: what
  // this process's groups run among themselves before the processes exchange (hier_comm).
  CollectiveAlgo inside = CollectiveAlgo::tree;
  std::string why;
};
Result<CollectivePick> pick_collective(const CommNeeds& needs);
// pick_collective's line for arenas on `devices` under auto: the tree, said where two of them
// share a GPU (empty otherwise). The run's plan is made before its devices: the trainer says it
// once they exist.
std::string shared_units_note(std::span<Device* const> devices);

// The processes' own Comm for `pick` (one rank a process): the MPI library's collectives for a
// native row (--collective mpi), else the picked algorithm over the world's transport.
std::unique_ptr<Comm> world_comm(MpiComm& world, const CollectivePick& pick);

}  // namespace easel
