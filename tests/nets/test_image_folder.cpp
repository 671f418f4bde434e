// Image folders: PNG and JPEG images written here with libpng and libjpeg, decoded (every colour
// type), resized and centre-cropped, the class mapping, parallel decoding, and every error.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

// clang-format off
#include <cstdio>
#include <jpeglib.h>
// clang-format on
#include <png.h>

#include <array>
#include <csetjmp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nets/data/dataset.hpp"
#include "nets/data/image_decode.hpp"

namespace easel {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

Bytes read_all(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void write_file(const fs::path& path, const Bytes& b) {
  fs::create_directories(path.parent_path());
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  ASSERT_TRUE(f.good()) << path;
}

struct PngSpec {
  int width = 0, height = 0;
  int color_type = PNG_COLOR_TYPE_RGB;
  int depth = 8;
  Bytes rows;  // packed rows as stored (16-bit samples big-endian)
  std::vector<png_color> palette;
  Bytes trns;  // palette transparency
  bool interlace = false;
};

void write_png(const fs::path& path, const PngSpec& s) {
  fs::create_directories(path.parent_path());
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  const size_t stride = s.rows.size() / static_cast<size_t>(s.height);
  std::vector<png_bytep> rows;
  for (int y = 0; y < s.height; ++y)
    rows.push_back(const_cast<png_bytep>(s.rows.data()) + static_cast<size_t>(y) * stride);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
    FAIL() << "libpng could not write " << path;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, static_cast<png_uint_32>(s.width), static_cast<png_uint_32>(s.height),
               s.depth, s.color_type, s.interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!s.palette.empty())
    png_set_PLTE(png, info, s.palette.data(), static_cast<int>(s.palette.size()));
  if (!s.trns.empty())
    png_set_tRNS(png, info, s.trns.data(), static_cast<int>(s.trns.size()), nullptr);
  png_write_info(png, info);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

// An RGB PNG of w x h from hwc bytes.
void write_rgb_png(const fs::path& path, int w, int h, const Bytes& rgb) {
  write_png(path, {w, h, PNG_COLOR_TYPE_RGB, 8, rgb, {}, {}, false});
}

// A JPEG of w x h with `components` (1 grey, 3 RGB, 4 CMYK) from interleaved bytes.
void write_jpeg(const fs::path& path, int w, int h, int components, const Bytes& px,
                int quality = 100) {
  fs::create_directories(path.parent_path());
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = components;
  c.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  for (int i = 0; i < c.num_components; ++i)  // no chroma subsampling: colours stay sharp
    c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(px.data()) + c.next_scanline * w * components;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

// hwc RGB bytes of w x h where pixel (x, y) is (10 x + y, 100 + y, 200 - x) + salt.
Bytes pattern(int w, int h, int salt = 0) {
  Bytes b;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int v : {10 * x + y, 100 + y, 200 - x})
        b.push_back(static_cast<uint8_t>(v + salt));
  return b;
}

Bytes solid(int w, int h, uint8_t r, uint8_t g, uint8_t b) {
  Bytes out;
  for (int i = 0; i < w * h; ++i)
    out.insert(out.end(), {r, g, b});
  return out;
}

// The chw bytes of image i of ds as hwc (to compare with what was written).
Bytes hwc(const Dataset& ds, int64_t i) {
  Bytes out;
  const int64_t hw = ds.height * ds.width;
  for (int64_t p = 0; p < hw; ++p)
    for (int64_t c = 0; c < 3; ++c)
      out.push_back(ds.image(i)[c * hw + p]);
  return out;
}

void expect_error(const Status& s, Code code, const std::vector<std::string>& parts) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), code) << s.to_string();
  for (const std::string& p : parts)
    EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' not in: " << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
}

class ImageFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           (std::string("easel_images_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path at(const std::string& rel) const { return dir_ / rel; }
  Result<DataSplit> load(int side) {
    return load_data(dir_.string() + ":" + std::to_string(side), MemKind::dram, 1);
  }
  // Two classes in train (b-dog holding two images, a-cat one) and a-cat in val, 4x4 PNGs.
  void write_small_set() {
    write_rgb_png(at("train/b-dog/2.png"), 4, 4, pattern(4, 4, 2));
    write_rgb_png(at("train/b-dog/1.PNG"), 4, 4, pattern(4, 4, 1));
    write_rgb_png(at("train/a-cat/x.png"), 4, 4, pattern(4, 4, 0));
    write_rgb_png(at("val/a-cat/v.png"), 4, 4, pattern(4, 4, 5));
  }

  fs::path dir_;
};

TEST_F(ImageFolderTest, ReadsPngsExactlyWithSortedClasses) {
  write_small_set();
  write_file(at("train/b-dog/notes.txt"), Bytes{'x'});  // other extensions: skipped
  write_file(at("train/a-cat/y.bmp"), Bytes{'B', 'M'});
  auto r = load(4);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Dataset& train = r->train;
  EXPECT_EQ(train.name, dir_.filename().string() + "/train");
  EXPECT_EQ(r->test.name, dir_.filename().string() + "/val");
  EXPECT_EQ(train.count, 3);
  EXPECT_EQ(train.channels, 3);
  EXPECT_EQ(train.height, 4);
  EXPECT_EQ(train.width, 4);
  EXPECT_EQ(train.classes, 2);
  // a-cat (label 0) first, then b-dog's files sorted by name ("1.PNG" < "2.png").
  EXPECT_EQ(train.labels, (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(hwc(train, 0), pattern(4, 4, 0));
  EXPECT_EQ(hwc(train, 1), pattern(4, 4, 1));
  EXPECT_EQ(hwc(train, 2), pattern(4, 4, 2));
  EXPECT_EQ(train.image(0)[0], 0);         // R of (0, 0)
  EXPECT_EQ(train.image(0)[16 + 5], 101);  // G of (1, 1), chw
  ASSERT_EQ(r->test.count, 1);
  EXPECT_EQ(r->test.classes, 2);
  EXPECT_EQ(r->test.labels, (std::vector<int32_t>{0}));
  EXPECT_EQ(hwc(r->test, 0), pattern(4, 4, 5));
}

TEST_F(ImageFolderTest, DefaultSideIs224) {
  write_rgb_png(at("train/a/1.png"), 3, 2, solid(3, 2, 10, 20, 30));
  write_rgb_png(at("val/a/1.png"), 2, 2, solid(2, 2, 40, 50, 60));
  auto r = load_data(dir_.string(), MemKind::dram, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->train.height, 224);
  EXPECT_EQ(r->train.width, 224);
  EXPECT_EQ(r->test.height, 224);
  // Upscaled solid colours stay exactly that colour.
  for (int64_t j :
       {int64_t{0}, int64_t{224 * 224 - 1}, int64_t{224 * 224}, int64_t{3 * 224 * 224 - 1}})
    EXPECT_EQ(r->test.image(0)[j], j < 224 * 224 ? 40 : j < 2 * 224 * 224 ? 50 : 60) << j;
  EXPECT_EQ(r->train.image(0)[2 * 224 * 224 + 7], 30);
}

// Every PNG colour type and depth becomes the RGB PIL's convert("RGB") gives.
TEST_F(ImageFolderTest, PngColourTypes) {
  // 2x2 images; in reading order.
  write_png(at("train/a/grey8.png"), {2, 2, PNG_COLOR_TYPE_GRAY, 8, {0, 50, 200, 255}});
  write_png(at("train/a/grey1.png"), {2, 2, PNG_COLOR_TYPE_GRAY, 1, {0x80, 0x40}});  // 1 0 / 0 1
  write_png(at("train/a/greyalpha.png"),
            {2, 2, PNG_COLOR_TYPE_GRAY_ALPHA, 8, {10, 0, 20, 255, 30, 7, 40, 128}});
  write_png(
      at("train/a/rgba.png"),
      {2, 2, PNG_COLOR_TYPE_RGBA, 8, {1, 2, 3, 0, 4, 5, 6, 255, 7, 8, 9, 9, 10, 11, 12, 100}});
  const std::vector<png_color> pal = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}};
  write_png(at("train/a/palette.png"),
            {2, 2, PNG_COLOR_TYPE_PALETTE, 8, {0, 1, 2, 1}, pal, {0, 128}});  // with tRNS
  write_png(at("train/a/rgb16.png"),
            {2, 2, PNG_COLOR_TYPE_RGB, 16, {0xab, 0xcd, 0x12, 0x34, 0x00, 0xff, 0xff, 0x00,
                                            0x80, 0x01, 0x7f, 0xff, 1,    0,    2,    0,
                                            3,    0,    4,    0,    5,    0,    6,    0}});
  write_png(at("train/a/z-interlaced.png"),
            {2, 2, PNG_COLOR_TYPE_RGB, 8, pattern(2, 2, 3), {}, {}, true});
  write_rgb_png(at("val/a/1.png"), 2, 2, pattern(2, 2));
  auto r = load(2);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Dataset& t = r->train;
  ASSERT_EQ(t.count, 7);
  auto grey = [](std::vector<uint8_t> v) {
    Bytes b;
    for (uint8_t x : v)
      b.insert(b.end(), {x, x, x});
    return b;
  };
  // Sorted: grey1, grey8, greyalpha, palette, rgb16, rgba, z-interlaced.
  EXPECT_EQ(hwc(t, 0), grey({255, 0, 0, 255}));
  EXPECT_EQ(hwc(t, 1), grey({0, 50, 200, 255}));
  EXPECT_EQ(hwc(t, 2), grey({10, 20, 30, 40}));  // alpha dropped, not composited
  EXPECT_EQ(hwc(t, 3), (Bytes{255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 255, 0}));
  EXPECT_EQ(hwc(t, 4), (Bytes{0xab, 0x12, 0x00, 0xff, 0x80, 0x7f, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(hwc(t, 5), (Bytes{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(hwc(t, 6), pattern(2, 2, 3));
}

TEST_F(ImageFolderTest, JpegsWithinTolerance) {
  // 16x16 of four flat 8x8 quadrants (JPEG's blocks): near-exact at quality 100.
  Bytes rgb;
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 16; ++x) {
      const bool right = x >= 8, low = y >= 8;
      rgb.insert(rgb.end(), {static_cast<uint8_t>(right ? 200 : 30),
                             static_cast<uint8_t>(low ? 180 : 60), static_cast<uint8_t>(90)});
    }
  write_jpeg(at("train/a/rgb.jpg"), 16, 16, 3, rgb);
  write_jpeg(at("train/a/zgrey.JPEG"), 16, 16, 1, Bytes(256, 77));
  write_jpeg(at("val/a/1.jpeg"), 16, 16, 3, rgb, 75);
  auto r = load(16);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->train.count, 2);
  const Bytes got = hwc(r->train, 0);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], rgb[i], 4) << i;
  const Bytes g = hwc(r->train, 1);
  for (uint8_t v : g)
    ASSERT_NEAR(v, 77, 1);
  const Bytes v = hwc(r->test, 0);
  for (size_t i = 0; i < v.size(); ++i)
    ASSERT_NEAR(v[i], rgb[i], 12) << i;
}

// ---- resize + centre crop ----

RgbImage image_of(int w, int h, const Bytes& rgb) {
  return {w, h, rgb};
}

Bytes resized(const RgbImage& img, int side) {
  std::vector<uint8_t> chw(static_cast<size_t>(3 * side * side));
  resize_center_crop(img, side, chw.data());
  Bytes out;  // back to hwc
  for (int p = 0; p < side * side; ++p)
    for (int c = 0; c < 3; ++c)
      out.push_back(chw[static_cast<size_t>(c * side * side + p)]);
  return out;
}

// hwc bytes of columns [x0, x0 + n) of every row of an image w wide.
Bytes columns(const Bytes& rgb, int w, int h, int x0, int n) {
  Bytes out;
  for (int y = 0; y < h; ++y)
    out.insert(out.end(), rgb.begin() + (y * w + x0) * 3, rgb.begin() + (y * w + x0 + n) * 3);
  return out;
}

TEST(ResizeCenterCrop, SameSizeIsIdentity) {
  EXPECT_EQ(resized(image_of(5, 5, pattern(5, 5)), 5), pattern(5, 5));
}

// The shorter side already at `side`: no interpolation, only the centre crop, whose offset is
// round((long - side) / 2) with ties to even (Python's round, as torchvision's CenterCrop).
TEST(ResizeCenterCrop, CropOffsetRoundsHalfToEven) {
  EXPECT_EQ(resized(image_of(3, 2, pattern(3, 2)), 2), columns(pattern(3, 2), 3, 2, 0, 2));  // 0.5
  EXPECT_EQ(resized(image_of(4, 2, pattern(4, 2)), 2), columns(pattern(4, 2), 4, 2, 1, 2));  // 1
  EXPECT_EQ(resized(image_of(5, 2, pattern(5, 2)), 2), columns(pattern(5, 2), 5, 2, 2, 2));  // 1.5
  EXPECT_EQ(resized(image_of(7, 2, pattern(7, 2)), 2), columns(pattern(7, 2), 7, 2, 2, 2));  // 2.5
  // Tall: rows.
  const Bytes tall = pattern(2, 4);
  EXPECT_EQ(resized(image_of(2, 4, tall), 2), Bytes(tall.begin() + 6, tall.begin() + 18));
}

TEST(ResizeCenterCrop, ShrinksTheShorterSideAndCropsTheCentre) {
  // 64x32: left half red, right half blue -> 32x16, then the centre 16x16 (resized columns
  // 8..23, source columns 16..47): left of it red, right of it blue, a blend at the seam.
  Bytes rgb;
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 64; ++x)
      rgb.insert(rgb.end(), {static_cast<uint8_t>(x < 32 ? 255 : 0), 0,
                             static_cast<uint8_t>(x < 32 ? 0 : 255)});
  const Bytes out = resized(image_of(64, 32, rgb), 16);
  for (int y = 0; y < 16; ++y) {
    for (int x = 0; x < 16; ++x) {
      const uint8_t* p = out.data() + (y * 16 + x) * 3;
      if (x <= 6) {
        EXPECT_EQ((Bytes{p[0], p[1], p[2]}), (Bytes{255, 0, 0})) << x;
      }
      if (x >= 9) {
        EXPECT_EQ((Bytes{p[0], p[1], p[2]}), (Bytes{0, 0, 255})) << x;
      }
      if (x == 7 || x == 8) {
        EXPECT_TRUE(p[0] > 0 && p[2] > 0 && p[0] + p[2] >= 254) << x;
      }
    }
  }
  // Antialiased: a 1-pixel checkerboard shrunk by 4 is flat grey, not aliased to one colour.
  Bytes checker;
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x) {
      const uint8_t v = (x + y) % 2 ? 255 : 0;
      checker.insert(checker.end(), {v, v, v});
    }
  for (uint8_t v : resized(image_of(32, 32, checker), 8))
    EXPECT_NEAR(v, 128, 2);
}

TEST(ResizeCenterCrop, UpscalesBilinearly) {
  for (uint8_t v : resized(image_of(1, 1, {9, 99, 199}), 7))
    EXPECT_TRUE(v == 9 || v == 99 || v == 199);
  // 2x1 grey ramp 0 -> 200, to 4 wide (shorter side 1 -> 4, long 8, crop the centre 4 of 8):
  // monotone, strictly inside (0, 200).
  const Bytes out = resized(image_of(2, 1, {0, 0, 0, 200, 200, 200}), 4);
  for (int x = 1; x < 4; ++x)
    EXPECT_GT(out[static_cast<size_t>(x * 3)], out[static_cast<size_t>((x - 1) * 3)]);
  EXPECT_GT(out[0], 0);
  EXPECT_LT(out[9], 200);
}

TEST_F(ImageFolderTest, ResizesEveryImageToTheSide) {
  write_rgb_png(at("train/a/wide.png"), 12, 6, solid(12, 6, 1, 2, 3));
  write_rgb_png(at("train/a/tall.png"), 5, 20, solid(5, 20, 4, 5, 6));
  write_rgb_png(at("val/a/tiny.png"), 1, 1, {7, 8, 9});
  auto r = load(3);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->train.image_bytes(), 27);
  EXPECT_EQ(hwc(r->train, 0), solid(3, 3, 4, 5, 6));  // "tall" < "wide"
  EXPECT_EQ(hwc(r->train, 1), solid(3, 3, 1, 2, 3));
  EXPECT_EQ(hwc(r->test, 0), solid(3, 3, 7, 8, 9));
}

