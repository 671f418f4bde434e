#!/usr/bin/env python3
"""tools/gpu-check's steps that are easier in Python than in bash, one subcommand each.

  gtest [--test-cap S] [--timeout S] --results JSON -- BINARY [ARG...]
      Runs a GoogleTest binary so that every test runs and each one that does not pass is named:
      one process for all of them, and when a test crashes (a signal, an exit inside the test)
      or hangs past --test-cap seconds, the process is killed and another runs the tests that
      have not run yet. Prints the binary's output as it comes; writes JSON: each test's status
      (passed, failed, skipped, crashed, timed out, stopped, not run), its seconds, and the
      output of each one that did not pass. On SIGTERM (the step's timeout, gpu-check stopped)
      the test running is "stopped", the rest "not run", and the JSON is written before exit.
      Exit 0 when at least one test ran and every one passed (a skip is not a pass: on the GPU
      machine nothing may skip), else 1; 2 on bad arguments or when the tests cannot be listed.
  check-run DIR [--no-chance REASON [--chance-if RUN_DIR]]
      A training run's summary.json and metrics.jsonl (easel train --out DIR): prints one line
      (accuracy, images/s). Exit 1 when there is no summary, a loss or the test accuracy is not
      finite (easel writes NaN and infinity as null), or the test accuracy is at chance level:
      not above 1/classes + CHANCE_MARGIN (classes from the run's data), unless --no-chance
      says why a correct run does not get above it in its steps and the run --chance-if names
      (the same net at fp32) did not get above it either.
  versions [--easel BIN] [--cuda-root DIR] [--json PATH]
      The versions of the NVIDIA driver (nvidia-smi), the CUDA driver API and runtime
      (cudaDriverGetVersion, cudaRuntimeGetVersion), cuDNN (cudnnGetVersion), cuBLAS
      (cublasGetProperty) and NCCL (ncclGetVersion), each read from the library the easel
      binary loads (its ldd; cuBLAS, which easel opens at run time, from the toolkit's lib64
      first as easel does), with the library's path. Prints them; --json also writes them.
      A version that cannot be read is null with the reason. Exit 0 when the runtime's version
      was read, else 1.
"""
import argparse
import ctypes
import glob
import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time

# The check's margin over chance: a run whose test accuracy is not above 1/classes + 0.05 (0.15
# for 10 classes) learnt nothing (a kernel computing garbage trains to chance, not to NaN).
CHANCE_MARGIN = 0.05
# A failing test's output kept in the JSON: its first and last bytes.
OUTPUT_HEAD, OUTPUT_TAIL = 16 << 10, 48 << 10


class Stopped(Exception):
    """SIGTERM or SIGINT arrived."""


