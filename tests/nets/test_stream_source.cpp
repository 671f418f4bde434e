// Streamed data sets: the box decode (scaled and cropped JPEG decoding against the full decode),
// streamed image folders and shards through BatchStream (threads, resume, bounded memory), and
// each bad-data case.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "devices/activations.hpp"
#include "nets/data/augment.hpp"
#include "nets/data/batch_stream.hpp"
#include "nets/data/crop.hpp"
#include "nets/data/image_decode.hpp"
#include "nets/data/pack.hpp"
#include "nets/data/stream_source.hpp"
#include "nets/data/tar_index.hpp"

namespace easel {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// A smooth, textured RGB image (JPEG-friendly, like a photograph) of w x h, varied by salt.
RgbImage picture(int64_t w, int64_t h, int salt) {
  RgbImage im;
  im.width = w;
  im.height = h;
  im.rgb.resize(static_cast<size_t>(w * h * 3));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        im.rgb[static_cast<size_t>((y * w + x) * 3 + c)] = static_cast<uint8_t>(
            128 + 60 * std::sin(0.031 * x * (c + 1) + salt) + 50 * std::cos(0.023 * y + c * salt) +
            ((x * 7 + y * 13 + salt) % 17));
  return im;
}

Bytes jpeg(int64_t w, int64_t h, int salt, int quality = 90) {
  Bytes out;
  EXPECT_TRUE(encode_jpeg(picture(w, h, salt), quality, &out).ok());
  return out;
}

void write_file(const fs::path& p, const Bytes& b) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

Bytes decode(const Bytes& file, ImageBox box, int64_t side, bool scaled, bool cropped) {
  Bytes dst(static_cast<size_t>(3 * side * side));
  BoxDecode how;
  how.choose = [box](int64_t, int64_t) { return box; };
  how.side = side;
  how.dct_scaling = scaled;
  how.crop = cropped;
  Status s = decode_box(file.data(), file.size(), "x.jpg", how, dst.data());
  EXPECT_TRUE(s.ok()) << s.message();
  return dst;
}

// Decoding only the box's rows and columns gives the full decode's bytes exactly; decoding at a
// DCT scale (1/2 .. 1/8) then resampling stays within a mean absolute difference of 1.5 levels
// (of 255) and a 99th percentile of 6 of full decoding then resampling (PIL's draft mode trades
// the same).
TEST(DecodeBox, CroppedIsExactAndScaledIsClose) {
  const Bytes file = jpeg(1600, 1200, 3);
  const int64_t side = 96;
  const std::vector<ImageBox> boxes = {
      {0, 0, 1600, 1200}, {333, 217, 900, 700}, {1001, 503, 450, 600}, {17, 9, 97, 101}};
  for (const ImageBox& b : boxes) {
    const Bytes full = decode(file, b, side, false, false);
    EXPECT_EQ(decode(file, b, side, false, true), full) << b.x0 << "," << b.y0;
    const Bytes scaled = decode(file, b, side, true, true);
    std::vector<int> diff;
    double sum = 0;
    for (size_t i = 0; i < full.size(); ++i) {
      diff.push_back(std::abs(int{full[i]} - int{scaled[i]}));
      sum += diff.back();
    }
    std::sort(diff.begin(), diff.end());
    EXPECT_LE(sum / static_cast<double>(diff.size()), 1.5) << b.x0 << "," << b.y0;
    EXPECT_LE(diff[diff.size() * 99 / 100], 6) << b.x0 << "," << b.y0;
  }
}

// A whole-image box equals the in-memory path's Resize + CenterCrop (resize_center_crop) where
// both decode at full size.
TEST(DecodeBox, CentreBoxIsResizeThenCentreCrop) {
  const Bytes file = jpeg(300, 200, 5);
  RgbImage im;
  ASSERT_TRUE(decode_image(file.data(), file.size(), "x.jpg", 0, &im).ok());
  Bytes want(3 * 64 * 64);
  resize_center_crop(im, 64, want.data());
  const ImageBox box = center_box(300, 200, 64, 64);
  const Bytes got = decode(file, box, 64, false, true);
  int worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(int{want[i]} - int{got[i]}));
  EXPECT_LE(worst, 1);  // float sums in another order
}

