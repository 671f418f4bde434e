#!/usr/bin/env python3
"""tools/gpu-check's output folder: from its work folder (step logs, training runs, the test
results), writes the only three files the folder holds, each whole or not at all (written
beside it, then renamed):

  gpu-check.json  every figure: the steps, the failing steps and tests by name, the library
                  versions, the training runs, the step table against PyTorch, the state
                  (running, done, or interrupted and by what);
  steps.tsv       one line per step: name, status, seconds, exit code, note;
  logs.tar.gz     the logs, at most --cap bytes: MANIFEST.txt (what is in, what was cut or left
                  out), failures.txt (each failing step's last lines and each failing test's
                  output), then the failing steps' logs, the small files, the other logs newest
                  first, the runs' summaries; a file that does not fit keeps its first quarter
                  and last three quarters of what does, and one that cannot is left out.

gpu-check runs this after every step and again on exit or SIGTERM; --tables prints the tables
(the last time).

usage: gpu_check_report.py --work DIR --out DIR [--cap BYTES] [--state S] [--note TEXT]
         [--elapsed S] [--budget S] [--nets "NET:BATCH ..."] [--torch-python P]
         [--extra STEP=PATH ...] [--tables]
"""
import argparse
import glob
import io
import json
import os
import sys
import tarfile
import time
import zlib

OUT_FILES = ("gpu-check.json", "steps.tsv", "logs.tar.gz")
# The device tool brings back files of at most 16 MiB (/work/.library/device/README.md).
MAX_CAP = 16 << 20
MIN_CAP = 16 << 10
DEFAULT_CAP = 8 << 20
PER_FILE = 1 << 20  # any one log: its first 256 KiB and last 768 KiB
HEADER = 1024  # a member's tar header and padding, compressed, at most
SMALL = ("versions.json", "steps.tsv", "gpu.csv", "env.txt", "precisions.txt", "test_cuda.json")
RUN_FILES = ("summary.json", "metrics.jsonl", "config.json")
STEP_TAIL = 40  # a failing step's last lines in failures.txt


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def clip(data, keep):
    """data, or its first quarter and last three quarters of `keep` bytes around a note."""
    if len(data) <= keep:
        return data, False
    head = keep // 4
    tail = keep - head
    note = b"\n[... gpu-check: %d bytes cut here ...]\n" % (len(data) - head - tail)
    return data[:head] + note + data[len(data) - tail:], True


def read_steps(work):
    steps = []
    try:
        with open(os.path.join(work, "steps.tsv")) as f:
            for line in f:
                name, status, secs, rc, note = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
                try:
                    seconds = float(secs)
                except ValueError:
                    seconds = None
                steps.append({"name": name, "status": status, "seconds": seconds,
                              "rc": int(rc) if rc.lstrip("-").isdigit() else None,
                              "note": note})
    except OSError:
        pass
    return steps


# ---- the tests -------------------------------------------------------------------------------
def excerpt(text, lines=20, width=300):
    """The last lines of a test's output without GoogleTest's RUN and end markers."""
    body = [l[:width] for l in (text or "").splitlines() if l and not l.startswith("[ ")]
    return body[-lines:]


def tests_summary(results):
    if results is None:
        return None
    counts = results.get("counts", {})
    summary = {k.replace(" ", "_"): counts.get(k, 0) for k in
               ("passed", "failed", "skipped", "crashed", "timed out", "stopped", "not run")}
    summary.update(total=results.get("total", 0), processes=results.get("processes", 0),
                   notes=results.get("notes", []))
    failing = []
    for name, r in results.get("tests", {}).items():
        if r["status"] != "passed":
            failing.append({"name": name, "status": r["status"], "reason": r.get("reason", ""),
                            "output": excerpt(r.get("output")) if len(failing) < 200 else []})
    summary["failing"] = failing
    return summary


