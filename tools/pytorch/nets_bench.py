#!/usr/bin/python3
"""PyTorch's side of `tools/bench-nets-vs-pytorch`: the training step of one of easel's nets
(forward, softmax cross-entropy, backward, SGD with momentum 0.9 and weight decay), on synthetic
inputs, after a warm-up; images/s as min/median/max over --repeats timed repeats of at least
--min-time seconds. The nets are the ones tools/pytorch/net_equivalence.py checks equal to
easel's (torchvision's vgg19, resnet18, resnet50, googlenet; the Caffe nets written by hand).
Dropout stays in (train mode), as in easel's step.

  /usr/bin/python3 tools/pytorch/nets_bench.py --net resnet18 --batch 16 --threads 1
  python3 tools/pytorch/nets_bench.py --net resnet18 --batch 32 --device cuda --precision tf32

--device cuda runs on the GPU (timed after torch.cuda.synchronize()); --precision fp32 (TF32
off in matmuls and cuDNN), tf32 (TF32 on) or bf16 (autocast to bfloat16, TF32 on).

Ends with one JSON line: {"net", "batch", "threads", "img_s": [min, median, max], ...}.
Run it with Debian's /usr/bin/python3 (python3-torch 1.13, python3-torchvision); install
libopenblas0-pthread first (PyTorch's linear layers run on the BLAS it finds).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import net_equivalence  # noqa: E402  (the nets, defined once)

INPUTS = {"lenet": (1, 28, 28, 10), "cifar10-quick": (3, 32, 32, 10),
          "cifar10-full": (3, 32, 32, 10), "alexnet-cifar": (3, 32, 32, 10),
          "vgg19": (3, 224, 224, 1000), "resnet18": (3, 224, 224, 1000),
          "resnet50": (3, 224, 224, 1000), "googlenet": (3, 224, 224, 1000)}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--net", required=True, choices=sorted(INPUTS))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--min-time", type=float, default=0.5)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
    p.add_argument("--channels-last", action="store_true",
                   help="model and inputs in torch.channels_last (nhwc) memory format")
    a = p.parse_args(argv)
    if a.batch < 1 or a.threads < 1 or a.repeats < 1 or a.warmup < 0 or a.min_time < 0:
        p.error("--batch, --threads and --repeats must be >= 1, --warmup and --min-time >= 0")
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    c, h, w, classes = INPUTS[a.net]
    model, origin = net_equivalence.build_torch_net(
        {"net": a.net, "input": [c, h, w], "classes": classes})
    model.train()
    images = torch.rand(a.batch, c, h, w)
    labels = torch.randint(0, classes, (a.batch,))
    gpu = a.device == "cuda"
    if gpu:
        if not torch.cuda.is_available():
            print("nets_bench.py: --device cuda: torch sees no GPU", file=sys.stderr)
            sys.exit(2)
        tf32 = a.precision != "fp32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = True
        model, images, labels = model.cuda(), images.cuda(), labels.cuda()
    elif a.precision != "fp32":
        p.error("--precision tf32/bf16 needs --device cuda")
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if a.precision == "bf16"
                else None)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        if autocast is not None:
            with autocast:
                loss = loss_fn(model(images), labels)
        else:
            loss = loss_fn(model(images), labels)
        loss.backward()
        opt.step()

    def sync():
        if gpu:
            torch.cuda.synchronize()

    for _ in range(a.warmup):
        step()
    sync()
    rates = []
    for _ in range(a.repeats):
        n, t0 = 0, time.perf_counter()
        while True:
            step()
            n += 1
            sync()
            t = time.perf_counter() - t0
            if t >= a.min_time:
                break
        rates.append(n * a.batch / t)
    out = {"net": a.net, "batch": a.batch, "threads": a.threads, "origin": origin,
           "channels_last": a.channels_last, "device": a.device, "precision": a.precision,
           "gpu": torch.cuda.get_device_name() if gpu else None,
           "img_s": [min(rates), statistics.median(rates), max(rates)],
           "torch": torch.__version__, "mkldnn": torch.backends.mkldnn.is_available()}
    print(f"{a.net} batch {a.batch}, {a.threads} thread(s): "
          f"{out['img_s'][1]:.1f} img/s (min {out['img_s'][0]:.1f}, max {out['img_s'][2]:.1f})")
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
