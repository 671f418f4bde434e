// BatchStream (sharding, shuffling, wrap-around, prefetch determinism, state), gather_batch
// layouts and the synthetic data set.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "nets/data/batch_stream.hpp"

namespace easel {
namespace {

// A data set of 1x1x2 images whose pixels spell the image's own index (low byte, high byte), so
// that a batch can be decoded back into indices. Labels are index % 10.
Dataset index_set(int64_t count) {
  Dataset ds;
  ds.name = "index";
  ds.count = count;
  ds.channels = 1;
  ds.height = 1;
  ds.width = 2;
  auto b = Buffer::allocate(static_cast<size_t>(count * 2), MemKind::dram);
  EXPECT_TRUE(b.ok());
  ds.pixels = std::move(b).value();
  for (int64_t i = 0; i < count; ++i) {
    ds.pixels.as<uint8_t>()[2 * i] = static_cast<uint8_t>(i & 0xff);
    ds.pixels.as<uint8_t>()[2 * i + 1] = static_cast<uint8_t>(i >> 8);
    ds.labels.push_back(static_cast<int32_t>(i % 10));
  }
  return ds;
}

std::vector<int64_t> indices_of(const Batch& b, int64_t batch) {
  std::vector<int64_t> idx;
  const float* p = b.images.as<float>();
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t lo = std::lround(p[2 * i] / kPixelScale);
    const int64_t hi = std::lround(p[2 * i + 1] / kPixelScale);
    idx.push_back(lo + 256 * hi);
    EXPECT_EQ(b.labels[static_cast<size_t>(i)], idx.back() % 10);
  }
  return idx;
}

std::unique_ptr<BatchStream> make(const Dataset& ds, int64_t batch, int shard, int shards,
                                  uint64_t seed, bool prefetch, Layout layout = Layout::nchw) {
  auto s = BatchStream::create(ds, batch, layout, shard, shards, seed, prefetch, MemKind::dram);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(s).value() : nullptr;
}

// The first `n` indices the stream returns.
std::vector<int64_t> take(BatchStream& s, int64_t batch, int64_t n) {
  std::vector<int64_t> all;
  while (static_cast<int64_t>(all.size()) < n) {
    const std::vector<int64_t> idx = indices_of(s.next(), batch);
    all.insert(all.end(), idx.begin(), idx.end());
  }
  all.resize(static_cast<size_t>(n));
  return all;
}

// The order of one shard epoch as the stream draws it from an Rng in state `rng`.
std::vector<int64_t> epoch_order(const std::array<uint64_t, 4>& rng, int64_t count, int shard,
                                 int shards, std::array<uint64_t, 4>* after = nullptr) {
  std::vector<int64_t> o;
  for (int64_t i = shard; i < count; i += shards)
    o.push_back(i);
  Rng r;
  r.set_state(rng);
  for (size_t i = o.size() - 1; i > 0; --i)
    std::swap(o[i], o[r.below(i + 1)]);
  if (after) *after = r.state();
  return o;
}

TEST(BatchStream, ShardsPartitionEveryEpoch) {
  const Dataset ds = index_set(101);
  const int shards = 4;
  const int kEpochs = 3;
  for (bool prefetch : {false, true}) {
    std::vector<std::multiset<int64_t>> seen(kEpochs);
    for (int shard = 0; shard < shards; ++shard) {
      auto s = make(ds, 7, shard, shards, 11, prefetch);
      const int64_t n = s->shard_size();
      EXPECT_EQ(n, (101 - shard + shards - 1) / shards);
      const std::vector<int64_t> all = take(*s, 7, kEpochs * n);
      for (int e = 0; e < kEpochs; ++e) {
        std::set<int64_t> epoch;
        for (int64_t k = e * n; k < (e + 1) * n; ++k) {
          const int64_t i = all[static_cast<size_t>(k)];
          EXPECT_EQ(i % shards, shard);
          epoch.insert(i);
          seen[static_cast<size_t>(e)].insert(i);
        }
        EXPECT_EQ(static_cast<int64_t>(epoch.size()), n) << "epoch " << e << " not a permutation";
      }
    }
    for (const auto& e : seen) {
      ASSERT_EQ(e.size(), 101u);
      int64_t want = 0;
      for (int64_t i : e)
        EXPECT_EQ(i, want++);  // every index exactly once per epoch
    }
  }
}

// The shuffle buffer's order: every position once; a buffer of one sample reads each tar file
// in order (the files in a shuffled order); a larger one lets no sample out before it is read.
TEST(ShuffleOrder, APermutationWithinTheBuffer) {
  const std::vector<std::pair<int64_t, int64_t>> files{{0, 5}, {5, 12}, {12, 13}, {13, 30}};
  Rng rng(3);
  const std::vector<int64_t> one = shuffle_order(files, 1, rng);
  std::vector<int64_t> sorted = one;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 30; ++i)
    ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
  size_t k = 0;  // walk the files in the order the buffer of one met them
  int met = 0;
  while (k < one.size()) {
    const auto f =
        std::find_if(files.begin(), files.end(), [&](const auto& x) { return x.first == one[k]; });
    ASSERT_NE(f, files.end()) << "position " << one[k] << " starts no file";
    for (int64_t p = f->first; p < f->second; ++p)
      ASSERT_EQ(one[k++], p);
    ++met;
  }
  EXPECT_EQ(met, 4);
  for (int64_t buffer : {4, 10, 100}) {
    const std::array<uint64_t, 4> before = rng.state();
    const std::vector<int64_t> o = shuffle_order(files, buffer, rng);
    Rng again;
    again.set_state(before);
    EXPECT_EQ(shuffle_order(files, buffer, again), o);  // a function of the RNG's state
    std::vector<int64_t> s = o;
    std::sort(s.begin(), s.end());
    EXPECT_EQ(s, sorted);
    EXPECT_NE(o, one);
    // A sample goes out only once read: output k is drawn from the first buffer + k samples
    // read, so the j-th sample of a file goes out no earlier than place j - buffer + 1.
    for (const auto& [b, e] : files) {
      std::vector<int64_t> at;  // where each of the file's samples goes out
      for (int64_t p = b; p < e; ++p)
        at.push_back(std::find(o.begin(), o.end(), p) - o.begin());
      for (size_t j = 0; j < at.size(); ++j)
        EXPECT_GT(at[j], static_cast<int64_t>(j) - buffer) << "file " << b << " sample " << j;
    }
  }
}

