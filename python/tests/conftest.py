"""The easel program beside the module under test (meson test sets EASEL_PROGRAM and PYTHONPATH:
python/meson.build), and the short run both train."""
import os
import subprocess

import pytest

import easel

FASHION = "/usr/share/datasets/fashion-mnist"
# A short deterministic run of two groups: two evaluations of 500 test images.
RUN = {"net": "lenet", "data": FASHION, "algo": "sync-easgd", "groups": "2", "iterations": "40",
       "eval-every": "20", "eval-images": "500", "progress": "lines"}


def cli(*args):
    """Runs the easel program; returns (exit code, stdout, stderr)."""
    done = subprocess.run([easel.program(), *args], capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr


def cli_flags(settings):
    return [a for k, v in settings.items() for a in ("--" + k, v)]


@pytest.fixture(scope="session")
def fashion():
    if not os.path.isdir(FASHION):
        pytest.skip(FASHION + " is missing (apt-get install dataset-fashion-mnist)")
    return FASHION
