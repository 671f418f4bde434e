// libFuzzer target: the CIFAR binary reader (nets/data/cifar.cpp) through load_data on a
// directory, as `--data DIR` reads it. Input: byte 0 says which files the directory holds, then
// their contents, in the order below, each but the last as a u32 little-endian length n (clamped
// to what is there) and n bytes; the last takes the rest.
//   bit 0 clear: CIFAR-10: data_batch_N.bin for each N in 1..5 whose bit N is set, and
//                test_batch.bin unless bit 6 is set;
//   bit 0 set:   CIFAR-100: train.bin unless bit 1, test.bin unless bit 2;
//   bit 7:       the last of them is a directory, not a file (its bytes unused).
//
// Besides crashes and sanitizer reports, it traps on a broken promise: an error that is not one
// line or does not name the directory; a set read whose count is not its files' records, whose
// labels are out of range or whose first image is not its first record's pixels; more than
// 4 bytes allocated per byte of input (the reader allocates what the files hold, no more).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "nets/data/dataset.hpp"
#include "tests/fuzz/alloc_limit.hpp"
#include "tests/fuzz/tempdir.hpp"

namespace {

constexpr int64_t kImageBytes = 3 * 32 * 32;

struct File {
  std::string name;
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// The set read must be what its files hold: count records, labels from each record's last label
// byte, pixels after it.
void check_set(const easel::Dataset& ds, const std::vector<const File*>& files, int64_t classes) {
  const int64_t label_bytes = classes == 10 ? 1 : 2;
  const int64_t record = label_bytes + kImageBytes;
  int64_t bytes = 0;
  for (const File* f : files)
    bytes += static_cast<int64_t>(f->size);
  if (ds.classes != classes || ds.channels != 3 || ds.height != 32 || ds.width != 32 ||
      ds.count <= 0 || ds.count * record != bytes ||
      ds.pixels.bytes() != static_cast<size_t>(ds.count * kImageBytes) ||
      ds.labels.size() != static_cast<size_t>(ds.count))
    __builtin_trap();
  for (int32_t l : ds.labels)
    if (l < 0 || l >= classes) __builtin_trap();
  const File& first = *files.front();
  if (ds.labels[0] != first.data[label_bytes - 1] ||
      std::memcmp(ds.image(0), first.data + label_bytes, kImageBytes) != 0)
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const easel::fuzz::TempDir dir;
  if (size == 0) return 0;
  easel::fuzz::AllocLimit limit(static_cast<int64_t>(4 * size) + (int64_t{1} << 20));
  const uint8_t layout = data[0];
  const bool cifar100 = layout & 1;
  std::vector<File> files;
  if (!cifar100) {
    for (int n = 1; n <= 5; ++n)
      if (layout & (1 << n)) files.push_back({"data_batch_" + std::to_string(n) + ".bin"});
    if (!(layout & 64)) files.push_back({"test_batch.bin"});
  } else {
    if (!(layout & 2)) files.push_back({"train.bin"});
    if (!(layout & 4)) files.push_back({"test.bin"});
  }
  const uint8_t* p = data + 1;
  size_t left = size - 1;
  for (size_t i = 0; i < files.size(); ++i) {
    size_t n = left;
    if (i + 1 < files.size()) {
      uint32_t len = 0;
      const size_t head = std::min<size_t>(4, left);
      std::memcpy(&len, p, head);
      p += head;
      left -= head;
      n = std::min<size_t>(len, left);
    }
    files[i].data = p;
    files[i].size = n;
    p += n;
    left -= n;
  }
  dir.clear();
  for (size_t i = 0; i < files.size(); ++i) {
    if ((layout & 128) && i + 1 == files.size())
      dir.mkdir(files[i].name);
    else
      dir.write(files[i].name, files[i].data, files[i].size);
  }

  auto r = easel::load_data(dir.path(), easel::MemKind::dram, 1);
  if (!r.ok()) {
    const std::string& m = r.status().message();
    if (m.find(dir.path()) == std::string::npos || m.find('\n') != std::string::npos)
      __builtin_trap();
    return 0;
  }
  // Read: the files were there and regular. Which ones the reader took: CIFAR-10's when any of
  // its names is there, else CIFAR-100's.
  std::vector<const File*> train, test;
  for (const File& f : files) {
    if (f.name == "test_batch.bin" || f.name == "test.bin")
      test.push_back(&f);
    else
      train.push_back(&f);
  }
  if (train.empty() || test.size() != 1 || ((layout & 128) != 0)) __builtin_trap();
  const int64_t classes = cifar100 ? 100 : 10;
  check_set(r->train, train, classes);
  check_set(r->test, test, classes);
  return 0;
}
