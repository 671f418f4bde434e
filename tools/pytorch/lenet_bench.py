#!/usr/bin/python3
"""PyTorch's side of easel's LeNet benchmarks: the same net, solver and data as `easel train`.

Caffe's LeNet (examples/mnist/lenet_train_test.prototxt): conv 20 5x5, max-pool 2/2, conv 50
5x5, max-pool 2/2, ip 500 + ReLU, ip 10, softmax cross-entropy. Weights xavier-uniform as Caffe
fills them (uniform(-a, a), a = sqrt(3 / fan_in), like easel), biases zero; SGD with momentum
0.9, weight decay 5e-4, lr 0.01 (biases lr x2, Caffe's lr_mult), batch 64.

  --mode throughput --threads N   training steps per second after a warm-up on synthetic
                                  inputs; images/s min/median/max over --repeats.
  --mode throughput --procs 2     two single-thread processes at once, each pinned to its own
                                  core (the counterpart of two easel groups); images/s summed.
  --mode train --target 0.89      Fashion-MNIST (IDX .gz, pixels x 1/256), shuffled each epoch,
                                  evaluated after each epoch; time to the target and final
                                  accuracy.
  --mode train --procs 2          the same as Hogwild: two one-thread processes, each pinned to
                                  its own core, writing one shared net without a lock
                                  (lenet_hogwild.py).
  --device cuda                   model, inputs and labels on the GPU (cuda: the current one);
                                  the clock is read after torch.cuda.synchronize(). Batches are
                                  still prepared on the CPU as for --device cpu (the default).
Every mode prints its peak resident memory and ends with one JSON line (with the device, and
the GPU's name for cuda).

Run it with /usr/bin/python3 (Debian's python3-torch 1.13: apt-get install -y python3-torch).
For --device cuda run it with a Python whose torch has CUDA (tools/gpu-check finds one).
"""
import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import time

from lenet_net import blas_in_use, build, import_torch, set_lr

