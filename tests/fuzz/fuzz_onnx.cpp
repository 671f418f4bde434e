// libFuzzer target: import_onnx (nets/models/onnx_import.cpp), the reader of `--net FILE.onnx`:
// the protobuf, every node, initializer and shape, then the description it writes through
// parse_net_description and net_cost, as `easel train` and `easel list` take them. Input: the
// file, through a memfd.
//
// Besides crashes and sanitizer reports, it traps on a broken promise: an error that is not one
// line or does not name the file, a description it writes that the description parser refuses
// for its syntax or keys (what it writes must parse; shapes and wiring may be refused), more
// live memory than a small multiple of the file (a declared size is checked before anything of
// that size is allocated).
#include <cstdint>
#include <string>

#include "nets/graph.hpp"
#include "nets/models/description.hpp"
#include "nets/models/onnx_import.hpp"
#include "tests/fuzz/alloc_limit.hpp"
#include "tests/fuzz/memfile.hpp"

namespace {

void check_error(const easel::Status& s, const std::string& path) {
  const std::string& m = s.message();
  if (m.find(path) == std::string::npos || m.find('\n') != std::string::npos) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  easel::fuzz::MemFile file("onnx", data, size);
  easel::fuzz::AllocLimit limit(static_cast<int64_t>(8 * size) + (int64_t{64} << 20));
  auto r = easel::import_onnx(file.path());
  if (!r.ok()) {
    check_error(r.status(), file.path());
    return 0;
  }
  auto header = easel::parse_net_header(r->description, file.path());
  if (!header.ok()) __builtin_trap();  // it writes the header itself
  auto spec = easel::parse_net_description(r->description, file.path(), header->input);
  if (!spec.ok()) {
    check_error(spec.status(), file.path());
    return 0;
  }
  auto cost = easel::net_cost(*spec);
  if (!cost.ok() || cost->params < 0) __builtin_trap();
  return 0;
}
