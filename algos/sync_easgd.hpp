// sync-easgd with its exchange chosen (algos/sync_easgd.cpp); the algorithms' list takes
// make_sync_easgd() from algos/list.hpp, which chooses as training does.
#pragma once

#include <memory>

#include "algos/algorithm.hpp"

namespace easel {

// Which exchange sync-easgd runs (SyncExchange, algos/algorithm.hpp). automatic: as
// run.params.exchange (--exchange) says, itself automatic by default (sync_easgd.cpp's comment:
// one of the fast exchanges of algos/sync_easgd_fast.hpp in one process on the CPU when the
// switches allow, else through the Comm, or overlapped). The others force one whatever
// --exchange says, so that `easel bench` times each on the same groups: comm, the Comm path
// (tree or serial reduce, single or per-layer messages, overlap, as run.params say);
// partitioned and mirrored, those fast exchanges, which prepare() refuses where they cannot run
// (mirrored: at most 2 groups).
std::unique_ptr<Algorithm> make_sync_easgd(SyncExchange which);

}  // namespace easel
