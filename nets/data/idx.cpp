// IDX files (the MNIST format), gzipped or plain, read without trusting the header: every
// dimension is checked against fixed limits and against the bytes that really arrive before
// memory for them is taken.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include "nets/data/dataset.hpp"

namespace easel {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr int64_t kMaxSide = 4096;
constexpr int64_t kMaxCount = 100'000'000;
constexpr int64_t kMaxBytes = int64_t{1} << 34;
constexpr int64_t kClasses = 10;
constexpr size_t kMaxChunk = size_t{16} << 20;  // largest single read and growth step
constexpr size_t kMinChunk = size_t{64} << 10;  // first growth step of a gzip body

std::string hex32(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08" PRIx32, v);
  return b;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// One open IDX file. zlib reads both kinds: it inflates gzip and passes plain files through.
class IdxReader {
 public:
  IdxReader() = default;
  IdxReader(const IdxReader&) = delete;
  IdxReader& operator=(const IdxReader&) = delete;
  ~IdxReader() {
    if (gz_) gzclose(gz_);
  }

  Status open(const std::string& path);
  // Reads the magic and the dimensions that follow it (4-byte big-endian each).
  Status read_header(uint32_t magic, const char* what, std::vector<int64_t>* dims);
  // Reads the `bytes` of data the header claims (described by `claim` for messages) into a
  // new buffer of `kind`, and checks that nothing follows them.
  Result<Buffer> read_data(int64_t bytes, const std::string& claim, MemKind kind);

 private:
  // Reads up to n bytes; fewer only at the end of the data.
  Result<size_t> read_up_to(uint8_t* dst, size_t n);
  Status stream_error();
  Status truncated(const std::string& claim, int64_t got) const {
    return data_error(path_ + ": truncated: header claims " + claim + " but only " +
                      std::to_string(got) + " bytes follow");
  }

  std::string path_;
  gzFile gz_ = nullptr;
  bool gzip_ = false;
  int64_t file_size_ = 0;  // on disk (compressed size for gzip)
  int64_t header_bytes_ = 0;
};

Status IdxReader::open(const std::string& path) {
  path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) return not_found(path + ": no such file");
    return io_error(path + ": cannot open: " + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error(path + ": not a regular file");
  }
  file_size_ = st.st_size;
  uint8_t head[2] = {0, 0};
  const ssize_t n = ::pread(fd, head, 2, 0);
  gzip_ = n == 2 && head[0] == 0x1f && head[1] == 0x8b;  // by content, not by name
  gz_ = gzdopen(fd, "rb");                               // owns fd from here on
  if (!gz_) {
    ::close(fd);
    return io_error(path + ": cannot open: zlib refused the file");
  }
  gzbuffer(gz_, 1 << 17);
  return {};
}

Status IdxReader::stream_error() {
  int err = Z_OK;
  const char* msg = gzerror(gz_, &err);
  if (err == Z_ERRNO) return io_error(path_ + ": read failed: " + std::strerror(errno));
  std::string m = path_ + ": corrupt gzip stream (zlib: " + (msg ? msg : "unknown error") + ")";
  if (err == Z_BUF_ERROR) m += ": the compressed file is cut short";
  return data_error(m);
}

Result<size_t> IdxReader::read_up_to(uint8_t* dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    const unsigned ask = static_cast<unsigned>(std::min(n - got, kMaxChunk));
    const int r = gzread(gz_, dst + got, ask);
    if (r < 0) return stream_error();
    if (r == 0) {
      int err = Z_OK;
      gzerror(gz_, &err);
      if (err != Z_OK) return stream_error();
      break;  // clean end of data
    }
    got += static_cast<size_t>(r);
  }
  return got;
}

Status IdxReader::read_header(uint32_t magic, const char* what, std::vector<int64_t>* dims) {
  const int ndims = static_cast<int>(magic & 0xff);
  header_bytes_ = 4 + 4 * int64_t{ndims};
  uint8_t head[16];
  EASEL_ASSIGN_OR_RETURN(const size_t got, read_up_to(head, static_cast<size_t>(header_bytes_)));
  if (got >= 4 && be32(head) != magic) {
    const uint32_t found = be32(head);
    std::string m = path_ + ": wrong magic " + hex32(found) + " (expected " + hex32(magic) +
                    ", an IDX " + what + " file)";
    if (found == kImagesMagic || found == kLabelsMagic) m += ": images and labels swapped?";
    return data_error(m);
  }
  if (got < static_cast<size_t>(header_bytes_)) {
    return data_error(path_ + ": truncated header: " + std::to_string(got) + " of " +
                      std::to_string(header_bytes_) + " bytes (an IDX " + what +
                      " file starts with a magic and " + std::to_string(ndims) + " dimensions)");
  }
  dims->clear();
  for (int i = 0; i < ndims; ++i)
    dims->push_back(be32(head + 4 + 4 * i));
  return {};
}

