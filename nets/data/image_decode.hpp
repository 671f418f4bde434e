// Decoding one JPEG or PNG held in memory to 8-bit RGB, and the resize + centre crop to a
// square that an image folder's images go through (nets/data/image_folder.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

// The part of an image a streamed sample keeps, in the full image's pixels (fractions allowed):
// columns [x0, x0 + w), rows [y0, y0 + h).
struct ImageBox {
  double x0 = 0, y0 = 0, w = 0, h = 0;
};

struct BoxDecode {
  // Chooses the box from the full image's width and height (read from the header, before any
  // pixel is decoded).
  std::function<ImageBox(int64_t width, int64_t height)> choose;
  int64_t side = 0;  // the box becomes side x side
  // JPEG: decoded at 1/2, 1/4 or 1/8 scale (scale_num / scale_denom), the smallest at which the
  // box still has at least `side` pixels each way (so the resampling only ever shrinks it).
  bool dct_scaling = true;
  // JPEG: only the columns (jpeg_crop_scanline) and rows (jpeg_skip_scanlines, stopping after
  // the last) the resampling reads are decoded.
  bool crop = true;
};

// Decodes data[0, size) (a JPEG or a PNG, as decode_image) and resamples the chosen box to
// dst [3, side, side], chw bytes, with PIL's bilinear filter (nets/data/resample.hpp): what
// torchvision's resized_crop does to a PIL image, computed from the scaled JPEG's pixels when
// dct_scaling is on (equal to it within the tolerance tests/nets/test_stream_source.cpp
// states). Errors as decode_image's; a truncated JPEG is an error when a row the box needs is
// missing. Requires how.side > 0 and a box of positive width and height.
Status decode_box(const uint8_t* data, size_t size, const std::string& path, const BoxDecode& how,
                  uint8_t* dst, int64_t max_pixels = kMaxImagePixels);

// Encodes an RGB image as a baseline JPEG of `quality` (1-100; libjpeg's default 2x2 chroma
// subsampling) into *out: what `easel data pack --max-side` writes and the tests generate.
// Requires a non-empty image.
Status encode_jpeg(const RgbImage& image, int quality, std::vector<uint8_t>* out);

// Encodes an RGB image as an 8-bit RGB PNG into *out (replacing what it held): `easel eval
// --confusion`'s picture, and the images the tests write. Requires a non-empty image.
Status encode_png(const RgbImage& image, std::vector<uint8_t>* out);

}  // namespace easel
