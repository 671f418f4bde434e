// `easel data pack`: an image folder written as WebDataset-style tar shards (KEY.jpg or KEY.png
// + KEY.cls), which load_shards (stream_source.hpp) reads.
#pragma once

#include <cstdint>
#include <string>

#include "engine/status.hpp"

namespace easel {

struct PackOptions {
  int64_t shard_bytes = int64_t{256} << 20;  // a shard is closed once it holds this many bytes
  // > 0: an image whose longer side is larger is resized (PIL's bilinear, antialiased) to this
  // longer side and re-encoded as a JPEG of quality 90 (FFCV's trick: smaller shards, faster
  // decoding; the random crops then see at most this many pixels); others are copied as they are.
  int64_t max_side = 0;
  // The training images written in an order shuffled once (a fixed seed: the same folder
  // gives the same shards), so that a shuffle buffer of a few thousand samples (WebDataset's,
  // BatchStream's) mixes the classes; false: the folder's list order, class by class.
  bool shuffle = true;
  // > 0 (--shards-per-group G): the training shards split evenly among G groups (and among any
  // number of groups that divides G), as a shuffle buffer reads them (group g of P takes the
  // shards f with f mod P == g): their count a multiple of G, their samples spread so that any
  // two shards differ by at most one. shard_bytes is then the shards' mean size, estimated from
  // the images' file sizes (smaller with max_side); 0: each shard filled up to shard_bytes.
  int64_t groups = 0;
  // --overwrite: out may hold the shards of an earlier pack (train-NNNNNN.tar, val-NNNNNN.tar,
  // a killed pack's .easel-pack.tmp/); they are replaced. Anything else there is refused.
  bool overwrite = false;
};

struct PackStats {
  int64_t images = 0, resized = 0, shards = 0, bytes = 0;
  int64_t replaced = 0;  // an earlier pack's files removed (overwrite)
};

// The folder an unfinished pack writes into, inside out.
inline constexpr const char* kPackTempDir = ".easel-pack.tmp";

// Writes folder's train/ and val/ (torchvision's layout, as an image folder is listed) to
// out/train-NNNNNN.tar and out/val-NNNNNN.tar (the training images shuffled unless told,
// val in list order), keys NNNNNNNN (the image's index in its split's list), the class as
// decimal text. out must be absent or empty, or (opt.overwrite) hold only an earlier pack's
// files; else invalid_argument naming --out and one file there, nothing written. The shards
// are written into out/.easel-pack.tmp and moved into out once all are written (the earlier
// pack's files removed just before), so a pack that fails leaves out as it was. Errors name the
// file: an unreadable or corrupt image (with max_side), an output that cannot be written;
// --shards-per-group larger than the training images.
Status pack_image_folder(const std::string& folder, const std::string& out, const PackOptions& opt,
                         PackStats* stats);

// "256MB", "1GB", "512KB", "1000" (bytes; K/M/G are powers of 1024): > 0, else -1.
int64_t parse_byte_size(const std::string& text);

}  // namespace easel
