// libFuzzer target: read_npy (nets/data/npy.cpp), `easel predict`'s reader of .npy batches.
// Input: the file, through a memfd.
#include <cstdint>
#include <string>

#include "nets/data/npy.hpp"
#include "tests/fuzz/alloc_limit.hpp"
#include "tests/fuzz/memfile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  easel::fuzz::MemFile file("npy", data, size);
  // A reader allocates at most what the file holds (its values), and its header once.
  easel::fuzz::AllocLimit limit(static_cast<int64_t>(2 * size) + (int64_t{1} << 20));
  auto r = easel::read_npy(file.path(), 4);
  if (r.ok()) {
    // What it promises: four positive extents whose product is the values read.
    uint64_t count = 1;
    if (r->shape.size() != 4) __builtin_trap();
    for (int64_t d : r->shape) {
      if (d <= 0) __builtin_trap();
      count *= static_cast<uint64_t>(d);
    }
    if (count != r->values.size() || count * sizeof(float) > size) __builtin_trap();
  } else if (r.status().message().find('\n') != std::string::npos ||
             r.status().message().rfind(file.path(), 0) != 0) {
    __builtin_trap();  // an error is one line and names the file first
  }
  return 0;
}
