#include "nets/models/models.hpp"

#include <vector>

#include "nets/models/builtin_nets.hpp"
#include "nets/models/description.hpp"
#include "nets/models/onnx_import.hpp"

namespace easel {

std::span<const ModelEntry> model_list() {
  static const std::vector<ModelEntry> kModels = [] {
    std::vector<ModelEntry> out;
    for (const BuiltinNet& b : builtin_nets()) {
      Result<NetHeader> h = parse_net_header(b.text, std::string("built-in net ") + b.file);
      EASEL_CHECK_MSG(h.ok(), h.status().to_string().c_str());
      out.push_back({h->name, h->description, h->input, b.text});
    }
    return out;
  }();
  return kModels;
}

bool is_net_file(std::string_view name) {
  return name.find('/') != std::string_view::npos || is_onnx_file(name) ||
         (name.size() > 5 && name.substr(name.size() - 5) == ".toml");
}

namespace {

Result<const ModelEntry*> find_builtin(std::string_view name) {
  std::string known;
  for (const auto& m : model_list()) {
    if (name == m.name) return &m;
    known += known.empty() ? "" : ", ";
    known += m.name;
  }
  return invalid_argument(
      "--net: unknown model '" + std::string(name) + "' (known: " + known +
      "; or a description file: a path with a '/' or ending in .toml, or an ONNX file "
      "ending in .onnx)");
}

}  // namespace

Result<NetSpec> build_model(std::string_view name, const ModelInput& in) {
  if (is_onnx_file(name)) {
    const std::string path(name);
    EASEL_ASSIGN_OR_RETURN(OnnxNet onnx, import_onnx(path));
    EASEL_ASSIGN_OR_RETURN(NetSpec spec, parse_net_description(onnx.description, path, in));
    EASEL_RETURN_IF_ERROR(check_onnx_fits(onnx, spec, path));
    return spec;
  }
  if (is_net_file(name)) {
    const std::string path(name);
    EASEL_ASSIGN_OR_RETURN(std::string text, read_net_file(path));
    return parse_net_description(text, path, in);
  }
  EASEL_ASSIGN_OR_RETURN(const ModelEntry* m, find_builtin(name));
  return parse_net_description(m->text, "built-in net " + m->name, in);
}

Status check_model(std::string_view name) {
  if (!is_net_file(name)) return find_builtin(name).status();
  const std::string path(name);
  std::string text;
  if (is_onnx_file(name)) {
    EASEL_ASSIGN_OR_RETURN(OnnxNet onnx, import_onnx(path));
    text = std::move(onnx.description);
  } else {
    EASEL_ASSIGN_OR_RETURN(text, read_net_file(path));
  }
  EASEL_ASSIGN_OR_RETURN(NetHeader h, parse_net_header(text, path));
  return parse_net_description(text, path, h.input, /*check_shapes=*/false).status();
}

Result<NetHeader> read_net_header(const std::string& path) {
  if (is_onnx_file(path)) {
    EASEL_ASSIGN_OR_RETURN(OnnxNet onnx, import_onnx(path));
    return parse_net_header(onnx.description, path);
  }
  EASEL_ASSIGN_OR_RETURN(std::string text, read_net_file(path));
  return parse_net_header(text, path);
}

Status initial_weights(std::string_view name, const Net& net, float* weights) {
  if (!is_onnx_file(name)) return {};
  EASEL_ASSIGN_OR_RETURN(OnnxNet onnx, import_onnx(std::string(name)));
  return load_onnx_weights(onnx, net, weights);
}

}  // namespace easel
