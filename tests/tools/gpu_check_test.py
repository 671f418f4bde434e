#!/usr/bin/env python3
"""tools/gpu-check on a machine without a GPU (its header; docs/PERFORMANCE.md, "Running the
check"): the CPU build as it is (GPU_CHECK_NO_BUILD=1), a GoogleTest binary of planted outcomes
(gpu_check_fake_tests: a failure, a skip, a crash, a hang, 1.2 MB of output) in test_cuda's place.

  - every planted test is named with its outcome, and the test after the crash and the hang ran;
  - --out holds gpu-check.json, steps.tsv and logs.tar.gz alone, the archive within
    GPU_CHECK_LOG_CAP with the failing test's output in it; the training runs are in the work
    folder; the GPU steps fail or skip with their reason; the library versions are reported;
  - SIGTERM in the middle of the hanging test: exit 143 within seconds, the hanging process
    gone, gpu-check.json says interrupted in test_cuda;
  - a training run's check: non-finite losses and chance-level accuracy fail, alone and through
    the script with a planted easel that writes runs (into the work folder, --no-checkpoint);
  - bad input (the cap, a foreign file in --out) refused in one line, exit 2, nothing touched.

usage: gpu_check_test.py SOURCE_ROOT BUILD_ROOT FAKE_TESTS
"""
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT, BUILD, FAKE = (os.path.abspath(a) for a in sys.argv[1:4])  # meson's cwd: the build
TOOL = os.path.join(ROOT, "tools", "gpu-check")
THREE = ["gpu-check.json", "logs.tar.gz", "steps.tsv"]
CAP = 256 << 10
failed = 0

sys.dont_write_bytecode = True  # nothing written into tools/
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gpu_check_steps  # noqa: E402


def check(cond, what):
    global failed
    if not cond:
        print("FAIL: " + what)
        failed += 1
    return cond


def env_for(tmp, **extra):
    env = dict(os.environ, GPU_CHECK_NO_BUILD="1", GPU_CHECK_BUILD=BUILD, GPU_CHECK_TEST_BIN=FAKE,
               GPU_CHECK_NETS="lenet:64", GPU_CHECK_WORK=os.path.join(tmp, "work"),
               GPU_CHECK_LOG_CAP=str(CAP), GPU_CHECK_BUDGET="600", GPU_CHECK_PYTORCH="0",
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("OUT", None)
    env.update(extra)
    return env


def read_archive(path):
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read().decode("utf-8", "replace")
                for m in tar.getmembers()}