def on_signal(signum, _frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the results are being written
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise Stopped(signal.Signals(signum).name)


def clip(text, head=OUTPUT_HEAD, tail=OUTPUT_TAIL):
    """text, or its first `head` and last `tail` characters with a line saying what was cut."""
    if len(text) <= head + tail:
        return text
    cut = len(text) - head - tail
    return text[:head] + "\n[... %d characters cut ...]\n" % cut + text[-tail:]


# ---- gtest -----------------------------------------------------------------------------------
RUN_LINE = re.compile(r"^\[ RUN      \] (\S+)")
END_LINE = re.compile(r"^\[ +(OK|FAILED|SKIPPED) +\] (\S+?)(?:,| \(|$)")
STATUS_OF = {"OK": "passed", "FAILED": "failed", "SKIPPED": "skipped"}


def list_tests(binary, args, timeout):
    """The binary's tests in its order (disabled ones left out), or raises RuntimeError."""
    try:
        r = subprocess.run([binary] + args + ["--gtest_list_tests"], capture_output=True,
                           text=True, errors="replace", timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError("%s --gtest_list_tests: %s" % (binary, e))
    if r.returncode != 0:
        raise RuntimeError("%s --gtest_list_tests: exit %d: %s" % (
            binary, r.returncode, (r.stdout + r.stderr).strip()[-2000:]))
    tests, suite = [], None
    for line in r.stdout.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split()[0]
        elif suite is not None:
            name = suite + line.split()[0]
            if not any(p.startswith("DISABLED_") for p in re.split(r"[./]", name)):
                tests.append(name)
    return tests


def describe_exit(rc):
    return "killed by %s" % signal.Signals(-rc).name if rc < 0 else "exit %d" % rc


class Pass:
    """One process of the binary: reads its output line by line, echoes it, and fills
    results[name] for each test that ends, crashes or outlives its cap."""

    def __init__(self, cmd, results, test_cap, deadline):
        self.results, self.test_cap, self.deadline = results, test_cap, deadline
        self.current, self.started, self.lines = None, 0.0, []
        if shutil.which("stdbuf"):  # the test's own printf by line: nothing lost in a crash
            cmd = ["stdbuf", "-oL", "-eL"] + cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.pending = b""

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def finish_current(self, status, reason):
        out = "".join(self.lines)
        self.results[self.current] = {"status": status, "reason": reason,
                                      "seconds": round(time.monotonic() - self.started, 3),
                                      "output": clip(out)}
        self.current = None

    def line(self, text):
        sys.stdout.write(text)
        m = RUN_LINE.match(text)
        if m:
            self.current, self.started, self.lines = m.group(1), time.monotonic(), [text]
            return
        if self.current is None:
            return
        self.lines.append(text)
        m = END_LINE.match(text)
        if m and m.group(2) == self.current:
            st = STATUS_OF[m.group(1)]
            if st == "passed":
                self.results[self.current] = {"status": st, "seconds": round(
                    time.monotonic() - self.started, 3)}
                self.current = None
            else:
                self.finish_current(st, "")

    def run(self):
        """Returns a note when the process ended abnormally outside any test, else ""."""
        fd = self.proc.stdout.fileno()
        while True:
            now = time.monotonic()
            if self.current is not None and now - self.started > self.test_cap:
                self.kill()
                self.finish_current("timed out", "ran past %g s (--test-cap)" % self.test_cap)
                return ""
            if now > self.deadline:
                self.kill()
                if self.current is not None:
                    self.finish_current("timed out", "the step's time (--timeout) ran out")
                return "the step's time (--timeout) ran out"
            ready, _, _ = select.select([fd], [], [], 0.25)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self.pending += chunk
            *whole, self.pending = self.pending.split(b"\n")
            for w in whole:
                self.line(w.decode("utf-8", "replace") + "\n")
        if self.pending:
            self.line(self.pending.decode("utf-8", "replace") + "\n")
        rc = self.proc.wait()
        if self.current is not None:
            self.finish_current("crashed", describe_exit(rc) + " inside the test")
            return ""
        return "" if rc in (0, 1) else describe_exit(rc) + " outside any test"


def run_gtest(binary, args, test_cap, timeout, results):
    """Fills results (name -> entry) over as many passes as crashes and hangs need; returns the
    notes of processes that ended abnormally outside a test."""
    deadline = time.monotonic() + timeout
    tests = list_tests(binary, args, min(60.0, timeout))
    notes, passes = [], 0
    todo = list(tests)
    p = None
    try:
        while todo and time.monotonic() < deadline:
            passes += 1
            # The first process runs everything in the binary's own order; a later one only
            # what has not run.
            flt = [] if passes == 1 else ["--gtest_filter=" + ":".join(todo)]
            print("gpu-check gtest: process %d: %d test(s)" % (passes, len(todo)), flush=True)
            p = Pass([binary] + args + flt, results, test_cap, deadline)
            note = p.run()
            p = None
            if note:
                notes.append("process %d: %s" % (passes, note))
            left = [t for t in todo if t not in results]
            if len(left) == len(todo):
                break  # no test ended: another process would do the same
            todo = left
    except Stopped as e:
        if p is not None:
            p.kill()
            if p.current is not None:
                p.finish_current("stopped", "gpu-check was stopped (%s)" % e)
        notes.append("stopped by %s" % e)
    why = notes[-1] if notes else "no process reached it"
    for t in tests:
        results.setdefault(t, {"status": "not run", "reason": why})
    return tests, notes, passes


def gtest_main(a):
    results, tests, notes, passes = {}, [], [], 0
    error = None
    try:
        tests, notes, passes = run_gtest(a.binary, a.args, a.test_cap, a.timeout, results)
    except RuntimeError as e:
        error = str(e)
    except Stopped as e:
        error = "stopped by %s before the tests were listed" % e
    counts = {}
    for r in results.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    order = {t: i for i, t in enumerate(tests)}
    report = {"binary": a.binary, "processes": passes, "total": len(tests), "counts": counts,
              "notes": notes + ([error] if error else []),
              "tests": {t: results[t] for t in sorted(results, key=lambda t: order.get(t, 0))}}
    tmp = a.results + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.results)
    bad = [t for t, r in report["tests"].items() if r["status"] != "passed"]
    for t in bad:
        r = report["tests"][t]
        print("gpu-check gtest: %s %s%s" % (r["status"].upper(), t,
                                            (": " + r["reason"]) if r.get("reason") else ""))
    for n in report["notes"]:
        print("gpu-check gtest: " + n)
    print("gpu-check gtest: summary: " + summary_line(report, passes))
    if error:
        return 2
    return 0 if tests and not bad and not notes else 1


def summary_line(report, passes):
    """"40 passed, 2 failed (A.B, C.D), 1 crashed (E.F) in 2 processes": at most 5 names each."""
    parts = []
    for st in ("passed", "failed", "crashed", "timed out", "stopped", "skipped", "not run"):
        names = [t for t, r in report["tests"].items() if r["status"] == st]
        if not names:
            continue
        part = "%d %s" % (len(names), st)
        if st != "passed":
            part += " (%s%s)" % (", ".join(names[:5]), ", ..." if len(names) > 5 else "")
        parts.append(part)
    notes = "; ".join(report["notes"])
    return "%s in %d process(es)%s" % (", ".join(parts) or "no test ran", passes,
                                       "; " + notes if notes else "")


# ---- check-run -------------------------------------------------------------------------------
def finite(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def classes_of(summary):
    """The number of classes of the run's data: the synthetic spec's last field (10 when left
    out), else 10 (Fashion-MNIST, CIFAR-10: the only other sets gpu-check trains on)."""
    spec = str((summary.get("config") or {}).get("data") or summary.get("data") or "")
    f = spec.split(":")
    if f[0] == "synthetic" and len(f) > 3 and f[3].isdigit():
        return int(f[3])
    return 10


def chance_floor(summary):
    """(classes, the accuracy a run must be above)."""
    k = classes_of(summary)
    return k, 1.0 / k + CHANCE_MARGIN


def above_chance(run_dir):
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            s = json.load(f)
    except (OSError, ValueError):
        return False
    return finite(s.get("test_accuracy")) and s["test_accuracy"] > chance_floor(s)[1]


def check_run(run_dir, no_chance="", chance_if=""):
    """(ok, note) for the training run in run_dir. no_chance: why its accuracy is not held to
    above chance (a correct run does not get there in its steps), "" to hold it; chance_if: a
    run (the same net at fp32) that holds it after all once that run got above chance."""
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        return False, "no summary.json (%s)" % (e.strerror if isinstance(e, OSError) else e)
    acc, loss = s.get("test_accuracy"), s.get("test_loss")
    bad = []
    if not finite(acc):
        bad.append("test accuracy %s" % acc)
    if not finite(loss):
        bad.append("test loss %s" % loss)
    try:
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                for k in ("train_loss", "test_loss", "test_accuracy"):
                    if k in r and not finite(r[k]):
                        bad.append("%s %s at step %s" % (k, r[k], r.get("step")))
                        break
                if len(bad) > 2:
                    break
    except (OSError, ValueError):
        pass  # the summary decides
    ips = s.get("images_per_second")
    note = "acc %s (best %s), %s img/s, %.1f s training" % (
        "%.4f" % acc if finite(acc) else acc,
        "%.4f" % s["best_accuracy"] if finite(s.get("best_accuracy")) else s.get("best_accuracy"),
        "%.0f" % ips if finite(ips) else ips, s.get("train_seconds") or 0)
    tt = s.get("time_to_target_seconds")
    if finite(tt):
        note += ", target at %.1f s" % tt
    if bad:
        return False, note + "; not finite: " + ", ".join(bad)
    if no_chance and not (chance_if and above_chance(chance_if)):
        return True, note + "; chance not checked: " + no_chance
    k, floor = chance_floor(s)
    if acc <= floor:
        return False, note + "; at chance level (%d classes: needs above 1/%d + %.2f = %.3f%s)" % (
            k, k, CHANCE_MARGIN, floor,
            ", as %s got" % os.path.basename(chance_if) if no_chance else "")
    return True, note


def check_run_main(a):
    ok, note = check_run(a.dir, a.no_chance, a.chance_if)
    print(note)
    return 0 if ok else 1


# ---- versions --------------------------------------------------------------------------------
def ldd_paths(binary):
    """soname -> resolved path of the libraries the binary loads ({} without ldd or binary)."""
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    libs = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m:
            libs[m.group(1)] = m.group(2)
    return libs


def find_lib(stem, libs, dirs):
    """The library libSTEM.so.N the binary loads, else the newest one in dirs, else the soname
    for the loader's search path, else None."""
    for so, path in libs.items():
        if so.startswith(stem + ".so"):
            return path
    for d in dirs:
        found = sorted(glob.glob(os.path.join(d, stem + ".so.[0-9]*")),
                       key=lambda p: [int(x) if x.isdigit() else 0 for x in re.split(r"[.]", p)])
        if found:
            return found[-1]
    return None


def read_version(path, fn):
    """{"version", "path"} from fn(ctypes library), or with "error" instead of a version."""
    if path is None:
        return {"version": None, "path": None, "error": "library not found"}
    try:
        lib = ctypes.CDLL(path)
        return {"version": fn(lib), "path": path}
    except (OSError, AttributeError, RuntimeError) as e:
        return {"version": None, "path": path, "error": str(e)}


def cuda_int(fn):
    v = ctypes.c_int(0)
    rc = fn(ctypes.byref(v))
    if rc != 0:
        raise RuntimeError("status %d" % rc)
    return v.value


def dotted(v):  # CUDA's 1000 * major + 10 * minor
    return "%d.%d" % (v // 1000, (v % 1000) // 10)


def driver_api_version(lib):
    v = cuda_int(lib.cudaDriverGetVersion)
    if v == 0:
        raise RuntimeError("no driver (cudaDriverGetVersion gave 0)")
    return dotted(v)


def cudnn_version(lib):
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    v = lib.cudnnGetVersion()
    if v >= 90000:  # cuDNN 9: major * 10000 + minor * 100 + patch
        return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)


def cublas_version(lib):
    return ".".join(str(cuda_int(lambda p, i=i: lib.cublasGetProperty(i, p))) for i in (0, 1, 2))


def nccl_version(lib):
    v = cuda_int(lib.ncclGetVersion)
    if v >= 20900:  # NCCL 2.9 on: major * 10000 + minor * 100 + patch
        return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)


def driver_version():
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"version": None, "error": "nvidia-smi: %s" % e}
    lines = r.stdout.split()
    if r.returncode != 0 or not lines:
        return {"version": None, "error": "nvidia-smi: exit %d: %s" % (
            r.returncode, (r.stdout + r.stderr).strip()[:200])}
    return {"version": lines[0]}


