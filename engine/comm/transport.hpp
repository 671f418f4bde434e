// The transport below the collective algorithms (Gloo's pairs and buffers): point-to-point
// transfers of float spans between ranks, each wait bounded by a deadline that names the peer it
// waits for. The collective algorithms (engine/comm/collectives/) are written once above it;
// a transport holds none of its own.
//
// Implemented by shared memory among the threads of this process (make_shm_transport, each rank
// a thread calling with its own id), the same rendezvous with device kernels doing the copies and
// adds among groups that share GPUs (devices/shared_gpu_comm.hpp), by MPI among processes (the
// MPI world, one calling thread a process, SMPI through it) and by the two composed
// (MpiComm::composed_transport: global rank process * L + local group).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace easel {

// What a receive does with the incoming floats `in`.
enum class RecvOp {
  copy,  // dst[i] = in[i]
  add,   // dst[i] = own[i] + in[i]   (own may alias dst)
};

// One rank's part of one step of an algorithm: at most one send and one receive, posted
// together (two ranks that exchange do not deadlock). A peer < 0 means none.
struct Transfer {
  int send_peer = -1;
  const float* send = nullptr;
  int64_t send_n = 0;
  int recv_peer = -1;
  float* dst = nullptr;
  const float* own = nullptr;  // RecvOp::add only
  int64_t recv_n = 0;
  RecvOp op = RecvOp::copy;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int size() const = 0;
  virtual std::string name() const = 0;

  // The node (shared memory) of a rank, in [0, nodes()); ranks of one node are numbered
  // consecutively. Hierarchical algorithms and the cost model read it.
  virtual int node_of(int rank) const = 0;
  virtual int nodes() const = 0;
  // The ranks whose calls this process makes: [first_local(), first_local() + local_size()).
  virtual int first_local() const = 0;
  virtual int local_size() const = 0;

  // Rank `rank`'s step: posts x's send and receive, returns when both are complete (the send's
  // buffer may be reused, dst holds the result). Every send is matched by exactly one receive
  // of the same length, posted by the peer in the same order among the pair's transfers.
  // `what` names the collective in a stall message ("group 3 waited 300 s for group 5 in ring
  // allreduce"). Fails (the stall timeout, engine/worker.hpp; or the MPI deadline) naming the
  // peer that did not arrive.
  virtual void step(int rank, const Transfer& x, const char* what) = 0;
  // Several transfers of rank `rank` posted together and complete together: one step of each
  // of several independent streams (a pipelined algorithm's transfers inside the node and across
  // nodes), so that a transport that can overlaps them. Each is matched as step()'s are: the
  // peer posts the matching transfer in the same batch position of its own call (or, with no
  // transfer of that stream there, alone). By default they run one after another in the given
  // order, which is correct when every rank lists its streams in the same order; the MPI
  // transport posts them all at once.
  virtual void steps(int rank, const Transfer* xs, int count, const char* what) {
    for (int i = 0; i < count; ++i)
      step(rank, xs[i], what);
  }
  // All ranks meet.
  virtual void barrier(int rank) = 0;

  // Seconds `rank` spent waiting for its peers inside step() and barrier() (arrival skew, not
  // data movement where the transport can tell them apart). Read by the rank's own thread.
  virtual double wait_seconds(int rank) const = 0;

  // Splits a large receive into pieces of at most this many floats, so that adding one piece
  // overlaps the transfer of the next (0: the transport adds as it reads, no pieces).
  virtual int64_t pipeline_floats() const { return 0; }

  // True when the spans the algorithms give step() are device memory, so that their scratch must
  // be too (ScratchFloats(true)); the host never touches them.
  virtual bool scratch_on_device() const { return false; }
};

// What the receiving rank of a shared-memory transfer does with the sender's published span
// `in` (x.recv_n floats, from rank `peer`): x.dst = in, or x.dst = x.own + in. Called on the
// receiver's thread between the send's publication and its release; returns when x.dst holds
// the result. The default is a host loop; groups sharing a GPU use their devices' kernels.
class ShmCombine {
 public:
  virtual ~ShmCombine() = default;
  virtual void combine(int rank, int peer, const Transfer& x, const float* in) = 0;
  // The transport's name ("shm", "gpu-shm") and whether the spans are device memory.
  virtual const char* kind() const = 0;
  virtual bool on_device() const = 0;
};

struct ShmOptions {
  double spin_seconds = 0;
  std::shared_ptr<ShmCombine> combine;  // null: the host loop
  int first_group = 0;                  // stall messages name group first_group + rank
};

// Shared memory among `size` threads of this process: a sender publishes its span, the receiver
// copies or adds straight from it (one pass, no staging) and releases it. A waiting rank spins for
// up to spin_seconds (give it only when every rank has a core of its own), then sleeps.
std::unique_ptr<Transport> make_shm_transport(int size, double spin_seconds = 0);
std::unique_ptr<Transport> make_shm_transport(int size, const ShmOptions& options);

}  // namespace easel