DATA = "/usr/share/datasets/fashion-mnist"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["throughput", "train"], default="throughput")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (per process)")
    p.add_argument("--procs", type=int, default=1,
                   help="throughput: processes at once, one core each (threads forced to 1)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--warmup", type=int, default=20, help="untimed steps")
    p.add_argument("--repeats", type=int, default=7, help="timed repeats")
    p.add_argument("--min-time", type=float, default=0.5, help="seconds per timed repeat")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--lr-policy", choices=["inv", "fixed"], default="inv",
                   help="Caffe's inv (gamma 1e-4, power 0.75: easel's default) or fixed")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--target", type=float, default=0.89, help="train: target test accuracy")
    p.add_argument("--epochs", type=float, default=10, help="train: at most this many epochs")
    p.add_argument("--data", default=DATA, help="train: directory of Fashion-MNIST IDX .gz")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where the model, inputs and labels live")
    p.add_argument("--cpu", type=int, default=-1, help=argparse.SUPPRESS)  # --procs child
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    for name in ("threads", "procs", "batch", "repeats"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    if a.warmup < 0 or a.min_time < 0 or a.epochs <= 0 or not 0 <= a.target <= 1:
        p.error("--warmup, --min-time >= 0, --epochs > 0, --target in [0, 1]")
    if a.device != "cpu" and a.procs > 1:
        p.error("--procs is for --device cpu")
    return a


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def summary(v):
    s = sorted(v)
    k = len(s)
    med = s[k // 2] if k % 2 else 0.5 * (s[k // 2 - 1] + s[k // 2])
    return {"min": s[0], "median": med, "max": s[-1]}


def device_info(torch, a):
    """The JSON fields naming the device: {"device": "cpu"} or cuda with the GPU's name."""
    if a.device == "cpu":
        return {"device": "cpu"}
    return {"device": a.device, "gpu": torch.cuda.get_device_name(),
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}


def syncer(torch, a):
    """What to call before reading the clock: waits for the GPU's queued work (cuda only)."""
    if a.device == "cpu":
        return lambda: None
    return torch.cuda.synchronize


def throughput_one(a, gate=None):
    """One process's steps/s. With gate, waits for a line on stdin before timing."""
    torch = import_torch(a)
    net, opt = build(torch, a)
    x = torch.rand(a.batch, 1, 28, 28)
    y = torch.arange(a.batch) % 10
    if a.device != "cpu":
        x, y = x.to(a.device), y.to(a.device)
    sync = syncer(torch, a)
    lossf = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=False)
        loss = lossf(net(x), y)
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(3):
        step()
    sync()
    per = max((time.perf_counter() - t0) / 3, 1e-6)
    k = max(1, int(a.min_time / per + 0.999))
    if gate:
        print("ready", flush=True)
        sys.stdin.readline()
    ips = []
    t_start = time.time()
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        for _ in range(k):
            step()
        sync()
        ips.append(k * a.batch / (time.perf_counter() - t0))
    r = {"images_per_second": summary(ips), "steps_per_repeat": k, "blas": blas_in_use(),
         "start": t_start, "end": time.time(), "peak_rss_mb": peak_rss_mb()}
    r.update(device_info(torch, a))
    return r


def throughput(a):
    if a.procs == 1 or a.child:
        r = throughput_one(a, gate=a.child)
        r.update({"mode": "throughput", "framework": f"pytorch", "threads": a.threads,
                  "procs": 1, "batch": a.batch, "cpu": a.cpu})
        if not a.child:
            import torch
            r["framework"] = f"pytorch {torch.__version__}"
            s = r["images_per_second"]
            where = f"{a.threads} thread(s)" if a.device == "cpu" else f"{a.device} ({r['gpu']})"
            print(f"pytorch lenet batch {a.batch}, {where}: "
                  f"{s['min']:.0f}/{s['median']:.0f}/{s['max']:.0f} img/s (min/median/max), "
                  f"peak RSS {r['peak_rss_mb']:.1f} MB, BLAS {r['blas']}")
        print(json.dumps(r), flush=True)
        return 0
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < a.procs:
        print(f"lenet_bench: --procs {a.procs} needs {a.procs} cpus, this process may use "
              f"{len(cpus)}", file=sys.stderr)
        return 2
    base = [sys.executable, os.path.abspath(__file__), "--mode", "throughput", "--threads", "1",
            "--batch", str(a.batch), "--warmup", str(a.warmup), "--repeats", str(a.repeats),
            "--min-time", str(a.min_time), "--child"]
    kids = [subprocess.Popen(base + ["--cpu", str(cpus[i])], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True) for i in range(a.procs)]
    for k in kids:  # every child warmed up, then all start timing together
        if k.stdout.readline().strip() != "ready":
            print("lenet_bench: a child process failed", file=sys.stderr)
            return 1
    for k in kids:
        k.stdin.write("go\n")
        k.stdin.flush()
    res = []
    for k in kids:
        out, _ = k.communicate()
        res.append(json.loads(out.strip().splitlines()[-1]))
    overlap = min(r["end"] for r in res) - max(r["start"] for r in res)
    total = {q: sum(r["images_per_second"][q] for r in res) for q in ("min", "median", "max")}
    import torch
    r = {"mode": "throughput", "framework": f"pytorch {torch.__version__}", "threads": 1,
         "procs": a.procs, "batch": a.batch, "images_per_second": total,
         "per_process": [r["images_per_second"] for r in res],
         "overlap_seconds": overlap, "peak_rss_mb": max(r["peak_rss_mb"] for r in res),
         "blas": res[0]["blas"], "device": "cpu"}
    print(f"pytorch lenet batch {a.batch}, {a.procs} processes x 1 thread on cpus "
          f"{','.join(map(str, cpus[:a.procs]))}: sum {total['min']:.0f}/{total['median']:.0f}/"
          f"{total['max']:.0f} img/s (min/median/max per process, summed), "
          f"peak RSS {r['peak_rss_mb']:.1f} MB per process")
    print(json.dumps(r), flush=True)
    return 0


def read_idx(path, magic):
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    m = int.from_bytes(raw[0:4], "big")
    if m != magic:
        raise ValueError(f"{path}: wrong magic 0x{m:08x} (expected 0x{magic:08x})")
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(magic & 0xff)]
    off = 4 + 4 * len(dims)
    return np.frombuffer(raw, dtype=np.uint8, offset=off).reshape(dims).copy()  # writable


def load(a, split):
    def find(stem):
        for name in (stem + ".gz", stem):
            p = os.path.join(a.data, name)
            if os.path.exists(p):
                return p
        raise FileNotFoundError(f"--data: {a.data} has no {stem}[.gz]")
    x = read_idx(find(f"{split}-images-idx3-ubyte"), 0x803)
    y = read_idx(find(f"{split}-labels-idx1-ubyte"), 0x801)
    return x, y.astype("int64")


