#!/usr/bin/python3
"""PyTorch's side of the net equivalence check: repeats one easel training step in PyTorch.

  net_equivalence.py DUMP_DIR [--f64] [--verbose] [--row] [--tol 1e-4]

DUMP_DIR is what tools/bench/net_dump wrote (meta.json + data.bin: easel's weights before the
step, the batch, its logits and loss, every gradient, the running statistics after the step).
The same net is built in PyTorch -- torchvision's own definitions for vgg19, resnet18, resnet50
and googlenet (aux_logits=False, transform_input=False), modules written here from the Caffe
prototxts for lenet, cifar10-quick, cifar10-full and alexnet-cifar -- easel's weights are loaded
into its parameters in order (every shape checked), and one training step runs in train mode
(batch statistics), float32, mean cross-entropy, backward. Every dropout is the identity on both
sides (net_dump sets easel's ratios to 0; p = 0 here): dropout masks cannot be compared.

Compared, per tensor, with a = easel and b = PyTorch: rel = ||a - b|| / ||b|| (2-norm over the
whole tensor) and max |a - b|: the logits, the loss, every parameter's gradient and batch norm's
running mean and variance after the step. Verdicts:

  pass          every rel <= --tol (1e-4).
  pass at ties  A gradient is a step function of the ReLUs' signs and the max pools' winners: a
                ReLU input within round-off of 0 (or two pooled values within round-off of each
                other) may be decided one way in easel and the other in PyTorch, and at batch 2
                one element's share of a layer's gradient is ~1%. On the big nets some tens of
                the millions of decisions are such ties. So the step runs again with easel's
                decisions (net_dump's relu_mask and maxpool_argmax) taken by PyTorch; it
                passes when then every rel <= --tol and every decision PyTorch made otherwise
                was a tie: |x| (ReLU) or the gap between the two winners (pool) <= --tie x the
                layer's rms.
  round-off     Missed --tol with easel's decisions, but easel's worst error against PyTorch
                float64 (same decisions) is no more than twice PyTorch float32's own: float32
                summation order, not a different computation (both sides miss 1e-4 against the
                exact result on that tensor).
  FAIL          anything else.

--f64 (and on its own when the first two fail) repeats the step in float64 in PyTorch with
easel's decisions and reports easel's and PyTorch float32's errors against it.

--row prints one markdown table row (tools/net-equivalence collects them); otherwise a report.
Exit status: 0 pass, pass at ties or round-off; 1 fail; 2 usage or load error.

Run it with /usr/bin/python3 (Debian's python3-torch 1.13 and python3-torchvision).
"""
import argparse
import json
import math
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The Caffe nets' first inner product takes its input size from a dry run (nn.LazyLinear).
warnings.filterwarnings("ignore", message="Lazy modules are a new feature")


# ---- easel's dump ---------------------------------------------------------------------------

def load_dump(path):
    """meta (dict) and arrays {(role, name): np.ndarray}; state names in order."""
    with open(os.path.join(path, "meta.json")) as f:
        meta = json.load(f)
    blob = np.memmap(os.path.join(path, "data.bin"), dtype=np.uint8, mode="r")
    arrays = {}
    for e in meta["arrays"]:
        dt = np.dtype({"float32": "<f4", "int32": "<i4", "uint8": "u1"}[e["dtype"]])
        a = np.frombuffer(blob, dtype=dt, count=e["count"], offset=e["offset"])
        arrays[(e["role"], e["name"])] = a.reshape(e["dims"])
    return meta, arrays


# ---- the Caffe nets, from their prototxts (nets/models/*.toml says which) --------------------

