// Caffe's cifar10_quick (examples/cifar10/cifar10_quick_train_test.prototxt): three 5x5
// convolutions (32, 32, 64; pad 2), pools 3/2 (max, avg, avg; Caffe's ceil rounding), ip1 64,
// ip2 (classes). A larger net than LeNet for the layer-level benchmarks.
#include "nets/models/models.hpp"

namespace easel {

NetSpec build_cifar10_quick(const ModelInput& in) {
  NetSpec n;
  n.name = "cifar10-quick";
  n.channels = in.channels;
  n.height = in.height;
  n.width = in.width;
  n.classes = in.classes;
  n.layers = {
      conv_layer("conv1", 32, 5, 1, 2, gaussian(0.0001f), constant(0)),
      pool_layer("pool1", OpKind::max_pool, 3, 2),
      relu_layer("relu1"),
      conv_layer("conv2", 32, 5, 1, 2, gaussian(0.01f), constant(0)),
      relu_layer("relu2"),
      pool_layer("pool2", OpKind::avg_pool, 3, 2),
      conv_layer("conv3", 64, 5, 1, 2, gaussian(0.01f), constant(0)),
      relu_layer("relu3"),
      pool_layer("pool3", OpKind::avg_pool, 3, 2),
      ip_layer("ip1", 64, gaussian(0.1f), constant(0)),
      ip_layer("ip2", in.classes, gaussian(0.1f), constant(0)),
  };
  return n;
}

}  // namespace easel
