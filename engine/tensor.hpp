// Shapes and layouts of the activations that flow between layers. Activations are dense 4-D
// tensors [N, C, H, W] stored in one of two layouts; a vector (inner product output) is
// [N, C, 1, 1], for which both layouts coincide.
#pragma once

#include <cstdint>
#include <string>

namespace easel {

enum class Layout { nchw, nhwc };

const char* layout_name(Layout l);

struct Shape4 {
  int64_t n = 0, c = 0, h = 1, w = 1;

  int64_t count() const { return n * c * h * w; }
  int64_t per_image() const { return c * h * w; }
  bool operator==(const Shape4&) const = default;
  std::string to_string() const;  // "64x20x24x24"
};

// Offset of element (n, c, h, w) of shape s in layout l.
inline int64_t offset4(const Shape4& s, Layout l, int64_t n, int64_t c, int64_t h, int64_t w) {
  return l == Layout::nchw ? ((n * s.c + c) * s.h + h) * s.w + w
                           : ((n * s.h + h) * s.w + w) * s.c + c;
}

}  // namespace easel