TEST(DecodeBox, TruncatedJpegNamesTheFile) {
  Bytes file = jpeg(400, 300, 1);
  file.resize(file.size() / 3);
  Bytes dst(3 * 32 * 32);
  BoxDecode how;
  how.choose = [](int64_t w, int64_t h) { return center_box(w, h, 36, 32); };
  how.side = 32;
  Status s = decode_box(file.data(), file.size(), "dir/cut.jpg", how, dst.data());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("dir/cut.jpg: truncated JPEG"), std::string::npos) << s.message();
}

TEST(Augment, ImagenetPreset) {
  auto a = parse_augment("imagenet");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->resized_crop, 224);
  EXPECT_TRUE(a->flip);
  EXPECT_EQ(a->eval_resize(), 256);
  auto back = parse_augment(augment_text(*a));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->resized_crop, 224);
  EXPECT_FALSE(parse_augment("random-resized-crop=224,crop-pad=4").ok());
  EXPECT_FALSE(parse_augment("random-resized-crop=3").ok());
  Dataset held;  // a set held decoded cannot be cropped before decoding
  held.name = "held";
  held.channels = 3;
  Status s = check_augment(*a, held);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'held' is held decoded"), std::string::npos) << s.message();
}

// The window stays inside the image and falls back to the centre crop for thin images.
TEST(RandomResizedCrop, InsideTheImageAndFallsBack) {
  for (uint64_t k = 0; k < 2000; ++k) {
    RngCropDraws d(k);
    const int64_t w = 1 + static_cast<int64_t>(k % 700), h = 1 + static_cast<int64_t>(k * 7 % 500);
    const CropWindow c = random_resized_crop(w, h, d);
    ASSERT_GE(c.top, 0);
    ASSERT_GE(c.left, 0);
    ASSERT_GE(c.height, 1);
    ASSERT_GE(c.width, 1);
    ASSERT_LE(c.top + c.height, h);
    ASSERT_LE(c.left + c.width, w);
  }
  RngCropDraws d(1);
  const CropWindow c = random_resized_crop(1000, 10, d);  // ratio 100: never fits
  EXPECT_EQ(c.height, 10);
  EXPECT_EQ(c.width, 13);  // round(10 * 4 / 3)
  EXPECT_EQ(c.left, (1000 - 13) / 2);
}

class StreamedFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("easel_stream_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // n training images (sides 40-90) in 3 classes, 3 val images.
  void make(int n) {
    for (int i = 0; i < n; ++i)
      write_file(dir_ / "train" / ("c" + std::to_string(i % 3)) / (std::to_string(i) + ".jpg"),
                 jpeg(40 + (i * 7) % 50, 40 + (i * 11) % 50, i));
    for (int i = 0; i < 3; ++i)
      write_file(dir_ / "val" / ("c" + std::to_string(i)) / "v.jpg", jpeg(64, 48, 100 + i));
  }
  Result<DataSplit> load(bool skip = false) {
    DataOptions opt;
    opt.stream_side = 32;
    opt.skip_bad = skip;
    return load_data(dir_.string(), MemKind::dram, 1, opt);
  }
  static Augment aug() {
    Augment a = parse_augment("random-resized-crop=32,flip,normalize=imagenet").value();
    return a;
  }
  // k batches of 4 from a stream of `threads` data threads (0: no prefetch).
  // With a shuffle buffer, group `group` of `groups` reads its own tar shards.
  static std::vector<Bytes> batches(const Dataset& ds, int threads, int k,
                                    const StreamState* from = nullptr,
                                    StreamState* after2 = nullptr, int64_t buffer = 0,
                                    int group = 0, int groups = 1) {
    DataThreads t;
    t.threads = std::max(1, threads);
    auto s = BatchStream::create(ds, 4, Layout::nchw, group, groups, 7, threads > 0, MemKind::dram,
                                 -1, aug(), t, buffer);
    EXPECT_TRUE(s.ok()) << s.status().message();
    if (from) {
      EXPECT_TRUE((*s)->seek(*from).ok());
    }
    std::vector<Bytes> out;
    for (int i = 0; i < k; ++i) {
      const Batch& b = (*s)->next();
      const uint8_t* p = b.images.as<uint8_t>();
      Bytes v(p, p + b.images.bytes());
      for (int32_t l : b.labels)
        v.push_back(static_cast<uint8_t>(l));
      out.push_back(std::move(v));
      if (i == 1 && after2) *after2 = (*s)->state();
    }
    return out;
  }
  fs::path dir_;
};

