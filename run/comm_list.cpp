// The explicit list of Comms, tried in order. A new transport is its Comm plus one line here.
#include "run/comm_list.hpp"

#include <array>
#include <string>

#include "devices/shared_gpu_comm.hpp"
#include "engine/comm/collective_cost.hpp"
#include "engine/comm/collectives/list.hpp"
#include "engine/comm/transport.hpp"
#include "engine/log.hpp"

namespace easel {

namespace {

bool on_devices(const CommNeeds& n) {
  return n.on_devices;
}
// Groups sharing a GPU run the algorithm --collective names, and for auto the tree: through the
// one GPU's memory every algorithm moves the same 2 (P-1) spans, the tree in the fewest steps,
// and its order is the one the CPU's sync-easgd sums in under auto (its fast exchanges and the
// overlap path). NCCL among distinct GPUs picks its own.
Result<std::unique_ptr<Comm>> device_comm(const CommNeeds& n, const CollectivePick& pick) {
  return n.kind->make_comm(n.devices, pick.algo, pick.inter);
}

bool across_ranks(const CommNeeds& n) {
  return n.world != nullptr;
}
// Every group of every process: the picked algorithm over all R * L groups on the composed
// transport (peers in this process over shared memory, the others over MPI), so that R ranks of
// L groups sum as one process of R * L groups. Where that transport is unavailable (no
// MPI_THREAD_MULTIPLE) and under --collective mpi: this process's groups over shared memory,
// then the processes (the picked algorithm among them, or the MPI library's own), inside the
// process the algorithm `auto` picks for its groups (the tree under --collective mpi).
Result<std::unique_ptr<Comm>> hier_comm(const CommNeeds& n, const CollectivePick& world) {
  if (!collective_entry(world.algo).native) {
    auto composed = n.world->composed_transport(n.local_groups);
    if (composed.ok())
      return make_collective_comm(std::move(composed).value(), world.algo, world.inter);
    if (n.world->rank() == 0 && n.local_groups > 1)  // one group a process: the same order
      log_info("comm", composed.status().message() +
                           "; this process's groups reduce first, then the processes");
  }
  return make_hier_comm(make_shm_comm(n.local_groups, world.inside), world_comm(*n.world, world),
                        n.world->rank());
}

bool always(const CommNeeds&) {
  return true;
}
// One process whose threads each have a core: barrier waiters spin (engine/comm/comm.hpp).
double shm_spin(const CommNeeds& n) {
  return n.has_cores ? kShmSpinSeconds : 0;
}
Result<std::unique_ptr<Comm>> shm_comm(const CommNeeds& n, const CollectivePick& pick) {
  return make_collective_comm(make_shm_transport(n.local_groups, shm_spin(n)), pick.algo,
                              pick.inter);
}

double no_spin(const CommNeeds&) {
  return 0;
}

constexpr std::array kComms = {
    CommEntry{"device",
              "the device kind's own Comm among its units (NCCL among GPUs), for arenas "
              "resident on the devices",
              on_devices, device_comm, no_spin},
    CommEntry{"hier",
              "all groups of all ranks: shared memory among this process's groups, MPI to the "
              "others",
              across_ranks, hier_comm, no_spin},
    CommEntry{"shm",
              "shared memory among the groups of one process (--collective picks the algorithm)",
              always, shm_comm, shm_spin},
};

}  // namespace

std::string shared_units_note(std::span<Device* const> devices) {
  if (!devices_share_a_unit(devices)) return {};
  return "collective auto: tree for " + std::to_string(devices.size()) +
         " groups sharing GPUs (through one GPU's memory every algorithm moves the same "
         "2 (P-1) spans, the tree in the fewest steps, in the CPU run's order)";
}

std::span<const CommEntry> comm_list() {
  return kComms;
}

std::unique_ptr<Comm> world_comm(MpiComm& world, const CollectivePick& pick) {
  if (collective_entry(pick.algo).native) return world.native_comm();
  return make_collective_comm(world.transport(), pick.algo, pick.inter);
}

Result<CollectivePick> pick_collective(const CommNeeds& n) {
  CollectivePick pick;
  if (n.world != nullptr) {  // this process's groups among themselves (hier_comm's fallback)
    CommNeeds local = n;
    local.world = nullptr;
    if (collective_entry(n.collective).native) local.collective = CollectiveAlgo::tree;
    EASEL_ASSIGN_OR_RETURN(const CollectivePick inside, pick_collective(local));
    pick.inside = inside.algo;
  }
  const CollectiveEntry& asked = collective_entry(n.collective);
  if (asked.needs_ranks != nullptr && n.world == nullptr)
    return invalid_argument(collective_needs_ranks(asked));
  if (!asked.automatic) {
    pick.algo = n.collective;
    return pick;
  }
  if (n.on_devices) {  // device_comm's rule: the tree where groups share a GPU, else NCCL's own
    pick.why = shared_units_note(n.devices);
    return pick;
  }
  CollectiveShape shape;
  std::string error;
  if (!collective_links(&shape.intra, &shape.inter, &error)) return invalid_argument(error);
  shape.bytes = static_cast<double>(n.arena_floats) * sizeof(float);
  if (n.world != nullptr) {
    const std::shared_ptr<Transport> t = n.world->transport();  // every group of every process
    shape.ranks = t->size() * n.local_groups;
    shape.ranks_per_node = std::max(1, shape.ranks / std::max(1, t->nodes()));
  } else {
    shape.ranks = n.local_groups;
    shape.ranks_per_node = n.local_groups;
  }
  const CollectiveChoice c = choose_collective(shape);
  pick.algo = c.algo;
  pick.inter = c.inter;
  if (shape.ranks > 1) pick.why = c.why;
  return pick;
}

const CommEntry& choose_comm(const CommNeeds& needs) {
  for (const CommEntry& c : kComms)
    if (c.serves(needs)) return c;
  return kComms.back();  // shm serves every run
}

}  // namespace easel
