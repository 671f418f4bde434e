#!/usr/bin/python3
"""Checks a state_dict written by `easel export --format pytorch` with PyTorch.

  check_state_dict.py FILE.pt SAMPLE_DIR --net NAME --input C,H,W --classes K [--tolerance 1e-4]

Builds the net as a user would -- torchvision's constructor (resnet18, resnet50, vgg19,
googlenet with aux_logits=False, transform_input=False) or the project's twin
(tools/pytorch/net_equivalence.py) -- loads torch.load(FILE) with load_state_dict(strict=True),
runs it in eval mode on SAMPLE_DIR/images.npy (`easel export --sample`) and compares with
easel's SAMPLE_DIR/logits.npy: max |diff| <= tolerance x the largest |logit| (the logits'
scale: a net whose logits are all small after a few steps is held to it). Prints one
line; exit 0 when it holds, 1 when it does not (or strict loading refuses), 2 on bad input,
77 when python3-torch is missing (Meson's skip code).
"""
import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("state_dict")
    ap.add_argument("sample")
    ap.add_argument("--net", required=True)
    ap.add_argument("--input", required=True, help="C,H,W")
    ap.add_argument("--classes", type=int, required=True)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    a = ap.parse_args()
    try:
        import numpy as np
        import torch
        import torchvision  # noqa: F401
    except ImportError as e:
        print(f"check_state_dict: skipped: {e} (apt-get install python3-torch python3-torchvision)")
        return 77
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import net_equivalence as ne

    for f in (a.state_dict, os.path.join(a.sample, "images.npy"),
              os.path.join(a.sample, "logits.npy")):
        if not os.path.isfile(f):
            print(f"check_state_dict: {f}: no such file", file=sys.stderr)
            return 2
    c, h, w = (int(x) for x in a.input.split(","))
    model, origin = ne.build_torch_net({"net": a.net, "input": [c, h, w], "classes": a.classes})
    sd = torch.load(a.state_dict)
    try:
        model.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        print(f"check_state_dict: load_state_dict(strict=True) refuses {a.state_dict}: "
              + " ".join(str(e).split()))
        return 1
    model.eval()
    images = np.load(os.path.join(a.sample, "images.npy"))
    want = np.load(os.path.join(a.sample, "logits.npy")).astype(np.float64)
    with torch.no_grad():
        got = model(torch.from_numpy(images)).double().numpy()
    if got.shape != want.shape:
        print(f"check_state_dict: PyTorch gives logits of shape {got.shape}, easel {want.shape}")
        return 1
    diff = float(np.max(np.abs(got - want)))
    scale = float(np.max(np.abs(want)))
    ok = diff <= a.tolerance * scale
    tracked = [int(v) for k, v in sd.items() if k.endswith("num_batches_tracked")]
    print(f"check_state_dict: {a.net} ({origin}): {len(sd)} keys loaded strictly"
          f"{f', num_batches_tracked {tracked[0]}' if tracked else ''}; PyTorch "
          f"{torch.__version__} vs easel on {images.shape[0]} images: max |diff| {diff:.3g} "
          f"(largest logit {scale:.3g}), tolerance {a.tolerance:g} x largest: "
          f"{'ok' if ok else 'FAILED'}; same top class "
          f"{int(np.sum(got.argmax(1) == want.argmax(1)))}/{want.shape[0]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
