"""easel.Config: set by name as easel train's flags, refusing as easel train does."""
import pytest

import easel
from conftest import cli


@pytest.mark.parametrize("name,value", [("lrr", 0.1), ("lr", "abc"), ("groups", 0),
                                        ("algo", "sgdd"), ("tau", -1)])
def test_refusal_is_easel_trains_line(tmp_path, name, value):
    # A value is refused when it is set, a rule between settings (an unknown algorithm among
    # them) by validate() and train(): easel train checks in that order too.
    with pytest.raises(ValueError) as e:
        easel.Config(**{name: value}).validate()
    code, _, err = cli("train", "--" + name, str(value), "--out", str(tmp_path / "x"))
    assert code == 2
    assert err.strip().splitlines()[-1] == "easel: " + str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError) as again:
        cfg = easel.Config()
        cfg[name] = value
        easel.train(cfg)
    assert str(again.value) == str(e.value)


def test_values_read_back_as_flags_take_them():
    cfg = easel.Config(net="lenet", groups=2, lr=0.01, eval_every=5, checkpoint=False)
    cfg["iterations"] = 100
    assert (cfg["groups"], cfg["lr"], cfg["eval-every"], cfg["eval_every"]) == ("2", "0.01", "5", "5")
    assert cfg["iterations"] == "100" and cfg["checkpoint"] == "false"
    cfg["no-prefetch"] = True
    assert cfg["prefetch"] == "false"
    assert "lr" in easel.Config.names() and cfg.to_dict()["net"] == "lenet"
    # repr names what differs from the defaults, as keywords that make the same Config again.
    again = eval(repr(cfg), {"easel": easel})
    assert again.to_dict() == cfg.to_dict() and "eval_every='5'" in repr(cfg)
    assert repr(easel.Config()) == "easel.Config()"
    with pytest.raises(ValueError):
        cfg["lr"] = [0.1]  # a list is no flag's value


def test_validate_checks_the_rules_between_settings():
    cfg = easel.Config(algo="sync-easgd", groups=2)
    cfg.validate()
