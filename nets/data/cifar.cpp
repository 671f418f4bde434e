// CIFAR-10 and CIFAR-100 in their binary versions (https://www.cs.toronto.edu/~kriz/cifar.html):
// headerless files of fixed-size records, so every file's size must be a whole number of
// records; the sizes bound what is allocated, and the total is checked against the memory
// available before the pixels are read straight into their final buffer.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/limits.hpp"
#include "nets/data/dataset.hpp"
#include "nets/data/file_io.hpp"

namespace easel {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSide = 32;
constexpr int64_t kImageBytes = 3 * kSide * kSide;  // chw
constexpr int64_t kMaxBytes = int64_t{1} << 34;
constexpr int64_t kChunkRecords = 2048;  // records read at a time (about 6 MB)
constexpr int kDataBatches = 5;          // CIFAR-10's data_batch_1.bin .. data_batch_5.bin

// One open file; closes it.
class File {
 public:
  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Opens path, a regular file, and reads its size.
  Status open(const std::string& path) {
    int64_t size = 0;
    EASEL_RETURN_IF_ERROR(open_for_reading(path, &fd_, &size));
    if (size < 0) return io_error(path + ": cannot open: not a regular file");
    size_ = size;
    return {};
  }
  // Reads up to n bytes; fewer only at the end of the file.
  Result<size_t> read(uint8_t* dst, size_t n, const std::string& path) {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::read(fd_, dst + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return io_error(path + ": read failed: " + std::strerror(errno));
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  }
  int64_t size() const { return size_; }

 private:
  int fd_ = -1;
  int64_t size_ = 0;
};

struct RecordFormat {
  const char* what;  // "CIFAR-10"
  int64_t label_bytes;
  int64_t classes;         // of the label kept (the last label byte)
  int64_t coarse_classes;  // of the first label byte when there are two
  int64_t record() const { return label_bytes + kImageBytes; }
};

RecordFormat format_of(CifarKind cifar) {
  if (cifar == CifarKind::cifar10) return {"CIFAR-10", 1, 10, 0};
  return {"CIFAR-100", 2, 100, 20};
}

std::string plural(int64_t n, const char* one) {
  return std::to_string(n) + " " + one + (n == 1 ? "" : "s");
}

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// Opens paths into *files and counts each one's records into *records; returns their total.
// Refused: a file that is empty or not a whole number of L's records.
Result<int64_t> open_batches(const std::vector<std::string>& paths, const RecordFormat& L,
                             std::vector<File>* files, std::vector<int64_t>* records) {
  const int64_t record = L.record();
  int64_t count = 0;
  for (size_t f = 0; f < paths.size(); ++f) {
    EASEL_RETURN_IF_ERROR((*files)[f].open(paths[f]));
    const int64_t size = (*files)[f].size();
    if (size == 0) {
      return data_error(paths[f] + ": empty file (a " + L.what + " binary batch holds records of " +
                        std::to_string(record) + " bytes)");
    }
    if (size % record != 0) {
      return data_error(paths[f] + ": truncated or not a " + L.what + " binary batch: its " +
                        std::to_string(size) + " bytes are not a whole number of " +
                        std::to_string(record) + "-byte records (" +
                        plural(size / record, "record") + " and " + plural(size % record, "byte") +
                        " over)");
    }
    (*records)[f] = size / record;
    count += (*records)[f];
  }
  return count;
}

// Refuses `count` images (read from the files `last` ends) whose pixels pass kMaxBytes, or
// which with their labels do not fit in the memory available.
Status check_images_fit(const std::string& last, const RecordFormat& L, int64_t count) {
  const int64_t bytes = count * kImageBytes;  // <= the files' total size
  if (bytes > kMaxBytes) {
    return data_error(last + ": the " + L.what + " files hold " + plural(count, "image") + " (" +
                      std::to_string(bytes) + " bytes), more than 2^34 bytes");
  }
  const MemoryBound mem = available_memory();
  const uint64_t need = static_cast<uint64_t>(bytes) + static_cast<uint64_t>(count) * 4;
  if (need > mem.bytes) {
    return unavailable(last + ": the " + L.what + " files hold " + plural(count, "image") + " (" +
                       std::to_string(need) + " bytes with their labels), more than the " +
                       std::to_string(mem.bytes) + " bytes of memory available (" + mem.source +
                       ")");
  }
  return {};
}

// Reads the `records` records of `file` (at `path`), kChunkRecords at a time through `chunk`
// (room for that many, or all), into ds's images from *image on (advanced past them).
// Refused: a file that shrank since its size was read, a label out of L's range.
Status read_batch(File& file, const std::string& path, int64_t records, const RecordFormat& L,
                  uint8_t* chunk, Dataset* ds, int64_t* image) {
  const int64_t record = L.record();
  for (int64_t r = 0; r < records; r += kChunkRecords) {
    const int64_t n = std::min(kChunkRecords, records - r);
    EASEL_ASSIGN_OR_RETURN(const size_t got,
                           file.read(chunk, static_cast<size_t>(n * record), path));
    if (got < static_cast<size_t>(n * record)) {  // shrank since its size was read
      return data_error(path + ": truncated while reading: " +
                        std::to_string(r * record + static_cast<int64_t>(got)) + " of " +
                        std::to_string(file.size()) + " bytes");
    }
    for (int64_t k = 0; k < n; ++k) {
      const uint8_t* rec = chunk + k * record;
      const int64_t at = r + k;  // record index within the file
      if (L.label_bytes == 2 && rec[0] >= L.coarse_classes) {
        return data_error(path + ": coarse label " + std::to_string(rec[0]) + " of record " +
                          std::to_string(at) + " is out of range [0, " +
                          std::to_string(L.coarse_classes) + ")");
      }
      const int label = rec[L.label_bytes - 1];
      if (label >= L.classes) {
        return data_error(path + ": " + (L.label_bytes == 2 ? "fine label " : "label ") +
                          std::to_string(label) + " of record " + std::to_string(at) +
                          " is out of range [0, " + std::to_string(L.classes) + ")");
      }
      ds->labels[static_cast<size_t>(*image)] = label;
      std::memcpy(ds->pixels.as<uint8_t>() + *image * kImageBytes, rec + L.label_bytes,
                  static_cast<size_t>(kImageBytes));
      ++*image;
    }
  }
  return {};
}

}  // namespace

Result<Dataset> read_cifar(const std::vector<std::string>& paths, CifarKind cifar,
                           const std::string& name, MemKind kind) {
  EASEL_CHECK(!paths.empty());
  const RecordFormat L = format_of(cifar);
  // Sizes first: each a whole number of records, and all of them within the memory available.
  std::vector<File> files(paths.size());
  std::vector<int64_t> records(paths.size());
  EASEL_ASSIGN_OR_RETURN(const int64_t count, open_batches(paths, L, &files, &records));
  EASEL_RETURN_IF_ERROR(check_images_fit(paths.back(), L, count));

  Dataset ds;
  ds.name = name;
  ds.count = count;
  ds.channels = 3;
  ds.height = kSide;
  ds.width = kSide;
  ds.classes = L.classes;
  EASEL_ASSIGN_OR_RETURN(ds.pixels,
                         Buffer::allocate(static_cast<size_t>(count * kImageBytes), kind));
  ds.labels.resize(static_cast<size_t>(count));
  std::vector<uint8_t> chunk(static_cast<size_t>(std::min(count, kChunkRecords) * L.record()));
  int64_t image = 0;  // the next image of ds
  for (size_t f = 0; f < paths.size(); ++f)
    EASEL_RETURN_IF_ERROR(read_batch(files[f], paths[f], records[f], L, chunk.data(), &ds, &image));
  return ds;
}

bool has_cifar(const std::string& dir) {
  const fs::path d(dir);
  for (const char* f : {"test_batch.bin", "train.bin", "test.bin"})
    if (present(d / f)) return true;
  for (int i = 1; i <= kDataBatches; ++i)
    if (present(d / ("data_batch_" + std::to_string(i) + ".bin"))) return true;
  return false;
}

Result<DataSplit> load_cifar(const std::string& dir, const std::string& name, MemKind kind) {
  const fs::path d(dir);
  std::vector<std::string> train;
  for (int i = 1; i <= kDataBatches; ++i) {
    const fs::path p = d / ("data_batch_" + std::to_string(i) + ".bin");
    if (present(p)) train.push_back(p.string());
  }
  CifarKind cifar = CifarKind::cifar10;
  std::string test = (d / "test_batch.bin").string();
  if (train.empty() && !present(test)) {  // CIFAR-100's names
    cifar = CifarKind::cifar100;
    if (!present(d / "train.bin"))
      return not_found(dir + ": missing train.bin (CIFAR-100 binary: train.bin and test.bin)");
    if (!present(d / "test.bin"))
      return not_found(dir + ": missing test.bin (CIFAR-100 binary: train.bin and test.bin)");
    train.push_back((d / "train.bin").string());
    test = (d / "test.bin").string();
  } else if (train.empty()) {
    return not_found(dir + ": test_batch.bin but no data_batch_N.bin (CIFAR-10 binary: " +
                     "data_batch_1.bin .. data_batch_5.bin, at least one, and test_batch.bin)");
  } else if (!present(test)) {
    return not_found(dir + ": missing test_batch.bin (CIFAR-10 binary: data_batch_1.bin .. " +
                     "data_batch_5.bin, at least one, and test_batch.bin)");
  }
  DataSplit split;
  EASEL_ASSIGN_OR_RETURN(split.train, read_cifar(train, cifar, name + "/train", kind));
  EASEL_ASSIGN_OR_RETURN(split.test, read_cifar({test}, cifar, name + "/test", kind));
  return split;
}

}  // namespace easel
