// Data set specs (named sets, directories told apart by content, synthetic sets) and the
// per-batch conversion of bytes to floats.
#include "nets/data/dataset.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "engine/span_ops.hpp"
#include "nets/data/stream_source.hpp"

namespace easel {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFashionDir = "/usr/share/datasets/fashion-mnist";
constexpr const char* kMnistDir = "/usr/share/datasets/mnist";
constexpr const char* kSyntheticForm = "synthetic[:N[:CxHxW[:classes]]]";

// Finds `stem` in dir as stem, stem.gz, or with the '-idx' dash written as a dot (the
// "train-images.idx3-ubyte" spelling some mirrors use).
Result<std::string> find_idx(const fs::path& dir, const std::string& stem) {
  std::string dotted = stem;
  if (const size_t p = dotted.find("-idx"); p != std::string::npos) dotted[p] = '.';
  for (const std::string& base : {stem, dotted}) {
    for (const char* ext : {"", ".gz"}) {
      std::error_code ec;
      const fs::path p = dir / (base + ext);
      if (fs::is_regular_file(p, ec)) return p.string();
    }
  }
  return not_found(dir.string() + ": missing " + stem + " (or " + stem + ".gz)");
}

Result<DataSplit> load_idx_dir(const fs::path& dir, const std::string& name, MemKind kind) {
  EASEL_ASSIGN_OR_RETURN(const std::string train_images, find_idx(dir, "train-images-idx3-ubyte"));
  EASEL_ASSIGN_OR_RETURN(const std::string train_labels, find_idx(dir, "train-labels-idx1-ubyte"));
  EASEL_ASSIGN_OR_RETURN(const std::string test_images, find_idx(dir, "t10k-images-idx3-ubyte"));
  EASEL_ASSIGN_OR_RETURN(const std::string test_labels, find_idx(dir, "t10k-labels-idx1-ubyte"));
  DataSplit split;
  EASEL_ASSIGN_OR_RETURN(split.train, read_idx(train_images, train_labels, name + "/train", kind));
  EASEL_ASSIGN_OR_RETURN(split.test, read_idx(test_images, test_labels, name + "/test", kind));
  const auto dims = [](const Dataset& d) {
    return std::to_string(d.channels) + "x" + std::to_string(d.height) + "x" +
           std::to_string(d.width);
  };
  if (dims(split.test) != dims(split.train))
    return data_error(test_images + ": its images are " + dims(split.test) + ", but " +
                      train_images + "'s are " + dims(split.train));
  return split;
}

bool is_dir(const std::string& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// Any of the four IDX files, in any of find_idx's spellings.
bool has_idx(const fs::path& dir) {
  for (const char* stem : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    if (find_idx(dir, stem).ok()) return true;
  return false;
}

// A directory's format, told by what it holds. `side` > 0: the spec gave DIR:SIDE, which only
// an image folder takes.
Result<DataSplit> load_dir(const std::string& spec, const fs::path& dir, int64_t side, MemKind kind,
                           const DataOptions& opt) {
  std::string name = dir.lexically_normal().filename().string();
  if (name.empty()) name = dir.lexically_normal().parent_path().filename().string();
  if (name.empty()) name = dir.string();
  const bool idx = has_idx(dir), cifar = !idx && has_cifar(dir.string());
  if ((idx || cifar) && side > 0) {
    return invalid_argument("data set '" + spec + "': a :SIDE suffix is for image folders, and " +
                            dir.string() + " holds " +
                            (idx ? "IDX files" : "CIFAR binary batches"));
  }
  if (idx) return load_idx_dir(dir, name, kind);
  if (cifar) return load_cifar(dir.string(), name, kind);
  if (has_image_folder(dir.string()) && opt.stream_side > 0) {
    if (side > 0)
      return invalid_argument("data set '" + spec +
                              "': an image folder streamed for "
                              "random-resized-crop takes no :SIDE (the crop's size is the side)");
    return stream_image_folder(dir.string(), name, opt.stream_side, opt.skip_bad);
  }
  if (has_image_folder(dir.string())) {
    return load_image_folder(dir.string(), name, side > 0 ? side : kDefaultImageSide, kind);
  }
  return not_found("data directory " + dir.string() +
                   ": found neither IDX files (train-images-idx3-ubyte[.gz], "
                   "train-labels-idx1-ubyte[.gz], t10k-images-idx3-ubyte[.gz], "
                   "t10k-labels-idx1-ubyte[.gz]), CIFAR binary batches (data_batch_1.bin .. "
                   "data_batch_5.bin and test_batch.bin / train.bin and test.bin) nor an image "
                   "folder (train/CLASS/*.jpg|png and val/CLASS/*)");
}

// Strict positive integer: the whole field, no sign, no spaces.
bool parse_positive(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && *out > 0;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    const size_t p = s.find(sep, start);
    parts.push_back(s.substr(start, p == std::string_view::npos ? p : p - start));
    if (p == std::string_view::npos) return parts;
    start = p + 1;
  }
}

struct SyntheticSpec {
  int64_t n = 2048, c = 1, h = 28, w = 28, classes = 10;
};

Result<SyntheticSpec> parse_synthetic(const std::string& spec) {
  SyntheticSpec s;
  const std::vector<std::string_view> f = split(spec, ':');
  auto bad = [&](const std::string& why) {
    return invalid_argument("data set '" + spec + "': " + why + " (expected " + kSyntheticForm +
                            ", e.g. synthetic:4096:3x32x32:10)");
  };
  if (f.size() > 4) return bad("too many fields");
  if (f.size() > 1 && !parse_positive(f[1], &s.n)) return bad("N must be a positive integer");
  if (f.size() > 2) {
    const std::vector<std::string_view> d = split(f[2], 'x');
    if (d.size() != 3 || !parse_positive(d[0], &s.c) || !parse_positive(d[1], &s.h) ||
        !parse_positive(d[2], &s.w)) {
      return bad("the shape must be CxHxW with positive integers");
    }
  }
  if (f.size() > 3 && !parse_positive(f[3], &s.classes)) {
    return bad("classes must be a positive integer");
  }
  if (s.n > 100'000'000) return bad("N must be at most 100000000");
  if (s.c > 64 || s.h > 4096 || s.w > 4096) return bad("C must be at most 64, H and W 4096");
  if (s.classes < 2 || s.classes > 100'000) return bad("classes must be in [2, 100000]");
  const int64_t chw = s.c * s.h * s.w;
  constexpr int64_t kMaxBytes = int64_t{1} << 32;
  if (s.n * chw > kMaxBytes || s.classes * chw > kMaxBytes) {
    return bad("the set would exceed 4 GiB");
  }
  return s;
}

// Moves ds.pixels into memory of `kind` (make_synthetic builds in dram).
Status place(Dataset* ds, MemKind kind) {
  if (kind == MemKind::dram) return {};
  EASEL_ASSIGN_OR_RETURN(Buffer b, Buffer::allocate(ds->pixels.bytes(), kind));
  if (b.bytes() > 0) std::memcpy(b.data(), ds->pixels.data(), b.bytes());
  ds->pixels = std::move(b);
  return {};
}

// "shards:SPEC[:SIDE]": without SIDE streamed (at opt.stream_side, else kDefaultImageSide);
// with it every image decoded once at SIDE and held, as an image folder's DIR:SIDE is (the same
// resize and crop, the same speed). A SPEC that is a directory keeps its colons.
Result<DataSplit> load_shard_spec(const std::string& spec, MemKind kind, const DataOptions& opt) {
  std::string where = spec.substr(7);
  int64_t side = 0;
  const size_t colon = where.rfind(':');
  const std::string_view tail =
      colon == std::string::npos ? std::string_view() : std::string_view(where).substr(colon + 1);
  if (colon > 0 && !tail.empty() && !is_dir(where) &&
      std::all_of(tail.begin(), tail.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (!parse_positive(tail, &side) || side > 4096)
      return invalid_argument("data set '" + spec +
                              "': the image side after ':' must be an integer in [1, 4096]");
    where.resize(colon);
  }
  if (side == 0)
    return load_shards(where, opt.stream_side > 0 ? opt.stream_side : kDefaultImageSide,
                       opt.skip_bad);
  if (opt.stream_side > 0)
    return invalid_argument("data set '" + spec +
                            "': shards streamed for random-resized-crop take no :SIDE (the "
                            "crop's size is the side)");
  EASEL_ASSIGN_OR_RETURN(DataSplit split, load_shards(where, side, opt.skip_bad));
  for (Dataset* ds : {&split.train, &split.test}) {
    EASEL_ASSIGN_OR_RETURN(Dataset held, decode_source(*ds->source, "shards:" + where, side,
                                                       ds->classes, ds->name, kind));
    *ds = std::move(held);
  }
  return split;
}

// "CxHxW" after a named set's colon: C is 1 or 3, H and W at least the set's 28 and at most 1024.
Result<std::array<int64_t, 3>> parse_reshape(const std::string& spec, std::string_view shape) {
  const std::vector<std::string_view> d = split(shape, 'x');
  std::array<int64_t, 3> chw{};
  if (d.size() != 3 || !parse_positive(d[0], &chw[0]) || !parse_positive(d[1], &chw[1]) ||
      !parse_positive(d[2], &chw[2]) || (chw[0] != 1 && chw[0] != 3) || chw[1] < 28 ||
      chw[2] < 28 || chw[1] > 1024 || chw[2] > 1024)
    return invalid_argument("data set '" + spec +
                            "': the shape after ':' must be CxHxW with C 1 or 3 and H, W in "
                            "[28, 1024] (the images are padded, never cut), e.g. 3x32x32");
  return chw;
}

// The grey images of `ds`, each centred on a black C x H x W canvas, its one channel repeated
// C times (Fashion-MNIST at CIFAR's 3x32x32, for nets built on that shape).
Status reshape_grey(Dataset* ds, const std::array<int64_t, 3>& chw, MemKind kind) {
  const auto [c, h, w] = chw;
  const int64_t top = (h - ds->height) / 2, left = (w - ds->width) / 2;
  EASEL_ASSIGN_OR_RETURN(Buffer b, Buffer::allocate(ds->count * c * h * w, kind));
  uint8_t* out = b.as<uint8_t>();
  std::memset(out, 0, b.bytes());
  for (int64_t i = 0; i < ds->count; ++i) {
    const uint8_t* src = ds->image(i);
    for (int64_t ch = 0; ch < c; ++ch) {
      uint8_t* plane = out + (i * c + ch) * h * w;
      for (int64_t y = 0; y < ds->height; ++y)
        std::memcpy(plane + (top + y) * w + left, src + y * ds->width, ds->width);
    }
  }
  ds->pixels = std::move(b);
  ds->channels = c;
  ds->height = h;
  ds->width = w;
  return {};
}

// fashion-mnist or mnist, optionally ":CxHxW" (reshape_grey).
Result<DataSplit> load_named_idx(const std::string& spec, MemKind kind) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  std::array<int64_t, 3> chw{};
  if (colon != std::string::npos) {
    EASEL_ASSIGN_OR_RETURN(chw, parse_reshape(spec, std::string_view(spec).substr(colon + 1)));
  }
  const bool fashion = name == "fashion-mnist";
  const char* dir = fashion ? kFashionDir : kMnistDir;
  if (!is_dir(dir)) {
    if (fashion)
      return not_found("data set '" + spec + "': " + dir +
                       " not found: apt-get install dataset-fashion-mnist");
    return not_found("data set '" + spec + "': " + dir +
                     " not found (no Debian package ships MNIST): download it and pass the "
                     "directory holding train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                     "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (each may be .gz)");
  }
  EASEL_ASSIGN_OR_RETURN(DataSplit split, load_idx_dir(dir, name, kind));
  if (colon == std::string::npos) return split;
  for (Dataset* ds : {&split.train, &split.test}) {
    if (ds->channels != 1 || ds->height > chw[1] || ds->width > chw[2])
      return invalid_argument("data set '" + spec + "': its images are " +
                              std::to_string(ds->channels) + "x" + std::to_string(ds->height) +
                              "x" + std::to_string(ds->width) + ", not grey within the shape");
    EASEL_RETURN_IF_ERROR(reshape_grey(ds, chw, kind));
  }
  return split;
}

}  // namespace

Dataset make_synthetic(int64_t count, int64_t c, int64_t h, int64_t w, int64_t classes,
                       uint64_t seed, const std::string& name, uint64_t sample_stream) {
  EASEL_CHECK(count > 0 && c > 0 && h > 0 && w > 0 && classes > 0);
  const int64_t chw = c * h * w;
  // Simulated with injected compute (tools/simulate --compute model, engine/span_ops.hpp): no
  // pixel's value is used, so only the labels are drawn. Filling the prototypes and the pixels
  // (googlenet's synthetic:256:3x224x224:1000: 150 MB of prototypes and 48 MB of samples per
  // rank, in pages that all ranks share) was most of each rank's setup.
  const bool fill = !values_ignored();
  // One random prototype image per class, the same for every sample stream of this seed.
  std::vector<uint8_t> proto(fill ? static_cast<size_t>(classes * chw) : 0);
  Rng proto_rng(seed);
  for (size_t i = 0; i < proto.size(); i += 8) {
    const uint64_t r = proto_rng.next_u64();
    for (size_t k = 0; k < 8 && i + k < proto.size(); ++k)
      proto[i + k] = (r >> (8 * k)) & 0xff;
  }
  Dataset ds;
  ds.name = name;
  ds.count = count;
  ds.channels = c;
  ds.height = h;
  ds.width = w;
  ds.classes = classes;
  auto pixels = Buffer::allocate(static_cast<size_t>(count * chw), MemKind::dram);
  EASEL_CHECK_MSG(pixels.ok(), pixels.status().message().c_str());
  ds.pixels = std::move(pixels).value();
  ds.labels.resize(static_cast<size_t>(count));
  // Samples: a random class's prototype plus triangular noise in [-127, 127] (standard
  // deviation about 52, half that of the pixel-wise difference between two prototypes).
  Rng rng = Rng::stream(seed, 0x5a3b1e00 + sample_stream);
  uint8_t* dst = ds.pixels.as<uint8_t>();
  for (int64_t i = 0; i < count; ++i) {
    const int32_t label = static_cast<int32_t>(rng.below(static_cast<uint64_t>(classes)));
    ds.labels[static_cast<size_t>(i)] = label;
    if (!fill) continue;
    const uint8_t* p = proto.data() + label * chw;
    uint8_t* d = dst + i * chw;
    for (int64_t j = 0; j < chw; j += 4) {
      const uint64_t r = rng.next_u64();
      for (int64_t k = 0; k < 4 && j + k < chw; ++k) {
        const int a = static_cast<int>((r >> (16 * k)) & 0xff);
        const int b = static_cast<int>((r >> (16 * k + 8)) & 0xff);
        const int v = p[j + k] + (a + b - 255) / 2;
        d[j + k] = static_cast<uint8_t>(std::clamp(v, 0, 255));
      }
    }
  }
  return ds;
}

Result<DataSplit> load_data(const std::string& spec, MemKind kind, uint64_t seed) {
  return load_data(spec, kind, seed, DataOptions());
}

Result<DataSplit> load_data(const std::string& spec, MemKind kind, uint64_t seed,
                            const DataOptions& opt) {
  if (spec.starts_with("shards:")) return load_shard_spec(spec, kind, opt);
  if (spec == "fashion-mnist" || spec.starts_with("fashion-mnist:") || spec == "mnist" ||
      spec.starts_with("mnist:"))
    return load_named_idx(spec, kind);
  if (spec == "synthetic" || spec.starts_with("synthetic:")) {
    EASEL_ASSIGN_OR_RETURN(const SyntheticSpec s, parse_synthetic(spec));
    DataSplit split;
    split.train = make_synthetic(s.n, s.c, s.h, s.w, s.classes, seed, "synthetic/train", 0);
    split.test = make_synthetic(std::max<int64_t>(1, s.n / 4), s.c, s.h, s.w, s.classes, seed,
                                "synthetic/test", 1);
    EASEL_RETURN_IF_ERROR(place(&split.train, kind));
    EASEL_RETURN_IF_ERROR(place(&split.test, kind));
    return split;
  }
  if (is_dir(spec)) return load_dir(spec, spec, 0, kind, opt);
  // DIR:SIDE, an image folder's images resized to SIDE x SIDE.
  if (const size_t colon = spec.rfind(':');
      colon != std::string::npos && colon > 0 && is_dir(spec.substr(0, colon))) {
    int64_t side = 0;
    if (!parse_positive(std::string_view(spec).substr(colon + 1), &side) || side > 4096) {
      return invalid_argument("data set '" + spec +
                              "': the image side after ':' must be an integer in [1, 4096]");
    }
    return load_dir(spec, spec.substr(0, colon), side, kind, opt);
  }
  std::error_code ec;
  if (fs::exists(spec, ec)) {
    return invalid_argument("data set '" + spec +
                            "' is a file: pass the directory holding the data set's files");
  }
  if (spec.find('/') != std::string::npos) {
    return not_found("data set directory '" + spec + "' does not exist");
  }
  return invalid_argument("unknown data set '" + spec +
                          "': expected fashion-mnist, mnist (either "
                          "may take :CxHxW, e.g. fashion-mnist:3x32x32), " +
                          kSyntheticForm +
                          ", or a directory (IDX files, CIFAR binary batches or an image "
                          "folder; DIR:SIDE for an image folder's side)");
}

void gather_batch(const Dataset& ds, const int64_t* idx, int64_t n, Layout layout, float* images,
                  int32_t* labels) {
  if (ds.source) {  // streamed: each image decoded now, the centre box
    gather_streamed(ds, idx, n, layout, images, labels, Augment(), nullptr);
    return;
  }
  const int64_t c = ds.channels, hw = ds.height * ds.width, chw = c * hw;
  const float scale = kPixelScale;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = idx[i];
    EASEL_CHECK(k >= 0 && k < ds.count);
    const uint8_t* __restrict src = ds.image(k);
    float* __restrict dst = images + i * chw;
    labels[i] = ds.labels[static_cast<size_t>(k)];
    if (layout == Layout::nchw || c == 1) {
#pragma omp simd
      for (int64_t j = 0; j < chw; ++j)
        dst[j] = static_cast<float>(src[j]) * scale;
    } else {
      // nhwc: pixel p's channels are adjacent; the source is channel-major.
      for (int64_t ch = 0; ch < c; ++ch) {
        const uint8_t* __restrict s = src + ch * hw;
#pragma omp simd
        for (int64_t p = 0; p < hw; ++p)
          dst[p * c + ch] = static_cast<float>(s[p]) * scale;
      }
    }
  }
}

Result<Dataset> keep_shards(const Dataset& ds, int first, int count, int shards, MemKind kind) {
  if (shards < 1 || first < 0 || count < 1 || first + count > shards)
    return invalid_argument("keep_shards: shards " + std::to_string(first) + ".." +
                            std::to_string(first + count - 1) + " of " + std::to_string(shards));
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < ds.count; ++i) {
    const int64_t s = i % shards;
    if (s >= first && s < first + count) keep.push_back(i);
  }
  Dataset out;
  out.name = ds.name + " (shards " + std::to_string(first) + "-" +
             std::to_string(first + count - 1) + " of " + std::to_string(shards) + ")";
  out.count = static_cast<int64_t>(keep.size());
  out.channels = ds.channels;
  out.height = ds.height;
  out.width = ds.width;
  out.classes = ds.classes;
  if (ds.source) {  // streamed: the kept entries of the list
    std::shared_ptr<const StreamSource> src = ds.source->subset(keep);
    Dataset streamed = streamed_dataset(std::move(src), out.name, ds.height, ds.classes);
    return streamed;
  }
  const int64_t bytes = ds.image_bytes();
  EASEL_ASSIGN_OR_RETURN(out.pixels,
                         Buffer::allocate(static_cast<size_t>(out.count * bytes), kind));
  out.labels.resize(keep.size());
  for (size_t j = 0; j < keep.size(); ++j) {
    std::memcpy(out.pixels.as<uint8_t>() + static_cast<int64_t>(j) * bytes, ds.image(keep[j]),
                static_cast<size_t>(bytes));
    out.labels[j] = ds.labels[static_cast<size_t>(keep[j])];
  }
  return out;
}

}  // namespace easel
