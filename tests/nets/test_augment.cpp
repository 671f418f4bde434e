// Augmentation: the spec's parsing, the per-image draws (range, spread, determinism), the
// crop/flip/normalisation of a batch against a plain-loop reference, BatchStream with
// augmentation (reproducible, resumable after seek, the same across keep_shards), and the test
// set's batches (normalised, never moved).
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "nets/data/augment.hpp"
#include "nets/data/batch_stream.hpp"

namespace easel {
namespace {

// count images of c x h x w whose pixel j of image i is 1 + (7 i + j) % 254: never 0, so
// padding (byte 0) is told apart from image pixels.
Dataset numbered_set(int64_t count, int64_t c, int64_t h, int64_t w) {
  Dataset ds;
  ds.name = "numbered";
  ds.count = count;
  ds.channels = c;
  ds.height = h;
  ds.width = w;
  ds.classes = 10;
  auto b = Buffer::allocate(static_cast<size_t>(count * c * h * w), MemKind::dram);
  EXPECT_TRUE(b.ok());
  ds.pixels = std::move(b).value();
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t j = 0; j < c * h * w; ++j)
      ds.pixels.as<uint8_t>()[i * c * h * w + j] = static_cast<uint8_t>(1 + (7 * i + j) % 254);
    ds.labels.push_back(static_cast<int32_t>(i % 10));
  }
  return ds;
}

Augment parse(const char* text) {
  auto a = parse_augment(text);
  EXPECT_TRUE(a.ok()) << text << ": " << a.status().to_string();
  return a.ok() ? a.value() : Augment();
}

// The reference: image k of ds cropped, flipped and normalised as (a, d) say, nchw, by the
// definitions in augment.hpp.
std::vector<float> reference(const Dataset& ds, int64_t k, const Augment& a, const AugmentDraw& d,
                             int64_t pad) {
  std::vector<float> out;
  const int64_t h = ds.height, w = ds.width;
  for (int64_t c = 0; c < ds.channels; ++c) {
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        const int64_t cx = d.flip ? w - 1 - x : x;    // the flip mirrors the cropped window
        const int64_t py = y + d.dy, px = cx + d.dx;  // in the padded image
        const bool pixel = py >= pad && py < h + pad && px >= pad && px < w + pad;
        const uint8_t v = pixel ? ds.image(k)[(c * h + py - pad) * w + px - pad] : 0;
        if (!a.normalizes()) {
          out.push_back(static_cast<float>(v) * kPixelScale);
        } else {
          const size_t m = a.mean.size() == 1 ? 0 : static_cast<size_t>(c);
          out.push_back((static_cast<float>(v) / 255.f - a.mean[m]) / a.std[m]);
        }
      }
    }
  }
  return out;
}

// ---- parse_augment ----

TEST(ParseAugment, Fields) {
  EXPECT_TRUE(parse("").none());
  EXPECT_TRUE(parse("none").none());
  const Augment a = parse("crop-pad=4,flip,normalize=cifar10");
  EXPECT_EQ(a.crop_pad, 4);
  EXPECT_TRUE(a.flip);
  EXPECT_EQ(a.mean, (std::vector<float>{0.4914f, 0.4822f, 0.4465f}));
  EXPECT_EQ(a.std, (std::vector<float>{0.2470f, 0.2435f, 0.2616f}));
  EXPECT_EQ(parse("normalize=cifar").mean, a.mean);
  EXPECT_EQ(parse("normalize=imagenet").std, (std::vector<float>{0.229f, 0.224f, 0.225f}));
  EXPECT_EQ(parse("normalize=mnist").mean, (std::vector<float>{0.1307f}));
  const Augment b = parse("flip,mean=0.5/0.25/0,std=0.125/1/2");
  EXPECT_FALSE(b.crop_pad);
  EXPECT_EQ(b.mean, (std::vector<float>{0.5f, 0.25f, 0.f}));
  EXPECT_EQ(b.std, (std::vector<float>{0.125f, 1.f, 2.f}));
  // augment_text reads back to the same augmentation.
  for (const char* t : {"none", "crop-pad=4,flip,normalize=cifar10", "flip", "crop-pad=256",
                        "normalize=fashion-mnist", "mean=0.1,std=0.3"}) {
    const Augment x = parse(t);
    const Augment y = parse(augment_text(x).c_str());
    EXPECT_EQ(x.crop_pad, y.crop_pad) << t;
    EXPECT_EQ(x.flip, y.flip) << t;
    EXPECT_EQ(x.mean, y.mean) << t;
    EXPECT_EQ(x.std, y.std) << t;
  }
  EXPECT_EQ(augment_text(Augment()), "none");
  EXPECT_EQ(augment_text(parse("flip,crop-pad=2")), "crop-pad=2,flip");
}

