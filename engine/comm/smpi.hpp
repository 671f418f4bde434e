// What easel asks of SimGrid's SMPI (-Dmpi=smpi; docs/SIMULATION.md), the only interface to the
// simulator: engine/comm/smpi.cpp answers in an SMPI build, engine/comm/smpi_none.cpp in every
// other build (nothing is simulated: the ordinary behaviour). engine/meson.build picks one, so no
// other file asks which build it is.
//
// Under SMPI, smpirun loads the easel program once per simulated rank inside one real process:
// every rank is a SimGrid actor with its own copy of the globals, calls MPI only from its own
// thread (MPI_THREAD_SINGLE), and lives on a simulated clock (MPI_Wtime); ending the job ends
// the simulation.
#pragma once

#include <cstddef>

namespace easel::smpi {

// True in an SMPI build. The callers branch on it where a simulated rank behaves otherwise:
// waits block in simulated time (a watchdog keeps the deadline), a stop ends the simulation
// (_exit, every rank being in this process), a worker group runs inline on the rank's thread,
// the composed shm+MPI transport is unavailable, and mpi_finish reports the simulated seconds.
bool built();

// smpirun launched this process (it exports SMPI_GLOBAL_SIZE); false outside an SMPI build.
bool launched();

// Sleeps `seconds` on the rank's clock: simulated seconds (smpi_sleep) under SMPI, real ones
// (std::this_thread::sleep_for) otherwise.
void sleep_seconds(unsigned seconds);

// The flops of one training step to inject instead of computing it (EASEL_SIM_STEP_FLOPS, set by
// `tools/simulate --compute model`): its value when the whole of it reads as a positive number,
// else 0; always 0 outside an SMPI build. Read once.
double step_flops();

// Advances the calling rank's simulated clock by `flops` on its simulated host
// (smpi_execute_flops). Requires built().
void execute_flops(double flops);

// Advances the calling rank's simulated clock by `seconds` of computation on its simulated host,
// whatever the host's speed (its flops: seconds x the host's per-core speed): a described
// machine's step (easel train --clock under tools/simulate --compute clock). Requires built().
void execute_seconds(double seconds);

// True when SMPI times the computation between MPI calls (smpi/simulate-computation, on unless
// the run says no); false outside an SMPI build or before the simulation runs.
bool computation_timed();

// True when the calling thread is a simulated rank's own actor (a library's helper thread has no
// simulated clock); false outside an SMPI build.
bool in_rank_actor();

// A block of `bytes` whose pages every rank shares (SMPI's shared malloc; its values do not
// matter), freed by shared_free. Only under injected compute (step_flops() > 0). Outside an SMPI
// build: plain malloc and free.
void* shared_malloc(size_t bytes);
void shared_free(void* p);

// What a rank is waiting for, read by its watchdog (both run in the simulator's one thread at a
// time, so plain fields do). MpiWorld's waits set it under SMPI.
struct WaitState {
  bool waiting = false;
  double since = 0;  // simulated seconds at the wait's start
  int peer = -1;     // the rank waited for; -1: any
  const char* what = "";
  const char* verb = nullptr;  // what the peer failed to do; nullptr: "sent no message"
  double timeout_s = 0;        // 0: no deadline
};

// Under SMPI: starts a daemon actor on the calling rank's host that, idle, looks at `*ws` every
// 1/64 of `timeout_s` (simulated); during a wait it sleeps to the wait's deadline and, past it,
// names the peer and ends the simulation (exit 3). Daemons do not keep the simulation alive once
// every rank has returned. `ws` must outlive the simulation. Outside an SMPI build: nothing.
void start_watchdog(const WaitState* ws, int rank, double timeout_s);

}  // namespace easel::smpi
