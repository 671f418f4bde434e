#!/usr/bin/env python3
"""The OpenBLAS core type the peer (PyTorch on Debian, whose inner products run on OpenBLAS)
runs fastest and correctly on this machine, for the comparison tools (tools/bench-vs-pytorch,
tools/bench-nets-vs-pytorch): each candidate core type is tried in a fresh python (a core type
the CPU lacks dies there), a one-thread float32 GEMM checked against a float64 one and timed;
the fastest correct one wins. The environment's own OPENBLAS_CORETYPE is one candidate, never
the default: these machines set Haswell, which runs PyTorch's LeNet about 3x slower than
SkylakeX on an AVX-512 CPU. EASEL_PEER_CORETYPE=NAME forces NAME (no trial).

  peer_blas.py [--python PYTHON]   # prints "OPENBLAS_CORETYPE=NAME" on stdout, the trial on stderr

As a module: choose(python) -> (name, one line describing the choice).
"""
import os
import subprocess
import sys

CANDIDATES = ["SkylakeX", "Haswell"]

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
    env = dict(os.environ, OPENBLAS_CORETYPE=coretype, OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
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
    candidates = list(CANDIDATES)
    own = os.environ.get("OPENBLAS_CORETYPE", "")
    if own and own not in candidates:
        candidates.append(own)
    tried = []
    best = None
    for ct in candidates:
        t = trial(python, ct)
        if t is None:
            tried.append("%s fails here" % ct)
            continue
        ms, err = t
        ok = err < 1e-5
        tried.append("%s %.2f ms%s" % (ct, ms, "" if ok else " WRONG (error %.1e)" % err))
        if ok and (best is None or ms < best[1]):
            best = (ct, ms)
    if best is None:
        return own or CANDIDATES[0], ("peer: no core type gave a correct GEMM (%s); "
                                      "OPENBLAS_CORETYPE=%s" % ("; ".join(tried),
                                                                own or CANDIDATES[0]))
    return best[0], ("peer: OPENBLAS_CORETYPE=%s, the fastest correct one-thread 512^3 GEMM "
                     "(%s; the environment had %s)" % (best[0], ", ".join(tried),
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
