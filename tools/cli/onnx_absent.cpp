// `easel export --format onnx` in a build without ONNX (Meson's `onnx` feature found no
// libonnx-dev and libprotobuf-dev).
#include "tools/cli/onnx_export.hpp"

namespace easel::cli {

bool onnx_available() {
  return false;
}

Result<std::string> onnx_model(const NetSpec& /*spec*/, Layout /*layout*/,
                               const ArenaLayout& /*params*/, const float* /*weights*/,
                               const OnnxOptions& /*options*/) {
  return unavailable(
      "--format onnx: this easel was built without ONNX (install libonnx-dev and "
      "libprotobuf-dev, then reconfigure: tools/setup)");
}

}  // namespace easel::cli
