"""Config dataclasses overridden by `key=value` strings or a YAML file.

Defaults live in the dataclasses only; this module parses, type-checks and applies overrides.
Dotted keys reach nested dataclasses and dict fields (`w_int.low=0.5`, `ppo.lr=1e-3`).
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from hdppo.errors import ConfigError


def parse_assignments(items: Iterable[str]) -> dict[str, str]:
    """Split `key=value` strings into a dict, refusing anything without '='."""
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value",
                              "write overrides as key=value, e.g. n_agents=4")
        key, value = item.split("=", 1)
        if not key.strip():
            raise ConfigError(f"override {item!r} has an empty key", "write key=value")
        key = key.strip()
        if key in out:          # the last would win silently, even over a value that is not valid
            raise ConfigError(f"override {key!r} is given twice ({key}={out[key]} and {key}={value.strip()})",
                              f"pass {key}=VALUE once")
        out[key] = value.strip()
    return out


YAML_MAX_BYTES = 1 << 20       # a file of overrides is a few hundred bytes; refuse one over 1 MiB unread
YAML_MAX_ALIAS_NODES = 1_000   # at most this many nodes added by expanding aliases (*name, <<: *name)


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping of overrides; nested mappings become dotted keys.

    A key twice in one mapping is refused, and so is a file whose aliases would expand to more than
    YAML_MAX_ALIAS_NODES nodes beyond those written (a few hundred bytes of nested aliases, a "billion
    laughs", expand to millions of keys): the node graph is measured before anything is built."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {p} does not exist", "pass an existing YAML file to --config")
    size = p.stat().st_size
    if size > YAML_MAX_BYTES:
        raise ConfigError(f"config file {p} is {size:,} bytes, more than the {YAML_MAX_BYTES:,} a file of overrides "
                          "may hold", "pass a YAML file of `key: value` overrides")
    try:
        data = _safe_load_bounded(p.read_text(), p) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {p} is not valid YAML: {exc}", "fix the YAML syntax") from None
    except RecursionError:
        raise ConfigError(f"config file {p} nests too deep to read",
                          "write the overrides as `key: value` lines") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p} holds a {type(data).__name__}, not a mapping",
                          "write the file as `key: value` lines")
    return flatten_mapping(data, where=f"config file {p}")


_YAML_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _OverridesLoader(_YAML_BASE):
    """yaml.safe_load's loader that refuses a key written twice in one mapping (safe_load keeps the last)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue            # keys merged in with `<<:` may be overridden, as YAML says
                if key_node.value in seen:
                    first = seen[key_node.value].start_mark
                    raise ConfigError(f"config file {self.name} sets {key_node.value!r} twice (lines {first.line + 1} "
                                      f"and {key_node.start_mark.line + 1})", f"keep one `{key_node.value}:` line")
                seen[key_node.value] = key_node
        return super().construct_mapping(node, deep=deep)


def _safe_load_bounded(text: str, path: Path) -> Any:
    loader = _OverridesLoader(text)
    loader.name = str(path)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        written, expanded = _node_counts(node, path)
        if expanded - written > YAML_MAX_ALIAS_NODES:
            raise ConfigError(f"config file {path}: its aliases expand {written:,} written YAML nodes to {expanded:,} "
                              f"(more than {YAML_MAX_ALIAS_NODES:,} added)",
                              "write the values out instead of repeating anchors with *name")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _node_counts(root: Any, path: Path) -> tuple[int, int]:
    """(distinct nodes, nodes once every alias is expanded) of a composed YAML node graph, in time
    linear in the distinct nodes; an alias of a node inside itself is refused (it never ends)."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            children = _children(node)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            open_.discard(key)
            continue
        if key in sizes:
            continue
        if key in open_:
            raise ConfigError(f"config file {path} holds an alias inside its own anchor (a recursive value)",
                              "write the values out instead of repeating anchors with *name")
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return len(sizes), sizes[id(root)]


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def flatten_mapping(data: dict[str, Any], prefix: str = "", *, where: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; two spellings of one key (`a: {b: 1}` and `a.b: 2`) are refused."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            items = flatten_mapping(value, full + ".", where=where)
        else:
            items = {full: value}
        for k, v in items.items():
            if k in out:
                raise ConfigError(f"{where or 'the overrides'} set{'s' if where else ''} {k!r} twice "
                                  "(once nested, once dotted)", f"keep one of the two {k!r}")
            out[k] = v
    return out


def apply_overrides(cfg: Any, overrides: dict[str, Any], *, what: str = "config") -> Any:
    """Return a copy of dataclass `cfg` with dotted-key overrides applied and type-checked."""
    cfg = _deep_copy(cfg)
    for key, raw in overrides.items():
        _set_path(cfg, key.split("."), raw, key, what)
    return cfg


def to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-able dict of a config dataclass."""
    return dataclasses.asdict(cfg)


