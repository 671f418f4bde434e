// crop_params: easel's RandomResizedCrop window for given draws, for the check against
// torchvision's (tests/tools/crop_params_check.py). Each stdin line: W H u0 u1 ... (the draws in
// the order get_params makes them, each in [0, 1)); each stdout line: top left height width.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "nets/data/crop.hpp"

namespace {

// The draws from a list: uniform(lo, hi) = lo + (hi - lo) * u in float32 (no fused multiply-add,
// as torch computes it); randint(n) = floor(u * n).
class ListDraws final : public easel::CropDraws {
 public:
  explicit ListDraws(std::vector<double> u) : u_(std::move(u)) {}
  float uniform(float lo, float hi) override {
    volatile float span = hi - lo;
    volatile float m = span * static_cast<float>(take());
    return lo + m;
  }
  int64_t randint(int64_t n) override {
    const int64_t k = static_cast<int64_t>(std::floor(take() * static_cast<double>(n)));
    return k < n ? k : n - 1;
  }
  bool short_of_draws() const { return short_; }

 private:
  double take() {
    if (at_ < u_.size()) return u_[at_++];
    short_ = true;
    return 0;
  }
  std::vector<double> u_;
  size_t at_ = 0;
  bool short_ = false;
};

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    long long w = 0, h = 0;
    in >> w >> h;
    std::vector<double> u;
    for (double v; in >> v;)
      u.push_back(v);
    ListDraws draws(u);
    const easel::CropWindow c = easel::random_resized_crop(w, h, draws);
    if (draws.short_of_draws()) {
      std::fprintf(stderr, "crop_params: too few draws on the line '%s'\n", line.c_str());
      return 2;
    }
    std::printf("%lld %lld %lld %lld\n", static_cast<long long>(c.top),
                static_cast<long long>(c.left), static_cast<long long>(c.height),
                static_cast<long long>(c.width));
  }
  return 0;
}
