// PIL's bilinear (triangle-filter) resampling of a box of an image, as Image.resize(size, box=)
// computes it: what torchvision's resized_crop and Resize + CenterCrop do to a PIL image. The
// streamed sources (nets/data/stream_source.hpp) resample only the pixels a box needs.
#pragma once

#include <cstdint>
#include <vector>

namespace easel {

// The taps of one output coordinate: weights of input pixels first .. first + w.size() - 1.
struct Taps {
  int64_t first = 0;
  std::vector<float> w;
};

// PIL's bilinear (triangle) taps of one output coordinate that samples input coordinate
// `center` of an input of `in` pixels, the triangle widened by filter_scale (>= 1: the scale
// when shrinking); weights normalised to sum 1, inputs clamped to [0, in); the nearest pixel
// where no input falls under the triangle. Requires in >= 1.
Taps triangle_taps(int64_t in, double center, double filter_scale);

// PIL's precompute_coeffs: output j of `out` samples input coordinate x0 + (j + 0.5) * len / out
// of an input of `in` pixels, over a support widened by the scale when shrinking; weights
// normalised to sum 1, inputs clamped to [0, in). Requires in, out >= 1 and len > 0.
std::vector<Taps> box_taps(int64_t in, double x0, double len, int64_t out);

// First input pixel any tap reads, and one past the last.
int64_t taps_begin(const std::vector<Taps>& t);
int64_t taps_end(const std::vector<Taps>& t);

// Resamples an RGB region (rows of region_w * 3 bytes, hwc; its pixel (0, 0) is input pixel
// (origin_y, origin_x), and it holds every pixel the taps read) into dst [3, ty.size(),
// tx.size()] in chw order: a horizontal pass, then a vertical one, rounded to bytes.
void resample_box(const uint8_t* region, int64_t region_w, int64_t origin_x, int64_t origin_y,
                  const std::vector<Taps>& tx, const std::vector<Taps>& ty, uint8_t* dst);

}  // namespace easel
