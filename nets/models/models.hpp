// The models easel can build, in one explicit list (no static self-registration). A builder
// takes the data set's input shape and class count and returns the layers; adding a model is
// one file plus one line in models.cpp.
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
  const char* name;
  const char* description;
  NetSpec (*build)(const ModelInput& in);
};

std::span<const ModelEntry> model_list();
// Error names the model and lists the known ones.
Result<NetSpec> build_model(std::string_view name, const ModelInput& in);

// Builders (one per file under nets/models/).
NetSpec build_lenet(const ModelInput& in);          // Caffe examples/mnist/lenet_train_test
NetSpec build_cifar10_quick(const ModelInput& in);  // Caffe examples/cifar10/cifar10_quick
NetSpec build_mlp(const ModelInput& in);            // ip 64 + ReLU + ip (tests, quick checks)

// Small helpers the builders share: a layer with Caffe's usual multipliers (weights lr 1,
// bias lr 2, decay 1 and 0 as given).
LayerSpec conv_layer(std::string name, int64_t oc, int64_t k, int64_t stride, int64_t pad,
                     Filler weights, Filler bias);
LayerSpec ip_layer(std::string name, int64_t oc, Filler weights, Filler bias);
LayerSpec pool_layer(std::string name, OpKind kind, int64_t k, int64_t stride, int64_t pad = 0);
LayerSpec relu_layer(std::string name);
LayerSpec lrn_layer(std::string name, int64_t local_size, float alpha, float beta);
LayerSpec dropout_layer(std::string name, float ratio);

inline Filler xavier() {
  return {Filler::Kind::xavier};
}
inline Filler constant(float v) {
  return {Filler::Kind::constant, v};
}
inline Filler gaussian(float std) {
  Filler f{Filler::Kind::gaussian};
  f.std = std;
  return f;
}

}  // namespace easel
