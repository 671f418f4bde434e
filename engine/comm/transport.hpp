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
#include <vector>

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

// One step of one stream (Transport::run_streams): a transfer (neither peer: a step the rank
// sits out), posted once the stream's previous step is complete and, with after_stream >= 0,
// once stream after_stream has completed after_count of its steps.
struct StreamStep {
  Transfer x;
  int after_stream = -1;
  int after_count = 0;
  bool idle() const { return x.send_peer < 0 && x.recv_peer < 0; }
};
using Stream = std::vector<StreamStep>;

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
  // Runs several streams of rank `rank`'s transfers (a pipelined algorithm's phases: inside the
  // node, across nodes, back inside), each stream's steps in order, each stream at its own pace
  // where the transport can: a step is posted once its stream's previous step is complete and
  // its dependency (StreamStep::after_*) is met. A step of stream s matches the peer's step of
  // the same stream at the same index (the streams are separate message sequences), so every
  // rank that exchanges with another in a stream must give the same streams, of the same lengths
  // and dependencies (idle steps where it sits one out). The default runs them in slots
  // (run_streams_in_slots), one blocking step() after another, which is correct for any
  // transport whose step() rendezvous; the MPI world progresses every stream as its messages
  // complete (MPI_Waitany).
  virtual void run_streams(int rank, const std::vector<Stream>& streams, const char* what);
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

// run_streams' default order: slot after slot; in each slot every stream whose next step may go
// (its dependency met by the counts at the slot's start) runs that step through step(), streams
// in index order (`reversed`: the other order, for the tests: a transport may overlap them).
// The slots depend on the streams' lengths and dependencies only, so peers with the same
// streams run matching steps in the same slot. Returns the number of slots that ran two or more
// steps (streams side by side).
int run_streams_in_slots(Transport& t, int rank, const std::vector<Stream>& streams,
                         const char* what, bool reversed = false);

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
