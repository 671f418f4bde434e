// The composed Comm: the groups of this process (thread per rank, any local Comm), then the
// processes over MPI (one packed message per process and collective), then back. Global rank
// of local group l on process r: r * L + l. For a root at global rank q = (rp, rl):
//   reduce:    local reduce into group rl, then the world reduce of those partials into process rp
//   broadcast: world broadcast among the groups rl, then local broadcast from rl
// The summation order equals the flat binomial tree over R*L ranks when L is a power of two,
// since the tree's first log2(L) rounds then stay inside one process.
#include <vector>

#include "engine/comm/mpi_comm.hpp"

namespace easel {

namespace {

class HierComm final : public Comm {
 public:
  HierComm(std::unique_ptr<Comm> local, std::unique_ptr<Comm> world, int world_rank)
      : local_(std::move(local)),
        world_owned_(std::move(world)),
        world_(*world_owned_),
        world_rank_(world_rank),
        l_(local_->size()),
        base_(world_rank * l_),
        world_wait_(static_cast<size_t>(l_), 0.0) {}

  int size() const override { return l_ * world_.size(); }
  std::string name() const override {
    return "hier(" + local_->name() + " x " + world_.name() + ")";
  }

  void allreduce_sum(int rank, float* buf, int64_t n) override {
    const int l = local_of(rank);
    local_->reduce_sum(l, buf, buf, n, 0);
    if (l == 0) timed(l, [&] { world_.allreduce_sum(world_rank_, buf, n); });
    local_->broadcast(l, buf, n, 0);
  }

  void reduce_sum(int rank, const float* src, float* dst, int64_t n, int root) override {
    const int l = local_of(rank);
    const int rp = root / l_, rl = root % l_;
    if (l != rl) {
      local_->reduce_sum(l, src, dst, n, rl);
      return;
    }
    float* acc = dst;
    if (world_rank_ != rp) {
      acc = scratch_.at_least(n);
    }
    local_->reduce_sum(l, src, acc, n, rl);
    timed(l, [&] { world_.reduce_sum(world_rank_, acc, acc, n, rp); });
  }

  void broadcast(int rank, float* buf, int64_t n, int root) override {
    const int l = local_of(rank);
    const int rp = root / l_, rl = root % l_;
    if (l == rl) timed(l, [&] { world_.broadcast(world_rank_, buf, n, rp); });
    local_->broadcast(l, buf, n, rl);
  }

  // One group a process: the world's compressed allreduce itself (the same bits as one process
  // of as many groups). With several, the groups would sum in fp32 first: refused.
  int64_t allreduce_compressed(int rank, const float* src, float* dst, int64_t n, WireFormat f,
                               float* err) override {
    EASEL_CHECK(compressed_refusal().empty());
    const int l = local_of(rank);
    int64_t sent = 0;
    timed(l, [&] { sent = world_.allreduce_compressed(world_rank_, src, dst, n, f, err); });
    return sent;
  }
  std::string compressed_refusal() const override {
    if (l_ > 1)
      return "with " + std::to_string(l_) +
             " groups a process and no composed transport (--collective mpi, or MPI without "
             "MPI_THREAD_MULTIPLE) the groups would sum in fp32 before the processes compress";
    return world_.compressed_refusal();
  }

  void barrier(int rank) override {
    const int l = local_of(rank);
    local_->barrier(l);
    if (l == 0) timed(l, [&] { world_.barrier(world_rank_); });
    local_->barrier(l);
  }

  double wait_seconds(int rank) const override {
    const int l = local_of(rank);
    return local_->wait_seconds(l) + world_wait_[static_cast<size_t>(l)];
  }

 private:
  int local_of(int rank) const {
    const int l = rank - base_;
    EASEL_CHECK_MSG(l >= 0 && l < l_, "a hierarchical Comm rank is called from another process");
    return l;
  }

  // Adds the world Comm's wait growth during fn to local rank l's wait.
  template <typename Fn>
  void timed(int l, Fn fn) {
    const double w0 = world_.wait_seconds(world_rank_);
    fn();
    world_wait_[static_cast<size_t>(l)] += world_.wait_seconds(world_rank_) - w0;
  }

  std::unique_ptr<Comm> local_;
  std::unique_ptr<Comm> world_owned_;
  Comm& world_;
  const int world_rank_;
  const int l_, base_;
  std::vector<double> world_wait_;  // per local rank, written by that rank's thread
  ScratchFloats scratch_;           // the local root's partial on processes other than the root's
};

}  // namespace

std::unique_ptr<Comm> make_hier_comm(std::unique_ptr<Comm> local, std::unique_ptr<Comm> world,
                                     int world_rank) {
  EASEL_CHECK(local != nullptr && world != nullptr);
  return std::make_unique<HierComm>(std::move(local), std::move(world), world_rank);
}

}  // namespace easel
