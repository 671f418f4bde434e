// slowmo (Wang, Tantia, Ballas and Rabbat, ICLR 2020, "SlowMo"): local SGD whose averaged
// displacement d goes through a slow outer momentum: u <- beta u + d / gamma;
// x <- x - alpha gamma u, gamma the inner learning rate, alpha --outer-lr (1), beta
// --outer-momentum (0.5); alpha 1 and beta 0 is local-sgd.
#include "algos/list.hpp"
#include "algos/periodic.hpp"

namespace easel {

std::unique_ptr<Algorithm> make_slowmo() {
  return make_periodic("slowmo", OuterRule::slowmo);
}

}  // namespace easel
