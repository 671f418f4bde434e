#!/usr/bin/python3
"""The plots of `easel sweep report DIR` (which runs this script; it is not meant to be run by
hand): reads DIR/report.json (the rows easel wrote) and each cell's metrics.jsonl, and writes
beside report.md

  accuracy_vs_time.png  test accuracy against training seconds, one line per run (a panel per
                        algorithm when the sweep has more than one)
  time_to_target.png    time to the target accuracy against the number of groups
  time_shares.png       stacked compute / communication / wait shares of each run
  throughput.png        images/s and weak-scaling efficiency against the number of groups

Usage: sweep_plots.py DIR/report.json DIR. Exit 3 (and one line) when matplotlib is missing:
Debian's python3-matplotlib, which tools/setup installs.
"""
import json
import math
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("sweep_plots: matplotlib is missing (tools/setup installs python3-matplotlib)", file=sys.stderr)
    sys.exit(3)

MARKERS = "os^Dv<>pPX*h"


def fail(msg):
    print("sweep_plots: " + msg, file=sys.stderr)
    sys.exit(1)


def load_curve(path):
    """(train_seconds, test_accuracy) of each metrics.jsonl record; a line cut short is skipped."""
    xs, ys = [], []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(r, dict):
                    continue
                t, a = r.get("train_seconds"), r.get("test_accuracy")
                if isinstance(t, (int, float)) and isinstance(a, (int, float)) and math.isfinite(t) and math.isfinite(a):
                    xs.append(t)
                    ys.append(a)
    except OSError:
        pass
    return xs, ys


def label_of(flags, leave_out=()):
    parts = ["%s=%s" % (k, v) for k, v in flags.items() if k not in leave_out]
    return " ".join(parts) if parts else "run"


def colours(n):
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def save(fig, path):
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def panel_key(axes_keys):
    """The swept flag whose values get a panel each (algo when swept with others)."""
    if "algo" in axes_keys and len(axes_keys) > 1:
        return "algo"
    return None


def accuracy_vs_time(rows, axes_keys, target, d):
    ran = [r for r in rows if r.get("status") in ("done", "diverged", "stalled")]
    if not ran:
        return
    pk = panel_key(axes_keys)
    groups = {}
    for r in ran:
        groups.setdefault(r["flags"].get(pk, "") if pk else "", []).append(r)
    names = list(groups)
    cols = min(len(names), 3)
    nrows = (len(names) + cols - 1) // cols
    fig, axs = plt.subplots(nrows, cols, figsize=(5.2 * cols, 3.8 * nrows), squeeze=False, sharey=True)
    lo = 1.0
    for i, name in enumerate(names):
        ax = axs[i // cols][i % cols]
        runs = sorted(groups[name], key=lambda r: r.get("index", 0) or 0)  # the grid's order
        cs = colours(len(runs))
        for j, r in enumerate(runs):
            xs, ys = load_curve(os.path.join(d, r["dir"], "metrics.jsonl"))
            if not xs:
                continue
            lo = min(lo, min(ys))
            ax.plot(xs, ys, marker=MARKERS[j % len(MARKERS)], markersize=4, color=cs[j], linewidth=1.5,
                    label=label_of(r["flags"], (pk,) if pk else ()))
        ax.axhline(target, color="grey", linestyle=":", linewidth=1)
        ax.set_title(("%s=%s" % (pk, name)) if pk else "test accuracy against training time", fontsize=10)
        ax.set_xlabel("training time (s)")
        if i % cols == 0:
            ax.set_ylabel("test accuracy")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    for i in range(len(names), nrows * cols):
        axs[i // cols][i % cols].axis("off")
    for row in axs:
        for ax in row:
            ax.set_ylim(max(0.0, min(lo, target) - 0.05), 1.0 if lo > 0.5 else None)
    fig.suptitle("Test accuracy against training time (dotted: target %.2f)" % target, fontsize=11)
    fig.tight_layout()
    save(fig, os.path.join(d, "accuracy_vs_time.png"))


def series_by_groups(rows, axes_keys, value):
    """{line label: [(groups, value)]}, one line per setting of the swept flags other than groups."""
    lines = {}
    for r in rows:
        if r.get("status") != "done":  # a diverged run's rate and shares are not a result
            continue
        v = value(r)
        if v is None:
            continue
        lab = label_of({k: x for k, x in r["flags"].items() if k != "groups"})
        lines.setdefault(lab, []).append((r.get("groups", 1), v))
    for k in lines:
        lines[k].sort()
    return lines


def line_plot(ax, lines, ylabel, logx=True):
    cs = colours(len(lines))
    for j, (lab, pts) in enumerate(sorted(lines.items())):
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=MARKERS[j % len(MARKERS)], color=cs[j],
                linewidth=1.5, markersize=6, label=lab)
    gs = sorted({p[0] for pts in lines.values() for p in pts})
    if logx and len(gs) > 1:
        ax.set_xscale("log", base=2)
    ax.set_xticks(gs)
    ax.set_xticklabels([str(g) for g in gs])
    ax.set_xlabel("groups")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)


