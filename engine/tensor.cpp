#include "engine/tensor.hpp"

namespace easel {

const char* layout_name(Layout l) {
  return l == Layout::nchw ? "nchw" : "nhwc";
}

std::string Shape4::to_string() const {
  return std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" +
         std::to_string(w);
}

}  // namespace easel