TEST_F(StreamedFolder, HoldsTheListNotThePixels) {
  make(12);
  auto r = load();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->train.count, 12);
  EXPECT_EQ(r->test.count, 3);
  EXPECT_EQ(r->train.height, 32);
  EXPECT_EQ(r->train.pixels.bytes(), 0u);
  ASSERT_TRUE(r->train.source);
  EXPECT_EQ(r->train.labels[0], 0);
}

// The same seed gives the same batches whatever the data threads, with and without prefetch,
// and a stream seeking to a saved position goes on with exactly the batches of the
// uninterrupted one (crops and flips too: they depend only on the position).
TEST_F(StreamedFolder, SameBatchesAtAnyThreadsAndOnResume) {
  make(10);
  auto r = load();
  ASSERT_TRUE(r.ok()) << r.status().message();
  StreamState at2;
  const std::vector<Bytes> one = batches(r->train, 0, 6, nullptr, &at2);
  EXPECT_EQ(batches(r->train, 1, 6), one);
  EXPECT_EQ(batches(r->train, 3, 6), one);
  EXPECT_NE(one[0], one[3]);  // epochs differ (new order, new crops)
  const std::vector<Bytes> resumed = batches(r->train, 2, 4, &at2);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(resumed[static_cast<size_t>(i)], one[static_cast<size_t>(i + 2)]) << i;
}

// The bytes a GPU's batch crosses as (gather_batch_bytes) and the table it is normalised
// through (pixel_table) give the host's floats bit for bit (devices/device.hpp:
// normalize_bytes), crops and flips included, in both layouts.
TEST_F(StreamedFolder, BytesAndTableGiveTheFloats) {
  make(6);
  auto r = load();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Augment a = aug();
  const int64_t idx[3] = {4, 0, 2};
  AugmentDraw d[3];
  for (int i = 0; i < 3; ++i)
    d[i] = draw_augment(a, 7, 0, 0, i);
  const std::vector<float> table = pixel_table(r->train, a);
  const Shape4 shape{3, 3, 32, 32};
  const size_t count = static_cast<size_t>(shape.count());
  for (Layout l : {Layout::nchw, Layout::nhwc}) {
    std::vector<float> want(count), got(count);
    std::vector<uint8_t> bytes(count);
    std::vector<int32_t> labels(3), labels2(3);
    gather_batch(r->train, idx, 3, l, want.data(), labels.data(), a, d);
    gather_batch_bytes(r->train, idx, 3, l, bytes.data(), labels2.data(), a, d);
    normalize_bytes_host(bytes.data(), table.data(), shape, l, DType::f32, got.data());
    EXPECT_EQ(labels2, labels);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), count * sizeof(float)), 0)
        << (l == Layout::nhwc ? "nhwc" : "nchw");
  }
}

long rss_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

// 400 images at 112 x 112 would take 15 MB as bytes (60 MB as floats) if held; a streamed epoch
// leaves the resident memory within 10 MB of where it started (three batch slots of 4 images).
TEST_F(StreamedFolder, MemoryDoesNotGrowWithTheImages) {
  for (int i = 0; i < 400; ++i)
    write_file(dir_ / "train" / ("c" + std::to_string(i % 2)) / (std::to_string(i) + ".jpg"),
               jpeg(24, 20, i, 50));
  write_file(dir_ / "val" / "c0" / "v.jpg", jpeg(24, 20, 1));
  DataOptions opt;
  opt.stream_side = 112;
  auto r = load_data(dir_.string(), MemKind::dram, 1, opt);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Augment a = parse_augment("random-resized-crop=112,flip").value();
  DataThreads t;
  t.threads = 2;
  auto s = BatchStream::create(r->train, 4, Layout::nchw, 0, 1, 1, true, MemKind::dram, -1, a, t);
  ASSERT_TRUE(s.ok());
  (*s)->next();
  const long before = rss_kb();
  for (int i = 0; i < 110; ++i)
    (*s)->next();
  const long grown = rss_kb() - before;
  EXPECT_LT(grown, 10 * 1024) << "resident memory grew by " << grown << " kB over an epoch";
}