def one_group_count(rows):
    return len({r.get("groups") for r in rows if r.get("status") in ("done", "diverged", "stalled")}) <= 1


def bars(rows, value, xlabel, title, path):
    """One horizontal bar per run (in the grid's order): for a sweep of one group count."""
    ran = sorted([r for r in rows if r.get("status") == "done"], key=lambda r: r.get("index", 0) or 0)
    if not ran:
        return
    fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(ran) + 1.4))
    y = list(range(len(ran)))
    vals = [value(r) for r in ran]
    ax.barh(y, [v if v is not None else 0 for v in vals], color="#4c72b0")
    for i, v in enumerate(vals):
        if v is None:
            ax.text(0, i, " not reached", va="center", fontsize=8)
    ax.set_yticks(y)
    ax.set_yticklabels([label_of(r["flags"]) for r in ran], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    save(fig, path)


def time_to_target(rows, axes_keys, target, d):
    if one_group_count(rows):
        bars(rows, lambda r: r.get("time_to_target"), "time to test accuracy %.2f (s)" % target,
             "Time to target per run", os.path.join(d, "time_to_target.png"))
        return
    lines = series_by_groups(rows, axes_keys, lambda r: r.get("time_to_target"))
    if not lines:
        return
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    line_plot(ax, lines, "time to test accuracy %.2f (s)" % target)
    ax.set_ylim(bottom=0)
    ax.set_title("Time to target against the number of groups\n(runs that never reached it are left out)",
                 fontsize=10)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    save(fig, os.path.join(d, "time_to_target.png"))


def time_shares(rows, d):
    ran = [r for r in rows if r.get("status") == "done"]
    if not ran:
        return
    ran = sorted(ran, key=lambda r: r.get("index", 0) or 0)
    labels = [label_of(r["flags"]) for r in ran]
    comp = [max(0.0, r.get("compute_share", 0)) for r in ran]
    comm = [max(0.0, r.get("comm_share", 0)) for r in ran]
    wait = [max(0.0, r.get("wait_share", 0)) for r in ran]
    fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(ran) + 1.4))
    y = list(range(len(ran)))
    ax.barh(y, comp, color="#4c72b0", label="compute")
    ax.barh(y, comm, left=comp, color="#dd8452", label="communication")
    ax.barh(y, wait, left=[a + b for a, b in zip(comp, comm)], color="#c44e52", label="wait")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the groups' training time")
    ax.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title("Compute / communication / wait per run", fontsize=10)
    fig.tight_layout()
    save(fig, os.path.join(d, "time_shares.png"))


def throughput(rows, axes_keys, d):
    if one_group_count(rows):
        bars(rows, lambda r: r.get("images_per_second"), "training images/s",
             "Throughput per run (one group count: no scaling to show)",
             os.path.join(d, "throughput.png"))
        return
    lines = series_by_groups(rows, axes_keys, lambda r: r.get("images_per_second"))
    if not lines:
        return
    eff = {}
    for lab, pts in lines.items():
        g0, v0 = pts[0]  # the fewest groups of the line: 1 when swept from 1
        if v0 > 0:
            eff[lab] = [(g, (v / g) / (v0 / g0)) for g, v in pts]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    line_plot(a1, lines, "training images/s")
    a1.set_ylim(bottom=0)
    a1.set_title("Throughput", fontsize=10)
    line_plot(a2, eff, "weak-scaling efficiency")
    a2.set_ylim(0, max(1.1, max((p[1] for pts in eff.values() for p in pts), default=1) * 1.05))
    a2.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    a2.set_title("Weak scaling: (img/s per group) / that of the fewest groups", fontsize=10)
    handles, labs = a1.get_legend_handles_labels()
    fig.legend(handles, labs, fontsize=8, loc="lower center", ncol=min(len(labs), 4), bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.08 + 0.04 * ((len(labs) - 1) // 4), 1, 1))
    save(fig, os.path.join(d, "throughput.png"))


def main():
    if len(sys.argv) != 3:
        fail("usage: sweep_plots.py DIR/report.json DIR (easel sweep report runs it)")
    path, d = sys.argv[1], sys.argv[2]
    try:
        with open(path, encoding="utf-8") as f:
            rep = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: %s" % (path, e))
    rows = rep.get("cells", [])
    for i, r in enumerate(rows):
        r.setdefault("index", i)
    axes_keys = [a.get("key") for a in rep.get("axes", []) if isinstance(a, dict)]
    target = float(rep.get("target", 0.8))
    accuracy_vs_time(rows, axes_keys, target, d)
    time_to_target(rows, axes_keys, target, d)
    time_shares(rows, d)
    throughput(rows, axes_keys, d)


if __name__ == "__main__":
    main()
