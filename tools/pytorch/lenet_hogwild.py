"""lenet_bench.py --mode train --procs P: PyTorch's Hogwild on P cores, the counterpart of
easel's default two-group run. The net (built as lenet_bench builds it, same seed) lives in
shared memory; P forked processes of one thread each, each pinned to its own cpu with its own
SGD optimizer (momentum, weight decay, Caffe's inv rate and bias lr x2, as lenet_bench), write
to it without a lock (PyTorch's mnist_hogwild example). Each epoch every process takes its 1/P
of a fresh permutation; then all meet, process 0 evaluates the shared net on the test set
(outside the training time) and all stop once it reaches the target. Ends with one JSON line
like lenet_bench's train mode, with "procs" and "hogwild"."""
import json
import os
import sys
import time


def _worker(rank, a, net, data, sync, cpus):
    import numpy as np
    import torch
    import lenet_net as ln
    os.sched_setaffinity(0, {cpus[rank]})
    torch.set_num_threads(1)
    xtr, ytr, xte, yte = data
    barrier, dts, state = sync  # state: [train_s, eval_s, acc, epochs, reached]
    opt = ln.optimizer(torch, a, net)
    lossf = torch.nn.CrossEntropyLoss()
    scale = 1.0 / 256
    n = len(xtr)
    mine = n // a.batch // a.procs  # this process's steps per epoch
    rng = np.random.default_rng(a.seed)  # the same permutation in every process
    it = 0
    for epoch in range(1, int(a.epochs + 0.999) + 1):
        order = rng.permutation(n)
        barrier.wait()
        t0 = time.perf_counter()
        for b in range(mine):
            lo = (rank * mine + b) * a.batch
            idx = order[lo:lo + a.batch]
            x = torch.from_numpy(xtr[idx]).unsqueeze(1).float().mul_(scale)
            ln.set_lr(opt, a, it * a.procs)  # the rate at the run's step count
            opt.zero_grad(set_to_none=False)
            loss = lossf(net(x), torch.from_numpy(ytr[idx]))
            loss.backward()
            opt.step()
            it += 1
        dts[rank] = time.perf_counter() - t0
        barrier.wait()
        if rank == 0:  # the epoch took as long as its slowest process
            state[0] += max(dts[:])
            t1 = time.perf_counter()
            correct = 0
            with torch.no_grad():
                for b in range(0, len(xte), 1000):
                    x = torch.from_numpy(xte[b:b + 1000]).unsqueeze(1).float().mul_(scale)
                    correct += int((net(x).argmax(1) == torch.from_numpy(yte[b:b + 1000])).sum())
            state[1] += time.perf_counter() - t1
            state[2] = correct / len(xte)
            state[3] = epoch
            print(f"epoch {epoch:3d}  loss {float(loss):.4f}  test accuracy {state[2]:.4f}  "
                  f"{epoch * mine * a.procs * a.batch / state[0]:7.0f} img/s  "
                  f"train {state[0]:.1f} s", flush=True)
            if state[2] >= a.target and state[4] < 0:
                state[4] = state[0]
        barrier.wait()
        if state[4] >= 0:
            break


def train_hogwild(a, load):
    """Runs the Hogwild training; returns the exit code."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < a.procs:
        print(f"lenet_bench: --procs {a.procs} needs {a.procs} cpus, this process may use "
              f"{len(cpus)}", file=sys.stderr)
        return 2
    import lenet_net as ln
    torch = ln.import_torch(a)  # one thread: no OpenMP pool for the children to inherit
    import torch.multiprocessing as mp
    try:
        data = (*load(a, "train"), *load(a, "t10k"))
    except (OSError, ValueError) as e:
        print(f"lenet_bench: {e}", file=sys.stderr)
        return 1
    net, _ = ln.build(torch, a)
    net.share_memory()
    ctx = mp.get_context("fork")
    sync = (ctx.Barrier(a.procs), ctx.Array("d", a.procs), ctx.Array("d", [0, 0, 0, 0, -1]))
    t_wall = time.perf_counter()
    procs = [ctx.Process(target=_worker, args=(r, a, net, data, sync, cpus))
             for r in range(a.procs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode != 0 for p in procs):
        print("lenet_bench: a Hogwild process failed", file=sys.stderr)
        return 1
    wall = time.perf_counter() - t_wall
    train_s, eval_s, acc, epochs, reached = sync[2][:]
    reached = reached if reached >= 0 else None
    r = {"mode": "train", "framework": f"pytorch {torch.__version__}", "threads": 1,
         "procs": a.procs, "hogwild": True, "batch": a.batch, "lr": a.lr,
         "lr_policy": a.lr_policy, "momentum": a.momentum, "target_accuracy": a.target,
         "time_to_target_seconds": reached, "wall_seconds": wall, "train_seconds": train_s,
         "eval_seconds": eval_s, "epochs": epochs, "test_accuracy": acc,
         "blas": ln.blas_in_use(), "device": "cpu"}
    print(f"done: target {a.target} " + (f"reached in {reached:.1f} s of training" if reached
                                        else "not reached") +
          f" ({wall:.1f} s wall) after {epochs:.0f} epochs, {a.procs} Hogwild processes; "
          f"accuracy {acc:.4f}")
    print(json.dumps(r), flush=True)
    return 0