def failures_text(steps, logs, results):
    """failures.txt: each failing step's last lines, each test that did not pass and its
    output (the start and end of a long one)."""
    out = []
    for s in steps:
        if s["status"] != "FAIL":
            continue
        out.append("== step %s: %s (%s)\n" % (s["name"], s["status"], s["note"]))
        data = read_bytes(os.path.join(logs, s["name"] + ".log")) or b"(no log)\n"
        out.append("".join(l[:300] + "\n" for l in data.decode("utf-8", "replace")
                           .splitlines()[-STEP_TAIL:]))
    for name, r in (results or {}).get("tests", {}).items():
        if r["status"] == "passed":
            continue
        out.append("\n== test %s: %s%s\n" % (name, r["status"],
                                              (" (" + r["reason"] + ")") if r.get("reason") else ""))
        text = (r.get("output") or "").encode("utf-8", "replace")
        out.append(clip(text, 16 << 10)[0].decode("utf-8", "replace"))
    for n in (results or {}).get("notes", []):
        out.append("\n== test binary: %s\n" % n)
    return ("".join(out) or "no step or test failed\n").encode("utf-8", "replace")


# ---- the archive -----------------------------------------------------------------------------
def candidates(work, steps, results, extras):
    """(name in the archive, bytes) in the order they are kept, most useful first."""
    logs = os.path.join(work, "logs")
    failed = [s["name"] for s in steps if s["status"] == "FAIL"]
    out, seen = [("failures.txt", failures_text(steps, logs, results))], set()

    def add_log(step):
        path = os.path.join(logs, step + ".log")
        if path not in seen and os.path.isfile(path):
            seen.add(path)
            out.append(("logs/%s.log" % step, read_bytes(path)))
        for i, (st, extra) in enumerate(extras):
            if st == step and extra not in seen and os.path.isfile(extra):
                seen.add(extra)
                out.append(("logs/%s.%d.%s" % (step, i, os.path.basename(extra)),
                            read_bytes(extra)))

    for step in failed:
        add_log(step)
    for name in SMALL:
        data = read_bytes(os.path.join(work, name))
        if data is not None:
            out.append((name, data))
    others = sorted(glob.glob(os.path.join(logs, "*.log")), key=os.path.getmtime, reverse=True)
    for path in others:
        add_log(os.path.basename(path)[:-4])
    for st, _ in extras:
        add_log(st)
    runs = sorted(glob.glob(os.path.join(work, "runs", "*")), key=os.path.getmtime, reverse=True)
    for run in runs:
        for f in RUN_FILES:
            data = read_bytes(os.path.join(run, f))
            if data is not None:
                out.append(("runs/%s/%s" % (os.path.basename(run), f), data))
    return [(n, d) for n, d in out if d is not None]


def packed(data):
    return len(zlib.compress(data, 6)) + HEADER


def choose(members, budget):
    """Greedy, in order: (name, bytes, original size, how) within the budget of compressed
    bytes; how is "whole", "cut" or "left out"."""
    chosen, left = [], budget
    for name, data in members:
        data, cut = clip(data, PER_FILE)
        size = packed(data)
        if size > left and left > 4 * HEADER:  # keep what fits, start and end
            ratio = len(data) / max(size - HEADER, 1)
            keep = int((left - 2 * HEADER) * ratio * 0.9)
            while keep > 1024:
                part, _ = clip(data, keep)
                size = packed(part)
                if size <= left:
                    data, cut = part, True
                    break
                keep = int(keep * 0.8)
        if size > left:
            chosen.append((name, None, len(data), "left out"))
            continue
        left -= size
        chosen.append((name, data, len(data), "cut" if cut else "whole"))
    return chosen


def manifest(chosen, cap):
    lines = ["gpu-check's logs, at most %d bytes compressed; each file whole, cut (its start and"
             " end kept) or left out:" % cap]
    for name, _, size, how in chosen:
        lines.append("%-9s %10d  %s" % (how, size, name))
    return ("\n".join(lines) + "\n").encode()


def write_archive(path, chosen, cap):
    with open(path, "wb") as raw:
        with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=6) as tar:
            now = time.time()
            for name, data, _, _ in [("MANIFEST.txt", manifest(chosen, cap), 0, "")] + chosen:
                if data is None:
                    continue
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), now, 0o644
                tar.addfile(info, io.BytesIO(data))
    return os.path.getsize(path)


