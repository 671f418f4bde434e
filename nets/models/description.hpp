// Net descriptions: a net as a TOML text (docs/NETS.md has the format and a commented example).
// Every built-in net is such a text compiled into the binary (nets/models/*.toml), and
// `--net FILE` reads one from a file, through the same parser.
//
//   name = "tiny"
//   description = "one convolution and a classifier"
//   [input]                      # the shape `easel list` counts with (the data's shape wins)
//   channels = 3
//   height = 32
//   width = 32
//   classes = 10
//   [[layer]]
//   name = "conv1"
//   type = "conv"                # or inner_product, max_pool, avg_pool, global_avg_pool,
//   outputs = 16                 #   relu, lrn, dropout, batch_norm, add, concat
//   kernel = 3
//   pad = 1
//   [[layer]]
//   name = "fc"
//   type = "inner_product"
//   outputs = "classes"          # the data set's class count
//
// A layer reads the layer listed before it unless it names its `inputs` ("data": the images).
#pragma once

#include <string>
#include <string_view>

#include "nets/models/models.hpp"

namespace easel {

// Parses and checks a description whole: every key of every layer (an unknown layer type or
// key, a value of the wrong type or range), the wiring (a cycle, an input that names no layer,
// a layer nothing reads) and every layer's shapes on `in`. Nothing is allocated for the net.
// Errors are one line: "ORIGIN: layer NAME: field: what is wrong". Without check_shapes, the
// shapes are left to Net::create (a description checked before the data's shape is known).
Result<NetSpec> parse_net_description(std::string_view text, const std::string& origin,
                                      const ModelInput& in, bool check_shapes = true);

// What a description says about itself without building it: its name, its description and
// the input it declares ([input]; the defaults 1x28x28, 10 classes where it says nothing).
struct NetHeader {
  std::string name, description;
  ModelInput input;
};
Result<NetHeader> parse_net_header(std::string_view text, const std::string& origin);

// Reads FILE (at most 16 MiB) and parses it; errors name the file.
Result<std::string> read_net_file(const std::string& path);

// Checks the wiring and every layer's shapes on `in` (what Net::create would refuse), building
// nothing: errors name the net and the layer.
Status check_net(const NetSpec& spec);

}  // namespace easel
