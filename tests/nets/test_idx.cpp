// IDX reading (plain and gzip, every kind of malformed file) and data set specs.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nets/data/dataset.hpp"

namespace easel {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

constexpr uint32_t kImages = 0x00000803;
constexpr uint32_t kLabels = 0x00000801;

void put_be32(Bytes* b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8)
    b->push_back(static_cast<uint8_t>(v >> s));
}

Bytes idx_file(uint32_t magic, const std::vector<uint32_t>& dims, const Bytes& data) {
  Bytes b;
  put_be32(&b, magic);
  for (uint32_t d : dims)
    put_be32(&b, d);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

void write_plain(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  ASSERT_TRUE(f.good()) << path;
}

void write_gz(const std::string& path, const Bytes& b) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!b.empty()) {
    ASSERT_EQ(gzwrite(f, b.data(), static_cast<unsigned>(b.size())), static_cast<int>(b.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

Bytes read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// 5 images of 3x4 whose pixel j of image i is 12 i + j, and their labels.
constexpr int kN = 5, kRows = 3, kCols = 4;
Bytes good_pixels() {
  Bytes p(kN * kRows * kCols);
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = static_cast<uint8_t>(i);
  return p;
}
const Bytes kGoodLabels = {0, 9, 3, 5, 1};
Bytes good_images() {
  return idx_file(kImages, {kN, kRows, kCols}, good_pixels());
}
Bytes good_labels() {
  return idx_file(kLabels, {kN}, kGoodLabels);
}

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           (std::string("easel_idx_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes images (plain) and good labels (plain), reads them back.
  Result<Dataset> read_images(const Bytes& images) {
    write_plain(path("img"), images);
    write_plain(path("lab"), good_labels());
    return read_idx(path("img"), path("lab"), "t", MemKind::dram);
  }
  Result<Dataset> read_images_gz(const Bytes& images) {
    write_gz(path("img.gz"), images);
    write_plain(path("lab"), good_labels());
    return read_idx(path("img.gz"), path("lab"), "t", MemKind::dram);
  }

  fs::path dir_;
};

void expect_good(const Result<Dataset>& r) {
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Dataset& ds = r.value();
  EXPECT_EQ(ds.count, kN);
  EXPECT_EQ(ds.channels, 1);
  EXPECT_EQ(ds.height, kRows);
  EXPECT_EQ(ds.width, kCols);
  EXPECT_EQ(ds.classes, 10);
  EXPECT_EQ(ds.image_bytes(), kRows * kCols);
  ASSERT_EQ(ds.pixels.bytes(), size_t{kN * kRows * kCols});
  const Bytes want = good_pixels();
  EXPECT_EQ(Bytes(ds.pixels.as<uint8_t>(), ds.pixels.as<uint8_t>() + want.size()), want);
  EXPECT_EQ(ds.image(2)[0], 24);
  EXPECT_EQ(ds.labels, std::vector<int32_t>(kGoodLabels.begin(), kGoodLabels.end()));
}

// Expects an error of `code` whose message holds every one of `parts`.
void expect_error(const Result<Dataset>& r, Code code, const std::vector<std::string>& parts) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  for (const std::string& p : parts) {
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << r.status().message();
  }
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
}

TEST_F(IdxTest, ReadsPlainFiles) {
  write_plain(path("img"), good_images());
  write_plain(path("lab"), good_labels());
  auto r = read_idx(path("img"), path("lab"), "tiny/train", MemKind::dram);
  expect_good(r);
  EXPECT_EQ(r->name, "tiny/train");
}

TEST_F(IdxTest, ReadsGzipFiles) {
  write_gz(path("img.gz"), good_images());
  write_gz(path("lab.gz"), good_labels());
  expect_good(read_idx(path("img.gz"), path("lab.gz"), "t", MemKind::dram));
}

TEST_F(IdxTest, DetectsGzipByContentNotName) {
  write_gz(path("images.idx"), good_images());    // gzip without .gz
  write_plain(path("labels.gz"), good_labels());  // plain with .gz
  expect_good(read_idx(path("images.idx"), path("labels.gz"), "t", MemKind::dram));
}

TEST_F(IdxTest, HonoursMemoryKind) {
  write_plain(path("img"), good_images());
  write_gz(path("lab"), good_labels());
  expect_good(read_idx(path("img"), path("lab"), "t", MemKind::hbw_preferred));
  // A kind the host cannot give is an error, not a crash.
  auto r = read_idx(path("img"), path("lab"), "t", MemKind::device);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::unavailable);
}

TEST_F(IdxTest, MissingFile) {
  write_plain(path("lab"), good_labels());
  expect_error(read_idx(path("nope"), path("lab"), "t", MemKind::dram), Code::not_found,
               {path("nope")});
  write_plain(path("img"), good_images());
  expect_error(read_idx(path("img"), path("nolab"), "t", MemKind::dram), Code::not_found,
               {path("nolab")});
}

TEST_F(IdxTest, WrongMagic) {
  expect_error(read_images(idx_file(0x00000000, {kN, kRows, kCols}, good_pixels())),
               Code::data_error, {path("img"), "wrong magic 0x00000000", "0x00000803"});
  expect_error(read_images_gz(idx_file(0x12345678, {kN, kRows, kCols}, good_pixels())),
               Code::data_error, {path("img.gz"), "wrong magic 0x12345678"});
  // Images and labels given the wrong way round.
  write_plain(path("img"), good_images());
  write_plain(path("lab"), good_labels());
  expect_error(read_idx(path("lab"), path("img"), "t", MemKind::dram), Code::data_error,
               {path("lab"), "wrong magic 0x00000801", "swapped"});
}

TEST_F(IdxTest, ShortHeader) {
  expect_error(read_images(Bytes{0, 0, 8, 3, 0, 0}), Code::data_error,
               {path("img"), "truncated header", "6 of 16 bytes"});
  expect_error(read_images(Bytes{0, 0}), Code::data_error, {path("img"), "truncated header"});
  expect_error(read_images(Bytes{}), Code::data_error, {path("img"), "truncated header"});
  expect_error(read_images_gz(Bytes{0, 0, 8, 3, 0, 0, 0, 5}), Code::data_error,
               {path("img.gz"), "truncated header", "8 of 16 bytes"});
}

TEST_F(IdxTest, TruncatedData) {
  Bytes half = good_pixels();
  half.resize(30);
  const std::string want =
      ": truncated: header claims 5 images of 3x4 (60 bytes) but only 30 bytes follow";
  expect_error(read_images(idx_file(kImages, {kN, kRows, kCols}, half)), Code::data_error,
               {path("img") + want});
  expect_error(read_images_gz(idx_file(kImages, {kN, kRows, kCols}, half)), Code::data_error,
               {path("img.gz") + want});
  // Labels cut short.
  write_plain(path("img"), good_images());
  write_gz(path("lab"), idx_file(kLabels, {kN}, Bytes{1, 2}));
  expect_error(read_idx(path("img"), path("lab"), "t", MemKind::dram), Code::data_error,
               {path("lab"), "truncated: header claims 5 labels", "only 2 bytes follow"});
}

TEST_F(IdxTest, TrailingBytes) {
  Bytes more = good_pixels();
  more.push_back(7);
  more.push_back(7);
  expect_error(read_images(idx_file(kImages, {kN, kRows, kCols}, more)), Code::data_error,
               {path("img"), "2 bytes of trailing data"});
  expect_error(read_images_gz(idx_file(kImages, {kN, kRows, kCols}, more)), Code::data_error,
               {path("img.gz"), "trailing data"});
}

TEST_F(IdxTest, AbsurdDimensions) {
  const Bytes px = good_pixels();
  expect_error(read_images(idx_file(kImages, {0x80000000u, 28, 28}, px)), Code::data_error,
               {path("img"), "absurd dimensions", "2147483648 images of 28x28"});
  expect_error(read_images(idx_file(kImages, {0xffffffffu, 0xffffffffu, 0xffffffffu}, px)),
               Code::data_error, {path("img"), "absurd dimensions"});
  expect_error(read_images(idx_file(kImages, {kN, 0, kCols}, px)), Code::data_error,
               {"absurd dimensions", "positive"});
  expect_error(read_images(idx_file(kImages, {kN, kRows, 5000}, px)), Code::data_error,
               {"absurd dimensions", "4096"});
  // Every dimension within its own limit, the product over 2^34 bytes.
  expect_error(read_images(idx_file(kImages, {100'000'000, 28, 28}, px)), Code::data_error,
               {"absurd dimensions", "2^34"});
  write_plain(path("img"), good_images());
  write_plain(path("lab"), idx_file(kLabels, {0}, {}));
  expect_error(read_idx(path("img"), path("lab"), "t", MemKind::dram), Code::data_error,
               {path("lab"), "absurd dimensions"});
}

// In a (forked) child: limits the address space to what the process uses plus `headroom`, as
// `ulimit -v` does; exits 2 if it cannot.
void limit_address_space(rlim_t headroom) {
  std::ifstream status("/proc/self/status");
  std::string line;
  rlim_t vm = 0;
  while (std::getline(status, line)) {
    if (line.rfind("VmSize:", 0) == 0) vm = std::strtoull(line.c_str() + 7, nullptr, 10) << 10;
  }
  const rlim_t limit = vm + headroom;
  rlimit rl{limit, limit};
  if (vm == 0 || setrlimit(RLIMIT_AS, &rl) != 0) std::exit(2);
}

// A header within every limit (20M images of 28x28, 15.7 GB) over a few real bytes must fail
// as truncated without the claimed memory ever being taken: run under an address-space limit.
TEST_F(IdxTest, LargeClaimAllocatesNothingLarge) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Bytes claim = idx_file(kImages, {20'000'000, 28, 28}, good_pixels());
  write_plain(path("big"), claim);
  write_gz(path("big.gz"), claim);
  write_plain(path("lab"), idx_file(kLabels, {20'000'000}, kGoodLabels));
  auto run = [&](const std::string& images) {
    limit_address_space(rlim_t{1} << 30);  // 1 GiB of headroom
    auto r = read_idx(images, path("lab"), "t", MemKind::dram);
    const bool as_expected =
        !r.ok() && r.status().message().find(
                       "truncated: header claims 20000000 images of 28x28 "
                       "(15680000000 bytes) but only 60 bytes follow") != std::string::npos;
    std::exit(as_expected ? 0 : 1);
  };
  EXPECT_EXIT(run(path("big")), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(run(path("big.gz")), ::testing::ExitedWithCode(0), "");
}

// ---- hostile files: what a header claims against what the file holds and the memory left ----

// A gzip of a few bytes whose header claims 10^12 bytes (10^8 images of 100x100) is refused
// before anything is allocated.
TEST_F(IdxTest, SmallGzipClaimingTerabyteIsRefused) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  write_gz(path("tb.gz"), idx_file(kImages, {100'000'000, 100, 100}, good_pixels()));
  write_plain(path("lab"), idx_file(kLabels, {100'000'000}, kGoodLabels));
  auto run = [&] {
    limit_address_space(rlim_t{256} << 20);
    auto r = read_idx(path("tb.gz"), path("lab"), "t", MemKind::dram);
    std::exit(!r.ok() && r.status().message().find(path("tb.gz") + ": absurd dimensions") !=
                             std::string::npos
                  ? 0
                  : 1);
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(0), "");
}

// n images of 28x28 whose pixels are all 7 (deflate shrinks them about 1000 times), gzipped,
// and their labels.
void write_big_set(const std::string& images, const std::string& labels, uint32_t n) {
  gzFile f = gzopen(images.c_str(), "wb");
  ASSERT_NE(f, nullptr) << images;
  const Bytes head = idx_file(kImages, {n, 28, 28}, {});
  ASSERT_EQ(gzwrite(f, head.data(), static_cast<unsigned>(head.size())), 16);
  const Bytes block(size_t{784} * 1000, 7);
  for (uint32_t done = 0; done < n;) {
    const uint32_t k = std::min<uint32_t>(1000, n - done);
    ASSERT_EQ(gzwrite(f, block.data(), 784 * k), static_cast<int>(784 * k));
    done += k;
  }
  ASSERT_EQ(gzclose(f), Z_OK);
  write_gz(labels, idx_file(kLabels, {n}, Bytes(n, 3)));
}

// Honest headers, a file that inflates to more than the process may take (the case: a
// training set of 68 MB of gzip inflating to 15.7 GB under a 6 GB `ulimit -v`, scaled down to
// 100 MB under 48 MiB of headroom): refused with the limit named, while a set that fits reads
// under the same limit.
TEST_F(IdxTest, HonestSetBeyondTheAddressSpaceLimitIsRefusedOneThatFitsReads) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  write_big_set(path("big.gz"), path("big-lab.gz"), 127'551);   // 99999984 bytes
  write_big_set(path("fits.gz"), path("fits-lab.gz"), 10'204);  // 7999936 bytes
  EXPECT_LT(fs::file_size(path("big.gz")), 200'000u);
  auto run = [&](const char* images, const char* labels, const std::string& want) {
    limit_address_space(rlim_t{48} << 20);
    auto r = read_idx(path(images), path(labels), "t", MemKind::dram);
    if (want.empty()) std::exit(r.ok() && r->count == 10'204 && r->image(10'203)[783] == 7 ? 0 : 1);
    const bool as_expected = !r.ok() && r.status().code() == Code::unavailable &&
                             r.status().message().find(want) != std::string::npos &&
                             r.status().message().find("(RLIMIT_AS)") != std::string::npos;
    std::exit(as_expected ? 0 : 1);
  };
  EXPECT_EXIT(run("big.gz", "big-lab.gz",
                  path("big.gz") +
                      ": header claims 127551 images of 28x28 (99999984 bytes), more than the "),
              ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(run("fits.gz", "fits-lab.gz", ""), ::testing::ExitedWithCode(0), "");
  // Without the limit both read.
  auto r = read_idx(path("big.gz"), path("big-lab.gz"), "t", MemKind::dram);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->count, 127'551);
}

TEST_F(IdxTest, GzipInflatingPastItsHeaderIsRefused) {
  Bytes more = good_pixels();
  more.resize(more.size() + 100'000, 0);  // 100 kB more than claimed, a few hundred compressed
  expect_error(read_images_gz(idx_file(kImages, {kN, kRows, kCols}, more)), Code::data_error,
               {path("img.gz") + ": trailing data: the gzip stream inflates past the 5 images of "
                                 "3x4 (60 bytes) the header claims"});
}

// Every cut of a valid gzip is refused with one line naming the file, none crashes.
TEST_F(IdxTest, GzipCutAnywhereIsRefused) {
  write_plain(path("lab"), good_labels());
  write_gz(path("img.gz"), good_images());
  const Bytes gz = read_all(path("img.gz"));
  for (size_t n = 0; n < gz.size(); ++n) {
    write_plain(path("cut.gz"), Bytes(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(n)));
    auto r = read_idx(path("cut.gz"), path("lab"), "t", MemKind::dram);
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().code(), Code::data_error) << n;
    EXPECT_EQ(r.status().message().rfind(path("cut.gz") + ": ", 0), 0u) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
}

TEST_F(IdxTest, JunkAfterTheGzipStreamIsRefused) {
  write_plain(path("lab"), good_labels());
  write_gz(path("img.gz"), good_images());
  const Bytes gz = read_all(path("img.gz"));
  for (const Bytes& junk :
       {Bytes{'j', 'u', 'n', 'k'}, Bytes{0x1f}, Bytes{0x1f, 0x00, 0x00}, Bytes(512, 0)}) {
    Bytes b = gz;
    b.insert(b.end(), junk.begin(), junk.end());
    write_plain(path("junk.gz"), b);
    expect_error(read_idx(path("junk.gz"), path("lab"), "t", MemKind::dram), Code::data_error,
                 {path("junk.gz") + ": " + std::to_string(junk.size()) +
                  " bytes of trailing junk after the gzip stream"});
  }
}

// Several gzip members one after the other (`cat a.gz b.gz`) are one valid stream.
TEST_F(IdxTest, ConcatenatedGzipMembersRead) {
  const Bytes img = good_images();
  write_gz(path("a.gz"), Bytes(img.begin(), img.begin() + 20));
  write_gz(path("b.gz"), Bytes(img.begin() + 20, img.end()));
  Bytes both = read_all(path("a.gz"));
  const Bytes b = read_all(path("b.gz"));
  both.insert(both.end(), b.begin(), b.end());
  write_plain(path("ab.gz"), both);
  write_plain(path("lab"), good_labels());
  expect_good(read_idx(path("ab.gz"), path("lab"), "t", MemKind::dram));
}

TEST_F(IdxTest, CountMismatch) {
  write_plain(path("img"), good_images());
  write_plain(path("lab"), idx_file(kLabels, {4}, Bytes{1, 2, 3, 4}));
  expect_error(read_idx(path("img"), path("lab"), "t", MemKind::dram), Code::data_error,
               {path("img") + " holds 5 images", path("lab") + " holds 4 labels"});
}

TEST_F(IdxTest, LabelOutOfRange) {
  write_plain(path("img"), good_images());
  write_plain(path("lab"), idx_file(kLabels, {kN}, Bytes{0, 1, 2, 10, 4}));
  expect_error(read_idx(path("img"), path("lab"), "t", MemKind::dram), Code::data_error,
               {path("lab"), "label 10 at index 3"});
}

TEST_F(IdxTest, CorruptGzip) {
  write_plain(path("lab"), good_labels());
  write_gz(path("img.gz"), good_images());
  const Bytes gz = read_all(path("img.gz"));
  ASSERT_GT(gz.size(), 20u);
  // CRC in the trailer wrong.
  Bytes bad_crc = gz;
  bad_crc[bad_crc.size() - 8] ^= 0xff;
  write_plain(path("crc.gz"), bad_crc);
  expect_error(read_idx(path("crc.gz"), path("lab"), "t", MemKind::dram), Code::data_error,
               {path("crc.gz"), "corrupt gzip stream"});
  // Deflate data replaced by garbage (0xff: a reserved block type).
  Bytes garbage(gz.begin(), gz.begin() + 10);
  garbage.resize(64, 0xff);
  write_plain(path("garbage.gz"), garbage);
  expect_error(read_idx(path("garbage.gz"), path("lab"), "t", MemKind::dram), Code::data_error,
               {path("garbage.gz"), "corrupt gzip stream"});
  // Compressed file cut short.
  Bytes cut(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz.size() / 2));
  write_plain(path("cut.gz"), cut);
  expect_error(read_idx(path("cut.gz"), path("lab"), "t", MemKind::dram), Code::data_error,
               {path("cut.gz"), "gzip", "cut short"});
}

// ---- load_data ----

class LoadDataTest : public IdxTest {
 protected:
  // The four standard files, a mix of plain and gzip, in dir_.
  void write_set(bool skip_test_labels = false) {
    write_gz(path("train-images-idx3-ubyte.gz"), good_images());
    write_plain(path("train-labels-idx1-ubyte"), good_labels());
    write_plain(path("t10k-images-idx3-ubyte"), idx_file(kImages, {2, kRows, kCols}, Bytes(24)));
    if (!skip_test_labels) {
      write_gz(path("t10k-labels-idx1-ubyte.gz"), idx_file(kLabels, {2}, Bytes{4, 2}));
    }
  }
};

TEST_F(LoadDataTest, Directory) {
  write_set();
  auto r = load_data(dir_.string(), MemKind::dram, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_good(Result<Dataset>(std::move(r->train)));
  EXPECT_EQ(r->test.count, 2);
  EXPECT_EQ(r->test.labels, (std::vector<int32_t>{4, 2}));
  const std::string base = dir_.filename().string();
  EXPECT_EQ(r->test.name, base + "/test");
  // A trailing slash names the set the same way.
  auto slash = load_data(dir_.string() + "/", MemKind::dram, 1);
  ASSERT_TRUE(slash.ok()) << slash.status().to_string();
  EXPECT_EQ(slash->train.name, base + "/train");
}

TEST_F(LoadDataTest, DirectoryMissingFile) {
  write_set(/*skip_test_labels=*/true);
  auto r = load_data(dir_.string(), MemKind::dram, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::not_found);
  EXPECT_NE(r.status().message().find("missing t10k-labels-idx1-ubyte"), std::string::npos)
      << r.status().message();
}

TEST_F(LoadDataTest, DirectoryWithBadFileNamesIt) {
  write_set();
  write_plain(path("t10k-images-idx3-ubyte"), Bytes{1, 2, 3});
  auto r = load_data(dir_.string(), MemKind::dram, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path("t10k-images-idx3-ubyte")), std::string::npos)
      << r.status().message();
}

// A test set whose images have another shape than the training set's (the same bytes read as
// other rows and columns) is refused, naming both files, not evaluated on silently.
TEST_F(LoadDataTest, TestImagesOfAnotherShapeAreRefused) {
  write_set();
  write_plain(path("t10k-images-idx3-ubyte"),
              idx_file(kImages, {2, kCols, kRows}, Bytes(24)));  // the same bytes, transposed
  auto r = load_data(dir_.string(), MemKind::dram, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::data_error);
  const std::string m = r.status().message();
  EXPECT_NE(m.find(path("t10k-images-idx3-ubyte") + ": its images are 1x"), std::string::npos) << m;
  EXPECT_NE(m.find("train-images-idx3-ubyte.gz's are 1x"), std::string::npos) << m;
}

TEST(LoadData, BadSpecs) {
  for (const char* spec :
       {"synthetic:0", "synthetic:-5", "synthetic:abc", "synthetic:10:3x32", "synthetic:10:0x4x4",
        "synthetic:10:1x4x4:1", "synthetic:10:1x4x4:x", "synthetic:1:1x1x1:2:9",
        "synthetic:", "synthetic:10:1x4x4x", "synthetic:999999999999", "no-such-data-set",
        "fashion-mnist:3x32", "fashion-mnist:2x32x32", "fashion-mnist:3x27x32",
        "fashion-mnist:3x32x2000", "fashion-mnist:", "mnist:3x32x32x"}) {
    auto r = load_data(spec, MemKind::dram, 1);
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_EQ(r.status().code(), Code::invalid_argument) << spec;
    EXPECT_NE(r.status().message().find(std::string("'") + spec + "'"), std::string::npos)
        << r.status().message();
  }
}

TEST(LoadData, MissingDirectory) {
  auto r = load_data("/no/such/dir", MemKind::dram, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::not_found);
  EXPECT_NE(r.status().message().find("/no/such/dir"), std::string::npos);
}

TEST(LoadData, MnistMissingSaysWhatToDo) {
  if (fs::exists("/usr/share/datasets/mnist")) GTEST_SKIP() << "MNIST is installed";
  auto r = load_data("mnist", MemKind::dram, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::not_found);
  EXPECT_NE(r.status().message().find("directory"), std::string::npos) << r.status().message();
}

TEST(LoadData, FashionMnistMissingSaysWhatToInstall) {
  if (fs::exists("/usr/share/datasets/fashion-mnist")) GTEST_SKIP() << "installed";
  auto r = load_data("fashion-mnist", MemKind::dram, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("apt-get install dataset-fashion-mnist"), std::string::npos);
}

TEST(LoadData, RealFashionMnist) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist")) {
    GTEST_SKIP() << "apt-get install dataset-fashion-mnist";
  }
  auto r = load_data("fashion-mnist", MemKind::dram, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Dataset& train = r->train;
  const Dataset& test = r->test;
  EXPECT_EQ(train.name, "fashion-mnist/train");
  EXPECT_EQ(train.count, 60000);
  EXPECT_EQ(test.count, 10000);
  for (const Dataset* ds : {&train, &test}) {
    EXPECT_EQ(ds->channels, 1);
    EXPECT_EQ(ds->height, 28);
    EXPECT_EQ(ds->width, 28);
    ASSERT_EQ(ds->labels.size(), static_cast<size_t>(ds->count));
    ASSERT_EQ(ds->pixels.bytes(), static_cast<size_t>(ds->count * 28 * 28));
    std::vector<int64_t> per_class(10, 0);
    for (int32_t l : ds->labels) {
      ASSERT_GE(l, 0);
      ASSERT_LT(l, 10);
      ++per_class[static_cast<size_t>(l)];
    }
    // Fashion-MNIST is balanced: 6000 / 1000 images per class.
    for (int64_t c : per_class)
      EXPECT_EQ(c, ds->count / 10);
  }
}

// fashion-mnist:3x32x32: every image centred on a black 32x32 canvas, its grey in each of the 3
// channels, and nothing else changed (the labels, the counts, the original pixels).
TEST(LoadData, FashionMnistAtCifarsShape) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist")) GTEST_SKIP() << "not installed";
  auto grey = load_data("fashion-mnist", MemKind::dram, 1);
  auto rgb = load_data("fashion-mnist:3x32x32", MemKind::dram, 1);
  ASSERT_TRUE(grey.ok() && rgb.ok()) << rgb.status().to_string();
  for (int which = 0; which < 2; ++which) {
    const Dataset& g = which ? grey->test : grey->train;
    const Dataset& c = which ? rgb->test : rgb->train;
    ASSERT_EQ(c.count, g.count);
    EXPECT_EQ(c.labels, g.labels);
    ASSERT_EQ(c.channels * c.height * c.width, 3 * 32 * 32);
    ASSERT_EQ(c.pixels.bytes(), static_cast<size_t>(c.count * 3 * 32 * 32));
    for (int64_t i : {int64_t{0}, c.count / 2, c.count - 1}) {
      for (int64_t ch = 0; ch < 3; ++ch) {
        for (int64_t y = 0; y < 32; ++y) {
          for (int64_t x = 0; x < 32; ++x) {
            const bool inside = y >= 2 && y < 30 && x >= 2 && x < 30;
            const uint8_t want = inside ? g.image(i)[(y - 2) * 28 + (x - 2)] : 0;
            ASSERT_EQ(c.image(i)[(ch * 32 + y) * 32 + x], want) << i << " " << ch << " " << y;
          }
        }
      }
    }
  }
}

TEST(LoadData, Synthetic) {
  auto r = load_data("synthetic:400:3x5x6:7", MemKind::dram, 3);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->train.count, 400);
  EXPECT_EQ(r->test.count, 100);
  EXPECT_EQ(r->train.channels, 3);
  EXPECT_EQ(r->train.height, 5);
  EXPECT_EQ(r->train.width, 6);
  EXPECT_EQ(r->test.classes, 7);
  EXPECT_EQ(r->train.pixels.bytes(), 400u * 90u);
  for (int32_t l : r->train.labels)
    ASSERT_TRUE(l >= 0 && l < 7);
  auto d = load_data("synthetic", MemKind::hbw_preferred, 3);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->train.count, 2048);
  EXPECT_EQ(d->test.count, 512);
  EXPECT_EQ(d->train.image_bytes(), 784);
  EXPECT_EQ(d->train.classes, 10);
}

}  // namespace
}  // namespace easel
