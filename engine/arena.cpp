#include "engine/arena.hpp"

#include <cstring>
#include <limits>
#include <string>
#include <utility>

namespace easel {
namespace {

int64_t round_up(int64_t x, int64_t a) {
  return (x + a - 1) / a * a;
}

}  // namespace

int ArenaLayout::add(Segment s) {
  int64_t count = 1;
  for (int64_t d : s.dims) {
    EASEL_CHECK_MSG(d >= 0, "segment dimension is negative");
    count *= d;
  }
  if (s.dims.empty()) count = s.count;
  EASEL_CHECK(count >= 0);
  s.count = count;
  s.offset = round_up(total_, kArenaAlign);
  total_ = round_up(s.offset + s.count, kArenaAlign);
  params_ += s.count;
  if (s.state) state_ += s.count;
  segments_.push_back(std::move(s));
  return static_cast<int>(segments_.size()) - 1;
}

Result<Arena> Arena::create(int64_t floats, MemKind kind) {
  if (floats < 0) {
    return invalid_argument("arena size " + std::to_string(floats) + " floats is negative");
  }
  if (static_cast<uint64_t>(floats) > std::numeric_limits<size_t>::max() / sizeof(float)) {
    return unavailable("arena of " + std::to_string(floats) + " floats does not fit in memory");
  }
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
  auto buf = Buffer::allocate(bytes, kind);
  if (!buf.ok()) return buf.status();
  Arena a;
  a.buf_ = std::move(buf).value();
  a.floats_ = floats;
  a.buf_.zero();
  return a;
}

}  // namespace easel
