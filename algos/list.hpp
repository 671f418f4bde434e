// Factories of the algorithms, one per file; the explicit list is in list.cpp.
#pragma once

#include <memory>

#include "algos/algorithm.hpp"

namespace easel {

std::unique_ptr<Algorithm> make_sgd();
std::unique_ptr<Algorithm> make_msgd();
std::unique_ptr<Algorithm> make_sync_sgd();
std::unique_ptr<Algorithm> make_async_sgd();
std::unique_ptr<Algorithm> make_async_msgd();
std::unique_ptr<Algorithm> make_hogwild_sgd();
std::unique_ptr<Algorithm> make_easgd_rr();
std::unique_ptr<Algorithm> make_async_easgd();
std::unique_ptr<Algorithm> make_async_measgd();
std::unique_ptr<Algorithm> make_hogwild_easgd();
std::unique_ptr<Algorithm> make_sync_easgd();

// sync-easgd's facts that depend on the run (algos/sync_easgd.cpp).
PhaseNames sync_easgd_phases(const AlgoParams& p);
std::vector<ExtraArena> sync_easgd_arenas(const ArenaQuery& q);

// The algorithm a run takes when none is given (--algo's default), and the one group's
// algorithm beside it (a bench of one group).
inline constexpr const char* kDefaultAlgo = "sync-easgd";
inline constexpr const char* kOneGroupAlgo = "msgd";

}  // namespace easel
