// Without -Dmpi=enabled: one process, no world. A launch by mpirun with several processes is
// refused rather than running N independent copies that write the same results.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "engine/comm/mpi_comm.hpp"

namespace easel {

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : 0;
}

}  // namespace

Status mpi_start(int*, char***) {
  const int n = std::max(env_int("OMPI_COMM_WORLD_SIZE"), env_int("PMI_SIZE"));
  if (n > 1)
    return unavailable("started by mpirun with " + std::to_string(n) +
                       " processes, but this easel was built without MPI (install "
                       "libopenmpi-dev, then meson setup BUILD -Dmpi=enabled)");
  return {};
}

int mpi_finish(int exit_code, bool) {
  return exit_code;
}

Status agree_on_outcome(MpiComm&, const Status& mine) {
  return mine;
}

bool failure_agreed() {
  return false;
}

MpiComm* mpi_world() {
  return nullptr;
}

int process_rank() {
  return 0;
}

int process_count() {
  return 1;
}

double sim_injected_flops() {
  return 0;
}

bool sim_inject_step() {
  return false;
}

void set_sim_step_seconds(double) {}

void sim_charge_step() {}

double sim_clock_seconds() {
  return -1;
}

bool mpi_fault_fail() {
  return false;
}

}  // namespace easel
