// A run's data: a training set and a test set, from arrays in memory or loaded by the same
// spec as `easel train --data`. easel keeps images as 8-bit pixels (as the IDX files hold them)
// and feeds the net pixel / 256; float images in [0, 1] are copied in as round(x * 256), at
// most 255, and 8-bit images are read where the caller holds them (borrow_train). Data is
// shared read-only by every worker group and may serve several runs.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "easel/status.hpp"

namespace easel::api {

// One set of images, borrowed for the call that copies it.
struct ImageArrays {
  int64_t count = 0, channels = 1, height = 0, width = 0;  // N x C x H x W
  int64_t classes = 0;                                     // labels are in [0, classes)
  std::span<const float> images;                           // N*C*H*W, in [0, 1], NCHW order
  std::span<const int32_t> labels;                         // N
};

// One set of 8-bit images, read in place: no copy of the pixels is made.
struct ImageBytes {
  int64_t count = 0, channels = 1, height = 0, width = 0;  // N x C x H x W
  int64_t classes = 0;                                     // labels are in [0, classes)
  std::span<const uint8_t> pixels;                         // N*C*H*W, NCHW order; net: pixel/256
  std::span<const int32_t> labels;                         // N, copied
  // Held by the Data until the set is replaced or the Data destroyed: whatever keeps `pixels`
  // valid (their owner: a vector, a numpy array's reference). May be null when the caller
  // guarantees that lifetime itself.
  std::shared_ptr<const void> owner;
};

class Data {
 public:
  Data();
  ~Data();
  Data(Data&&) noexcept;
  Data& operator=(Data&&) noexcept;
  Data(const Data&) = delete;
  Data& operator=(const Data&) = delete;

  // Copies the arrays in. Checks that every extent is positive, that images holds
  // N*C*H*W values each in [0, 1] and labels N values each in [0, classes); errors
  // (invalid_argument) name the set ("train" or "test"), the array and the index. The test set
  // must have the training set's C x H x W and classes (checked by Run::train).
  Status set_train(const ImageArrays& arrays);
  Status set_test(const ImageArrays& arrays);
  // Borrows the pixels: every run on this Data reads them where they are, so they must stay
  // valid and unchanged until the set is replaced or the Data destroyed (bytes.owner is held
  // that long). The same checks and errors as set_train, but for the [0, 1] range that bytes
  // cannot leave. A run whose --placement puts the dataset class elsewhere than dram is
  // refused (Run::train): the pixels stay in the memory the caller took them from.
  Status borrow_train(const ImageBytes& bytes);
  Status borrow_test(const ImageBytes& bytes);
  // Both sets as `easel train --data SPEC` reads them: "fashion-mnist", "mnist", a directory of
  // the four IDX files, or "synthetic[:N[:CxHxW[:classes]]]" (generated from seed).
  Status load(std::string_view spec, uint64_t seed = 1);

  int64_t train_count() const;
  int64_t test_count() const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace easel::api