TEST(BatchStream, EpochsAreFreshShuffles) {
  const Dataset ds = index_set(60);
  auto s = make(ds, 10, 0, 1, 5, false);
  const std::vector<int64_t> all = take(*s, 10, 180);
  const std::vector<int64_t> e0(all.begin(), all.begin() + 60),
      e1(all.begin() + 60, all.begin() + 120);
  std::vector<int64_t> sorted(60);
  for (int64_t i = 0; i < 60; ++i)
    sorted[static_cast<size_t>(i)] = i;
  EXPECT_NE(e0, sorted);
  EXPECT_NE(e0, e1);
  // Each epoch is the shuffle of the shard's canonical order drawn by the stream's own Rng.
  std::array<uint64_t, 4> after{};
  EXPECT_EQ(e0, epoch_order(Rng::stream(5, 0).state(), 60, 0, 1, &after));
  EXPECT_EQ(e1, epoch_order(after, 60, 0, 1));
}

TEST(BatchStream, SeedsAndShardsDiffer) {
  const Dataset ds = index_set(200);
  auto a = make(ds, 20, 0, 1, 1, false);
  auto b = make(ds, 20, 0, 1, 2, false);
  auto c = make(ds, 20, 0, 1, 1, false);
  const std::vector<int64_t> ta = take(*a, 20, 200);
  EXPECT_NE(ta, take(*b, 20, 200));
  EXPECT_EQ(ta, take(*c, 20, 200));
}

TEST(BatchStream, PrefetchGivesTheSameBatches) {
  const Dataset ds = make_synthetic(300, 3, 4, 5, 10, 9, "syn");
  struct Case {
    int64_t batch;
    int shard, shards;
    Layout layout;
  };
  for (const Case& c :
       {Case{7, 0, 1, Layout::nchw}, Case{32, 1, 3, Layout::nhwc}, Case{150, 2, 4, Layout::nchw}}) {
    auto a = make(ds, c.batch, c.shard, c.shards, 17, false, c.layout);
    auto b = make(ds, c.batch, c.shard, c.shards, 17, true, c.layout);
    const size_t bytes = static_cast<size_t>(c.batch * ds.image_bytes()) * sizeof(float);
    for (int k = 0; k < 40; ++k) {
      const Batch& x = a->next();
      const Batch& y = b->next();
      ASSERT_EQ(x.images.bytes(), bytes);
      ASSERT_EQ(y.images.bytes(), bytes);
      ASSERT_EQ(std::memcmp(x.images.data(), y.images.data(), bytes), 0) << "batch " << k;
      ASSERT_EQ(x.labels, y.labels);
      ASSERT_EQ(x.epoch, y.epoch);
      const StreamState sa = a->state(), sb = b->state();
      ASSERT_EQ(sa.epoch, sb.epoch);
      ASSERT_EQ(sa.cursor, sb.cursor);
      ASSERT_EQ(sa.rng, sb.rng);
    }
  }
}

