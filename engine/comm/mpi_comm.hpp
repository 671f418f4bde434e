// The processes of a run across nodes (MPI ranks), behind the Comm interface, plus the few
// process-level operations the trainer and the parameter-server algorithms need. Only the MPI
// layer's files (mpi_world.hpp and its three .cpp) include <mpi.h>; without -Dmpi=enabled
// mpi_none.cpp provides the single-process answers (rank 0 of 1, no world).
//
// Every inter-process wait is a point-to-point request on a known peer, polled with a deadline
// (EASEL_MPI_TIMEOUT seconds, default 300): a rank that stalls or dies makes the waiting rank
// call MPI_Abort with a message naming the rank that did not arrive, so the job stops instead of
// hanging. The world is a Transport (transport()): the collective algorithms of
// engine/comm/collectives/ run over it as over shared memory, so they sum in the same order as
// one process of as many groups; its own Comm calls (control values, the initial weights) run
// the binomial tree, and native_comm() is the MPI library's own collectives.
//
// Fault injection for tests: EASEL_MPI_FAULT=stall:R makes rank R sleep forever in its first
// collective; EASEL_MPI_FAULT=fail:R makes mpi_fault_fail() true on rank R. These variables, the
// deadline's and the transport's are rank 0's for every rank (engine/comm/run_env.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/comm/comm.hpp"
#include "engine/comm/transport.hpp"
#include "engine/status.hpp"

namespace easel {

// The MPI world as a Comm whose ranks are processes (one calling thread per process for the
// collectives; `rank` must be this process's rank). Thread level MPI_THREAD_MULTIPLE when the
// library provides it (thread_multiple()): then send()/recv() may be called from any thread.
class MpiComm : public Comm {
 public:
  virtual int rank() const = 0;
  // Processes of this job on this node, and this process's index among them.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual bool thread_multiple() const = 0;

  // Byte-level collectives for control values. gather: root's dst receives size() blocks of
  // `bytes` in rank order.
  virtual void broadcast_bytes(void* buf, size_t bytes, int root) = 0;
  virtual void gather_bytes(const void* src, size_t bytes, void* dst, int root) = 0;

  // Point-to-point floats, tags 100 to 16383 (the collectives' and the composed transport's
  // are apart). recv: src -1 means any source; waits at most `timeout_s` seconds
  // (< 0: the default deadline; 0: forever, polling gently, as an idle server); returns the source,
  // and the count received in *count (at most n).
  virtual void send(const float* buf, int64_t n, int dst, int tag) = 0;
  virtual int recv(float* buf, int64_t n, int src, int tag, int64_t* count,
                   double timeout_s = -1) = 0;
  // True when a message with `tag` from any source is waiting to be received (MPI_Iprobe).
  virtual bool probe(int tag) = 0;

  // MPI_Allreduce itself (MPI_SUM on floats), for benchmarks against the tree collectives; its
  // summation order is the library's choice.
  virtual void allreduce_sum_native(float* buf, int64_t n) = 0;

  // The world as a transport (one rank a process, this process's rank calling): point-to-point
  // steps, large ones pipelined in pieces (EASEL_MPI_PIECE_MB, default 4). Its nodes: the ranks
  // sharing memory (MPI_COMM_TYPE_SHARED), or blocks of EASEL_RANKS_PER_NODE when set (a
  // simulated platform's nodes, whose hosts SMPI keeps apart).
  virtual std::shared_ptr<Transport> transport() = 0;
  // The MPI library's own MPI_Allreduce / MPI_Reduce / MPI_Bcast as a Comm (--collective mpi):
  // Open MPI's tuned or HAN components, SimGrid's smpi/allreduce choice. Its summation order is
  // the library's: not bit for bit across rank counts or layouts.
  virtual std::unique_ptr<Comm> native_comm() = 0;
  // The groups of every process as one transport: `local_groups` (L, the same on every process)
  // groups a process, global rank process * L + group, each group's thread calling with its own
  // rank; peers in this process over shared memory, the others over MPI (one message stream per
  // pair of groups, the deadlines as above). The flat algorithms over it sum in the order of one
  // process of R * L groups, bit for bit. Every process must make one before its first step
  // (no communication: a stalled rank is still named by its peers' deadlines).
  // Unavailable, saying why, without MPI_THREAD_MULTIPLE or under SMPI (one thread a rank).
  virtual Result<std::shared_ptr<Transport>> composed_transport(int local_groups) = 0;