class WithinChannelLRN(nn.Module):
    """Caffe's LRN, WITHIN_CHANNEL region (k fixed at 1): x / (1 + alpha/n^2 * S)^beta, S the sum
    of x^2 over the n x n window centred on each position, zero padded (devices/cpu/ref_ops.cpp,
    RefLrn). avg_pool2d counting the padding divides S by n^2 everywhere."""

    def __init__(self, size, alpha, beta):
        super().__init__()
        self.size, self.alpha, self.beta = size, alpha, beta

    def forward(self, x):
        s = F.avg_pool2d(x * x, self.size, stride=1, padding=(self.size - 1) // 2,
                         count_include_pad=True)
        return x / (1 + self.alpha * s).pow(self.beta)


def lenet(c, classes):
    # examples/mnist/lenet_train_test.prototxt (Caffe pools round up: ceil_mode=True).
    return nn.Sequential(
        nn.Conv2d(c, 20, 5), nn.MaxPool2d(2, 2, ceil_mode=True),
        nn.Conv2d(20, 50, 5), nn.MaxPool2d(2, 2, ceil_mode=True),
        nn.Flatten(), nn.LazyLinear(500), nn.ReLU(), nn.Linear(500, classes))


def cifar10_quick(c, classes):
    # examples/cifar10/cifar10_quick_train_test.prototxt: no ReLU between ip1 and ip2.
    return nn.Sequential(
        nn.Conv2d(c, 32, 5, padding=2), nn.MaxPool2d(3, 2, ceil_mode=True), nn.ReLU(),
        nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(), nn.AvgPool2d(3, 2, ceil_mode=True),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.AvgPool2d(3, 2, ceil_mode=True),
        nn.Flatten(), nn.LazyLinear(64), nn.Linear(64, classes))


def cifar10_full(c, classes):
    # examples/cifar10/cifar10_full_train_test.prototxt: LRN within channel (3, 5e-5, 0.75).
    return nn.Sequential(
        nn.Conv2d(c, 32, 5, padding=2), nn.MaxPool2d(3, 2, ceil_mode=True), nn.ReLU(),
        WithinChannelLRN(3, 5e-5, 0.75),
        nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(), nn.AvgPool2d(3, 2, ceil_mode=True),
        WithinChannelLRN(3, 5e-5, 0.75),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.AvgPool2d(3, 2, ceil_mode=True),
        nn.Flatten(), nn.LazyLinear(classes))


def alexnet_cifar(c, classes):
    # bvlc_alexnet's layers, one tower, conv1 stride 1 pad 5 and pool5 stride 1 (docs/NETS.md).
    return nn.Sequential(
        nn.Conv2d(c, 96, 11, stride=1, padding=5), nn.ReLU(),
        nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0),
        nn.MaxPool2d(3, 2, ceil_mode=True),
        nn.Conv2d(96, 256, 5, padding=2), nn.ReLU(),
        nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0),
        nn.MaxPool2d(3, 2, ceil_mode=True),
        nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(),
        nn.Conv2d(384, 384, 3, padding=1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(3, 1, ceil_mode=True),
        nn.Flatten(), nn.LazyLinear(4096), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(0.5), nn.Linear(4096, classes))


def torchvision_net(name, classes):
    import torchvision.models as tvm
    if name == "vgg19":
        return tvm.vgg19(weights=None, num_classes=classes, init_weights=False)
    if name == "resnet18":
        return tvm.resnet18(weights=None, num_classes=classes)
    if name == "resnet50":
        return tvm.resnet50(weights=None, num_classes=classes)
    if name == "googlenet":
        return tvm.googlenet(weights=None, num_classes=classes, aux_logits=False,
                             init_weights=False, transform_input=False)
    return None


CAFFE_NETS = {"lenet": lenet, "cifar10-quick": cifar10_quick, "cifar10-full": cifar10_full,
              "alexnet-cifar": alexnet_cifar}
TORCHVISION_NETS = ("vgg19", "resnet18", "resnet50", "googlenet")


