// diloco (Douillard et al. 2023, "DiLoCo"): every --tau inner steps (AdamW in the paper, any of
// --optimizer here) an outer Nesterov step on the pseudo-gradient d, the mean of the groups'
// displacements: u <- mu u + d; x <- x - eta (d + mu u), eta --outer-lr (0.7), mu
// --outer-momentum (0.9), the paper's values.
#include "algos/list.hpp"
#include "algos/periodic.hpp"

namespace easel {

std::unique_ptr<Algorithm> make_diloco() {
  return make_periodic("diloco", OuterRule::nesterov);
}

}  // namespace easel
