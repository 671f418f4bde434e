// The MPI world (MpiWorld: the MpiComm and its transport) and what the files of the MPI layer
// share: engine/comm/mpi_world.cpp (the world's transfers, waits and deadlines),
// mpi_composed.cpp (the composed shm+MPI transport), mpi_settings.cpp (the world's start: the
// run's variables agreed from rank 0's environment) and mpi_comm.cpp (starting and ending MPI,
// the simulation's hooks). A private header: only these files include it, and with it <mpi.h>.
//
// The world's transfers are nonblocking point-to-point messages, each wait polled against a
// deadline that names the peer it waits for, each receive's count checked against the plan's
// (check_count: a mismatch is named, never summed); MPI errors return (MPI_ERRORS_RETURN) into
// EASEL_MPI, which names the call. The C API only: the deprecated C++ bindings do not compile
// cleanly with -Werror.
//
// Under SimGrid's SMPI (-Dmpi=smpi; smpi::built()) the same code runs, with three differences kept
// in mpi_world.cpp: every wait blocks in MPI_Wait (simulated time; polling would cost a context
// switch per MPI_Test), the deadline is kept by a watchdog actor per rank that sleeps in simulated
// time (engine/comm/smpi.hpp), and times are MPI_Wtime's (the simulated clock).
#pragma once

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/collectives/team.hpp"
#include "engine/comm/mpi_comm.hpp"
#include "engine/comm/smpi.hpp"
#include "engine/span_ops.hpp"

