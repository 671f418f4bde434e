#!/usr/bin/env python3
"""Writes the larger built-in net descriptions (nets/models/*.toml) from their published
definitions: the files are what easel compiles in and what users read and copy; this script is
how they were written (run it from the repository root after changing it).

    python3 nets/models/generate_nets.py

Each net follows one published definition, named in its file's header.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


class Net:
    def __init__(self, name, description, header, channels, height, width, classes):
        self.lines = ["# " + l if l else "#" for l in header.strip().split("\n")]
        self.lines += ['name = "%s"' % name, 'description = "%s"' % description, "",
                       "[input]", "channels = %d" % channels, "height = %d" % height,
                       "width = %d" % width, "classes = %d" % classes]
        self.last = "data"

    def layer(self, name, type_, inputs=None, **fields):
        self.lines += ["", "[[layer]]", 'name = "%s"' % name, 'type = "%s"' % type_]
        if inputs is not None and inputs != [self.last]:
            self.lines.append("inputs = [%s]" % ", ".join('"%s"' % i for i in inputs))
        for k, v in fields.items():
            if isinstance(v, bool):
                v = "true" if v else "false"
            elif isinstance(v, str):
                v = '"%s"' % v
            elif isinstance(v, list):
                v = "[" + ", ".join(str(x) for x in v) + "]"
            self.lines.append("%s = %s" % (k, v))
        self.last = name
        return name

    def write(self, file):
        with open(os.path.join(HERE, file), "w") as f:
            f.write("\n".join(self.lines) + "\n")


def alexnet_cifar():
    n = Net("alexnet-cifar", "AlexNet's layers on 32x32 CIFAR images (5 conv, 3 inner product; "
            "58.3 M params with 10 classes, 62.4 M with 1000)", """
The paper's AlexNet for CIFAR-10 (You, Bulu\u00e7 and Demmel, SC17: 249 MB of weights). It is
Krizhevsky et al. (2012)'s AlexNet in its one-tower form (no grouped convolutions; the form
whose parameter count is the published 62,378,344 with 1000 classes, 249.5 MB of f32: the
paper's figure), with the layer widths, kernels, LRN and dropout of Caffe's bvlc_alexnet, made
for 32x32 inputs: conv1 11x11 at stride 1 (pad 5) instead of stride 4, and pool5 3x3 at stride 1,
so that pool5 is 256x6x6 as in the original and fc6 keeps its 9216 x 4096 weights. With 10
classes (fc8 4096 x 10): 58,322,314 parameters, 233 MB. Fillers as bvlc_alexnet.""",
            3, 32, 32, 10)
    def conv(name, oc, k, s, p, std, bias):
        n.layer(name, "conv", outputs=oc, kernel=k, stride=s, pad=p,
                weight_filler="gaussian:%g" % std, bias_filler="constant:%g" % bias,
                lr_mult=[1, 2], decay_mult=[1, 0])
    conv("conv1", 96, 11, 1, 5, 0.01, 0)
    n.layer("relu1", "relu")
    n.layer("norm1", "lrn", local_size=5, alpha=0.0001, beta=0.75)
    n.layer("pool1", "max_pool", kernel=3, stride=2)
    conv("conv2", 256, 5, 1, 2, 0.01, 0.1)
    n.layer("relu2", "relu")
    n.layer("norm2", "lrn", local_size=5, alpha=0.0001, beta=0.75)
    n.layer("pool2", "max_pool", kernel=3, stride=2)
    conv("conv3", 384, 3, 1, 1, 0.01, 0)
    n.layer("relu3", "relu")
    conv("conv4", 384, 3, 1, 1, 0.01, 0.1)
    n.layer("relu4", "relu")
    conv("conv5", 256, 3, 1, 1, 0.01, 0.1)
    n.layer("relu5", "relu")
    n.layer("pool5", "max_pool", kernel=3, stride=1)
    for i, (oc, std, bias) in enumerate([(4096, 0.005, 0.1), (4096, 0.005, 0.1)]):
        n.layer("fc%d" % (6 + i), "inner_product", outputs=oc, weight_filler="gaussian:%g" % std,
                bias_filler="constant:%g" % bias, lr_mult=[1, 2], decay_mult=[1, 0])
        n.layer("relu%d" % (6 + i), "relu")
        n.layer("drop%d" % (6 + i), "dropout", ratio=0.5)
    n.layer("fc8", "inner_product", outputs="classes", weight_filler="gaussian:0.01",
            lr_mult=[1, 2], decay_mult=[1, 0])
    n.write("alexnet-cifar.toml")


def cifar10_full():
    n = Net("cifar10-full", "Caffe's cifar10_full (3 conv 5x5, max/avg pools, within-channel "
            "LRN, 1 inner product; 89,578 params)", """
