// Streamed data sets: images read and decoded as the batches need them, never held decoded. A
// streamed Dataset (dataset.hpp) holds its StreamSource (the list of image files, or of tar
// shards' members with their offsets) and its labels, and no pixels: its resident memory grows
// with the list only. Each image becomes 3 x side x side bytes through decode_box
// (image_decode.hpp): torchvision's RandomResizedCrop(side) for a training draw, Resize(side *
// 256 / 224) + CenterCrop(side) otherwise (evaluation, or a set streamed without augmentation).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/status.hpp"
#include "nets/data/augment.hpp"
#include "nets/data/dataset.hpp"
#include "nets/data/image_decode.hpp"

namespace easel {

class StreamSource {
 public:
  struct Entry {
    int32_t file = 0;               // index in files
    int32_t label = 0;              // in [0, classes)
    int64_t offset = 0, size = -1;  // the member's bytes in a shard; size -1: the whole file
  };
  std::vector<std::string> files;    // image files, or tar shards
  std::vector<Entry> entries;        // the set's images in order
  std::vector<std::string> members;  // shards: each entry's member name (empty for a folder)
  // A bad image (unreadable, corrupt, truncated) is replaced by the next good one of the list
  // (deterministically, whatever the threads) and counted (skipped_images), instead of ending
  // the process with exit code 2.
  bool skip_bad = false;

  int64_t count() const { return static_cast<int64_t>(entries.size()); }
  // "path" for a file, "shard.tar: member KEY.jpg" for a shard's member.
  std::string where(int64_t i) const;
  // Entry i's bytes (one pread of the member, or the whole file). Errors name where(i).
  Status read(int64_t i, std::vector<uint8_t>* bytes) const;
  // The entries keep[0..) (ascending indices), same files.
  std::shared_ptr<StreamSource> subset(const std::vector<int64_t>& keep) const;
};

// A Dataset over src: count and labels from its entries, 3 x side x side, no pixels.
Dataset streamed_dataset(std::shared_ptr<const StreamSource> src, const std::string& name,
                         int64_t side, int64_t classes);

// The box of a width x height image that evaluation keeps: the centre side x side of the image
// resized to a shorter side of resize (torchvision's Resize(resize) then CenterCrop(side)).
ImageBox center_box(int64_t width, int64_t height, int64_t resize, int64_t side);

// Reads and decodes entry i into dst [3, side, side] (chw bytes): the random resized crop that
// draw->key decides when a.resized_crop > 0 and draw is given, else the centre box (resize
// a.eval_resize(), or side * 256 / 224 without resized_crop). Errors name where(i).
Status load_streamed(const StreamSource& src, int64_t i, const Augment& a, const AugmentDraw* draw,
                     int64_t side, uint8_t* dst);

// gather_batch (augment.hpp) for a streamed ds: each image loaded (load_streamed), mirrored as
// its draw says, and normalised as `a` says (kPixelScale without). A bad image with
// src.skip_bad is replaced by the next good entry (its label too), counted and, for the first
// ten, named in the log; without, its one line goes to stderr and the process exits with code 2.
void gather_streamed(const Dataset& ds, const int64_t* idx, int64_t n, Layout layout, float* images,
                     int32_t* labels, const Augment& a, const AugmentDraw* draws);

// pixel_table and gather_batch_bytes (augment.hpp) for a streamed ds: gather_streamed's
// float of each byte value per channel, and its bytes before the conversion (mirrored, in the
// layout's order; bad images skipped as it does).
std::vector<float> streamed_pixel_table(const Augment& a);
void gather_streamed_bytes(const Dataset& ds, const int64_t* idx, int64_t n, Layout layout,
                           uint8_t* bytes, int32_t* labels, const Augment& a,
                           const AugmentDraw* draws);

// An image folder (dir/train/CLASS/*, dir/val/CLASS/*, as load_image_folder lists it), streamed
// at `side`: only the file list is read now.
Result<DataSplit> stream_image_folder(const std::string& dir, const std::string& name, int64_t side,
                                      bool skip_bad);

// Every entry of src decoded once and held, as an image folder at DIR:SIDE is
// (load_image_folder: the shorter side resized to `side`, the centre crop), in parallel: a
// Dataset of 3 x side x side bytes per image in memory of `kind`, the entries' labels. A set
// larger than the memory available is refused before any decoding (unavailable, naming
// `where`); otherwise the first image by index that fails, named.
Result<Dataset> decode_source(const StreamSource& src, const std::string& where, int64_t side,
                              int64_t classes, const std::string& name, MemKind kind);

// Tar shards (nets/data/shards.cpp): `spec` is a directory holding train-*.tar and val-*.tar,
// or a glob of training shards whose val-*.tar lie beside them. Only the members' offsets are
// read now (load_data's "shards:SPEC:SIDE" then decodes them, decode_source).
Result<DataSplit> load_shards(const std::string& spec, int64_t side, bool skip_bad);

// Distinct bad images skipped so far in this process.
int64_t skipped_images();

}  // namespace easel