def train(a):
    import numpy as np
    torch = import_torch(a)
    t_load = time.perf_counter()
    try:
        xtr, ytr = load(a, "train")
        xte, yte = load(a, "t10k")
    except (OSError, ValueError) as e:
        print(f"lenet_bench: {e}", file=sys.stderr)
        return 1
    t_load = time.perf_counter() - t_load
    net, opt = build(torch, a)
    lossf = torch.nn.CrossEntropyLoss()
    dev = a.device
    on_gpu = dev != "cpu"
    sync = syncer(torch, a)
    rng = np.random.default_rng(a.seed)
    scale = 1.0 / 256  # Caffe's LeNet scale, as easel
    n = len(xtr)
    per_epoch = n // a.batch
    total = int(a.epochs * per_epoch + 0.5)
    train_s = eval_s = 0.0
    t_wall = time.perf_counter()
    it = 0
    acc = 0.0
    reached = None
    epoch = 0
    while it < total:
        order = rng.permutation(n)
        net.train()
        sync()
        t0 = time.perf_counter()
        for b in range(per_epoch):
            if it >= total:
                break
            idx = order[b * a.batch:(b + 1) * a.batch]
            x = torch.from_numpy(xtr[idx]).unsqueeze(1).float().mul_(scale)
            y = torch.from_numpy(ytr[idx])
            if on_gpu:
                x, y = x.to(dev), y.to(dev)
            set_lr(opt, a, it)
            opt.zero_grad(set_to_none=False)
            loss = lossf(net(x), y)
            loss.backward()
            opt.step()
            it += 1
        sync()
        train_s += time.perf_counter() - t0
        epoch += 1
        t0 = time.perf_counter()
        net.eval()
        correct = 0
        with torch.no_grad():
            for b in range(0, len(xte), 1000):
                x = torch.from_numpy(xte[b:b + 1000]).unsqueeze(1).float().mul_(scale)
                y = torch.from_numpy(yte[b:b + 1000])
                if on_gpu:
                    x, y = x.to(dev), y.to(dev)
                correct += int((net(x).argmax(1) == y).sum())
        acc = correct / len(xte)
        eval_s += time.perf_counter() - t0
        print(f"epoch {it / per_epoch:6.2f}  step {it:7d}  loss {float(loss):.4f}  "
              f"test accuracy {acc:.4f}  {it * a.batch / train_s:7.0f} img/s  "
              f"train {train_s:.1f} s", flush=True)
        if reached is None and acc >= a.target:
            reached = train_s
            break
    sync()
    wall = time.perf_counter() - t_wall
    r = {"mode": "train", "framework": f"pytorch {torch.__version__}", "threads": a.threads,
         "batch": a.batch, "lr": a.lr, "lr_policy": a.lr_policy, "momentum": a.momentum,
         "target_accuracy": a.target, "time_to_target_seconds": reached,
         "wall_seconds": wall, "train_seconds": train_s, "eval_seconds": eval_s,
         "load_seconds": t_load, "epochs": it / per_epoch, "steps": it,
         "test_accuracy": acc, "images_per_second": it * a.batch / train_s if train_s else 0,
         "blas": blas_in_use(),
         "peak_rss_mb": peak_rss_mb()}
    r.update(device_info(torch, a))
    if reached is None:
        print(f"done: target {a.target} not reached in {it / per_epoch:.2f} epochs; final "
              f"accuracy {acc:.4f}; {train_s:.1f} s training, {wall:.1f} s wall; "
              f"peak RSS {r['peak_rss_mb']:.1f} MB")
    else:
        print(f"done: target {a.target} reached in {reached:.1f} s of training ({wall:.1f} s "
              f"wall, evaluations included) after {it / per_epoch:.2f} epochs; accuracy "
              f"{acc:.4f}; peak RSS {r['peak_rss_mb']:.1f} MB")
    print(json.dumps(r), flush=True)
    return 0


def main(argv):
    a = parse_args(argv)
    if a.procs > 1 and a.mode == "train":  # Hogwild: P one-thread processes, one shared net
        import lenet_hogwild
        return lenet_hogwild.train_hogwild(a, load)
    return throughput(a) if a.mode == "throughput" else train(a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
