// torchvision's RandomResizedCrop window (transforms.RandomResizedCrop.get_params), decided from
// an image's size before it is decoded, with the draws behind an interface so that a check can
// feed torchvision and easel the same ones (tests/tools/crop_params_check.py).
#pragma once

#include <cstdint>

#include "engine/rng.hpp"

namespace easel {

// The window kept: rows [top, top + height), columns [left, left + width) of the image.
struct CropWindow {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// The random draws get_params makes. uniform(lo, hi): float32 lo + (hi - lo) * u for a
// u in [0, 1) (torch.empty(1).uniform_(lo, hi) on a float tensor); randint(n): in [0, n)
// (torch.randint(0, n)).
class CropDraws {
 public:
  virtual ~CropDraws() = default;
  virtual float uniform(float lo, float hi) = 0;
  virtual int64_t randint(int64_t n) = 0;
};

// The draws from an easel Rng (what training uses; the key of an AugmentDraw seeds it).
class RngCropDraws final : public CropDraws {
 public:
  explicit RngCropDraws(uint64_t key) : rng_(key) {}
  float uniform(float lo, float hi) override { return rng_.uniform(lo, hi); }
  int64_t randint(int64_t n) override {
    return static_cast<int64_t>(rng_.below(static_cast<uint64_t>(n)));
  }

 private:
  Rng rng_;
};

// Scale 0.08-1 of the area, aspect ratio 3/4-4/3 drawn log-uniformly (the logs and the
// exponential in float32, as torch computes them), up to ten tries for a window that fits, each
// side rounded half to even (Python's round); then the centre crop fallback: the whole image,
// or its centre clamped to the ratio range. Requires width, height >= 1.
CropWindow random_resized_crop(int64_t width, int64_t height, CropDraws& draws);

}  // namespace easel
