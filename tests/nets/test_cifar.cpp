// CIFAR-10 and CIFAR-100 binary batches (every kind of malformed file) and the detection of a
// directory's format by what it holds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

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

constexpr int64_t kImage = 3072;

// Record r of a file `salt`: its pixels are (salt + r + j) & 0xff; labels as given.
Bytes records(const std::vector<std::vector<uint8_t>>& labels, int salt) {
  Bytes b;
  for (size_t r = 0; r < labels.size(); ++r) {
    b.insert(b.end(), labels[r].begin(), labels[r].end());
    for (int64_t j = 0; j < kImage; ++j)
      b.push_back(static_cast<uint8_t>((salt + static_cast<int64_t>(r) + j) & 0xff));
  }
  return b;
}

void write_file(const fs::path& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  ASSERT_TRUE(f.good()) << path;
}

void expect_error(const Status& s, Code code, const std::vector<std::string>& parts) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), code) << s.to_string();
  for (const std::string& p : parts)
    EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' not in: " << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
}

class CifarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           (std::string("easel_cifar_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // CIFAR-10: data_batch_1.bin (3 records), data_batch_2.bin (2), test_batch.bin (2).
  void write_cifar10() {
    write_file(dir_ / "data_batch_1.bin", records({{3}, {0}, {9}}, 0));
    write_file(dir_ / "data_batch_2.bin", records({{5}, {1}}, 100));
    write_file(dir_ / "test_batch.bin", records({{7}, {2}}, 200));
  }
  // CIFAR-100: train.bin (3 records), test.bin (1); (coarse, fine) labels.
  void write_cifar100() {
    write_file(dir_ / "train.bin", records({{19, 99}, {0, 0}, {4, 42}}, 7));
    write_file(dir_ / "test.bin", records({{1, 63}}, 9));
  }

  fs::path dir_;
};

TEST_F(CifarTest, ReadsCifar10Directory) {
  write_cifar10();
  auto r = load_data(dir_.string(), MemKind::dram, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Dataset& train = r->train;
  EXPECT_EQ(train.name, dir_.filename().string() + "/train");
  EXPECT_EQ(train.count, 5);
  EXPECT_EQ(train.channels, 3);
  EXPECT_EQ(train.height, 32);
  EXPECT_EQ(train.width, 32);
  EXPECT_EQ(train.classes, 10);
  EXPECT_EQ(train.labels, (std::vector<int32_t>{3, 0, 9, 5, 1}));
  ASSERT_EQ(train.pixels.bytes(), size_t{5 * 3072});
  // Image 3 is record 0 of data_batch_2.bin (salt 100): chw bytes as stored.
  for (int64_t j : {0, 1, 1023, 1024, 2048, 3071})
    EXPECT_EQ(train.image(3)[j], static_cast<uint8_t>((100 + j) & 0xff)) << j;
  EXPECT_EQ(train.image(2)[5], 2 + 5);
  EXPECT_EQ(r->test.count, 2);
  EXPECT_EQ(r->test.labels, (std::vector<int32_t>{7, 2}));
  EXPECT_EQ(r->test.image(1)[0], 201);
  EXPECT_EQ(r->test.name, dir_.filename().string() + "/test");
}

TEST_F(CifarTest, Cifar10BatchesPresentAreRead) {  // data_batch_1 missing, 3 present
  write_file(dir_ / "data_batch_3.bin", records({{1}}, 0));
  write_file(dir_ / "test_batch.bin", records({{2}}, 0));
  auto r = load_data(dir_.string(), MemKind::dram, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->train.count, 1);
  EXPECT_EQ(r->train.labels[0], 1);
}

TEST_F(CifarTest, ReadsCifar100WithFineLabels) {
  write_cifar100();
  auto r = load_data(dir_.string(), MemKind::hbw_preferred, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->train.classes, 100);
  EXPECT_EQ(r->train.labels, (std::vector<int32_t>{99, 0, 42}));
  EXPECT_EQ(r->test.labels, (std::vector<int32_t>{63}));
  EXPECT_EQ(r->train.image(2)[0], 7 + 2);  // pixels start after the two label bytes
  EXPECT_EQ(r->train.image(2)[3071], (7 + 2 + 3071) & 0xff);
  EXPECT_EQ(r->test.image(0)[10], 19);
}

TEST_F(CifarTest, MissingCounterpart) {
  write_file(dir_ / "data_batch_1.bin", records({{1}}, 0));
  expect_error(load_data(dir_.string(), MemKind::dram, 1).status(), Code::not_found,
               {dir_.string(), "missing test_batch.bin"});
  fs::remove(dir_ / "data_batch_1.bin");
  write_file(dir_ / "test_batch.bin", records({{1}}, 0));
  expect_error(load_data(dir_.string(), MemKind::dram, 1).status(), Code::not_found,
               {dir_.string(), "no data_batch_N.bin"});
  fs::remove(dir_ / "test_batch.bin");
  write_file(dir_ / "train.bin", records({{1, 1}}, 0));
  expect_error(load_data(dir_.string(), MemKind::dram, 1).status(), Code::not_found,
               {dir_.string(), "missing test.bin"});
  fs::remove(dir_ / "train.bin");
  write_file(dir_ / "test.bin", records({{1, 1}}, 0));
  expect_error(load_data(dir_.string(), MemKind::dram, 1).status(), Code::not_found,
               {dir_.string(), "missing train.bin"});
}

TEST_F(CifarTest, EmptyFile) {
  write_cifar10();
  write_file(dir_ / "data_batch_2.bin", {});
  expect_error(load_data(dir_.string(), MemKind::dram, 1).status(), Code::data_error,
               {path("data_batch_2.bin") + ": empty file"});
}

TEST_F(CifarTest, SizeNotWholeRecordsIsTruncated) {
  write_cifar10();
  Bytes cut = records({{1}, {2}}, 0);
  cut.resize(3073 + 1000);
  write_file(dir_ / "test_batch.bin", cut);
  expect_error(load_data(dir_.string(), MemKind::dram, 1).status(), Code::data_error,
               {path("test_batch.bin") + ": truncated",
                "4073 bytes are not a whole number of 3073-byte records (1 record and 1000 "
                "bytes over)"});
  // A CIFAR-100 file read with CIFAR-10's record size (and the reverse) does not divide.
  write_file(dir_ / "test_batch.bin", records({{1, 1}, {1, 1}}, 0));
  expect_error(load_data(dir_.string(), MemKind::dram, 1).status(), Code::data_error,
               {path("test_batch.bin"), "3073-byte records (2 records and 2 bytes over)"});
}

TEST_F(CifarTest, LabelOutOfRange) {
  write_cifar10();
  write_file(dir_ / "data_batch_2.bin", records({{5}, {10}}, 0));
  expect_error(load_data(dir_.string(), MemKind::dram, 1).status(), Code::data_error,
               {path("data_batch_2.bin") + ": label 10 of record 1 is out of range [0, 10)"});
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  write_cifar100();
  write_file(dir_ / "test.bin", records({{1, 1}, {2, 100}}, 0));
  expect_error(load_data(dir_.string(), MemKind::dram, 1).status(), Code::data_error,
               {path("test.bin") + ": fine label 100 of record 1 is out of range [0, 100)"});
  write_file(dir_ / "test.bin", records({{20, 1}}, 0));
  expect_error(load_data(dir_.string(), MemKind::dram, 1).status(), Code::data_error,
               {path("test.bin") + ": coarse label 20 of record 0 is out of range [0, 20)"});
}

TEST_F(CifarTest, FileThatCannotBeOpened) {
  write_cifar10();
  fs::remove(dir_ / "test_batch.bin");
  fs::create_directory(dir_ / "test_batch.bin");  // present, but no file
  expect_error(load_data(dir_.string(), MemKind::dram, 1).status(), Code::io_error,
               {path("test_batch.bin") + ": cannot open"});
  fs::remove(dir_ / "test_batch.bin");
  write_cifar10();
  if (::geteuid() != 0) {  // root reads any file
    fs::permissions(dir_ / "data_batch_1.bin", fs::perms::none);
    expect_error(load_data(dir_.string(), MemKind::dram, 1).status(), Code::io_error,
                 {path("data_batch_1.bin") + ": cannot open: Permission denied"});
  }
  expect_error(read_cifar({path("nope.bin")}, CifarKind::cifar10, "t", MemKind::dram).status(),
               Code::not_found, {path("nope.bin") + ": no such file"});
}

TEST_F(CifarTest, HonoursMemoryKind) {
  write_file(dir_ / "b.bin", records({{1}}, 0));
  auto r = read_cifar({path("b.bin")}, CifarKind::cifar10, "t", MemKind::device);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::unavailable);
}

// A set larger than the memory left (a sparse file of 40000 records, 123 MB, under 48 MiB of
// address-space headroom) is refused before its pixels are allocated, naming the limit; without
// the limit it reads.
TEST_F(CifarTest, SetBeyondTheMemoryAvailableIsRefused) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  constexpr int64_t kRecords = 40'000;
  {
    const int fd = ::open(path("train.bin").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, kRecords * 3074), 0);  // zeros: labels (0, 0)
    ::close(fd);
  }
  write_file(dir_ / "test.bin", records({{0, 0}}, 0));
  auto run = [&] {
    std::ifstream status("/proc/self/status");
    std::string line;
    rlim_t vm = 0;
    while (std::getline(status, line))
      if (line.rfind("VmSize:", 0) == 0) vm = std::strtoull(line.c_str() + 7, nullptr, 10) << 10;
    const rlimit rl{vm + (rlim_t{48} << 20), vm + (rlim_t{48} << 20)};
    if (vm == 0 || setrlimit(RLIMIT_AS, &rl) != 0) std::exit(2);
    auto r = load_data(dir_.string(), MemKind::dram, 1);
    const std::string m = r.ok() ? "" : r.status().message();
    std::exit(!r.ok() && r.status().code() == Code::unavailable &&
                      m.find(path("train.bin") + ": the CIFAR-100 files hold 40000 images") == 0 &&
                      m.find("(RLIMIT_AS)") != std::string::npos
                  ? 0
                  : 1);
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(0), "");
  auto r = load_data(dir_.string(), MemKind::dram, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->train.count, kRecords);
}

