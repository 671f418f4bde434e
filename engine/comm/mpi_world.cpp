// The MPI world's transfers, waits and deadlines (mpi_world.hpp), and --collective mpi's Comm.
#include "engine/comm/mpi_world.hpp"

#include <unistd.h>

namespace easel::mpi_detail {

MpiWorld::MpiWorld(bool thread_multiple) : thread_multiple_(thread_multiple) {
  EASEL_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  EASEL_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
  EASEL_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  EASEL_MPI(MPI_Comm_rank(comm_, &rank_));
  EASEL_MPI(MPI_Comm_size(comm_, &size_));
}

void MpiWorld::steps(int rank, const Transfer* xs, int count, const char* what) {
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
      for_pieces(x.send_n, [&](int64_t b, int64_t m) {
        sends.emplace_back();
        EASEL_MPI(MPI_Isend(x.send + b, checked_count(m), MPI_FLOAT, x.send_peer, kTagStep, comm_,
                            &sends.back()));
      });
    if (x.recv_peer < 0) continue;
    float* in = x.dst;
    if (x.op == RecvOp::add) {
      in = stage;
      stage += x.recv_n;
    }
    ins[static_cast<size_t>(k)] = in;
    for_pieces(x.recv_n, [&](int64_t b, int64_t m) {
      recvs.emplace_back();
      EASEL_MPI(MPI_Irecv(in + b, checked_count(m), MPI_FLOAT, x.recv_peer, kTagStep, comm_,
                          &recvs.back()));
    });
  }
  const bool values = !values_ignored();
  size_t r = 0;
  for (int k = 0; k < count; ++k) {
    const Transfer& x = xs[k];
    if (x.recv_peer < 0) continue;
    const float* in = ins[static_cast<size_t>(k)];
    for_pieces(x.recv_n, [&](int64_t b, int64_t m) {
      wait_s_ += wait_recv(&recvs[r++], MPI_FLOAT, m, x.recv_peer, what);
      if (x.op != RecvOp::add || !values) return;
      float* dst = x.dst;
      const float* own = x.own;
#pragma omp simd
      for (int64_t i = b; i < b + m; ++i)
        dst[i] = own[i] + in[i];
    });
  }
  r = 0;
  for (int k = 0; k < count; ++k) {
    const Transfer& x = xs[k];
    if (x.send_peer < 0) continue;
    for_pieces(x.send_n, [&](int64_t, int64_t) {
      wait_s_ +=
          wait(&sends[r++], nullptr, x.send_peer, what, timeout_s_, "did not take a message");
    });
  }
}

// Posts stream k's next step `x`: its sends and receives, piece by piece, on the stream's tag.
void MpiWorld::post_stream_step(size_t k, const Transfer& x) {
  std::vector<StreamState>& live = stream_state_;
  const int tag = kTagStream + static_cast<int>(k);
  if (x.send_peer >= 0)
    for_pieces(x.send_n, [&](int64_t b, int64_t m) {
      send_reqs_.emplace_back();
      EASEL_MPI(MPI_Isend(x.send + b, checked_count(m), MPI_FLOAT, x.send_peer, tag, comm_,
                          &send_reqs_.back()));
      stream_meta_.push_back({static_cast<int>(k), false, b, b + m});
      ++live[k].pending;
    });
  if (x.recv_peer >= 0) {
    live[k].in = x.op == RecvOp::add ? stream_stage_[k].at_least(x.recv_n) : x.dst;
    for_pieces(x.recv_n, [&](int64_t b, int64_t m) {
      send_reqs_.emplace_back();
      EASEL_MPI(MPI_Irecv(live[k].in + b, checked_count(m), MPI_FLOAT, x.recv_peer, tag, comm_,
                          &send_reqs_.back()));
      stream_meta_.push_back({static_cast<int>(k), true, b, b + m});
      ++live[k].pending;
    });
  }
  if (live[k].pending == 0) ++live[k].done;  // an idle step
}

