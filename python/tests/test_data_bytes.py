"""easel.Data from uint8 arrays: borrowed, not copied (memory: test_data.py). The same run as the
same pixels given as float32 (x / 256, exact) and as IDX files to the easel program; the arrays
kept alive by the Data; the refusals, each one line."""
import gc
import weakref

import numpy as np
import pytest

import easel
from conftest import cli, cli_flags
from test_train import numbers

RUN = {"net": "lenet", "groups": "2", "iterations": "8", "eval-every": "4"}


def pixels(n, seed):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (n, 1, 28, 28), dtype=np.uint8),
            rng.integers(0, 10, n).astype(np.int64))


def run_metrics(data, out):
    easel.train(easel.Config(**RUN), data=data, out=out)
    return numbers(out / "metrics.jsonl")


def write_idx(folder, prefix, images, labels):
    """The IDX files easel train --data FOLDER reads (big-endian extents after the magic)."""
    n, _, h, w = images.shape
    with open(folder / (prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(np.array([0x803, n, h, w], ">u4").tobytes() + images.tobytes())
    with open(folder / (prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(np.array([0x801, n], ">u4").tobytes() + labels.astype(np.uint8).tobytes())


def test_same_metrics_as_float32_and_as_the_cli(tmp_path):
    (x, y), (tx, ty) = pixels(512, 0), pixels(128, 1)
    borrowed = run_metrics(easel.Data(x, y, tx, ty), tmp_path / "u8")
    as_float = easel.Data((x / 256).astype(np.float32), y, (tx / 256).astype(np.float32), ty)
    assert run_metrics(as_float, tmp_path / "f32") == borrowed
    folder = tmp_path / "idx"
    folder.mkdir()
    write_idx(folder, "train", x, y)
    write_idx(folder, "t10k", tx, ty)
    code, _, err = cli("train", *cli_flags(dict(RUN, data=str(folder))), "--out",
                       str(tmp_path / "cli"))
    assert code == 0, err
    assert numbers(tmp_path / "cli" / "metrics.jsonl") == borrowed and len(borrowed) == 2


def test_the_data_keeps_the_arrays_alive(tmp_path):
    (x, y), (tx, ty) = pixels(512, 0), pixels(128, 1)
    expected = run_metrics(easel.Data(x.copy(), y, tx.copy(), ty), tmp_path / "kept")
    alive = weakref.ref(x)
    data = easel.Data(x, y, tx, ty)
    del x, tx
    gc.collect()
    assert alive() is not None, "the Data let its training images go"
    # Memory freed now would be taken by these, and a run reading it would see 7s.
    junk = [np.full((512, 1, 28, 28), 7, np.uint8) for _ in range(4)]
    assert run_metrics(data, tmp_path / "run") == expected and len(junk) == 4
    del data
    gc.collect()
    assert alive() is None, "the arrays outlived their Data"


@pytest.mark.parametrize("change,message", [
    (lambda x: x[:, :, ::2, ::2], "train set: images are not C-contiguous"),
    (lambda x: x.reshape(len(x), -1), "train set: images have 2 dimensions, not 4"),
    (lambda x: x[..., None], "train set: images have 5 dimensions, not 4"),
    (lambda x: x.astype(np.int8), "train set: images are int8, not float32 or uint8"),
])
def test_bad_uint8_arrays_are_refused_in_one_line(change, message):
    (x, y), (tx, ty) = pixels(16, 0), pixels(4, 1)
    with pytest.raises(ValueError) as e:
        easel.Data(change(x), y, tx, ty, classes=10)
    assert str(e.value).startswith(message) and "\n" not in str(e.value), str(e.value)


def test_a_placement_borrowed_pixels_cannot_take_is_refused(tmp_path):
    (x, y), (tx, ty) = pixels(64, 0), pixels(16, 1)
    cfg = easel.Config(**dict(RUN, placement="dataset=interleave"))
    with pytest.raises(ValueError) as e:
        easel.train(cfg, data=easel.Data(x, y, tx, ty))
    assert str(e.value).startswith("--placement: dataset=interleave cannot be honoured: the data "
                                   "set's pixels are borrowed"), str(e.value)
    assert "\n" not in str(e.value)
    # The same images as floats are the engine's own copy: the run goes ahead.
    as_float = easel.Data((x / 256).astype(np.float32), y, (tx / 256).astype(np.float32), ty)
    assert easel.train(cfg, data=as_float)["stopped"] == "completed"
