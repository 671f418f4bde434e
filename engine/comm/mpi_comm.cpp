// The MPI world (the only file that includes <mpi.h>). Collectives are binomial trees over
// nonblocking point-to-point messages, each wait polled against a deadline that names the peer
// it waits for; MPI errors return (MPI_ERRORS_RETURN) into EASEL_MPI, which names the call.
// The C API only: the deprecated C++ bindings do not compile cleanly with -Werror.
//
// Under SimGrid's SMPI (-Dmpi=smpi) the same code runs, with three differences kept here: every
// wait blocks in MPI_Wait (simulated time; polling would cost a context switch per MPI_Test),
// the deadline is kept by a watchdog actor per rank that sleeps in simulated time, and times
// are MPI_Wtime's (the simulated clock).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "easel_config.h"
#if EASEL_HAVE_SMPI
#include <unistd.h>

#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#endif

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
#include "engine/span_ops.hpp"

namespace easel {

namespace {

[[noreturn]] void mpi_call_failed(const char* call, int rc, const char* file, int line);

// Every MPI call goes through this: a failure prints the call, the MPI error string and
// file:line, then stops the job.
#define EASEL_MPI(call)                                                   \
  do {                                                                    \
    const int easel_mpi_rc_ = (call);                                     \
    if (easel_mpi_rc_ != MPI_SUCCESS)                                     \
      ::easel::mpi_call_failed(#call, easel_mpi_rc_, __FILE__, __LINE__); \
  } while (0)

constexpr int kTagStep = 1, kTagGather = 3;
// run_streams: stream k's messages carry kTagStream + k (below the user tags).
constexpr int kTagStream = 16;
constexpr int kFirstUserTag = 100;
// The composed transport's tags: kFirstComposedTag + sending group * L + receiving group (user
// tags stay below it).
constexpr int kFirstComposedTag = 1 << 14;

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

bool launched_by_mpi() {
#if EASEL_HAVE_SMPI
  return env_set("SMPI_GLOBAL_SIZE");  // exported by smpirun
#else
  return env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMI_SIZE") || env_set("PMIX_RANK");
#endif
}

#if EASEL_HAVE_SMPI
// What a rank is waiting for, read by its watchdog (both run in the simulator's one thread at a
// time, so plain fields do).
struct WaitState {
  bool waiting = false;
  double since = 0;
  int peer = -1;
  const char* what = "";
  const char* verb = nullptr;
  double timeout_s = 0;
};
#endif

double env_seconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  return end != v && d >= 0 ? d : fallback;
}

// EASEL_MPI_FAULT=kind:rank; -1 when absent or for another kind.
int fault_rank(const char* kind) {
  const char* v = std::getenv("EASEL_MPI_FAULT");
  if (v == nullptr) return -1;
  const std::string s(v);
  const std::string prefix = std::string(kind) + ":";
  if (s.rfind(prefix, 0) != 0) return -1;
  return std::atoi(s.c_str() + prefix.size());
}

int checked_count(int64_t n) {
  EASEL_CHECK_MSG(n >= 0 && n <= INT_MAX, "an MPI message is limited to INT_MAX elements");
  return static_cast<int>(n);
}

class MpiWorld final : public MpiComm {
 public:
  explicit MpiWorld(bool thread_multiple) : thread_multiple_(thread_multiple) {
    EASEL_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    EASEL_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    EASEL_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    EASEL_MPI(MPI_Comm_rank(comm_, &rank_));
    EASEL_MPI(MPI_Comm_size(comm_, &size_));
    MPI_Comm node;
    EASEL_MPI(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
    EASEL_MPI(MPI_Comm_rank(node, &local_rank_));
    EASEL_MPI(MPI_Comm_size(node, &local_size_));
    // Node of each rank: the world rank of its node's first rank, numbered in order.
    int first = rank_;
    EASEL_MPI(MPI_Bcast(&first, 1, MPI_INT, 0, node));
    EASEL_MPI(MPI_Comm_free(&node));
    std::vector<int> firsts(static_cast<size_t>(size_));
    EASEL_MPI(MPI_Allgather(&first, 1, MPI_INT, firsts.data(), 1, MPI_INT, comm_));
    const int per_node = static_cast<int>(env_seconds("EASEL_RANKS_PER_NODE", 0));
    node_of_.resize(static_cast<size_t>(size_));
    nodes_ = 0;
    for (int r = 0; r < size_; ++r) {
      if (per_node > 0) {
        node_of_[static_cast<size_t>(r)] = r / per_node;
      } else {
        int k = 0;
        while (firsts[static_cast<size_t>(k)] != firsts[static_cast<size_t>(r)])
          ++k;
        node_of_[static_cast<size_t>(r)] = k == r ? nodes_ : node_of_[static_cast<size_t>(k)];
      }
      if (node_of_[static_cast<size_t>(r)] >= nodes_) nodes_ = node_of_[static_cast<size_t>(r)] + 1;
    }
    piece_ = static_cast<int64_t>(env_seconds("EASEL_MPI_PIECE_MB", 4) * (1 << 20) / 4);
    if (piece_ < 1024) piece_ = 1024;
    timeout_s_ = env_seconds("EASEL_MPI_TIMEOUT", 300);
    stall_ = fault_rank("stall") == rank_;
#if EASEL_HAVE_SMPI
    start_watchdog();
#endif
  }
  ~MpiWorld() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int size() const override {
    return size_;
  }
  int rank() const override {
    return rank_;
  }
  int local_rank() const override {
    return local_rank_;
  }
  int local_size() const override {
    return local_size_;
  }
  bool thread_multiple() const override {
    return thread_multiple_;
  }
  std::string name() const override {
    return "mpi(" + std::to_string(size_) + ")";
  }

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
    int got = 0;
    EASEL_MPI(MPI_Get_count(&st, MPI_FLOAT, &got));
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
  void barrier_native() {
    EASEL_MPI(MPI_Barrier(comm_));
  }

  std::shared_ptr<Transport> transport() override {
    return std::shared_ptr<Transport>(&transport_, [](Transport*) {});  // lives as the world
  }
  std::unique_ptr<Comm> native_comm() override;
  Result<std::shared_ptr<Transport>> composed_transport(int local_groups) override;

  // ---- the transport (WorldTransport forwards here) ----

  int node_of(int rank) const {
    return node_of_[static_cast<size_t>(rank)];
  }
  int nodes() const {
    return nodes_;
  }

  // Posts the steps' sends and receives (each cut into pieces of piece_ floats, in order), then
  // completes the receives piece by piece (adding each as it lands), then the sends.
  void steps(int rank, const Transfer* xs, int count, const char* what) {
    check_self(rank);
    enter();
    std::vector<MPI_Request>& sends = send_reqs_;
    std::vector<MPI_Request>& recvs = recv_reqs_;
    sends.clear();
    recvs.clear();
    int64_t staged = 0;  // the adds' incoming floats, one after another in recv_
    for (int k = 0; k < count; ++k)
      if (xs[k].recv_peer >= 0 && xs[k].op == RecvOp::add) staged += xs[k].recv_n;
    float* stage = recv_.at_least(staged);
    std::vector<float*>& ins = ins_;
    ins.assign(static_cast<size_t>(count), nullptr);
    for (int k = 0; k < count; ++k) {
      const Transfer& x = xs[k];
      if (x.send_peer >= 0)
        for (int64_t b = 0; b < x.send_n || (b == 0 && x.send_n == 0); b += piece_) {
          const int64_t m = std::min(piece_, x.send_n - b);
          sends.emplace_back();
          EASEL_MPI(MPI_Isend(x.send + b, checked_count(m), MPI_FLOAT, x.send_peer, kTagStep, comm_,
                              &sends.back()));
        }
      if (x.recv_peer < 0) continue;
      float* in = x.dst;
      if (x.op == RecvOp::add) {
        in = stage;
        stage += x.recv_n;
      }
      ins[static_cast<size_t>(k)] = in;
      for (int64_t b = 0; b < x.recv_n || (b == 0 && x.recv_n == 0); b += piece_) {
        const int64_t m = std::min(piece_, x.recv_n - b);
        recvs.emplace_back();
        EASEL_MPI(MPI_Irecv(in + b, checked_count(m), MPI_FLOAT, x.recv_peer, kTagStep, comm_,
                            &recvs.back()));
      }
    }
    const bool values = !values_ignored();
    size_t r = 0;
    for (int k = 0; k < count; ++k) {
      const Transfer& x = xs[k];
      if (x.recv_peer < 0) continue;
      const float* in = ins[static_cast<size_t>(k)];
      for (int64_t b = 0; b < x.recv_n || (b == 0 && x.recv_n == 0); b += piece_, ++r) {
        wait_s_ += wait(&recvs[r], nullptr, x.recv_peer, what, timeout_s_, nullptr);
        if (x.op != RecvOp::add || !values) continue;
        const int64_t e = std::min(x.recv_n, b + piece_);
        float* dst = x.dst;
        const float* own = x.own;
#pragma omp simd
        for (int64_t i = b; i < e; ++i)
          dst[i] = own[i] + in[i];
      }
    }
    r = 0;
    for (int k = 0; k < count; ++k) {
      const Transfer& x = xs[k];
      if (x.send_peer < 0) continue;
      for (int64_t b = 0; b < x.send_n || (b == 0 && x.send_n == 0); b += piece_, ++r)
        wait_s_ +=
            wait(&sends[r], nullptr, x.send_peer, what, timeout_s_, "did not take a message");
    }
  }
  void step(int rank, const Transfer& x, const char* what) {
    steps(rank, &x, 1, what);
  }

  // Every stream at its own pace: a stream's next step is posted (its send and receive in
  // pieces, on the stream's own tag) once its previous step is complete and its dependency met;
  // the posted requests of all streams complete in whatever order they do (MPI_Waitany), an add
  // applied to each piece as it lands.
  void run_streams(int rank, const std::vector<Stream>& streams, const char* what) {
    check_self(rank);
    enter();
    const size_t count = streams.size();
    EASEL_CHECK(kTagStream + static_cast<int>(count) <= kFirstUserTag);
    if (stream_stage_.size() < count) stream_stage_.resize(count);
    std::vector<StreamState>& live = stream_state_;
    live.assign(count, StreamState{});
    std::vector<MPI_Request>& reqs = send_reqs_;
    std::vector<StreamRequest>& meta = stream_meta_;
    reqs.clear();
    meta.clear();
    const bool values = !values_ignored();
    auto may_go = [&](size_t k) {
      if (live[k].pending > 0 || live[k].done == streams[k].size()) return false;
      const StreamStep& st = streams[k][live[k].done];
      return st.after_stream < 0 ||
             live[static_cast<size_t>(st.after_stream)].done >= static_cast<size_t>(st.after_count);
    };
    auto post = [&](size_t k) {
      const StreamStep& st = streams[k][live[k].done];
      const Transfer& x = st.x;
      const int tag = kTagStream + static_cast<int>(k);
      if (x.send_peer >= 0)
        for (int64_t b = 0; b < x.send_n || (b == 0 && x.send_n == 0); b += piece_) {
          const int64_t m = std::min(piece_, x.send_n - b);
          reqs.emplace_back();
          EASEL_MPI(MPI_Isend(x.send + b, checked_count(m), MPI_FLOAT, x.send_peer, tag, comm_,
                              &reqs.back()));
          meta.push_back({static_cast<int>(k), false, b, b + m});
          ++live[k].pending;
        }
      if (x.recv_peer >= 0) {
        live[k].in = x.op == RecvOp::add ? stream_stage_[k].at_least(x.recv_n) : x.dst;
        for (int64_t b = 0; b < x.recv_n || (b == 0 && x.recv_n == 0); b += piece_) {
          const int64_t m = std::min(piece_, x.recv_n - b);
          reqs.emplace_back();
          EASEL_MPI(MPI_Irecv(live[k].in + b, checked_count(m), MPI_FLOAT, x.recv_peer, tag, comm_,
                              &reqs.back()));
          meta.push_back({static_cast<int>(k), true, b, b + m});
          ++live[k].pending;
        }
      }
      if (live[k].pending == 0) ++live[k].done;  // an idle step
    };
    for (;;) {
      for (bool moved = true; moved;) {
        moved = false;
        for (size_t k = 0; k < count; ++k)
          while (may_go(k)) {
            post(k);
            moved = true;
          }
      }
      if (reqs.empty()) break;
      // The peer a stall message names: the first pending receive's, else the first send's.
      size_t named = 0;
      while (named + 1 < meta.size() && !meta[named].recv)
        ++named;
      const StreamRequest& nm = meta[named];
      const Transfer& nx =
          streams[static_cast<size_t>(nm.stream)][live[static_cast<size_t>(nm.stream)].done].x;
      int i = 0;
      wait_s_ += wait_any(static_cast<int>(reqs.size()), reqs.data(), &i,
                          nm.recv ? nx.recv_peer : nx.send_peer, what,
                          nm.recv ? nullptr : "did not take a message");
      const StreamRequest r = meta[static_cast<size_t>(i)];
      reqs[static_cast<size_t>(i)] = reqs.back();
      reqs.pop_back();
      meta[static_cast<size_t>(i)] = meta.back();
      meta.pop_back();
      const size_t k = static_cast<size_t>(r.stream);
      const Transfer& x = streams[k][live[k].done].x;
      if (r.recv && x.op == RecvOp::add && values) {
        float* dst = x.dst;
        const float* own = x.own;
        const float* src = live[k].in;
#pragma omp simd
        for (int64_t j = r.b; j < r.e; ++j)
          dst[j] = own[j] + src[j];
      }
      if (--live[k].pending == 0) ++live[k].done;
    }
    for (size_t k = 0; k < count; ++k)
      EASEL_CHECK_MSG(live[k].done == streams[k].size(), "streams that wait on each other");
  }

  // Every rank meets: a zero-length tree reduce and broadcast (each wait names its peer).
  void transport_barrier() {
    enter();
    float dummy = 0;
    tree::reduce(team(), &dummy, &dummy, 0, 0, scratch_);
    tree::broadcast(team(), &dummy, 0, 0);
  }

  [[noreturn]] void abort(const std::string& message, int code) override {
    std::fprintf(stderr, "easel: rank %d: %s\n", rank_, message.c_str());
    std::fflush(stderr);
#if EASEL_HAVE_SMPI
    ::_exit(code == 0 ? 1 : code);  // every rank is in this process: the simulation ends
#else
    MPI_Abort(MPI_COMM_WORLD, code == 0 ? 1 : code);
    std::abort();
#endif
  }

 private:
  void check_self(int rank) const {
    EASEL_CHECK_MSG(rank == rank_, "an MPI Comm is called with the calling process's rank");
  }

  // Fault injection: the stalling rank never arrives.
  void enter() {
#if EASEL_HAVE_SMPI
    while (stall_)
      smpi_sleep(1);  // simulated seconds
#else
    while (stall_)
      std::this_thread::sleep_for(std::chrono::seconds(1));
#endif
  }

  Team team() {
    return Team::all(transport_, rank_);
  }

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
    wait_s_ += wait(&req, nullptr, peer, what, timeout_s_, nullptr);
  }

