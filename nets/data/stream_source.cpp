// Streamed data sets (stream_source.hpp): reading an entry, choosing its box, and the batch
// conversion with the bad-image policy.
#include "nets/data/stream_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <set>

#include "engine/log.hpp"
#include "nets/data/crop.hpp"

namespace easel {
namespace {

constexpr int64_t kMaxFileBytes = int64_t{1} << 30;  // one image
constexpr int kNamedSkips = 10;                      // bad images named in the log

// Distinct bad images skipped (by where()).
std::mutex g_skip_mu;
std::set<std::string> g_skipped;  // guarded by g_skip_mu

Status pread_all(int fd, uint8_t* dst, size_t n, int64_t offset, const std::string& where) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r =
        ::pread(fd, dst + got, n - got, static_cast<off_t>(offset) + static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return io_error(where + ": read failed: " + std::strerror(errno));
    if (r == 0) return data_error(where + ": the file ends early (truncated)");
    got += static_cast<size_t>(r);
  }
  return {};
}

}  // namespace

std::string StreamSource::where(int64_t i) const {
  const Entry& e = entries[static_cast<size_t>(i)];
  const std::string& f = files[static_cast<size_t>(e.file)];
  if (members.empty()) return f;
  std::string m;  // as shards.cpp shows a member name: control and non-ASCII bytes as \xNN
  for (const char ch : members[static_cast<size_t>(i)]) {
    const auto c = static_cast<unsigned char>(ch);
    char b[8];
    std::snprintf(b, sizeof b, "\\x%02x", c);
    m += (c < 0x20 || c >= 0x7f) ? std::string(b) : std::string(1, ch);
  }
  return f + ": member " + m;
}

Status StreamSource::read(int64_t i, std::vector<uint8_t>* bytes) const {
  EASEL_CHECK(i >= 0 && i < count());
  const Entry& e = entries[static_cast<size_t>(i)];
  const std::string& path = files[static_cast<size_t>(e.file)];
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(where(i) + ": cannot open: " + std::strerror(errno));
  Status s;
  int64_t size = e.size;
  if (size < 0) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      s = io_error(where(i) + ": cannot open: not a regular file");
    } else {
      size = st.st_size;
    }
  }
  if (s.ok() && size > kMaxFileBytes)
    s = data_error(where(i) + ": " + std::to_string(size) + " bytes, more than 1 GiB");
  if (s.ok()) {
    bytes->resize(static_cast<size_t>(size));
    s = pread_all(fd, bytes->data(), bytes->size(), e.offset, where(i));
  }
  ::close(fd);
  return s;
}

std::shared_ptr<StreamSource> StreamSource::subset(const std::vector<int64_t>& keep) const {
  auto out = std::make_shared<StreamSource>();
  out->files = files;
  out->skip_bad = skip_bad;
  for (int64_t k : keep) {
    out->entries.push_back(entries[static_cast<size_t>(k)]);
    if (!members.empty()) out->members.push_back(members[static_cast<size_t>(k)]);
  }
  return out;
}

Dataset streamed_dataset(std::shared_ptr<const StreamSource> src, const std::string& name,
                         int64_t side, int64_t classes) {
  Dataset ds;
  ds.name = name;
  ds.count = src->count();
  ds.channels = 3;
  ds.height = ds.width = side;
  ds.classes = classes;
  ds.labels.reserve(src->entries.size());
  for (const StreamSource::Entry& e : src->entries)
    ds.labels.push_back(e.label);
  ds.source = std::move(src);
  return ds;
}

ImageBox center_box(int64_t width, int64_t height, int64_t resize, int64_t side) {
  // torchvision's Resize(resize): the shorter side becomes resize, the longer
  // int(resize * long / short); CenterCrop(side): offsets int(round((resized - side) / 2.0)).
  int64_t rw = resize, rh = resize;
  if (width < height) rh = resize * height / width;
  if (height < width) rw = resize * width / height;
  const auto offset = [side](int64_t resized) {
    return std::nearbyint(static_cast<double>(resized - side) / 2.0);
  };
  const double fx = static_cast<double>(width) / static_cast<double>(rw);
  const double fy = static_cast<double>(height) / static_cast<double>(rh);
  return {offset(rw) * fx, offset(rh) * fy, static_cast<double>(side) * fx,
          static_cast<double>(side) * fy};
}

