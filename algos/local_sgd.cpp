// local-sgd (Lin et al., ICLR 2020, "Don't use large mini-batches, use local SGD"): every group
// steps on its own and every --tau steps the groups' weights are averaged (one allreduce of the
// groups' displacements from their last average), every group continuing from the average.
#include "algos/list.hpp"
#include "algos/periodic.hpp"

namespace easel {

std::unique_ptr<Algorithm> make_local_sgd() {
  return make_periodic("local-sgd", OuterRule::average);
}

}  // namespace easel
