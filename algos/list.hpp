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
std::unique_ptr<Algorithm> make_local_sgd();
std::unique_ptr<Algorithm> make_slowmo();
std::unique_ptr<Algorithm> make_diloco();

// sync-easgd's facts that depend on the run (algos/sync_easgd.cpp).
PhaseNames sync_easgd_phases(const AlgoParams& p);
std::vector<ExtraArena> sync_easgd_arenas(const ArenaQuery& q);

// local-sgd, slowmo and diloco's extra arenas (algos/periodic.cpp).
std::vector<ExtraArena> periodic_arenas(const ArenaQuery& q, bool outer);

// What a group sends per exchange: its arena in fp32, or at --exchange-precision for an
// algorithm that compresses (AlgoEntry::compressed).
int64_t exchange_bytes(const AlgoEntry& a, const AlgoParams& p, int64_t arena_floats);
// Group steps per exchange: tau for the elastic and periodic algorithms, else 1; 0 for none.
int64_t steps_per_exchange(const AlgoEntry& a, const AlgoParams& p);
// Bytes all groups send over a run per training image of `batch` per group step:
// exchange_bytes / (steps_per_exchange x batch); 0 for one-group algorithms.
double exchanged_bytes_per_image(const AlgoEntry& a, const AlgoParams& p, int64_t arena_floats,
                                 int64_t batch);
// What a run's summary reports: the same, except for a compressed exchange (bf16, int8), whose
// bytes are those its allreduce sends over the transport, all groups together
// (compressed_ring::bytes_sent of each message among run.total_groups()), per training image.
double exchanged_bytes_per_image(const AlgoEntry& a, const Run& run, int64_t batch);

// The algorithm a run takes when none is given (--algo's default), and the one group's
// algorithm beside it (a bench of one group).
inline constexpr const char* kDefaultAlgo = "sync-easgd";
inline constexpr const char* kOneGroupAlgo = "msgd";

}  // namespace easel
