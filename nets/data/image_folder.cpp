// Image folders (torchvision's ImageFolder layout): listed, checked against the memory
// available, then every image decoded and resized to side x side in parallel, straight into
// the data set's buffer (decode_source: tar shards at a side are held the same way).
#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "engine/limits.hpp"
#include "engine/log.hpp"
#include "nets/data/dataset.hpp"
#include "nets/data/image_decode.hpp"
#include "nets/data/stream_source.hpp"

namespace easel {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxSide = 4096;
constexpr int64_t kMaxCount = 100'000'000;
constexpr const char* kLayout = "an image folder holds train/CLASS/*.jpg|png and val/CLASS/*";

struct Item {
  std::string path;
  int32_t label = 0;
};

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  for (char& c : ext)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// The sorted names of split's sub-directories (symbolic links followed, as torchvision does).
Result<std::vector<std::string>> class_dirs(const fs::path& split) {
  std::error_code ec;
  fs::directory_iterator it(split, ec);
  if (ec) return io_error(split.string() + ": cannot list: " + ec.message());
  std::vector<std::string> names;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return io_error(split.string() + ": cannot list: " + ec.message());
    if (is_dir(it->path())) names.push_back(it->path().filename().string());
  }
  if (ec) return io_error(split.string() + ": cannot list: " + ec.message());
  if (names.empty()) return data_error(split.string() + ": no class directories (" + kLayout + ")");
  std::sort(names.begin(), names.end());
  return names;
}

// The images under class directory `dir` (recursively, as torchvision's os.walk), sorted by
// path; *skipped counts the files of other extensions.
Result<std::vector<std::string>> class_images(const fs::path& dir, int64_t* skipped) {
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec);
  if (ec) return io_error(dir.string() + ": cannot list: " + ec.message());
  std::vector<std::string> files;
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return io_error(dir.string() + ": cannot list: " + ec.message());
    if (is_dir(it->path())) continue;
    if (is_image_name(it->path())) {
      files.push_back(it->path().string());
    } else {
      ++*skipped;
    }
  }
  if (ec) return io_error(dir.string() + ": cannot list: " + ec.message());
  if (files.empty()) {
    return data_error(dir.string() + ": no images (.jpg, .jpeg or .png) in this class directory");
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Every image of split (train/ or val/). The classes are `classes` (train's, sorted); a class
// directory of split that is not among them is an error.
Result<std::vector<Item>> list_split(const fs::path& split, const std::vector<std::string>& classes,
                                     int64_t* skipped) {
  EASEL_ASSIGN_OR_RETURN(const std::vector<std::string> names, class_dirs(split));
  std::vector<Item> items;
  for (const std::string& name : names) {
    const auto at = std::lower_bound(classes.begin(), classes.end(), name);
    if (at == classes.end() || *at != name) {
      return data_error((split / name).string() + ": class '" + name + "' is not among the " +
                        std::to_string(classes.size()) + " classes of " +
                        (split.parent_path() / "train").string());
    }
    const int32_t label = static_cast<int32_t>(at - classes.begin());
    EASEL_ASSIGN_OR_RETURN(const std::vector<std::string> files,
                           class_images(split / name, skipped));
    for (const std::string& f : files)
      items.push_back({f, label});
  }
  if (static_cast<int64_t>(items.size()) > kMaxCount) {
    return data_error(split.string() + ": " + std::to_string(items.size()) +
                      " images, more than 100000000");
  }
  return items;
}

// Reads, decodes and resizes entry i of src into dst[3 * side * side].
Status load_image(const StreamSource& src, int64_t i, int64_t side, uint8_t* dst) {
  try {
    std::vector<uint8_t> file;
    EASEL_RETURN_IF_ERROR(src.read(i, &file));
    RgbImage image;
    EASEL_RETURN_IF_ERROR(decode_image(file.data(), file.size(), src.where(i), side, &image));
    resize_center_crop(image, side, dst);
    return {};
  } catch (const std::bad_alloc&) {
    return unavailable(src.where(i) + ": out of memory while decoding");
  }
}

}  // namespace

Result<Dataset> decode_source(const StreamSource& src, const std::string& where, int64_t side,
                              int64_t classes, const std::string& name, MemKind kind) {
  const int64_t count = src.count();
  const int64_t image_bytes = 3 * side * side;
  // The set and its labels: known before any file is decoded.
  const uint64_t need = static_cast<uint64_t>(count) * static_cast<uint64_t>(image_bytes + 4);
  const MemoryBound mem = available_memory();
  if (need > mem.bytes) {
    return unavailable(where + ": " + std::to_string(count) + " images of 3x" +
                       std::to_string(side) + "x" + std::to_string(side) + " need " +
                       std::to_string(need) + " bytes, more than the " + std::to_string(mem.bytes) +
                       " bytes of memory available (" + mem.source +
                       "): pass a smaller side (:SIDE)");
  }
  Dataset ds;
  ds.name = name;
  ds.count = count;
  ds.channels = 3;
  ds.height = side;
  ds.width = side;
  ds.classes = classes;
  EASEL_ASSIGN_OR_RETURN(ds.pixels,
                         Buffer::allocate(static_cast<size_t>(count * image_bytes), kind));
  ds.labels.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    ds.labels[static_cast<size_t>(i)] = src.entries[static_cast<size_t>(i)].label;
  // The first failure by index among the images tried; the others stop early.
  std::mutex mu;
  int64_t failed_at = count;
  Status failure;
  std::atomic<bool> failed{false};
  uint8_t* pixels = ds.pixels.as<uint8_t>();
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < count; ++i) {
    if (failed.load(std::memory_order_relaxed)) continue;
    Status s = load_image(src, i, side, pixels + i * image_bytes);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (i < failed_at) {
        failed_at = i;
        failure = std::move(s);
      }
      failed.store(true, std::memory_order_relaxed);
    }
  }
  if (!failure.ok()) return failure;
  return ds;
}