Status load_streamed(const StreamSource& src, int64_t i, const Augment& a, const AugmentDraw* draw,
                     int64_t side, uint8_t* dst) {
  thread_local std::vector<uint8_t> file;
  try {
    EASEL_RETURN_IF_ERROR(src.read(i, &file));
    BoxDecode how;
    how.side = side;
    if (a.resized_crop > 0 && draw != nullptr) {
      const uint64_t key = draw->key;
      how.choose = [key](int64_t w, int64_t h) {
        RngCropDraws draws(key);
        const CropWindow c = random_resized_crop(w, h, draws);
        return ImageBox{static_cast<double>(c.left), static_cast<double>(c.top),
                        static_cast<double>(c.width), static_cast<double>(c.height)};
      };
    } else {
      const int64_t resize = a.resized_crop > 0 ? a.eval_resize() : (side * 256 + 112) / 224;
      how.choose = [resize, side](int64_t w, int64_t h) { return center_box(w, h, resize, side); };
    }
    Status s = decode_box(file.data(), file.size(), src.where(i), how, dst);
    if (file.capacity() > (size_t{64} << 20)) std::vector<uint8_t>().swap(file);
    return s;
  } catch (const std::bad_alloc&) {
    return unavailable(src.where(i) + ": out of memory while decoding");
  }
}

namespace {

// Entry idx of ds loaded into bytes (chw); a bad one replaced by the next good entry when
// src.skip_bad, else its one line on stderr and exit code 2 (gather_streamed's contract).
// Returns the entry loaded (whose label the image carries).
int64_t load_or_skip(const Dataset& ds, int64_t k, const Augment& a, const AugmentDraw* d,
                     uint8_t* bytes) {
  const StreamSource& src = *ds.source;
  EASEL_CHECK(k >= 0 && k < ds.count);
  Status s = load_streamed(src, k, a, d, ds.height, bytes);
  for (int64_t tries = 1; !s.ok(); ++tries) {
    if (!src.skip_bad || tries > std::min<int64_t>(ds.count, 64)) {
      std::fprintf(stderr, "easel: %s%s\n", s.message().c_str(),
                   src.skip_bad ? " (and every image after it tried in its place)"
                                : " (--skip-bad-images skips bad images)");
      std::fflush(stderr);
      std::_Exit(2);
    }
    {
      std::lock_guard<std::mutex> lock(g_skip_mu);
      if (g_skipped.insert(src.where(k)).second && g_skipped.size() <= kNamedSkips)
        log_warn("data", "skipped a bad image: " + s.message() +
                             (g_skipped.size() == kNamedSkips ? " (later ones not named)" : ""));
    }
    k = (k + 1) % ds.count;
    s = load_streamed(src, k, a, d, ds.height, bytes);
  }
  return k;
}

// Each channel's float = byte * scale + shift: (v / 255 - mean) / std, or v * kPixelScale.
void scale_shift(const Augment& a, float* scale, float* shift) {
  for (int c = 0; c < 3; ++c) {
    const size_t m = a.mean.size() == 1 ? 0 : static_cast<size_t>(c);
    scale[c] = a.normalizes() ? 1.f / (255.f * a.std[m]) : kPixelScale;
    shift[c] = a.normalizes() ? -a.mean[m] / a.std[m] : 0.f;
  }
}

// Sample i of a batch: entry idx[i] (or what load_or_skip takes in its place) decoded into
// bytes [3, side, side], its label into labels[i]; returns whether its draw flips it.
bool load_sample(const Dataset& ds, const int64_t* idx, int64_t i, const Augment& a,
                 const AugmentDraw* draws, uint8_t* bytes, int32_t* labels) {
  const AugmentDraw* d = draws != nullptr ? &draws[i] : nullptr;
  labels[i] = ds.labels[static_cast<size_t>(load_or_skip(ds, idx[i], a, d, bytes))];
  return d != nullptr && d->flip;
}

// The thread's buffer of n bytes for one decoded sample (no fresh allocation per batch).
uint8_t* sample_bytes(int64_t n) {
  thread_local std::vector<uint8_t> bytes;
  bytes.resize(static_cast<size_t>(n));
  return bytes.data();
}

}  // namespace

