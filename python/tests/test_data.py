"""easel.Data from numpy arrays: read where numpy holds them (float32: the engine's 8-bit copy,
a quarter of the images, is the only one; uint8: borrowed, no copy), checked as the C++ API
checks them. The uint8 path's runs and lifetime: test_data_bytes.py."""
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


def growth(dtype):
    """In a fresh process, its peak resident size (VmHWM, reset through clear_refs) measured
    around Data() and around train(), on 200,000 images of 1x28x28 (627 MB as float32, 157 MB as
    uint8): what Data added over the caller's images' bytes, and what train added over the
    pixels' (1 byte each)."""
    script = textwrap.dedent("""
        import numpy as np, easel
        def kb(key):
            return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key))
        def peak_from_here():
            open("/proc/self/clear_refs", "w").write("5")
            return kb("VmRSS")
        n, dtype = 200000, np.dtype("%s")
        images = np.empty((n, 1, 28, 28), dtype); images.fill(0.5 if dtype == np.float32 else 128)
        labels = np.zeros(n, np.int32)
        small = np.full((100, 1, 28, 28), 0.25 if dtype == np.float32 else 64, dtype)
        base = peak_from_here()
        data = easel.Data(images, labels, small, np.zeros(100, np.int32), classes=10)
        grew = (kb("VmHWM") - base) * 1024 / images.nbytes
        del images
        base = peak_from_here()
        easel.train(easel.Config(net="lenet", groups=1, iterations=2, eval_every=2), data=data)
        print(grew, (kb("VmHWM") - base) * 1024 / (n * 784), data.train_count)
    """ % dtype)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=os.environ, check=True).stdout.split()
    assert int(out[2]) == 200000
    return float(out[0]), float(out[1])


def test_memory_beyond_float_arrays_is_the_engines_copy():
    # Data adds the 8-bit copy alone (0.25 x the floats; a copy of the floats would add 1 x):
    # with the arrays, 1.25 x in all, and a quarter once they are dropped. train adds the run's
    # own memory (LeNet's: about 40 MB), not another copy of the pixels (1 x).
    data_growth, train_growth = growth("float32")
    assert data_growth <= 0.30, "Data added %.2f x the float images" % data_growth
    assert train_growth <= 0.5, "train added %.2f x the pixels" % train_growth


def test_memory_beyond_uint8_arrays_is_nothing():
    # uint8 images are borrowed: Data adds under 0.1 x their bytes (a copy would add 1 x), and
    # the arrays, kept alive by the Data, are all the data set costs.
    data_growth, train_growth = growth("uint8")
    assert data_growth < 0.1, "Data added %.2f x the uint8 images" % data_growth
    assert train_growth <= 0.5, "train added %.2f x the pixels" % train_growth


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
