#!/usr/bin/env python3
"""The paper's workloads end to end through the `easel` program (issue 14's "must show"):
resnet18 on an image folder (PNG files this script writes, 3 classes, read at DIR:32) with two
groups under every algorithm, and alexnet-cifar on synthetic CIFAR-sized data with two groups;
each run must finish, write a summary with a finite loss and the net's parameter count, and a
broken net description must be refused in one line naming the file, the layer and the field.

usage: workloads_check.py BUILD_ROOT
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import zlib

ALGOS = ["sgd", "msgd", "sync-sgd", "async-sgd", "async-msgd", "hogwild-sgd", "easgd-rr",
         "async-easgd", "async-measgd", "hogwild-easgd", "sync-easgd"]


def png(path, w, h, pixel):
    """An 8-bit RGB PNG, pixel(x, y) -> (r, g, b), written with zlib alone."""
    raw = b"".join(b"\0" + b"".join(bytes(pixel(x, y)) for x in range(w)) for y in range(h))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def image_folder(root):
    # Class k: a bright stripe in third k of the image, noise elsewhere; images of varied sizes.
    for split, count in (("train", 12), ("val", 4)):
        for k in range(3):
            d = os.path.join(root, split, "class%d" % k)
            os.makedirs(d)
            for i in range(count):
                w, h = 40 + 3 * i, 36 + 2 * k

                def pixel(x, y, k=k, i=i, w=w):
                    v = 230 if k * w // 3 <= x < (k + 1) * w // 3 else (x * 7 + y * 13 + i) % 60
                    return (v, (v + 20) % 256, v // 2)
                png(os.path.join(d, "%03d.png" % i), w, h, pixel)


def easel(build, *args):
    return subprocess.run([os.path.join(build, "tools", "easel"), *args], capture_output=True,
                          text=True, timeout=600)


def check_run(build, out, what, *args):
    r = easel(build, "train", "--out", out, "--overwrite", "--progress", "none", *args)
    if r.returncode != 0:
        sys.exit("%s: exit %d: %s" % (what, r.returncode, r.stderr.strip()[-500:]))
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    if not math.isfinite(s["test_loss"]):
        sys.exit("%s: test loss %s" % (what, s["test_loss"]))
    return s


def main():
    build = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "images")
        image_folder(folder)
        for algo in ALGOS:
            groups = "1" if algo in ("sgd", "msgd") else "2"
            s = check_run(build, os.path.join(tmp, "r18-" + algo), "resnet18 " + algo,
                          "--net", "resnet18", "--data", folder + ":32", "--algo", algo,
                          "--groups", groups, "--threads-per-group", "1", "--oversubscribe",
                          "--batch", "4", "--iterations", "2", "--eval-every", "2",
                          "--lr", "0.01")
            if s["params"] != 11_178_051:  # torchvision's 11,689,512 with 3 classes, not 1000
                sys.exit("resnet18 %s: %d params" % (algo, s["params"]))
            print("resnet18 on an image folder, %s x %s groups: test loss %.3f" %
                  (algo, groups, s["test_loss"]))
        s = check_run(build, os.path.join(tmp, "alexnet"), "alexnet-cifar", "--net",
                      "alexnet-cifar", "--data", "synthetic:64:3x32x32:10", "--groups", "2",
                      "--threads-per-group", "1", "--oversubscribe", "--batch", "4",
                      "--iterations", "2", "--eval-every", "2", "--lr", "0.001")
        if s["params"] != 58_322_314:
            sys.exit("alexnet-cifar: %d params" % s["params"])
        print("alexnet-cifar on synthetic data, 2 groups: test loss %.3f" % s["test_loss"])
        bad = os.path.join(tmp, "bad.toml")
        with open(bad, "w") as f:
            f.write('name = "bad"\n[[layer]]\nname = "c"\ntype = "conv"\noutputs = 8\n')
        r = easel(build, "train", "--net", bad, "--data", "synthetic:64:3x8x8:4", "--out",
                  os.path.join(tmp, "bad"))
        want = bad + ":2: layer c: kernel: missing"  # the line of its [[layer]]
        if r.returncode != 2 or want not in r.stderr or r.stderr.strip().count("\n") != 0:
            sys.exit("a broken description: exit %d, stderr %r (want exit 2 and %r)" %
                     (r.returncode, r.stderr, want))
        if os.path.exists(os.path.join(tmp, "bad")):
            sys.exit("a broken description left an output directory")
        print("a broken description: refused in one line")


if __name__ == "__main__":
    main()