// A large JPEG is decoded at a DCT scale that keeps its shorter side >= the side asked.
TEST(DecodeImage, JpegDctScaling) {
  const fs::path p = fs::path(::testing::TempDir()) / ("easel_dct_" + std::to_string(::getpid()));
  write_jpeg(p, 64, 48, 3, solid(64, 48, 120, 60, 30));
  const Bytes file = read_all(p);
  fs::remove(p);
  for (auto [min_side, w, h] : std::vector<std::array<int, 3>>{{0, 64, 48},
                                                               {48, 64, 48},
                                                               {25, 64, 48},
                                                               {24, 32, 24},
                                                               {12, 16, 12},
                                                               {6, 8, 6},
                                                               {1, 8, 6}}) {
    RgbImage img;
    ASSERT_TRUE(decode_image(file.data(), file.size(), "x", min_side, &img).ok());
    EXPECT_EQ(img.width, w) << min_side;
    EXPECT_EQ(img.height, h) << min_side;
    EXPECT_NEAR(img.rgb[0], 120, 3);
  }
}

// ---- parallel decoding ----

TEST_F(ImageFolderTest, ParallelDecodingGivesTheSameBytes) {
  for (int i = 0; i < 24; ++i) {
    const std::string n = std::to_string(100 + i);
    if (i % 2) {
      write_rgb_png(at("train/c" + std::to_string(i % 3) + "/" + n + ".png"), 9, 7,
                    pattern(9, 7, i));
    } else {
      write_jpeg(at("train/c" + std::to_string(i % 3) + "/" + n + ".jpg"), 9, 7, 3,
                 pattern(9, 7, i));
    }
  }
  write_rgb_png(at("val/c1/a.png"), 3, 3, pattern(3, 3));
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  auto one = load(5);
  omp_set_num_threads(4);
  auto four = load(5);
  omp_set_num_threads(threads);
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  ASSERT_TRUE(four.ok()) << four.status().to_string();
  ASSERT_EQ(one->train.count, 24);
  EXPECT_EQ(one->train.labels, four->train.labels);
  EXPECT_EQ(0, std::memcmp(one->train.pixels.data(), four->train.pixels.data(),
                           one->train.pixels.bytes()));
  // A bad image among them is named, whatever thread meets it.
  write_file(at("train/c2/105.png"), Bytes{'n', 'o'});
  omp_set_num_threads(4);
  auto bad = load(5);
  omp_set_num_threads(threads);
  expect_error(bad.status(), Code::data_error, {at("train/c2/105.png").string()});
}

