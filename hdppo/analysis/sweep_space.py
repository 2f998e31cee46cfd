"""The search space of `hdppo sweep`: a YAML file mapping each swept key (any `hdppo train
KEY=VALUE` key: a training key, a layer key for every layer or `LAYER.key`, a scenario key) to its
values, checked against the scenario before any trial runs.

    lr: {low: 1.0e-4, high: 1.0e-2, log: true}   # a float range, sampled log-uniformly
    low.ent_coef: {low: 0.0, high: 0.05}         # a float range (a bound with a point, or 1e-4)
    rollout: {low: 16, high: 64, step: 16}        # whole-number bounds: an integer range (step optional)
    epochs: {choices: [4, 8, 16]}                 # one of these values
    hidden: {choices: ["64,64", "128,128"]}       # values as written on the command line

A range has `low` < `high` and optionally `log: true` (low > 0) or `step` (> 0), not both; `choices`
is a non-empty list of distinct numbers, strings or booleans. Every bound and choice must be a value
`hdppo train` accepts for its key.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hdppo.errors import ConfigError, HdppoError

RANGE_FIELDS = {"low", "high", "log", "step"}
SCHEMA = ("write KEY: {low: A, high: B} (optionally log: true or step: S) or KEY: {choices: [A, B, ...]}, "
          "see docs/experiments.md#sweeps")


@dataclass(frozen=True)
class Param:
    """One swept key: a range (`low`..`high`, integers when both bounds are) or `choices`."""

    key: str
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: tuple[Any, ...] | None = None

    @property
    def is_int(self) -> bool:
        return self.choices is None and isinstance(self.low, int) and isinstance(self.high, int)

    def values_to_check(self) -> list[Any]:
        return list(self.choices) if self.choices is not None else [self.low, self.high]

    def describe(self) -> str:
        if self.choices is not None:
            return f"one of {list(self.choices)}"
        kind = "integers" if self.is_int else "log-uniform" if self.log else "uniform"
        return f"{self.low} to {self.high} ({kind}{f', step {self.step}' if self.step else ''})"


def load_space(path: str | Path) -> list[Param]:
    """The space file's parameters in file order; any mistake is one ConfigError naming the file and
    the key (the file's syntax is read as `--config` files are: no key twice, no alias bombs)."""
    from hdppo.overrides import load_yaml
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"space file {p} does not exist", "pass --space FILE.yaml (" + SCHEMA + ")")
    raw = _read_nested(p, load_yaml)
    if not raw:
        raise ConfigError(f"space file {p} names no key to sweep", SCHEMA)
    return [parse_param(key, spec, where=f"space file {p}") for key, spec in raw.items()]


def _read_nested(path: Path, load_yaml: Any) -> dict[str, Any]:
    """The file's top-level keys with their specs: load_yaml flattens nested mappings to dotted
    keys (`lr.low`), which are folded back here into {key: {low: ...}}."""
    out: dict[str, dict[str, Any]] = {}
    for dotted, value in load_yaml(path).items():
        key, _, field = dotted.rpartition(".")
        if not key:
            raise ConfigError(f"space file {path}: {dotted!r} is {value!r}, not a mapping of its values", SCHEMA)
        out.setdefault(key, {})[field] = value
    return out


def parse_param(key: str, spec: dict[str, Any], where: str = "space") -> Param:
    """One key's spec as a Param, checked for its shape and ranges (not yet against the scenario)."""
    def bad(problem: str, fix: str = SCHEMA) -> ConfigError:
        return ConfigError(f"{where}: {key}: {problem}", fix)
    unknown = sorted(set(spec) - RANGE_FIELDS - {"choices"})
    if unknown:
        raise bad(f"unknown field {unknown[0]!r}", f"use low/high (with log or step) or choices; {SCHEMA}")
    if "choices" in spec:
        if set(spec) != {"choices"}:
            raise bad("has both choices and a range", "keep one: choices, or low/high")
        choices = spec["choices"]
        if not isinstance(choices, list) or not choices:
            raise bad(f"choices is {choices!r}, not a non-empty list", "write choices: [A, B, ...]")
        if any(not isinstance(c, (int, float, str, bool)) for c in choices):
            raise bad(f"choices {choices!r} holds a value that is not a number, string or boolean",
                      'write a list value as its command-line text, e.g. "64,64"')
        if len({repr(c) for c in choices}) != len(choices):
            raise bad(f"choices {choices!r} lists a value twice", "list each value once")
        return Param(key, choices=tuple(choices))
    if "low" not in spec or "high" not in spec:
        raise bad(f"needs low and high (got {', '.join(sorted(spec)) or 'nothing'})")
    low, high = _number(spec["low"], bad, "low"), _number(spec["high"], bad, "high")
    log, step = spec.get("log", False), spec.get("step")
    if not isinstance(log, bool):
        raise bad(f"log is {log!r}, not true or false", "write log: true")
    if not low < high:
        raise bad(f"low {low} is not below high {high}", "write low < high (or choices: [VALUE] for one value)")
    if log and low <= 0:
        raise bad(f"a log range needs low > 0 (got {low})", "raise low above 0, or drop log: true")
    if step is not None:
        step = _number(step, bad, "step")
        if log:
            raise bad("has both log and step", "keep one of log: true and step")
        if step <= 0:
            raise bad(f"step {step} is not above 0", "write step: S with S > 0")
        if isinstance(low, int) and isinstance(high, int) and not isinstance(step, int):
            raise bad(f"step {step} of an integer range is not a whole number", "write a whole step, e.g. step: 2")
    return Param(key, low, high, log, step)


def _number(value: Any, bad: Any, name: str) -> float | int:
    """A bound as YAML wrote it: an int stays an int; a float, or text such as 1e-4 (YAML 1.1 reads
    an exponent without a point as text), is a float."""
    if isinstance(value, bool):
        raise bad(f"{name} is {value!r}, not a number", f"write {name}: NUMBER")
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise bad(f"{name} is {value!r}, not a number", f"write {name}: NUMBER") from None
    if not math.isfinite(number):
        raise bad(f"{name} is {value!r}, not a finite number", f"write {name}: NUMBER")
    return number


def check_space(space: list[Param], scenario: str, overrides: dict[str, Any], layers: str = "all",
                where: str = "space") -> None:
    """Each key against the scenario and the sweep's own overrides: every bound and choice resolves
    as `hdppo train KEY=VALUE` would, and no key is fixed on the command line as well."""
    from hdppo.engine.config import NOT_TRAINING
    from hdppo.engine.spec import RunSpec
    for param in space:
        if param.key in overrides:
            raise ConfigError(f"{where}: {param.key} is swept and also given as {param.key}={overrides[param.key]}",
                              f"drop {param.key}= from the command line, or its entry from the space file")
        if param.key.removeprefix("train.") in NOT_TRAINING:
            raise ConfigError(f"{where}: {param.key} is a budget or display setting, not one to sweep",
                              "set the budget with --steps and sweep training settings (lr, epochs, ...)")
        for value in param.values_to_check():
            try:
                RunSpec.from_overrides(scenario, {**overrides, param.key: value}, layers=layers)
            except HdppoError as exc:
                raise ConfigError(f"{where}: {param.key}: {param.key}={value} is refused: {exc.problem}",
                                  exc.fix) from None