// ---- a directory's format by content ----

TEST_F(CifarTest, DirectoryHoldingNoKnownFormatSaysWhatItLookedFor) {
  write_file(dir_ / "readme.txt", Bytes{'h', 'i'});
  fs::create_directory(dir_ / "images");
  const Status s = load_data(dir_.string(), MemKind::dram, 1).status();
  expect_error(s, Code::not_found,
               {"data directory " + dir_.string() + ": found neither IDX files",
                "train-images-idx3-ubyte[.gz]", "CIFAR binary batches", "data_batch_1.bin",
                "test_batch.bin", "train.bin", "an image folder (train/CLASS/*.jpg|png"});
}

TEST_F(CifarTest, SideSuffixIsOnlyForImageFolders) {
  write_cifar10();
  expect_error(load_data(dir_.string() + ":64", MemKind::dram, 1).status(), Code::invalid_argument,
               {"'" + dir_.string() + ":64'", "image folders", "CIFAR binary batches"});
  expect_error(load_data(dir_.string() + ":0", MemKind::dram, 1).status(), Code::invalid_argument,
               {"'" + dir_.string() + ":0'", "[1, 4096]"});
  expect_error(load_data(dir_.string() + ":5000", MemKind::dram, 1).status(),
               Code::invalid_argument, {"[1, 4096]"});
}

// IDX files win over CIFAR files in the same directory (the order load_data documents).
TEST_F(CifarTest, IdxFilesAreLookedForFirst) {
  write_cifar10();
  write_file(dir_ / "train-images-idx3-ubyte", Bytes{1, 2, 3});
  expect_error(load_data(dir_.string(), MemKind::dram, 1).status(), Code::not_found,
               {"missing train-labels-idx1-ubyte"});
}

}  // namespace
}  // namespace easel
