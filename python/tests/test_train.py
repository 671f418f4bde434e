"""easel.train against easel train: the same run's metrics.jsonl bit for bit, the progress
callback, a callback's stop, and the run directory's files."""
import json
import os

import easel
from conftest import RUN, cli, cli_flags

TIMES = ("_seconds", "images_per_second")  # what two runs of the same numbers do not share


def numbers(path):
    """metrics.jsonl's records without their times, each number as the text the file holds."""
    out = []
    for line in open(path):
        rec = json.loads(line, parse_float=str, parse_int=str)
        keep = lambda d: {k: v for k, v in d.items() if not k.endswith(TIMES)}
        rec = keep(rec)
        rec["groups"] = [keep(g) for g in rec["groups"]]
        out.append(rec)
    return out


def test_same_metrics_as_the_cli(tmp_path, fashion):
    code, _, err = cli("train", *cli_flags(RUN), "--out", str(tmp_path / "cli"))
    assert code == 0, err
    seen = []
    summary = easel.train(easel.Config(**RUN), out=tmp_path / "py", progress=seen.append)
    a, b = numbers(tmp_path / "cli" / "metrics.jsonl"), numbers(tmp_path / "py" / "metrics.jsonl")
    assert len(a) == 2 and a == b
    # And the same settings, as a resumed run would read them.
    assert (tmp_path / "cli" / "config.json").read_text() == (tmp_path / "py" / "config.json").read_text()
    # The callback saw each evaluation, with the record's numbers.
    assert [e["step"] for e in seen] == [20, 40]
    assert [repr(e["test_loss"]) for e in seen] == [r["test_loss"] for r in b]
    assert summary["stopped"] == "completed" and summary["steps"] == 40
    assert summary["test_accuracy"] == float(b[-1]["test_accuracy"])
    on_disk = json.load(open(tmp_path / "py" / "summary.json"))
    assert on_disk["stopped"] == "completed" and on_disk["test_accuracy"] == summary["test_accuracy"]
    # The run directory is one the easel program reads: eval gives the model's accuracy.
    ev = easel.eval(tmp_path / "py", data="synthetic:64:1x28x28:10")
    assert ev["step"] == 40 and ev["images"] == 16 and 0 <= ev["accuracy"] <= 1
    assert len(ev["confusion"]) == 10


def test_progress_false_stops_the_run(fashion):
    summary = easel.train(easel.Config(**RUN), progress=lambda e: e["step"] < 20)
    assert summary["stopped"] == "requested" and summary["steps"] == 20
    assert summary["evaluations"] == 1


def test_a_callback_error_is_raised_after_the_run(fashion):
    def boom(e):
        raise ZeroDivisionError("from the callback")
    try:
        easel.train(easel.Config(**RUN), progress=boom)
        assert False, "train returned"
    except ZeroDivisionError as e:
        assert str(e) == "from the callback"


def test_no_out_writes_nothing(tmp_path, fashion):
    os.chdir(tmp_path)
    easel.train(easel.Config(**dict(RUN, iterations="20")))
    assert os.listdir(tmp_path) == []
