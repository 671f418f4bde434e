// Training-time augmentation (random crop with zero padding, horizontal flip) and per-channel
// normalisation, applied while a batch's bytes become floats. An image's random draws depend
// only on (seed, the group's RNG stream, the shard epoch, the image's position in the shard),
// so a stream that seeks to a checkpoint's position draws them again without saved state, and
// a rank that keeps only its shards (keep_shards) draws what a single process draws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nets/data/dataset.hpp"

namespace easel {

struct Augment {
  // torchvision's RandomResizedCrop(N) (scale 0.08-1, ratio 3/4-4/3; nets/data/crop.hpp) for
  // training and Resize(N * 256 / 224) + CenterCrop(N) for evaluation, decided before each
  // image is decoded: only a streamed source (an image folder or shards read as batches are
  // needed, nets/data/stream_source.hpp) takes it. 0: none.
  int64_t resized_crop = 0;
  // Random crop: the image padded with crop_pad zero pixels on every side (pixel value 0,
  // before normalisation), then a window of the original size at a uniform offset. 0: none.
  int64_t crop_pad = 0;
  bool flip = false;  // mirror left-right with probability 1/2 (after the crop)
  // Per channel (one value: every channel): floats = (pixel / 255 - mean[c]) / std[c].
  // Empty: floats = pixel * kPixelScale, as without augmentation.
  std::vector<float> mean, std;

  bool normalizes() const { return !mean.empty(); }
  bool moves() const { return crop_pad > 0 || flip || resized_crop > 0; }
  // The shorter side an evaluation image is resized to before its centre crop of resized_crop
  // (256 for 224, as torchvision's ImageNet evaluation).
  int64_t eval_resize() const { return (resized_crop * 256 + 112) / 224; }
  bool none() const { return !normalizes() && !moves(); }
};

// Largest crop_pad parse_augment takes.
constexpr int64_t kMaxCropPad = 256;

// Comma-separated fields, any order, each at most once:
//   none                 no augmentation (also the empty text)
//   imagenet             random-resized-crop=224,flip,normalize=imagenet (ImageNet training)
//   random-resized-crop=N  RandomResizedCrop(N) / Resize + CenterCrop(N), N in [8, 4096];
//                        streamed sources only
//   crop-pad=N           random crop after padding by N pixels, N in [1, 256]
//   flip                 random horizontal flip
//   normalize=NAME       NAME's mean and std: cifar10 (or cifar), cifar100, imagenet, mnist,
//                        fashion-mnist
//   mean=M[/M...]        explicit per-channel mean and std (both or neither; std > 0), e.g.
//   std=S[/S...]           mean=0.5/0.5/0.5,std=0.25/0.25/0.25
// e.g. "crop-pad=4,flip,normalize=cifar10". Errors (invalid_argument) quote the text and name
// the field.
Result<Augment> parse_augment(std::string_view text);

// The text parse_augment reads back to `a` ("none" for no augmentation; means and stds as
// explicit lists).
std::string augment_text(const Augment& a);

// Whether `a` fits `ds`: mean and std have one value or one per channel of ds.
Status check_augment(const Augment& a, const Dataset& ds);

// One image's random draws: the crop window's offset (dy, dx) in the padded image, each in
// [0, 2 crop_pad], and whether it is mirrored; with resized_crop, `key` seeds the Rng that
// draws the crop once the image's size is known (random_resized_crop). Deterministic in its
// arguments.
struct AugmentDraw {
  int64_t dy = 0, dx = 0;
  bool flip = false;
  uint64_t key = 0;
};
AugmentDraw draw_augment(const Augment& a, uint64_t seed, uint64_t stream, int64_t epoch,
                         int64_t position);

// gather_batch (dataset.hpp) with augmentation: image i of the batch is cropped and flipped as
// draws[i] says (draws null: neither, as for a test set) and normalised as `a` says. With
// a.none() (or nothing to do) the floats are exactly gather_batch's.
void gather_batch(const Dataset& ds, const int64_t* idx, int64_t n, Layout layout, float* images,
                  int32_t* labels, const Augment& a, const AugmentDraw* draws);

// The batch as bytes, for a device that normalises it itself (Device::normalize_bytes: a
// uint8 batch crosses the host link, 4x fewer bytes than floats). pixel_table(ds, a) holds the
// float that gather_batch(ds, ..., a, draws) gives each byte value of each channel:
// table[c * 256 + v] (ds.channels * 256 values). gather_batch_bytes writes the bytes that
// gather_batch converts (cropped with byte 0 as padding, flipped, in the layout's order), so
// that table[channel * 256 + byte] of every element is gather_batch's float, bit for bit.
// Both take held and streamed sets.
std::vector<float> pixel_table(const Dataset& ds, const Augment& a);
void gather_batch_bytes(const Dataset& ds, const int64_t* idx, int64_t n, Layout layout,
                        uint8_t* bytes, int32_t* labels, const Augment& a,
                        const AugmentDraw* draws);

}  // namespace easel
