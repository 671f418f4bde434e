// libFuzzer target: decode_checkpoint (algos/checkpoint.cpp), what read_checkpoint does with a
// checkpoint.bin's bytes. Each input is decoded twice: as it is (the header's checks), and with
// its header's payload length and FNV-1a hash made right (so that mutations reach the fields
// behind the checksum). A checkpoint that decodes must encode back to the same bytes.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "algos/checkpoint.hpp"

namespace {

constexpr size_t kMagic = 8, kHeader = kMagic + 16;  // "EASELCK1", u64 length, u64 hash

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ull;
  return h;
}

void check(std::string_view bytes) {
  auto r = easel::decode_checkpoint(bytes, "fuzz.bin");
  if (r.ok()) {
    if (easel::encode_checkpoint(r.value()) != bytes) __builtin_trap();
  } else if (r.status().message().rfind("fuzz.bin: ", 0) != 0 ||
             r.status().message().find('\n') != std::string::npos) {
    __builtin_trap();  // one line, starting with the file's name
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check(bytes);
  if (size >= kHeader) {
    std::string sealed(bytes);
    const uint64_t n = size - kHeader, h = fnv1a(bytes.substr(kHeader));
    std::memcpy(sealed.data() + kMagic, &n, sizeof n);
    std::memcpy(sealed.data() + kMagic + sizeof n, &h, sizeof h);
    check(sealed);
  }
  return 0;
}