def build_archive(path, members, cap):
    """Writes the archive within cap bytes; returns (bytes, the choice)."""
    budget = cap - 8 * HEADER
    clipped = [(n, clip(d, PER_FILE)) for n, d in members]
    if sum(len(d) + HEADER for _, (d, _) in clipped) <= budget:  # fits uncompressed: no estimate
        chosen = [(n, d, len(d), "cut" if cut else "whole") for n, (d, cut) in clipped]
        size = write_archive(path, chosen, cap)
        if size <= cap:
            return size, chosen
    for _ in range(6):
        chosen = choose(members, budget)
        size = write_archive(path, chosen, cap)
        if size <= cap:
            return size, chosen
        budget -= (size - cap) + 4 * HEADER  # the estimate was short: again with less
    chosen = choose(members[:1], max(budget, HEADER))
    return write_archive(path, chosen, cap), chosen


# ---- the report ------------------------------------------------------------------------------
KEYS = ["test_accuracy", "test_loss", "best_accuracy", "time_to_target_seconds",
        "target_accuracy", "images_per_second", "train_seconds", "wall_seconds", "epochs",
        "steps", "algorithm", "net", "groups", "comm_share", "wait_share", "gflops_per_second"]
TRAIN_RUNS = [("lenet-msgd", "train-msgd", "LeNet msgd b64 to 0.90 (Fashion-MNIST)"),
              ("lenet-msgd-bf16", "train-msgd-bf16",
               "LeNet msgd b64 to 0.90 at bf16 (bf16 activations)"),
              ("lenet-sync-easgd", "train-sync-easgd",
               "LeNet sync-easgd, 2 groups on cuda:0 (resident)"),
              ("lenet-async-easgd", "train-async-easgd",
               "LeNet async-easgd, 2 groups on cuda:0 (staged)"),
              ("two-groups-resnet18", "two-groups-resnet18",
               "resnet18 sync-easgd b32, 2 groups on cuda:0"),
              ("two-groups-googlenet", "two-groups-googlenet",
               "googlenet sync-easgd b32, 2 groups on cuda:0")]


def read_gpu(work):
    gpu = {}
    try:
        with open(os.path.join(work, "gpu.csv")) as f:
            row = [c.strip() for c in f.readline().split(",")]
        gpu = dict(zip(["name", "driver", "memory", "compute_capability"], row))
    except OSError:
        pass
    gpu = {k: v for k, v in gpu.items() if v}
    if not gpu.get("name"):  # no nvidia-smi: the name easel's topology printed
        try:
            with open(os.path.join(work, "logs", "topology.log")) as f:
                for line in f:
                    if "cuda:0" in line:
                        gpu = {"name": line.split("cuda:0", 1)[1].strip().split(",")[0]}
                        break
        except OSError:
            pass
    return gpu


def read_runs(work, nets, precisions):
    names = [r[0] for r in TRAIN_RUNS]
    names += ["step-%s-%s" % (nb.split(":")[0], p) for nb in nets for p in precisions]
    runs = {}
    for name in names:
        s = load(os.path.join(work, "runs", name, "summary.json"))
        if s is not None:
            r = {k: s.get(k) for k in KEYS}
            r["batch"] = (s.get("config") or {}).get("batch")
            runs[name] = r
    return runs


def read_torch(work):
    torch = {}  # "net/precision" -> nets_bench.py's JSON
    try:
        with open(os.path.join(work, "logs", "pytorch-steps.log")) as f:
            for line in f:
                if line.startswith("{"):
                    r = json.loads(line)
                    torch["%s/%s" % (r["net"], r["precision"])] = r
    except (OSError, ValueError, KeyError):
        pass
    return torch


def ips(r):
    if r is None:
        return None
    v = r.get("images_per_second", r.get("img_s"))
    if isinstance(v, dict):
        v = v.get("median")
    return v[1] if isinstance(v, list) else v


