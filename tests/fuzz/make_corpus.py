#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/NAME).

The valid checkpoint and resume seeds (corpus/checkpoint/*.bin, corpus/resume/*.json of an
algorithm's name) are real runs' checkpoint.bin and config.json (the commands are in
docs/RELIABILITY.md); this script derives near-valid ones from them. The net seeds are the
built-in nets (nets/models/*.toml), docs/nets/small-resnet.toml and edits of them; the JPEG
seeds come from libjpeg-turbo's cjpeg (apt-get install libjpeg-turbo-progs), the PNG and
CIFAR ones from this script alone.
Run from anywhere: python3 tests/fuzz/make_corpus.py
"""
import glob
import gzip
import os
import random
import shutil
import struct
import subprocess
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def idx(magic, dims, data):
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + data


def pair(images, labels):
    """The input of fuzz_idx: u32 little-endian length of the images file, it, the labels."""
    return struct.pack("<I", len(images)) + images + labels


def gz(b):
    return gzip.compress(b, mtime=0)


def idx_seeds():
    n, rows, cols = 5, 3, 4
    px = bytes(i % 256 for i in range(n * rows * cols))
    img = idx(0x803, [n, rows, cols], px)
    lab = idx(0x801, [n], bytes([0, 9, 3, 5, 1]))
    g = gz(img)
    return {
        "plain": pair(img, lab),
        "gzip": pair(g, gz(lab)),
        "mixed": pair(g, lab),
        "members": pair(gz(img[:20]) + gz(img[20:]), lab),
        "mnist-like": pair(gz(idx(0x803, [2, 28, 28], bytes(range(256)) * 6 + bytes(32))),
                           idx(0x801, [2], bytes([7, 2]))),
        "truncated": pair(img[:40], lab),
        "gzip-cut": pair(g[: len(g) // 2], lab),
        "junk-after-gzip": pair(g + b"junk", lab),
        "inflates-past": pair(gz(img + bytes(1000)), lab),
        "claims-more": pair(gz(idx(0x803, [20000000, 28, 28], px)), lab),
        "swapped": pair(lab, img),
        "count-mismatch": pair(img, idx(0x801, [4], bytes([1, 2, 3, 4]))),
        "bad-label": pair(img, idx(0x801, [n], bytes([0, 1, 2, 10, 4]))),
        "bad-crc": pair(g[:-8] + bytes([g[-8] ^ 0xFF]) + g[-7:], lab),
    }


def config_seeds():
    return {
        "basic.toml": b'algo = "sync-easgd"\ngroups = 4\nlr = 0.05\nbatch = 64\n',
        "all-types.toml": b'# a comment\nnet = "lenet"\ndata = "synthetic:256"\n'
                          b'iterations = 100\nmomentum = 0.9\nlr-policy = "inv"\n'
                          b'overwrite = true\nseed = 7\n',
        "strings.toml": b"out = 'runs/a'\ndata = \"\"\"synthetic\"\"\"\ncpus = \"0-3\"\n",
        "unknown-key.toml": b'no-such-flag = 1\n',
        "nested.toml": b'[train]\nlr = 0.1\n',
        "bad-bool.toml": b'overwrite = "yes"\n',
        "empty-value.toml": b'algo = ""\n',
        "array.toml": b'groups = [1, 2]\n',
        "syntax-error.toml": b'lr = = 0.1\n',
        "config-key.toml": b'config = "other.toml"\n',
        "dates.toml": b'seed = 1979-05-27T07:32:00Z\nlr = inf\nmomentum = nan\n',
        "unicode.toml": b'"out" = "r\\u00e9sultats"\n\'algo\' = \'sgd\'\n',
    }


def net_seeds():
    """The built-in nets and the documented example, whole, and edits of small ones."""
    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "nets", "models", "*.toml"))) + [
            os.path.join(ROOT, "docs", "nets", "small-resnet.toml")]:
        with open(path, "rb") as f:
            out[os.path.basename(path)] = f.read()
    lenet, resnet = out["lenet.toml"], out["small-resnet.toml"]
    big_input = b"[input]\nchannels = 4096\nheight = 65536\nwidth = 65536\nclasses = 1000000\n"
    edits = {
        # sizes at their limits: a cost of absurd shapes, never an allocation
        "outputs-million.toml": lenet.replace(b"outputs = 500", b"outputs = 1000000"),
        "huge-input.toml": lenet.replace(b"[input]\nchannels = 1\nheight = 28\nwidth = 28\n"
                                         b"classes = 10\n", big_input),
        "huge-input-million.toml": lenet.replace(b"[input]\nchannels = 1\nheight = 28\n"
                                                 b"width = 28\nclasses = 10\n", big_input)
                                        .replace(b"outputs = 500", b"outputs = 1048576"),
        "pad-max.toml": lenet.replace(b"kernel = 5", b"kernel = 1\npad = 1048576"),
        "kernel-stride-max.toml": lenet.replace(b"kernel = 5", b"kernel = 1048576\n"
                                                b"stride = 1048576\npad = 1048576"),
        "window-pairs.toml": lenet.replace(b"kernel = 5", b"kernel_h = 5\nkernel_w = 3\n"
                                           b"stride_h = 2\nstride_w = 1\npad_h = 1\npad_w = 0"),
        # the shapes, the wiring and the keys refused
        "kernel-too-big.toml": lenet.replace(b"kernel = 5", b"kernel = 29", 1),
        "classes-mismatch.toml": lenet.replace(b'outputs = "classes"', b"outputs = 7"),
        "cycle.toml": lenet.replace(b'name = "conv2"', b'name = "conv2"\ninputs = ["ip1"]'),
        "dangling.toml": lenet.replace(b'name = "ip2"', b'name = "ip2"\ninputs = ["nowhere"]'),
        "unread.toml": lenet.replace(b'name = "ip1"', b'name = "ip1"\ninputs = ["conv1"]'),
        "unknown-type.toml": lenet.replace(b'type = "relu"', b'type = "gelu"'),
        "unknown-key.toml": lenet.replace(b"kernel = 5", b"kernel = 5\ndilation = 2", 1),
        "fillers.toml": lenet.replace(b"lr_mult = [1, 2]", b'weight_filler = "gaussian:0.01"\n'
                                      b'bias_filler = "uniform:-1:1"\ndecay_mult = [1, 0]', 1),
        "no-layers.toml": b'name = "empty"\n',
        "name-newline.toml": lenet.replace(b'name = "conv2"', b'name = "conv\\n2"')
                                  .replace(b'name = "lenet"', b'name = "le\\nnet"'),
        "concat-add.toml": resnet.replace(b'type = "add"', b'type = "concat"', 1),
        "lrn-dropout.toml": lenet.replace(b'type = "relu"', b'type = "lrn"\nlocal_size = 3\n'
                                          b'region = "within_channel"\n[[layer]]\n'
                                          b'name = "drop"\ntype = "dropout"\nratio = 0.5'),
    }
    for name, text in edits.items():
        assert text not in out.values(), name  # every edit changed something
        out[name] = text
    return out


def cifar_record(label_bytes, labels, seed):
    r = random.Random(seed)
    return bytes(labels) + bytes(r.randrange(256) for _ in range(3 * 32 * 32))


def cifar_file(label_bytes, labels_list, seed):
    return b"".join(cifar_record(label_bytes, labels, seed + i) for i, labels in
                    enumerate(labels_list))


def cifar_input(layout, files):
    """The input of fuzz_cifar: the layout byte, each file but the last behind its u32 length."""
    out = bytes([layout])
    for f in files[:-1]:
        out += struct.pack("<I", len(f)) + f
    return out + (files[-1] if files else b"")


def cifar_seeds():
    c10 = lambda labels, seed: cifar_file(1, [[l] for l in labels], seed)
    c100 = lambda pairs, seed: cifar_file(2, [list(p) for p in pairs], seed)
    train, test = c10([3, 9], 1), c10([0], 3)
    return {
        "cifar10-one-batch": cifar_input(0b0000010, [train, test]),
        "cifar10-two-batches": cifar_input(0b0010010, [train, c10([1], 5), test]),
        "cifar10-no-test": cifar_input(0b1000010, [train]),
        "cifar10-test-only": cifar_input(0b0000000, [test]),
        "cifar10-bad-label": cifar_input(0b0000010, [c10([3, 10], 1), test]),
        "cifar10-cut": cifar_input(0b0000010, [train[:-5], test]),
        "cifar10-empty-test": cifar_input(0b0000010, [train, b""]),
        "cifar10-test-a-dir": cifar_input(0b10000010, [train, test]),
        "cifar100": cifar_input(0b1, [c100([(19, 99), (0, 0)], 7), c100([(5, 42)], 9)]),
        "cifar100-bad-coarse": cifar_input(0b1, [c100([(20, 1)], 7), c100([(5, 42)], 9)]),
        "cifar100-no-test": cifar_input(0b101, [c100([(1, 1)], 7)]),
        "none": bytes([0b1000000]),
    }


def png_chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data +
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]  # x0, y0, x step, y step of each pass


def png(width, height, depth, color, rows, interlace=0, extra=b"", ihdr=None, pixel_bytes=0):
    """A PNG of rows (each row's bytes without its filter byte: filter 0 added). Interlaced:
    rows of whole pixels of pixel_bytes each, split into Adam7's passes."""
    head = ihdr if ihdr is not None else struct.pack(">IIBBBBB", width, height, depth, color, 0,
                                                     0, interlace)
    if interlace:
        px = lambda x, y: rows[y][x * pixel_bytes:(x + 1) * pixel_bytes]
        rows = [b"".join(px(x, y) for x in range(x0, width, dx))
                for x0, y0, dx, dy in ADAM7 if x0 < width
                for y in range(y0, height, dy)]
    raw = b"".join(b"\0" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", head) + extra +
            png_chunk(b"IDAT", zlib.compress(raw, 9)) + png_chunk(b"IEND", b""))


def image_input(flags, data):
    """The input of fuzz_image: the flags byte (side - 1 in bits 0-4), then the file."""
    return bytes([flags]) + data


PNG_FLAG, FOLDER, FULL = 32, 64, 128


def png_seeds():
    w, h = 7, 5
    rgb = [bytes((x * 37 + y * 11 + c * 5) % 256 for x in range(w) for c in range(3))
           for y in range(h)]
    grey = [bytes((x * 30 + y) % 256 for x in range(w)) for y in range(h)]
    rgba = [bytes((x + y + c) % 256 for x in range(w) for c in range(4)) for y in range(h)]
    rgb16 = [bytes((x * 7 + c) % 256 for x in range(w) for c in range(6)) for y in range(h)]
    grey2 = [bytes([0b00011011, 0b11100100]) for _ in range(h)]  # 7 px of 2 bits: 2 bytes
    pal = [bytes([(x + y) % 3 for x in range(w)]) for y in range(h)]
    plte = png_chunk(b"PLTE", bytes([255, 0, 0, 0, 255, 0, 0, 0, 255]))
    trns = png_chunk(b"tRNS", bytes([0, 128]))
    good = png(w, h, 8, 2, rgb)
    # a header claiming 2^31-1 x 2^31-1 pixels, and one just under the 2^27 pixel limit
    huge = png(1, 1, 8, 2, [bytes(3)], ihdr=struct.pack(">IIBBBBB", 0x7FFFFFFF, 0x7FFFFFFF, 8,
                                                         2, 0, 0, 0))
    at_limit = png(1, 1, 8, 2, [bytes(3)], ihdr=struct.pack(">IIBBBBB", 11585, 11585, 8, 2, 0,
                                                            0, 0))
    return {
        "rgb.png": image_input(PNG_FLAG | 3, good),
        "rgb-folder.png": image_input(PNG_FLAG | FOLDER | 4, good),
        "grey.png": image_input(PNG_FLAG | 7, png(w, h, 8, 0, grey)),
        "grey-2bit.png": image_input(PNG_FLAG | 2, png(w, h, 2, 0, grey2)),
        "rgba.png": image_input(PNG_FLAG | 5, png(w, h, 8, 6, rgba)),
        "rgb16-interlaced.png": image_input(PNG_FLAG | FOLDER | 6,
                                            png(w, h, 16, 2, rgb16, interlace=1,
                                                pixel_bytes=6)),
        "palette-trns.png": image_input(PNG_FLAG | 1, png(w, h, 8, 3, pal, extra=plte + trns)),
        "truncated.png": image_input(PNG_FLAG | 3, good[: len(good) - 20]),
        "bad-crc.png": image_input(PNG_FLAG | 3, good[:20] + bytes([good[20] ^ 1]) + good[21:]),
        "huge-header.png": image_input(PNG_FLAG | FULL | 3, huge),
        "at-limit-header.png": image_input(PNG_FLAG | FULL | 3, at_limit),
        "neither": image_input(3, b"GIF89a" + bytes(20)),
    }


def jpeg_seeds():
    """JPEGs from cjpeg, of a small PPM and PGM: baseline, progressive, arithmetic, restarts,
    subsampling, grey; then a huge header and cut ones. Empty without cjpeg."""
    cjpeg = shutil.which("cjpeg")
    if cjpeg is None:
        print("make_corpus: no cjpeg (apt-get install libjpeg-turbo-progs): JPEG seeds kept")
        return {}
    w, h = 40, 24
    ppm = b"P6 %d %d 255\n" % (w, h) + bytes((x * 6 + y * 9 + c * 80) % 256 for y in range(h)
                                            for x in range(w) for c in range(3))
    pgm = b"P5 %d %d 255\n" % (w, h) + bytes((x * 6 + y * 9) % 256 for y in range(h)
                                            for x in range(w))
    variants = {
        "baseline": (ppm, ["-quality", "50"]),
        "progressive": (ppm, ["-quality", "50", "-progressive"]),
        "arithmetic": (ppm, ["-quality", "50", "-arithmetic"]),
        "restart-444": (ppm, ["-quality", "50", "-restart", "1", "-sample", "1x1"]),
        "optimized-422": (ppm, ["-quality", "30", "-optimize", "-sample", "2x1"]),
        "grey": (pgm, ["-quality", "50", "-grayscale"]),
        "grey-progressive": (pgm, ["-quality", "50", "-progressive"]),
    }
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (src, args) in variants.items():
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(src)
            out[name] = subprocess.run([cjpeg] + args + [path], check=True,
                                       stdout=subprocess.PIPE).stdout
    seeds = {
        "baseline.jpg": image_input(7, out["baseline"]),
        "baseline-full.jpg": image_input(FULL | 31, out["baseline"]),
        "baseline-folder.jpg": image_input(FOLDER | 4, out["baseline"]),
        "progressive.jpg": image_input(FULL | 9, out["progressive"]),
        "progressive-folder.jpg": image_input(FOLDER | 2, out["progressive"]),
        "arithmetic.jpg": image_input(5, out["arithmetic"]),
        "restart-444.jpg": image_input(FULL | 3, out["restart-444"]),
        "optimized-422.jpg": image_input(11, out["optimized-422"]),
        "grey.jpg": image_input(FOLDER | 6, out["grey"]),
        "grey-progressive.jpg": image_input(1, out["grey-progressive"]),
        # cut inside the entropy-coded data (the tables take most of a small file)
        "truncated.jpg": image_input(7, out["baseline"][:-60]),
        "truncated-progressive.jpg": image_input(7, out["progressive"][:-60]),
    }
    # The frame header (SOF0 / SOF2) claiming 65500 x 65500 pixels, the largest JPEG.
    for name, sof in (("huge-header.jpg", b"\xff\xc0"), ("huge-header-progressive.jpg",
                                                        b"\xff\xc2")):
        src = out["baseline" if sof == b"\xff\xc0" else "progressive"]
        at = src.index(sof) + 5  # marker, length (2), precision (1), then height, width
        seeds[name] = image_input(FULL | 7, src[:at] + struct.pack(">HH", 65500, 65500) +
                                  src[at + 4:])
    # Decoded at 1/8 (a side of 32): the progressive one is refused (its coefficients are held
    # at full size); the baseline one decodes to 8188x8188 grey, seconds under ASan (its data
    # ends early at a marker, which libjpeg and PIL take as a warning): not a seed.
    seeds["huge-header-progressive-scaled.jpg"] = image_input(31, seeds[
        "huge-header-progressive.jpg"][1:])
    return seeds


def derived_seeds(sub, base, variants):
    """Near-valid seeds made from a real run's file corpus/SUB/BASE."""
    with open(os.path.join(HERE, "corpus", sub, base), "rb") as f:
        good = f.read()
    return {name: make(good) for name, make in variants.items()}


def checkpoint_variants():
    return {
        "cut-half.bin": lambda b: b[: len(b) // 2],
        "cut-header.bin": lambda b: b[:20],
        "bad-magic.bin": lambda b: b"EASELCK9" + b[8:],
        "bad-hash.bin": lambda b: b[:16] + bytes([b[16] ^ 1]) + b[17:],
        "long-length.bin": lambda b: b[:8] + struct.pack("<Q", len(b)) + b[16:],
        "trailing.bin": lambda b: b + b"\0\0\0\0",
    }


def resume_variants():
    return {
        "unknown-key.json": lambda b: b.replace(b'"algo"', b'"algorithm"', 1),
        "wrong-type.json": lambda b: b.replace(b'"batch": 4', b'"batch": "4"', 1),
        "not-object.json": lambda b: b"[" + b + b"]",
        "cut.json": lambda b: b[: len(b) // 2],
        "empty.json": lambda b: b"{}",
    }


def tar_seeds():
    """Tar shards (fuzz_tar): ustar with .cls labels, class folders, GNU and pax long names, a bad
    label; each cut after its end-of-archive blocks (tarfile pads to 10 kB)."""
    import io
    import tarfile

    def tar(members, fmt=tarfile.USTAR_FORMAT):
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        data = b.getvalue().rstrip(b"\0")
        n = (len(data) + 511) // 512 * 512 + 1024
        return data + b"\0" * (n - len(data))

    jpg = bytes([0xFF, 0xD8, 0xFF, 0xE0]) + b"\0" * 60
    return {
        "cls.tar": tar([("a.jpg", jpg), ("a.cls", b"1\n"), ("b.jpg", jpg), ("b.cls", b"0")]),
        "folders.tar": tar([("cat/k0.jpg", jpg), ("dog/k1.png", jpg)]),
        "gnu-long.tar": tar([("d" * 150 + "/x/k.jpg", jpg), ("d" * 150 + "/x/k.cls", b"3")],
                            tarfile.GNU_FORMAT),
        "pax-long.tar": tar([("p" * 200 + "/y/k.jpg", jpg)], tarfile.PAX_FORMAT),
        "bad-cls.tar": tar([("a.jpg", jpg), ("a.cls", b"-4")]),
    }


def npy(header, values=b"", version=b"\x01\x00"):
    """A .npy file (numpy.lib.format) of `header`'s dict text, padded as numpy pads it."""
    h = header.encode() + b" "
    lead = 6 + 2 + (2 if version[0] == 1 else 4)
    h += b" " * ((64 - (lead + len(h) + 1) % 64) % 64) + b"\n"
    n = struct.pack("<H" if version[0] == 1 else "<I", len(h))
    return b"\x93NUMPY" + version + n + h + values


def npy_seeds():
    good = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 2, 2), }"
    four = struct.pack("<4f", 0.0, 0.5, -1.0, 2.0)
    return {
        "good.npy": npy(good, four),
        "v2.npy": npy(good, four, b"\x02\x00"),
        "short.npy": npy(good, four[:-3]),
        "long.npy": npy(good, four + b"x"),
        "f8.npy": npy(good.replace("<f4", "<f8"), four + four),
        "fortran.npy": npy(good.replace("False", "True"), four),
        "rank3.npy": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 2), }", four),
        "huge.npy": npy("{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (4611686018427387904, 4, 4, 4), }", four),
        "extra-key.npy": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 2, 2), "
                             "'x': 1, }", four),
    }


def write(sub, seeds):
    d = os.path.join(HERE, "corpus", sub)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    write("idx", idx_seeds())
    write("config", config_seeds())
    write("checkpoint", derived_seeds("checkpoint", "sgd.bin", checkpoint_variants()))
    write("resume", derived_seeds("resume", "sgd.json", resume_variants()))
    write("net", net_seeds())
    write("cifar", cifar_seeds())
    write("image", {**png_seeds(), **jpeg_seeds()})
    write("tar", tar_seeds())
    write("npy", npy_seeds())