TEST_F(StreamedFolder, BadImageSkippedAndCounted) {
  make(6);
  Bytes cut = jpeg(80, 80, 9);
  cut.resize(cut.size() / 4);
  write_file(dir_ / "train" / "c0" / "0.jpg", cut);  // index 0 of the list
  auto r = load(true);
  ASSERT_TRUE(r.ok());
  const int64_t before = skipped_images();
  std::vector<float> images(3 * 32 * 32 * 2);
  std::vector<int32_t> labels(2);
  const int64_t idx[2] = {0, 1};
  Augment a = aug();
  AugmentDraw d[2];
  gather_batch(r->train, idx, 2, Layout::nchw, images.data(), labels.data(), a, d);
  EXPECT_EQ(skipped_images(), before + 1);
  // Image 0 was replaced by image 1 (the next of the list): both rows are equal.
  EXPECT_EQ(0, std::memcmp(images.data(), images.data() + 3 * 32 * 32, 3 * 32 * 32 * 4));
  EXPECT_EQ(labels[0], labels[1]);
}

TEST_F(StreamedFolder, BadImageExitsTwoNamingIt) {
  make(6);
  write_file(dir_ / "train" / "c0" / "0.jpg", Bytes{'n', 'o', 't', ' ', 'j', 'p', 'g'});
  auto r = load(false);
  ASSERT_TRUE(r.ok());
  std::vector<float> images(3 * 32 * 32);
  std::vector<int32_t> labels(1);
  const int64_t idx[1] = {0};
  EXPECT_EXIT(gather_batch(r->train, idx, 1, Layout::nchw, images.data(), labels.data()),
              ::testing::ExitedWithCode(2), "train/c0/0.jpg: neither a JPEG nor a PNG");
}

// ---- shards ----

struct Member {
  std::string name;
  Bytes data;
};

Bytes tar(const std::vector<Member>& ms) {
  Bytes out;
  for (const Member& m : ms) {
    uint8_t h[512];
    tar_header(m.name, static_cast<int64_t>(m.data.size()), h);
    out.insert(out.end(), h, h + 512);
    out.insert(out.end(), m.data.begin(), m.data.end());
    out.resize((out.size() + 511) / 512 * 512, 0);
  }
  out.resize(out.size() + 1024, 0);
  return out;
}

Bytes text(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

TEST_F(StreamedFolder, ShardsWithClsAndWithFolders) {
  std::vector<Member> train, val;
  for (int i = 0; i < 6; ++i) {
    const std::string key = "s" + std::to_string(i);
    train.push_back({key + ".jpg", jpeg(50, 40, i)});
    train.push_back({key + ".cls", text(std::to_string(i % 3) + "\n")});
  }
  val.push_back({"v.jpg", jpeg(50, 40, 9)});
  val.push_back({"v.cls", text("2")});
  write_file(dir_ / "train-000000.tar", tar(train));
  write_file(dir_ / "val-000000.tar", tar(val));
  auto r = load_data("shards:" + dir_.string(), MemKind::dram, 1, DataOptions{32, false});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->train.count, 6);
  EXPECT_EQ(r->train.classes, 3);
  EXPECT_EQ(r->train.labels[4], 1);
  EXPECT_EQ(r->test.labels[0], 2);
  // The same batches as the folder would give for the same bytes at the same positions.
  const std::vector<Bytes> b = batches(r->train, 2, 3);
  EXPECT_EQ(b, batches(r->train, 0, 3));
  // Classes from folder names (no .cls), a long name through the ustar prefix.
  const std::string deep = std::string(120, 'd') + "/zebra/k1.jpg";
  write_file(dir_ / "f" / "train-0.tar",
             tar({{"ant/k0.jpg", jpeg(30, 30, 1)}, {deep, jpeg(30, 30, 2)}}));
  write_file(dir_ / "f" / "val-0.tar", tar({{"zebra/v.jpg", jpeg(30, 30, 3)}}));
  auto f = load_data("shards:" + (dir_ / "f" / "train-*.tar").string(), MemKind::dram, 1,
                     DataOptions{32, false});
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->train.classes, 2);
  EXPECT_EQ(f->train.labels[1], 1);
  EXPECT_EQ(f->test.labels[0], 1);
}

