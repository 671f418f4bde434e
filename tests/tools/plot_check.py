#!/usr/bin/python3
"""tools/plot draws the train loss beside the test accuracy: the (training seconds, train loss)
points of metrics.jsonl, a diverged record's null loss left out, and a PNG of four panels
(skipped, 77, where /usr/bin/python3 has no matplotlib).

usage: plot_check.py SOURCE_ROOT
"""
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ROOT = sys.argv[1]
TOOL = os.path.join(ROOT, "tools", "plot")
if subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"], capture_output=True).returncode:
    print("plot_check: no matplotlib for /usr/bin/python3: skipped")
    sys.exit(77)

loader = importlib.machinery.SourceFileLoader("easel_plot", TOOL)
spec = importlib.util.spec_from_loader("easel_plot", loader)
plot = importlib.util.module_from_spec(spec)
loader.exec_module(plot)

RECORDS = [
    {"epoch": 0.5, "train_seconds": 1.0, "test_accuracy": 0.5, "train_loss": 1.5},
    {"epoch": 1.0, "train_seconds": 2.0, "test_accuracy": 0.7, "train_loss": 0.75},
    {"epoch": 1.5, "train_seconds": 3.0, "test_accuracy": 0.1, "train_loss": None},  # diverged
]
for r in RECORDS:
    r.update({"compute_seconds": 1.0, "comm_seconds": 0.5, "wait_seconds": 0.0})

failed = 0
xs, ys = plot.loss_points(RECORDS)
if (xs, ys) != ([1.0, 2.0], [1.5, 0.75]):
    print("plot_check: loss_points gave %r, %r" % (xs, ys))
    failed += 1

with tempfile.TemporaryDirectory() as d:
    run = os.path.join(d, "run")
    os.mkdir(run)
    with open(os.path.join(run, "metrics.jsonl"), "w") as f:
        for r in RECORDS:
            f.write(json.dumps(r) + "\n")
    out = os.path.join(d, "runs.png")
    t = subprocess.run([TOOL, run, "-o", out], capture_output=True, text=True)
    if t.returncode != 0 or not os.path.getsize(out):
        print("plot_check: tools/plot exited %d: %s" % (t.returncode, t.stderr.strip()))
        failed += 1

print("plot_check: %s" % ("ok" if not failed else "%d failure(s)" % failed))
sys.exit(1 if failed else 0)
