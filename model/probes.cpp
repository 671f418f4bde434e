#include "model/probes.hpp"

#include <iterator>
#include <string>

#include "engine/status.hpp"
#include "nets/models/description.hpp"
#include "nets/models/models.hpp"

namespace easel::model {

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

// Shapes are chosen to span the classes' shapes in general (channels 8 to 640, kernels 1, 3, 5 and
// 7, strides 1 and 2, maps 32x32 to 1x1, inner products from 88 to 2560 outputs, three of them
// above the streamed threshold), not to copy the layers of any net that is checked against the
// model (tools/model-check): none of these layers is a layer of lenet, cifar10-quick,
// alexnet-cifar, resnet18, small-resnet or googlenet (tests/tools/test_layer_rates.cpp checks
// their convolutions and inner products). Channel counts are off the 64-128-256-512 ladder.
struct Probe {
  std::string text;
  ModelInput input;
};

std::string header(const std::string& name, int channels, int side) {
  return "name = \"" + name +
         "\"\ndescription = \"easel bench --calibrate's probe\"\n[input]\nchannels = " +
         std::to_string(channels) + "\nheight = " + std::to_string(side) +
         "\nwidth = " + std::to_string(side) + "\nclasses = 10\n";
}

std::string bn_relu(const std::string& name) {
  return layer(name + "_bn", "batch_norm") + layer(name + "_relu", "relu");
}

const char* kLrn = "local_size = 5\nalpha = 0.0001\nbeta = 0.75\n";

// Wide maps, few channels (16 to 80): 32x32 down to 8x8.
Probe narrow() {
  std::string s = header("probe-narrow", 3, 32);
  s += conv("stem", 16, 3, 1) + bn_relu("stem");
  s += conv("c1", 24, 3, 1) + layer("c1_relu", "relu");
  s += layer("lrn1", "lrn", kLrn);
  s += layer("pool1", "max_pool", "kernel = 3\nstride = 2\n");
  s += conv("c2", 40, 5, 1) + layer("c2_relu", "relu");
  s += conv("c3", 56, 1, 1) + bn_relu("c3");
  s += layer("pool2", "avg_pool", "kernel = 2\nstride = 2\n");
  s += conv("branch1", 24, 1, 1, "\"pool2\"");
  s += layer("branch2", "max_pool", "kernel = 3\nstride = 1\npad = 1\n", "\"pool2\"");
  s += layer("join", "concat", "", "\"branch1\", \"branch2\"");
  s += conv("c4", 56, 3, 1);
  s += layer("sum", "add", "", "\"c4\", \"pool2\"") + layer("sum_relu", "relu");
  // A global average pool on an 8x8 map (the wide probe's is a max pool to 1x1).
  s += layer("gap", "global_avg_pool");
  s += layer("drop", "dropout", "ratio = 0.5\n");
  s += layer("fc1", "inner_product", "outputs = 320\n") + layer("fc1_relu", "relu");
  s += layer("fc2", "inner_product", "outputs = 10\n");
  return {s, {3, 32, 32, 10}};
}

// Small maps, many channels (24 to 640): 16x16 down to 1x1, a residual join.
Probe wide() {
  std::string s = header("probe-wide", 3, 32);
  s += conv("stem", 24, 5, 2) + bn_relu("stem");
  s += conv("c1", 48, 3, 2) + layer("c1_relu", "relu");
  s += conv("c2", 96, 3, 1) + bn_relu("c2");
  s += conv("c3", 96, 3, 1) + layer("c3_bn", "batch_norm");
  s += conv("shortcut", 96, 1, 1, "\"c1_relu\"") + layer("shortcut_bn", "batch_norm");
  s += layer("sum", "add", "", "\"c3_bn\", \"shortcut_bn\"") + layer("sum_relu", "relu");
  s += conv("c4", 192, 3, 2) + layer("c4_relu", "relu");
  s += conv("c5", 192, 3, 1) + bn_relu("c5");
  s += conv("c6", 384, 3, 2) + layer("c6_relu", "relu");
  s += conv("c7", 320, 1, 1) + layer("c7_relu", "relu");
  s += layer("pool", "max_pool", "kernel = 2\nstride = 2\n");
  s += layer("fc1", "inner_product", "outputs = 640\n") + layer("fc1_relu", "relu");
  s += layer("drop", "dropout", "ratio = 0.5\n");
  s += layer("fc2", "inner_product", "outputs = 10\n");
  return {s, {3, 32, 32, 10}};
}

// Colour images: three stems at once (3x3, 5x5, 7x7), then a convolution of each kernel size at
// every map size from 32x32 to 1x1, the channels growing from 24 to 640 and the 1x1 ones
// narrowing between; strided convolutions and pools between the sizes.
Probe colour_grid() {
  std::string s = header("probe-grid-colour", 3, 32);
  s += conv("s3", 16, 3, 1, "\"data\"") + conv("s5", 24, 5, 1, "\"data\"") +
       conv("s7", 8, 7, 1, "\"data\"");
  s += layer("stems", "concat", "", "\"s3\", \"s5\", \"s7\"") + layer("stems_relu", "relu");
  s += conv("c32", 24, 3, 1) + bn_relu("c32") + conv("c32b", 72, 1, 1);
  s += conv("d16", 48, 3, 2) + layer("d16_relu", "relu");
  s += conv("c16", 80, 3, 1) + conv("c16b", 56, 1, 1) + layer("c16b_relu", "relu");
  s += layer("p8", "avg_pool", "kernel = 3\nstride = 2\n");
  s += conv("c8", 120, 5, 1) + layer("c8_relu", "relu") + conv("c8b", 200, 1, 1) + bn_relu("c8b");
  s += conv("d4", 288, 3, 2) + layer("d4_relu", "relu");
  s += conv("c4", 176, 3, 1) + conv("c4b", 112, 1, 1) + layer("c4b_relu", "relu");
  s += layer("lrn4", "lrn", kLrn);
  s += layer("p2", "max_pool", "kernel = 2\nstride = 2\n");
  s += conv("c2", 448, 3, 1) + layer("c2_relu", "relu");
  s += conv("d1", 384, 3, 2) + layer("d1_relu", "relu");
  s += conv("c1", 640, 1, 1) + layer("c1_relu", "relu");
  s += layer("gap", "global_avg_pool");
  s += layer("fc", "inner_product", "outputs = 10\n");
  return {s, {3, 32, 32, 10}};
}

// Grey images: stems on one channel (5x5 and a strided 7x7), maps of 28, 14, 7 and 4, a
// within-channel LRN, and an inner product over a whole 4x4 map whose 31 MB of weights stream.
Probe grey_grid() {
  std::string s = header("probe-grid-grey", 1, 28);
  s += conv("s5", 32, 5, 1, "\"data\"") + layer("s5_relu", "relu");
  s += layer("s5_pool", "max_pool", "kernel = 2\nstride = 2\n");
  s += conv("s7", 16, 7, 2, "\"data\"") + layer("s7_relu", "relu");
  s += layer("stems", "concat", "", "\"s5_pool\", \"s7_relu\"");
  s += conv("c14", 96, 3, 1) + bn_relu("c14") + conv("c14b", 24, 1, 1) + conv("c14c", 72, 5, 1);
  s += layer("lrn14", "lrn", std::string(kLrn) + "region = \"within_channel\"\n");
  s += layer("p7", "max_pool", "kernel = 3\nstride = 2\n");
  s += conv("c7", 136, 3, 1) + layer("c7_relu", "relu") + conv("c7b", 176, 1, 1);
  s += conv("d4", 232, 3, 2) + layer("d4_relu", "relu");
  s += conv("c4", 320, 1, 1) + layer("c4_relu", "relu");
  s += layer("fc1", "inner_product", "outputs = 1536\n") + layer("fc1_relu", "relu");
  s += layer("fc2", "inner_product", "outputs = 10\n");
  return {s, {1, 28, 28, 10}};
}

// Inner products of 88 to 2560 outputs on 1,024 to 2,560 inputs: weights from 4 KB to 16 MB,
// two of them above the streamed threshold (and the grey grid's third).
Probe fc_chain() {
  std::string s = header("probe-fc", 3, 32);
  s += conv("stem", 16, 3, 2) + layer("stem_relu", "relu");
  s += layer("pool", "max_pool", "kernel = 2\nstride = 2\n");
  const int widths[] = {1536, 2560, 1152, 384, 88};
  for (size_t i = 0; i < std::size(widths); ++i) {
    const std::string n = "fc" + std::to_string(i + 1);
    s += layer(n, "inner_product", "outputs = " + std::to_string(widths[i]) + "\n") +
         layer(n + "_relu", "relu");
    if (i == 1) s += layer(n + "_drop", "dropout", "ratio = 0.5\n");
  }
  s += layer("fc6", "inner_product", "outputs = 10\n");
  return {s, {3, 32, 32, 10}};
}

std::vector<NetSpec> parse_probes(const std::vector<Probe>& probes) {
  std::vector<NetSpec> out;
  for (const Probe& p : probes) {
    Result<NetSpec> spec = parse_net_description(p.text, "probe", p.input);
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
  return parse_probes({colour_grid(), grey_grid(), fc_chain()});
}

}  // namespace easel::model
