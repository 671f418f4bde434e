// libFuzzer target: the tar shard index (nets/data/tar_index.cpp) on the input as a tar file,
// and, when it indexes, the shards reader (nets/data/shards.cpp) on it as the training shard of
// shards:DIR (grouping members by key, parsing .cls labels, class folders).
//
// Besides crashes and sanitizer reports, it traps on a broken promise: an error that is not
// one line or does not name the file; a member whose data is not inside the file or does not
// start on a 512-byte block; a shard set whose labels are outside [0, classes) or whose entries
// lie outside their shard.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "nets/data/dataset.hpp"
#include "nets/data/stream_source.hpp"
#include "nets/data/tar_index.hpp"
#include "tests/fuzz/tempdir.hpp"

namespace {

void check_error(const easel::Status& s, const std::string& name) {
  const std::string& m = s.message();
  if (m.find(name) == std::string::npos || m.find('\n') != std::string::npos) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const easel::fuzz::TempDir dir;
  const int64_t n = static_cast<int64_t>(size);
  const easel::TarReadAt read_at = [&](int64_t off, uint8_t* dst, size_t k) -> easel::Status {
    if (off < 0 || off > n || static_cast<int64_t>(k) > n - off)
      return easel::io_error("t.tar: read past the end");
    std::memcpy(dst, data + off, k);
    return {};
  };
  std::vector<easel::TarMember> members;
  const easel::Status s = easel::scan_tar(read_at, n, "t.tar", &members, 4096);
  if (!s.ok()) {
    check_error(s, "t.tar");
    return 0;
  }
  for (const easel::TarMember& m : members)
    if (m.offset < 512 || m.offset % 512 != 0 || m.size < 0 || m.size > n - m.offset)
      __builtin_trap();
  // Through load_shards: the input as train-0.tar, a fixed one-sample val shard beside it.
  dir.clear();
  const std::string train = dir.path() + "/train-0.tar", val = dir.path() + "/val-0.tar";
  std::ofstream(train, std::ios::binary)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  {  // v.jpg (not decoded at load) and v.cls, class 0
    std::vector<uint8_t> v(512 * 6, 0);
    easel::tar_header("v.jpg", 4, v.data());
    std::memcpy(v.data() + 512, "\xff\xd8\xff\xe0", 4);
    easel::tar_header("v.cls", 1, v.data() + 1024);
    v[1536] = '0';
    std::ofstream(val, std::ios::binary)
        .write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size()));
  }
  auto r = easel::load_data("shards:" + dir.path(), easel::MemKind::dram, 1,
                            easel::DataOptions{16, (size & 1) != 0});
  if (!r.ok()) {
    check_error(r.status(), dir.path());
    return 0;
  }
  for (const easel::Dataset* ds : {&r->train, &r->test}) {
    if (!ds->source || ds->count != ds->source->count()) __builtin_trap();
    for (int64_t i = 0; i < ds->count; ++i) {
      const int32_t l = ds->labels[static_cast<size_t>(i)];
      const auto& e = ds->source->entries[static_cast<size_t>(i)];
      if (l < 0 || l >= ds->classes || e.offset < 0 || e.size < 0) __builtin_trap();
      if (ds == &r->train && e.offset + e.size > n) __builtin_trap();
    }
  }
  return 0;
}
