#!/usr/bin/python3
"""Checks an ONNX model written by `easel export` with consumers that are not easel.

    tools/onnx_check.py MODEL.onnx SAMPLE_DIR [--tolerance 1e-4]

SAMPLE_DIR is `easel export --sample`'s: images.npy (N x C x H x W float32, normalised as the
run's evaluation does) and logits.npy (easel's logits of them, N x classes). The model must pass
onnx.checker.check_model (full check) and OpenCV's DNN module (cv2.dnn.readNetFromONNX) must give
easel's logits within the tolerance (absolute, every element) and within --relative times the
largest logit (so that a net whose logits are all small is held to its scale). Prints one line with the largest
difference; exit 0 when it holds, 1 when it does not, 2 on bad input, 77 when python3-onnx or
python3-opencv is missing (Meson's skip code).
"""
import argparse
import os
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("sample")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--relative", type=float, default=1e-3)
    args = ap.parse_args()
    try:
        import cv2
        import onnx
    except ImportError as e:
        print(f"onnx_check: skipped: {e} (apt-get install python3-onnx python3-opencv)")
        return 77
    for f in (args.model, os.path.join(args.sample, "images.npy"),
              os.path.join(args.sample, "logits.npy")):
        if not os.path.isfile(f):
            print(f"onnx_check: {f}: no such file", file=sys.stderr)
            return 2
    try:
        onnx.checker.check_model(onnx.load(args.model), full_check=True)
    except Exception as e:  # onnx's ValidationError and protobuf's DecodeError
        print(f"onnx_check: {args.model}: the ONNX checker refuses it: {e}".splitlines()[0])
        return 1
    images = np.load(os.path.join(args.sample, "images.npy"))
    want = np.load(os.path.join(args.sample, "logits.npy"))
    try:
        net = cv2.dnn.readNetFromONNX(args.model)
        net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
        net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
        net.setInput(images)
        got = net.forward().reshape(want.shape[0], -1)
    except cv2.error as e:
        print(f"onnx_check: {args.model}: OpenCV DNN fails: {' '.join(str(e).split())}")
        return 1
    if got.shape != want.shape:
        print(f"onnx_check: OpenCV gives logits of shape {got.shape}, easel {want.shape}")
        return 1
    diff = float(np.max(np.abs(got - want)))
    scale = float(np.max(np.abs(want)))
    ok = diff <= args.tolerance and diff <= args.relative * scale
    print(f"onnx_check: {args.model}: onnx checker ok; OpenCV {cv2.__version__} DNN vs easel on "
          f"{images.shape[0]} images: max |diff| {diff:.3g} (largest logit {scale:.3g}), "
          f"tolerance {args.tolerance:g} and {args.relative:g} x largest: "
          f"{'ok' if ok else 'FAILED'}; same top class {int(np.sum(got.argmax(1) == want.argmax(1)))}"
          f"/{want.shape[0]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