Caffe's cifar10_full (examples/cifar10/cifar10_full_train_test.prototxt): three 5x5
convolutions (32, 32, 64; pad 2), pools 3/2 (max, avg, avg; Caffe's ceil rounding), LRN within
channel (local_size 3, alpha 5e-05, beta 0.75) after pool1 and pool2, one inner product with
Caffe's decay_mult 250 on its weights. On 3x32x32 with 10 classes: 89,578 parameters.""",
            3, 32, 32, 10)
    n.layer("conv1", "conv", outputs=32, kernel=5, pad=2, weight_filler="gaussian:0.0001",
            lr_mult=[1, 2])
    n.layer("pool1", "max_pool", kernel=3, stride=2)
    n.layer("relu1", "relu")
    n.layer("norm1", "lrn", local_size=3, alpha=5e-05, beta=0.75, region="within_channel")
    n.layer("conv2", "conv", outputs=32, kernel=5, pad=2, weight_filler="gaussian:0.01",
            lr_mult=[1, 2])
    n.layer("relu2", "relu")
    n.layer("pool2", "avg_pool", kernel=3, stride=2)
    n.layer("norm2", "lrn", local_size=3, alpha=5e-05, beta=0.75, region="within_channel")
    n.layer("conv3", "conv", outputs=64, kernel=5, pad=2, weight_filler="gaussian:0.01",
            lr_mult=[1, 2])
    n.layer("relu3", "relu")
    n.layer("pool3", "avg_pool", kernel=3, stride=2)
    n.layer("ip1", "inner_product", outputs="classes", weight_filler="gaussian:0.01",
            lr_mult=[1, 2], decay_mult=[250, 0])
    n.write("cifar10-full.toml")


def vgg19():
    n = Net("vgg19", "VGG-19 (torchvision's vgg19, no batch norm; 143,667,240 params on "
            "224x224x3, 1000 classes)", """
VGG-19 (Simonyan and Zisserman 2015, configuration E) as torchvision's vgg19 defines it: sixteen
3x3 convolutions (pad 1) with ReLU in five stages of 64, 128, 256, 512, 512 channels, each
stage ended by a 2x2/2 max pool, then fc 4096, ReLU, dropout, fc 4096, ReLU, dropout, fc
(classes). On 3x224x224 with 1000 classes: 143,667,240 parameters. torchvision's adaptive
average pool to 7x7 is the identity at 224x224 and is left out (other sizes change fc6).""",
            3, 224, 224, 1000)
    stages = [(64, 2), (128, 2), (256, 4), (512, 4), (512, 4)]
    for s, (oc, reps) in enumerate(stages, 1):
        for r in range(1, reps + 1):
            n.layer("conv%d_%d" % (s, r), "conv", outputs=oc, kernel=3, pad=1,
                    weight_filler="msra")
            n.layer("relu%d_%d" % (s, r), "relu")
        n.layer("pool%d" % s, "max_pool", kernel=2, stride=2)
    for i in (6, 7):
        n.layer("fc%d" % i, "inner_product", outputs=4096, weight_filler="gaussian:0.01")
        n.layer("relu%d" % i, "relu")
        n.layer("drop%d" % i, "dropout", ratio=0.5)
    n.layer("fc8", "inner_product", outputs="classes", weight_filler="gaussian:0.01")
    n.write("vgg19.toml")


def resnet(depth):
    bottleneck = depth == 50
    blocks = {18: [2, 2, 2, 2], 50: [3, 4, 6, 3]}[depth]
    params = {18: "11,689,512", 50: "25,557,032"}[depth]
    n = Net("resnet%d" % depth, "ResNet-%d (torchvision's resnet%d; %s params on 224x224x3, "
            "1000 classes)" % (depth, depth, params), """
ResNet-%d (He et al. 2016) as torchvision's resnet%d defines it: conv1 7x7/2 (no bias), batch
norm, ReLU, max pool 3x3/2 pad 1 (floor rounding), four stages of %s blocks %s, global
average pool, fc (classes). Convolutions have no bias and are followed by batch norm (eps 1e-5,
momentum 0.1); a block's shortcut is a 1x1 convolution with batch norm where the shape changes
(torchvision's downsample; the stride on the 3x3 convolution as in its v1.5). On 3x224x224 with
1000 classes: %s parameters.""" % (
                depth, depth, "-".join(map(str, blocks)),
                "(1x1, 3x3, 1x1 bottlenecks, 4x expansion)" if bottleneck else "(two 3x3)",
                params), 3, 224, 224, 1000)

    def conv_bn(name, oc, k, s, p, relu, inputs=None):
        n.layer(name, "conv", inputs, outputs=oc, kernel=k, stride=s, pad=p, bias=False,
                weight_filler="msra")
        n.layer(name + "_bn", "batch_norm")
        if relu:
            n.layer(name + "_relu", "relu")
        return n.last

    x = conv_bn("conv1", 64, 7, 2, 3, True)
    x = n.layer("pool1", "max_pool", kernel=3, stride=2, pad=1, ceil_mode=False)
    in_ch = 64
    for stage, (planes, reps) in enumerate(zip([64, 128, 256, 512], blocks), 1):
        for b in range(reps):
            stride = 2 if stage > 1 and b == 0 else 1
            p = "layer%d_%d_" % (stage, b)
            out_ch = planes * (4 if bottleneck else 1)
            if bottleneck:
                y = conv_bn(p + "conv1", planes, 1, 1, 0, True, [x])
                y = conv_bn(p + "conv2", planes, 3, stride, 1, True)
                y = conv_bn(p + "conv3", out_ch, 1, 1, 0, False)
            else:
                y = conv_bn(p + "conv1", planes, 3, stride, 1, True, [x])
                y = conv_bn(p + "conv2", planes, 3, 1, 1, False)
            shortcut = x
            if stride != 1 or in_ch != out_ch:
                shortcut = conv_bn(p + "downsample", out_ch, 1, stride, 0, False, [x])
            n.layer(p + "add", "add", [y, shortcut])
            x = n.layer(p + "relu", "relu")
            in_ch = out_ch
    n.layer("pool5", "global_avg_pool")
    n.layer("fc", "inner_product", outputs="classes")
    n.write("resnet%d.toml" % depth)