def full_run(tmp):
    out = os.path.join(tmp, "out")
    env = env_for(tmp, GPU_CHECK_FAKE_HANG="600", GPU_CHECK_TEST_CAP="3")
    t = subprocess.run([TOOL, "--out", out], env=env, capture_output=True, text=True, timeout=600)
    check(t.returncode == 1, "full run: exit %d, want 1 (failed steps)\n%s" % (
        t.returncode, t.stdout[-3000:] + t.stderr[-2000:]))
    check(sorted(os.listdir(out)) == THREE, "full run: --out holds %s" % os.listdir(out))
    rep = json.load(open(os.path.join(out, "gpu-check.json")))
    check(rep["state"] == "done" and not rep["passed"], "full run: state %s" % rep["state"])
    tc = rep["test_cuda"] or {"failing": [], "passed": 0, "processes": 0}
    got = {f["name"]: f["status"] for f in tc["failing"]}
    want = {"Planted.Fails": "failed", "Planted.Skips": "skipped", "Planted.Crashes": "crashed",
            "Planted.Hangs": "timed out"}
    check(got == want, "full run: failing tests %s, want %s" % (got, want))
    check(tc["passed"] == 3 and tc["processes"] == 3,
          "full run: %d passed in %d processes, want 3 in 3 (the test after the crash and the "
          "hang ran)" % (tc["passed"], tc["processes"]))
    fails = next(f for f in tc["failing"] if f["name"] == "Planted.Fails")
    check("planted failure" in fails["output"], "full run: Planted.Fails' output %s" % fails)
    steps = {s["name"]: s for s in rep["steps"]}
    check(steps.get("test_cuda", {}).get("status") == "FAIL" and "1 crashed (Planted.Crashes)"
          in steps["test_cuda"]["note"], "full run: test_cuda step %s" % steps.get("test_cuda"))
    for name in ("train-msgd", "train-sync-easgd", "step-lenet-fp32"):
        s = steps.get(name)
        check(s is not None and s["status"] in ("FAIL", "SKIP") and s["note"],
              "full run: step %s is %s, want FAIL or SKIP with a note" % (name, s))
    check(set(rep["versions"]) == {"driver", "cuda_driver_api", "cuda_runtime", "cudnn",
                                   "cublas", "nccl"}, "full run: versions %s" % rep["versions"])
    size = os.path.getsize(os.path.join(out, "logs.tar.gz"))
    check(size <= CAP, "full run: logs.tar.gz is %d bytes, cap %d" % (size, CAP))
    files = read_archive(os.path.join(out, "logs.tar.gz"))
    check(list(files)[:2] == ["MANIFEST.txt", "failures.txt"], "archive order %s" % list(files))
    for text in ("planted-failure-output", "planted failure", "planted-crash-output",
                 "== test Planted.Hangs: timed out"):
        check(text in files.get("failures.txt", ""), "failures.txt lacks '%s'" % text)
    check("cut" in files["MANIFEST.txt"] and "logs/test_cuda.log" in files["MANIFEST.txt"],
          "the 1.2 MB log not cut:\n" + files["MANIFEST.txt"])
    if os.path.exists(os.path.join(BUILD, "tools", "easel")):  # the runs' output: in work/
        check(os.path.isfile(os.path.join(tmp, "work", "logs", "train-msgd.log")),
              "no work/logs/train-msgd.log")
    # The same work folder at the smallest cap: the failing test's output still first.
    small = os.path.join(tmp, "small")
    os.mkdir(small)
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gpu_check_report.py"), "--work",
                    os.path.join(tmp, "work"), "--out", small, "--cap", "16384"], check=True)
    size = os.path.getsize(os.path.join(small, "logs.tar.gz"))
    files = read_archive(os.path.join(small, "logs.tar.gz"))
    check(size <= 16384 and "planted failure" in files.get("failures.txt", ""),
          "16 KiB cap: %d bytes, failures.txt %r" % (size, files.get("failures.txt", "")[:200]))
    # A second run into the same --out and work folder, which also clears what gpu-check wrote
    # there before it kept to three files (step logs, run folders).
    for f in ("logs/train-msgd.log", "lenet-msgd/checkpoint.bin", "gpu.csv"):
        os.makedirs(os.path.dirname(os.path.join(out, f)), exist_ok=True)
        open(os.path.join(out, f), "w").close()
    t = subprocess.run([TOOL, "--out", out], env=dict(env, GPU_CHECK_STOP_AFTER="env"),
                       capture_output=True, text=True, timeout=300)
    check(t.returncode in (0, 1) and sorted(os.listdir(out)) == THREE,  # 1: no nvcc here
          "second run: exit %d, --out %s\n%s" % (t.returncode, os.listdir(out), t.stderr))


FAKE_EASEL = r"""#!/usr/bin/env python3
# easel train's files as a GPU run writes them: 0.95, at bf16 at chance (0.1), sync-easgd with
# a NaN loss, cifar10-quick at chance at every precision; refuses a run that would write a
# checkpoint.
import json, os, sys
a = sys.argv[1:]
if a[:1] == ["topology"]:
    sys.exit(print("cuda:0 Planted GPU, 80 GB"))
opt = {k: v for k, v in zip(a, a[1:]) if k.startswith("--")}
if opt.get("--precision") == "none":
    sys.exit("easel: --precision: 'none' is not one of fp32, bf16")
if "--no-checkpoint" not in a:
    sys.exit("easel (planted): a run without --no-checkpoint")
acc, loss = 0.95, 0.2
if opt.get("--precision") == "bf16" or opt.get("--net") == "cifar10-quick":
    acc, loss = 0.1, 2.3
if opt.get("--algo") == "sync-easgd":
    loss = float("nan")
os.makedirs(opt["--out"], exist_ok=True)
with open(os.path.join(opt["--out"], "summary.json"), "w") as f:
    json.dump({"test_accuracy": acc, "test_loss": loss, "images_per_second": 1000.0,
               "config": {"data": opt.get("--data", "fashion-mnist"), "batch": 64}}, f)
open(os.path.join(opt["--out"], "metrics.jsonl"), "w").close()
"""


