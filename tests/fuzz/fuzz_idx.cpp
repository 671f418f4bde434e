// libFuzzer target: read_idx (nets/data/idx.cpp) over an images and a labels file, each plain
// or gzip. Input: a u32 little-endian length n, then n bytes of the images file, then the
// labels file (a shorter input gives an empty labels file; n is clamped to what is there).
#include <cstdint>
#include <cstring>

#include "nets/data/dataset.hpp"
#include "tests/fuzz/memfile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint32_t n = 0;
  if (size >= 4) std::memcpy(&n, data, 4);
  const size_t head = size >= 4 ? 4 : size;
  const size_t images = std::min<size_t>(n, size - head);
  easel::fuzz::MemFile img("images", data + head, images);
  easel::fuzz::MemFile lab("labels", data + head + images, size - head - images);
  auto r = easel::read_idx(img.path(), lab.path(), "fuzz", easel::MemKind::dram);
  if (r.ok()) {
    // What a reader promises: the buffer holds count images, every label is a class.
    const easel::Dataset& ds = r.value();
    if (ds.pixels.bytes() != static_cast<size_t>(ds.count * ds.image_bytes())) __builtin_trap();
    if (ds.labels.size() != static_cast<size_t>(ds.count)) __builtin_trap();
    for (int32_t l : ds.labels)
      if (l < 0 || l >= ds.classes) __builtin_trap();
  } else if (r.status().message().find('\n') != std::string::npos) {
    __builtin_trap();  // an error is one line
  }
  return 0;
}