// A rank that keeps only its groups' shards (keep_shards) must give each of its groups exactly
// the batches that group gets from the whole set in a single process.
TEST(KeepShards, RankPartGivesTheSameBatchesAsTheWholeSet) {
  const Dataset ds = make_synthetic(301, 1, 4, 4, 10, 5, "syn");
  const int shards = 6, first = 2, count = 3;  // e.g. rank 1 of 2 with 3 groups each... of 6
  auto part = keep_shards(ds, first, count, shards, MemKind::dram);
  ASSERT_TRUE(part.ok()) << part.status().to_string();
  int64_t expected = 0;
  for (int64_t i = 0; i < ds.count; ++i)
    expected += (i % shards >= first && i % shards < first + count);
  EXPECT_EQ(part->count, expected);
  for (int k = 0; k < count; ++k) {
    auto whole =
        BatchStream::create(ds, 16, Layout::nchw, first + k, shards, 11, false, MemKind::dram);
    auto mine = BatchStream::create(part.value(), 16, Layout::nchw, k, count, 11, true,
                                    MemKind::dram, first + k);
    ASSERT_TRUE(whole.ok() && mine.ok());
    const size_t bytes = static_cast<size_t>(16 * ds.image_bytes()) * sizeof(float);
    for (int b = 0; b < 12; ++b) {  // past the shard's epoch end (about 50 images)
      const Batch& x = whole.value()->next();
      const Batch& y = mine.value()->next();
      ASSERT_EQ(std::memcmp(x.images.data(), y.images.data(), bytes), 0) << k << " " << b;
      ASSERT_EQ(x.labels, y.labels);
    }
  }
  EXPECT_FALSE(keep_shards(ds, 4, 3, 6, MemKind::dram).ok());
  EXPECT_FALSE(keep_shards(ds, 0, 0, 6, MemKind::dram).ok());
}

TEST(BatchStream, StateIsThePositionOfTheNextBatch) {
  const Dataset ds = index_set(50);
  for (bool prefetch : {false, true}) {
    auto s = make(ds, 10, 1, 2, 3, prefetch);  // shard 1 of 2: 25 images
    ASSERT_EQ(s->shard_size(), 25);
    const std::array<uint64_t, 4> rng0 = Rng::stream(3, 1).state();
    std::array<uint64_t, 4> rng1{};
    const std::vector<int64_t> order0 = epoch_order(rng0, 50, 1, 2, &rng1);
    const std::vector<int64_t> order1 = epoch_order(rng1, 50, 1, 2);

    StreamState st = s->state();
    EXPECT_EQ(st.epoch, 0);
    EXPECT_EQ(st.cursor, 0);
    EXPECT_EQ(st.rng, rng0);
    const int64_t want_epoch[] = {0, 0, 0, 1, 1, 2};
    const int64_t want_cursor[] = {10, 20, 5, 15, 0, 10};
    int64_t pos = 0;  // position in the concatenation of epochs 0 and 1
    for (int k = 0; k < 5; ++k) {
      const Batch& b = s->next();
      EXPECT_EQ(b.epoch, want_epoch[k]) << "batch " << k;  // the epoch of its first image
      const std::vector<int64_t> idx = indices_of(b, 10);
      for (int64_t i : idx) {
        EXPECT_EQ(
            i, pos < 25 ? order0[static_cast<size_t>(pos)] : order1[static_cast<size_t>(pos - 25)]);
        ++pos;
      }
      st = s->state();
      EXPECT_EQ(st.epoch, want_epoch[k + 1]) << "after batch " << k;
      EXPECT_EQ(st.cursor, want_cursor[k]) << "after batch " << k;
      if (st.epoch == 1) {
        EXPECT_EQ(st.rng, rng1);
      }
    }
    // The state rebuilds the rest: epoch 2 from its rng, then the cursor.
    const std::vector<int64_t> order2 = epoch_order(st.rng, 50, 1, 2);
    const std::vector<int64_t> rest = indices_of(s->next(), 10);
    EXPECT_EQ(rest,
              std::vector<int64_t>(order2.begin() + st.cursor, order2.begin() + st.cursor + 10));
  }
}

