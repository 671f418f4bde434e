// The MPI world's start (MpiWorld::start, mpi_world.hpp): the run's variables agreed from rank 0's
// environment (engine/comm/run_env.hpp), then the nodes, the pieces, the deadline and the faults
// they give.
#include <cmath>

#include "engine/comm/collective_cost.hpp"
#include "engine/comm/mpi_world.hpp"
#include "engine/comm/run_env.hpp"
#include "engine/log.hpp"

namespace easel::mpi_detail {

namespace {

// EASEL_FAULT (kInjected) is read where a group steps (engine/fault.hpp), not here.
constexpr size_t kPiece = 0, kPerNode = 1, kLinks = 2, kTimeout = 3, kFault = 4, kInjected = 5;
static_assert(kInjected + 1 == kRunEnvNames.size());

// The largest piece: 4096 MB of floats stays below INT_MAX elements (checked_count).
constexpr double kMaxPieceMb = 4096;

// This process's own value of each variable ("" for unset or set to "").
std::vector<std::string> own_values() {
  std::vector<std::string> v;
  for (const char* name : kRunEnvNames) {
    const char* s = std::getenv(name);
    v.emplace_back(s != nullptr ? s : "");
  }
  return v;
}

// `s` on every rank as it is on `root` (no deadline: every rank is at the world's start).
void broadcast_string(std::string* s, int root, MPI_Comm comm) {
  int n = static_cast<int>(s->size());
  EASEL_MPI(MPI_Bcast(&n, 1, MPI_INT, root, comm));
  s->resize(static_cast<size_t>(n));
  EASEL_MPI(MPI_Bcast(s->data(), n, MPI_CHAR, root, comm));
}

// Rank 0's values on every rank (each value then '\0': an environment value holds none).
std::vector<std::string> rank0_values(const std::vector<std::string>& own, int rank,
                                      MPI_Comm comm) {
  std::string packed;
  if (rank == 0)
    for (const std::string& v : own)
      packed.append(v).push_back('\0');
  broadcast_string(&packed, 0, comm);
  std::vector<std::string> run;
  for (size_t at = 0; run.size() < kRunEnvNames.size(); at = packed.find('\0', at) + 1)
    run.emplace_back(packed.c_str() + at);
  return run;
}

// "" when each of this rank's own values is rank 0's or unset (a rank without one takes rank
// 0's, as mpirun -x would have given it), else the first that differs, naming both ranks' values.
std::string differing(const std::vector<std::string>& own, const std::vector<std::string>& run,
                      int rank) {
  for (size_t i = 0; i < own.size(); ++i) {
    if (own[i].empty() || own[i] == run[i]) continue;
    const std::string name = kRunEnvNames[i];
    return name + "='" + own[i] + "' on rank " + std::to_string(rank) + ", but " +
           (run[i].empty() ? "rank 0 does not set it" : "'" + run[i] + "' on rank 0") +
           ": rank 0's values are the run's; set " + name + " alike on every rank (mpirun -x " +
           name + "=VALUE) or on rank 0 only";
  }
  return "";
}

// The whole of `v` as a finite number.
bool number(const std::string& v, double* out) {
  char* end = nullptr;
  *out = std::strtod(v.c_str(), &end);
  return end != v.c_str() && *end == '\0' && std::isfinite(*out);
}

// The run's values parsed into *s; "" when each is well formed, else the one line naming the
// first that is not.
std::string parse(const std::vector<std::string>& run, int ranks, WorldSettings* s) {
  double d = 0;
  auto bad = [&](size_t i, const char* expected) {
    return std::string(kRunEnvNames[i]) + "='" + run[i] + "' is not " + expected;
  };
  if (!run[kPiece].empty()) {
    if (!number(run[kPiece], &d) || d <= 0 || d > kMaxPieceMb)
      return bad(kPiece,
                 "a number of MB above 0 and at most 4096 (the pieces MPI messages are "
                 "cut into; default 4)");
    s->piece_mb = d;
  }
  if (!run[kPerNode].empty()) {
    if (!number(run[kPerNode], &d) || d < 1 || d > ranks || d != std::floor(d))
      return bad(kPerNode, ("a whole number of ranks from 1 to " + std::to_string(ranks) +
                            " (the ranks a node holds; unset: the ranks sharing memory)")
                               .c_str());
    s->ranks_per_node = static_cast<int>(d);
  }
  LinkCost intra, inter;
  std::string error;
  if (!parse_collective_links(run[kLinks].c_str(), &intra, &inter, &error)) return error;
  if (!run[kTimeout].empty()) {
    if (!number(run[kTimeout], &d) || d < 0)
      return bad(kTimeout,
                 "a number of seconds >= 0 (how long a rank waits for a peer; 0: "
                 "without end; default 300)");
    s->timeout_s = d;
  }
  if (!run[kFault].empty()) {
    const std::string& f = run[kFault];
    const size_t colon = f.find(':');
    s->fault = f.substr(0, colon == std::string::npos ? 0 : colon);
    if ((s->fault != "stall" && s->fault != "fail") || !number(f.substr(colon + 1), &d) || d < 0 ||
        d >= ranks || d != std::floor(d))
      return bad(kFault,
                 ("stall:RANK or fail:RANK, RANK from 0 to " + std::to_string(ranks - 1)).c_str());
    s->fault_rank = static_cast<int>(d);
  }
  return "";
}

// The run's values, as rank 0 logs them once.
std::string settings_line(const std::vector<std::string>& run, int ranks, int nodes) {
  // What each means unset (the fault: nothing to say).
  static constexpr std::array<const char*, kRunEnvNames.size()> kUnset = {
      "=4 (default)", " unset (nodes: the ranks sharing memory)", " unset (shared memory's costs)",
      "=300 (default)", nullptr};
  std::string line = std::to_string(ranks) + " ranks on " + std::to_string(nodes) +
                     " node(s), rank 0's settings for every rank:";
  for (size_t i = 0; i < run.size(); ++i) {
    if (run[i].empty() && kUnset[i] == nullptr) continue;
    line += std::string(i == 0 ? " " : ", ") + kRunEnvNames[i] +
            (run[i].empty() ? std::string(kUnset[i]) : "=" + run[i]);
  }
  return line;
}

}  // namespace

Status MpiWorld::agree(std::vector<std::string>* run, WorldSettings* s) {
  const std::vector<std::string> own = own_values();
  *run = rank0_values(own, rank_, comm_);
  std::string problem = differing(own, *run, rank_);
  if (problem.empty()) problem = parse(*run, size_, s);
  // The lowest rank with a refusal speaks for every rank, so that all leave together.
  int first = problem.empty() ? size_ : rank_;
  EASEL_MPI(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm_));
  if (first == size_) {
    set_run_env(*run);
    return {};
  }
  broadcast_string(&problem, first, comm_);
  return invalid_argument(problem);
}

