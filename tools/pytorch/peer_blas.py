#!/usr/bin/env python3
"""The OpenBLAS core type the peer (PyTorch on Debian, whose inner products run on OpenBLAS)
runs fastest and correctly on this machine, for the comparison tools (tools/bench-vs-pytorch,
tools/bench-nets-vs-pytorch): each candidate core type is tried in a fresh python (a core type
the CPU lacks dies there), a one-thread float32 GEMM checked against a float64 one and timed;
the fastest correct one wins. The candidates: OpenBLAS's own detection (OPENBLAS_CORETYPE
unset, named "" here), then each forced core type whose instructions this CPU has (SkylakeX
needs AVX-512, Haswell AVX2: forcing one the CPU lacks would be illegal), then the environment's
own OPENBLAS_CORETYPE, never the default: these machines set Haswell, which runs PyTorch's LeNet
about 3x slower than SkylakeX on an AVX-512 CPU. EASEL_PEER_CORETYPE=NAME forces NAME (no trial).

  peer_blas.py [--python PYTHON]   # prints "OPENBLAS_CORETYPE=NAME" on stdout (an empty NAME:
                                   # leave it unset), the trial on stderr

As a module: choose(python) -> (name, one line describing the choice); apply(env, name) sets
or unsets OPENBLAS_CORETYPE in env.
"""
import os
import subprocess
import sys

# Each forced core type and the CPU flag (/proc/cpuinfo) its kernels need.
FORCED = [("SkylakeX", "avx512f"), ("Haswell", "avx2")]


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def candidates():
    """OpenBLAS's detection first, then the forced core types this CPU can run."""
    flags = cpu_flags()
    return [""] + [name for name, flag in FORCED if flag in flags]


def apply(env, name):
    """env with OPENBLAS_CORETYPE set to name, or unset when name is empty."""
    if name:
        env["OPENBLAS_CORETYPE"] = name
    else:
        env.pop("OPENBLAS_CORETYPE", None)
    return env


def label(name):
    return name or "detected"

# One thread, a 512 x 512 x 512 GEMM: the error against float64 (relative to the result's
# largest element) and the median of 15 timed products, in ms.
TRIAL = r"""
import time, torch
torch.set_num_threads(1)
g = torch.Generator().manual_seed(1)
a = torch.randn(512, 512, generator=g); b = torch.randn(512, 512, generator=g)
ref = a.double() @ b.double()
c = a @ b
err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
for _ in range(3): a @ b
ts = []
for _ in range(15):
    t = time.perf_counter(); a @ b; ts.append(time.perf_counter() - t)
ts.sort()
print(err, ts[len(ts) // 2] * 1e3)
"""


def trial(python, coretype):
    """(ms, error) of the GEMM under `coretype`, or None when it fails there."""
    env = apply(dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"), coretype)
    try:
        r = subprocess.run([python, "-c", TRIAL], capture_output=True, text=True, env=env,
                           timeout=120)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode != 0 or not r.stdout.strip():
        return None
    err, ms = (float(x) for x in r.stdout.split()[-2:])
    return ms, err


def choose(python):
    forced = os.environ.get("EASEL_PEER_CORETYPE", "")
    if forced:
        return forced, "peer: OPENBLAS_CORETYPE=%s (forced by EASEL_PEER_CORETYPE)" % forced
    names = candidates()
    own = os.environ.get("OPENBLAS_CORETYPE", "")
    if own and own not in names:
        names.append(own)
    tried = []
    best = None
    for ct in names:
        t = trial(python, ct)
        if t is None:
            tried.append("%s fails here" % label(ct))
            continue
        ms, err = t
        ok = err < 1e-5
        tried.append("%s %.2f ms%s" % (label(ct), ms, "" if ok else " WRONG (error %.1e)" % err))
        if ok and (best is None or ms < best[1]):
            best = (ct, ms)
    if best is None:
        return "", ("peer: no core type gave a correct GEMM (%s); OpenBLAS's own detection"
                    % "; ".join(tried))
    return best[0], ("peer: OPENBLAS_CORETYPE=%s, the fastest correct one-thread 512^3 GEMM "
                     "(%s; the environment had %s)" % (label(best[0]), ", ".join(tried),
                                                        own or "none"))


def main(argv):
    python = "/usr/bin/python3"
    if len(argv) == 2 and argv[0] == "--python":
        python = argv[1]
    elif argv:
        print("usage: peer_blas.py [--python PYTHON]", file=sys.stderr)
        return 2
    name, line = choose(python)
    print(line, file=sys.stderr)
    print("OPENBLAS_CORETYPE=" + name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
