#!/usr/bin/env python3
"""Prints which tests skipped and why, which failed, then one line "N passed, N failed, N skipped", from Meson
testlog.json files.

Counts: GoogleTest case counts per test program; a program that failed without reporting failed
cases (a crash, a timeout) counts as one failure, and a non-GoogleTest program as one case. A
skipped case is a GoogleTest case that called GTEST_SKIP (the GPU tests on a machine without
one) or a whole program that exited 77 (Meson's SKIP: a test whose tool or data is missing).
Each skip is listed with its reason: the program's last line of output, or GoogleTest's skip
message.

usage: count_tests.py TESTLOG.json...
"""
import json
import os
import re
import sys

GTEST_SKIPPED_CASE = re.compile(r"^\[  SKIPPED \] ([\w/.]+)(?: \(\d+ ms\))?$")
GTEST_FAILED_CASE = re.compile(r"^\[  FAILED  \] ([\w/.]+)(?:,| \(\d+ ms\)|$)")
GTEST_SKIP_AT = re.compile(r"^(\S+):(\d+): Skipped$")
TEST_MACRO = re.compile(r"^\s*(?:TYPED_)?TEST(?:_F|_P)?\(\s*(\w+),\s*(\w+)\)")


def last_line(text):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1] if lines else "(no output)"


def enclosing_test(path, line):
    """"Suite.Case" of the TEST whose body holds `line` of the source file, or None (a helper's
    line: then the caller names file:line)."""
    try:
        with open(path, errors="replace") as f:
            src = f.readlines()[:line]
    except OSError:
        return None
    for l in reversed(src[:-1]):
        m = TEST_MACRO.match(l)
        if m:
            return m.group(1) + "." + m.group(2)
        if l.rstrip() == "}":  # a function closed above the line: it is not in a TEST's body
            return None
    return None


def gtest_skips(out, build_dir):
    """[(case, reason)] of the skipped GoogleTest cases in one program's output. GoogleTest prints
    "file:line: Skipped", the message, and (without --gtest_brief) "[  SKIPPED ] Suite.Case";
    under --gtest_brief the case is found from file:line in the source."""
    skips = []
    lines = out.splitlines()
    for i, line in enumerate(lines):
        m = GTEST_SKIP_AT.match(line.strip())
        if not m:
            continue
        msg, case = [], None
        for l in lines[i + 1:]:
            c = GTEST_SKIPPED_CASE.match(l.strip())
            if c:
                case = c.group(1)
                break
            if l.startswith("[") or GTEST_SKIP_AT.match(l.strip()) or (msg and not l.strip()):
                break
            if l.strip() and not msg:  # the message's first line (child programs may follow)
                msg.append(l.strip())
        if case is None:
            path = m.group(1)
            if not os.path.isabs(path):
                path = os.path.join(build_dir, path)
            case = enclosing_test(path, int(m.group(2))) or "%s:%s" % (m.group(1), m.group(2))
        skips.append((case, " ".join(msg) or "(GTEST_SKIP without a message)"))
    return skips


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    passed = failed = skipped = 0
    skips = []  # (test, reason)
    failures = []  # (test, what failed): listed last, so a log's tail names them
    # (record, the build directory: its logs are BUILD/meson-logs/*.json)
    records = [(json.loads(l), os.path.dirname(os.path.dirname(os.path.abspath(path))))
               for path in sys.argv[1:] for l in open(path) if l.strip()]
    # A test skipped in one log and run in another (the subproject check, skipped by the whole
    # suite and run on its own by .ci/run) counts once, as run.
    ran = {t.get("name") for t, _ in records if t.get("result") != "SKIP"}
    records = [(t, b) for t, b in records if t.get("result") != "SKIP" or t.get("name") not in ran]
    for t, build_dir in records:
        out = (t.get("stdout") or "") + "\n" + (t.get("stderr") or "")
        name = t.get("name", "?")
        result = t.get("result")
        if result == "SKIP":  # the whole program exited 77
            skipped += 1
            skips.append((name, last_line(out)))
            continue
        ok = result in ("OK", "EXPECTEDFAIL")
        p = sum(int(x) for x in re.findall(r"\[  PASSED  \] (\d+) test", out))
        f = sum(int(x) for x in re.findall(r"\[  FAILED  \] (\d+) test", out))
        s = sum(int(x) for x in re.findall(r"\[  SKIPPED \] (\d+) test", out))
        if s:
            skipped += s
            found = gtest_skips(out, build_dir)
            for case, why in found:
                skips.append(("%s %s" % (name, case), why))
            if len(found) < s:
                skips.append((name, "%d more skipped cases" % (s - len(found))))
        if p or f or s:
            passed += p
            failed += f if (f or ok) else 1
        elif ok:
            passed += 1
        else:
            failed += 1
        if not ok or f:
            cases = sorted({m.group(1) for m in map(GTEST_FAILED_CASE.match, out.splitlines())
                            if m})
            failures += [("%s %s" % (name, c), "failed") for c in cases] or \
                [(name, "%s: %s" % (result, last_line(out)))]
    if skips:
        print("skipped:")
        counted = {}
        for skip in skips:  # the same skip from a shared helper, once with its count
            counted[skip] = counted.get(skip, 0) + 1
        for (name, why), n in counted.items():
            print("  %s: %s%s" % (name, why, " (x%d)" % n if n > 1 else ""))
    if failures:
        print("failed:")
        for name, why in failures:
            print("  %s: %s" % (name, why))
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))


if __name__ == "__main__":
    main()
