// The tar header reader and writer (tar_index.hpp).
#include "nets/data/tar_index.hpp"

#include <cstdlib>
#include <cstring>

namespace easel {
namespace {

constexpr int64_t kBlock = 512;
constexpr int64_t kMaxLongName = 64 << 10;

// An octal field (spaces and NULs around it), or GNU's base-256 (the high bit of the first
// byte set, positive values only). -1 when it is neither.
int64_t number(const uint8_t* f, int n) {
  if (f[0] & 0x80) {
    if (f[0] != 0x80) return -1;  // negative or too large
    int64_t v = 0;
    for (int i = 1; i < n; ++i) {
      if (v >> 55) return -1;
      v = (v << 8) | f[i];
    }
    return v;
  }
  int i = 0;
  while (i < n && f[i] == ' ')
    ++i;
  int64_t v = 0;
  bool any = false;
  for (; i < n && f[i] >= '0' && f[i] <= '7'; ++i) {
    if (v >> 60) return -1;
    v = v * 8 + (f[i] - '0');
    any = true;
  }
  for (; i < n; ++i)
    if (f[i] != ' ' && f[i] != 0) return -1;
  return any ? v : -1;
}

std::string field(const uint8_t* f, int n) {
  int len = 0;
  while (len < n && f[len] != 0)
    ++len;
  return std::string(reinterpret_cast<const char*>(f), static_cast<size_t>(len));
}

bool zero_block(const uint8_t* b) {
  for (int i = 0; i < kBlock; ++i)
    if (b[i] != 0) return false;
  return true;
}

// The pax extended header's "path" record, if any ("LEN path=VALUE\n" records).
std::string pax_path(const std::string& s) {
  size_t at = 0;
  std::string path;
  while (at < s.size()) {
    const size_t sp = s.find(' ', at);
    if (sp == std::string::npos) break;
    const long len = std::strtol(s.c_str() + at, nullptr, 10);
    if (len <= 0 || at + static_cast<size_t>(len) > s.size()) break;
    const std::string rec = s.substr(sp + 1, at + static_cast<size_t>(len) - sp - 1);
    if (rec.starts_with("path=")) {
      path = rec.substr(5);
      if (!path.empty() && path.back() == '\n') path.pop_back();
    }
    at += static_cast<size_t>(len);
  }
  return path;
}

}  // namespace

Status scan_tar(const TarReadAt& read_at, int64_t file_size, const std::string& path,
                std::vector<TarMember>* out, int64_t max_members) {
  uint8_t h[kBlock];
  int64_t at = 0;
  std::string long_name;  // from a GNU 'L' or pax 'x' member, for the next member
  while (at + kBlock <= file_size) {
    EASEL_RETURN_IF_ERROR(read_at(at, h, kBlock));
    if (zero_block(h)) return {};  // end of archive
    const auto broken = [&](const std::string& why) {
      return data_error(path + ": broken tar header at byte " + std::to_string(at) + " (" + why +
                        ")");
    };
    int64_t sum = 0;
    for (int i = 0; i < kBlock; ++i)
      sum += (i >= 148 && i < 156) ? ' ' : h[i];
    const int64_t want = number(h + 148, 8);
    if (want != sum) return broken("checksum");
    const int64_t size = number(h + 124, 12);
    if (size < 0) return broken("size field");
    const int64_t data = at + kBlock;
    if (size > file_size - data)
      return data_error(path + ": the member at byte " + std::to_string(at) + " claims " +
                        std::to_string(size) + " bytes, past the end of the file (truncated)");
    const char type = static_cast<char>(h[156]);
    if (type == 'L' || type == 'x') {
      if (size > kMaxLongName) return broken("a long name of " + std::to_string(size) + " bytes");
      std::string s(static_cast<size_t>(size), '\0');
      EASEL_RETURN_IF_ERROR(read_at(data, reinterpret_cast<uint8_t*>(s.data()), s.size()));
      if (type == 'L') {
        long_name = s.substr(0, s.find('\0'));
      } else {
        long_name = pax_path(s);
      }
    } else if (type == '0' || type == '\0' || type == '7') {
      if (static_cast<int64_t>(out->size()) >= max_members)
        return data_error(path + ": more than " + std::to_string(max_members) + " members");
      TarMember m;
      if (!long_name.empty()) {
        m.name = std::move(long_name);
      } else {
        const std::string prefix = std::memcmp(h + 257, "ustar", 5) == 0 ? field(h + 345, 155) : "";
        m.name = prefix.empty() ? field(h, 100) : prefix + "/" + field(h, 100);
      }
      long_name.clear();
      m.offset = data;
      m.size = size;
      out->push_back(std::move(m));
    } else {
      long_name.clear();  // directories, links, pax globals: nothing to read
    }
    at = data + (size + kBlock - 1) / kBlock * kBlock;
  }
  if (at != file_size)
    return data_error(path + ": ends inside a tar header at byte " + std::to_string(at) +
                      " (truncated)");
  return {};
}

namespace {

// A header's numeric field of `width` bytes: width - 1 octal digits, zero-padded, then a NUL.
// Requires a value that fits (a member under 8 GiB; the checksum, at most 512 * 255, in six).
void octal(uint8_t* field, int width, uint64_t value) {
  for (int i = width - 2; i >= 0; --i, value >>= 3)
    field[i] = static_cast<uint8_t>('0' + (value & 7));
  EASEL_CHECK(value == 0);
  field[width - 1] = '\0';
}

}  // namespace

void tar_header(const std::string& name, int64_t size, uint8_t block[512]) {
  std::memset(block, 0, kBlock);
  std::string prefix, base = name;
  if (name.size() > 100) {
    const size_t slash = name.rfind('/', 155);
    EASEL_CHECK(slash != std::string::npos && name.size() - slash - 1 <= 100);
    prefix = name.substr(0, slash);
    base = name.substr(slash + 1);
  }
  std::memcpy(block, base.data(), base.size());
  octal(block + 100, 8, 0644);
  octal(block + 108, 8, 0);
  octal(block + 116, 8, 0);
  octal(block + 124, 12, static_cast<uint64_t>(size));
  octal(block + 136, 12, 0);
  block[156] = '0';
  std::memcpy(block + 257, "ustar", 6);
  std::memcpy(block + 263, "00", 2);
  std::memcpy(block + 345, prefix.data(), prefix.size());
  int64_t sum = 0;
  for (int i = 0; i < kBlock; ++i)
    sum += (i >= 148 && i < 156) ? ' ' : block[i];
  octal(block + 148, 7, static_cast<uint64_t>(sum));  // six digits, NUL, then a space
  block[155] = ' ';
}

}  // namespace easel
