// NumPy's .npy format (numpy.lib.format): a magic, a version, the header's length (u16 in
// version 1, u32 in 2 and 3), an ASCII (3: UTF-8) header that is a Python dict literal padded
// with spaces and ended by '\n', then the array's bytes.
#include "nets/data/npy.hpp"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>

#include "engine/config.hpp"  // printable
#include "engine/limits.hpp"

namespace easel {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
constexpr uint32_t kMaxHeader = 1 << 16;  // numpy writes under 100 bytes for such arrays
static_assert(std::endian::native == std::endian::little, "float32 values are read as they lie");

// The header dict: a cursor over its text that reads the few literals numpy writes.
class DictParser {
 public:
  DictParser(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  Status parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool seen[3] = {false, false, false};
    if (!eat('{')) return bad("the header is not a dict");
    while (!eat('}')) {
      std::string key;
      EASEL_RETURN_IF_ERROR(string(&key));
      if (!eat(':')) return bad("no ':' after '" + printable(key) + "'");
      if (key == "descr" && !seen[0]) {
        seen[0] = true;
        EASEL_RETURN_IF_ERROR(string(descr));
      } else if (key == "fortran_order" && !seen[1]) {
        seen[1] = true;
        EASEL_RETURN_IF_ERROR(boolean(fortran));
      } else if (key == "shape" && !seen[2]) {
        seen[2] = true;
        EASEL_RETURN_IF_ERROR(tuple(shape));
      } else {
        return bad("key '" + printable(key) +
                   "' unexpected (only descr, fortran_order and shape, once each)");
      }
      if (!eat(',') && !peek('}')) return bad("no ',' or '}' after '" + printable(key) + "'");
    }
    skip_space();
    if (pos_ != s_.size()) return bad("text after the dict");
    if (!seen[0] || !seen[1] || !seen[2])
      return bad(std::string("no '") +
                 (!seen[0]   ? "descr"
                  : !seen[1] ? "fortran_order"
                             : "shape") +
                 "' key");
    return {};
  }

 private:
  Status bad(const std::string& what) const { return data_error(path_ + ": header: " + what); }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n'))
      ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  Status string(std::string* out) {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return bad("a string expected");
    const char quote = s_[pos_++];
    const size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos || end - pos_ > 64) return bad("an unterminated string");
    *out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return {};
  }
  Status boolean(bool* out) {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}})
      if (s_.substr(pos_, std::strlen(word)) == word) {
        pos_ += std::strlen(word);
        *out = value;
        return {};
      }
    return bad("fortran_order is not True or False");
  }
  Status tuple(std::vector<int64_t>* out) {
    if (!eat('(')) return bad("shape is not a tuple");
    while (!eat(')')) {
      skip_space();
      int64_t v = 0;
      size_t digits = 0;
      for (; pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; ++pos_, ++digits) {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return bad("shape: a huge extent");
        v = v * 10 + (s_[pos_] - '0');
      }
      if (digits == 0) return bad("shape: not a tuple of integers");
      out->push_back(v);
      if (out->size() > 8) return bad("shape: more than 8 dimensions");
      if (!eat(',') && !peek(')')) return bad("shape: no ',' or ')' after an extent");
    }
    return {};
  }

  std::string_view s_;
  const std::string& path_;
  size_t pos_ = 0;
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string t = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    t += (i ? ", " : "") + std::to_string(shape[i]);
  return t + (shape.size() == 1 ? ",)" : ")");
}

// The header's text (its length read after the version), and where the values start.
Status read_header(std::ifstream& f, const std::string& path, uint64_t size, std::string* header) {
  char lead[kMagicBytes + 2] = {};
  if (size < sizeof lead || !f.read(lead, sizeof lead) ||
      std::memcmp(lead, kMagic, kMagicBytes) != 0)
    return data_error(path + ": not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(lead[kMagicBytes]);
  if (major < 1 || major > 3 || lead[kMagicBytes + 1] != 0)
    return data_error(path + ": .npy version " + std::to_string(major) + "." +
                      std::to_string(static_cast<unsigned char>(lead[kMagicBytes + 1])) +
                      " (1.0, 2.0 and 3.0 are read)");
  unsigned char len_bytes[4] = {};
  const size_t n = major == 1 ? 2 : 4;
  if (!f.read(reinterpret_cast<char*>(len_bytes), static_cast<std::streamsize>(n)))
    return data_error(path + ": truncated in its header");
  uint32_t len = 0;
  for (size_t i = n; i-- > 0;)
    len = len << 8 | len_bytes[i];
  if (len > kMaxHeader || sizeof lead + n + len > size)
    return data_error(path + ": header of " + std::to_string(len) + " bytes, in a file of " +
                      std::to_string(size));
  header->resize(len);
  if (!f.read(header->data(), len)) return data_error(path + ": truncated in its header");
  return {};
}

}  // namespace

Result<NpyArray> read_npy(const std::string& path, int rank) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  std::ifstream f(path, std::ios::binary);
  if (ec || !f) return not_found(path + ": cannot open");
  std::string header;
  EASEL_RETURN_IF_ERROR(read_header(f, path, size, &header));
  std::string descr;
  bool fortran = true;
  NpyArray a;
  EASEL_RETURN_IF_ERROR(DictParser(header, path).parse(&descr, &fortran, &a.shape));
  if (descr != "<f4")
    return data_error(path + ": descr '" + printable(descr) +
                      "': only little-endian float32 ('<f4') is read");
  if (fortran) return data_error(path + ": fortran_order True: only C order is read");
  if (static_cast<int>(a.shape.size()) != rank)
    return data_error(path + ": shape " + shape_text(a.shape) + ": " + std::to_string(rank) +
                      " dimensions expected");
  const uint64_t data_bytes = size - (static_cast<uint64_t>(f.tellg()));
  uint64_t count = 1;
  for (int64_t d : a.shape) {
    if (d <= 0) return data_error(path + ": shape " + shape_text(a.shape) + ": an empty extent");
    if (static_cast<uint64_t>(d) > data_bytes / sizeof(float) / count)
      return data_error(path + ": shape " + shape_text(a.shape) + " needs more than the " +
                        std::to_string(data_bytes) + " bytes after its header");
    count *= static_cast<uint64_t>(d);
  }
  if (count * sizeof(float) != data_bytes)
    return data_error(path + ": shape " + shape_text(a.shape) + " is " +
                      std::to_string(count * sizeof(float)) + " bytes, the file holds " +
                      std::to_string(data_bytes) + " after its header");
  // An honest but too large file: refused with the reason, never std::bad_alloc half-way.
  const MemoryBound mem = available_memory();
  if (data_bytes > mem.bytes)
    return unavailable(path + ": " + std::to_string(data_bytes) +
                       " bytes of values, more than the " + std::to_string(mem.bytes) +
                       " bytes of memory available (" + mem.source + ")");
  a.values.resize(count);
  if (!f.read(reinterpret_cast<char*>(a.values.data()),
              static_cast<std::streamsize>(count * sizeof(float))))
    return io_error(path + ": read failed");
  return a;
}

std::string encode_npy(const std::vector<int64_t>& shape, const std::vector<float>& values) {
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // numpy pads the magic, version, length and header to a multiple of 64 bytes, '\n' last.
  const size_t lead = kMagicBytes + 4;
  header.append((64 - (lead + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicBytes);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return out;
}

}  // namespace easel
