// RandomResizedCrop's window, line for line as torchvision's get_params.
#include "nets/data/crop.hpp"

#include <cmath>

#include "engine/status.hpp"

namespace easel {

CropWindow random_resized_crop(int64_t width, int64_t height, CropDraws& draws) {
  EASEL_CHECK(width >= 1 && height >= 1);
  constexpr double kRatioLo = 3.0 / 4.0, kRatioHi = 4.0 / 3.0;
  const double area = static_cast<double>(height * width);
  // torch.log(torch.tensor(ratio)): float32.
  const float log_lo = std::log(static_cast<float>(kRatioLo));
  const float log_hi = std::log(static_cast<float>(kRatioHi));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * static_cast<double>(draws.uniform(0.08f, 1.0f));
    const double aspect = static_cast<double>(std::exp(draws.uniform(log_lo, log_hi)));
    const int64_t w = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area * aspect)));
    const int64_t h = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area / aspect)));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int64_t i = draws.randint(height - h + 1);
      const int64_t j = draws.randint(width - w + 1);
      return {i, j, h, w};
    }
  }
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < kRatioLo) {
    h = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / kRatioLo));
  } else if (in_ratio > kRatioHi) {
    w = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) * kRatioHi));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

}  // namespace easel