TEST_F(StreamedFolder, BrokenShardHeaderAndBadClassNamed) {
  std::vector<Member> ms = {{"a.jpg", jpeg(30, 30, 1)},
                            {"a.cls", text("0")},
                            {"b.jpg", jpeg(30, 30, 2)},
                            {"b.cls", text("1")}};
  Bytes t = tar(ms);
  const size_t second = 512 + (ms[0].data.size() + 511) / 512 * 512 + 1024;  // b.jpg's header
  t[second + 3] ^= 0x55;                                                     // its name: checksum
  write_file(dir_ / "train-0.tar", t);
  write_file(dir_ / "val-0.tar", tar({{"v.jpg", jpeg(30, 30, 3)}, {"v.cls", text("1")}}));
  auto r = load_data("shards:" + dir_.string(), MemKind::dram, 1, DataOptions{32, false});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::data_error);
  EXPECT_NE(
      r.status().message().find("train-0.tar: broken tar header at byte " + std::to_string(second)),
      std::string::npos)
      << r.status().message();
  // Skipped: the members before the broken header stay (one sample: a single class is refused,
  // so the val shard's class 1 is out of range; a second good shard gives class 1).
  write_file(dir_ / "train-1.tar", tar({{"c.jpg", jpeg(30, 30, 4)}, {"c.cls", text("1")}}));
  auto s = load_data("shards:" + dir_.string(), MemKind::dram, 1, DataOptions{32, true});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->train.count, 2);
  // A bad class file names the shard and the member.
  fs::remove(dir_ / "train-1.tar");
  write_file(dir_ / "train-0.tar", tar({{"a.jpg", jpeg(30, 30, 1)},
                                        {"a.cls", text("cat")},
                                        {"b.jpg", jpeg(30, 30, 2)},
                                        {"b.cls", text("1")}}));
  auto c = load_data("shards:" + dir_.string(), MemKind::dram, 1, DataOptions{32, false});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("train-0.tar: member a.cls: the class 'cat'"),
            std::string::npos)
      << c.status().message();
  // A newline in a member's name or class stays out of the one-line message (\x0a).
  write_file(dir_ / "train-0.tar", tar({{"a.jpg", jpeg(30, 30, 1)}, {"a\nb.cls", text("1\nx")}}));
  c = load_data("shards:" + dir_.string(), MemKind::dram, 1, DataOptions{32, false});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message().find('\n'), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("member a\\x0ab.cls: the class '1\\x0ax'"), std::string::npos)
      << c.status().message();
}

// `easel data pack --keep-order`: the shards hold the folder's images in list order, so read at
// random (no shuffle buffer) they give the folder's batches bit for bit; shuffled (the
// default), each key still names its image's place in the list. With --max-side the larger
// images are re-encoded smaller.
TEST_F(StreamedFolder, PackedShardsGiveTheFolderBatches) {
  make(9);
  write_file(dir_ / "train" / "c1" / "big.jpg", jpeg(300, 200, 4));
  auto folder = load();
  ASSERT_TRUE(folder.ok());
  PackOptions opt;
  opt.shard_bytes = 8 << 10;  // several shards
  PackStats mixed;
  ASSERT_TRUE(pack_image_folder(dir_.string(), (dir_ / "mixed").string(), opt, &mixed).ok());
  auto m =
      load_data("shards:" + (dir_ / "mixed").string(), MemKind::dram, 1, DataOptions{32, false});
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<int32_t> by_key(folder->train.labels.size(), -1);
  for (int64_t i = 0; i < m->train.count; ++i)
    by_key[static_cast<size_t>(std::stoi(m->train.source->members[static_cast<size_t>(i)]))] =
        m->train.labels[static_cast<size_t>(i)];
  EXPECT_EQ(by_key, folder->train.labels);
  EXPECT_NE(m->train.labels, folder->train.labels);  // shuffled
  opt.shuffle = false;
  PackStats st;
  ASSERT_TRUE(pack_image_folder(dir_.string(), (dir_ / "shards").string(), opt, &st).ok());
  EXPECT_EQ(st.images, 13);
  EXPECT_GT(st.shards, 2);
  auto shards =
      load_data("shards:" + (dir_ / "shards").string(), MemKind::dram, 1, DataOptions{32, false});
  ASSERT_TRUE(shards.ok()) << shards.status().message();
  EXPECT_EQ(shards->train.labels, folder->train.labels);
  EXPECT_EQ(batches(shards->train, 2, 4), batches(folder->train, 2, 4));
  opt.max_side = 200;  // only big.jpg (300 x 200) is larger
  PackStats small;
  ASSERT_TRUE(pack_image_folder(dir_.string(), (dir_ / "small").string(), opt, &small).ok());
  EXPECT_EQ(small.resized, 1);
  EXPECT_LT(small.bytes, st.bytes);
  EXPECT_EQ(parse_byte_size("256MB"), int64_t{256} << 20);
  EXPECT_EQ(parse_byte_size("4096"), 4096);
  EXPECT_EQ(parse_byte_size("12XB"), -1);
  EXPECT_EQ(parse_byte_size("0"), -1);
}