Status MpiWorld::start() {
  std::vector<std::string> run;
  WorldSettings s;
  EASEL_RETURN_IF_ERROR(agree(&run, &s));
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
  node_of_.resize(static_cast<size_t>(size_));
  nodes_ = 0;
  for (int r = 0; r < size_; ++r) {
    if (s.ranks_per_node > 0) {
      node_of_[static_cast<size_t>(r)] = r / s.ranks_per_node;
    } else {
      int k = 0;
      while (firsts[static_cast<size_t>(k)] != firsts[static_cast<size_t>(r)])
        ++k;
      node_of_[static_cast<size_t>(r)] = k == r ? nodes_ : node_of_[static_cast<size_t>(k)];
    }
    if (node_of_[static_cast<size_t>(r)] >= nodes_) nodes_ = node_of_[static_cast<size_t>(r)] + 1;
  }
  piece_ = std::max<int64_t>(1024, static_cast<int64_t>(s.piece_mb * (1 << 20) / 4));
  timeout_s_ = s.timeout_s;
  stall_ = s.fault == "stall" && s.fault_rank == rank_;
  fail_ = s.fault == "fail" && s.fault_rank == rank_;
  if (rank_ == 0) log_info("mpi", settings_line(run, size_, nodes_));
  smpi::start_watchdog(&wait_state_, rank_, timeout_s_);  // under SMPI
  return {};
}

}  // namespace easel::mpi_detail
