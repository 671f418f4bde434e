"""easel.Data from numpy arrays: read where numpy holds them (the engine's 8-bit copy, a
quarter of the float32 images, is the only one), checked as the C++ API checks them."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import easel


def arrays(n, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random((n, 1, 28, 28), dtype=np.float32),
            rng.integers(0, classes, n).astype(np.int64))


def test_memory_beyond_the_arrays_is_the_engines_copy():
    # In a fresh process, so that the peak resident size is this data set's alone: 40,000
    # images of 1x28x28 float32 (125 MB); the engine keeps 1 byte a pixel (31 MB). A copy of the
    # floats would add 125 MB more.
    script = textwrap.dedent("""
        import resource, numpy as np, easel
        n = 40000
        images = np.empty((n, 1, 28, 28), np.float32); images.fill(0.5)
        labels = np.zeros(n, np.int32)
        small = np.full((10, 1, 28, 28), 0.25, np.float32)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        data = easel.Data(images, labels, small, np.zeros(10, np.int32), classes=10)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print((after - before) / images.nbytes, data.train_count)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=os.environ, check=True).stdout.split()
    growth, count = float(out[0]), int(out[1])
    assert count == 40000
    # At most 1.1 times the data's in all: 1 (the arrays) + 0.25 (the engine's pixels) would
    # exceed it only if the arrays stayed; what Data adds must be the 8-bit copy alone.
    assert growth <= 0.30, "Data added %.2f x the float images" % growth


def test_trains_on_arrays(tmp_path):
    train_x, train_y = arrays(512)
    test_x, test_y = arrays(128, seed=1)
    data = easel.Data(train_x, train_y, test_x, test_y)
    assert (data.train_count, data.test_count) == (512, 128)
    cfg = easel.Config(net="lenet", iterations=8, eval_every=4)
    seen = []
    summary = easel.train(cfg, data=data, out=tmp_path / "run", progress=seen.append)
    assert summary["stopped"] == "completed" and [e["step"] for e in seen] == [4, 8]
    assert (tmp_path / "run" / "metrics.jsonl").exists()


@pytest.mark.parametrize("change,message", [
    (lambda x, y: (x.astype(np.float64), y), "train set: images are float64, not float32"),
    (lambda x, y: (x[:, :, ::2, ::2], y), "train set: images are not C-contiguous"),
    (lambda x, y: (x, np.where(np.arange(len(y)) == 3, 10, y)),
     "train set: labels[3] is 10, outside [0, 10)"),
    (lambda x, y: (np.where(np.arange(x.size).reshape(x.shape) == 5, 2.0, x).astype(np.float32), y),
     "train set: images[5] is 2.000000, outside [0, 1]"),
    (lambda x, y: (x, y.astype(np.float32)), "train set: labels must be a 1-D numpy array of integers"),
])
def test_bad_arrays_are_refused_in_one_line(change, message):
    x, y = change(*arrays(16))
    tx, ty = arrays(4)
    with pytest.raises(ValueError) as e:
        easel.Data(x, y, tx, ty, classes=10)
    assert str(e.value).startswith(message), str(e.value)


def test_load_reads_a_spec():
    data = easel.Data.load("synthetic:64:1x28x28:10")
    assert data.train_count == 64
    with pytest.raises(ValueError):
        easel.Data.load("/no/such/folder")
