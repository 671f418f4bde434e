"""Ctrl-C during easel.train: the run is interrupted as easel train's SIGINT interrupts it (every
group ends its step, the checkpoint is taken there, summary.json says "interrupted"), then
KeyboardInterrupt is raised carrying the summary."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import easel
from conftest import RUN

LONG = dict(RUN, iterations="100000", **{"eval-every": "10"})


def test_sigint_while_training_interrupts_cleanly(tmp_path, fashion):
    # A real SIGINT, in a process of its own, arriving while the run trains without the GIL.
    script = textwrap.dedent("""
        import json, sys, easel
        cfg = easel.Config(**json.loads(sys.argv[1]))
        def progress(e):
            print("evaluated", e["step"], flush=True)
        try:
            easel.train(cfg, out=sys.argv[2], progress=progress)
            print("completed")
        except KeyboardInterrupt as e:
            print("summary", json.dumps(e.summary), flush=True)
    """)
    out = tmp_path / "run"
    child = subprocess.Popen([sys.executable, "-c", script, json.dumps(LONG), str(out)],
                             stdout=subprocess.PIPE, text=True, env=os.environ)
    assert child.stdout.readline().startswith("evaluated")
    child.send_signal(signal.SIGINT)
    lines = child.stdout.read().splitlines()
    assert child.wait(timeout=120) == 0
    summary = json.loads(lines[-1][len("summary "):])
    assert summary["stopped"] == "interrupted" and summary["stop_signal"] == signal.SIGINT
    assert 10 <= summary["steps"] < 100000
    on_disk = json.load(open(out / "summary.json"))
    assert on_disk["stopped"] == "interrupted" and on_disk["steps"] == summary["steps"]
    assert (out / "checkpoint.bin").exists()


def test_keyboard_interrupt_in_the_callback(tmp_path, fashion):
    def progress(e):
        raise KeyboardInterrupt
    try:
        easel.train(easel.Config(**LONG), out=tmp_path / "run", progress=progress)
        assert False, "train returned"
    except KeyboardInterrupt as e:
        assert e.summary["stopped"] == "interrupted" and e.summary["steps"] >= 10
    assert json.load(open(tmp_path / "run" / "summary.json"))["stopped"] == "interrupted"