std::vector<float> streamed_pixel_table(const Augment& a) {
  float scale[3], shift[3];
  scale_shift(a, scale, shift);
  std::vector<float> t(3 * 256);
  for (int c = 0; c < 3; ++c) {
    const float k = scale[c], b = shift[c];
    for (int v = 0; v < 256; ++v)  // gather_streamed's expression (contracted alike)
      t[static_cast<size_t>(c * 256 + v)] = static_cast<float>(static_cast<uint8_t>(v)) * k + b;
  }
  return t;
}

void gather_streamed_bytes(const Dataset& ds, const int64_t* idx, int64_t n, Layout layout,
                           uint8_t* out, int32_t* labels, const Augment& a,
                           const AugmentDraw* draws) {
  const int64_t side = ds.height, hw = side * side, chw = 3 * hw;
  uint8_t* bytes = sample_bytes(chw);
  const bool nhwc = layout == Layout::nhwc;
  for (int64_t i = 0; i < n; ++i) {
    const bool flip = load_sample(ds, idx, i, a, draws, bytes, labels);
    uint8_t* dst = out + i * chw;
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < side; ++y)
        for (int64_t x = 0; x < side; ++x)
          dst[nhwc ? (y * side + x) * 3 + c : c * hw + y * side + x] =
              bytes[c * hw + y * side + (flip ? side - 1 - x : x)];
  }
}

void gather_streamed(const Dataset& ds, const int64_t* idx, int64_t n, Layout layout, float* images,
                     int32_t* labels, const Augment& a, const AugmentDraw* draws) {
  const int64_t side = ds.height, hw = side * side, chw = 3 * hw;
  float scale[3], shift[3];
  scale_shift(a, scale, shift);
  thread_local std::vector<float> rows;
  rows.resize(static_cast<size_t>(3 * side));
  uint8_t* bytes = sample_bytes(chw);
  const bool nhwc = layout == Layout::nhwc;
  for (int64_t i = 0; i < n; ++i) {
    const bool flip = load_sample(ds, idx, i, a, draws, bytes, labels);
    float* __restrict dst = images + i * chw;
    const uint8_t* __restrict src = bytes;
    for (int64_t y = 0; y < side; ++y) {
      for (int64_t c = 0; c < 3; ++c) {
        const uint8_t* __restrict s = src + c * hw + y * side;
        float* __restrict o = nhwc ? rows.data() + c * side : dst + c * hw + y * side;
        const float k = scale[c], b = shift[c];
        if (flip) {
#pragma omp simd
          for (int64_t x = 0; x < side; ++x)
            o[x] = static_cast<float>(s[side - 1 - x]) * k + b;
        } else {
#pragma omp simd
          for (int64_t x = 0; x < side; ++x)
            o[x] = static_cast<float>(s[x]) * k + b;
        }
      }
      if (nhwc) {  // interleave the row's three channels
        float* __restrict o = dst + y * side * 3;
        const float* __restrict r = rows.data();
        for (int64_t x = 0; x < side; ++x) {
          o[3 * x] = r[x];
          o[3 * x + 1] = r[side + x];
          o[3 * x + 2] = r[2 * side + x];
        }
      }
    }
  }
}

int64_t skipped_images() {
  std::lock_guard<std::mutex> lock(g_skip_mu);
  return static_cast<int64_t>(g_skipped.size());
}

}  // namespace easel
