// Starting and ending MPI, the process-level answers (rank, count, fault injection) and the
// simulation's hooks once MPI runs (engine/comm/smpi.hpp answers for the simulator); the world
// itself is engine/comm/mpi_world.hpp.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/comm/mpi_world.hpp"

namespace easel {

namespace {

using mpi_detail::launched_by_mpi;
using mpi_detail::MpiWorld;

std::unique_ptr<MpiWorld>& world_slot() {
  static std::unique_ptr<MpiWorld> w;
  return w;
}

bool& agreed_slot() {
  static bool agreed = false;
  return agreed;
}

double& step_seconds_slot() {  // per rank: under SMPI each rank has its own globals
  static double seconds = 0;
  return seconds;
}

// The compute mode mpi_finish names for tools/simulate (no ':' in it: its pattern ends there).
std::string sim_compute_mode() {
  if (sim_injected_flops() > 0) return "model (injected)";
  if (step_seconds_slot() > 0) {
    char text[96];
    std::snprintf(text, sizeof text, "clock (computed, the model's step of %g s injected)",
                  step_seconds_slot());
    return text;
  }
  return "real (timed)";
}

}  // namespace

Status mpi_start(int* argc, char*** argv) {
  if (world_slot() || !launched_by_mpi()) return {};
  int provided = MPI_THREAD_SINGLE;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    return unavailable("MPI_Init_thread failed (launched by mpirun, but MPI did not start)");
  world_slot() = std::make_unique<MpiWorld>(provided >= MPI_THREAD_MULTIPLE);
  EASEL_RETURN_IF_ERROR(world_slot()->start());  // every rank refuses together
  // Injected compute: the values are not computed, so neither are the exchange's O(n) passes.
  set_values_ignored(sim_injected_flops() > 0);
  return {};
}

int mpi_finish(int exit_code, bool every_rank) {
  auto& w = world_slot();
  if (!w) return exit_code;
  if (agreed_slot()) every_rank = true;
  if (exit_code != 0 && w->size() > 1 && !every_rank)
    w->abort("exited with code " + std::to_string(exit_code) + "; stopping the job", exit_code);
  // tools/simulate reads this line: the simulated seconds of the whole run on rank 0's clock
  // (a run refused at its start has none).
  if (smpi::built() && w->rank() == 0 && !every_rank)
    std::fprintf(stderr, "easel: simulated %d ranks under SMPI, compute %s: %.6f simulated s\n",
                 w->size(), sim_compute_mode().c_str(), MPI_Wtime());
  w.reset();
  MPI_Finalize();
  return exit_code;
}

Status agree_on_outcome(MpiComm& world, const Status& mine) {
  const int n = world.size();
  const bool root = world.rank() == 0;
  const int32_t failed = mine.ok() ? 0 : 1;
  std::vector<int32_t> all(root ? static_cast<size_t>(n) : 0);
  world.gather_bytes(&failed, sizeof failed, all.data(), 0);
  int32_t first = -1;
  for (int q = 0; root && q < n && first < 0; ++q)
    if (all[static_cast<size_t>(q)] != 0) first = q;
  world.broadcast_bytes(&first, sizeof first, 0);
  if (first < 0) return {};
  // The first failing rank's code and message, to every rank.
  int32_t head[2] = {static_cast<int32_t>(mine.code()),
                     static_cast<int32_t>(std::min<size_t>(mine.message().size(), 4096))};
  world.broadcast_bytes(head, sizeof head, first);
  std::string message = mine.message();
  message.resize(static_cast<size_t>(head[1]));
  if (!message.empty()) world.broadcast_bytes(message.data(), message.size(), first);
  agreed_slot() = true;
  const bool known = head[0] > 0 && head[0] <= static_cast<int32_t>(Code::internal);
  const Code code = known ? static_cast<Code>(head[0]) : Code::internal;
  return Status(code, first == 0 ? message : "rank " + std::to_string(first) + ": " + message);
}

bool failure_agreed() {
  return agreed_slot();
}

MpiComm* mpi_world() {
  return world_slot().get();
}

int process_rank() {
  return world_slot() ? world_slot()->rank() : 0;
}

int process_count() {
  return world_slot() ? world_slot()->size() : 1;
}

double sim_injected_flops() {
  return world_slot() ? smpi::step_flops() : 0;
}

bool sim_inject_step() {
  const double f = sim_injected_flops();
  if (f <= 0) return false;
  smpi::execute_flops(f);
  return true;
}

void set_sim_step_seconds(double seconds) {
  step_seconds_slot() = seconds;
}

void sim_charge_step() {
  if (step_seconds_slot() > 0 && world_slot() && smpi::in_rank_actor())
    smpi::execute_seconds(step_seconds_slot());
}

double sim_clock_seconds() {
  // Only a rank's own actor has a simulated clock (not a library's helper thread).
  if (world_slot() && smpi::in_rank_actor()) return MPI_Wtime();
  return -1;
}

bool mpi_fault_fail() {
  return world_slot() && world_slot()->fault_fail();
}

}  // namespace easel
