#!/usr/bin/env python3
"""tools/goodput (docs/RELIABILITY.md "Goodput at scale"): its formulas against hand-computed
values, its simulation against Daly's exact formula (the same model: they must agree within the
simulation's noise) and his first-order one where first order holds, Young's interval beating
4x shorter and longer ones, a whole run through `easel model`, and the refusals (one line,
exit 2).

usage: goodput_check.py SOURCE_ROOT BUILD_ROOT
"""
import importlib.machinery
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT, BUILD = sys.argv[1], sys.argv[2]
TOOL = os.path.join(ROOT, "tools", "goodput")
loader = importlib.machinery.SourceFileLoader("goodput", TOOL)
spec = importlib.util.spec_from_loader("goodput", loader)
g = importlib.util.module_from_spec(spec)
loader.exec_module(g)
failed = 0


def check(ok, what):
    global failed
    print(("ok   " if ok else "FAIL ") + what)
    failed += not ok


def near(x, y, rel):
    return abs(x - y) <= rel * abs(y)


# By hand: t = 10, C = 1, R = 2, a failure 25 s into each relaunch. W = 0: commits at
# 2 + 11 = 13 and 24, so 20 s of work in 25. W = 3: commits at 16 and 27, so 10. W = 12 > t:
# the second checkpoint waits 2 s for the first write: commits at 2+10+1+12 = 25 (just in) and
# 25 + 13 = 38, so 10.
for w, work in ((0.0, 20.0), (3.0, 10.0), (12.0, 10.0)):
    got = g.committed_before(25.0, 10.0, 1.0, 2.0, w)
    check(got == work, "a failure 25 s in, t 10 C 1 R 2 W %g: %g s committed (want %g)"
          % (w, got, work))
check(g.simulate(10.0, 1.0, 2.0, 0.0, [25.0, 1.0]) == 20.0 / 26.0,
      "a failure during the relaunch commits nothing: 20 s of work in 26")
check(g.committed_before(12.9, 10.0, 1.0, 2.0, 0.0) == 0.0,
      "a failure during the first checkpoint loses it")
# No failure in a long run and C -> 0: every second is useful.
check(near(g.simulate(10.0, 0.0, 0.0, 0.0, [1e12]), 1.0, 1e-9), "C = 0, no failure: goodput 1")
check(near(g.daly_exact(10.0, 0.0, 0.0, 1e15), 1.0, 1e-6), "exact formula, C = 0, M huge: 1")
check(near(g.young_interval(0.5, 3600.0), 60.0, 1e-12), "Young: sqrt(2 x 0.5 x 3600) = 60")
# Daly's first order by hand: t 60, C 0.5, R 10, M 3600: (1 - (10 + 30.25)/3600) / (1 + 0.5/60).
want = (1 - 40.25 / 3600) / (1 + 0.5 / 60)
check(near(g.daly_first_order(60.0, 0.5, 10.0, 3600.0), want, 1e-12),
      "Daly first order, by hand: %.6f" % want)
# The simulation against the exact formula (W = 0 is its model) in a few regimes, including
# one far from first order (C and R a tenth of M); and against first order where C, R << M.
for c, r, m in ((0.2, 5.0, 337.5), (1.3, 10.0, 2400.0), (30.0, 30.0, 300.0)):
    gaps = g.exponential_gaps(m, 40000, 3)
    for k in (0.25, 1.0, 4.0):
        t = k * g.young_interval(c, m)
        sim, exact = g.simulate(t, c, r, 0.0, gaps), g.daly_exact(t, c, r, m)
        check(near(sim, exact, 0.01), "sim %.4f ~ exact %.4f (C %g R %g M %g t %.1f)"
              % (sim, exact, c, r, m, t))
gaps = g.exponential_gaps(86400.0, 40000, 4)
t = g.young_interval(0.2, 86400.0)
sim, first = g.simulate(t, 0.2, 5.0, 0.0, gaps), g.daly_first_order(t, 0.2, 5.0, 86400.0)
check(near(sim, first, 0.002), "first order holds at C/M 2e-6: sim %.5f ~ %.5f" % (sim, first))
# Young's interval is (near) the optimum: better than a quarter and four times it.
best = g.best_exact_interval(1.3, 10.0, 2400.0)
y = g.young_interval(1.3, 2400.0)
check(near(best, y, 0.05), "the exact optimum %.1f s is near Young's %.1f s" % (best, y))
gaps = g.exponential_gaps(2400.0, 40000, 5)
s = {k: g.simulate(k * y, 1.3, 10.0, 0.0, gaps) for k in (0.25, 1.0, 4.0)}
check(s[1.0] > s[0.25] and s[1.0] > s[4.0], "simulated: Young's interval beats 0.25x and 4x")
# A background write that outlasts the interval costs: W = 2 t is worse than W = 0.
check(g.simulate(y, 1.3, 10.0, 2 * y, gaps) < s[1.0], "a slow write lowers the goodput")