def fake_easel_run(tmp):
    """The training steps' checks through the script, with a planted easel that writes runs."""
    build, out = os.path.join(tmp, "build"), os.path.join(tmp, "out")
    os.makedirs(os.path.join(build, "tools"))
    easel = os.path.join(build, "tools", "easel")
    with open(easel, "w") as f:
        f.write(FAKE_EASEL)
    os.chmod(easel, 0o755)
    env = env_for(tmp, GPU_CHECK_BUILD=build,
                  GPU_CHECK_NETS="lenet:64 cifar10-quick:64 alexnet-cifar:64")
    t = subprocess.run([TOOL, "--out", out], env=env, capture_output=True, text=True, timeout=300)
    check(t.returncode == 1 and sorted(os.listdir(out)) == THREE,
          "planted easel: exit %d, --out holds %s\n%s" % (t.returncode, os.listdir(out),
                                                         t.stdout[-3000:] + t.stderr[-2000:]))
    rep = json.load(open(os.path.join(out, "gpu-check.json")))
    steps = {s["name"]: s for s in rep["steps"]}
    for name, status, text in [("train-msgd", "OK", "acc 0.9500"),
                               ("train-msgd-bf16", "FAIL", "at chance level (10 classes"),
                               ("train-sync-easgd", "FAIL", "not finite: test loss"),
                               ("step-lenet-fp32", "OK", "acc 0.9500"),
                               ("step-lenet-bf16", "FAIL", "at chance level"),
                               ("step-cifar10-quick-fp32", "OK", "chance not checked: its 200"),
                               ("step-cifar10-quick-bf16", "OK", "chance not checked: its 200"),
                               ("step-alexnet-cifar-fp32", "OK", "chance not checked: alexnet"),
                               ("step-alexnet-cifar-bf16", "FAIL",
                                "at chance level (10 classes: needs above 1/10 + 0.05 = 0.150, "
                                "as step-alexnet-cifar-fp32 got)"),
                               ("two-groups-resnet18", "FAIL", "not finite"),
                               ("topology", "OK", "Planted GPU")]:
        s = steps.get(name, {})
        check(s.get("status") == status and text in s.get("note", ""),
              "planted easel: step %s %s, want %s with '%s'" % (name, s, status, text))
    check(os.path.isfile(os.path.join(tmp, "work", "runs", "lenet-msgd", "summary.json")),
          "planted easel: no work/runs/lenet-msgd/summary.json")
    check(rep["easel"].get("lenet-msgd", {}).get("test_accuracy") == 0.95 and
          rep["training_step"][0]["easel_img_s"].get("fp32") == 1000.0,
          "planted easel: runs %s, step table %s" % (rep["easel"], rep["training_step"]))


def sigterm_run(tmp):
    out, pidfile = os.path.join(tmp, "out"), os.path.join(tmp, "hang.pid")
    env = env_for(tmp, GPU_CHECK_FAKE_HANG="600", GPU_CHECK_TEST_CAP="600",
                  GPU_CHECK_FAKE_PIDFILE=pidfile)
    p = subprocess.Popen([TOOL, "--out", out], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while not os.path.exists(pidfile) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    try:
        text = p.communicate(timeout=30)[0].decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        p.kill()
        text = p.communicate()[0].decode("utf-8", "replace")
    secs = time.monotonic() - t0
    check(p.returncode == 143 and secs < 15, "SIGTERM: exit %s after %.1f s, want 143 within "
          "15 s\n%s" % (p.returncode, secs, text[-3000:]))
    check(sorted(os.listdir(out)) == THREE, "SIGTERM: --out holds %s" % os.listdir(out))
    rep = json.load(open(os.path.join(out, "gpu-check.json")))
    check(rep["state"] == "interrupted" and "in step test_cuda" in (rep["note"] or ""),
          "SIGTERM: state %s, note %s" % (rep["state"], rep["note"]))
    got = {f["name"]: f["status"] for f in (rep["test_cuda"] or {}).get("failing", [])}
    check(got.get("Planted.Hangs") == "stopped" and
          got.get("Planted.RunsAfterCrashAndHang") == "not run", "SIGTERM: tests %s" % got)
    try:
        pid = int(open(pidfile).read())
        os.kill(pid, 0)
        check(False, "SIGTERM: the hanging test (pid %d) still runs" % pid)
        os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError):
        pass


