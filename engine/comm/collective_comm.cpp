// A Comm that runs one collective algorithm (engine/comm/collectives/) over a transport: the
// only place that maps a Comm call to an algorithm's function (its row's, collectives/list.cpp).
// Every rank of this process keeps its own scratch.
#include <vector>

#include "engine/comm/collectives/compressed_ring.hpp"
#include "engine/comm/collectives/list.hpp"
#include "engine/comm/collectives/team.hpp"
#include "engine/comm/comm.hpp"
#include "engine/comm/transport.hpp"
#include "engine/trace.hpp"

namespace easel {

void ScratchFloats::grow_on_device(int64_t n) {
  auto b = Buffer::allocate(static_cast<size_t>(n) * sizeof(float), MemKind::device);
  EASEL_CHECK_MSG(b.ok(), ("a Comm's scratch on the device: " + b.status().message()).c_str());
  device_ = std::move(b).value();
}

namespace {

class CollectiveComm final : public Comm {
 public:
  CollectiveComm(std::shared_ptr<Transport> t, CollectiveAlgo algo, CollectiveAlgo inter)
      : t_(std::move(t)), e_(collective_entry(algo)), inter_(inter), scratch_() {
    for (int l = 0; l < t_->local_size(); ++l) {
      teams_.push_back(Team::all(*t_, t_->first_local() + l));
      scratch_.emplace_back(t_->scratch_on_device());
    }
    EASEL_CHECK_MSG(e_.allreduce != nullptr,
                    "a collective Comm runs one of the algorithms over its transport");
    EASEL_CHECK(collective_entry(inter).allreduce_steps != nullptr);  // ring or halving-doubling
  }

  int size() const override { return t_->size(); }
  std::string name() const override {
    std::string n = e_.name;
    if (e_.takes_inter) n += std::string("/") + collective_algo_name(inter_);
    return n + " over " + t_->name();
  }

  void allreduce_sum(int rank, float* buf, int64_t n) override {
    const Team& team = team_of(rank);
    if (size() == 1 || n == 0) return;
    e_.allreduce(team, buf, n, scratch(rank), inter_);
  }

  void reduce_sum(int rank, const float* src, float* dst, int64_t n, int root) override {
    check_root(root);
    const Team& team = team_of(rank);
    if (n == 0) return;
    e_.reduce(team, src, dst, n, root, scratch(rank), inter_);
  }

  void broadcast(int rank, float* buf, int64_t n, int root) override {
    check_root(root);
    const Team& team = team_of(rank);
    if (size() == 1 || n == 0) return;
    e_.broadcast(team, buf, n, root, inter_);
  }

  // Every algorithm's compressed form is the compressed ring (the reductions re-encode at each
  // hop, so the order of hops is the accuracy: the ring's p - 1 per chunk, never more).
  int64_t allreduce_compressed(int rank, const float* src, float* dst, int64_t n, WireFormat f,
                               float* err) override {
    EASEL_CHECK(compressed_refusal().empty());
    return compressed_ring::allreduce(team_of(rank), src, dst, n, f, scratch(rank), err);
  }
  std::string compressed_refusal() const override {
    if (t_->scratch_on_device())
      return "the groups sharing a GPU (" + t_->name() +
             ") add fp32 spans with device kernels; the compressed ring encodes on the host";
    return "";
  }

  void barrier(int rank) override { t_->barrier(rank); }

  double wait_seconds(int rank) const override { return t_->wait_seconds(rank); }

 private:
  void check_root(int root) const { EASEL_CHECK(root >= 0 && root < size()); }
  int local_of(int rank) const {
    const int l = rank - t_->first_local();
    EASEL_CHECK_MSG(l >= 0 && l < t_->local_size(), "a Comm rank is called from another process");
    return l;
  }
  ScratchFloats& scratch(int rank) { return scratch_[static_cast<size_t>(local_of(rank))]; }
  const Team& team_of(int rank) const { return teams_[static_cast<size_t>(local_of(rank))]; }

  std::shared_ptr<Transport> t_;
  const CollectiveEntry& e_;  // the algorithm's row
  const CollectiveAlgo inter_;
  std::vector<ScratchFloats> scratch_;  // [local rank], each owned by its rank's thread
  std::vector<Team> teams_;             // [local rank]: all ranks, seen from that one
};

}  // namespace

std::unique_ptr<Comm> make_collective_comm(std::shared_ptr<Transport> transport,
                                           CollectiveAlgo algo, CollectiveAlgo inter) {
  EASEL_CHECK(transport != nullptr);
  return std::make_unique<CollectiveComm>(std::move(transport), algo, inter);
}

std::unique_ptr<Comm> make_shm_comm(int size, CollectiveAlgo algo, double spin_seconds) {
  EASEL_CHECK_MSG(size >= 1, "a Comm needs at least one rank");
  return make_collective_comm(make_shm_transport(size, spin_seconds), algo);
}

}  // namespace easel
