"""The LeNet that tools/pytorch/lenet_bench.py and lenet_hogwild.py train: Caffe's net and
solver as `easel train` has them, torch imported with the thread settings of a run, and the BLAS
that torch loaded. `a` is lenet_bench's parsed arguments."""
import os


def import_torch(a):
    if a.cpu >= 0:
        os.sched_setaffinity(0, {a.cpu})
    # An OpenBLAS behind torch would start a thread per core of its own: hold it to --threads.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.threads))
    import torch
    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    if a.device != "cpu" and not torch.cuda.is_available():
        raise SystemExit(f"lenet_bench: --device {a.device}: torch {torch.__version__} sees no "
                         "CUDA device")
    return torch


def build(torch, a):
    nn = torch.nn

    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 20, 5)
            self.conv2 = nn.Conv2d(20, 50, 5)
            self.ip1 = nn.Linear(800, 500)
            self.ip2 = nn.Linear(500, 10)
            for m in (self.conv1, self.conv2, self.ip1, self.ip2):
                fan_in = m.weight[0].numel()
                bound = (3.0 / fan_in) ** 0.5  # Caffe's xavier
                nn.init.uniform_(m.weight, -bound, bound)
                nn.init.zeros_(m.bias)

        def forward(self, x):
            f = torch.nn.functional
            x = f.max_pool2d(self.conv1(x), 2, 2)
            x = f.max_pool2d(self.conv2(x), 2, 2)
            x = f.relu(self.ip1(x.flatten(1)))
            return self.ip2(x)

    torch.manual_seed(a.seed)
    net = LeNet()
    if a.device != "cpu":
        net.to(a.device)  # initialised on the CPU as for --device cpu, then moved
    return net, optimizer(torch, a, net)


def optimizer(torch, a, net):
    """Caffe's solver: SGD with momentum and weight decay, biases at twice the rate (lr_mult)."""
    weights = [m.weight for m in (net.conv1, net.conv2, net.ip1, net.ip2)]
    biases = [m.bias for m in (net.conv1, net.conv2, net.ip1, net.ip2)]
    return torch.optim.SGD([{"params": weights, "lr_mult": 1.0, "lr": a.lr},
                            {"params": biases, "lr_mult": 2.0, "lr": 2 * a.lr}],
                           lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)


def set_lr(opt, a, it):
    rate = a.lr * (1 + 1e-4 * it) ** -0.75 if a.lr_policy == "inv" else a.lr
    for g in opt.param_groups:
        g["lr"] = rate * g["lr_mult"]


def blas_in_use():
    """The BLAS library this process loaded (torch's Linear layers run on it)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
        return ",".join(sorted(libs)) or "none"
    except OSError:
        return "unknown"