def versions(easel, cuda_root):
    libs = ldd_paths(easel) if easel else {}
    dirs = [os.path.join(cuda_root, d) for d in ("lib64", "lib", "targets/x86_64-linux/lib")] \
        if cuda_root else []
    v = {"driver": driver_version()}
    cudart = find_lib("libcudart", libs, dirs)
    v["cuda_driver_api"] = read_version(cudart, driver_api_version)
    v["cuda_runtime"] = read_version(cudart, lambda l: dotted(cuda_int(l.cudaRuntimeGetVersion)))
    v["cudnn"] = read_version(find_lib("libcudnn", libs, dirs), cudnn_version)
    # easel opens cuBLAS itself (devices/cuda/cublas_dyn.cpp): the toolkit's lib64 first.
    v["cublas"] = read_version(find_lib("libcublas", {}, dirs) or
                               find_lib("libcublas", libs, []), cublas_version)
    v["nccl"] = read_version(find_lib("libnccl", libs, dirs), nccl_version)
    return v


def versions_main(a):
    v = versions(a.easel, a.cuda_root)
    for k, r in v.items():
        print("%-16s %-10s %s" % (k, r.get("version") or "-",
                                  r.get("error") or r.get("path") or ""))
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(v, f, indent=1)
            f.write("\n")
        os.replace(a.json + ".tmp", a.json)
    return 0 if v["cuda_runtime"].get("version") else 1


def main(argv):
    p = argparse.ArgumentParser(prog="gpu_check_steps.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gtest")
    g.add_argument("--results", required=True)
    g.add_argument("--test-cap", type=float, default=60.0)
    g.add_argument("--timeout", type=float, default=3600.0)
    g.add_argument("binary")
    g.add_argument("args", nargs="*")
    c = sub.add_parser("check-run")
    c.add_argument("dir")
    c.add_argument("--no-chance", default="", metavar="REASON")
    c.add_argument("--chance-if", default="", metavar="DIR")
    v = sub.add_parser("versions")
    v.add_argument("--easel")
    v.add_argument("--cuda-root")
    v.add_argument("--json")
    a = p.parse_args(argv)
    if a.cmd == "gtest" and (a.test_cap <= 0 or a.timeout <= 0):
        p.error("--test-cap and --timeout must be positive seconds")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return {"gtest": gtest_main, "check-run": check_run_main, "versions": versions_main}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
