// The collective algorithms as an explicit list, one row each, as algos/list.cpp is for the
// training algorithms: every fact the rest of easel would otherwise look up by a collective's
// name (--collective's word, what runs it over a transport, its cost, what it needs). Adding a
// collective is its file in engine/comm/collectives/ (its functions on a Team, declared in
// team.hpp), its cost formula (collective_cost.hpp) and one row in list.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/comm/collective_cost.hpp"
#include "engine/comm/collectives/team.hpp"
#include "engine/comm/comm.hpp"

namespace easel {

struct CollectiveEntry {
  CollectiveAlgo algo;      // the row's key
  const char* name;         // --collective's word
  const char* description;  // one line

  // Over a transport (make_collective_comm): its collectives among a team, `inter` being the
  // algorithm across nodes where takes_inter (the flat ones ignore it). Null for a row the
  // caller resolves first (auto: to another row; mpi: MpiComm::native_comm).
  void (*allreduce)(const Team& t, float* buf, int64_t n, ScratchFloats& s, CollectiveAlgo inter);
  void (*reduce)(const Team& t, const float* src, float* dst, int64_t n, int root, ScratchFloats& s,
                 CollectiveAlgo inter);
  void (*broadcast)(const Team& t, float* buf, int64_t n, int root, CollectiveAlgo inter);
  // As the part across nodes of a takes_inter row (--collective hierarchical's ring or
  // halving-doubling): its allreduce written down for the pipeline, and the bytes of each of its
  // steps for `ranks` ranks (one message per rank a step), which the cost model replays. Null
  // where the row cannot be that part.
  void (*allreduce_steps)(const Team& t, float* buf, int64_t n, Schedule* out);
  std::vector<double> (*allreduce_step_bytes)(double bytes, int ranks);

  // The predicted seconds of its allreduce for a shape of more than one rank and a positive
  // span (collective_cost.hpp); null for auto, which prices its choice.
  double (*allreduce_seconds)(const CollectiveShape& s, CollectiveAlgo inter);
  // A reduce into one rank plus a broadcast adds the root's gather and scatter of the reduced
  // chunks (the bandwidth-optimal algorithms; the tree's is its allreduce).
  bool root_gather = true;
  // Each message carries the whole span, 2 log2(p) of them (the tree), rather than 2 (p - 1)
  // messages of span / p (the performance model's messages and bytes on the path).
  bool whole_span_messages = false;
  bool takes_inter = false;     // runs another row across nodes (hierarchical)
  bool auto_candidate = false;  // --collective auto weighs it (choose_collective)
  bool automatic = false;       // resolved per run by the cost model (auto itself)
  bool native = false;          // the MPI library's own collectives among the processes
  // Where it runs only among the ranks of an MPI launch: why, as a clause; null: anywhere.
  const char* needs_ranks = nullptr;
};

// Every collective, in --collective's order (auto first).
std::span<const CollectiveEntry> collective_list();
// The row of `a` (every value has one).
const CollectiveEntry& collective_entry(CollectiveAlgo a);
// The row named `name`, or null.
const CollectiveEntry* find_collective(std::string_view name);
// "auto, tree, ..., mpi": the names of the rows, in order.
std::string collective_names();
// The refusal of --collective `e` in one process (e.needs_ranks set): "--collective mpi: the MPI
// library's own collectives run among ... ; one process takes auto, tree, ... or hierarchical".
std::string collective_needs_ranks(const CollectiveEntry& e);

}  // namespace easel
