"""The space file of `hdppo sweep`: its schema read into parameters, and every mistake refused in one
line naming the file, the key and the fix, before any trial runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from hdppo.analysis.sweep import distributions
from hdppo.analysis.sweep_space import Param, check_space, load_space
from hdppo.errors import ConfigError

SPACE = """\
lr: {low: 1e-4, high: 1e-2, log: true}
epochs: {choices: [4, 8, 16]}
low.ent_coef: {low: 0, high: 0.05}
rollout: {low: 16, high: 64, step: 16}
hidden: {choices: ["64,64", "32"]}
"""


def space_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return path


def test_the_documented_schema(tmp_path) -> None:
    space = load_space(space_file(tmp_path, SPACE))
    assert space == [Param("lr", 1e-4, 1e-2, log=True), Param("epochs", choices=(4, 8, 16)),
                     Param("low.ent_coef", 0, 0.05), Param("rollout", 16, 64, step=16),
                     Param("hidden", choices=("64,64", "32"))]
    assert [p.is_int for p in space] == [False, False, False, True, False]
    check_space(space, "grid", {})
    dists = distributions(space)
    assert dists["lr"].log and dists["rollout"].step == 16 and dists["epochs"].choices == (4, 8, 16)
    assert type(dists["low.ent_coef"]).__name__ == "FloatDistribution"


def test_nested_keys_read_as_dotted_ones(tmp_path) -> None:
    space = load_space(space_file(tmp_path, "low:\n  ent_coef: {low: 0.0, high: 0.1}\n"))
    assert space == [Param("low.ent_coef", 0.0, 0.1)]


@pytest.mark.parametrize("text, says", [
    ("lr: {lo: 1, high: 2}\n", "lr: unknown field 'lo'"),
    ("lr: 0.001\n", "'lr' is 0.001, not a mapping"),
    ("lr: {low: 0.1, high: 0.01}\n", "lr: low 0.1 is not below high 0.01"),
    ("lr: {low: 0, high: 0.1, log: true}\n", "lr: a log range needs low > 0"),
    ("lr: {low: 0.1, high: 1.0, log: true, step: 0.1}\n", "lr: has both log and step"),
    ("rollout: {low: 16, high: 64, step: 0.5}\n", "step 0.5 of an integer range"),
    ("lr: {low: x, high: 1}\n", "lr: low is 'x', not a number"),
    ("epochs: {choices: []}\n", "epochs: choices is [], not a non-empty list"),
    ("epochs: {choices: [4, 4]}\n", "lists a value twice"),
    ("epochs: {choices: [4], low: 1, high: 2}\n", "has both choices and a range"),
    ("{}\n", "names no key to sweep"),
])
def test_schema_mistakes_are_one_line(tmp_path, text: str, says: str) -> None:
    path = space_file(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_space(path)
    assert says in err.value.problem and str(path) in err.value.problem and err.value.fix


@pytest.mark.parametrize("text, overrides, says, fix", [
    ("lrr: {low: 0.1, high: 0.2}\n", {}, "lrr: lrr=0.1 is refused: unknown setting 'lrr'", "use a training key"),
    ("epochs: {low: 0, high: 4}\n", {}, "epochs=0 is refused", "epochs >= 1"),
    ("nosuch.lr: {low: 0.1, high: 0.2}\n", {}, "nosuch.lr=0.1 is refused", "use a training key"),
    ("lr: {low: 0.001, high: 0.01}\n", {"lr": "0.1"}, "lr is swept and also given as lr=0.1", "drop lr="),
    ("steps: {low: 100, high: 200}\n", {}, "steps is a budget or display setting", "--steps"),
])
def test_keys_are_checked_against_the_scenario(tmp_path, text, overrides, says, fix) -> None:
    with pytest.raises(ConfigError) as err:
        check_space(load_space(space_file(tmp_path, text)), "grid", overrides, where="space file s.yaml")
    assert err.value.problem.startswith("space file s.yaml: ") and says in err.value.problem
    assert fix in err.value.fix