def from_dict(cls: type, data: dict[str, Any], *, what: str = "config") -> Any:
    """Rebuild a config dataclass from `to_dict` output (e.g. a saved run's config.json)."""
    return apply_overrides(cls(), flatten_mapping(data), what=what)


def _deep_copy(cfg: Any) -> Any:
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        kwargs = {f.name: _deep_copy(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
        return dataclasses.replace(cfg, **kwargs) if kwargs else cfg
    if isinstance(cfg, dict):
        return {k: _deep_copy(v) for k, v in cfg.items()}
    if isinstance(cfg, list):
        return [_deep_copy(v) for v in cfg]
    return cfg


def _set_path(obj: Any, parts: list[str], raw: Any, key: str, what: str) -> None:
    head, rest = parts[0], parts[1:]
    if dataclasses.is_dataclass(obj):
        fields = {f.name: f for f in dataclasses.fields(obj)}
        if head not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(f"{what} has no key {key!r}", f"use one of: {known}")
        hint = _field_type(type(obj), head)
        current = getattr(obj, head)
        if rest:
            if isinstance(current, dict):
                _set_dict(current, rest, raw, key, typing.get_args(hint), what)
                return
            _set_path(current, rest, raw, key, what)
            return
        setattr(obj, head, coerce(raw, hint, key))
        return
    raise ConfigError(f"{what} key {key!r} goes below a plain value", "remove the extra '.part'")


def _set_dict(d: dict, parts: list[str], raw: Any, key: str, args: tuple, what: str) -> None:
    if len(parts) != 1:
        raise ConfigError(f"{what} key {key!r} is nested too deep", "use dict.name=value")
    value_type = args[1] if len(args) == 2 else Any
    d[parts[0]] = coerce(raw, value_type, key)


def _field_type(cls: type, name: str) -> Any:
    try:
        return typing.get_type_hints(cls)[name]
    except Exception:  # forward refs a user's module cannot resolve: fall back to the raw annotation
        return {f.name: f.type for f in dataclasses.fields(cls)}[name]


def coerce(raw: Any, hint: Any, key: str) -> Any:
    """Convert `raw` (a CLI string or a YAML value) to the annotated type, or raise ConfigError."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any or hint is None:
        return raw
    if origin in (typing.Union, types.UnionType):
        if raw is None or (isinstance(raw, str) and raw.lower() in ("none", "null")):
            if type(None) in args:
                return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(raw, arg, key)
            except ConfigError as exc:
                errors.append(exc.problem)
        raise ConfigError(f"value {raw!r} for {key!r} fits none of {hint}", "pass a value of one of those types")
    if origin is typing.Literal:
        for option in args:
            if str(option) == str(raw):
                return option
        raise ConfigError(f"value {raw!r} for {key!r} is not one of {list(args)}",
                          f"use one of {', '.join(map(str, args))}")
    if hint is bool:
        if isinstance(raw, bool):
            return raw
        s = str(raw).lower()
        if s in ("1", "true", "yes", "on"):
            return True
        if s in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"value {raw!r} for {key!r} is not a boolean", "use true or false")
    if hint in (int, float):
        if isinstance(raw, bool):
            raise ConfigError(f"value {raw!r} for {key!r} is not a number", f"pass a {hint.__name__}")
        try:
            value = hint(raw) if hint is float else _to_int(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"value {raw!r} for {key!r} is not {'an integer' if hint is int else 'a number'}",
                              f"pass a {hint.__name__}, e.g. {key}=3") from None
        if hint is float and not math.isfinite(value):
            raise ConfigError(f"value {raw!r} for {key!r} is not finite", "pass a finite number")
        return value
    if hint is str:
        return str(raw)
    if origin in (list, tuple):
        items = raw if isinstance(raw, (list, tuple)) else [s for s in str(raw).split(",") if s.strip()]
        item_type = args[0] if args else Any
        values = [coerce(v, item_type, key) for v in items]
        return tuple(values) if origin is tuple else values
    if origin is dict:
        if isinstance(raw, dict):
            return {str(k): coerce(v, args[1] if args else Any, key) for k, v in raw.items()}
        raise ConfigError(f"value {raw!r} for {key!r} is not a mapping", f"set entries as {key}.NAME=value")
    if isinstance(hint, type) and isinstance(raw, hint):
        return raw
    raise ConfigError(f"cannot set {key!r} of type {hint} from {raw!r}", "set a plain field instead")


def _to_int(raw: Any) -> int:
    if isinstance(raw, float):
        if not raw.is_integer():
            raise ValueError(raw)
        return int(raw)
    s = str(raw).replace("_", "")
    try:
        return int(s)
    except ValueError:
        f = float(s)
        if not f.is_integer():
            raise
        return int(f)
