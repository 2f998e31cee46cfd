"""Tests for hdppo.overrides: key=value parsing, typed dotted overrides, YAML files, dict round trips."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from hdppo.errors import ConfigError
from hdppo.overrides import apply_overrides, from_dict, load_yaml, parse_assignments, to_dict


@dataclass
class PPOCfg:
    lr: float = 3e-4
    epochs: int = 4


@dataclass
class Cfg:
    n: int = 3
    x: float = 0.5
    flag: bool = False
    name: str = "a"
    seed: int | None = None
    mode: Literal["gradients", "experience"] = "gradients"
    sizes: tuple[int, ...] = (64, 64)
    w_int: dict[str, float] = field(default_factory=lambda: {"mid": 0.1})
    ppo: PPOCfg = field(default_factory=PPOCfg)


# ---- parse_assignments ---------------------------------------------------------------------------
def test_parse_assignments() -> None:
    got = parse_assignments(["n=4", " ppo.lr = 1e-3 ", "name=a=b", "empty="])
    assert got == {"n": "4", "ppo.lr": "1e-3", "name": "a=b", "empty": ""}
    assert parse_assignments([]) == {}


def test_parse_assignments_missing_equals() -> None:
    with pytest.raises(ConfigError) as info:
        parse_assignments(["n=4", "lr"])
    assert "'lr'" in info.value.problem and "key=value" in info.value.problem
    assert "fix:" in str(info.value)


def test_parse_assignments_empty_key() -> None:
    with pytest.raises(ConfigError, match="empty key") as info:
        parse_assignments([" =3"])
    assert "' =3'" in info.value.problem


# ---- apply_overrides -----------------------------------------------------------------------------
def test_apply_overrides_every_type() -> None:
    raw = parse_assignments(["n=5", "x=1e-2", "flag=true", "name=bob", "seed=7", "mode=experience",
                             "sizes=32,16,8", "w_int.low=0.5", "ppo.lr=1e-3"])
    cfg = apply_overrides(Cfg(), raw)
    assert cfg.n == 5 and type(cfg.n) is int
    assert cfg.x == pytest.approx(0.01) and type(cfg.x) is float
    assert cfg.flag is True
    assert cfg.name == "bob"
    assert cfg.seed == 7
    assert cfg.mode == "experience"
    assert cfg.sizes == (32, 16, 8) and type(cfg.sizes) is tuple
    assert cfg.w_int == {"mid": 0.1, "low": 0.5}
    assert cfg.ppo == PPOCfg(lr=1e-3, epochs=4)


@pytest.mark.parametrize("raw,want", [("false", False), ("0", False), ("no", False), ("off", False),
                                      ("True", True), ("1", True), ("yes", True), (True, True)])
def test_bool_spellings(raw, want) -> None:
    assert apply_overrides(Cfg(), {"flag": raw}).flag is want


def test_optional_and_yaml_typed_values() -> None:
    assert apply_overrides(Cfg(seed=3), {"seed": "none"}).seed is None
    assert apply_overrides(Cfg(seed=3), {"seed": None}).seed is None
    # values from YAML arrive typed already
    cfg = apply_overrides(Cfg(), {"n": 8, "x": 2, "sizes": [1, 2], "w_int": {"high": 1}, "ppo.epochs": 10.0})
    assert cfg.n == 8 and cfg.x == 2.0 and type(cfg.x) is float
    assert cfg.sizes == (1, 2)
    assert cfg.w_int == {"high": 1.0}
    assert cfg.ppo.epochs == 10 and type(cfg.ppo.epochs) is int
    assert apply_overrides(Cfg(), {"n": "1_000"}).n == 1000
    assert apply_overrides(Cfg(), {"n": "1e3"}).n == 1000


def test_unknown_key_lists_known_keys() -> None:
    with pytest.raises(ConfigError) as info:
        apply_overrides(Cfg(), {"lr": "1e-3"}, what="scenario 'demo' config")
    err = info.value
    assert "'lr'" in err.problem and "scenario 'demo' config" in err.problem
    for key in ("flag", "mode", "n", "name", "ppo", "seed", "sizes", "w_int", "x"):
        assert key in err.fix


def test_unknown_nested_key_lists_nested_keys() -> None:
    with pytest.raises(ConfigError) as info:
        apply_overrides(Cfg(), {"ppo.lrr": "1e-3"})
    assert "'ppo.lrr'" in info.value.problem
    assert "epochs" in info.value.fix and "lr" in info.value.fix


def test_key_below_a_plain_value_and_too_deep_dict() -> None:
    with pytest.raises(ConfigError, match=r"'n\.a'"):
        apply_overrides(Cfg(), {"n.a": "1"})
    with pytest.raises(ConfigError, match=r"'w_int\.low\.x'"):
        apply_overrides(Cfg(), {"w_int.low.x": "1"})


@pytest.mark.parametrize("key,raw,phrase,bad", [
    ("n", "abc", "not an integer", "abc"),
    ("n", "2.5", "not an integer", "2.5"),
    ("n", True, "not a number", True),
    ("x", "fast", "not a number", "fast"),
    ("flag", "maybe", "not a boolean", "maybe"),
    ("mode", "sync", "not one of", "sync"),
    ("seed", "abc", "fits none of", "abc"),
    ("sizes", "1,two", "not an integer", "two"),       # names the bad item of the list
    ("w_int", "3", "not a mapping", "3"),
    ("w_int.low", "high", "not a number", "high"),
])
def test_bad_values_name_key_and_value(key, raw, phrase, bad) -> None:
    with pytest.raises(ConfigError) as info:
        apply_overrides(Cfg(), {key: raw})
    err = info.value
    assert phrase in err.problem
    assert repr(key) in err.problem and repr(bad) in err.problem
    assert err.fix


def test_nan_refused_for_floats() -> None:
    for raw in ("nan", "NaN", float("nan")):
        with pytest.raises(ConfigError, match="not finite"):
            apply_overrides(Cfg(), {"x": raw})
    with pytest.raises(ConfigError, match="not finite"):
        apply_overrides(Cfg(), {"w_int.low": "nan"})
    with pytest.raises(ConfigError, match="not finite"):
        apply_overrides(Cfg(), {"ppo.lr": "nan"})


def test_literal_names_its_options() -> None:
    with pytest.raises(ConfigError) as info:
        apply_overrides(Cfg(), {"mode": "sync"})
    assert "gradients" in info.value.fix and "experience" in info.value.fix


def test_apply_overrides_does_not_mutate_original() -> None:
    base = Cfg()
    before = to_dict(base)
    out = apply_overrides(base, {"n": "9", "w_int.low": "0.5", "w_int.mid": "0.7", "ppo.lr": "0.1"})
    assert to_dict(base) == before
    assert base.w_int == {"mid": 0.1} and base.ppo.lr == 3e-4
    assert out.w_int is not base.w_int and out.ppo is not base.ppo
    out.w_int["high"] = 2.0
    assert "high" not in base.w_int
    # a failing override leaves the original untouched too
    with pytest.raises(ConfigError):
        apply_overrides(base, {"w_int.low": "0.5", "n": "abc"})
    assert to_dict(base) == before


# ---- YAML ---------------------------------------------------------------------------------
def test_load_yaml_flattens_nested_mappings(tmp_path: Path) -> None:
    p = tmp_path / "run.yaml"
    p.write_text("n: 6\nflag: true\nppo:\n  lr: 1.0e-3\n  epochs: 2\nw_int:\n  low: 0.25\nsizes: [8, 4]\n")
    flat = load_yaml(p)
    assert flat == {"n": 6, "flag": True, "ppo.lr": 1e-3, "ppo.epochs": 2, "w_int.low": 0.25, "sizes": [8, 4]}
    cfg = apply_overrides(Cfg(), flat)
    got = (cfg.n, cfg.flag, cfg.ppo.lr, cfg.ppo.epochs, cfg.w_int["low"], cfg.sizes)
    assert got == (6, True, 1e-3, 2, 0.25, (8, 4))


def test_load_yaml_string_exponent_and_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "a.yaml"
    p.write_text("ppo:\n  lr: 1e-3\n")   # YAML 1.1 reads this as a string; the override coerces it
    assert apply_overrides(Cfg(), load_yaml(p)).ppo.lr == 1e-3
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_yaml(empty) == {}


def test_load_yaml_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_yaml(p)
    assert str(p) in info.value.problem and "does not exist" in info.value.problem
    assert "--config" in info.value.fix


def test_load_yaml_invalid_yaml(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("n: [1, 2\nflag: true\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(p)
    assert str(p) in info.value.problem and "not valid YAML" in info.value.problem
    assert "fix:" in str(info.value)


def test_load_yaml_not_a_mapping(tmp_path: Path) -> None:
    p = tmp_path / "list.yaml"
    p.write_text("- n\n- 3\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(p)
    assert "holds a list, not a mapping" in info.value.problem
    assert "key: value" in info.value.fix


# ---- to_dict / from_dict ----------------------------------------------------------------------
def test_to_dict_from_dict_round_trip() -> None:
    cfg = apply_overrides(Cfg(), {"n": "7", "seed": "11", "mode": "experience", "sizes": "5,6",
                                  "w_int.low": "0.5", "ppo.lr": "0.01", "flag": "yes", "x": "-1.5"})
    d = to_dict(cfg)
    assert d["ppo"] == {"lr": 0.01, "epochs": 4} and d["w_int"] == {"mid": 0.1, "low": 0.5}
    assert from_dict(Cfg, d) == cfg
    # through JSON, as a saved run's config.json: tuples come back as lists
    back = from_dict(Cfg, json.loads(json.dumps(d)))
    assert back == cfg and back.sizes == (5, 6)
    assert from_dict(Cfg, to_dict(Cfg())) == Cfg()


def test_from_dict_refuses_unknown_keys() -> None:
    with pytest.raises(ConfigError, match=r"'ppo\.momentum'"):
        from_dict(Cfg, {"ppo": {"momentum": 0.9}})


def test_infinity_is_refused() -> None:
    with pytest.raises(ConfigError, match="not finite"):
        apply_overrides(Cfg(), {"x": "inf"})
