#!/usr/bin/env python3
"""easel's RandomResizedCrop windows against torchvision's for the same random draws.

torchvision.transforms.RandomResizedCrop.get_params (scale 0.08-1, ratio 3/4-4/3) runs with
torch.empty(1).uniform_ and torch.randint replaced by draws from a list; build/tests/crop_params
(nets/data/crop.cpp) takes the same list. Every window must be equal. Exit 77 (skipped) when
/usr/bin/python3 has no torch or torchvision.
  crop_params_check.py BUILD_ROOT
"""
import math
import os
import random
import subprocess
import sys

try:
    import numpy as np
    import torch
    import torchvision.transforms as T
except ImportError as e:  # the check needs both
    print(f"crop_params_check: skipped: {e}")
    sys.exit(77)


class Draws:
    def __init__(self, u):
        self.u = list(u)
        self.used = []

    def take(self):
        v = self.u.pop(0)
        self.used.append(v)
        return v


def main():
    build = sys.argv[1]
    exe = os.path.join(build, "tests", "crop_params")
    rng = random.Random(30)
    cases = []
    for n in range(4000):
        if n % 10 == 0:  # thin images: the ten tries fail, the fallback crops
            w, h = rng.choice([(1000, 9), (7, 800), (640, 100), (100, 640), (1, 1)])
        else:
            w, h = rng.randint(1, 1200), rng.randint(1, 1200)
        cases.append((w, h, [rng.random() for _ in range(40)]))
    real_empty, real_randint = torch.empty, torch.randint
    state = {}

    class Fake:
        def uniform_(self, lo, hi):
            u = np.float32(state["d"].take())
            lo32, hi32 = np.float32(float(lo)), np.float32(float(hi))
            return torch.tensor([lo32 + (hi32 - lo32) * u], dtype=torch.float32)

    def fake_empty(*a, **k):
        return Fake()

    def fake_randint(lo, hi, size=None, **k):
        n = hi - lo
        return torch.tensor([lo + min(n - 1, math.floor(state["d"].take() * n))])

    want, lines = [], []
    torch.empty, torch.randint = fake_empty, fake_randint
    try:
        for w, h, u in cases:
            state["d"] = Draws(u)
            img = real_empty(1, h, w)
            i, j, ch, cw = T.RandomResizedCrop.get_params(img, [0.08, 1.0], [3 / 4, 4 / 3])
            want.append((i, j, ch, cw))
            lines.append(f"{w} {h} " + " ".join(repr(v) for v in state["d"].used))
    finally:
        torch.empty, torch.randint = real_empty, real_randint
    out = subprocess.run([exe], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=True).stdout.split("\n")
    bad = 0
    fallbacks = sum(1 for (w, h, _), l in zip(cases, lines) if len(l.split()) - 2 == 20)
    for (w, h, _), wnt, got in zip(cases, want, out):
        g = tuple(int(x) for x in got.split())
        if g != tuple(wnt):
            bad += 1
            if bad <= 5:
                print(f"{w}x{h}: torchvision {wnt}, easel {g}")
    print(f"crop_params_check: {len(cases) - bad}/{len(cases)} windows equal "
          f"({fallbacks} by the centre-crop fallback)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
