#!/usr/bin/python3
"""tools/paper runs a figure on a described node's clock: fig6.4 on a budget of a few iterations
writes a table whose rows are its two runs' summaries (simulated seconds, the clock named in
every command), --report writes it again from them, a diverged run is a row of the figure, not its failure, and bad arguments are
one line, non-zero, nothing run.

usage: paper_check.py SOURCE_ROOT BUILD_ROOT
"""
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ROOT, BUILD = sys.argv[1], sys.argv[2]
TOOL = os.path.join(ROOT, "tools", "paper")
EASEL = os.path.join(BUILD, "tools", "easel")
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("paper_check: FAILED: " + what)


def paper(*args):
    return subprocess.run([TOOL, "--easel", EASEL] + list(args), capture_output=True, text=True)


with tempfile.TemporaryDirectory() as tmp:
    for args, says in [(["fig7"], "FIG 'fig7' is not one of"),
                       (["fig6.1", "--budget", "0"], "--budget '0' is not a positive number"),
                       (["fig11", "--budget", "1.5"], "--budget '1.5' is not a positive whole"),
                       (["fig12", "--easel", "/nonexistent"], "/nonexistent is not an executable")]:
        p = paper(*(args + ["--out", tmp]))
        check(p.returncode != 0 and p.stderr.count("\n") == 1 and says in p.stderr,
              "%s: exit %d, %r" % (args, p.returncode, p.stderr))
    check(os.listdir(tmp) == [], "the refusals wrote nothing: %s" % os.listdir(tmp))

    # A budget of 0.02 epochs: 3 iterations of 8 groups, each run seconds.
    p = paper("fig6.4", "--budget", "0.02", "--out", tmp)
    check(p.returncode == 0, "fig6.4: exit %d: %s" % (p.returncode, p.stderr[-2000:]))
    if p.returncode == 0:
        table = open(os.path.join(tmp, "fig6.4", "table.md")).read()
        check(table == p.stdout[:len(table)], "table.md is what was printed")
        row = [l for l in table.splitlines() if l.startswith("| sync-easgd | easgd-rr | 8 |")]
        check(len(row) == 1, "one row for the pair: %s" % table)
        for algo in ("sync-easgd", "easgd-rr"):
            s = json.load(open(os.path.join(tmp, "fig6.4", algo, "summary.json")))
            check(s.get("clock") == "gpu8-pcie", "%s ran on the K80 node's clock" % algo)
            check(s["config"]["groups"] == "8", "%s: 8 groups" % algo)
            acc = "%.4f" % s["test_accuracy"]
            check(row and acc in row[0], "%s's accuracy %s is in the row %s" % (algo, acc, row))
        check(table.count("--clock gpu8-pcie") == 2, "both commands name the clock")
        check(paper("fig6.4", "--budget", "0.02", "--out", tmp).returncode != 0,
              "a second run into the same --out is refused without --overwrite")
        r = paper("fig6.4", "--budget", "0.02", "--out", tmp, "--report")
        again = [l for l in r.stdout.splitlines() if l.startswith("| sync-easgd |")]
        check(r.returncode == 0 and len(again) == 1 and row and
              again[0].split("|")[:-2] == row[0].split("|")[:-2],
              "--report writes the row again from the summaries (wall seconds aside): %s" % again)

    # A diverged run is a result: the module's runner reads its summary.
    loader = importlib.machinery.SourceFileLoader("easel_paper", TOOL)
    spec = importlib.util.spec_from_loader("easel_paper", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    check(mod.accuracy({"stopped": "diverged", "steps": 11}) == "diverged at step 11",
          "a diverged run's accuracy cell")
    check(mod.accuracy({"test_accuracy": 0.8512}) == "0.8512", "a finished run's accuracy cell")

print("paper_check: %d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
