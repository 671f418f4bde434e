// libFuzzer target: decode_checkpoint (run/checkpoint.cpp), what read_checkpoint does with a
// checkpoint.bin's bytes. Each input is decoded twice: as it is (the header's checks), and with
// its header's payload length and FNV-1a hash made right (so that mutations reach the fields
// behind the checksum). A checkpoint of today's format that decodes must encode back to the same
// bytes; one of an older format must encode to a checkpoint that decodes to the same encoding.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "run/checkpoint.hpp"

namespace {

// Format 1: "EASELCK1", u64 length, u64 hash. Formats 2 and 3: "EASELCKV", u32 version, u32
// byte-order mark, u64 length, u64 hash.
constexpr size_t kMagic = 8, kHeaderV1 = kMagic + 16, kHeaderV2 = kMagic + 8 + 16;

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ull;
  return h;
}

void check(std::string_view bytes) {
  auto r = easel::decode_checkpoint(bytes, "fuzz.bin");
  if (r.ok()) {
    const std::string again = easel::encode_checkpoint(r.value());
    uint32_t version = 0;
    if (bytes.substr(0, kMagic) == "EASELCKV") std::memcpy(&version, bytes.data() + kMagic, 4);
    if (version == easel::kCheckpointVersion) {
      if (again != bytes) __builtin_trap();
    } else {  // an older format, written as today's
      auto r2 = easel::decode_checkpoint(again, "again.bin");
      if (!r2.ok() || easel::encode_checkpoint(r2.value()) != again) __builtin_trap();
    }
  } else if (r.status().message().rfind("fuzz.bin: ", 0) != 0 ||
             r.status().message().find('\n') != std::string::npos) {
    __builtin_trap();  // one line, starting with the file's name
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check(bytes);
  const size_t head = bytes.substr(0, kMagic) == "EASELCKV" ? kHeaderV2 : kHeaderV1;
  if (size >= head) {
    std::string sealed(bytes);
    const uint64_t n = size - head, h = fnv1a(bytes.substr(head));
    std::memcpy(sealed.data() + head - 16, &n, sizeof n);
    std::memcpy(sealed.data() + head - 8, &h, sizeof h);
    check(sealed);
  }
  return 0;
}
