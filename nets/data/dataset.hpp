// Data sets kept as bytes (one byte per pixel, [count, C, H, W] in chw order) and converted to
// floats per batch. Loaded once and shared read-only by every worker group.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/memory.hpp"
#include "engine/rng.hpp"
#include "engine/tensor.hpp"

namespace easel {

class StreamSource;  // nets/data/stream_source.hpp

struct Dataset {
  std::string name;  // "fashion-mnist/train"
  int64_t count = 0, channels = 1, height = 0, width = 0;
  int64_t classes = 10;
  Buffer pixels;  // uint8 [count * channels * height * width]
  // Keeps borrowed pixels (Buffer::borrow: a caller's arrays, api::Data::borrow_train) valid
  // for as long as this set holds them; null when the set owns its pixels.
  std::shared_ptr<const void> owner;
  std::vector<int32_t> labels;  // [count], each in [0, classes)
  // Streamed (nets/data/stream_source.hpp): the images are read and decoded per batch; pixels
  // is empty and image() must not be called.
  std::shared_ptr<const StreamSource> source;

  const uint8_t* image(int64_t i) const {
    return pixels.as<uint8_t>() + i * channels * height * width;
  }
  int64_t image_bytes() const { return channels * height * width; }
};

struct DataSplit {
  Dataset train, test;
};

// Reads one IDX images file (magic 0x00000803, u8, 3 dims) and its labels file (0x00000801,
// 1 dim), each gzipped or plain (detected from the content). Errors name the file and the
// problem: missing, wrong magic, truncated, absurd dimensions, count mismatch, label out of
// range, more than the memory available (engine/limits.hpp), junk after a gzip stream. Nothing
// is allocated beyond what the file can hold (its size; for gzip, deflate's largest ratio
// 1032:1 times it) or the memory available, and gzip is inflated once, into the final buffer.
Result<Dataset> read_idx(const std::string& images_path, const std::string& labels_path,
                         const std::string& name, MemKind kind);

// CIFAR binary batches (nets/data/cifar.cpp): records of `label_bytes` label bytes then 3072
// pixel bytes (3x32x32, chw), no header. CIFAR-10: 1 label byte in [0, 10); CIFAR-100: 2, the
// coarse label in [0, 20) then the fine one in [0, 100), of which the fine is kept. The files
// are read in order into one set of 3x32x32 images. Errors name the file: missing or not
// openable, empty, a size that is not a whole number of records (truncated), a label out of
// range, more than the memory available (engine/limits.hpp; checked before allocating).
enum class CifarKind { cifar10, cifar100 };
Result<Dataset> read_cifar(const std::vector<std::string>& paths, CifarKind cifar,
                           const std::string& name, MemKind kind);

// A directory in CIFAR-10's binary layout (data_batch_1.bin .. data_batch_5.bin, those
// present, at least one; test_batch.bin) or CIFAR-100's (train.bin, test.bin).
bool has_cifar(const std::string& dir);
Result<DataSplit> load_cifar(const std::string& dir, const std::string& name, MemKind kind);

// An image folder (nets/data/image_folder.cpp), torchvision's ImageFolder layout: dir/train/CLASS/*
// and dir/val/CLASS/*. The classes are the sorted names of train's sub-directories, a class's
// label its index; val's sub-directories must be among them. Files ending in .jpg, .jpeg or
// .png (any case) are images, told apart by content; others are skipped. Every image is decoded
// (grey, RGB, RGBA, palette; 8 or 16 bits per sample, 16 stripped to 8; alpha dropped) to RGB,
// then resized so that its shorter side is `side` (bilinear, antialiased when shrinking, as
// torchvision's Resize and PIL) and centre-cropped to side x side (torchvision's CenterCrop),
// into bytes [count, 3, side, side]. A JPEG at least twice the side is decoded at 1/2, 1/4 or
// 1/8 of its size by libjpeg's DCT scaling (as PIL's draft mode), its shorter side kept >= side.
// Decoding runs in parallel (OpenMP). Errors name the file or directory: a missing train/ or
// val/, a split with no class directories, a class directory with no images, a val class not
// in train, an unreadable, corrupt, truncated or unsupported image (one line each, never a
// crash), a set larger than the memory available (checked before decoding).
bool has_image_folder(const std::string& dir);
Result<DataSplit> load_image_folder(const std::string& dir, const std::string& name, int64_t side,
                                    MemKind kind);
constexpr int64_t kDefaultImageSide = 224;

// `spec`: "fashion-mnist" (/usr/share/datasets/fashion-mnist), "mnist" (/usr/share/datasets/mnist),
// either as ":CxHxW" (C 1 or 3, H and W at least 28: each image centred on a black canvas of that
// size, its grey repeated in every channel, e.g. "fashion-mnist:3x32x32" for CIFAR-shaped nets),
// "synthetic[:N[:CxHxW[:classes]]]" (generated, learnable, deterministic from seed), or a
// directory, whose format is told by what it holds (in this order):
//   IDX:          train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],
//                 t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz];
//   CIFAR binary: data_batch_N.bin + test_batch.bin (CIFAR-10) or train.bin + test.bin (-100);
//   image folder: train/CLASS/*.jpg|png and val/CLASS/*, as images of side x side where
//                 "DIR:SIDE" gives the side (default kDefaultImageSide: "DIR" is "DIR:224").
// A directory holding none of them is refused in one line that names it and what was looked for.
Result<DataSplit> load_data(const std::string& spec, MemKind kind, uint64_t seed);
// How load_data reads image folders and shards.
struct DataOptions {
  // > 0: an image folder (DIR) streams, its images decoded as batches need them at this side
  // (nets/data/stream_source.hpp; --augment random-resized-crop=N gives N); shards (without
  // :SIDE) stream at this side, else kDefaultImageSide. 0: an image folder is decoded once
  // (DIR:SIDE). DIR:SIDE and shards:SPEC:SIDE are refused with it.
  int64_t stream_side = 0;
  bool skip_bad = false;  // --skip-bad-images (StreamSource::skip_bad)
};
// Also "shards:DIR" or "shards:GLOB" (nets/data/shards.cpp): tar shards DIR/train-*.tar and
// DIR/val-*.tar, streamed; "shards:DIR:SIDE" decodes each image once at SIDE and holds it, as
// "DIR:SIDE" does an image folder's (the same pixels from the same image files).
Result<DataSplit> load_data(const std::string& spec, MemKind kind, uint64_t seed,
                            const DataOptions& opt);

// Generates a learnable synthetic set: each class has a fixed random prototype image; samples
// are the prototype plus noise, as bytes. The prototypes depend on `seed` only; the samples
// (labels and noise) on (seed, sample_stream), so a test set drawn from another sample stream
// shares the training set's classes but not its images. Pixels are in dram.
Dataset make_synthetic(int64_t count, int64_t c, int64_t h, int64_t w, int64_t classes,
                       uint64_t seed, const std::string& name, uint64_t sample_stream = 0);

// The images i of ds with first <= i % shards < first + count, in ascending order: what the
// groups first .. first+count-1 of `shards` read. Image j*count + k of the result belongs to
// group first + k, so shard k of `count` of the result is shard first + k of `shards` of ds.
Result<Dataset> keep_shards(const Dataset& ds, int first, int count, int shards, MemKind kind);

// Pixel scaling applied when converting to floats (Caffe's LeNet scale 1/256).
constexpr float kPixelScale = 0.00390625f;

// Converts images idx[0..n) of ds into floats [n, C, H, W] in layout, scaled by kPixelScale,
// and their labels.
void gather_batch(const Dataset& ds, const int64_t* idx, int64_t n, Layout layout, float* images,
                  int32_t* labels);

}  // namespace easel