def build_torch_net(meta):
    name = meta["net"]
    c, h, w = meta["input"]
    if name in CAFFE_NETS:
        model = CAFFE_NETS[name](c, meta["classes"])
        with torch.no_grad():  # materialise the lazy inner products on the input's shape
            model(torch.zeros(1, c, h, w))
        return model, "written from Caffe's prototxt"
    model = torchvision_net(name, meta["classes"])
    if model is None:
        raise SystemExit(f"net_equivalence: no PyTorch twin of net '{name}' (known: "
                         + ", ".join(list(CAFFE_NETS) + list(TORCHVISION_NETS)) + ")")
    return model, "torchvision's definition"


# ---- loading easel's weights ----------------------------------------------------------------

def pairs(meta, model):
    """[(easel name, torch name, torch tensor, kind)] in order: every trained segment against
    model.parameters(), every state segment against the batch norms' running_mean/running_var.
    Refuses (SystemExit) on a count or shape that differs."""
    weights = [e for e in meta["arrays"] if e["role"] == "weights"]
    trained = [e for e in weights if not e["state"]]
    state = [e for e in weights if e["state"]]
    params = list(model.named_parameters())
    buffers = []
    for mname, m in model.named_modules():
        if isinstance(m, nn.BatchNorm2d):
            buffers += [(mname + ".running_mean", m.running_mean),
                        (mname + ".running_var", m.running_var)]
    if len(trained) != len(params) or len(state) != len(buffers):
        raise SystemExit(f"net_equivalence: easel has {len(trained)} parameter and {len(state)} "
                         f"state segments, PyTorch {len(params)} parameters and {len(buffers)} "
                         "running statistics")
    out = []
    for entries, tensors, kind in ((trained, params, "param"), (state, buffers, "state")):
        for e, (tname, t) in zip(entries, tensors):
            if list(t.shape) != list(e["dims"]):
                raise SystemExit(f"net_equivalence: easel {e['name']} is {e['dims']}, PyTorch "
                                 f"{tname} is {list(t.shape)}")
            out.append((e["name"], tname, t, kind))
    return out