namespace easel::mpi_detail {

// Prints the failed call, the MPI error string and file:line, then stops the job.
[[noreturn]] void mpi_call_failed(const char* call, int rc, const char* file, int line);

// Every MPI call goes through this: a failure prints the call, the MPI error string and
// file:line, then stops the job.
#define EASEL_MPI(call)                                                               \
  do {                                                                                \
    const int easel_mpi_rc_ = (call);                                                 \
    if (easel_mpi_rc_ != MPI_SUCCESS)                                                 \
      ::easel::mpi_detail::mpi_call_failed(#call, easel_mpi_rc_, __FILE__, __LINE__); \
  } while (0)

// EASEL_MPI for a call that completes requests (MPI_Test, MPI_Wait and their any forms) into
// `st`: a receive that got more than it posted (MPI_ERR_TRUNCATE) is left in st->MPI_ERROR for
// MpiWorld::check_count to name with its peer; any other failure stops the job as EASEL_MPI does.
#define EASEL_MPI_COMPLETE(call, st) \
  ::easel::mpi_detail::completed((call), (st), #call, __FILE__, __LINE__)
inline void completed(int rc, MPI_Status* st, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  int cls = rc;
  MPI_Error_class(rc, &cls);
  if (st == MPI_STATUS_IGNORE || cls != MPI_ERR_TRUNCATE) mpi_call_failed(call, rc, file, line);
  st->MPI_ERROR = rc;
}

inline constexpr int kTagStep = 1, kTagGather = 3;
// run_streams: stream k's messages carry kTagStream + k (below the user tags).
inline constexpr int kTagStream = 16;
inline constexpr int kFirstUserTag = 100;
// The composed transport's tags: kFirstComposedTag + sending group * L + receiving group (user
// tags stay below it).
inline constexpr int kFirstComposedTag = 1 << 14;

inline bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

inline bool launched_by_mpi() {
  if (smpi::built()) return smpi::launched();  // smpirun
  return env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMI_SIZE") || env_set("PMIX_RANK");
}

// The world's settings from the run's variables (engine/comm/run_env.hpp), rank 0's for every
// rank (MpiWorld::start).
struct WorldSettings {
  double piece_mb = 4;     // EASEL_MPI_PIECE_MB
  int ranks_per_node = 0;  // EASEL_RANKS_PER_NODE; 0: the ranks sharing memory
  double timeout_s = 300;  // EASEL_MPI_TIMEOUT; 0: no deadline
  std::string fault;       // EASEL_MPI_FAULT=fault:fault_rank ("stall" or "fail"), or ""
  int fault_rank = -1;
};

inline int checked_count(int64_t n) {
  EASEL_CHECK_MSG(n >= 0 && n <= INT_MAX, "an MPI message is limited to INT_MAX elements");
  return static_cast<int>(n);
}

class MpiWorld final : public MpiComm {
 public:
  // The calling process's place in MPI_COMM_WORLD (no communication); start() sets it up.
  explicit MpiWorld(bool thread_multiple);
  // Agrees on the run's variables (engine/comm/run_env.hpp: rank 0's, broadcast) and sets the
  // world up from them: the nodes, the pieces, the deadline and the faults; rank 0 logs them.
  // Collective, every rank returning the same Status: the refusal of the lowest rank that has
  // one (invalid_argument: a variable its own environment sets otherwise than rank 0's, naming
  // the variable, the rank and both values; or a malformed value of rank 0's).
  Status start();
  ~MpiWorld() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int size() const override { return size_; }
  int rank() const override { return rank_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  bool thread_multiple() const override { return thread_multiple_; }
  std::string name() const override { return "mpi(" + std::to_string(size_) + ")"; }

  // The world's own Comm calls (control values, the initial weights, evaluation copies): the
  // binomial tree over the world's transport.
  void allreduce_sum(int rank, float* buf, int64_t n) override {
    check_self(rank);
    tree::allreduce(team(), buf, n, scratch_);
  }

  void reduce_sum(int rank, const float* src, float* dst, int64_t n, int root) override {
    check_self(rank);
    enter();
    tree::reduce(team(), src, dst, n, root, scratch_);
  }

  void broadcast(int rank, float* buf, int64_t n, int root) override {
    check_self(rank);
    enter();
    tree::broadcast(team(), buf, n, root);
  }

  void barrier(int rank) override {
    check_self(rank);
    transport_barrier();
  }

  double wait_seconds(int rank) const override {
    check_self(rank);
    return wait_s_;
  }

  // Bytes travel as the floats that hold them (a broadcast only copies).
  void broadcast_bytes(void* buf, size_t bytes, int root) override {
    enter();
    const int64_t n = static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
    float* f = bytes_.at_least(n);
    if (rank_ == root) std::memcpy(f, buf, bytes);
    tree::broadcast(team(), f, n, root);
    if (rank_ != root) std::memcpy(buf, f, bytes);
  }

  void gather_bytes(const void* src, size_t bytes, void* dst, int root) override {
    enter();
    const int64_t b = static_cast<int64_t>(bytes);
    if (rank_ != root) {
      post_and_wait_send(src, b, MPI_BYTE, root, kTagGather, "gather");
      return;
    }
    auto* out = static_cast<char*>(dst);
    for (int r = 0; r < size_; ++r) {
      char* at = out + static_cast<size_t>(r) * bytes;
      if (r == root)
        std::memcpy(at, src, bytes);
      else
        post_and_wait_recv(at, b, MPI_BYTE, r, kTagGather, "gather");
    }
  }

  void send(const float* buf, int64_t n, int dst, int tag) override {
    EASEL_CHECK(tag >= kFirstUserTag && tag < kFirstComposedTag);
    post_and_wait_send(buf, n, MPI_FLOAT, dst, tag, "send", false);
  }

  int recv(float* buf, int64_t n, int src, int tag, int64_t* count, double timeout_s) override {
    EASEL_CHECK(tag >= kFirstUserTag && tag < kFirstComposedTag);
    MPI_Request req;
    EASEL_MPI(MPI_Irecv(buf, checked_count(n), MPI_FLOAT, src < 0 ? MPI_ANY_SOURCE : src, tag,
                        comm_, &req));
    MPI_Status st;
    (void)wait(&req, &st, src, "recv", timeout_s < 0 ? timeout_s_ : timeout_s, nullptr,
               timeout_s == 0);
    const int64_t got =
        check_count(st, MPI_FLOAT, n, src >= 0 ? src : st.MPI_SOURCE, "recv", false);
    if (count) *count = got;
    return st.MPI_SOURCE;
  }

  bool probe(int tag) override {
    EASEL_CHECK(tag >= kFirstUserTag && tag < kFirstComposedTag);
    int flag = 0;
    EASEL_MPI(MPI_Iprobe(MPI_ANY_SOURCE, tag, comm_, &flag, MPI_STATUS_IGNORE));
    return flag != 0;
  }

  void allreduce_sum_native(float* buf, int64_t n) override {
    EASEL_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, checked_count(n), MPI_FLOAT, MPI_SUM, comm_));
  }
  void reduce_sum_native(const float* src, float* dst, int64_t n, int root) {
    const bool in_place = rank_ == root && src == dst;
    EASEL_MPI(MPI_Reduce(in_place ? MPI_IN_PLACE : src, rank_ == root ? dst : nullptr,
                         checked_count(n), MPI_FLOAT, MPI_SUM, root, comm_));
  }
  void broadcast_native(float* buf, int64_t n, int root) {
    EASEL_MPI(MPI_Bcast(buf, checked_count(n), MPI_FLOAT, root, comm_));
  }
  void barrier_native() { EASEL_MPI(MPI_Barrier(comm_)); }

  std::shared_ptr<Transport> transport() override {
    return std::shared_ptr<Transport>(&transport_, [](Transport*) {});  // lives as the world
  }
  std::unique_ptr<Comm> native_comm() override;
  Result<std::shared_ptr<Transport>> composed_transport(int local_groups) override;

  // ---- the transport (WorldTransport forwards here) ----

  int node_of(int rank) const { return node_of_[static_cast<size_t>(rank)]; }
  int nodes() const { return nodes_; }

  // Posts the steps' sends and receives (each cut into pieces of piece_ floats, in order), then
  // completes the receives piece by piece (adding each as it lands), then the sends.
  void steps(int rank, const Transfer* xs, int count, const char* what);
  void step(int rank, const Transfer& x, const char* what) { steps(rank, &x, 1, what); }

  // Every stream at its own pace: a stream's next step is posted (its send and receive in
  // pieces, on the stream's own tag) once its previous step is complete and its dependency met;
  // the posted requests of all streams complete in whatever order they do (MPI_Waitany), an add
  // applied to each piece as it lands.
  void run_streams(int rank, const std::vector<Stream>& streams, const char* what);
  void post_stream_step(size_t k, const Transfer& x);  // run_streams(): stream k's next step

  // Every rank meets: a zero-length tree reduce and broadcast (each wait names its peer).
  void transport_barrier() {
    enter();
    float dummy = 0;
    tree::reduce(team(), &dummy, &dummy, 0, 0, scratch_);
    tree::broadcast(team(), &dummy, 0, 0);
  }

  [[noreturn]] void abort(const std::string& message, int code) override;

  // Fault injection (mpi_comm.hpp): true on the rank that EASEL_MPI_FAULT=fail:R names.
  bool fault_fail() const { return fail_; }

 private:
  Status agree(std::vector<std::string>* run, WorldSettings* s);
  void check_self(int rank) const {
    EASEL_CHECK_MSG(rank == rank_, "an MPI Comm is called with the calling process's rank");
  }

  // Fault injection: the stalling rank never arrives.
  void enter() {
    while (stall_)
      smpi::sleep_seconds(1);  // simulated seconds under SMPI
  }

  Team team() { return Team::all(transport_, rank_); }

  // The collectives' waits are timed into wait_s_ (their one calling thread); send() is not.
  void post_and_wait_send(const void* buf, int64_t n, MPI_Datatype type, int peer, int tag,
                          const char* what, bool timed = true) {
    MPI_Request req;
    EASEL_MPI(MPI_Isend(buf, checked_count(n), type, peer, tag, comm_, &req));
    const double s = wait(&req, nullptr, peer, what, timeout_s_, "did not take a message");
    if (timed) wait_s_ += s;
  }

  void post_and_wait_recv(void* buf, int64_t n, MPI_Datatype type, int peer, int tag,
                          const char* what) {
    MPI_Request req;
    EASEL_MPI(MPI_Irecv(buf, checked_count(n), type, peer, tag, comm_, &req));
    wait_s_ += wait_recv(&req, type, n, peer, what);
  }

  // A completed receive from `peer` (its status from wait() or wait_any()) against the plan:
  // `expected` elements of `type`, or at most that many when !exact. Returns the count received;
  // any other count stops the job (exit 2) naming the peer and both counts, never summed: the
  // ranks run different plans (a short message would leave stale floats in the sum, a long one
  // is cut).
  int64_t check_count(const MPI_Status& st, MPI_Datatype type, int64_t expected, int peer,
                      const char* what, bool exact = true);

  // wait() for a receive of `expected` elements of `type` from `peer`, then check_count().
  double wait_recv(MPI_Request* req, MPI_Datatype type, int64_t expected, int peer,
                   const char* what) {
    MPI_Status st;
    const double s = wait(req, &st, peer, what, timeout_s_, nullptr);
    check_count(st, type, expected, peer, what);
    return s;
  }

  // Polls req until done: spins for the first millisecond (each MPI_Test drives the transfer),
  // then yields until 20 ms, then sleeps 50 us between polls (so that ranks sharing a core let
  // the others run). Past the deadline (timeout_s > 0) the job is aborted, naming the peer that
  // did not arrive. Returns the seconds it waited.
  // idle (a server waiting for requests without deadline): sleeps between polls from the start.
  // st (nullptr: ignored) receives the status, a receive's MPI_ERR_TRUNCATE in st->MPI_ERROR.
  double wait(MPI_Request* req, MPI_Status* st, int peer, const char* what, double timeout_s,
              const char* verb, bool idle = false);

  // Waits until one of reqs[0, count) is done (its index in *index, its status in *st as wait()
  // gives it; the request becomes MPI_REQUEST_NULL), polling as wait() does; past the deadline
  // the job is aborted naming `peer`. Returns the seconds it waited.
  double wait_any(int count, MPI_Request* reqs, int* index, MPI_Status* st, int peer,
                  const char* what, const char* verb);

  // wait() and wait_any(): under SMPI `block()` (an MPI_Wait*, in simulated time, with the
  // watchdog told whom it waits for); else `test()` (an MPI_Test*, true when done) polled as
  // wait() describes. Returns the seconds it waited.
  template <class Block, class Test>
  double wait_until(int peer, const char* what, double timeout_s, const char* verb, bool idle,
                    Block block, Test test);

  [[noreturn]] void stalled(int peer, const char* verb, const char* what, double s,
                            double timeout_s);

  smpi::WaitState wait_state_;  // under SMPI: what this rank waits for, for its watchdog
  bool thread_multiple_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  double timeout_s_ = 300;
  bool stall_ = false, fail_ = false;
  double wait_s_ = 0;
  ScratchFloats scratch_, recv_, bytes_;  // collectives only (one calling thread)
  std::vector<MPI_Request> send_reqs_, recv_reqs_;
  std::vector<float*> ins_;  // steps(): where each transfer's receive lands
  struct StreamRequest {     // run_streams(): a request's stream and floats [b, e)
    int stream;
    bool recv;
    int64_t b, e;
  };
  std::vector<StreamRequest> stream_meta_;
  struct StreamState {  // run_streams(): a stream's completed steps, requests in flight, receive
    size_t done = 0;
    int pending = 0;
    float* in = nullptr;
  };
  std::vector<StreamState> stream_state_;
  std::vector<ScratchFloats> stream_stage_;  // run_streams(): each stream's incoming adds
  std::vector<int> node_of_;                 // [rank]
  int nodes_ = 1;
  int64_t piece_ = int64_t{1} << 20;
  // The pieces a span of n floats travels in: f(offset, length) for each, in order (one empty
  // piece when n is 0, so that an empty transfer is still one matched message).
  template <class F>
  void for_pieces(int64_t n, F f) const {
    for (int64_t b = 0; b < n || (b == 0 && n == 0); b += piece_)
      f(b, std::min(piece_, n - b));
  }

  // The world seen as a Transport by the collective algorithms.
  class WorldTransport final : public Transport {
   public:
    explicit WorldTransport(MpiWorld& w) : w_(w) {}
    int size() const override { return w_.size(); }
    std::string name() const override { return w_.name(); }
    int node_of(int rank) const override { return w_.node_of(rank); }
    int nodes() const override { return w_.nodes(); }
    int first_local() const override { return w_.rank(); }
    int local_size() const override { return 1; }
    void step(int rank, const Transfer& x, const char* what) override { w_.step(rank, x, what); }
    void run_streams(int rank, const std::vector<Stream>& streams, const char* what) override {
      w_.run_streams(rank, streams, what);
    }
    void barrier(int rank) override {
      w_.check_self(rank);
      w_.transport_barrier();
    }
    double wait_seconds(int rank) const override { return w_.wait_seconds(rank); }
    int64_t pipeline_floats() const override { return w_.piece_; }

   private:
    MpiWorld& w_;
  };
  WorldTransport transport_{*this};

  class ComposedTransport;
};

}  // namespace easel::mpi_detail
