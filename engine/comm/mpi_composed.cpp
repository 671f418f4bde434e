// The composed shm+MPI transport (MpiWorld::composed_transport, engine/comm/mpi_comm.hpp).
#include <string>

#include "engine/comm/mpi_world.hpp"

namespace easel::mpi_detail {

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
      const int64_t b = static_cast<int64_t>(k) * piece, e = std::min(x.recv_n, b + piece);
      g.wait_s += w_.wait_recv(&g.recvs[k], MPI_FLOAT, e - b, process_of(x.recv_peer), what);
      if (!add || !values) continue;
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
  if (smpi::built())
    return unavailable("the composed shm+MPI transport: SMPI runs one thread per simulated rank");
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
}

}  // namespace easel::mpi_detail