class Decisions:
    """Stands in for torch.nn.functional.relu and max_pool2d for one run (nn.ReLU, nn.MaxPool2d
    and torchvision's functional calls all go through them). The n-th ReLU call is matched with
    easel's n-th ReLU layer (its relu_mask), the n-th max pool with easel's n-th max pool (its
    maxpool_argmax), shapes checked. Every call counts the elements where PyTorch decides
    otherwise than easel -- a ReLU input of another sign, a pooling window won by another
    element -- and the largest tie among them: |x| / rms(x) for a ReLU, |x_PyTorch's winner -
    x_easel's winner| / rms(x) for a pool. With apply, both take easel's decisions (forward and
    backward: x * mask; a gather at easel's winners), so that a value within round-off of a tie
    cannot route the gradient differently on the two sides."""

    def __init__(self, arrays, meta, apply):
        def listed(role):
            return [(e["name"], arrays[(role, e["name"])]) for e in meta["arrays"]
                    if e["role"] == role]
        self.masks, self.argmax = listed("relu_mask"), listed("maxpool_argmax")
        self.apply, self.relus, self.pools, self.ties = apply, 0, 0, []
        self.orig_relu, self.orig_pool = F.relu, F.max_pool2d

    def __enter__(self):
        F.relu, F.max_pool2d = self.relu, self.max_pool2d
        return self

    def __exit__(self, *exc):
        F.relu, F.max_pool2d = self.orig_relu, self.orig_pool

    def check_counts(self):
        if self.relus != len(self.masks) or self.pools != len(self.argmax):
            raise SystemExit(f"net_equivalence: PyTorch ran {self.relus} ReLUs and {self.pools} "
                             f"max pools, easel has {len(self.masks)} and {len(self.argmax)}")

    @staticmethod
    def easel_decision(kind, listed, n, shape):
        if n >= len(listed):
            raise SystemExit(f"net_equivalence: PyTorch runs more {kind}s than easel's "
                             f"{len(listed)}")
        name, a = listed[n]
        if list(a.shape[:len(shape)]) == list(shape) and a.size == math.prod(shape):
            a = a.reshape(tuple(shape))  # easel's inner product gives [n, c, 1, 1], PyTorch [n, c]
        else:
            raise SystemExit(f"net_equivalence: {kind} {n + 1} ({name}): easel {list(a.shape)}, "
                             f"PyTorch {list(shape)}")
        return name, torch.from_numpy(np.array(a))

    def relu(self, x, inplace=False):
        name, mask = self.easel_decision("ReLU", self.masks, self.relus, x.shape)
        self.relus += 1
        mask = mask.to(x.dtype)
        with torch.no_grad():
            xd = x.detach()
            differ = (xd > 0) != (mask > 0)
            n = int(differ.sum())
            size = float(xd[differ].abs().max() / xd.pow(2).mean().sqrt()) if n else 0.0
            self.ties.append(("ReLU", name, n, size))
        return x * mask if self.apply else self.orig_relu(x, inplace=inplace)

    def max_pool2d(self, x, *args, **kwargs):
        kwargs["return_indices"] = True
        out, idx = self.orig_pool(x, *args, **kwargs)
        name, at = self.easel_decision("max pool", self.argmax, self.pools, out.shape)
        self.pools += 1
        at = at.long()
        if bool((at < 0).any()):
            raise SystemExit(f"net_equivalence: max pool {name}: easel's output is no element "
                             "of its window")
        flat = x.flatten(2)
        with torch.no_grad():
            xd = flat.detach()
            differ = idx != at
            n = int(differ.sum())
            size = 0.0
            if n:
                gap = (xd.gather(2, idx.flatten(2)) - xd.gather(2, at.flatten(2))).abs()
                size = float(gap.max() / xd.pow(2).mean().sqrt())
            self.ties.append(("max pool", name, n, size))
        return flat.gather(2, at.flatten(2)).view(out.shape) if self.apply else out


def run_torch(meta, arrays, dtype, shared=False):
    """One training step in PyTorch at dtype: logits, loss, {easel name: grad}, {easel name:
    running statistic after the step}, the pairs, and per ReLU and max pool (kind, easel's
    name, decisions other than easel's, largest tie among them; Decisions). shared: the ReLUs
    and max pools take easel's decisions."""
    torch.manual_seed(0)
    model, origin = build_torch_net(meta)
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    model = model.to(dtype)
    ps = pairs(meta, model)
    with torch.no_grad():
        for ename, _, t, _ in ps:
            t.copy_(torch.from_numpy(np.array(arrays[("weights", ename)])))
    model.train()
    x = torch.from_numpy(np.array(arrays[("images", "images")])).to(dtype)
    y = torch.from_numpy(np.array(arrays[("labels", "labels")])).long()
    with Decisions(arrays, meta, shared) as patch:
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        model.zero_grad()
        loss.backward()
    patch.check_counts()
    grads, stats = {}, {}
    for ename, _, t, kind in ps:
        if kind == "param":
            grads[ename] = t.grad.detach().double().numpy()
        else:
            stats[ename] = t.detach().double().numpy()
    return dict(logits=logits.detach().double().numpy(), loss=float(loss), grads=grads,
                stats=stats, pairs=ps, origin=origin, ties=patch.ties)


# ---- comparison -----------------------------------------------------------------------------