// ---- errors ----

TEST_F(ImageFolderTest, CorruptTruncatedAndForeignFilesAreNamed) {
  write_small_set();
  write_jpeg(at("j.jpg"), 24, 24, 3, pattern(24, 24));
  const Bytes jpeg = read_all(at("j.jpg"));
  write_rgb_png(at("p.png"), 16, 16, pattern(16, 16));
  const Bytes png = read_all(at("p.png"));
  const fs::path bad = at("train/a-cat/bad.png");
  auto expect = [&](const Bytes& content, const std::vector<std::string>& parts) {
    write_file(bad, content);
    std::vector<std::string> all = {bad.string() + ": "};
    all.insert(all.end(), parts.begin(), parts.end());
    expect_error(load(4).status(), Code::data_error, all);
  };
  expect({}, {"empty file"});
  expect({'h', 'e', 'l', 'l', 'o'}, {"neither a JPEG nor a PNG"});
  Bytes garbage(jpeg.begin(), jpeg.begin() + 4);  // SOI + the start of a marker, then junk
  garbage.resize(200, 0x5a);
  expect(garbage, {"corrupt JPEG (libjpeg: "});
  expect(Bytes(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(jpeg.size() - 40)),
         {"truncated JPEG"});
  Bytes crc = png;
  crc[29] ^= 0xff;  // IHDR's CRC
  expect(crc, {"corrupt PNG (libpng: IHDR: CRC error)"});
  expect(Bytes(png.begin(), png.begin() + static_cast<std::ptrdiff_t>(png.size() / 2)),
         {"corrupt PNG", "truncated"});
  Bytes idat = png;
  idat[idat.size() - 20] ^= 0x55;  // inside the compressed data or its CRC
  expect(idat, {"corrupt PNG"});
}