def step_table(nets, precisions, runs, torch):
    table, ratios = [], {}
    for nb in nets:
        net, b = nb.split(":")
        e = {p: ips(runs.get("step-%s-%s" % (net, p))) for p in precisions}
        t = {p: ips(torch.get("%s/%s" % (net, p))) for p in ("fp32", "tf32", "bf16")}
        ratio = e.get("fp32") / t["fp32"] if e.get("fp32") and t["fp32"] else None
        if ratio is not None:
            ratios[net + "_fp32_over_pytorch_fp32"] = ratio
        table.append({"net": net, "batch": int(b), "easel_img_s": e, "pytorch_img_s": t,
                      "easel_fp32_over_pytorch_fp32": ratio})
    return table, ratios


def report(a, steps):
    nets = a.nets.split()
    try:
        with open(os.path.join(a.work, "precisions.txt")) as f:
            precisions = f.read().split()
    except OSError:
        precisions = []
    runs = read_runs(a.work, nets, precisions)
    torch = read_torch(a.work)
    table, ratios = step_table(nets, precisions, runs, torch)
    failed = [s["name"] for s in steps if s["status"] == "FAIL"]
    return {"state": a.state, "note": a.note or None, "passed": a.state == "done" and not failed,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "gpu": read_gpu(a.work), "versions": load(os.path.join(a.work, "versions.json")),
            "elapsed_seconds": a.elapsed, "budget_seconds": a.budget, "failed_steps": failed,
            "steps": steps,
            "test_cuda": tests_summary(load(os.path.join(a.work, "test_cuda.json"))),
            "easel": runs, "precisions": precisions, "training_step": table, "pytorch": torch,
            "pytorch_python": a.torch_python or None, "ratios_easel_over_pytorch": ratios,
            "work_dir": a.work}


def fmt(v):
    return "–" if v is None else "{:,.0f}".format(v)


def run_row(r, step, target):
    if r is None:
        return "%s: %s (logs.tar.gz)" % ({"SKIP": "skipped"}.get(step["status"], "failed"),
                                          step["note"] or "no summary")
    acc = r.get("test_accuracy")
    acc = "%.4f" % acc if isinstance(acc, (int, float)) else str(acc)
    if not target:
        return "acc %s, %s img/s" % (acc, fmt(r.get("images_per_second")))
    tt = r.get("time_to_target_seconds")
    return ("0.90 at %.1f s" % tt if tt is not None else "not reached") + \
        ", final %s in %.2f epochs, %s img/s" % (acc, r.get("epochs") or 0,
                                                 fmt(r.get("images_per_second")))


