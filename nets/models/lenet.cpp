// Caffe's LeNet, exactly as examples/mnist/lenet_train_test.prototxt: conv1 20 5x5, max-pool
// 2/2, conv2 50 5x5, max-pool 2/2, ip1 500 + ReLU, ip2 (classes). Xavier weights, constant 0
// biases, weights lr_mult 1, bias lr_mult 2. On 1x28x28 with 10 classes: 431,080 parameters.
#include "nets/models/models.hpp"

namespace easel {

NetSpec build_lenet(const ModelInput& in) {
  NetSpec n;
  n.name = "lenet";
  n.channels = in.channels;
  n.height = in.height;
  n.width = in.width;
  n.classes = in.classes;
  n.layers = {
      conv_layer("conv1", 20, 5, 1, 0, xavier(), constant(0)),
      pool_layer("pool1", OpKind::max_pool, 2, 2),
      conv_layer("conv2", 50, 5, 1, 0, xavier(), constant(0)),
      pool_layer("pool2", OpKind::max_pool, 2, 2),
      ip_layer("ip1", 500, xavier(), constant(0)),
      relu_layer("relu1"),
      ip_layer("ip2", in.classes, xavier(), constant(0)),
  };
  return n;
}

}  // namespace easel