  // Polls req until done: spins for the first millisecond (each MPI_Test drives the transfer),
  // then yields until 20 ms, then sleeps 50 us between polls (so that ranks sharing a core let
  // the others run). Past the deadline (timeout_s > 0) the job is aborted, naming the peer that
  // did not arrive. Returns the seconds it waited.
  // idle (a server waiting for requests without deadline): sleeps between polls from the start.
  double wait(MPI_Request* req, MPI_Status* st, int peer, const char* what, double timeout_s,
              const char* verb, bool idle = false) {
#if EASEL_HAVE_SMPI
    (void)idle;
    const double w0 = MPI_Wtime();
    wait_state_ = WaitState{true, w0, peer, what, verb, timeout_s};
    EASEL_MPI(MPI_Wait(req, st ? st : MPI_STATUS_IGNORE));
    wait_state_.waiting = false;
    return MPI_Wtime() - w0;
#endif
    const auto t0 = std::chrono::steady_clock::now();
    int done = 0;
    for (int i = 0;; ++i) {
      EASEL_MPI(MPI_Test(req, &done, st ? st : MPI_STATUS_IGNORE));
      if (done) break;
      if (i % 16 != 15) continue;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (timeout_s > 0 && s > timeout_s) stalled(peer, verb, what, s, timeout_s);
      if (!idle && s < 1e-3) continue;
      if (!idle && s < 20e-3)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // Waits until one of reqs[0, count) is done (its index in *index; the request becomes
  // MPI_REQUEST_NULL), polling as wait() does; past the deadline the job is aborted naming
  // `peer`. Returns the seconds it waited.
  double wait_any(int count, MPI_Request* reqs, int* index, int peer, const char* what,
                  const char* verb) {
#if EASEL_HAVE_SMPI
    const double w0 = MPI_Wtime();
    wait_state_ = WaitState{true, w0, peer, what, verb, timeout_s_};
    EASEL_MPI(MPI_Waitany(count, reqs, index, MPI_STATUS_IGNORE));
    wait_state_.waiting = false;
    return MPI_Wtime() - w0;
#endif
    const auto t0 = std::chrono::steady_clock::now();
    int done = 0;
    for (int i = 0;; ++i) {
      EASEL_MPI(MPI_Testany(count, reqs, index, &done, MPI_STATUS_IGNORE));
      if (done) break;
      if (i % 16 != 15) continue;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (timeout_s_ > 0 && s > timeout_s_) stalled(peer, verb, what, s, timeout_s_);
      if (s < 1e-3) continue;
      if (s < 20e-3)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  [[noreturn]] void stalled(int peer, const char* verb, const char* what, double s,
                            double timeout_s) {
    char msg[256];
    if (peer >= 0)
      std::snprintf(msg, sizeof msg,
                    "rank %d %s in %s for %.0f s (it stalled or died; EASEL_MPI_TIMEOUT=%g); "
                    "stopping the job",
                    peer, verb ? verb : "sent no message", what, s, timeout_s);
    else
      std::snprintf(msg, sizeof msg, "no rank sent a message in %s for %.0f s; stopping the job",
                    what, s);
    abort(msg, 3);
  }

#if EASEL_HAVE_SMPI
  // A daemon actor on this rank's host: idle, it looks at the rank every 1/64 of the deadline
  // (simulated); during a wait it sleeps to the wait's deadline and, past it, names the peer
  // and ends the simulation.
  // Daemons do not keep the simulation alive once every rank has returned.
  void start_watchdog() {
    const double period = std::max(timeout_s_ / 64, 1e-3);
    WaitState* ws = &wait_state_;
    const int self = rank_;
    simgrid::s4u::ActorPtr a = simgrid::s4u::Actor::create(
        "easel-watchdog-" + std::to_string(rank_), simgrid::s4u::this_actor::get_host(),
        [ws, self, period] {
          for (;;) {
            if (!ws->waiting || ws->timeout_s <= 0) {
              simgrid::s4u::this_actor::sleep_for(period);
              continue;
            }
            // Wake exactly at this wait's deadline: the rank that began waiting first (on the
            // one that stalled) is the first to report, as with real clocks.
            const double s = simgrid::s4u::Engine::get_clock() - ws->since;
            if (s < ws->timeout_s) {
              simgrid::s4u::this_actor::sleep_for(ws->timeout_s - s + 1e-9);
              continue;
            }
            if (ws->peer >= 0)
              std::fprintf(stderr,
                           "easel: rank %d: rank %d %s in %s for %.0f simulated s (it stalled or "
                           "died; EASEL_MPI_TIMEOUT=%g); stopping the simulation\n",
                           self, ws->peer, ws->verb ? ws->verb : "sent no message", ws->what, s,
                           ws->timeout_s);
            else
              std::fprintf(stderr,
                           "easel: rank %d: no rank sent a message in %s for %.0f simulated s; "
                           "stopping the simulation\n",
                           self, ws->what, s);
            std::fflush(stderr);
            ::_exit(3);
          }
        });
    a->daemonize();
  }
  WaitState wait_state_;
#endif
  bool thread_multiple_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  double timeout_s_ = 300;
  bool stall_ = false;
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

// This process's L groups and every other process's as one transport of R * L ranks (global rank
// process * L + group). A step's peers in this process go through the shared-memory transport
// (its rendezvous, no copy); the others through MPI on the world's communicator, tagged by the
// pair of groups (kFirstComposedTag + sending group * L + receiving group), so that each ordered
// pair of groups is one stream of messages in posting order. (Not a communicator of its own:
// MPI_Comm_dup waits without a deadline, and a stalled rank must be named.) A step posts its MPI
// sends and receives (in pieces, as the world's), then runs the shared-memory part, then completes
// the MPI receives (adding each piece as it lands) and sends. Each group's thread calls MPI itself
// (MPI_THREAD_MULTIPLE).
class MpiWorld::ComposedTransport final : public Transport {
 public:
  ComposedTransport(MpiWorld& w, int local_groups)
      : w_(w), l_(local_groups), per_group_(static_cast<size_t>(local_groups)) {
    ShmOptions o;
    o.first_group = w.rank() * l_;
    shm_ = make_shm_transport(l_, o);
  }

  int size() const override { return w_.size() * l_; }
  std::string name() const override { return "shm(" + std::to_string(l_) + ") x " + w_.name(); }
  int node_of(int rank) const override { return w_.node_of(rank / l_); }
  int nodes() const override { return w_.nodes(); }
  int first_local() const override { return w_.rank() * l_; }
  int local_size() const override { return l_; }
  int64_t pipeline_floats() const override { return w_.piece_; }

  void step(int rank, const Transfer& x, const char* what) override {
    const int l = local_of(rank);
    w_.enter();
    Group& g = per_group_[static_cast<size_t>(l)];
    g.sends.clear();
    g.recvs.clear();
    Transfer mine;  // the part between groups of this process, in its local numbers
    const int64_t piece = w_.piece_;
    if (x.send_peer >= 0) {
      if (process_of(x.send_peer) == w_.rank()) {
        mine.send_peer = x.send_peer % l_;
        mine.send = x.send;
        mine.send_n = x.send_n;
      } else {
        for (int64_t b = 0; b < x.send_n || (b == 0 && x.send_n == 0); b += piece) {
          g.sends.emplace_back();
          EASEL_MPI(MPI_Isend(x.send + b, checked_count(std::min(piece, x.send_n - b)), MPI_FLOAT,
                              process_of(x.send_peer), tag(l, x.send_peer % l_), w_.comm_,
                              &g.sends.back()));
        }
      }
    }
    const bool add = x.op == RecvOp::add;
    float* in = nullptr;
    if (x.recv_peer >= 0) {
      if (process_of(x.recv_peer) == w_.rank()) {
        mine.recv_peer = x.recv_peer % l_;
        mine.dst = x.dst;
        mine.own = x.own;
        mine.recv_n = x.recv_n;
        mine.op = x.op;
      } else {
        in = add ? g.staging.at_least(x.recv_n) : x.dst;
        for (int64_t b = 0; b < x.recv_n || (b == 0 && x.recv_n == 0); b += piece) {
          g.recvs.emplace_back();
          EASEL_MPI(MPI_Irecv(in + b, checked_count(std::min(piece, x.recv_n - b)), MPI_FLOAT,
                              process_of(x.recv_peer), tag(x.recv_peer % l_, l), w_.comm_,
                              &g.recvs.back()));
        }
      }
    }
    if (mine.send_peer >= 0 || mine.recv_peer >= 0) shm_->step(l, mine, what);
    const bool values = !values_ignored();
    for (size_t k = 0; k < g.recvs.size(); ++k) {
      g.wait_s +=
          w_.wait(&g.recvs[k], nullptr, process_of(x.recv_peer), what, w_.timeout_s_, nullptr);
      if (!add || !values) continue;
      const int64_t b = static_cast<int64_t>(k) * piece, e = std::min(x.recv_n, b + piece);
      float* dst = x.dst;
      const float* own = x.own;
#pragma omp simd
      for (int64_t i = b; i < e; ++i)
        dst[i] = own[i] + in[i];
    }
    for (MPI_Request& r : g.sends)
      g.wait_s += w_.wait(&r, nullptr, process_of(x.send_peer), what, w_.timeout_s_,
                          "did not take a message");
  }

  // The process's groups meet, its group 0 meets the other processes', then they all leave.
  void barrier(int rank) override {
    const int l = local_of(rank);
    shm_->barrier(l);
    if (l == 0) {
      const double w0 = w_.wait_s_;
      w_.transport_barrier();
      per_group_[0].wait_s += w_.wait_s_ - w0;
    }
    shm_->barrier(l);
  }

  double wait_seconds(int rank) const override {
    const int l = local_of(rank);
    return shm_->wait_seconds(l) + per_group_[static_cast<size_t>(l)].wait_s;
  }

 private:
  struct alignas(64) Group {  // each used by its group's thread only
    std::vector<MPI_Request> sends, recvs;
    ScratchFloats staging;  // a remote add's incoming floats
    double wait_s = 0;
  };

  int local_of(int rank) const {
    const int l = rank - first_local();
    EASEL_CHECK_MSG(l >= 0 && l < l_, "a composed transport rank is called from another process");
    return l;
  }
  int process_of(int rank) const {
    return rank / l_;
  }
  int tag(int from, int to) const {
    return kFirstComposedTag + from * l_ + to;
  }

  MpiWorld& w_;
  const int l_;
  std::unique_ptr<Transport> shm_;
  std::vector<Group> per_group_;
};

Result<std::shared_ptr<Transport>> MpiWorld::composed_transport(int local_groups) {
  EASEL_CHECK(local_groups >= 1);
#if EASEL_HAVE_SMPI
  return unavailable("the composed shm+MPI transport: SMPI runs one thread per simulated rank");
#else
  if (!thread_multiple_)
    return unavailable(
        "the composed shm+MPI transport: the MPI library does not provide MPI_THREAD_MULTIPLE");
  void* ub = nullptr;
  int found = 0;
  EASEL_MPI(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &found));
  const int64_t max_tag = found ? *static_cast<int*>(ub) : 32767;
  if (kFirstComposedTag + int64_t{local_groups} * local_groups > max_tag)
    return unavailable("the composed shm+MPI transport: " + std::to_string(local_groups) +
                       " groups per process need more MPI tags than the library's " +
                       std::to_string(max_tag));
  return std::shared_ptr<Transport>(std::make_shared<ComposedTransport>(*this, local_groups));
#endif
}

// --collective mpi: the library's own collectives among the processes.
class NativeComm final : public Comm {
 public:
  explicit NativeComm(MpiWorld& w) : w_(w) {}
  int size() const override { return w_.size(); }
  std::string name() const override { return "mpi-native(" + std::to_string(w_.size()) + ")"; }
  void allreduce_sum(int rank, float* buf, int64_t n) override {
    timed(rank, [&] { w_.allreduce_sum_native(buf, n); });
  }
  void reduce_sum(int rank, const float* src, float* dst, int64_t n, int root) override {
    timed(rank, [&] { w_.reduce_sum_native(src, dst, n, root); });
  }
  void broadcast(int rank, float* buf, int64_t n, int root) override {
    timed(rank, [&] { w_.broadcast_native(buf, n, root); });
  }
  void barrier(int rank) override {
    timed(rank, [&] { w_.barrier_native(); });
  }
  // A blocking library call does not tell waiting from moving: none is counted as wait.
  double wait_seconds(int) const override { return 0; }

 private:
  template <typename Fn>
  void timed(int rank, Fn fn) {
    EASEL_CHECK_MSG(rank == w_.rank(), "an MPI Comm is called with the calling process's rank");
    fn();
  }
  MpiWorld& w_;
};

std::unique_ptr<Comm> MpiWorld::native_comm() {
  return std::make_unique<NativeComm>(*this);
}

std::unique_ptr<MpiWorld>& world_slot() {
  static std::unique_ptr<MpiWorld> w;
  return w;
}

void mpi_call_failed(const char* call, int rc, const char* file, int line) {
  char err[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, err, &len);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "easel: rank %d: %s failed: %s at %s:%d; stopping the job\n", rank, call,
               err, file, line);
  std::fflush(stderr);
#if EASEL_HAVE_SMPI
  ::_exit(3);
#else
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();
#endif
}

}  // namespace

Status mpi_start(int* argc, char*** argv) {
  if (world_slot() || !launched_by_mpi()) return {};
  int provided = MPI_THREAD_SINGLE;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    return unavailable("MPI_Init_thread failed (launched by mpirun, but MPI did not start)");
  world_slot() = std::make_unique<MpiWorld>(provided >= MPI_THREAD_MULTIPLE);
  // Injected compute: the values are not computed, so neither are the exchange's O(n) passes.
  set_values_ignored(sim_injected_flops() > 0);
  return {};
}

int mpi_finish(int exit_code) {
  auto& w = world_slot();
  if (!w) return exit_code;
  if (exit_code != 0 && w->size() > 1)
    w->abort("exited with code " + std::to_string(exit_code) + "; stopping the job", exit_code);
#if EASEL_HAVE_SMPI
  // tools/simulate reads this line: the simulated seconds of the whole run on rank 0's clock.
  if (w->rank() == 0)
    std::fprintf(stderr, "easel: simulated %d ranks under SMPI, compute %s: %.6f simulated s\n",
                 w->size(), sim_injected_flops() > 0 ? "model (injected)" : "real (timed)",
                 MPI_Wtime());
#endif
  w.reset();
  MPI_Finalize();
  return exit_code;
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
#if EASEL_HAVE_SMPI
  static const double flops = [] {
    const char* v = std::getenv("EASEL_SIM_STEP_FLOPS");
    if (v == nullptr || *v == '\0') return 0.0;
    char* end = nullptr;
    const double f = std::strtod(v, &end);
    return end != v && *end == '\0' && f > 0 ? f : 0.0;
  }();
  return world_slot() ? flops : 0;
#else
  return 0;
#endif
}

bool sim_inject_step() {
#if EASEL_HAVE_SMPI
  const double f = sim_injected_flops();
  if (f <= 0) return false;
  smpi_execute_flops(f);
  return true;
#else
  return false;
#endif
}

double sim_clock_seconds() {
#if EASEL_HAVE_SMPI
  // Only a rank's own actor has a simulated clock (not a library's helper thread).
  if (world_slot() && simgrid::s4u::Actor::self() != nullptr) return MPI_Wtime();
#endif
  return -1;
}

bool mpi_fault_fail() {
  return world_slot() && fault_rank("fail") == world_slot()->rank();
}

}  // namespace easel

#if EASEL_HAVE_SMPI
// Simulated with injected compute (tools/simulate --compute model): every large allocation of a
// rank (std::vector arenas, the Comm's scratch, the evaluation copy) takes SMPI's shared
// malloc, whose pages all ranks share (smpi/shared-malloc:global), so hundreds of ranks of a
// 233 MB net fit; their values do not matter then. Only allocations made by a rank's own actor
// and only while compute is injected; the program is linked -Bsymbolic-functions so that its
// own code calls these. A registry tells a shared block at delete.
#include <mutex>
#include <new>
#include <unordered_set>

namespace {

// 16 MB and more: the arenas' vectors (the Comm's scratch, an arena's copies), whose values do
// not matter. Not the 1 MB compressed-input chunk of an IDX file: zlib's input shared between
// ranks that interleave (a rank yields at MPI_Wtime) read as 'corrupt gzip stream' (Fashion-MNIST
// under --compute model); control data must stay private.
constexpr size_t kSharedFrom = size_t{16} << 20;

// The registry's own nodes come from malloc, not from the operator new below: erase() frees a
// node while the lock is held, and through sim_delete that would take the lock again (the
// self-deadlock that stopped model runs of nets with blocks of 1 MB or more at their first
// free, e.g. alexnet-cifar in build_run).
template <class T>
struct MallocAllocator {
  using value_type = T;
  MallocAllocator() = default;
  template <class U>
  MallocAllocator(const MallocAllocator<U>&) {}
  T* allocate(size_t n) {
    if (void* p = std::malloc(n * sizeof(T))) return static_cast<T*>(p);
    throw std::bad_alloc();
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const MallocAllocator<U>&) const {
    return true;
  }
};

struct SharedBlocks {
  std::mutex mu;
  std::unordered_set<void*, std::hash<void*>, std::equal_to<void*>, MallocAllocator<void*>> set;
};
SharedBlocks& shared_blocks() {
  static SharedBlocks* b = new SharedBlocks;  // never destroyed: deletes may come late
  return *b;
}

bool injecting() {
  static const bool on = [] {
    const char* v = std::getenv("EASEL_SIM_STEP_FLOPS");
    return v != nullptr && std::strtod(v, nullptr) > 0;
  }();
  return on;
}

void* sim_new(size_t bytes, size_t align, bool nothrow) {
  if (bytes >= kSharedFrom && align <= 4096 && injecting() &&
      simgrid::s4u::Actor::self() != nullptr) {
    void* p = smpi_shared_malloc(bytes, __FILE__, __LINE__);
    if (p != nullptr) {
      SharedBlocks& b = shared_blocks();
      std::lock_guard lock(b.mu);
      b.set.insert(p);
      return p;
    }
  }
  void* p = nullptr;
  if (align <= alignof(std::max_align_t))
    p = std::malloc(bytes == 0 ? 1 : bytes);
  else if (posix_memalign(&p, align, bytes == 0 ? align : bytes) != 0)
    p = nullptr;
  if (p == nullptr && !nothrow) throw std::bad_alloc();
  return p;
}

void sim_delete(void* p) {
  if (p == nullptr) return;
  if (injecting()) {
    SharedBlocks& b = shared_blocks();
    std::unique_lock lock(b.mu);
    if (b.set.erase(p) != 0) {
      lock.unlock();
      smpi_shared_free(p);
      return;
    }
  }
  std::free(p);
}

}  // namespace

void* operator new(size_t n) {
  return sim_new(n, 0, false);
}
void* operator new[](size_t n) {
  return sim_new(n, 0, false);
}
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  return sim_new(n, 0, true);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  return sim_new(n, 0, true);
}
void* operator new(size_t n, std::align_val_t a) {
  return sim_new(n, static_cast<size_t>(a), false);
}
void* operator new[](size_t n, std::align_val_t a) {
  return sim_new(n, static_cast<size_t>(a), false);
}
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return sim_new(n, static_cast<size_t>(a), true);
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return sim_new(n, static_cast<size_t>(a), true);
}
void operator delete(void* p) noexcept {
  sim_delete(p);
}
void operator delete[](void* p) noexcept {
  sim_delete(p);
}
void operator delete(void* p, size_t) noexcept {
  sim_delete(p);
}
void operator delete[](void* p, size_t) noexcept {
  sim_delete(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  sim_delete(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  sim_delete(p);
}
void operator delete(void* p, size_t, std::align_val_t) noexcept {
  sim_delete(p);
}
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  sim_delete(p);
}
#endif  // EASEL_HAVE_SMPI