  // Prints "easel: rank R: message" and stops every process of the job (MPI_Abort).
  [[noreturn]] virtual void abort(const std::string& message, int code) = 0;
};

// Starts MPI (MPI_Init_thread) when this process was launched by mpirun/srun (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE or PMIX_RANK set); otherwise does nothing. Without MPI support, a launch with more
// than one process is refused (unavailable, saying how to build with MPI).
// The ranks then agree on the run's variables (engine/comm/run_env.hpp): rank 0's are the run's,
// broadcast; a rank without one takes rank 0's, and one whose own environment sets it otherwise
// (or sets one rank 0 does not), or a malformed value, is refused on every rank at once with the
// same invalid_argument (one line naming the variable, the rank and both values): the world
// stays up (mpi_world(), process_rank()) for the caller to end with mpi_finish(code, true).
Status mpi_start(int* argc, char*** argv);
// Ends MPI for a process that returns `exit_code` from main and returns the code to exit with.
// With several ranks a non-zero code aborts the whole job (MPI_Abort) so that no rank hangs in
// a collective waiting for this one, unless every_rank: every rank ends with it at once (a
// refusal they agreed on), and MPI ends normally.
int mpi_finish(int exit_code, bool every_rank = false);
// Every rank of `world` calls it at the same point of its setup with its own outcome, before the
// next collective (a rank that failed earlier skips none): returns ok when every rank is ok, else
// the lowest failing rank's code and message ("rank R: " before it when R is not 0), the same on
// every rank. After a failure agreed here the ranks end together: mpi_finish ends MPI normally
// with the code instead of aborting the job (two ranks in MPI_Abort at once can crash Open MPI's
// launcher), and only rank 0 reports it (failure_agreed()).
Status agree_on_outcome(MpiComm& world, const Status& mine);
bool failure_agreed();
// The world after mpi_start() when MPI runs, else nullptr.
MpiComm* mpi_world();
// This process's rank (0 without MPI) and the number of processes (1 without MPI).
int process_rank();
int process_count();
// Fault injection (see above): true on the rank named by EASEL_MPI_FAULT=fail:R.
bool mpi_fault_fail();

// ---- simulation under SimGrid's SMPI (-Dmpi=smpi; docs/SIMULATION.md) ----
// The flops of one training step injected instead of computed (EASEL_SIM_STEP_FLOPS, set by
// `tools/simulate --compute model`); 0 when the step is computed for real, or not simulated.
double sim_injected_flops();
// With injected compute: advances this rank's simulated clock by one step's flops on its
// simulated host (smpi_execute_flops) and returns true: the caller skips the real step.
bool sim_inject_step();
// A step computed for real and then priced (easel train --clock under SMPI, tools/simulate
// --compute clock; the computation itself takes no simulated time there): after each step,
// sim_charge_step advances this rank's simulated clock by `seconds` (the described machine's
// step) on its simulated host. 0 (the default): nothing is charged. Outside SMPI a no-op.
void set_sim_step_seconds(double seconds);
void sim_charge_step();
// The simulated clock (MPI_Wtime under SMPI once MPI runs), else -1.
double sim_clock_seconds();

// The composition of a process's groups and the processes: `local` (size L, the groups of this
// process, thread per rank) then `world` (R processes, any Comm whose ranks are the processes,
// this one being world_rank). Its ranks are global group ids, process r holding r*L .. r*L+L-1;
// each collective reduces inside the process first, then one message per process goes over the
// world, then back to the process's groups. With L == 1 it is the world's algorithm itself, so
// R ranks equal one process of R groups bit for bit for every algorithm; with the tree and L a
// power of two the order equals the flat tree over R*L ranks as well. What runs where the
// composed transport cannot (--collective mpi: the library's own collectives among processes;
// no MPI_THREAD_MULTIPLE; SMPI).
std::unique_ptr<Comm> make_hier_comm(std::unique_ptr<Comm> local, std::unique_ptr<Comm> world,
                                     int world_rank);

}  // namespace easel
