#!/usr/bin/python3
"""Writes a PyTorch state_dict of easel's weights: `easel export --format pytorch` runs it.

  export_state_dict.py DUMP_DIR OUT.pt

DUMP_DIR holds meta.json and data.bin in tools/bench/net_dump's format, the weights alone (role
"weights", nchw: easel has put an nhwc run's inner products in chw order) and "step". The net is
built as net_equivalence.py builds it -- torchvision's vgg19, resnet18, resnet50 and googlenet
(aux_logits=False, transform_input=False), the twins written from the Caffe prototxts for lenet,
cifar10-quick, cifar10-full and alexnet-cifar (nn.Sequential: keys "0.weight", ...) -- easel's
segments are loaded into its parameters and batch norms' running statistics in order, every
shape checked (net_equivalence.pairs), num_batches_tracked set to the run's step, and
torch.save(model.state_dict()) writes OUT.pt (a temporary file beside it, then a rename).

Load it with the same constructor and load_state_dict(sd, strict=True); tools/pytorch/
check_state_dict.py does, and compares the logits with easel's.

Prints one line; exit 0 done, 2 bad input (no PyTorch twin of the net, a shape that differs),
3 python3-torch or python3-torchvision missing, 1 anything else.
"""
import os
import sys


def main(argv):
    if len(argv) != 2:
        print("export_state_dict: usage: export_state_dict.py DUMP_DIR OUT.pt", file=sys.stderr)
        return 2
    dump, out = argv
    try:
        import numpy as np
        import torch
        import torch.nn as nn
        import torchvision  # noqa: F401 (the torchvision nets' definitions)
    except ImportError as e:
        print(f"--format pytorch: needs PyTorch: {e} (apt-get install python3-torch "
              "python3-torchvision)")
        return 3
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import net_equivalence as ne

    meta, arrays = ne.load_dump(dump)
    name = meta["net"]
    known = list(ne.CAFFE_NETS) + list(ne.TORCHVISION_NETS)
    if name not in known:
        print(f"--format pytorch: net '{name}' has no PyTorch twin (known: {', '.join(known)})")
        return 2
    torch.manual_seed(0)
    try:
        model, origin = ne.build_torch_net(meta)
        ps = ne.pairs(meta, model)
    except SystemExit as e:  # a count or shape that differs: not the twin of this net
        print(f"--format pytorch: net '{name}': {str(e.code).removeprefix('net_equivalence: ')}")
        return 2
    with torch.no_grad():
        for ename, _, t, _ in ps:
            t.copy_(torch.from_numpy(np.array(arrays[("weights", ename)])))
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.num_batches_tracked.fill_(int(meta.get("step", 0)))
    sd = model.state_dict()
    tmp = f"{out}.tmp{os.getpid()}"
    try:
        torch.save(sd, tmp)
        os.replace(tmp, out)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        print(f"--out: cannot write {out}: {e.strerror}")
        return 1
    params = sum(t.numel() for _, _, t, kind in ps if kind == "param")
    print(f"PyTorch {torch.__version__} state_dict, {len(sd)} tensors, {params} parameters "
          f"({origin}), {os.path.getsize(out)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