def print_tables(rep):
    steps, failed, t = rep["steps"], rep["failed_steps"], rep["test_cuda"]
    print()
    print("gpu-check: %s; %d steps, %d failed%s; %s s; in %s" % (
        "PASS" if rep["passed"] else "FAIL" if rep["state"] == "done" else rep["state"].upper(),
        len(steps), len(failed), (" (" + ", ".join(failed) + ")") if failed else "",
        rep["elapsed_seconds"], rep["note"] or "gpu-check.json"))
    v = rep.get("versions") or {}
    print("versions: " + ", ".join("%s %s" % (k, (v[k] or {}).get("version") or "-") for k in v))
    print()
    torch = rep["pytorch"]
    name = rep["gpu"].get("name") or next(
        (r["gpu"] for r in torch.values() if r.get("gpu")), "GPU unknown")
    version = next(iter(torch.values())).get("torch", "") if torch else "(not run)"
    print("### %s%s, easel vs PyTorch %s" % (
        name, (", driver " + rep["gpu"]["driver"]) if rep["gpu"].get("driver") else "", version))
    print()
    print("| check | result |")
    print("|---|---|")
    if t:
        print("| `test_cuda` (GoogleTest on the GPU) | %d passed, %d failed, %d crashed, %d timed "
              "out, %d skipped, %d not run |" % (t["passed"], t["failed"], t["crashed"],
                                                 t["timed_out"], t["skipped"], t["not_run"]))
        for f in t["failing"][:20]:
            print("| ↳ %s | %s%s |" % (f["name"], f["status"],
                                       (": " + f["reason"]) if f["reason"] else ""))
    by_name = {s["name"]: s for s in steps}
    for run, step, label in TRAIN_RUNS:
        if run in rep["easel"] or step in by_name:
            print("| %s | %s |" % (label, run_row(rep["easel"].get(run), by_name.get(step),
                                                  run.startswith("lenet-msgd"))))
    print("| total elapsed (budget %s s) | %s s |" % (rep["budget_seconds"],
                                                     rep["elapsed_seconds"]))
    precisions = rep["precisions"]
    if not precisions and not torch:
        return
    print()
    print("Training step, images/s (msgd on synthetic data; PyTorch: SGD with momentum, same "
          "batch):")
    print()
    cols = ["easel " + p for p in precisions] + [
        "PyTorch fp32 (TF32 off)", "PyTorch TF32", "PyTorch bf16 autocast",
        "easel fp32 / PyTorch fp32"]
    print("| net | batch | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for r in rep["training_step"]:
        cells = [fmt(r["easel_img_s"].get(p)) for p in precisions]
        cells += [fmt(r["pytorch_img_s"][p]) for p in ("fp32", "tf32", "bf16")]
        x = r["easel_fp32_over_pytorch_fp32"]
        cells.append("%.2fx" % x if x is not None else "–")
        print("| %s | %d | %s |" % (r["net"], r["batch"], " | ".join(cells)))


def publish(a):
    steps = read_steps(a.work)
    results = load(os.path.join(a.work, "test_cuda.json"))
    extras = [tuple(e.split("=", 1)) for e in a.extra]
    for f in os.listdir(a.out):  # what an earlier publish killed between write and rename
        if f.startswith(".") and f.endswith(".tmp") and f[1:-4] in OUT_FILES:
            os.unlink(os.path.join(a.out, f))
    tmp = {f: os.path.join(a.out, "." + f + ".tmp") for f in OUT_FILES}
    size, chosen = build_archive(tmp["logs.tar.gz"], candidates(a.work, steps, results, extras),
                                 a.cap)
    rep = report(a, steps)
    rep["log_archive"] = {"bytes": size, "cap": a.cap,
                          "cut": [c[0] for c in chosen if c[3] == "cut"],
                          "left_out": [c[0] for c in chosen if c[3] == "left out"]}
    with open(tmp["gpu-check.json"], "w") as f:
        json.dump(rep, f, indent=2)
        f.write("\n")
    with open(tmp["steps.tsv"], "wb") as f:
        f.write(read_bytes(os.path.join(a.work, "steps.tsv")) or b"")
    for f in ("logs.tar.gz", "steps.tsv", "gpu-check.json"):
        os.replace(tmp[f], os.path.join(a.out, f))
    if a.tables:
        print_tables(rep)


def cap_bytes(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("'%s' is not a number of bytes" % text)
    if not MIN_CAP <= v <= MAX_CAP:
        raise argparse.ArgumentTypeError("%d is outside [%d, %d] bytes (the device tool brings "
                                         "back files of at most 16 MiB)" % (v, MIN_CAP, MAX_CAP))
    return v


def main(argv):
    p = argparse.ArgumentParser(prog="gpu_check_report.py")
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--cap", type=cap_bytes, default=DEFAULT_CAP)
    p.add_argument("--state", choices=["running", "done", "interrupted"], default="running")
    p.add_argument("--note", default="")
    p.add_argument("--elapsed", type=int, default=0)
    p.add_argument("--budget", type=int, default=0)
    p.add_argument("--nets", default="")
    p.add_argument("--torch-python", default="")
    p.add_argument("--extra", action="append", default=[], metavar="STEP=PATH")
    p.add_argument("--tables", action="store_true")
    a = p.parse_args(argv)
    if any("=" not in e for e in a.extra):
        p.error("--extra takes STEP=PATH")
    publish(a)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
