// libFuzzer target: the JPEG and PNG decoder and the resize + centre crop of image folders
// (nets/data/image_decode.cpp), alone or through load_data on an image folder
// (nets/data/image_folder.cpp). Input: byte 0, then the image file.
//   bits 0-4: the side, 1 + (bits) (1 to 32);
//   bit 5:    the file is named image.png (else image.jpg): only its name, the decoder tells
//             the format by the first bytes;
//   bit 6:    also through `--data DIR:SIDE`, the file as train/a/image.EXT and val/a/image.EXT;
//   bit 7:    decoded at full scale (min_side 0), not at the largest JPEG scale that keeps the
//             side (unless bit 6: the folder decodes as the direct path must then match).
//
// The direct decode is limited to kFuzzMaxPixels (2^20), not the reader's kMaxImagePixels
// (2^27): the same checks at a lower value (decode_image's max_pixels), so that an input of a
// few hundred bytes claiming 8188x8188 grey pixels costs microseconds, not seconds of decoding
// and page faults (80 executions a second before, most of the time in such images). The folder,
// which decodes at the reader's limit, is tried only with what the direct decode did not
// refuse as too large.
//
// Besides crashes and sanitizer reports, it traps on a broken promise: an error that is not one
// line or does not name the file; a decoded image whose size disagrees with its pixels or is
// over the limit; an image folder that reads the file otherwise than decode_image and
// resize_center_crop do; more live memory than the largest image the decoder accepts needs
// (kFuzzMaxPixels pixels of 3 bytes of RGB and at most 6 of progressive JPEG coefficients, with
// their blocks' padding: 10 bytes a pixel, and 64 MiB).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "nets/data/dataset.hpp"
#include "nets/data/image_decode.hpp"
#include "tests/fuzz/alloc_limit.hpp"
#include "tests/fuzz/tempdir.hpp"

namespace {

constexpr int64_t kFuzzMaxPixels = int64_t{1} << 20;

void check_error(const easel::Status& s, const std::string& name) {
  const std::string& m = s.message();
  if (m.find(name) == std::string::npos || m.find('\n') != std::string::npos) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const easel::fuzz::TempDir dir;
  if (size == 0) return 0;
  easel::fuzz::AllocLimit limit(10 * kFuzzMaxPixels + (int64_t{64} << 20));
  const int64_t side = 1 + (data[0] & 31);
  const std::string name = (data[0] & 32) ? "image.png" : "image.jpg";
  const bool folder = data[0] & 64;
  const int64_t min_side = (data[0] & 128) && !folder ? 0 : side;
  const uint8_t* file = data + 1;
  const size_t bytes = size - 1;

  // Direct: decode, then resize into exactly 3 * side * side bytes (ASan sees past them).
  const std::string path = "fuzz/" + name;
  easel::RgbImage image;
  const easel::Status s = easel::decode_image(file, bytes, path, min_side, &image, kFuzzMaxPixels);
  std::vector<uint8_t> pixels;
  if (s.ok()) {
    if (image.width <= 0 || image.height <= 0 || image.width * image.height > kFuzzMaxPixels ||
        image.rgb.size() != static_cast<size_t>(image.width * image.height * 3))
      __builtin_trap();
    pixels.resize(static_cast<size_t>(3 * side * side));
    easel::resize_center_crop(image, side, pixels.data());
  } else {
    if (s.message().rfind(path + ": ", 0) != 0) __builtin_trap();
    check_error(s, path);
  }
  image = {};
  if (!folder) return 0;
  // Over the fuzz limit: the folder would decode it (up to 2^27 pixels), slowly.
  if (!s.ok() && s.message().find("-pixel limit") != std::string::npos) return 0;

  // Through an image folder of one class, the file in train/ and val/.
  dir.clear();
  dir.write("train/a/" + name, file, bytes);
  dir.write("val/a/" + name, file, bytes);
  auto r = easel::load_data(dir.path() + ":" + std::to_string(side), easel::MemKind::dram, 1);
  if (!r.ok()) {
    if (s.ok()) __builtin_trap();  // the folder refuses what decodes
    check_error(r.status(), dir.path());
    if (r.status().message().find(name) == std::string::npos) __builtin_trap();
    return 0;
  }
  if (!s.ok()) __builtin_trap();  // the folder reads what does not decode
  for (const easel::Dataset* ds : {&r->train, &r->test}) {
    if (ds->count != 1 || ds->channels != 3 || ds->height != side || ds->width != side ||
        ds->classes != 1 || ds->labels.size() != 1 || ds->labels[0] != 0 ||
        ds->pixels.bytes() != pixels.size() ||
        std::memcmp(ds->image(0), pixels.data(), pixels.size()) != 0)
      __builtin_trap();
  }
  return 0;
}
