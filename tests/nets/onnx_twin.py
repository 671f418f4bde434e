#!/usr/bin/python3
"""Writes a PyTorch net as torch.onnx.export does, with the batch and PyTorch's logits, for
tests/nets/test_onnx_import.cpp:  onnx_twin.py NET OUT_DIR [OPSET]
  NET: lenet, cifar10-quick, alexnet-cifar (the twins of tools/pytorch/net_equivalence.py),
       resnet18, googlenet, vgg19 (torchvision, 10 classes, 3x32x32), vgg19-224 (3x224x224),
       sigmoid (a net with an op easel lacks).
OUT_DIR/NET.onnx, OUT_DIR/images.bin (float32 [4, C, H, W]) and OUT_DIR/logits.bin (float32
[4, classes], the eval-mode forward pass in float64, rounded), and (at most 100x100 images) one
training step's gradients (gradients() below). Exit 77 without torch."""
import copy
import os
import sys

try:
    import torch
    import torch.nn as nn
except ImportError:
    sys.exit(77)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "pytorch"))
import net_equivalence as ne  # noqa: E402


def build(name):
    if name in ne.CAFFE_NETS:
        c, hw = (1, 28) if name == "lenet" else (3, 32)
        return ne.CAFFE_NETS[name](c, 10), (c, hw, hw)
    if name == "sigmoid":
        return nn.Sequential(nn.Conv2d(1, 4, 3), nn.Sigmoid(), nn.Flatten(),
                             nn.Linear(4 * 26 * 26, 10)), (1, 28, 28)
    if name == "vgg19-224":  # its classifier at its own size: 7 x 7 after the features
        return ne.torchvision_net("vgg19", 10), (3, 224, 224)
    model = ne.torchvision_net(name, 10)
    if name == "vgg19":  # as easel's vgg19 at 32x32: no adaptive pool (1x1 to 7x7), fc6 of 512
        model.avgpool = nn.Identity()
        model.classifier[0] = nn.Linear(512, 4096)
    return model, (3, 32, 32)


def hostile(out):
    """Files a reader must refuse: an initializer shorter than its shape, a huge input side."""
    import onnx
    from onnx import helper, TensorProto
    os.makedirs(out, exist_ok=True)

    def write(path, w_dims, w_bytes, in_dims):
        w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=w_dims,
                        raw_data=b"\0" * w_bytes)
        node = helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)
        g = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        onnx.save(m, os.path.join(out, path))
    write("short_init.onnx", [10, 784], 4 * 700, [1, 1, 28, 28])
    write("huge_dim.onnx", [1 << 40, 1 << 40], 16, [1, 1, 28, 28])
    write("huge_input.onnx", [10, 784], 4 * 7840, [1, 1, 1 << 40, 28])

    def graph(path, nodes, outputs):
        g = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, 1, 4, 4])
                               for o in outputs])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        onnx.save(m, os.path.join(out, path))
    graph("two_outputs.onnx", [helper.make_node("Relu", ["x"], ["y"], name="r1"),
                               helper.make_node("Relu", ["x"], ["z"], name="r2")], ["y", "z"])
    lrn_variants(out)
    graph("cycle.onnx", [helper.make_node("Add", ["x", "b"], ["a"], name="add"),
                         helper.make_node("Relu", ["a"], ["b"], name="r")], ["b"])


def lrn_variants(out):
    """PyTorch's LRN subgraph (nets/models/onnx_lrn.hpp) with one node changed: the window of
    its AveragePool 3 (its pads are for 5), a Sigmoid in place of its Unsqueeze, its alpha a
    tensor of 2 values."""
    import onnx
    from onnx import helper, numpy_helper
    import numpy as np
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.LocalResponseNorm(5), nn.Flatten(),
                          nn.Linear(4 * 26 * 26, 10))
    path = os.path.join(out, "lrn.onnx")
    torch.onnx.export(model, torch.zeros(1, 1, 28, 28), path, opset_version=13)
    base = onnx.load(path)

    def variant(name, edit):
        m = onnx.ModelProto()
        m.CopyFrom(base)
        for n in m.graph.node:
            edit(n)
        onnx.save(m, os.path.join(out, name))

    def window(n):
        if n.op_type == "AveragePool":
            n.attribute[[a.name for a in n.attribute].index("kernel_shape")].ints[0] = 3

    def sigmoid(n):
        if n.op_type == "Unsqueeze" and n.input[0].endswith("Mul_output_0"):
            n.op_type, n.name = "Sigmoid", "/1/Sigmoid"
            del n.input[1:]

    alpha_name = [n.input[1] for n in base.graph.node if n.name == "/1/Mul_1"][0]

    def alpha(n):
        if n.op_type == "Constant" and n.output[0] == alpha_name:
            n.attribute[0].t.CopyFrom(numpy_helper.from_array(np.ones(2, np.float32)))
    variant("lrn_window.onnx", window)
    variant("lrn_sigmoid.onnx", sigmoid)
    variant("lrn_alpha.onnx", alpha)


def gradients(model, x, out):
    """One training step's d mean_loss / d parameter, as easel's train_step computes it (batch
    norm on the batch's statistics; no Dropout: the eval-mode export has none), in float64 and
    in float32 (PyTorch's own round-off): OUT/labels.bin (int32 [4]), OUT/grads/NAME.bin and
    OUT/grads_f32/NAME.bin (float32, PyTorch's shape), NAME being the parameter's (the ONNX
    initializer's) name."""
    labels = torch.arange(x.shape[0], dtype=torch.int64) % 10
    labels.int().numpy().tofile(os.path.join(out, "labels.bin"))
    for dtype, sub in ((torch.float64, "grads"), (torch.float32, "grads_f32")):
        m = copy.deepcopy(model).to(dtype).train()
        for d in m.modules():
            if isinstance(d, nn.Dropout):
                d.eval()
        nn.functional.cross_entropy(m(x.to(dtype)), labels).backward()
        os.makedirs(os.path.join(out, sub), exist_ok=True)
        for name, p in m.named_parameters():
            p.grad.float().numpy().tofile(os.path.join(out, sub, name + ".bin"))


def main():
    if sys.argv[1] == "hostile":
        return hostile(sys.argv[2])
    name, out = sys.argv[1], sys.argv[2]
    opset = int(sys.argv[3]) if len(sys.argv) > 3 else 13
    torch.manual_seed(1)
    model, shape = build(name)
    x = torch.rand(4, *shape) * 2 - 1
    with torch.no_grad():
        model(x)  # materialise the lazy inner products
        for m in model.modules():  # statistics that are not the identity's
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    model.eval()
    os.makedirs(out, exist_ok=True)
    # PRESERVE: batch norm stays a node (eval mode would fold it into the convolutions).
    torch.onnx.export(model, x, os.path.join(out, name + ".onnx"), opset_version=opset,
                      training=torch.onnx.TrainingMode.PRESERVE)
    if shape[1] <= 100:
        gradients(model, x, out)
    with torch.no_grad():
        logits = model.double()(x.double()).float()
    x.numpy().tofile(os.path.join(out, "images.bin"))
    logits.numpy().tofile(os.path.join(out, "logits.bin"))


if __name__ == "__main__":
    main()
