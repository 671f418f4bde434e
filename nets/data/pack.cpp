// Packing an image folder into tar shards (pack.hpp).
#include "nets/data/pack.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>
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
    const int64_t size = sample_size(static_cast<int64_t>(image.size()));
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

  // A sample's bytes in a shard: the image's header and padded data, the .cls's header and block.
  static int64_t sample_size(int64_t image_bytes) { return 1024 + pad(image_bytes) + 512; }

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

// Image i's bytes in a shard, from its file's size (read errors are left to the pack).
int64_t sample_bytes(const StreamSource& src, int64_t i) {
  const StreamSource::Entry& e = src.entries[static_cast<size_t>(i)];
  std::error_code ec;
  const auto size =
      e.size >= 0 ? e.size
                  : static_cast<int64_t>(fs::file_size(src.files[static_cast<size_t>(e.file)], ec));
  return ShardWriter::sample_size(ec ? 0 : size);
}

// opt.groups > 0: the samples of each training shard, a multiple of opt.groups shards of about
// opt.shard_bytes each, any two within one sample of each other, the larger ones first (so that
// the groups' totals differ by at most one too). Empty for opt.groups == 0.
Result<std::vector<int64_t>> even_shard_sizes(const StreamSource& src, const PackOptions& opt) {
  if (opt.groups <= 0) return std::vector<int64_t>();
  const int64_t count = src.count();
  if (count < opt.groups)
    return invalid_argument("--shards-per-group: " + std::to_string(opt.groups) +
                            " groups, but the folder has only " + std::to_string(count) +
                            " training images (each group needs a shard)");
  int64_t bytes = 0;
  for (int64_t i = 0; i < count; ++i)
    bytes += sample_bytes(src, i);
  const int64_t fewest = (bytes + opt.shard_bytes - 1) / opt.shard_bytes;  // of shard_bytes
  const int64_t per_group = (fewest + opt.groups - 1) / opt.groups;
  const int64_t shards = opt.groups * std::clamp<int64_t>(per_group, 1, count / opt.groups);
  std::vector<int64_t> sizes(static_cast<size_t>(shards), count / shards);
  for (int64_t s = 0; s < count % shards; ++s)
    ++sizes[static_cast<size_t>(s)];
  return sizes;
}

// One split into shards `prefix`-NNNNNN.tar in out: closed at shard_bytes, or after sizes[s]
// samples when sizes is given.
Status pack_split(const Dataset& ds, const fs::path& out, const std::string& prefix,
                  const PackOptions& opt, bool shuffle, const std::vector<int64_t>& sizes,
                  PackStats* stats) {
  const StreamSource& src = *ds.source;
  ShardWriter w(out, prefix, sizes.empty() ? opt.shard_bytes : std::numeric_limits<int64_t>::max());
  std::vector<uint8_t> file, small;
  std::vector<int64_t> order(static_cast<size_t>(src.count()));
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int64_t>(i);
  Rng rng(kShuffleSeed);
  for (size_t i = shuffle ? order.size() : 0; i > 1; --i)
    std::swap(order[i - 1], order[static_cast<size_t>(rng.below(i))]);
  size_t shard = 0;
  int64_t in_shard = 0;
  for (const int64_t i : order) {
    if (!sizes.empty() && in_shard == sizes[shard]) {
      EASEL_RETURN_IF_ERROR(w.close(stats));
      ++shard;
      in_shard = 0;
    }
    ++in_shard;
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

// A name an earlier pack wrote into its out: train-NNNNNN.tar or val-NNNNNN.tar.
bool packed_name(std::string_view name) {
  for (const std::string_view prefix : {"train-", "val-"}) {
    if (!name.starts_with(prefix) || !name.ends_with(".tar")) continue;
    const std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - 4);
    if (digits.size() >= 6 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return true;
  }
  return false;
}

// What out holds before a pack: nothing (or it does not exist), or, with overwrite, only an
// earlier pack's files, which are returned (sorted) to be replaced. Anything else is refused in
// one line naming --out and the first such file.
Result<std::vector<fs::path>> earlier_pack(const fs::path& out, bool overwrite) {
  std::error_code ec;
  if (!fs::exists(out, ec)) return std::vector<fs::path>();
  if (!fs::is_directory(out, ec))
    return invalid_argument("--out: " + out.string() + " exists and is not a directory");
  std::vector<fs::path> ours, others;
  for (fs::directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool mine =
        name == kPackTempDir ? it->is_directory(ec) : packed_name(name) && it->is_regular_file(ec);
    (mine ? ours : others).push_back(it->path());
  }
  if (ec) return io_error("--out: " + out.string() + ": cannot list: " + ec.message());
  std::sort(ours.begin(), ours.end());
  std::sort(others.begin(), others.end());
  if (!others.empty())
    return invalid_argument(
        "--out: " + out.string() + " holds " + others[0].string() +
        (overwrite ? ", which easel data pack did not write (--overwrite replaces only "
                     "train-NNNNNN.tar and val-NNNNNN.tar): give a new or empty directory"
                   : ": give a new or empty directory"));
  if (!ours.empty() && !overwrite)
    return invalid_argument("--out: " + out.string() + " already holds " +
                            std::to_string(ours.size()) + " files of an earlier pack (" +
                            ours[0].string() +
                            "): give --overwrite to replace them, or a new directory");
  return ours;
}

// The new shards moved from tmp into out, the earlier pack's files removed first.
Status swap_in(const fs::path& tmp, const fs::path& out, const std::vector<fs::path>& earlier) {
  std::error_code ec;
  for (const fs::path& p : earlier) {
    if (p.filename() == kPackTempDir) continue;  // tmp itself, already emptied
    if (!fs::remove(p, ec) || ec) return io_error(p.string() + ": cannot remove: " + ec.message());
  }
  for (fs::directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
    fs::rename(it->path(), out / it->path().filename(), ec);
    if (ec) return io_error(it->path().string() + ": cannot move into " + out.string());
  }
  if (!ec) fs::remove(tmp, ec);
  return ec ? io_error(tmp.string() + ": " + ec.message()) : Status();
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
  EASEL_ASSIGN_OR_RETURN(const std::vector<fs::path> earlier, earlier_pack(out, opt.overwrite));
  EASEL_ASSIGN_OR_RETURN(const std::vector<int64_t> sizes,
                         even_shard_sizes(*split.train.source, opt));
  // The outermost folder of out's path that does not exist yet: a failed pack removes it.
  std::error_code ec;
  fs::path made;
  for (fs::path p = out; !p.empty() && !fs::exists(p, ec) && !ec; p = p.parent_path())
    made = p;
  const fs::path tmp = fs::path(out) / kPackTempDir;
  fs::remove_all(tmp, ec);  // a killed pack's (earlier_pack let it through: --overwrite)
  if (fs::create_directories(tmp, ec); ec)
    return io_error(out + ": cannot create: " + ec.message());
  Status st = pack_split(split.train, tmp, "train", opt, opt.shuffle, sizes, stats);
  if (st.ok()) st = pack_split(split.test, tmp, "val", opt, false, {}, stats);
  if (!st.ok()) {  // out as it was: the new shards gone, and the folders made for them
    fs::remove_all(made.empty() ? tmp : made, ec);
    return st;
  }
  stats->replaced = static_cast<int64_t>(earlier.size());
  return swap_in(tmp, out, earlier);  // on failure tmp stays, for --overwrite to clear
}

}  // namespace easel
