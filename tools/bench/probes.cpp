#include "tools/bench/probes.hpp"

#include <string>

#include "engine/status.hpp"
#include "nets/models/description.hpp"

namespace easel::bench {

namespace {

// A layer of a description: its name, type, the layers it reads (empty: the one before) and
// its other keys as TOML lines.
std::string layer(const std::string& name, const std::string& type, const std::string& keys = "",
                  const std::string& inputs = "") {
  std::string s = "\n[[layer]]\nname = \"" + name + "\"\ntype = \"" + type + "\"\n";
  if (!inputs.empty()) s += "inputs = [" + inputs + "]\n";
  return s + keys;
}

std::string conv(const std::string& name, int outputs, int kernel, int stride,
                 const std::string& inputs = "") {
  return layer(name, "conv",
               "outputs = " + std::to_string(outputs) + "\nkernel = " + std::to_string(kernel) +
                   "\nstride = " + std::to_string(stride) +
                   "\npad = " + std::to_string(kernel / 2) + "\nweight_filler = \"msra\"\n",
               inputs);
}

const char* kHeader =
    "description = \"easel bench --calibrate's probe\"\n"
    "[input]\nchannels = 3\nheight = 32\nwidth = 32\nclasses = 10\n";

std::string narrow() {
  std::string s = "name = \"probe-narrow\"\n" + std::string(kHeader);
  s += conv("stem", 16, 3, 1) + layer("stem_bn", "batch_norm") + layer("stem_relu", "relu");
  s += conv("c1", 16, 3, 1) + layer("c1_relu", "relu");
  s += layer("lrn1", "lrn", "local_size = 5\nalpha = 0.0001\nbeta = 0.75\n");
  s += layer("pool1", "max_pool", "kernel = 3\nstride = 2\n");
  s += conv("c2", 32, 5, 1) + layer("c2_relu", "relu");
  s += conv("c3", 64, 1, 1) + layer("c3_bn", "batch_norm") + layer("c3_relu", "relu");
  s += layer("pool2", "avg_pool", "kernel = 2\nstride = 2\n");
  s += conv("branch1", 32, 1, 1, "\"pool2\"");
  s += layer("branch2", "max_pool", "kernel = 3\nstride = 1\npad = 1\n", "\"pool2\"");
  s += layer("join", "concat", "", "\"branch1\", \"branch2\"");
  s += conv("c4", 64, 3, 1);
  s += layer("sum", "add", "", "\"c4\", \"pool2\"") + layer("sum_relu", "relu");
  // A global average pool on a 7x7 map (the wide probe's is on 1x1): its per-call time apart
  // from its throughput.
  s += layer("gap", "global_avg_pool");
  s += layer("drop", "dropout", "ratio = 0.5\n");
  s += layer("fc1", "inner_product", "outputs = 256\n") + layer("fc1_relu", "relu");
  s += layer("fc2", "inner_product", "outputs = 10\n");
  return s;
}

std::string wide() {
  std::string s = "name = \"probe-wide\"\n" + std::string(kHeader);
  s += conv("stem", 32, 5, 2) + layer("stem_bn", "batch_norm") + layer("stem_relu", "relu");
  s += conv("c1", 64, 3, 2) + layer("c1_relu", "relu");
  s += conv("c2", 128, 3, 2) + layer("c2_bn", "batch_norm") + layer("c2_relu", "relu");
  s += conv("c3", 128, 3, 1) + layer("c3_bn", "batch_norm");
  s += conv("shortcut", 128, 1, 2, "\"c1_relu\"") + layer("shortcut_bn", "batch_norm");
  s += layer("sum", "add", "", "\"c3_bn\", \"shortcut_bn\"") + layer("sum_relu", "relu");
  s += conv("c4", 256, 3, 2) + layer("c4_relu", "relu");
  s += conv("c5", 256, 3, 1) + layer("c5_bn", "batch_norm") + layer("c5_relu", "relu");
  // ResNet-18's last stage: 512-channel 3x3 convolutions on a 2x2 and a 1x1 map (GEMMs bound by
  // their weights at small batches).
  s += conv("c5w", 512, 3, 1) + layer("c5w_relu", "relu");
  s += conv("c5x", 512, 3, 2) + layer("c5x_relu", "relu");
  s += conv("c6", 512, 1, 1) + layer("c6_relu", "relu");
  s += layer("gap", "global_avg_pool");
  s += layer("fc1", "inner_product", "outputs = 512\n") + layer("fc1_relu", "relu");
  s += layer("drop", "dropout", "ratio = 0.5\n");
  s += layer("fc2", "inner_product", "outputs = 10\n");
  return s;
}

std::string large() {
  std::string s = "name = \"probe-large\"\n" + std::string(kHeader);
  s += conv("stem", 64, 7, 2) + layer("stem_relu", "relu");
  s += layer("lrn1", "lrn", "local_size = 5\nalpha = 0.0001\nbeta = 0.75\n");
  s += layer("pool1", "max_pool", "kernel = 2\nstride = 2\n");
  s += layer("fc1", "inner_product", "outputs = 4096\n") + layer("fc1_relu", "relu");
  s += layer("fc2", "inner_product", "outputs = 10\n");
  return s;
}

std::vector<NetSpec> parse_probes(const std::vector<std::string>& texts) {
  std::vector<NetSpec> out;
  for (const std::string& text : texts) {
    Result<NetSpec> spec = parse_net_description(text, "probe", {3, 32, 32, 10});
    EASEL_CHECK(spec.ok());  // fixed text: a failure is a bug here
    out.push_back(std::move(*spec));
  }
  return out;
}

}  // namespace

std::vector<NetSpec> probe_nets() {
  return parse_probes({narrow(), wide()});
}

std::vector<NetSpec> layer_probe_nets() {
  return parse_probes({large()});
}

}  // namespace easel::bench
