"""easel.eval, export, predict and model: the easel program's commands of those names, their
--json as dicts, their one-line refusals as ValueError."""
import numpy as np
import pytest

import easel
from conftest import RUN, cli


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, fashion):
    out = tmp_path_factory.mktemp("commands") / "run"
    easel.train(easel.Config(**dict(RUN, iterations="20")), out=out)
    return out


def test_eval_is_easel_evals_json(run_dir):
    ev = easel.eval(run_dir, data="synthetic:64:1x28x28:10")
    assert ev["step"] == 20 and ev["images"] == 16 and len(ev["confusion"]) == 10
    code, out, _ = cli("eval", str(run_dir), "--data", "synthetic:64:1x28x28:10", "--json")
    assert code == 0 and '"accuracy": %r' % ev["accuracy"] in out


def test_predict_numpy_images(run_dir):
    images = np.full((3, 1, 28, 28), 0.5, np.float32)
    p = easel.predict(run_dir, images, top=2)
    assert len(p["logits"]) == 3 and len(p["logits"][0]) == 10 and len(p["top"][0]) == 2


def test_export_onnx(run_dir, tmp_path):
    try:
        path = easel.export(run_dir, format="onnx", out=tmp_path / "lenet.onnx")
    except RuntimeError as e:  # a build without ONNX says so, in easel export's words
        assert "without ONNX" in str(e)
        pytest.skip(str(e))
    assert (tmp_path / "lenet.onnx").stat().st_size > 400000 and path.endswith("lenet.onnx")


def test_model_is_easel_models_json():
    m = easel.model(machine="knl-7250", net="lenet", groups=4)
    assert m["groups"] == 4 and m["seconds_per_iteration"] > 0


def test_refusals_are_the_programs_line(tmp_path):
    with pytest.raises(ValueError) as e:
        easel.eval(tmp_path / "none")
    code, _, err = cli("eval", str(tmp_path / "none"), "--json")
    assert code == 2 and err.strip() == "easel: " + str(e.value)
    with pytest.raises(ValueError, match="--out"):
        easel.export(tmp_path / "none", format="onnx")