TEST_F(ImageFolderTest, CmykJpegIsRefusedAsUnsupported) {
  write_small_set();
  write_jpeg(at("train/a-cat/cmyk.jpg"), 8, 8, 4, Bytes(8 * 8 * 4, 40));
  expect_error(load(4).status(), Code::data_error,
               {at("train/a-cat/cmyk.jpg").string() + ": unsupported JPEG colour space (CMYK)"});
}

// A header claiming more pixels than kMaxImagePixels is refused before the pixels are taken.
TEST_F(ImageFolderTest, HugeImageHeaderIsRefused) {
  write_small_set();
  Bytes b = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  auto chunk = [&b](const char* type, const Bytes& data) {
    const uint32_t n = static_cast<uint32_t>(data.size());
    for (int s = 24; s >= 0; s -= 8)
      b.push_back(static_cast<uint8_t>(n >> s));
    Bytes td(type, type + 4);
    td.insert(td.end(), data.begin(), data.end());
    b.insert(b.end(), td.begin(), td.end());
    const uint32_t crc = static_cast<uint32_t>(crc32(0, td.data(), static_cast<uInt>(td.size())));
    for (int s = 24; s >= 0; s -= 8)
      b.push_back(static_cast<uint8_t>(crc >> s));
  };
  // 20000 x 20000, 8-bit RGB.
  chunk("IHDR", {0, 0, 0x4e, 0x20, 0, 0, 0x4e, 0x20, 8, 2, 0, 0, 0});
  chunk("IDAT", {});
  write_file(at("train/a-cat/huge.png"), b);
  expect_error(load(4).status(), Code::data_error,
               {at("train/a-cat/huge.png").string() +
                ": a PNG of 20000x20000 pixels, more than the 134217728-pixel limit"});
}