def err(a, b):
    """(norm-relative error ||a - b|| / ||b||, max |a - b|) in float64."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    d = a - b
    nb = float(np.linalg.norm(b))
    nd = float(np.linalg.norm(d))
    rel = nd / nb if nb > 0 else (0.0 if nd == 0 else math.inf)
    return rel, float(np.max(np.abs(d))) if d.size else 0.0


def compare(meta, arrays, ref):
    """Errors of easel's step against ref (run_torch's result)."""
    r = {"logits": err(arrays[("logits", "logits")], ref["logits"]),
         "loss": err([meta["loss"]], [ref["loss"]]), "grads": {}, "stats": {}}
    for ename, tname, _, kind in ref["pairs"]:
        if kind == "param":
            r["grads"][ename] = err(arrays[("grad", ename)], ref["grads"][ename]) + (tname,)
        else:
            r["stats"][ename] = err(arrays[("state_after", ename)], ref["stats"][ename]) + (tname,)
    return r


def compare_torch(t32, t64):
    """PyTorch float32's errors against PyTorch float64."""
    r = {"logits": err(t32["logits"], t64["logits"]), "loss": err([t32["loss"]], [t64["loss"]]),
         "grads": {}, "stats": {}}
    for k, v in t32["grads"].items():
        r["grads"][k] = err(v, t64["grads"][k]) + ("",)
    for k, v in t32["stats"].items():
        r["stats"][k] = err(v, t64["stats"][k]) + ("",)
    return r


def worst(d):
    """(name, rel, maxabs) of the largest rel in {name: (rel, maxabs, ...)}, or None."""
    if not d:
        return None
    name = max(d, key=lambda k: d[k][0])
    return name, d[name][0], d[name][1]


def passes(r, tol):
    rels = [r["logits"][0], r["loss"][0]] + [v[0] for v in r["grads"].values()] + \
           [v[0] for v in r["stats"].values()]
    return all(x <= tol for x in rels)


def summary(r):
    g, s = worst(r["grads"]), worst(r["stats"])
    return {"logits": r["logits"][0], "loss": r["loss"][0],
            "grad": g[1] if g else 0.0, "grad_at": g[0] if g else "-",
            "stats": s[1] if s else None}