Result<Buffer> IdxReader::read_data(int64_t bytes, const std::string& claim, MemKind kind) {
  const size_t want = static_cast<size_t>(bytes);
  Buffer out;
  if (!gzip_) {
    // Plain: the file size bounds the data, so the claim is checked before allocating.
    const int64_t follow = file_size_ - header_bytes_;
    if (follow < bytes) return truncated(claim, follow);
    if (follow > bytes) {
      return data_error(path_ + ": " + std::to_string(follow - bytes) +
                        " bytes of trailing data after the " + claim + " the header claims");
    }
    EASEL_ASSIGN_OR_RETURN(out, Buffer::allocate(want, kind));
    EASEL_ASSIGN_OR_RETURN(const size_t got, read_up_to(out.as<uint8_t>(), want));
    if (got < want) return truncated(claim, static_cast<int64_t>(got));
  } else {
    // Gzip: the inflated size is unknown, so storage grows only as data arrives.
    std::vector<uint8_t> grow;
    size_t got = 0;
    while (got < want) {
      const size_t step = std::clamp(got, kMinChunk, kMaxChunk);
      grow.resize(std::min(want, got + step));
      EASEL_ASSIGN_OR_RETURN(const size_t n, read_up_to(grow.data() + got, grow.size() - got));
      got += n;
      if (got < grow.size()) return truncated(claim, static_cast<int64_t>(got));
    }
    EASEL_ASSIGN_OR_RETURN(out, Buffer::allocate(want, kind));
    if (want > 0) std::memcpy(out.data(), grow.data(), want);
  }
  // Nothing may follow the data (for gzip this also checks the stream's CRC and length).
  uint8_t extra = 0;
  EASEL_ASSIGN_OR_RETURN(const size_t more, read_up_to(&extra, 1));
  if (more != 0) {
    return data_error(path_ + ": trailing data after the " + claim + " the header claims");
  }
  return out;
}

Status absurd(const std::string& path, const std::string& claim, const char* rule) {
  return data_error(path + ": absurd dimensions in header: " + claim + " (" + rule + ")");
}

}  // namespace

Result<Dataset> read_idx(const std::string& images_path, const std::string& labels_path,
                         const std::string& name, MemKind kind) {
  IdxReader images, labels;
  std::vector<int64_t> idims, ldims;
  EASEL_RETURN_IF_ERROR(images.open(images_path));
  EASEL_RETURN_IF_ERROR(images.read_header(kImagesMagic, "images", &idims));
  EASEL_RETURN_IF_ERROR(labels.open(labels_path));
  EASEL_RETURN_IF_ERROR(labels.read_header(kLabelsMagic, "labels", &ldims));

  const int64_t count = idims[0], rows = idims[1], cols = idims[2];
  const std::string iclaim =
      std::to_string(count) + " images of " + std::to_string(rows) + "x" + std::to_string(cols);
  if (count <= 0 || rows <= 0 || cols <= 0) {
    return absurd(images_path, iclaim, "every dimension must be positive");
  }
  if (rows > kMaxSide || cols > kMaxSide) {
    return absurd(images_path, iclaim, "rows and cols must be at most 4096");
  }
  if (count > kMaxCount) return absurd(images_path, iclaim, "at most 100000000 images");
  const int64_t ibytes = count * rows * cols;  // < 2^27 * 2^24, no overflow
  if (ibytes > kMaxBytes) {
    return absurd(images_path, iclaim + " = " + std::to_string(ibytes) + " bytes",
                  "at most 2^34 bytes");
  }
  const int64_t nlabels = ldims[0];
  const std::string lclaim = std::to_string(nlabels) + " labels";
  if (nlabels <= 0 || nlabels > kMaxCount) {
    return absurd(labels_path, lclaim, "between 1 and 100000000 labels");
  }
  if (nlabels != count) {
    return data_error(images_path + " holds " + std::to_string(count) + " images but " +
                      labels_path + " holds " + std::to_string(nlabels) + " labels");
  }

  Dataset ds;
  ds.name = name;
  ds.count = count;
  ds.channels = 1;
  ds.height = rows;
  ds.width = cols;
  ds.classes = kClasses;
  EASEL_ASSIGN_OR_RETURN(
      ds.pixels,
      images.read_data(ibytes, iclaim + " (" + std::to_string(ibytes) + " bytes)", kind));
  EASEL_ASSIGN_OR_RETURN(Buffer lbytes, labels.read_data(nlabels, lclaim, MemKind::dram));
  const uint8_t* l = lbytes.as<uint8_t>();
  for (int64_t i = 0; i < nlabels; ++i) {
    if (l[i] >= kClasses) {
      return data_error(labels_path + ": label " + std::to_string(l[i]) + " at index " +
                        std::to_string(i) + " is out of range [0, " + std::to_string(kClasses) +
                        ")");
    }
  }
  ds.labels.assign(l, l + nlabels);
  return ds;
}

}  // namespace easel
