// The explicit list of collectives (list.hpp). A new collective is its file plus one row here.
#include "engine/comm/collectives/list.hpp"

#include "engine/status.hpp"

namespace easel {

namespace {

// The flat algorithms' functions as a row's: `inter` is hierarchical's alone.
template <void (*F)(const Team&, float*, int64_t, ScratchFloats&)>
void flat_allreduce(const Team& t, float* buf, int64_t n, ScratchFloats& s, CollectiveAlgo) {
  F(t, buf, n, s);
}
template <void (*F)(const Team&, const float*, float*, int64_t, int, ScratchFloats&)>
void flat_reduce(const Team& t, const float* src, float* dst, int64_t n, int root, ScratchFloats& s,
                 CollectiveAlgo) {
  F(t, src, dst, n, root, s);
}
template <void (*F)(const Team&, float*, int64_t, int)>
void flat_broadcast(const Team& t, float* buf, int64_t n, int root, CollectiveAlgo) {
  F(t, buf, n, root);
}

constexpr CollectiveEntry kCollectives[] = {
    {.algo = CollectiveAlgo::automatic,
     .name = "auto",
     .description = "the cheapest of the others by the latency-bandwidth model for the arena, "
                    "ranks and ranks per node (choose_collective), said in the log",
     .allreduce = nullptr,
     .reduce = nullptr,
     .broadcast = nullptr,
     .allreduce_steps = nullptr,
     .allreduce_step_bytes = nullptr,
     .allreduce_seconds = nullptr,
     .automatic = true},
    {.algo = CollectiveAlgo::tree,
     .name = "tree",
     .description = "binomial: reduce into the root, broadcast farthest first (MPICH's order)",
     .allreduce = flat_allreduce<tree::allreduce>,
     .reduce = flat_reduce<tree::reduce>,
     .broadcast = flat_broadcast<tree::broadcast>,
     .allreduce_steps = nullptr,
     .allreduce_step_bytes = nullptr,
     .allreduce_seconds = tree::allreduce_cost,
     .root_gather = false,
     .whole_span_messages = true,
     .auto_candidate = true},
    {.algo = CollectiveAlgo::ring,
     .name = "ring",
     .description = "reduce-scatter and all-gather along the ring of ranks",
     .allreduce = flat_allreduce<ring::allreduce>,
     .reduce = flat_reduce<ring::reduce>,
     .broadcast = flat_broadcast<ring::broadcast>,
     .allreduce_steps = ring::allreduce_steps,
     .allreduce_step_bytes = ring::allreduce_step_bytes,
     .allreduce_seconds = ring::allreduce_cost,
     .auto_candidate = true},
    {.algo = CollectiveAlgo::halving_doubling,
     .name = "halving-doubling",
     .description = "Rabenseifner's recursive halving, then doubling, for any rank count",
     .allreduce = flat_allreduce<halving_doubling::allreduce>,
     .reduce = flat_reduce<halving_doubling::reduce>,
     .broadcast = flat_broadcast<halving_doubling::broadcast>,
     .allreduce_steps = halving_doubling::allreduce_steps,
     .allreduce_step_bytes = halving_doubling::allreduce_step_bytes,
     .allreduce_seconds = halving_doubling::allreduce_cost,
     .auto_candidate = true},
    {.algo = CollectiveAlgo::hierarchical,
     .name = "hierarchical",
     .description = "inside each node, then across nodes (ring or halving-doubling) on each "
                    "rank's share, then back, pipelined in chunks",
     .allreduce = hierarchical::allreduce,
     .reduce = hierarchical::reduce,
     .broadcast = hierarchical::broadcast,
     .allreduce_steps = nullptr,
     .allreduce_step_bytes = nullptr,
     .allreduce_seconds = hierarchical::allreduce_cost,
     .takes_inter = true,
     .auto_candidate = true},
    {.algo = CollectiveAlgo::mpi,
     .name = "mpi",
     .description = "the MPI library's own MPI_Allreduce, MPI_Reduce and MPI_Bcast "
                    "(MpiComm::native_comm); not bit for bit across layouts",
     .allreduce = nullptr,
     .reduce = nullptr,
     .broadcast = nullptr,
     .allreduce_steps = nullptr,
     .allreduce_step_bytes = nullptr,
     // Priced as the bandwidth-optimal ring it runs for large spans.
     .allreduce_seconds = ring::allreduce_cost,
     .native = true,
     .needs_ranks = "the MPI library's own collectives run among the ranks of an mpirun launch "
                    "(an MPI build)"},
};

}  // namespace

std::span<const CollectiveEntry> collective_list() {
  return kCollectives;
}

const CollectiveEntry& collective_entry(CollectiveAlgo a) {
  for (const CollectiveEntry& e : kCollectives)
    if (e.algo == a) return e;
  EASEL_CHECK_MSG(false, "a collective without a row in engine/comm/collectives/list.cpp");
  return kCollectives[0];
}

const CollectiveEntry* find_collective(std::string_view name) {
  for (const CollectiveEntry& e : kCollectives)
    if (name == e.name) return &e;
  return nullptr;
}

const char* collective_algo_name(CollectiveAlgo a) {
  return collective_entry(a).name;
}

std::string collective_names() {
  std::string s;
  for (const CollectiveEntry& e : kCollectives)
    s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

std::string collective_needs_ranks(const CollectiveEntry& e) {
  EASEL_CHECK(e.needs_ranks != nullptr);
  std::vector<const char*> alone;
  for (const CollectiveEntry& r : kCollectives)
    if (r.needs_ranks == nullptr) alone.push_back(r.name);
  std::string takes;
  for (size_t i = 0; i < alone.size(); ++i)
    takes += (i == 0 ? "" : i + 1 == alone.size() ? " or " : ", ") + std::string(alone[i]);
  return "--collective " + std::string(e.name) + ": " + e.needs_ranks + "; one process takes " +
         takes;
}

}  // namespace easel
