// sync-easgd with its exchange chosen (algos/sync_easgd.cpp); the algorithms' list takes
// make_sync_easgd() from algos/list.hpp, which chooses as training does.
#pragma once

#include <memory>
#include <string>
#include <string_view>

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

// ---- sync-easgd's exchange path, decided here once: the config check, the memory fit, the
// algorithm and the performance model (model/) all read it ----

// The switches the fast exchanges depend on.
struct SyncSwitches {
  int ranks = 1;            // MPI ranks
  bool on_devices = false;  // the groups' weights stay on GPUs (Run::resident)
  ReduceMode reduce = ReduceMode::tree;
  PackMode pack = PackMode::single;
  CollectiveAlgo collective = CollectiveAlgo::automatic;
  bool overlap = false;
};
// The first switch that rules the fast exchanges out, as its flag ("--pack per-layer"), or
// nullptr when they apply: one process on the CPU with --reduce tree, --pack single,
// --collective tree or auto and --overlap off.
const char* fast_exchange_lacks(const SyncSwitches& s);

enum class SyncExchangePath { comm, partitioned, mirrored };
const char* sync_exchange_path_name(SyncExchangePath path);
struct SyncExchangeChoice {
  SyncExchangePath path = SyncExchangePath::comm;
  std::string why;  // one line: what chose it
};
// Whether `algo` (a --algo name) is the one that takes a SyncExchangePath.
bool takes_sync_exchange(std::string_view algo);
// The switches as `from` holds them (what --reduce, --pack, --collective and --overlap set):
// AlgoParams, or run/'s TrainConfig.
template <class Holder>
SyncSwitches sync_switches(const Holder& from, int ranks, bool on_devices) {
  SyncSwitches s;
  s.ranks = ranks;
  s.on_devices = on_devices;
  s.reduce = from.reduce;
  s.pack = from.pack;
  s.collective = from.collective;
  s.overlap = from.overlap;
  return s;
}

// The path that `asked` (--exchange) takes for a net with running statistics or not (`state`:
// the fast exchanges would read them while a step writes them) and P `groups`: automatic, a
// fast exchange where the switches and the net allow (partitioned, mirrored at P <= 2), else
// the Comm's (which covers the overlap and the devices' paths); comm, the Comm's; partitioned
// or mirrored, that one, refused (invalid_argument naming --exchange) where it cannot run.
Result<SyncExchangeChoice> choose_sync_exchange(SyncExchange asked, const SyncSwitches& s,
                                                bool state, int groups);

}  // namespace easel
