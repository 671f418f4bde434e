// Decoding one JPEG or PNG held in memory to 8-bit RGB, and the resize + centre crop to a
// square that an image folder's images go through (nets/data/image_folder.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/status.hpp"

namespace easel {

// An 8-bit RGB image, rows of width * 3 bytes (hwc).
struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3]
};

// Largest image decoded (width x height of the decoder's output), so that one corrupt or
// hostile header cannot ask for gigabytes: 2^27 pixels (384 MiB of RGB).
constexpr int64_t kMaxImagePixels = int64_t{1} << 27;

// Decodes data[0, size), a JPEG or a PNG told apart by its first bytes, into *out. Grey, RGB,
// RGBA, grey+alpha and palette images become RGB (alpha and transparency dropped; 16-bit
// samples stripped to their high byte; sub-byte grey expanded; PNG gamma left as is, like PIL).
// JPEG: when `min_side` > 0 and the shorter side is at least twice it, the image is decoded at
// 1/2, 1/4 or 1/8 scale (libjpeg's DCT scaling), the largest step that keeps the shorter side
// >= min_side. Errors (data_error, one line starting with `path`): neither format, corrupt or
// truncated data, a colour space with no RGB conversion (CMYK JPEG), more than `max_pixels`
// (the decoder's output, and a multi-scan JPEG's full size). Requires 0 < max_pixels <=
// kMaxImagePixels: a caller may only lower the limit (the fuzz target does, so that one input
// costs milliseconds). Never calls exit() or prints: libjpeg's and libpng's errors come back
// through longjmp.
Status decode_image(const uint8_t* data, size_t size, const std::string& path, int64_t min_side,
                    RgbImage* out, int64_t max_pixels = kMaxImagePixels);

// torchvision's Resize(side) then CenterCrop(side): scales src so that its shorter side is
// `side` (the longer becomes floor(side * long / short)), by bilinear interpolation that is
// antialiased when shrinking (a triangle filter widened by the scale, as PIL's BILINEAR
// resample), and keeps the centred side x side window (offset round((resized - side) / 2), ties
// to even as Python's round). Writes dst[3 * side * side] in chw order. Only the kept window is
// computed. Requires src non-empty and side > 0.
void resize_center_crop(const RgbImage& src, int64_t side, uint8_t* dst);

}  // namespace easel
