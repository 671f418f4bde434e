"""Ctrl-C during easel.train: the run is interrupted as easel train's SIGINT interrupts it (every
group ends its step, the checkpoint is taken there, summary.json says "interrupted"), then
KeyboardInterrupt is raised carrying the summary."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import easel
from conftest import RUN

LONG = dict(RUN, iterations="100000", **{"eval-every": "10"})


def test_sigint_while_training_interrupts_cleanly(tmp_path, fashion):
    # A real SIGINT, in a process of its own, arriving while the run trains without the GIL, in
    # a round that would not end for hours: the module's own signal checks must notice it.
    script = textwrap.dedent("""
        import json, signal, sys, easel
        # Python's own Ctrl-C handler, even where this test was started with SIGINT ignored
        # (a background job's children inherit that).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        cfg = easel.Config(**json.loads(sys.argv[1]))
        try:
            easel.train(cfg, out=sys.argv[2])
            print("completed")
        except KeyboardInterrupt as e:
            print("summary", json.dumps(e.summary), flush=True)
    """)
    out = tmp_path / "run"
    settings = dict(LONG, **{"eval-every": "100000"})
    child = subprocess.Popen([sys.executable, "-c", script, json.dumps(settings), str(out)],
                             stdout=subprocess.PIPE, text=True, env=os.environ)
    # config.json is written just before the first step.
    deadline = time.monotonic() + 60
    while not (out / "config.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    child.send_signal(signal.SIGINT)
    try:
        lines = child.communicate(timeout=60)[0].splitlines()
    finally:
        child.kill()
    assert child.returncode == 0
    summary = json.loads(lines[-1][len("summary "):])
    assert summary["stopped"] == "interrupted" and summary["stop_signal"] == signal.SIGINT
    assert summary["steps"] < 100000
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
