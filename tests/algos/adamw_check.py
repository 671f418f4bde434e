#!/usr/bin/python3
"""easel's AdamW step (algos/outer_ops.hpp) against torch.optim.AdamW on the same gradients:
tests/algos/adamw_dump prints the weights after each step, this script runs torch on the same
start, gradients and hyper-parameters (two parameter groups: the second with twice the rate and
no decay, as easel's lr_mult 2 / decay_mult 0 segment) and compares every step. Skipped (77)
without a python3 that imports torch.

usage: adamw_check.py ADAMW_DUMP
"""
import math
import subprocess
import sys

try:
    import torch
except ImportError:
    print("adamw_check: no torch in this python3; skipped")
    sys.exit(77)

N, T = 37, 25
CASES = [(1e-3, 0.01, 0.9, 0.999, 1e-8), (3e-2, 0.1, 0.8, 0.99, 1e-6)]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    worst = 0.0
    for lr, wd, b1, b2, eps in CASES:
        out = subprocess.run([sys.argv[1], str(N), str(T), repr(lr), repr(wd), repr(b1), repr(b2),
                              repr(eps)], check=True, stdout=subprocess.PIPE, text=True).stdout
        easel = [[float(x) for x in line.split()] for line in out.splitlines()]
        h = N // 2
        w = torch.tensor([math.sin(0.7 * i) for i in range(N)], dtype=torch.float32)
        p1 = torch.nn.Parameter(w[:h].clone())
        p2 = torch.nn.Parameter(w[h:].clone())
        opt = torch.optim.AdamW([{"params": [p1]}, {"params": [p2], "lr": 2 * lr,
                                                     "weight_decay": 0.0}],
                                lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
        for t in range(1, T + 1):
            g = torch.tensor([math.cos(0.3 * i + t) * (1 + 0.1 * t) for i in range(N)],
                             dtype=torch.float32)
            p1.grad = g[:h].clone()
            p2.grad = g[h:].clone()
            opt.step()
            ref = torch.cat([p1.detach(), p2.detach()]).tolist()
            for i in range(N):
                err = abs(ref[i] - easel[t - 1][i])
                worst = max(worst, err)
                if err > 2e-6 * max(1.0, abs(ref[i])):
                    sys.exit("adamw_check: lr %g wd %g step %d element %d: easel %.9g, torch %.9g"
                             % (lr, wd, t, i, easel[t - 1][i], ref[i]))
    print("adamw_check: easel's AdamW equals torch.optim.AdamW within %.3g over %d steps" % (worst, T))


if __name__ == "__main__":
    main()
