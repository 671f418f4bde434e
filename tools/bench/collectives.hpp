// easel bench --collectives (collectives.cpp): every collective algorithm's allreduce time,
// algorithm bandwidth and bus bandwidth for message sizes from 4 KB to the largest net's arena,
// with the MPI library's own MPI_Allreduce beside them under mpirun.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/status.hpp"

namespace easel::bench {

struct CollectivesFlags {
  int ranks = 2;      // threads of this process (in one process; under mpirun: the ranks)
  double max_mb = 0;  // the largest message in MB (0: the largest built-in net's arena)
  int repeats = 5;    // timed calls per size and algorithm (the median is shown)
};

// Prints the table (rank 0 under MPI) and adds doc["collectives"].
Status run_collectives_bench(const CollectivesFlags& f, nlohmann::json* doc);

}  // namespace easel::bench
