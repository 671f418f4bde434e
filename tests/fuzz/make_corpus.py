#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/NAME).

The valid checkpoint and resume seeds (corpus/checkpoint/*.bin, corpus/resume/*.json of an
algorithm's name) are real runs' checkpoint.bin and config.json (the commands are in
docs/RELIABILITY.md); this script derives near-valid ones from them.
Run from anywhere: python3 tests/fuzz/make_corpus.py
"""
import gzip
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


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
