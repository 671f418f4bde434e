// The explicit list of the algorithms: one row each, holding every fact about the algorithm that
// the rest of easel looks up by its name (algorithm.hpp, AlgoEntry). Adding an algorithm: its
// file, its factory in list.hpp, one row here.
#include "algos/list.hpp"

#include <array>

#include "algos/exchange.hpp"
#include "engine/comm/collectives/compressed_ring.hpp"

namespace easel {

namespace {

std::vector<ExtraArena> no_arenas(const ArenaQuery&) {
  return {};
}

using X = ExchangeKind;

// clang-format off
constexpr std::array kAlgos = {
    AlgoEntry{.name = "sgd", .summary = "one group, plain SGD", .make = make_sgd,
              .default_lr = 0.1, .default_tau = 1,
              .phases = [](const AlgoParams&) { return PhaseNames{"exchange", "wait"}; },
              .extra_arenas = no_arenas,
              .model = {.kind = X::none, .arenas_per_group = 3}},
    AlgoEntry{.name = "msgd", .summary = "one group, momentum SGD (Caffe)", .make = make_msgd,
              .default_lr = 0.01, .default_tau = 1,
              .phases = [](const AlgoParams&) { return PhaseNames{"exchange", "wait"}; },
              .extra_arenas = no_arenas,
              .model = {.kind = X::none, .arenas_per_group = 3}},
    AlgoEntry{.name = "sync-sgd",
              .summary = "allreduce of gradients every step, same update everywhere",
              .make = make_sync_sgd, .default_lr = 0.01, .default_tau = 1,
              .phases = [](const AlgoParams&) { return PhaseNames{"gradient allreduce", nullptr}; },
              .extra_arenas = no_arenas,
              .model = {.kind = X::collective, .arenas_per_group = 3}},
    AlgoEntry{.name = "async-sgd",
              .summary = "parameter server: centre takes each group's step under a lock",
              .make = make_async_sgd, .default_lr = 0.025, .default_tau = 1,
              .phases = [](const AlgoParams&) {
                return PhaseNames{"centre step (locked)", "centre lock"}; },
              .extra_arenas = no_arenas,
              .model = {.kind = X::locked_centre, .update_in_exchange = true, .arenas_per_group = 3}},
    AlgoEntry{.name = "async-msgd", .summary = "async-sgd with momentum on the centre",
              .make = make_async_msgd, .default_lr = 0.01, .default_tau = 1,
              .phases = [](const AlgoParams&) {
                return PhaseNames{"centre step (locked)", "centre lock"}; },
              .extra_arenas = [](const ArenaQuery&) {  // the centre's momentum
                return std::vector<ExtraArena>{{BufferClass::centre, -1}}; },
              .model = {.kind = X::locked_centre, .update_in_exchange = true, .arenas_per_group = 3}},
    AlgoEntry{.name = "hogwild-sgd", .summary = "async-sgd without the lock",
              .make = make_hogwild_sgd, .default_lr = 0.025, .default_tau = 1,
              .phases = [](const AlgoParams&) {
                return PhaseNames{"centre step (lock-free)", nullptr}; },
              .extra_arenas = no_arenas,
              .model = {.kind = X::lockfree_centre, .update_in_exchange = true, .arenas_per_group = 3}},
    AlgoEntry{.name = "easgd-rr",
              .summary = "original EASGD: master serves groups round-robin by id",
              .make = make_easgd_rr, .default_lr = 0.1, .default_tau = 1,
              .phases = [](const AlgoParams&) {
                return PhaseNames{"elastic exchange (round-robin)", "round-robin turn"}; },
              .extra_arenas = no_arenas,
              .model = {.kind = X::round_robin, .elastic = true, .update_in_exchange = true,
                        .arenas_per_group = 3}},
    AlgoEntry{.name = "async-easgd",
              .summary = "EASGD exchange first come first served, centre under a lock",
              .make = make_async_easgd, .default_lr = 0.1, .default_tau = 1,
              .phases = [](const AlgoParams&) {
                return PhaseNames{"elastic exchange (locked)", "centre lock"}; },
              .extra_arenas = no_arenas,
              .model = {.kind = X::locked_centre, .elastic = true, .update_in_exchange = true,
                        .arenas_per_group = 3}},
    AlgoEntry{.name = "async-measgd",
              .summary = "async-easgd with momentum on the groups (Nesterov or heavy-ball)",
              .make = make_async_measgd, .default_lr = 0.01, .default_tau = 1,
              .phases = [](const AlgoParams&) {
                return PhaseNames{"elastic exchange (locked)", "centre lock"}; },
              .extra_arenas = no_arenas,
              .model = {.kind = X::locked_centre, .elastic = true, .update_in_exchange = true,
                        .arenas_per_group = 3}},
    AlgoEntry{.name = "hogwild-easgd", .summary = "async-easgd without the lock",
              .make = make_hogwild_easgd, .default_lr = 0.1, .default_tau = 1,
              .phases = [](const AlgoParams&) {
                return PhaseNames{"elastic exchange (lock-free)", nullptr}; },
              .extra_arenas = no_arenas,
              .model = {.kind = X::lockfree_centre, .elastic = true, .update_in_exchange = true,
                        .arenas_per_group = 3}},
    AlgoEntry{.name = "sync-easgd",
              .summary = "all groups exchange with the centre every tau steps (default)",
              .make = make_sync_easgd, .default_lr = 0.01, .default_tau = 1,
              .phases = sync_easgd_phases, .extra_arenas = sync_easgd_arenas,
              .model = {.kind = X::collective, .elastic = true, .overlappable = true,
                        .arenas_per_group = 4}},
    AlgoEntry{.name = "local-sgd",
              .summary = "groups step on their own, weights averaged every tau steps",
              .make = make_local_sgd, .default_lr = 0.01, .default_tau = 8,
              .phases = [](const AlgoParams&) {
                return PhaseNames{"pseudo-gradient allreduce", nullptr}; },
              .extra_arenas = [](const ArenaQuery& q) { return periodic_arenas(q, false); },
              .model = {.kind = X::average, .arenas_per_group = 5},
              .adamw = true, .compressed = true},
    AlgoEntry{.name = "slowmo",
              .summary = "local-sgd with a slow outer momentum on the averaged displacement",
              .make = make_slowmo, .default_lr = 0.01, .default_tau = 8,
              .phases = [](const AlgoParams&) {
                return PhaseNames{"pseudo-gradient allreduce", nullptr}; },
              .extra_arenas = [](const ArenaQuery& q) { return periodic_arenas(q, true); },
              .model = {.kind = X::average, .arenas_per_group = 6},
              .adamw = true, .compressed = true, .outer_lr = 1, .outer_momentum = 0.5},
    AlgoEntry{.name = "diloco",
              .summary = "outer Nesterov step on the groups' mean pseudo-gradient every tau steps",
              .make = make_diloco, .default_lr = 0.01, .default_tau = 16,
              .phases = [](const AlgoParams&) {
                return PhaseNames{"pseudo-gradient allreduce", nullptr}; },
              .extra_arenas = [](const ArenaQuery& q) { return periodic_arenas(q, true); },
              .model = {.kind = X::average, .arenas_per_group = 6},
              .adamw = true, .compressed = true, .outer_lr = 0.7, .outer_momentum = 0.9},
};
// clang-format on

}  // namespace

std::span<const AlgoEntry> algo_list() {
  return kAlgos;
}

const AlgoEntry* find_algo(std::string_view name) {
  for (const auto& a : kAlgos)
    if (name == a.name) return &a;
  return nullptr;
}

int64_t exchange_bytes(const AlgoEntry& a, const AlgoParams& p, int64_t arena_floats) {
  return exchange_payload_bytes(arena_floats, a.compressed ? p.precision : ExchangePrecision::fp32);
}

int64_t steps_per_exchange(const AlgoEntry& a, const AlgoParams& p) {
  if (a.model.kind == ExchangeKind::none) return 0;
  return a.model.elastic || a.model.kind == ExchangeKind::average ? p.tau : 1;
}

double exchanged_bytes_per_image(const AlgoEntry& a, const AlgoParams& p, int64_t arena_floats,
                                 int64_t batch) {
  const int64_t k = steps_per_exchange(a, p);
  if (k == 0 || batch <= 0) return 0;
  return static_cast<double>(exchange_bytes(a, p, arena_floats)) /
         (static_cast<double>(k) * static_cast<double>(batch));
}

double exchanged_bytes_per_image(const AlgoEntry& a, const Run& run, int64_t batch) {
  const AlgoParams& p = run.params;
  const int64_t k = steps_per_exchange(a, p);
  if (!a.compressed || p.precision == ExchangePrecision::fp32 || k == 0 || batch <= 0)
    return exchanged_bytes_per_image(a, p, run.arena_floats(), batch);
  const int groups = run.total_groups();
  int64_t bytes = 0;  // one exchange, every group
  for_each_message(run, [&](int64_t, int64_t m) {
    bytes += compressed_ring::bytes_sent(m, groups, wire_format(p.precision));
  });
  return static_cast<double>(bytes) /
         (static_cast<double>(groups) * static_cast<double>(k) * static_cast<double>(batch));
}

Result<const AlgoEntry*> algo_row(std::string_view name) {
  if (const AlgoEntry* a = find_algo(name)) return a;
  std::string known;
  for (const auto& a : kAlgos) {
    known += known.empty() ? "" : ", ";
    known += a.name;
  }
  return invalid_argument("--algo: unknown algorithm '" + std::string(name) + "' (known: " + known +
                          ")");
}

Result<std::unique_ptr<Algorithm>> make_algorithm(const std::string& name) {
  EASEL_ASSIGN_OR_RETURN(const AlgoEntry* a, algo_row(name));
  return a->make();
}

}  // namespace easel
