// The environment variables that decide what the ranks of a run do with one another, and the
// run's value of each. Under mpirun every rank reads its own environment, and mpirun forwards a
// variable to the other nodes only when told to (-x NAME): ranks reading different message
// pieces, nodes, link costs (chunk counts, scatter streams, auto's algorithm) or deadlines would
// post receives that match no send. So under MPI rank 0's values are the run's: the world reads
// them once at its start, broadcasts them and refuses a rank whose own differ (mpi_start,
// engine/comm/mpi_comm.hpp), then every rank reads rank 0's values here.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace easel {

// Each one's meaning: docs/DESIGN.md, "Ranks agree on their variables".
inline constexpr std::array<const char*, 6> kRunEnvNames = {
    "EASEL_MPI_PIECE_MB", "EASEL_RANKS_PER_NODE", "EASEL_COLLECTIVE_LINKS",
    "EASEL_MPI_TIMEOUT",  "EASEL_MPI_FAULT",      "EASEL_FAULT"};

// The run's value of `name` (one of kRunEnvNames): rank 0's once set_run_env() has run in this
// process, else this process's environment, read at each call (tests change it between runs).
// nullptr when unset or set to "".
const char* run_env(const char* name);

// Makes values[i] the run's value of kRunEnvNames[i] in this process ("" for unset). Requires
// values.size() == kRunEnvNames.size(); called by the MPI world's start only, before any thread
// of the run reads one.
void set_run_env(std::vector<std::string> values);

}  // namespace easel