void MpiWorld::run_streams(int rank, const std::vector<Stream>& streams, const char* what) {
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
  for (;;) {
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t k = 0; k < count; ++k)
        while (may_go(k)) {
          post_stream_step(k, streams[k][live[k].done].x);
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
    MPI_Status status;
    wait_s_ += wait_any(static_cast<int>(reqs.size()), reqs.data(), &i, &status,
                        nm.recv ? nx.recv_peer : nx.send_peer, what,
                        nm.recv ? nullptr : "did not take a message");
    const StreamRequest r = meta[static_cast<size_t>(i)];
    reqs[static_cast<size_t>(i)] = reqs.back();
    reqs.pop_back();
    meta[static_cast<size_t>(i)] = meta.back();
    meta.pop_back();
    const size_t k = static_cast<size_t>(r.stream);
    const Transfer& x = streams[k][live[k].done].x;
    if (r.recv) check_count(status, MPI_FLOAT, r.e - r.b, x.recv_peer, what);
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

void MpiWorld::abort(const std::string& message, int code) {
  std::fprintf(stderr, "easel: rank %d: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  if (smpi::built()) ::_exit(code == 0 ? 1 : code);  // every rank is in this process: it ends
  MPI_Abort(MPI_COMM_WORLD, code == 0 ? 1 : code);
  std::abort();
}

template <class Block, class Test>
double MpiWorld::wait_until(int peer, const char* what, double timeout_s, const char* verb,
                            bool idle, Block block, Test test) {
  if (smpi::built()) {  // simulated time: block, the watchdog keeps the deadline
    const double w0 = MPI_Wtime();
    wait_state_ = smpi::WaitState{true, w0, peer, what, verb, timeout_s};
    block();
    wait_state_.waiting = false;
    return MPI_Wtime() - w0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; !test(); ++i) {
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

double MpiWorld::wait(MPI_Request* req, MPI_Status* st, int peer, const char* what,
                      double timeout_s, const char* verb, bool idle) {
  MPI_Status* status = st ? st : MPI_STATUS_IGNORE;
  if (st) st->MPI_ERROR = MPI_SUCCESS;  // a single completion need not set it
  return wait_until(
      peer, what, timeout_s, verb, idle, [&] { EASEL_MPI_COMPLETE(MPI_Wait(req, status), status); },
      [&] {
        int done = 0;
        EASEL_MPI_COMPLETE(MPI_Test(req, &done, status), status);
        return done != 0;
      });
}

double MpiWorld::wait_any(int count, MPI_Request* reqs, int* index, MPI_Status* st, int peer,
                          const char* what, const char* verb) {
  st->MPI_ERROR = MPI_SUCCESS;
  return wait_until(
      peer, what, timeout_s_, verb, false,
      [&] { EASEL_MPI_COMPLETE(MPI_Waitany(count, reqs, index, st), st); },
      [&] {
        int done = 0;
        EASEL_MPI_COMPLETE(MPI_Testany(count, reqs, index, &done, st), st);
        return done != 0;
      });
}

int64_t MpiWorld::check_count(const MPI_Status& st, MPI_Datatype type, int64_t expected, int peer,
                              const char* what, bool exact) {
  int cls = MPI_SUCCESS;
  if (st.MPI_ERROR != MPI_SUCCESS) MPI_Error_class(st.MPI_ERROR, &cls);
  int got = 0;
  if (cls != MPI_ERR_TRUNCATE) {
    EASEL_MPI(MPI_Get_count(&st, type, &got));
    if (got != MPI_UNDEFINED && (got == expected || (!exact && got <= expected))) return got;
  }
  const std::string unit = type == MPI_BYTE ? " bytes" : " floats";
  std::string sent = std::to_string(got) + unit;
  if (cls == MPI_ERR_TRUNCATE)
    sent = "more than " + std::to_string(expected) + unit;
  else if (got == MPI_UNDEFINED)
    sent = "no whole number of" + unit;
  abort("rank " + std::to_string(peer) + " sent " + sent + " in " + what +
            " where the plan expects " + (exact ? "" : "at most ") + std::to_string(expected) +
            ": the ranks do not run the same plan; stopping the job",
        2);
}

void MpiWorld::stalled(int peer, const char* verb, const char* what, double s, double timeout_s) {
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

void mpi_call_failed(const char* call, int rc, const char* file, int line) {
  char err[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, err, &len);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "easel: rank %d: %s failed: %s at %s:%d; stopping the job\n", rank, call,
               err, file, line);
  std::fflush(stderr);
  if (smpi::built()) ::_exit(3);  // every rank is in this process: the simulation ends
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();
}

}  // namespace easel::mpi_detail
