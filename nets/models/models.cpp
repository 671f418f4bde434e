#include "nets/models/models.hpp"

#include <array>

namespace easel {

namespace {
constexpr std::array kModels = {
    ModelEntry{"lenet",
               "Caffe's LeNet (2 conv, 2 max-pool, 2 inner product; 431,080 params "
               "on 28x28x1)",
               build_lenet},
    ModelEntry{"cifar10-quick",
               "Caffe's cifar10_quick (3 conv 5x5, max/avg pools, 2 inner product)",
               build_cifar10_quick},
    ModelEntry{"mlp", "two inner products with ReLU (64 hidden), for tests and quick checks",
               build_mlp},
};
}  // namespace

std::span<const ModelEntry> model_list() {
  return kModels;
}

Result<NetSpec> build_model(std::string_view name, const ModelInput& in) {
  std::string known;
  for (const auto& m : kModels) {
    if (name == m.name) return m.build(in);
    known += known.empty() ? "" : ", ";
    known += m.name;
  }
  return invalid_argument("--net: unknown model '" + std::string(name) + "' (known: " + known +
                          ")");
}

LayerSpec conv_layer(std::string name, int64_t oc, int64_t k, int64_t stride, int64_t pad,
                     Filler weights, Filler bias) {
  LayerSpec l;
  l.name = std::move(name);
  l.op.kind = OpKind::conv;
  l.op.oc = oc;
  l.op.kh = l.op.kw = k;
  l.op.stride_h = l.op.stride_w = stride;
  l.op.pad_h = l.op.pad_w = pad;
  l.fillers = {weights, bias};
  l.lr_mult = {1.f, 2.f};
  l.decay_mult = {1.f, 1.f};
  return l;
}

LayerSpec ip_layer(std::string name, int64_t oc, Filler weights, Filler bias) {
  LayerSpec l;
  l.name = std::move(name);
  l.op.kind = OpKind::inner_product;
  l.op.oc = oc;
  l.fillers = {weights, bias};
  l.lr_mult = {1.f, 2.f};
  l.decay_mult = {1.f, 1.f};
  return l;
}

LayerSpec pool_layer(std::string name, OpKind kind, int64_t k, int64_t stride, int64_t pad) {
  LayerSpec l;
  l.name = std::move(name);
  l.op.kind = kind;
  l.op.kh = l.op.kw = k;
  l.op.stride_h = l.op.stride_w = stride;
  l.op.pad_h = l.op.pad_w = pad;
  return l;
}

LayerSpec relu_layer(std::string name) {
  LayerSpec l;
  l.name = std::move(name);
  l.op.kind = OpKind::relu;
  return l;
}

LayerSpec lrn_layer(std::string name, int64_t local_size, float alpha, float beta) {
  LayerSpec l;
  l.name = std::move(name);
  l.op.kind = OpKind::lrn;
  l.op.local_size = local_size;
  l.op.alpha = alpha;
  l.op.beta = beta;
  return l;
}

LayerSpec dropout_layer(std::string name, float ratio) {
  LayerSpec l;
  l.name = std::move(name);
  l.op.kind = OpKind::dropout;
  l.op.ratio = ratio;
  return l;
}

}  // namespace easel
