#include "algos/list.hpp"

#include <array>

namespace easel {

namespace {
constexpr std::array kAlgos = {
    AlgoEntry{"sgd", "one group, plain SGD", make_sgd},
    AlgoEntry{"msgd", "one group, momentum SGD (Caffe)", make_msgd},
    AlgoEntry{"sync-sgd", "allreduce of gradients every step, same update everywhere",
              make_sync_sgd},
    AlgoEntry{"async-sgd", "parameter server: centre takes each group's step under a lock",
              make_async_sgd},
    AlgoEntry{"async-msgd", "async-sgd with momentum on the centre", make_async_msgd},
    AlgoEntry{"hogwild-sgd", "async-sgd without the lock", make_hogwild_sgd},
    AlgoEntry{"easgd-rr", "original EASGD: master serves groups round-robin by id", make_easgd_rr},
    AlgoEntry{"async-easgd", "EASGD exchange first come first served, centre under a lock",
              make_async_easgd},
    AlgoEntry{"async-measgd", "async-easgd with momentum on the groups (Nesterov or heavy-ball)",
              make_async_measgd},
    AlgoEntry{"hogwild-easgd", "async-easgd without the lock", make_hogwild_easgd},
    AlgoEntry{"sync-easgd", "all groups exchange with the centre every tau steps (default)",
              make_sync_easgd},
};
}  // namespace

std::span<const AlgoEntry> algo_list() {
  return kAlgos;
}

Result<std::unique_ptr<Algorithm>> make_algorithm(const std::string& name) {
  std::string known;
  for (const auto& a : kAlgos) {
    if (name == a.name) return a.make();
    known += known.empty() ? "" : ", ";
    known += a.name;
  }
  return invalid_argument("--algo: unknown algorithm '" + name + "' (known: " + known + ")");
}

}  // namespace easel
