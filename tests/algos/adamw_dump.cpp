// Prints AdamW's weights (algos/outer_ops.hpp, adamw_step) after each of T steps on fixed
// gradients, for tests/algos/adamw_check.py to compare with torch.optim.AdamW on the same ones:
// N floats in two segments (the second with lr_mult 2 and decay_mult 0, as Caffe's biases),
// w0 = sin(0.7 i), the gradient of step t is cos(0.3 i + t) (1 + 0.1 t).
//   adamw_dump N T LR WD BETA1 BETA2 EPS  ->  T lines of N numbers
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "algos/outer_ops.hpp"

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: adamw_dump N T LR WD BETA1 BETA2 EPS\n");
    return 2;
  }
  const int64_t n = std::atoll(argv[1]), steps = std::atoll(argv[2]);
  const float lr = std::strtof(argv[3], nullptr), wd = std::strtof(argv[4], nullptr);
  easel::AdamW a{std::strtof(argv[5], nullptr), std::strtof(argv[6], nullptr),
                 std::strtof(argv[7], nullptr)};
  std::vector<easel::Segment> segs(2);
  segs[0].count = n / 2;
  segs[1].offset = n / 2;
  segs[1].count = n - n / 2;
  segs[1].lr_mult = 2;
  segs[1].decay_mult = 0;
  std::vector<float> w(n), g(n), m(n, 0.f), v(n, 0.f);
  for (int64_t i = 0; i < n; ++i)
    w[i] = std::sin(0.7f * static_cast<float>(i));
  for (int64_t t = 1; t <= steps; ++t) {
    for (int64_t i = 0; i < n; ++i)
      g[i] = std::cos(0.3f * static_cast<float>(i) + static_cast<float>(t)) *
             (1 + 0.1f * static_cast<float>(t));
    easel::adamw_step(segs, w.data(), g.data(), m.data(), v.data(), lr, wd, a, t);
    for (int64_t i = 0; i < n; ++i)
      std::printf("%.9g%c", w[i], i + 1 == n ? '\n' : ' ');
  }
  return 0;
}