// shards:DIR:SIDE decodes each image once at SIDE and holds it, as an image folder's DIR:SIDE:
// packed in list order, the same pixels and labels bit for bit (the same resize and crop of the
// same files). A bad side, or a side with a random-resized crop, is refused naming the spec.
TEST_F(StreamedFolder, ShardsAtASideHoldTheFoldersPixels) {
  make(9);
  write_file(dir_ / "train" / "c1" / "big.jpg", jpeg(300, 200, 4));
  PackOptions opt;
  opt.shard_bytes = 8 << 10;  // several shards
  opt.shuffle = false;
  PackStats st;
  ASSERT_TRUE(pack_image_folder(dir_.string(), (dir_ / "s").string(), opt, &st).ok());
  ASSERT_GT(st.shards, 2);
  const std::string shards = "shards:" + (dir_ / "s").string();
  for (const int side : {24, 32}) {
    auto folder = load_data(dir_.string() + ":" + std::to_string(side), MemKind::dram, 1);
    ASSERT_TRUE(folder.ok()) << folder.status().message();
    auto held = load_data(shards + ":" + std::to_string(side), MemKind::dram, 1);
    ASSERT_TRUE(held.ok()) << held.status().message();
    for (const auto& [a, b] :
         {std::pair{&held->train, &folder->train}, std::pair{&held->test, &folder->test}}) {
      EXPECT_EQ(a->source, nullptr);  // held, not streamed
      ASSERT_EQ(a->count, b->count);
      EXPECT_EQ(a->height, side);
      EXPECT_EQ(a->width, side);
      EXPECT_EQ(a->classes, b->classes);
      EXPECT_EQ(a->labels, b->labels);
      EXPECT_EQ(0, std::memcmp(a->pixels.data(), b->pixels.data(), a->pixels.bytes()));
    }
  }
  // A glob takes the side too; without it shards stream.
  auto glob = load_data(shards + "/train-*.tar:16", MemKind::dram, 1);
  ASSERT_TRUE(glob.ok()) << glob.status().message();
  EXPECT_EQ(glob->train.height, 16);
  auto streamed = load_data(shards, MemKind::dram, 1);
  ASSERT_TRUE(streamed.ok()) << streamed.status().message();
  EXPECT_NE(streamed->train.source, nullptr);
  auto bad = load_data(shards + ":0", MemKind::dram, 1);
  EXPECT_EQ(bad.status().code(), Code::invalid_argument);
  EXPECT_NE(bad.status().message().find("the image side after ':' must be an integer in [1, 4096]"),
            std::string::npos)
      << bad.status().message();
  auto crop = load_data(shards + ":32", MemKind::dram, 1, DataOptions{32, false});
  EXPECT_EQ(crop.status().code(), Code::invalid_argument);
  EXPECT_NE(crop.status().message().find("take no :SIDE"), std::string::npos)
      << crop.status().message();
}

// Shards read through a shuffle buffer: each group reads only its own tar files (f % groups),
// the groups together every sample once; the same batches at any --data-threads and on resume
// from a saved position; a group left without a shard is refused in a line naming the flag.
TEST_F(StreamedFolder, ShardsThroughABufferPerGroup) {
  make(15);
  PackOptions opt;
  opt.shard_bytes = 12 << 10;
  PackStats st;
  ASSERT_TRUE(pack_image_folder(dir_.string(), (dir_ / "s").string(), opt, &st).ok());
  ASSERT_GE(st.shards, 5);  // 4 or more training shards (and one val)
  auto r = load_data("shards:" + (dir_ / "s").string(), MemKind::dram, 1, DataOptions{32, false});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Dataset& ds = r->train;
  const auto& entries = ds.source->entries;
  ASSERT_GT(ds.count, entries.back().file + 1);  // several samples in a shard
  std::vector<int> seen(static_cast<size_t>(ds.count), 0);
  for (int g = 0; g < 2; ++g) {
    auto s = BatchStream::create(ds, 4, Layout::nchw, g, 2, 7, false, MemKind::dram, -1, aug(),
                                 DataThreads(), 3);
    ASSERT_TRUE(s.ok()) << s.status().message();
    for (int64_t i : (*s)->shard_images()) {
      EXPECT_EQ(entries[static_cast<size_t>(i)].file % 2, g) << i;
      ++seen[static_cast<size_t>(i)];
    }
  }
  EXPECT_EQ(seen, std::vector<int>(seen.size(), 1));
  StreamState at2;
  const std::vector<Bytes> one = batches(ds, 0, 8, nullptr, &at2, 3, 1, 2);
  EXPECT_EQ(batches(ds, 1, 8, nullptr, nullptr, 3, 1, 2), one);
  EXPECT_EQ(batches(ds, 3, 8, nullptr, nullptr, 3, 1, 2), one);
  const std::vector<Bytes> resumed = batches(ds, 2, 6, &at2, nullptr, 3, 1, 2);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(resumed[static_cast<size_t>(i)], one[static_cast<size_t>(i + 2)]) << i;
  EXPECT_NE(batches(ds, 0, 8, nullptr, nullptr, 0, 1, 2), one);  // not the random reads' batches
  const int files = entries.back().file + 1;
  auto none = BatchStream::create(ds, 4, Layout::nchw, files, files + 1, 7, false, MemKind::dram,
                                  -1, aug(), DataThreads(), 3);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message().rfind("--shuffle-buffer: group " + std::to_string(files), 0),
            0u)
      << none.status().message();
}