TEST_F(ImageFolderTest, UnreadableFileIsNamed) {
  write_small_set();
  fs::create_symlink(at("no-such-file.png"), at("train/a-cat/dangling.png"));
  expect_error(load(4).status(), Code::io_error,
               {at("train/a-cat/dangling.png").string() + ": cannot open: No such file"});
}

TEST_F(ImageFolderTest, LayoutErrorsNameTheDirectory) {
  write_small_set();
  fs::remove_all(at("val"));
  expect_error(load(4).status(), Code::not_found, {dir_.string() + ": missing val/"});
  fs::rename(at("train"), at("val"));
  expect_error(load(4).status(), Code::not_found, {dir_.string() + ": missing train/"});
  fs::create_directories(at("train"));
  expect_error(load(4).status(), Code::data_error,
               {at("train").string() + ": no class directories"});
  fs::remove_all(at("train"));
  write_small_set();
  fs::create_directories(at("train/c-empty"));
  expect_error(load(4).status(), Code::data_error, {at("train/c-empty").string() + ": no images"});
  write_file(at("train/c-empty/readme.txt"), Bytes{'x'});  // only other extensions
  expect_error(load(4).status(), Code::data_error, {at("train/c-empty").string() + ": no images"});
  write_rgb_png(at("train/c-empty/sub/1.png"), 4, 4, pattern(4, 4));  // nested: found
  ASSERT_TRUE(load(4).ok());
  write_rgb_png(at("val/zebra/1.png"), 4, 4, pattern(4, 4));
  expect_error(load(4).status(), Code::data_error,
               {at("val/zebra").string() + ": class 'zebra' is not among the 3 classes of " +
                at("train").string()});
  fs::remove_all(at("val/zebra"));
  write_rgb_png(at("val/b-cow/1.png"), 4, 4, pattern(4, 4));  // sorts among train's classes
  expect_error(load(4).status(), Code::data_error, {at("val/b-cow").string() + ": class 'b-cow'"});
}

// The set's size is checked before any image is decoded: images that would all fail to decode
// are never reached when the set does not fit in memory.
TEST_F(ImageFolderTest, SetBeyondTheMemoryAvailableIsRefusedBeforeDecoding) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* f : {"train/a/1.png", "train/a/2.png", "train/b/3.png", "val/a/4.png"})
    write_file(at(f), Bytes{'n', 'o', 't'});
  auto run = [&] {
    std::ifstream status("/proc/self/status");
    std::string line;
    rlim_t vm = 0;
    while (std::getline(status, line))
      if (line.rfind("VmSize:", 0) == 0) vm = std::strtoull(line.c_str() + 7, nullptr, 10) << 10;
    const rlimit rl{vm + (rlim_t{48} << 20), vm + (rlim_t{48} << 20)};
    if (vm == 0 || setrlimit(RLIMIT_AS, &rl) != 0) std::exit(2);
    auto r = load(4096);  // 3 images of 3x4096x4096: 151 MB
    const std::string m = r.ok() ? "" : r.status().message();
    std::exit(!r.ok() && r.status().code() == Code::unavailable &&
                      m.find(at("train").string() + ": 3 images of 3x4096x4096 need") == 0 &&
                      m.find("(RLIMIT_AS)") != std::string::npos
                  ? 0
                  : 1);
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(0), "");
  expect_error(load(4).status(), Code::data_error, {at("train/a/1.png").string()});
}

}  // namespace
}  // namespace easel
