// A small multi-layer perceptron (ip 64 + ReLU, ip classes): seconds to train on synthetic data,
// for the algorithm tests and quick checks of a setup.
#include "nets/models/models.hpp"

namespace easel {

NetSpec build_mlp(const ModelInput& in) {
  NetSpec n;
  n.name = "mlp";
  n.channels = in.channels;
  n.height = in.height;
  n.width = in.width;
  n.classes = in.classes;
  n.layers = {
      ip_layer("ip1", 64, xavier(), constant(0)),
      relu_layer("relu1"),
      ip_layer("ip2", in.classes, xavier(), constant(0)),
  };
  return n;
}

}  // namespace easel
