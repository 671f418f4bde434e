#!/usr/bin/env python3
"""Prints "N passed, N failed" from Meson testlog.json files: GoogleTest case counts per test
program; a program that failed without reporting failed cases (a crash, a timeout) counts as
one failure, and a non-GoogleTest program as one case. GoogleTest's skipped cases (the GPU
tests on a machine without one) are counted apart."""
import json
import re
import sys

passed = failed = skipped = 0
lines = [l for path in sys.argv[1:] for l in open(path) if l.strip()]
for line in lines:
    t = json.loads(line)
    out = t.get("stdout") or ""
    ok = t.get("result") in ("OK", "SKIP", "EXPECTEDFAIL")
    p = sum(int(x) for x in re.findall(r"\[  PASSED  \] (\d+) test", out))
    f = sum(int(x) for x in re.findall(r"\[  FAILED  \] (\d+) test", out))
    skipped += sum(int(x) for x in re.findall(r"\[  SKIPPED \] (\d+) test", out))
    if p or f:
        passed += p
        failed += f if (f or ok) else 1
    elif t.get("result") == "OK":
        passed += 1
    elif not ok:
        failed += 1
print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
