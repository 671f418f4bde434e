// The explicit list of Comms, tried in order. A new transport is its Comm plus one line here.
#include "algos/comm_list.hpp"

#include <array>

namespace easel {

namespace {

bool on_devices(const CommNeeds& n) {
  return n.on_devices;
}
Result<std::unique_ptr<Comm>> device_comm(const CommNeeds& n) {
  return n.kind->make_comm(n.devices);
}

bool across_ranks(const CommNeeds& n) {
  return n.world != nullptr;
}
Result<std::unique_ptr<Comm>> hier_comm(const CommNeeds& n) {
  return make_hier_comm(make_shm_comm(n.local_groups, n.collective), *n.world);
}

bool always(const CommNeeds&) {
  return true;
}
// One process whose threads each have a core: barrier waiters spin (engine/comm/comm.hpp).
double shm_spin(const CommNeeds& n) {
  return n.has_cores ? kShmSpinSeconds : 0;
}
Result<std::unique_ptr<Comm>> shm_comm(const CommNeeds& n) {
  return make_shm_comm(n.local_groups, n.collective, shm_spin(n));
}

double no_spin(const CommNeeds&) {
  return 0;
}

constexpr std::array kComms = {
    CommEntry{"device",
              "the device kind's own Comm among its units (NCCL among GPUs), for arenas "
              "resident on the devices",
              on_devices, device_comm, no_spin},
    CommEntry{"hier", "shared memory among this process's groups, then MPI among the ranks",
              across_ranks, hier_comm, no_spin},
    CommEntry{"shm", "shared memory among the groups of one process (--collective tree or ring)",
              always, shm_comm, shm_spin},
};

}  // namespace

std::span<const CommEntry> comm_list() {
  return kComms;
}

const CommEntry& choose_comm(const CommNeeds& needs) {
  for (const CommEntry& c : kComms)
    if (c.serves(needs)) return c;
  return kComms.back();  // shm serves every run
}

}  // namespace easel
