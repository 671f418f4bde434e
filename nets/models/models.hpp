// The nets easel ships, in one explicit list: each is a net description (nets/models/*.toml, the
// format of nets/models/description.hpp) compiled into the binary, so every built-in net goes
// through the parser users' own descriptions go through. Adding a net is one .toml file plus
// one line in nets/meson.build's list.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "nets/net.hpp"

namespace easel {

struct ModelInput {
  int64_t channels = 1, height = 28, width = 28, classes = 10;
};

struct ModelEntry {
  std::string name, description;
  ModelInput input;       // the input its description declares (what `easel list` counts on)
  std::string_view text;  // the description
};

// The built-in nets, in their list's order.
std::span<const ModelEntry> model_list();

// `name` is a built-in net, a description file (a path with a '/' or ending in .toml) or an
// ONNX file (ending in .onnx: nets/models/onnx_import.hpp).
// Errors name the model and list the known ones, or name the file, layer and field.
Result<NetSpec> build_model(std::string_view name, const ModelInput& in);

// Checks what can be checked before the data is read: a built-in name, or a description file
// whole except its shapes (they depend on the data).
Status check_model(std::string_view name);

// True when `name` would be read as a description file (or an ONNX file).
bool is_net_file(std::string_view name);

// The name, description and input a description file or an ONNX file declares (without
// building it; errors name the file).
struct NetHeader;
Result<NetHeader> read_net_header(const std::string& path);

// Overwrites the initial weights `net` (built from build_model(name)) drew with its fillers
// where the net comes with its own: an ONNX file's initializers. Nothing for other nets.
Status initial_weights(std::string_view name, const Net& net, float* weights);

}  // namespace easel