def run_checks(tmp):
    def run(name, summary, metrics=()):
        d = os.path.join(tmp, name)
        os.makedirs(d)
        with open(os.path.join(d, "summary.json"), "w") as f:
            f.write(summary)
        with open(os.path.join(d, "metrics.jsonl"), "w") as f:
            f.writelines(m + "\n" for m in metrics)
        return gpu_check_steps.check_run(d)

    ok = '{"test_accuracy": %s, "test_loss": 0.4, "config": {"data": "%s"}}'
    cases = [("good", ok % (0.5, "fashion-mnist"), (), True, ""),
             ("nan-loss", '{"test_accuracy": 0.5, "test_loss": null}', (), False, "not finite"),
             ("nan-acc", '{"test_accuracy": NaN, "test_loss": 1.0}', (), False, "not finite"),
             ("nan-train", ok % (0.5, "x"), ['{"step": 3, "train_loss": null}'], False,
              "train_loss None at step 3"),
             ("chance", ok % (0.15, "synthetic:64:1x28x28:10"), (), False, "chance level"),
             ("above", ok % (0.1501, "synthetic:64:1x28x28:10"), (), True, ""),
             ("chance-1000", ok % (0.05, "synthetic:64:3x8x8:1000"), (), False, "chance level"),
             ("above-1000", ok % (0.06, "synthetic:64:3x8x8:1000"), (), True, "")]
    for name, summary, metrics, want, text in cases:
        got, note = run(name, summary, metrics)
        check(got == want and text in note, "check-run %s: %s %s" % (name, got, note))
    got, note = gpu_check_steps.check_run(os.path.join(tmp, "chance"), "planted reason")
    check(got and "chance not checked: planted reason" in note, "check-run --no-chance: " + note)
    got, note = gpu_check_steps.check_run(os.path.join(tmp, "chance"), "planted reason",
                                          os.path.join(tmp, "good"))
    check(not got and "at chance level" in note, "check-run --chance-if a good run: " + note)
    got, note = gpu_check_steps.check_run(os.path.join(tmp, "chance"), "planted reason",
                                          os.path.join(tmp, "chance-1000"))
    check(got and "chance not checked" in note, "check-run --chance-if a chance run: " + note)
    got, note = gpu_check_steps.check_run(os.path.join(tmp, "nan-loss"), "planted reason")
    check(not got and "not finite" in note, "check-run --no-chance of NaN: " + note)
    got, note = gpu_check_steps.check_run(os.path.join(tmp, "absent"))
    check(not got and "no summary.json" in note, "check-run absent: %s" % note)


def refusals(tmp):
    out = os.path.join(tmp, "out")
    os.makedirs(out)
    with open(os.path.join(out, "mine.txt"), "w") as f:
        f.write("keep")
    for extra, args, want in [
            ({"GPU_CHECK_LOG_CAP": "12"}, ["--out", os.path.join(tmp, "o2")], "GPU_CHECK_LOG_CAP=12"),
            ({"GPU_CHECK_TEST_CAP": "x"}, ["--out", os.path.join(tmp, "o2")], "GPU_CHECK_TEST_CAP"),
            ({}, ["--out", out], "holds mine.txt"),
            ({"GPU_CHECK_WORK": os.path.join(tmp, "o3", "w")}, ["--out", os.path.join(tmp, "o3")],
             "inside --out")]:
        t = subprocess.run([TOOL] + args, env=env_for(tmp, **extra), capture_output=True,
                           text=True, timeout=60)
        lines = t.stderr.strip().splitlines()
        check(t.returncode == 2 and len(lines) == 1 and want in lines[0] and not t.stdout,
              "refusal %s: exit %d, stderr %r" % (extra or args, t.returncode, t.stderr))
    check(os.listdir(out) == ["mine.txt"] and not os.path.exists(os.path.join(tmp, "o2")) and
          not os.path.exists(os.path.join(tmp, "o3")),
          "a refusal touched --out: %s" % os.listdir(out))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gpu_check_steps.py"),
                        "gtest", "--results", os.path.join(tmp, "r.json"), "--",
                        os.path.join(tmp, "absent")], capture_output=True, text=True)
    check(r.returncode == 2 and "cannot" not in r.stdout and "absent" in r.stdout,
          "gtest of a missing binary: exit %d\n%s" % (r.returncode, r.stdout))


for step in (refusals, run_checks, fake_easel_run, full_run, sigterm_run):
    T0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        step(d)
    print("%s: %.1f s" % (step.__name__, time.monotonic() - T0))
print("gpu_check: %d failure(s)" % failed)
sys.exit(1 if failed else 0)
