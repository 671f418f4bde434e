// `--net FILE.onnx` in a build without ONNX (Meson's `onnx` feature found no libonnx-dev and
// libprotobuf-dev).
#include "nets/models/onnx_import.hpp"

namespace easel {

bool is_onnx_file(std::string_view name) {
  return name.size() > 5 && name.substr(name.size() - 5) == ".onnx";
}

Result<OnnxNet> import_onnx(const std::string& path) {
  return unavailable("--net: " + path +
                     ": this easel was built without ONNX (install libonnx-dev and "
                     "libprotobuf-dev, then reconfigure: tools/setup)");
}

Status check_onnx_fits(const OnnxNet& /*onnx*/, const NetSpec& /*spec*/, const std::string& path) {
  return unavailable("--net: " + path + ": this easel was built without ONNX");
}

Status load_onnx_weights(const OnnxNet& /*onnx*/, const Net& /*net*/, float* /*weights*/) {
  return unavailable("--net: this easel was built without ONNX");
}

}  // namespace easel
