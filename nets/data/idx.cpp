// IDX files (the MNIST format), gzipped or plain, read without trusting the header: every
// dimension is checked against fixed limits, against what the file can hold and against the
// memory available before memory for them is taken.
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include "engine/limits.hpp"
#include "nets/data/dataset.hpp"
#include "nets/data/file_io.hpp"

namespace easel {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr int64_t kMaxSide = 4096;
constexpr int64_t kMaxCount = 100'000'000;
constexpr int64_t kMaxBytes = int64_t{1} << 34;
constexpr int64_t kClasses = 10;
constexpr size_t kMaxChunk = size_t{16} << 20;  // largest single read or inflate step
constexpr size_t kMinChunk = size_t{64} << 10;  // scratch for counting what a file holds
constexpr int64_t kInChunk = int64_t{1} << 20;  // compressed input read at a time
// Deflate's largest ratio (zlib's FAQ: 1032:1), so a gzip of n bytes inflates to at most
// 1032 n bytes: a claim beyond that is truncated for sure.
constexpr int64_t kMaxRatio = 1032;

std::string hex32(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08" PRIx32, v);
  return b;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// One open IDX file, plain or gzip (told apart by content). Gzip is inflated with zlib's raw
// stream interface, not gzread, so that every compressed byte is accounted for: the data is
// inflated once, straight into its final buffer; a stream that ends short, inflates past the
// claim, is cut short or is followed by anything but another gzip member is refused.
class IdxReader {
 public:
  IdxReader() = default;
  IdxReader(const IdxReader&) = delete;
  IdxReader& operator=(const IdxReader&) = delete;
  ~IdxReader() {
    if (z_ready_) inflateEnd(&z_);
    if (fd_ >= 0) ::close(fd_);
  }

  Status open(const std::string& path);
  // Reads the magic and the dimensions that follow it (4-byte big-endian each).
  Status read_header(uint32_t magic, const char* what, std::vector<int64_t>* dims);
  // Reads the `bytes` of data the header claims (described by `claim` for messages) into a
  // new buffer of `kind`, and checks that nothing follows them. Before allocating: the claim
  // must fit in what the file can hold (its size; for gzip, deflate's largest ratio) and in
  // the memory available to the process (engine/limits.hpp).
  Result<Buffer> read_data(int64_t bytes, const std::string& claim, MemKind kind);

 private:
  // Reads up to n bytes; fewer only at the end of the data.
  Result<size_t> read_up_to(uint8_t* dst, size_t n);
  Result<size_t> read_plain(uint8_t* dst, size_t n);
  Result<size_t> inflate_up_to(uint8_t* dst, size_t n);
  // After a gzip member's end: true when another member follows, false at the end of the file.
  Result<bool> next_member();
  Status refill();
  // The bytes of data left (read and dropped): what a claim the file cannot hold meets.
  Result<int64_t> count_rest();
  Status zlib_error(int r) const;
  Status truncated(const std::string& claim, int64_t got) const {
    return data_error(path_ + ": truncated: header claims " + claim + " but only " +
                      std::to_string(got) + " bytes follow");
  }

  std::string path_;
  int fd_ = -1;
  bool gzip_ = false;
  int64_t file_size_ = 0;  // on disk (compressed size for gzip)
  int64_t file_read_ = 0;  // bytes of the file read so far
  int64_t header_bytes_ = 0;
  z_stream z_{};
  bool z_ready_ = false;
  bool member_end_ = false;  // the current gzip member has ended (its CRC and length checked)
  std::vector<uint8_t> in_;  // compressed input; z_.next_in points into it
};

Status IdxReader::open(const std::string& path) {
  path_ = path;
  int64_t size = 0;
  EASEL_RETURN_IF_ERROR(open_for_reading(path, &fd_, &size));
  if (size < 0) return io_error(path + ": not a regular file");
  file_size_ = size;
  uint8_t head[2] = {0, 0};
  const ssize_t n = ::pread(fd_, head, 2, 0);
  gzip_ = n == 2 && head[0] == 0x1f && head[1] == 0x8b;  // by content, not by name
  if (!gzip_) return {};
  in_.resize(static_cast<size_t>(std::clamp<int64_t>(file_size_, 1, kInChunk)));  // what it holds
  if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) return internal_error(path + ": zlib: no memory");
  z_ready_ = true;
  return {};
}

Status IdxReader::refill() {
  for (;;) {
    const ssize_t r = ::read(fd_, in_.data(), in_.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return io_error(path_ + ": read failed: " + std::strerror(errno));
    file_read_ += r;
    z_.next_in = in_.data();
    z_.avail_in = static_cast<uInt>(r);
    return {};
  }
}

Status IdxReader::zlib_error(int r) const {
  if (r == Z_MEM_ERROR) return internal_error(path_ + ": zlib: out of memory");
  return data_error(path_ + ": corrupt gzip stream (zlib: " + (z_.msg ? z_.msg : "unknown error") +
                    ")");
}

Result<size_t> IdxReader::read_plain(uint8_t* dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd_, dst + got, std::min(n - got, kMaxChunk));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return io_error(path_ + ": read failed: " + std::strerror(errno));
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

Result<bool> IdxReader::next_member() {
  if (z_.avail_in == 0) EASEL_RETURN_IF_ERROR(refill());
  if (z_.avail_in == 0) return false;  // the end of the file
  const int64_t at = file_read_ - z_.avail_in;
  uint8_t second = 0;
  if (z_.avail_in >= 2) {
    second = z_.next_in[1];
  } else if (::pread(fd_, &second, 1, file_read_) != 1) {
    second = 0;
  }
  if (z_.next_in[0] != 0x1f || second != 0x8b) {
    return data_error(path_ + ": " + std::to_string(file_size_ - at) +
                      " bytes of trailing junk after the gzip stream");
  }
  inflateReset(&z_);
  member_end_ = false;
  return true;
}

Result<size_t> IdxReader::inflate_up_to(uint8_t* dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    if (member_end_) {
      EASEL_ASSIGN_OR_RETURN(const bool more, next_member());
      if (!more) break;
    }
    if (z_.avail_in == 0) EASEL_RETURN_IF_ERROR(refill());
    if (z_.avail_in == 0) {
      return data_error(path_ +
                        ": corrupt gzip stream (zlib: unexpected end of file): the compressed "
                        "file is cut short");
    }
    const uInt ask = static_cast<uInt>(std::min(n - got, kMaxChunk));
    z_.next_out = dst + got;
    z_.avail_out = ask;
    const int r = inflate(&z_, Z_NO_FLUSH);
    got += ask - z_.avail_out;
    if (r == Z_STREAM_END) {
      member_end_ = true;
    } else if (r == Z_BUF_ERROR && z_.avail_in != 0 && z_.avail_out == ask) {
      return internal_error(path_ + ": zlib made no progress");  // never, by zlib's contract
    } else if (r != Z_OK && r != Z_BUF_ERROR) {
      return zlib_error(r);
    }
  }
  return got;
}

Result<size_t> IdxReader::read_up_to(uint8_t* dst, size_t n) {
  return gzip_ ? inflate_up_to(dst, n) : read_plain(dst, n);
}

Result<int64_t> IdxReader::count_rest() {
  std::vector<uint8_t> scratch(kMinChunk);
  int64_t total = 0;
  for (;;) {
    EASEL_ASSIGN_OR_RETURN(const size_t n, read_up_to(scratch.data(), scratch.size()));
    total += static_cast<int64_t>(n);
    if (n < scratch.size()) return total;
  }
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
  if (!gzip_) {
    // Plain: the file size bounds the data, so the claim is checked before allocating.
    const int64_t follow = file_size_ - header_bytes_;
    if (follow < bytes) return truncated(claim, follow);
    if (follow > bytes) {
      return data_error(path_ + ": " + std::to_string(follow - bytes) +
                        " bytes of trailing data after the " + claim + " the header claims");
    }
  } else if (bytes / kMaxRatio > file_size_ - (file_read_ - z_.avail_in)) {
    // More than what is left of the file can inflate to: say how much it does hold.
    EASEL_ASSIGN_OR_RETURN(const int64_t follow, count_rest());
    return truncated(claim, follow);
  }
  const MemoryBound mem = available_memory();
  if (static_cast<uint64_t>(bytes) > mem.bytes) {
    return unavailable(path_ + ": header claims " + claim + ", more than the " +
                       std::to_string(mem.bytes) + " bytes of memory available (" + mem.source +
                       ")");
  }
  EASEL_ASSIGN_OR_RETURN(Buffer out, Buffer::allocate(want, kind));
  EASEL_ASSIGN_OR_RETURN(const size_t got, read_up_to(out.as<uint8_t>(), want));
  if (got < want) return truncated(claim, static_cast<int64_t>(got));
  // Nothing may follow the data (for gzip this also checks each member's CRC and length, and
  // that no junk follows the last member).
  uint8_t extra = 0;
  EASEL_ASSIGN_OR_RETURN(const size_t more, read_up_to(&extra, 1));
  if (more != 0) {
    return data_error(path_ + ": trailing data: the gzip stream inflates past the " + claim +
                      " the header claims");
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
