#!/usr/bin/env python3
"""tools/simulate-scaling's flags (docs/SIMULATION.md): every bad combination is refused in one
line starting 'simulate-scaling: ' with exit code 2, before any simulation; --replot reads a
--strong file and one from before it (skipped, 77, where the tool's python3 has no matplotlib).

usage: simulate_scaling_check.py SOURCE_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = sys.argv[1]
TOOL = os.path.join(ROOT, "tools", "simulate-scaling")
P = ["--platform", os.path.join(ROOT, "tools", "platforms", "gpu-pcie-ib.xml")]
T = ["--", "--net", "alexnet-cifar"]
BAD = [
    (P + ["--ranks", "1,3", "--step-seconds", "1", "--strong", "64"] + T,
     "--strong 64: the global batch is not divisible by 3 rank(s)"),
    (P + ["--ranks", "1,2", "--step-seconds", "1", "--strong", "64"] + T + ["--batch", "32"],
     "--strong 64: the train flags' --batch 32 is not the global batch"),
    (P + ["--ranks", "1,2", "--step-seconds", "1", "--strong", "64"] + T + ["--batch=16"],
     "--strong 64: the train flags' --batch 16 is not the global batch"),
    (P + ["--ranks", "1,2", "--step-seconds", "1", "--strong", "0"] + T,
     "--strong: '0' is not a positive global batch"),
    (P + ["--ranks", "1,2", "--step-seconds", "1", "--step-model", "gpu8-pcie"] + T,
     "give one of --step-seconds S and --step-model MACHINE"),
    (P + ["--ranks", "1,2"] + T, "give one of --step-seconds S and --step-model MACHINE"),
    (P + ["--ranks", "1,2", "--step-model", "gpu8-pcie", "--speed-ratio", "2"] + T,
     "--speed-ratio: --step-model's step is already the target's"),
    (P + ["--ranks", "1,0", "--step-seconds", "1"] + T, "--ranks: '1,0' has a rank count under 1"),
    (P + ["--ranks", "1,2", "--step-seconds", "-1"] + T,
     "--step-seconds: '-1' is not a positive number of seconds"),
    (P + ["--ranks", "1,2", "--step-seconds", "1", "--strong"] + T,
     "unknown flag or missing value: '--strong'"),
]
failed = 0
for args, want in BAD:
    t = subprocess.run([TOOL] + args, capture_output=True, text=True)
    lines = t.stderr.strip().splitlines()
    if (t.returncode != 2 or len(lines) != 1 or not lines[0].startswith("simulate-scaling: " + want)
            or t.stdout):
        print(f"FAIL {args}: code {t.returncode}, stderr {t.stderr!r}, want '{want}'")
        failed += 1

# tools/simulate's SMPI factors: a bare number (smpi/lat-factor:1) crashed SMPI 3.32 at start;
# it is passed as 0:V, the links the collectives see take the factor of the largest messages,
# and a malformed value is refused in one line (exit 2).
import importlib.machinery
import importlib.util
import io
from contextlib import redirect_stderr

sys.dont_write_bytecode = True  # nothing written into tools/
loader = importlib.machinery.SourceFileLoader("simulate", os.path.join(ROOT, "tools", "simulate"))
sim = importlib.util.module_from_spec(importlib.util.spec_from_loader("simulate", loader))
loader.exec_module(sim)
os.environ["EASEL_SMPI_CFG"] = "smpi/lat-factor:1 smpi/bw-factor:65472:0.9;0:1"
got = sim.smpi_cfg()
if (got != {"smpi/lat-factor": "0:1", "smpi/bw-factor": "65472:0.9;0:1"}
        or sim.largest_factor(got["smpi/bw-factor"]) != 0.9):
    print(f"FAIL smpi_cfg: {got}")
    failed += 1
os.environ["EASEL_SMPI_CFG"] = "smpi/lat-factor:fast"
err = io.StringIO()
try:
    with redirect_stderr(err):
        sim.smpi_cfg()
    code = 0
except SystemExit as e:
    code = e.code
if code != 2 or not err.getvalue().startswith("simulate: EASEL_SMPI_CFG: smpi/lat-factor: 'fast'"):
    print(f"FAIL a bad factor: code {code}, {err.getvalue()!r}")
    failed += 1
del os.environ["EASEL_SMPI_CFG"]

with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(tmp, "strong.json")
    with open(src, "w") as f:
        json.dump({"platform": "gpu-pcie-ib.xml", "kind": "strong", "global_batch": 64,
                   "train": ["--net", "alexnet-cifar"],
                   "rows": [{"ranks": 1, "efficiency": 1.0}, {"ranks": 2, "efficiency": 0.9}]},
                  f)
    old = os.path.join(tmp, "old.json")  # a file from before --strong: weak scaling
    with open(old, "w") as f:
        json.dump({"platform": "cori-knl.xml", "train": [],
                   "rows": [{"ranks": 1, "efficiency": 1.0}]}, f)
    png = os.path.join(tmp, "out.png")
    t = subprocess.run([TOOL, "--replot", f"{src},{old}", "--png", png],
                       capture_output=True, text=True)
    if "No module named 'matplotlib'" in t.stderr:  # the tool's python3 has no matplotlib
        print("simulate_scaling_check: no matplotlib; --replot not checked")
        sys.exit(77 if failed == 0 else 1)
    if t.returncode != 0 or not os.path.getsize(png):
        print(f"FAIL --replot: code {t.returncode}, {t.stderr!r}")
        failed += 1
    with open(src, "w") as f:
        json.dump({"kind": "sideways", "train": [], "rows": []}, f)
    t = subprocess.run([TOOL, "--replot", src, "--png", png],
                       capture_output=True, text=True)
    if t.returncode != 2 or "'kind' is 'sideways', neither weak nor strong" not in t.stderr:
        print(f"FAIL --replot of a bad kind: code {t.returncode}, {t.stderr!r}")
        failed += 1
print(f"simulate_scaling_check: {len(BAD) + 4 - failed} of {len(BAD) + 4} checks passed")
sys.exit(1 if failed else 0)