TEST(BatchStream, BatchesWrapAcrossEpochs) {
  const Dataset ds = index_set(12);
  for (bool prefetch : {false, true}) {
    auto s = make(ds, 10, 0, 3, 8, prefetch);  // shard of 4 images, batches of 10
    ASSERT_EQ(s->shard_size(), 4);
    std::vector<int64_t> concat;
    std::array<uint64_t, 4> rng = Rng::stream(8, 0).state();
    for (int e = 0; e < 8; ++e) {
      const std::vector<int64_t> o = epoch_order(rng, 12, 0, 3, &rng);
      concat.insert(concat.end(), o.begin(), o.end());
    }
    const std::vector<int64_t> all = take(*s, 10, 30);
    EXPECT_EQ(all, std::vector<int64_t>(concat.begin(), concat.begin() + 30));
    EXPECT_EQ(s->state().epoch, 7);  // 30 images = 7 epochs of 4, plus 2
    EXPECT_EQ(s->state().cursor, 2);
  }
}

TEST(BatchStream, RejectsBadArguments) {
  const Dataset ds = index_set(3);
  auto check = [&](int64_t batch, int shard, int shards, const char* want) {
    auto s = BatchStream::create(ds, batch, Layout::nchw, shard, shards, 1, true, MemKind::dram);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), Code::invalid_argument);
    EXPECT_NE(s.status().message().find(want), std::string::npos) << s.status().message();
  };
  check(0, 0, 1, "batch size");
  check(-4, 0, 1, "batch size");
  check(8, 0, 0, "shards");
  check(8, 2, 2, "shard 2");
  check(8, -1, 2, "shard -1");
  check(8, 3, 4, "holds no images");
  auto s = BatchStream::create(ds, 8, Layout::nchw, 0, 1, 1, false, MemKind::device);
  EXPECT_FALSE(s.ok());
}

TEST(BatchStream, ShutsDownCleanly) {
  const Dataset ds = index_set(40);
  for (int k = 0; k < 20; ++k)
    make(ds, 8, 0, 1, 1, true);  // never asked for a batch
  auto s = make(ds, 8, 0, 1, 1, true);
  s->next();
  s.reset();  // the producer is waiting on a full slot
  s = make(ds, 8, 0, 1, 1, true);
  s->next();
  s->next();
  s->next();
}

TEST(GatherBatch, LayoutsForThreeChannels) {
  const int64_t c = 3, h = 2, w = 3;
  Dataset ds;
  ds.count = 4;
  ds.channels = c;
  ds.height = h;
  ds.width = w;
  auto b = Buffer::allocate(static_cast<size_t>(4 * c * h * w), MemKind::dram);
  ASSERT_TRUE(b.ok());
  ds.pixels = std::move(b).value();
  for (int64_t i = 0; i < 4 * c * h * w; ++i)
    ds.pixels.as<uint8_t>()[i] = static_cast<uint8_t>(i);
  ds.labels = {3, 1, 4, 1};
  const int64_t idx[] = {2, 0, 3};
  const Shape4 shape{3, c, h, w};
  std::vector<float> nchw(static_cast<size_t>(shape.count())),
      nhwc(static_cast<size_t>(shape.count()));
  int32_t l1[3], l2[3];
  gather_batch(ds, idx, 3, Layout::nchw, nchw.data(), l1);
  gather_batch(ds, idx, 3, Layout::nhwc, nhwc.data(), l2);
  for (int64_t n = 0; n < 3; ++n) {
    EXPECT_EQ(l1[n], ds.labels[static_cast<size_t>(idx[n])]);
    EXPECT_EQ(l2[n], l1[n]);
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t y = 0; y < h; ++y) {
        for (int64_t x = 0; x < w; ++x) {
          const float want = ds.image(idx[n])[(ch * h + y) * w + x] * kPixelScale;
          EXPECT_EQ(nchw[static_cast<size_t>(offset4(shape, Layout::nchw, n, ch, y, x))], want);
          EXPECT_EQ(nhwc[static_cast<size_t>(offset4(shape, Layout::nhwc, n, ch, y, x))], want);
        }
      }
    }
  }
  EXPECT_EQ(nhwc[1], ds.image(2)[h * w] * kPixelScale);  // channel 1 of pixel (0, 0)
}

TEST(GatherBatch, OneChannelLayoutsCoincide) {
  const Dataset ds = make_synthetic(20, 1, 5, 7, 4, 2, "syn");
  const int64_t idx[] = {19, 3, 3, 0};
  std::vector<float> a(4 * 35), b(4 * 35);
  int32_t la[4], lb[4];
  gather_batch(ds, idx, 4, Layout::nchw, a.data(), la);
  gather_batch(ds, idx, 4, Layout::nhwc, b.data(), lb);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a[35 + 6], ds.image(3)[6] * kPixelScale);
}