def run(*args):
    return subprocess.run([TOOL] + list(args), capture_output=True, text=True)


# The whole tool, through easel model on a described machine, from a summary.json.
tmp = tempfile.mkdtemp(prefix="goodput-check-")
summary = os.path.join(tmp, "summary.json")
with open(summary, "w") as f:
    json.dump({"checkpoints": 2, "checkpoint_seconds": 0.4, "checkpoint_write_seconds": 1.0,
               "ranks": 4, "net": "lenet", "algorithm": "sync-easgd", "groups": 4,
               "config": {"batch": 32}}, f)
p = run("--ranks", "256", "--mtbf-node", "24", "--summary", summary, "--relaunch", "5",
        "--machine", "knl-7250", "--easel", os.path.join(BUILD, "tools", "easel"),
        "--failures", "2000")
print(p.stdout, p.stderr)
# C(256) = 0.2 + 252 x (1.5 us + 2 x 1724320 B / 8 GB/s) (knl-7250's [transport.mpi]); W(256)
# = 0.5 x (1 + 256) / (1 + 4), the centre and the groups.
c256 = 0.2 + 252 * (1.5e-6 + 2 * 1724320 / 8e9)
check(p.returncode == 0 and "= %.3f s" % c256 in p.stdout and "W 0.50 s x 51.4" in p.stdout
      and "= 25.70 s" in p.stdout and "1x " in p.stdout, "the whole tool: C scaled to %.3f s" % c256)
chaos = os.path.join(tmp, "chaos.txt")
with open(chaos, "w") as f:
    f.write("sync-easgd   rank 1 @  120  ok   restarts 1  from  100  lost   20  +   7.0 s  "
            "relaunch   4.0 s  ckpt   200.0 ms\n" * 2 + "x relaunch   9.0 s  ckpt\n")
p = run("--ranks", "8", "--mtbf-system", "600", "--checkpoint", "0.2", "--chaos-output", chaos,
        "--step", "0.1", "--failures", "100")
check(p.returncode == 0 and "R = 4.00 s (median of 3 chaos trial(s)" in p.stdout,
      "R from tools/chaos's output: the trials' median")
open(os.path.join(tmp, "bad.json"), "w").write('{"checkpoints": 1}')
with open(os.path.join(tmp, "odd.json"), "w") as f:
    json.dump(dict(json.load(open(summary)), groups=6), f)
with open(os.path.join(tmp, "text.json"), "w") as f:
    json.dump(dict(json.load(open(summary)), checkpoint_seconds="0.4"), f)
B = ["--checkpoint", "0.2", "--relaunch", "5", "--step", "0.1"]
BAD = [
    (["--ranks", "256", "--mtbf-node", "0"] + B, "goodput: --mtbf-node: '0' is not a positive"),
    (["--ranks", "256", "--mtbf-node", "-3"] + B, "goodput: --mtbf-node: '-3' is not a positive"),
    (["--ranks", "0", "--mtbf-node", "24"] + B, "goodput: --ranks: '0' is not a whole number"),
    (["--ranks", "8", "--mtbf-system", "nan"] + B, "goodput: --mtbf-system: 'nan' is not"),
    (["--ranks", "8"] + B, "goodput: give one of --mtbf-node and --mtbf-system"),
    (["--ranks", "8", "--mtbf-node", "24", "--summary", os.path.join(tmp, "bad.json"),
      "--relaunch", "5", "--step", "1"], "bad.json: no checkpoint_seconds, checkpoint_write_"),
    (["--ranks", "8", "--mtbf-node", "24", "--summary", os.path.join(tmp, "text.json"),
      "--relaunch", "5", "--step", "1"], "text.json: checkpoint_seconds is \"0.4\", not a number"),
    (["--ranks", "8", "--mtbf-node", "24", "--summary", os.path.join(tmp, "none.json"),
      "--relaunch", "5", "--step", "1"], "none.json: cannot read it as JSON"),
    (["--ranks", "8", "--mtbf-node", "24", "--summary", os.path.join(tmp, "odd.json"),
      "--relaunch", "5", "--step", "1"], "odd.json: groups 6 over ranks 4: not a whole number"),
    (["--ranks", "8", "--mtbf-node", "24", "--checkpoint", "1", "--chaos-output", summary,
      "--step", "1"], "summary.json: no trial line with 'relaunch X s'"),
    (["--ranks", "8", "--mtbf-node", "24", "--checkpoint", "1", "--relaunch", "1", "--machine",
      "knl-7250"], "goodput: --machine: give --net"),
]
for args, want in BAD:
    p = run(*args)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 2 and len(lines) == 1 and want in lines[0] and not p.stdout,
          "refused: %s -> %s" % (" ".join(args[:4]), lines))
sys.exit(1 if failed else 0)
