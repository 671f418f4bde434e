#!/usr/bin/python3
"""Draws random nets from the net description grammar (docs/NETS.md): the performance model's
out-of-sample nets (`tools/model-check --holdout`, docs/MODEL.md), drawn fresh on each run so
that no net the model predicts was seen when the model was written.

  tools/random_nets.py --out DIR [--count N] [--seed S]

Writes DIR/random-S-I.toml for I = 0 .. N-1 and prints the seed first (a fresh one from the
operating system unless --seed gives one; the same seed draws the same files, byte for byte)
and one line per net. Net I of seed S is drawn from a generator of its own (S and I mixed), so
it does not depend on N.

A net: an input of 1x28x28 or 3x32x32; a stem convolution (3x3, 5x5 or 7x7, stride 1 or 2,
batch norm or not); 2 to 5 blocks, each a plain convolution (1x1, 3x3 or 5x5, stride 1 or 2),
a residual pair added to its input (through a 1x1 projection where the shape changes), 2 or 3
branches joined by concatenation (1x1, 3x3 and 5x5 convolutions, a pooled branch), or a max or
average pool of stride 2, with batch norm, an LRN or a dropout here and there; a head of a
global average pool or of an inner product over the whole map, up to two wide inner products
(256 to 4096 outputs, some with weights above the model's streamed threshold, 8 MiB) and the
classifier. Channels 8 to 256. Bounds, so that one net's measurement takes seconds: 2 to 60
MFLOP forward per image and at most 8 M parameters (a net outside them is drawn again, from the
same generator). Exit 2 on a bad flag.
"""
import argparse
import os
import sys

MASK = (1 << 64) - 1
STREAMED_WEIGHT_BYTES = 8 * (1 << 20)  # model/layer_rates.hpp's kStreamedWeightBytes
MIN_FLOPS, MAX_FLOPS = 2e6, 60e6  # forward, per image
MAX_PARAMS = 8_000_000
CHANNELS = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256)
WIDTHS = (256, 512, 1024, 1024, 2048, 3072, 4096)
INPUTS = ((1, 28, 28), (3, 32, 32))
CLASSES = 10


class Rng:
    """splitmix64: the same numbers on every Python (random.Random's methods have changed
    between versions)."""

    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n

    def choice(self, seq):
        return seq[self.below(len(seq))]

    def chance(self, p):
        return self.next() < p * float(1 << 64)


def net_rng(seed, index):
    """Net `index` of `seed`'s own generator."""
    mix = Rng(seed)
    for _ in range(index + 1):
        mix.next()
    return Rng(mix.next() ^ (index * 0xD1B54A32D192ED03 & MASK))