def googlenet():
    n = Net("googlenet", "GoogLeNet (torchvision's googlenet without the auxiliary heads; "
            "6,624,904 params on 224x224x3, 1000 classes)", """
GoogLeNet (Szegedy et al. 2015, Inception v1) as torchvision's googlenet defines it, WITHOUT
the two auxiliary classifiers (aux_logits=False; they only add training losses): every
convolution is conv (no bias) + batch norm (eps 0.001) + ReLU; max pools 3x3/2 with ceil
rounding; nine inception blocks; global average pool, dropout 0.2, fc (classes). As in
torchvision, the "5x5" branch of each inception block uses a 3x3 convolution. On 3x224x224 with
1000 classes: 6,624,904 parameters (7.0 M in the paper's original form with 5x5 branches).""",
            3, 224, 224, 1000)

    def basic(name, oc, k, s=1, p=0, inputs=None):
        n.layer(name, "conv", inputs, outputs=oc, kernel=k, stride=s, pad=p, bias=False,
                weight_filler="msra")
        n.layer(name + "_bn", "batch_norm", eps=0.001)
        return n.layer(name + "_relu", "relu")

    basic("conv1", 64, 7, 2, 3)
    n.layer("pool1", "max_pool", kernel=3, stride=2)
    basic("conv2", 64, 1)
    basic("conv3", 192, 3, 1, 1)
    x = n.layer("pool2", "max_pool", kernel=3, stride=2)
    blocks = [("3a", 64, 96, 128, 16, 32, 32), ("3b", 128, 128, 192, 32, 96, 64), "pool3",
              ("4a", 192, 96, 208, 16, 48, 64), ("4b", 160, 112, 224, 24, 64, 64),
              ("4c", 128, 128, 256, 24, 64, 64), ("4d", 112, 144, 288, 32, 64, 64),
              ("4e", 256, 160, 320, 32, 128, 128), "pool4",
              ("5a", 256, 160, 320, 32, 128, 128), ("5b", 384, 192, 384, 48, 128, 128)]
    for b in blocks:
        if b == "pool3":
            x = n.layer("pool3", "max_pool", [x], kernel=3, stride=2)
            continue
        if b == "pool4":
            x = n.layer("pool4", "max_pool", [x], kernel=2, stride=2)
            continue
        name, c1, c3r, c3, c5r, c5, pp = b
        p = "inception" + name + "_"
        b1 = basic(p + "1x1", c1, 1, inputs=[x])
        basic(p + "3x3_reduce", c3r, 1, inputs=[x])
        b2 = basic(p + "3x3", c3, 3, 1, 1)
        basic(p + "5x5_reduce", c5r, 1, inputs=[x])
        b3 = basic(p + "5x5", c5, 3, 1, 1)
        n.layer(p + "pool", "max_pool", [x], kernel=3, stride=1, pad=1)
        b4 = basic(p + "pool_proj", pp, 1)
        x = n.layer(p + "output", "concat", [b1, b2, b3, b4])
    n.layer("pool5", "global_avg_pool", [x])
    n.layer("drop5", "dropout", ratio=0.2)
    n.layer("fc", "inner_product", outputs="classes")
    n.write("googlenet.toml")


if __name__ == "__main__":
    alexnet_cifar()
    cifar10_full()
    vgg19()
    resnet(18)
    resnet(50)
    googlenet()
