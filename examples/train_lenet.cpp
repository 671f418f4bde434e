// Embedding easel: trains LeNet on Fashion-MNIST with two worker groups (synchronous EASGD),
// prints each evaluation, and saves the centre's weights.
//
//   train_lenet [ITERATIONS [WEIGHTS_FILE [DATA]]]
//     ITERATIONS    iterations of the run (default 1000), evaluated every
//                   max(10, ITERATIONS / 10) iterations
//     WEIGHTS_FILE  where the centre's weights go (default lenet_centre.bin)
//     DATA          as easel train --data (default fashion-mnist)
//
// Build it against an installed easel:
//   c++ -std=c++20 -O2 train_lenet.cpp $(pkg-config --cflags --libs easel) -o train_lenet
// or with examples/meson.build (dependency('easel')).
#include <easel/easel.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

int fail(const char* what, const easel::api::Status& st) {
  std::fprintf(stderr, "train_lenet: %s: %s\n", what, st.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const long iterations = argc > 1 ? std::atol(argv[1]) : 1000;
  const std::string weights_path = argc > 2 ? argv[2] : "lenet_centre.bin";
  const std::string data_spec = argc > 3 ? argv[3] : "fashion-mnist";
  if (iterations <= 0) {
    std::fprintf(stderr, "train_lenet: ITERATIONS must be a positive number\n");
    return 2;
  }

  easel::api::Config cfg;  // easel train's defaults: LeNet, Caffe's solver settings
  const std::pair<const char*, std::string> settings[] = {
      {"net", "lenet"},
      {"algo", "sync-easgd"},
      {"groups", "2"},
      {"iterations", std::to_string(iterations)},
      {"eval-every", std::to_string(std::max(10L, iterations / 10))},
  };
  for (const auto& [name, value] : settings)
    if (easel::api::Status st = cfg.set(name, value); !st.ok()) return fail(name, st);

  easel::api::Data data;
  if (easel::api::Status st = data.load(data_spec); !st.ok()) return fail("data", st);
  std::printf("data: %lld training and %lld test images\n",
              static_cast<long long>(data.train_count()),
              static_cast<long long>(data.test_count()));

  easel::api::Run run;
  run.on_evaluation([](const easel::api::Evaluation& e) {
    std::printf("step %lld  epoch %.3f  train loss %.4f  test accuracy %.4f  %.0f img/s\n",
                static_cast<long long>(e.step), e.epoch, e.train_loss, e.test_accuracy,
                e.images_per_second);
    std::fflush(stdout);
    return true;  // false would stop the run here
  });
  if (easel::api::Status st = run.train(cfg, data); !st.ok()) return fail("train", st);

  const easel::api::Summary& s = run.summary();
  std::printf(
      "done: %s on %s, %d groups, %lld steps, test accuracy %.4f, %.0f img/s, "
      "comm %.1f%%, wait %.1f%%\n",
      s.algorithm.c_str(), s.net.c_str(), s.groups, static_cast<long long>(s.steps),
      s.test_accuracy, s.images_per_second, 100 * s.comm_share, 100 * s.wait_share);
  if (easel::api::Status st = easel::api::save_weights(weights_path, run.weights()); !st.ok())
    return fail("save", st);
  std::printf("saved %zu weights to %s\n", run.weights().size(), weights_path.c_str());
  return 0;
}
