"""Every `hdppo.X` that the docs, the examples or the package's own messages name exists.

A dotted name (`hdppo.Scenario`, `hdppo.team.hierarchy.HierarchyEnv`, `hdppo.analysis.diagnose`) is
resolved by importing its longest module prefix, then taking the rest as attributes.
A module that exists but needs an optional dependency that is not installed (Ray, MAgent2) is
checked from its source instead, so nothing is skipped. Names that are not Python objects at all
are listed in ALLOWED with the reason.
"""
from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# `hdppo.X` where X is a dotted identifier; not part of a longer word, path or file name
NAME = re.compile(r"(?<![\w./-])hdppo(?:\.[A-Za-z_][A-Za-z0-9_]*)+")

# names that look like Python objects but are not (each with the reason)
ALLOWED: dict[str, str] = {}


def _sources() -> list[tuple[Path, str, bool]]:
    """(file, text, is_python_package_code) for everything whose hdppo names must exist."""
    out = [(p, p.read_text(encoding="utf-8"), False) for p in sorted((ROOT / "docs").rglob("*.md"))]
    out.append((ROOT / "README.md", (ROOT / "README.md").read_text(encoding="utf-8"), False))
    out += [(p, p.read_text(encoding="utf-8"), False) for p in sorted((ROOT / "examples").rglob("*.py"))]
    for folder in ("hdppo", "scenarios", "policies"):
        out += [(p, p.read_text(encoding="utf-8"), True) for p in sorted((ROOT / folder).rglob("*.py"))]
    return out


def _strings(source: str) -> list[tuple[int, str]]:
    """Every string literal of a Python file (messages, fix lines, docstrings) with its line."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def named() -> dict[str, list[str]]:
    """Each hdppo name -> where it is named (`file:line`)."""
    found: dict[str, list[str]] = {}
    for path, text, package_code in _sources():
        chunks = _strings(text) if package_code else [(1, text)]
        for first_line, chunk in chunks:
            for m in NAME.finditer(chunk):
                line = first_line + chunk.count("\n", 0, m.start())
                found.setdefault(m.group(0), []).append(f"{path.relative_to(ROOT)}:{line}")
    return found


def _static_has(spec: importlib.machinery.ModuleSpec, attrs: list[str]) -> bool:
    """Whether the module's source defines attrs[0] at top level (and attrs[1] in that class, ...)."""
    if spec.origin is None or not spec.origin.endswith(".py"):
        return False
    body = ast.parse(Path(spec.origin).read_text(encoding="utf-8")).body
    for attr in attrs:
        names: dict[str, list[ast.stmt]] = {}
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names[node.name] = node.body if isinstance(node, ast.ClassDef) else []
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(target, ast.Name):
                        names[target.id] = []
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    names[(alias.asname or alias.name).split(".")[0]] = []
        if attr not in names:
            return False
        body = names[attr]
    return True


def resolve(name: str) -> str | None:
    """None when `name` exists, else why it does not.

    From `hdppo`, each further part is a submodule when one exists (so the longest module prefix is
    imported), else an attribute of what came before (`hdppo.Scenario` loads lazily).
    """
    parts = name.split(".")
    obj = importlib.import_module(parts[0])
    for j in range(1, len(parts)):
        prefix, attr = ".".join(parts[:j]), parts[j]
        child = f"{prefix}.{attr}"
        spec = importlib.util.find_spec(child) if hasattr(obj, "__path__") else None   # parent already imported
        if spec is not None:
            try:
                obj = importlib.import_module(child)
            except ModuleNotFoundError as exc:
                # the module exists but needs a package that is not installed (ray, magent2): read its source
                if _static_has(spec, parts[j + 1:]):
                    return None
                return f"{'.'.join(parts[j + 1:])} is not defined in {child} (read from its source: {exc})"
            except Exception as exc:
                return f"importing {child} raised {type(exc).__name__}: {exc}"
            continue
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            return f"{prefix} has no attribute {attr!r}"
        except Exception as exc:
            return f"{child} raised {type(exc).__name__}: {exc}"
    return None


def test_the_regex_finds_names_and_not_paths():
    text = "`hdppo.Scenario(...)`, hdppo.team.hierarchy.HierarchyEnv; runs/hdppo.yaml; hdppo/team/x.py; import hdppo."
    assert NAME.findall(text) == ["hdppo.Scenario", "hdppo.team.hierarchy.HierarchyEnv"]


def test_resolve_tells_a_missing_name_from_a_present_one():
    assert resolve("hdppo.Scenario") is None
    assert resolve("hdppo.team.hierarchy.HierarchyEnv") is None
    assert resolve("hdppo.analysis.diagnose") is None
    assert resolve("hdppo.netcost") is not None               # a path from before the layout (CHANGELOG.md)
    assert resolve("hdppo.team.hierarchy.NoSuchThing") is not None
    assert resolve("hdppo.no_such_module") is not None
    assert resolve("hdppo.Scenario.no_such_method") is not None
    # a module behind an optional dependency is read from its source when the dependency is missing
    assert resolve("hdppo.integrations.rllib.policy_mapping_fn") is None
    assert resolve("hdppo.integrations.rllib.no_such_function") is not None


def test_every_hdppo_name_in_docs_examples_and_messages_exists():
    found = named()
    assert len(found) > 20, sorted(found)          # the scan sees the docs at all
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"ALLOWED lists names nothing mentions any more: {stale}"
    missing = []
    for name, where in sorted(found.items()):
        if name in ALLOWED:
            continue
        why = resolve(name)
        if why is not None:
            where = list(dict.fromkeys(where))
            shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
            missing.append(f"{name} ({why}) named in {shown}")
    assert not missing, f"{len(missing)} names do not exist:\n" + "\n".join(missing)