TEST(ParseAugment, ErrorsNameTheField) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"crop-pad=0", "crop-pad must be an integer in [1, 256], not '0'"},
      {"crop-pad=257", "crop-pad must be"},
      {"crop-pad=x", "crop-pad must be"},
      {"crop-pad", "crop-pad must be"},
      {"flip=1", "flip takes no value"},
      {"normalize=cifar11", "normalize must be one of cifar10, cifar100, imagenet, mnist"},
      {"mean=0.5", "mean without std"},
      {"std=0.5", "std without mean"},
      {"mean=0.5,std=0", "std must be positive"},
      {"mean=0.5,std=-1", "std must be positive"},
      {"mean=a,std=1", "mean must be 1 to 64 numbers"},
      {"mean=0.5/,std=1", "mean must be"},
      {"mean=1/2,std=1", "mean has 2 values but std 1"},
      {"normalize=mnist,mean=1,std=1", "normalize and mean/std both given"},
      {"flip,flip", "flip given twice"},
      {"flip,,crop-pad=1", "an empty field"},
      {"crop", "unknown field 'crop'"},
      {"none,flip", "none cannot be combined"},
      {"flip,none", "none cannot be combined"},
  };
  for (const auto& [text, why] : cases) {
    auto r = parse_augment(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), Code::invalid_argument);
    const std::string& m = r.status().message();
    EXPECT_NE(m.find(std::string("augment '") + text + "': "), std::string::npos) << m;
    EXPECT_NE(m.find(why), std::string::npos) << text << ": " << m;
  }
}

TEST(CheckAugment, ChannelsMustMatch) {
  const Dataset grey = numbered_set(4, 1, 3, 3), rgb = numbered_set(4, 3, 3, 3);
  EXPECT_TRUE(check_augment(parse("normalize=mnist"), rgb).ok());  // one value: every channel
  EXPECT_TRUE(check_augment(parse("normalize=cifar10"), rgb).ok());
  const Status s = check_augment(parse("normalize=cifar10"), grey);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("mean and std have 3 values but data set 'numbered' has 1 channel"),
            std::string::npos)
      << s.message();
  auto stream = BatchStream::create(grey, 2, Layout::nchw, 0, 1, 1, false, MemKind::dram, -1,
                                    parse("normalize=imagenet"));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), Code::invalid_argument);
}

// ---- draws ----

TEST(DrawAugment, OffsetsInRangeSpreadAndDeterministic) {
  const Augment a = parse("crop-pad=3,flip");
  std::set<int64_t> dys, dxs;
  int flips = 0;
  constexpr int kN = 2000;
  for (int p = 0; p < kN; ++p) {
    const AugmentDraw d = draw_augment(a, 42, 1, 0, p);
    ASSERT_TRUE(d.dy >= 0 && d.dy <= 6 && d.dx >= 0 && d.dx <= 6) << d.dy << " " << d.dx;
    dys.insert(d.dy);
    dxs.insert(d.dx);
    flips += d.flip;
    const AugmentDraw again = draw_augment(a, 42, 1, 0, p);
    EXPECT_TRUE(again.dy == d.dy && again.dx == d.dx && again.flip == d.flip);
  }
  EXPECT_EQ(dys.size(), 7u);  // every offset of [0, 6] drawn
  EXPECT_EQ(dxs.size(), 7u);
  EXPECT_GT(flips, kN * 2 / 5);
  EXPECT_LT(flips, kN * 3 / 5);
  // Each argument changes the draws (over a few positions).
  auto draws = [&](uint64_t seed, uint64_t stream, int64_t epoch) {
    std::vector<int64_t> v;
    for (int p = 0; p < 16; ++p) {
      const AugmentDraw d = draw_augment(a, seed, stream, epoch, p);
      v.push_back(d.dy * 100 + d.dx * 10 + d.flip);
    }
    return v;
  };
  EXPECT_NE(draws(42, 1, 0), draws(43, 1, 0));
  EXPECT_NE(draws(42, 1, 0), draws(42, 2, 0));
  EXPECT_NE(draws(42, 1, 0), draws(42, 1, 1));
  // Nothing asked, nothing drawn.
  const AugmentDraw none = draw_augment(Augment(), 42, 1, 0, 5);
  EXPECT_TRUE(none.dy == 0 && none.dx == 0 && !none.flip);
}

