"""easel from Python: the public C++ API (docs/API.md, "Python").

    import easel
    cfg = easel.Config(net="lenet", algo="sync-easgd", groups=2, iterations=200)
    cfg["lr"] = 0.02
    summary = easel.train(cfg, out="run1", progress=print)  # a dict, summary.json's names
    easel.eval("run1")                                       # easel eval run1 --json, a dict

Config, Data and train are the library's own (the extension _easel); eval, export, model and
predict run the easel program's commands of those names (tools/cli), which own them, and read
their --json.
"""

import json
import os
import subprocess
import tempfile

from ._easel import Config, Data, train, version
from . import _paths

__all__ = ["Config", "Data", "train", "eval", "export", "model", "predict", "version"]


def program():
    """The easel program eval, export, model and predict run: $EASEL_PROGRAM, else the one built
    or installed with this module."""
    return os.environ.get("EASEL_PROGRAM", _paths.PROGRAM)


def _flags(options):
    """Keywords as the program's flags: eval_every=5 is --eval-every 5, True a bare flag."""
    args = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        args += [flag] if value is True else [flag, os.fspath(value) if hasattr(value, "__fspath__") else str(value)]
    return args


def _run(command, *args, json_out=True):
    """Runs `easel COMMAND ARGS` and returns its JSON (or nothing). Its one-line refusal (exit 2:
    a bad run directory, flag or file) is a ValueError, any other failure a RuntimeError, each
    with the program's line after "easel: "."""
    argv = [program(), command, *map(str, args)] + (["--json"] if json_out else [])
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [l for l in done.stderr.splitlines() if l.strip()]
        line = lines[-1] if lines else "easel %s exited %d" % (command, done.returncode)
        line = line[len("easel: "):] if line.startswith("easel: ") else line
        raise (ValueError if done.returncode == 2 else RuntimeError)(line)
    return json.loads(done.stdout) if json_out else None


def eval(run_dir, data=None, split="test", weights="evaluated"):
    """A trained run's model on a data set (easel eval RUN_DIR --json): accuracy, top5 (more than
    5 classes), loss and the confusion matrix, as a dict. data: as easel train --data takes it
    (default: the run's own)."""
    return _run("eval", os.fspath(run_dir), *_flags({"data": data, "split": split, "weights": weights}))


def export(run_dir, format="onnx", out=None, weights="evaluated", overwrite=False, softmax=False):
    """Writes a trained run's net and weights (easel export, docs/EXPORT.md): format "onnx" or
    "pytorch" (a state_dict); returns the path written."""
    if out is None:
        raise ValueError("--out: export needs the file to write (out=...)")
    _run("export", os.fspath(run_dir),
         *_flags({"format": format, "out": out, "weights": weights, "overwrite": overwrite,
                  "softmax": softmax}), json_out=False)
    return os.fspath(out)


def model(**options):
    """One configuration's predicted time per iteration and its compute/comm/wait split (easel
    model --json, docs/MODEL.md), as a dict: model(machine="knl-7250", net="lenet", groups=4)."""
    return _run("model", *_flags(options))


def predict(run_dir, images, top=3, weights="evaluated"):
    """Classifies images with a trained run's model (easel predict --json): `images` a numpy
    array N x C x H x W float32, already normalised, or a list of image or .npy file paths.
    Returns {"inputs", "logits": N rows, "top": N rows}."""
    if hasattr(images, "shape"):
        import numpy as np
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "images.npy")
            np.save(path, np.ascontiguousarray(images, dtype=np.float32))
            return _run("predict", os.fspath(run_dir), path, *_flags({"top": top, "weights": weights}))
    return _run("predict", os.fspath(run_dir), *map(os.fspath, images),
                *_flags({"top": top, "weights": weights}))