// Mean image of each class.
std::vector<std::vector<double>> class_means(const Dataset& ds) {
  const int64_t n = ds.image_bytes();
  std::vector<std::vector<double>> mean(static_cast<size_t>(ds.classes),
                                        std::vector<double>(static_cast<size_t>(n)));
  std::vector<int64_t> count(static_cast<size_t>(ds.classes));
  for (int64_t i = 0; i < ds.count; ++i) {
    const size_t l = static_cast<size_t>(ds.labels[static_cast<size_t>(i)]);
    ++count[l];
    for (int64_t j = 0; j < n; ++j)
      mean[l][static_cast<size_t>(j)] += ds.image(i)[j];
  }
  for (size_t l = 0; l < mean.size(); ++l) {
    for (double& v : mean[l])
      v /= std::max<int64_t>(1, count[l]);
  }
  return mean;
}

TEST(Synthetic, Deterministic) {
  const Dataset a = make_synthetic(500, 2, 3, 4, 5, 42, "a");
  const Dataset b = make_synthetic(500, 2, 3, 4, 5, 42, "b");
  const Dataset c = make_synthetic(500, 2, 3, 4, 5, 43, "c");
  const Dataset t = make_synthetic(500, 2, 3, 4, 5, 42, "t", 1);
  ASSERT_EQ(a.pixels.bytes(), 500u * 24u);
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.classes, 5);
  EXPECT_EQ(std::memcmp(a.pixels.data(), b.pixels.data(), a.pixels.bytes()), 0);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(std::memcmp(a.pixels.data(), c.pixels.data(), a.pixels.bytes()), 0);
  EXPECT_NE(std::memcmp(a.pixels.data(), t.pixels.data(), a.pixels.bytes()), 0);
  EXPECT_NE(a.labels, t.labels);
  std::vector<int64_t> per_class(5);
  for (int32_t l : a.labels) {
    ASSERT_TRUE(l >= 0 && l < 5);
    ++per_class[static_cast<size_t>(l)];
  }
  for (int64_t n : per_class)
    EXPECT_GT(n, 50);  // every class is drawn
}

// Another sample stream shares the prototypes: a nearest-class-mean classifier fitted on one
// stream classifies the other almost perfectly (so a small net can learn the set).
TEST(Synthetic, LearnableAndSharedAcrossStreams) {
  const Dataset train = make_synthetic(2000, 1, 8, 8, 10, 7, "train", 0);
  const Dataset test = make_synthetic(500, 1, 8, 8, 10, 7, "test", 1);
  const auto mean = class_means(train);
  int64_t right = 0;
  for (int64_t i = 0; i < test.count; ++i) {
    double best = 1e300;
    int32_t guess = -1;
    for (size_t l = 0; l < mean.size(); ++l) {
      double d = 0;
      for (int64_t j = 0; j < 64; ++j) {
        const double e = test.image(i)[j] - mean[l][static_cast<size_t>(j)];
        d += e * e;
      }
      if (d < best) best = d, guess = static_cast<int32_t>(l);
    }
    right += guess == test.labels[static_cast<size_t>(i)];
  }
  EXPECT_GT(right, test.count * 95 / 100);
}

}  // namespace
// seek() puts a fresh stream (same data, batch, shard, seed) where another one stood: the next
// batches are the same, across epoch ends, with and without the helper thread, also when the
// stream being moved had already prefetched.
TEST(BatchStream, SeekGoesOnWhereAnotherStreamStood) {
  const Dataset ds = index_set(50);
  for (bool prefetch : {false, true}) {
    auto a = make(ds, 10, 1, 2, 3, prefetch);
    for (int k = 0; k < 4; ++k)
      a->next();
    const StreamState st = a->state();
    auto b = make(ds, 10, 1, 2, 3, prefetch);
    b->next();  // it had started elsewhere
    ASSERT_TRUE(b->seek(st).ok());
    EXPECT_EQ(b->state().epoch, st.epoch);
    EXPECT_EQ(b->state().cursor, st.cursor);
    EXPECT_EQ(take(*b, 10, 60), take(*a, 10, 60)) << "prefetch " << prefetch;
    StreamState bad = st;
    bad.cursor = 25;  // the shard holds 25 images
    EXPECT_FALSE(b->seek(bad).ok());
  }
}

}  // namespace easel