def conv_size(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def pool_size(n, k, s, p, ceil_mode):
    """devices/ops/pool.cpp's pooled_size."""
    span = n + 2 * p - k
    if not ceil_mode:
        return span // s + 1
    out = (span + s - 1) // s + 1
    if p > 0 and (out - 1) * s >= n + p:
        out -= 1
    return out


class Net:
    """A description being written: its layers (TOML text), each layer's output shape, and the
    forward FLOPs and parameters counted as the model counts them."""

    def __init__(self, name, shape):
        self.name = name
        self.input = shape
        self.layers = []
        self.shape = {"data": shape}
        self.flops = 0.0
        self.params = 0
        self.types = set()  # constructs drawn: layer types, and "conv1x1", "stride2", "streamed"
        self.count = 0

    def add(self, kind, inputs, shape, keys=""):
        self.count += 1
        name = "%s%d" % (kind.replace("_", ""), self.count)
        self.layers.append('\n[[layer]]\nname = "%s"\ntype = "%s"\ninputs = [%s]\n%s' %
                           (name, kind, ", ".join('"%s"' % i for i in inputs), keys))
        self.shape[name] = shape
        self.types.add(kind)
        return name

    def conv(self, x, outputs, kernel, stride=1, pad=None, bias=True):
        c, h, w = self.shape[x]
        pad = kernel // 2 if pad is None else pad
        oh, ow = conv_size(h, kernel, stride, pad), conv_size(w, kernel, stride, pad)
        self.flops += 2.0 * outputs * c * kernel * kernel * oh * ow
        self.params += outputs * c * kernel * kernel + (outputs if bias else 0)
        if kernel == 1:
            self.types.add("conv1x1")
        if stride > 1:
            self.types.add("stride2")
        keys = 'outputs = %d\nkernel = %d\nstride = %d\npad = %d\nweight_filler = "msra"\n' % (
            outputs, kernel, stride, pad)
        return self.add("conv", [x], (outputs, oh, ow), keys + ("" if bias else "bias = false\n"))

    def unary(self, kind, x, keys=""):
        if kind == "batch_norm":
            self.params += 2 * self.shape[x][0]
        return self.add(kind, [x], self.shape[x], keys)

    def pool(self, kind, x, kernel, stride, pad=0, ceil_mode=True):
        c, h, w = self.shape[x]
        oh, ow = pool_size(h, kernel, stride, pad, ceil_mode), pool_size(w, kernel, stride, pad,
                                                                         ceil_mode)
        self.flops += float(c * oh * ow * kernel * kernel)
        keys = "kernel = %d\nstride = %d\npad = %d\n" % (kernel, stride, pad)
        return self.add(kind, [x], (c, oh, ow), keys + ("" if ceil_mode else "ceil_mode = false\n"))

    def inner_product(self, x, outputs):
        c, h, w = self.shape[x]
        self.flops += 2.0 * outputs * c * h * w
        self.params += outputs * (c * h * w + 1)
        if 4 * outputs * c * h * w > STREAMED_WEIGHT_BYTES:
            self.types.add("streamed")
        out = '"classes"' if outputs == CLASSES else str(outputs)
        return self.add("inner_product", [x], (outputs, 1, 1), "outputs = %s\n" % out)

    def text(self, description):
        c, h, w = self.input
        head = ('name = "%s"\ndescription = "%s"\n\n[input]\nchannels = %d\nheight = %d\n'
                'width = %d\nclasses = %d\n' % (self.name, description, c, h, w, CLASSES))
        return head + "".join(self.layers)


def conv_bn_relu(net, r, x, outputs, kernel, stride=1, bn=None):
    bn = r.chance(0.5) if bn is None else bn
    y = net.conv(x, outputs, kernel, stride, bias=not bn)
    if bn:
        y = net.unary("batch_norm", y)
    return net.unary("relu", y)


def wider(r, c):
    """The next block's channels: the same, or the next one or two sizes up."""
    i = CHANNELS.index(c) if c in CHANNELS else 0
    return CHANNELS[min(i + r.choice((0, 0, 1, 2)), len(CHANNELS) - 1)]


def plain_block(net, r, x):
    c, h, _ = net.shape[x]
    kernel = r.choice([k for k in (1, 3, 5) if k <= h] or [1])
    stride = 2 if h >= 8 and r.chance(0.3) else 1
    return conv_bn_relu(net, r, x, wider(r, c), kernel, stride)


def residual_block(net, r, x):
    c, h, _ = net.shape[x]
    out = wider(r, c)
    stride = 2 if h >= 8 and r.chance(0.4) else 1
    bn = r.chance(0.7)
    y = conv_bn_relu(net, r, x, out, 3, stride, bn)
    y = net.conv(y, out, 3, bias=not bn)
    if bn:
        y = net.unary("batch_norm", y)
    shortcut = x
    if out != c or stride != 1:
        shortcut = net.conv(x, out, 1, stride, bias=not bn)
        if bn:
            shortcut = net.unary("batch_norm", shortcut)
    return net.unary("relu", net.add("add", [y, shortcut], net.shape[y]))


def branch_block(net, r, x):
    """2 or 3 branches of the same map size, concatenated along the channels."""
    c, h, w = net.shape[x]
    kinds = ["1x1", "3x3", "5x5", "pool"]
    branches = []
    for _ in range(2 + r.below(2)):
        kind = kinds.pop(r.below(len(kinds)))
        out = r.choice(CHANNELS[:6])
        if kind == "1x1":
            y = conv_bn_relu(net, r, x, out, 1)
        elif kind == "pool":
            y = net.pool(r.choice(("max_pool", "avg_pool")), x, 3, 1, 1)
            if r.chance(0.5):
                y = conv_bn_relu(net, r, y, out, 1)
        else:
            y = conv_bn_relu(net, r, x, r.choice(CHANNELS[:4]), 1) if r.chance(0.5) else x
            y = conv_bn_relu(net, r, y, out, int(kind[0]))
        branches.append(y)
    channels = sum(net.shape[b][0] for b in branches)
    return net.add("concat", branches, (channels, h, w))


def pool_block(net, r, x):
    kernel = r.choice((2, 3))
    return net.pool(r.choice(("max_pool", "avg_pool")), x, kernel, 2, 0, r.chance(0.5))


def extras(net, r, x):
    """Now and then an LRN or a dropout after a block."""
    if r.chance(0.15):
        region = r.choice(("across_channels", "within_channel"))
        x = net.unary("lrn", x, 'local_size = %d\nregion = "%s"\n' % (r.choice((3, 5)), region))
    if r.chance(0.1):
        x = net.unary("dropout", x, "ratio = 0.5\n")
    return x


def head(net, r, x):
    """A global average pool or not, hidden inner products, the classifier. One head in three is
    wide: two hidden inner products of 1024 to 4096 outputs, whose second one's weights mostly
    exceed the streamed threshold."""
    c, h, w = net.shape[x]
    if h > 1 and r.chance(0.5):
        x = net.unary("global_avg_pool", x)
        net.shape[x] = (c, 1, 1)
        net.flops += float(c * h * w)
    wide = r.chance(0.35)
    for _ in range(2 if wide else r.below(3)):
        x = net.unary("relu", net.inner_product(x, r.choice(WIDTHS[2:] if wide else WIDTHS[:3])))
        if r.chance(0.5):
            x = net.unary("dropout", x, "ratio = 0.5\n")
    return net.inner_product(x, CLASSES)


BLOCKS = (plain_block, residual_block, branch_block, pool_block)


def draw_once(r, name):
    net = Net(name, r.choice(INPUTS))
    stem_kernel = r.choice((3, 5, 7))
    stride = 2 if r.chance(0.3) else 1
    x = conv_bn_relu(net, r, "data", r.choice(CHANNELS[:6]), stem_kernel, stride)
    for _ in range(2 + r.below(4)):
        block = r.choice(BLOCKS)
        if net.shape[x][1] < 4 and block is pool_block:
            block = plain_block
        x = extras(net, r, block(net, r, x))
    head(net, r, x)
    return net


def net_name(seed, index):
    return "random-%d-%d" % (seed, index)


def draw(seed, index):
    """Net `index` of `seed`: drawn until within the bounds (at most 1000 draws; the same ones
    on every run)."""
    r = net_rng(seed, index)
    name = net_name(seed, index)
    for _ in range(1000):
        net = draw_once(r, name)
        if MIN_FLOPS <= net.flops <= MAX_FLOPS and net.params <= MAX_PARAMS:
            return net
    raise RuntimeError("no net within the bounds in 1000 draws (seed %d, net %d)" % (seed, index))


def fresh_seed():
    return int.from_bytes(os.urandom(4), "little")


def write_nets(seed, count, out):
    """Writes `count` nets of `seed` to `out`; returns their paths, in order, and prints one
    line each."""
    os.makedirs(out, exist_ok=True)
    paths = []
    for i in range(count):
        net = draw(seed, i)
        path = os.path.join(out, net.name + ".toml")
        desc = "drawn by tools/random_nets.py, seed %d, net %d" % (seed, i)
        with open(path, "w") as f:
            f.write(net.text(desc))
        print("  %s: %dx%dx%d, %d layers, %.1f MFLOP forward per image, %.2f M parameters (%s)"
              % (path, *net.input, net.count, net.flops / 1e6, net.params / 1e6,
                 ", ".join(sorted(net.types))), flush=True)
        paths.append(path)
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=4)
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    if a.count < 1 or a.count > 10000:
        sys.stderr.write("random_nets: --count: %d is not in [1, 10000]\n" % a.count)
        return 2
    if a.seed is not None and not 0 <= a.seed < (1 << 63):
        sys.stderr.write("random_nets: --seed: %d is not in [0, 2^63)\n" % a.seed)
        return 2
    seed = fresh_seed() if a.seed is None else a.seed
    print("random nets: seed %d (tools/random_nets.py --seed %d --count %d reproduces them)" %
          (seed, seed, a.count), flush=True)
    write_nets(seed, a.count, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
