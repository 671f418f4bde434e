#include <chrono>

#include "algos/algorithm.hpp"

namespace easel {

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

double local_gradient(Group& g) {
  const double t0 = now_seconds();
  if (g.fake_gradient) {
    g.fake_gradient(g);
    g.times.compute += now_seconds() - t0;
    return 0;
  }
  const Batch& b = g.data->next();
  const StepStats st =
      g.net->train_step(b.images.as<float>(), b.labels.data(), g.weights.data(), g.diff.data());
  g.loss_sum += st.loss;
  g.loss_count += 1;
  g.times.compute += now_seconds() - t0;
  return st.loss;
}

}  // namespace easel