// ---- the conversion ----

TEST(GatherAugmented, CropAndFlipByHand) {
  // One 1x2x3 image: rows {1 2 3} {4 5 6}.
  Dataset ds = numbered_set(1, 1, 2, 3);
  uint8_t* p = ds.pixels.as<uint8_t>();
  for (int j = 0; j < 6; ++j)
    p[j] = static_cast<uint8_t>(j + 1);
  const int64_t idx = 0;
  std::vector<float> out(6);
  int32_t label = -1;
  auto run = [&](const Augment& a, AugmentDraw d) {
    gather_batch(ds, &idx, 1, Layout::nchw, out.data(), &label, a, &d);
    std::vector<int> bytes;
    for (float f : out)
      bytes.push_back(static_cast<int>(std::lround(f / kPixelScale)));
    return bytes;
  };
  const Augment pad1 = parse("crop-pad=1"), flip = parse("flip"), both = parse("crop-pad=1,flip");
  EXPECT_EQ(run(pad1, {1, 1, false}), (std::vector<int>{1, 2, 3, 4, 5, 6}));  // centred
  EXPECT_EQ(run(pad1, {0, 0, false}), (std::vector<int>{0, 0, 0, 0, 1, 2}));  // down-right
  EXPECT_EQ(run(pad1, {2, 2, false}), (std::vector<int>{5, 6, 0, 0, 0, 0}));  // up-left
  EXPECT_EQ(run(pad1, {1, 0, false}), (std::vector<int>{0, 1, 2, 0, 4, 5}));
  EXPECT_EQ(run(flip, {0, 0, true}), (std::vector<int>{3, 2, 1, 6, 5, 4}));  // mirrored
  EXPECT_EQ(run(flip, {0, 0, false}), (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(run(both, {1, 0, true}), (std::vector<int>{2, 1, 0, 5, 4, 0}));  // crop, then flip
  EXPECT_EQ(label, 0);
}

TEST(GatherAugmented, NormalisationValues) {
  Dataset ds = numbered_set(1, 3, 1, 2);
  uint8_t* p = ds.pixels.as<uint8_t>();
  const uint8_t bytes[6] = {0, 255, 128, 1, 64, 200};  // chw
  std::memcpy(p, bytes, 6);
  const int64_t idx = 0;
  int32_t label = 0;
  const Augment a = parse("mean=0.5/0.25/0,std=0.5/0.125/2");
  std::vector<float> nchw(6), nhwc(6);
  gather_batch(ds, &idx, 1, Layout::nchw, nchw.data(), &label, a, nullptr);
  gather_batch(ds, &idx, 1, Layout::nhwc, nhwc.data(), &label, a, nullptr);
  EXPECT_FLOAT_EQ(nchw[0], -1.f);  // (0 - 0.5) / 0.5
  EXPECT_FLOAT_EQ(nchw[1], 1.f);   // (1 - 0.5) / 0.5
  EXPECT_FLOAT_EQ(nchw[2], (128.f / 255.f - 0.25f) / 0.125f);
  EXPECT_FLOAT_EQ(nchw[5], 200.f / 255.f / 2.f);
  for (int c = 0; c < 3; ++c) {
    for (int x = 0; x < 2; ++x) {
      const float want = (static_cast<float>(bytes[c * 2 + x]) / 255.f - a.mean[c]) / a.std[c];
      EXPECT_EQ(nchw[c * 2 + x], want);  // bit for bit the formula
      EXPECT_EQ(nhwc[x * 3 + c], want);
    }
  }
  // One value for every channel.
  gather_batch(ds, &idx, 1, Layout::nchw, nchw.data(), &label, parse("mean=0.5,std=0.25"), nullptr);
  for (int j = 0; j < 6; ++j)
    EXPECT_EQ(nchw[j], (static_cast<float>(bytes[j]) / 255.f - 0.5f) / 0.25f);
}

TEST(GatherAugmented, MatchesTheReferenceInBothLayouts) {
  const Dataset ds = numbered_set(6, 3, 5, 4);
  const Augment a = parse("crop-pad=2,flip,normalize=cifar10");
  const int64_t idx[3] = {4, 0, 5};
  std::vector<AugmentDraw> d;
  for (int64_t i = 0; i < 3; ++i)
    d.push_back(draw_augment(a, 9, 0, 0, i));
  d[1] = {4, 0, true};  // the extreme offsets too
  d[2] = {0, 4, false};
  const int64_t chw = 60;
  std::vector<float> nchw(3 * chw), nhwc(3 * chw);
  int32_t labels[3];
  gather_batch(ds, idx, 3, Layout::nchw, nchw.data(), labels, a, d.data());
  gather_batch(ds, idx, 3, Layout::nhwc, nhwc.data(), labels, a, d.data());
  for (int64_t i = 0; i < 3; ++i) {
    const std::vector<float> want = reference(ds, idx[i], a, d[static_cast<size_t>(i)], 2);
    EXPECT_EQ(std::vector<float>(nchw.begin() + i * chw, nchw.begin() + (i + 1) * chw), want) << i;
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t p = 0; p < 20; ++p)
        ASSERT_EQ(nhwc[static_cast<size_t>(i * chw + p * 3 + c)],
                  want[static_cast<size_t>(c * 20 + p)]);
    EXPECT_EQ(labels[i], ds.labels[static_cast<size_t>(idx[i])]);
  }
}

// Without augmentation (or with draws but nothing to move) the floats are gather_batch's.
TEST(GatherAugmented, NoneIsThePlainConversion) {
  const Dataset ds = numbered_set(4, 3, 4, 4);
  const int64_t idx[2] = {3, 1};
  std::vector<float> plain(96), aug(96);
  int32_t l1[2], l2[2];
  gather_batch(ds, idx, 2, Layout::nhwc, plain.data(), l1);
  const AugmentDraw d[2] = {{1, 1, true}, {0, 2, false}};
  gather_batch(ds, idx, 2, Layout::nhwc, aug.data(), l2, Augment(), d);
  EXPECT_EQ(plain, aug);
  // Test-set use: the moves of `a`, but no draws: only normalised.
  const Augment a = parse("crop-pad=4,flip");
  gather_batch(ds, idx, 2, Layout::nhwc, aug.data(), l2, a, nullptr);
  EXPECT_EQ(plain, aug);
  std::vector<float> normalised(96);
  gather_batch(ds, idx, 2, Layout::nhwc, normalised.data(), l1, parse("normalize=cifar10"),
               nullptr);
  gather_batch(ds, idx, 2, Layout::nhwc, aug.data(), l2, parse("crop-pad=4,flip,normalize=cifar10"),
               nullptr);
  EXPECT_EQ(normalised, aug);
  EXPECT_EQ(normalised[0], (ds.image(3)[0] / 255.f - 0.4914f) / 0.2470f);
}

// ---- BatchStream ----

std::unique_ptr<BatchStream> stream(const Dataset& ds, int shard, int shards, bool prefetch,
                                    const Augment& a, int64_t rng_stream = -1) {
  auto s = BatchStream::create(ds, 5, Layout::nchw, shard, shards, 77, prefetch, MemKind::dram,
                               rng_stream, a);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::vector<float> floats(const Batch& b) {
  return std::vector<float>(b.images.as<float>(),
                            b.images.as<float>() + b.images.bytes() / sizeof(float));
}

// Every image of every batch is the reference for the draw of (seed, stream, epoch, position in
// the shard); the batches span an epoch boundary (shard of 7 images, batches of 5).
TEST(AugmentedStream, ImagesAreTheirDrawsApplied) {
  const Dataset ds = numbered_set(21, 3, 4, 4);
  const Augment a = parse("crop-pad=2,flip,normalize=cifar10");
  auto s = stream(ds, 1, 3, false, a);
  auto plain = stream(ds, 1, 3, false, Augment());  // the same order, unaugmented
  bool some_moved = false;
  for (int b = 0; b < 6; ++b) {
    const int64_t epoch0 = s->state().epoch, cursor0 = s->state().cursor;
    const Batch& got = s->next();
    const Batch& ref = plain->next();
    for (int64_t i = 0; i < 5; ++i) {
      // The image's index, read back from the unaugmented batch's first pixel.
      const int64_t first = std::lround(ref.images.as<float>()[i * 48] / kPixelScale);
      int64_t k = -1;
      for (int64_t j = 0; j < ds.count; ++j)
        if (ds.image(j)[0] == first && j % 3 == 1) k = j;
      ASSERT_GE(k, 0);
      const int64_t epoch = epoch0 + (cursor0 + i) / 7;  // the shard holds 7 images
      const AugmentDraw d = draw_augment(a, 77, 1, epoch, (k - 1) / 3);
      some_moved = some_moved || d.dy != 2 || d.dx != 2 || d.flip;
      const std::vector<float> want = reference(ds, k, a, d, 2);
      ASSERT_EQ(std::vector<float>(got.images.as<float>() + i * 48,
                                   got.images.as<float>() + (i + 1) * 48),
                want)
          << "batch " << b << " image " << i;
      EXPECT_EQ(got.labels[static_cast<size_t>(i)], ds.labels[static_cast<size_t>(k)]);
    }
  }
  EXPECT_TRUE(some_moved);
}

TEST(AugmentedStream, ReproducibleWithAndWithoutPrefetchAndAfterSeek) {
  const Dataset ds = numbered_set(40, 3, 6, 6);
  const Augment a = parse("crop-pad=3,flip,normalize=imagenet");
  auto x = stream(ds, 0, 2, false, a), y = stream(ds, 0, 2, true, a);
  std::vector<std::vector<float>> first;
  StreamState mid;
  for (int b = 0; b < 12; ++b) {
    if (b == 5) mid = x->state();
    first.push_back(floats(x->next()));
    EXPECT_EQ(floats(y->next()), first.back()) << b;
  }
  // A new stream that seeks to the state before batch 5 returns batches 5.. again.
  for (bool prefetch : {false, true}) {
    auto z = stream(ds, 0, 2, prefetch, a);
    ASSERT_TRUE(z->seek(mid).ok());
    for (int b = 5; b < 12; ++b)
      EXPECT_EQ(floats(z->next()), first[static_cast<size_t>(b)]) << b;
  }
  // Epochs draw anew: the whole second epoch differs from the first though both hold the
  // same images (20 per shard epoch, 4 batches).
  auto e = stream(ds, 0, 1, false, parse("crop-pad=3,flip"));
  auto p = stream(ds, 0, 1, false, Augment());
  int differ = 0;
  for (int b = 0; b < 16; ++b) {
    const std::vector<float> aug = floats(e->next()), plain = floats(p->next());
    differ += aug != plain;
  }
  EXPECT_GE(differ, 15);
}

// A rank that keeps only its shards (keep_shards) gets the augmented batches the same group
// gets in a single process: the draws follow the position in the shard, not the image index.
TEST(AugmentedStream, SameAcrossKeepShards) {
  const Dataset ds = numbered_set(50, 1, 5, 5);
  const Augment a = parse("crop-pad=2,flip");
  const int shards = 4, first = 2, count = 2;
  auto part = keep_shards(ds, first, count, shards, MemKind::dram);
  ASSERT_TRUE(part.ok()) << part.status().to_string();
  for (int k = 0; k < count; ++k) {
    auto whole = stream(ds, first + k, shards, false, a);
    auto mine = stream(part.value(), k, count, true, a, first + k);
    for (int b = 0; b < 8; ++b)
      ASSERT_EQ(floats(whole->next()), floats(mine->next()))
          << "group " << first + k << " batch " << b;
  }
}

TEST(AugmentedStream, DefaultIsTodaysStream) {
  const Dataset ds = numbered_set(30, 3, 4, 4);
  auto old = BatchStream::create(ds, 5, Layout::nhwc, 0, 1, 3, false, MemKind::dram);
  auto now =
      BatchStream::create(ds, 5, Layout::nhwc, 0, 1, 3, false, MemKind::dram, -1, parse("none"));
  ASSERT_TRUE(old.ok() && now.ok());
  for (int b = 0; b < 10; ++b) {
    const Batch& x = (*old)->next();
    const Batch& y = (*now)->next();
    ASSERT_EQ(floats(x), floats(y));
    ASSERT_EQ(x.labels, y.labels);
  }
}

}  // namespace
}  // namespace easel
