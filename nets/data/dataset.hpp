// Data sets kept as bytes (one byte per pixel, [count, C, H, W] in chw order) and converted to
// floats per batch. Loaded once and shared read-only by every worker group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/memory.hpp"
#include "engine/rng.hpp"
#include "engine/tensor.hpp"

namespace easel {

struct Dataset {
  std::string name;  // "fashion-mnist/train"
  int64_t count = 0, channels = 1, height = 0, width = 0;
  int64_t classes = 10;
  Buffer pixels;                // uint8 [count * channels * height * width]
  std::vector<int32_t> labels;  // [count], each in [0, classes)

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

// `spec`: "fashion-mnist" (/usr/share/datasets/fashion-mnist), "mnist" (/usr/share/datasets/mnist),
// a directory with train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],
// t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz], or
// "synthetic[:N[:CxHxW[:classes]]]" (generated, learnable, deterministic from seed).
Result<DataSplit> load_data(const std::string& spec, MemKind kind, uint64_t seed);

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
