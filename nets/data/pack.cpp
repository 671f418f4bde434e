// Packing an image folder into tar shards (pack.hpp).
#include "nets/data/pack.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/rng.hpp"
#include "nets/data/image_decode.hpp"
#include "nets/data/resample.hpp"
#include "nets/data/stream_source.hpp"
#include "nets/data/tar_index.hpp"

namespace easel {
namespace {

namespace fs = std::filesystem;

constexpr int kQuality = 90;
constexpr uint64_t kShuffleSeed = 0x9ac4;  // the training images' order in the shards

// One open shard being written.
class ShardWriter {
 public:
  ShardWriter(fs::path dir, std::string prefix, int64_t limit)
      : dir_(std::move(dir)), prefix_(std::move(prefix)), limit_(limit) {}

  // Adds one sample (its members written together, so a shard never splits a sample).
  Status add(const std::string& key, const std::string& ext, const std::vector<uint8_t>& image,
             int32_t label, PackStats* stats) {
    const std::string cls = std::to_string(label) + "\n";
    const int64_t size = 1024 + pad(static_cast<int64_t>(image.size())) + 512;
    if (f_.is_open() && written_ + size > limit_) EASEL_RETURN_IF_ERROR(close(stats));
    if (!f_.is_open()) {
      char name[64];
      std::snprintf(name, sizeof name, "%s-%06d.tar", prefix_.c_str(), index_++);
      path_ = dir_ / name;
      f_.open(path_, std::ios::binary | std::ios::trunc);
      if (!f_) return io_error(path_.string() + ": cannot be written");
      written_ = 0;
    }
    member(key + "." + ext, image.data(), image.size());
    member(key + ".cls", reinterpret_cast<const uint8_t*>(cls.data()), cls.size());
    if (!f_) return io_error(path_.string() + ": write failed");
    return {};
  }

  Status close(PackStats* stats) {
    if (!f_.is_open()) return {};
    static const char zeros[1024] = {};
    f_.write(zeros, sizeof zeros);  // the end-of-archive blocks
    written_ += 1024;
    f_.close();
    if (!f_) return io_error(path_.string() + ": write failed");
    ++stats->shards;
    stats->bytes += written_;
    return {};
  }

 private:
  static int64_t pad(int64_t n) { return (n + 511) / 512 * 512; }
  void member(const std::string& name, const uint8_t* data, size_t n) {
    uint8_t h[512];
    tar_header(name, static_cast<int64_t>(n), h);
    static const char zeros[512] = {};
    f_.write(reinterpret_cast<const char*>(h), 512);
    f_.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n));
    const int64_t padded = pad(static_cast<int64_t>(n));
    f_.write(zeros, static_cast<std::streamsize>(padded - static_cast<int64_t>(n)));
    written_ += 512 + padded;
  }

  fs::path dir_, path_;
  std::string prefix_;
  int64_t limit_ = 0, written_ = 0;
  int index_ = 0;
  std::ofstream f_;
};

// The image shrunk to a longer side of max_side, as a JPEG.
Status shrink(const std::vector<uint8_t>& file, const std::string& where, int64_t max_side,
              std::vector<uint8_t>* out, bool* resized) {
  RgbImage im;
  EASEL_RETURN_IF_ERROR(decode_image(file.data(), file.size(), where, 0, &im));
  *resized = std::max(im.width, im.height) > max_side;
  if (!*resized) return {};
  const int64_t nw =
      im.width >= im.height ? max_side : std::max<int64_t>(1, im.width * max_side / im.height);
  const int64_t nh =
      im.height > im.width ? max_side : std::max<int64_t>(1, im.height * max_side / im.width);
  const std::vector<Taps> tx = box_taps(im.width, 0, static_cast<double>(im.width), nw);
  const std::vector<Taps> ty = box_taps(im.height, 0, static_cast<double>(im.height), nh);
  std::vector<uint8_t> chw(static_cast<size_t>(3 * nw * nh));
  resample_box(im.rgb.data(), im.width, 0, 0, tx, ty, chw.data());
  RgbImage small;
  small.width = nw;
  small.height = nh;
  small.rgb.resize(chw.size());
  for (int64_t p = 0; p < nw * nh; ++p)
    for (int c = 0; c < 3; ++c)
      small.rgb[static_cast<size_t>(p * 3 + c)] = chw[static_cast<size_t>(c * nw * nh + p)];
  return encode_jpeg(small, kQuality, out);
}

Status pack_split(const Dataset& ds, const fs::path& out, const std::string& prefix,
                  const PackOptions& opt, bool shuffle, PackStats* stats) {
  const StreamSource& src = *ds.source;
  ShardWriter w(out, prefix, opt.shard_bytes);
  std::vector<uint8_t> file, small;
  std::vector<int64_t> order(static_cast<size_t>(src.count()));
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int64_t>(i);
  Rng rng(kShuffleSeed);
  for (size_t i = shuffle ? order.size() : 0; i > 1; --i)
    std::swap(order[i - 1], order[static_cast<size_t>(rng.below(i))]);
  for (const int64_t i : order) {
    EASEL_RETURN_IF_ERROR(src.read(i, &file));
    const bool png = file.size() >= 4 && file[0] == 0x89 && file[1] == 'P';
    bool resized = false;
    if (opt.max_side > 0)
      EASEL_RETURN_IF_ERROR(shrink(file, src.where(i), opt.max_side, &small, &resized));
    char key[32];
    std::snprintf(key, sizeof key, "%08lld", static_cast<long long>(i));
    EASEL_RETURN_IF_ERROR(w.add(key, resized ? "jpg" : (png ? "png" : "jpg"),
                                resized ? small : file, ds.labels[static_cast<size_t>(i)], stats));
    ++stats->images;
    stats->resized += resized;
  }
  return w.close(stats);
}

}  // namespace

int64_t parse_byte_size(const std::string& text) {
  int64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  const auto [end, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || end == b || v <= 0) return -1;
  std::string unit(end, e);
  for (char& c : unit)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (unit.empty() || unit == "B") {
    shift = 0;
  } else if (unit == "K" || unit == "KB" || unit == "KIB") {
    shift = 10;
  } else if (unit == "M" || unit == "MB" || unit == "MIB") {
    shift = 20;
  } else if (unit == "G" || unit == "GB" || unit == "GIB") {
    shift = 30;
  } else {
    return -1;
  }
  if (v > (int64_t{1} << (62 - shift))) return -1;
  return v << shift;
}

Status pack_image_folder(const std::string& folder, const std::string& out, const PackOptions& opt,
                         PackStats* stats) {
  EASEL_ASSIGN_OR_RETURN(DataSplit split, stream_image_folder(folder, "pack", 224, false));
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return io_error(out + ": cannot create: " + ec.message());
  EASEL_RETURN_IF_ERROR(pack_split(split.train, out, "train", opt, opt.shuffle, stats));
  return pack_split(split.test, out, "val", opt, false, stats);
}

}  // namespace easel