def fmt(x):
    return "-" if x is None else f"{x:.1e}"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dump", help="the directory tools/bench/net_dump wrote")
    p.add_argument("--tol", type=float, default=1e-4, help="largest norm-relative error (1e-4)")
    p.add_argument("--tie", type=float, default=1e-3,
                   help="a decision other than easel's must be a tie within TIE x the layer's "
                        "rms (1e-3: values that agree to 1e-4 in norm may differ ten times that "
                        "element-wise after 50 layers)")
    p.add_argument("--f64", action="store_true", help="also compare both with PyTorch float64")
    p.add_argument("--row", action="store_true", help="print one markdown table row")
    p.add_argument("--verbose", action="store_true", help="every tensor's errors")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)

    meta, arrays = load_dump(a.dump)
    t32 = run_torch(meta, arrays, torch.float32)
    r = compare(meta, arrays, t32)
    ok = passes(r, a.tol)
    # The same step with easel's ReLU and max pool decisions; where PyTorch decided otherwise
    # the values must be ties (within tol x rms of 0, or of the other winner).
    ts = run_torch(meta, arrays, torch.float32, shared=True)
    rs = compare(meta, arrays, ts)
    ties = [t for t in t32["ties"] if t[2]]
    relu_ties = sum(t[2] for t in ties if t[0] == "ReLU")
    pool_ties = sum(t[2] for t in ties if t[0] != "ReLU")
    tie_size = max((t[3] for t in ties), default=0.0)
    all_ties = tie_size <= a.tie
    ok_shared = passes(rs, a.tol) and all_ties
    # Against float64 (easel's decisions on both): which float32 side is closer to exact.
    r64 = t3264 = None
    roundoff = False
    if a.f64 or not (ok or ok_shared):
        t64 = run_torch(meta, arrays, torch.float64, shared=True)
        r64, t3264 = compare(meta, arrays, t64), compare_torch(ts, t64)
        # A miss that is float32's: easel no further from float64 than PyTorch float32 (x2).
        e64, p64 = summary(r64), summary(t3264)
        roundoff = all_ties and max(e64["grad"], e64["logits"]) <= max(
            a.tol, 2 * max(p64["grad"], p64["logits"]))

    s = summary(r)
    ss = summary(rs)
    if a.verbose or not a.row:
        c, h, w = meta["input"]
        print(f"{meta['net']}: batch {meta['batch']} of {c}x{h}x{w}, {meta['classes']} classes, "
              f"easel --impl {meta['impl']}, PyTorch {torch.__version__} ({t32['origin']})")
        if meta.get("dropout_zeroed"):
            print("  dropout made the identity on both sides: " + ", ".join(meta["dropout_zeroed"]))
        print(f"  loss easel {meta['loss']:.8f} PyTorch {t32['loss']:.8f}")
        print(f"  {'tensor':40s} {'PyTorch name':36s} {'rel':>9s} {'max abs':>9s} {'rel shared':>10s}"
              + (f" {'rel f64':>9s} {'torch f64':>9s}" if r64 else ""))

        def line(label, tname, k, group):
            def pick(res):
                return res[group][k] if group else res[k]
            e = pick(r)
            extra = f" {pick(rs)[0]:10.1e}"
            if r64:
                extra += f" {pick(r64)[0]:9.1e} {pick(t3264)[0]:9.1e}"
            flag = "" if e[0] <= a.tol else "  <-- over"
            print(f"  {label:40s} {tname:36s} {e[0]:9.1e} {e[1]:9.1e}{extra}{flag}")

        line("logits", "", "logits", None)
        line("loss", "", "loss", None)
        if a.verbose:
            for k, v in r["grads"].items():
                line("grad " + k, v[2], k, "grads")
            for k, v in r["stats"].items():
                line("after " + k, v[2], k, "stats")
        else:
            g, st = worst(r["grads"]), worst(r["stats"])
            if g:
                line("worst grad " + g[0], r["grads"][g[0]][2], g[0], "grads")
            if st:
                line("worst stat " + st[0], r["stats"][st[0]][2], st[0], "stats")
        for kind, name, n, size in ties:
            print(f"  {kind} {name}: {n} decision(s) other than easel's, ties within "
                  f"{size:.1e} x rms")
        print(f"  with easel's ReLU and max pool decisions: worst grad {ss['grad']:.1e} "
              f"({ss['grad_at']}), logits {ss['logits']:.1e}")
        if r64:
            s64, st64 = summary(r64), summary(t3264)
            print(f"  against PyTorch float64 (easel's decisions): easel's worst grad {s64['grad']:.1e} "
                  f"({s64['grad_at']}), PyTorch float32's {st64['grad']:.1e} ({st64['grad_at']})")
        verdict = ("PASS" if ok else "PASS with easel's decisions at ties" if ok_shared else
                   "MISS by float32 round-off (easel as close to float64 as PyTorch float32)"
                   if roundoff else "FAIL")
        print(f"  {verdict} (tolerance {a.tol:g} relative)")
    if a.row:
        params = sum(e["count"] for e in meta["arrays"]
                     if e["role"] == "weights" and not e["state"])
        verdict = ("pass" if ok else "pass at ties" if ok_shared else
                   "round-off" if roundoff else "FAIL")
        if r64 and not (ok or ok_shared):
            s64, st64 = summary(r64), summary(t3264)
            verdict += f" (vs f64: easel {s64['grad']:.1e}, PyTorch f32 {st64['grad']:.1e})"
        tie_cell = f"{relu_ties} / {pool_ties}" + (f" (≤ {tie_size:.0e})" if ties else "")
        print(f"| `{meta['net']}` | {params:,} | {meta['batch']} | {fmt(s['logits'])} | "
              f"{fmt(s['loss'])} | {fmt(s['grad'])} (`{s['grad_at']}`) | {fmt(s['stats'])} | "
              f"{tie_cell} | {fmt(ss['grad'])} | {verdict} |")
    return 0 if ok or ok_shared or roundoff else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