// --shards-per-group G: a multiple of G training shards of about --shard-size, any two within
// one sample of each other, so that G groups (or any count dividing G) read as many shards and
// samples; check_even_shards refuses an uneven split in a line naming the flag and the fix.
TEST_F(StreamedFolder, ShardsPerGroupSplitsEvenly) {
  make(23);
  PackOptions opt;
  opt.shard_bytes = 6 << 10;
  opt.groups = 4;
  PackStats st;
  ASSERT_TRUE(pack_image_folder(dir_.string(), (dir_ / "s").string(), opt, &st).ok());
  auto r = load_data("shards:" + (dir_ / "s").string(), MemKind::dram, 1, DataOptions{32, false});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const StreamSource& src = *r->train.source;
  std::vector<int64_t> per_shard(src.files.size(), 0);
  for (const StreamSource::Entry& e : src.entries)
    ++per_shard[static_cast<size_t>(e.file)];
  ASSERT_GE(per_shard.size(), 8u);  // several shards per group at 6 KB
  EXPECT_EQ(per_shard.size() % 4, 0u);
  const auto [lo, hi] = std::minmax_element(per_shard.begin(), per_shard.end());
  EXPECT_LE(*hi - *lo, 1);
  for (const int groups : {1, 2, 4}) {
    std::vector<int64_t> per_group(static_cast<size_t>(groups), 0);
    for (size_t f = 0; f < per_shard.size(); ++f)
      per_group[f % static_cast<size_t>(groups)] += per_shard[f];
    const auto [glo, ghi] = std::minmax_element(per_group.begin(), per_group.end());
    EXPECT_LE(*ghi - *glo, 1) << groups;
    EXPECT_TRUE(check_even_shards(r->train, groups).ok()) << groups;
  }
  const Status three = check_even_shards(r->train, 3);
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.message().rfind("--shuffle-buffer: the " + std::to_string(per_shard.size()) +
                                      " tar shards of 's/train' split unevenly among 3 groups",
                                  0),
            0u)
      << three.message();
  EXPECT_NE(three.message().find("--shards-per-group 3"), std::string::npos) << three.message();
}

TEST(TarIndex, TruncatedMemberAndEndInsideHeader) {
  Bytes t = tar({{"a.jpg", Bytes(3000, 7)}});
  std::vector<TarMember> ms;
  const auto reader = [&](const Bytes& b) {
    return [&b](int64_t off, uint8_t* dst, size_t n) -> Status {
      if (off < 0 || off + static_cast<int64_t>(n) > static_cast<int64_t>(b.size()))
        return io_error("past the end");
      std::memcpy(dst, b.data() + off, n);
      return {};
    };
  };
  ASSERT_TRUE(scan_tar(reader(t), static_cast<int64_t>(t.size()), "t.tar", &ms).ok());
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].offset, 512);
  EXPECT_EQ(ms[0].size, 3000);
  Bytes cut(t.begin(), t.begin() + 2048);
  ms.clear();
  Status s = scan_tar(reader(cut), 2048, "t.tar", &ms);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("t.tar: the member at byte 0 claims 3000 bytes"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace easel