namespace {

// An image folder's classes (train/'s subfolders) and both splits' files, checked: the side in
// range, train/ and val/ present; files that are not images are counted and said once.
struct Listing {
  std::vector<std::string> classes;
  std::vector<Item> train, val;
};

Result<Listing> list_folder(const std::string& dir, int64_t side) {
  if (side < 1 || side > kMaxSide)
    return invalid_argument(dir + ": image side " + std::to_string(side) +
                            " is out of range [1, 4096]");
  const fs::path train = fs::path(dir) / "train", val = fs::path(dir) / "val";
  if (!is_dir(train)) return not_found(dir + ": missing train/ (" + kLayout + ")");
  if (!is_dir(val)) return not_found(dir + ": missing val/ (" + kLayout + ")");
  int64_t skipped = 0;
  Listing l;
  EASEL_ASSIGN_OR_RETURN(l.classes, class_dirs(train));
  EASEL_ASSIGN_OR_RETURN(l.train, list_split(train, l.classes, &skipped));
  EASEL_ASSIGN_OR_RETURN(l.val, list_split(val, l.classes, &skipped));
  if (skipped > 0)
    log_info("data", dir + ": skipped " + std::to_string(skipped) +
                         " files that are not .jpg, .jpeg or .png");
  return l;
}

std::shared_ptr<StreamSource> folder_source(const std::vector<Item>& items, bool skip_bad) {
  auto src = std::make_shared<StreamSource>();
  src->skip_bad = skip_bad;
  src->files.reserve(items.size());
  src->entries.reserve(items.size());
  for (const Item& it : items) {
    src->entries.push_back({static_cast<int32_t>(src->files.size()), it.label, 0, -1});
    src->files.push_back(it.path);
  }
  return src;
}

}  // namespace

bool has_image_folder(const std::string& dir) {
  return is_dir(fs::path(dir) / "train") || is_dir(fs::path(dir) / "val");
}

Result<DataSplit> load_image_folder(const std::string& dir, const std::string& name, int64_t side,
                                    MemKind kind) {
  EASEL_ASSIGN_OR_RETURN(const Listing l, list_folder(dir, side));
  const int64_t n = static_cast<int64_t>(l.classes.size());
  const fs::path train = fs::path(dir) / "train", val = fs::path(dir) / "val";
  DataSplit split;
  EASEL_ASSIGN_OR_RETURN(split.train, decode_source(*folder_source(l.train, false), train.string(),
                                                    side, n, name + "/train", kind));
  EASEL_ASSIGN_OR_RETURN(split.test, decode_source(*folder_source(l.val, false), val.string(), side,
                                                   n, name + "/val", kind));
  return split;
}

Result<DataSplit> stream_image_folder(const std::string& dir, const std::string& name, int64_t side,
                                      bool skip_bad) {
  EASEL_ASSIGN_OR_RETURN(const Listing l, list_folder(dir, side));
  const int64_t n = static_cast<int64_t>(l.classes.size());
  DataSplit split;
  split.train = streamed_dataset(folder_source(l.train, skip_bad), name + "/train", side, n);
  split.test = streamed_dataset(folder_source(l.val, skip_bad), name + "/val", side, n);
  return split;
}

}  // namespace easel
