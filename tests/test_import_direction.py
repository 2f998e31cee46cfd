"""The package's plan, enforced: simulators and the environment side never import the engine, the
engine takes its contracts from engine/messages.py, workers never import Ray, nothing below the
commands imports them, and imports have no cycles (lazy and TYPE_CHECKING ones counted)."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PKG = Path(__file__).resolve().parents[1] / "hdppo"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, module_level: bool = False) -> list[tuple[str, list[str]]]:
    """(module, names) of every hdppo import in a file; module_level: only those run at import time
    or seen by type checkers (not the ones inside functions)."""
    tree = ast.parse(path.read_text())
    nodes = ast.iter_child_nodes(tree) if module_level else ast.walk(tree)
    found = []
    for node in _flatten(nodes) if module_level else nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
    return [(m, n) for m, n in found if m == "hdppo" or m.startswith("hdppo.")]


def _flatten(nodes):
    """Module-level statements, descending into `if` blocks (TYPE_CHECKING) and try blocks."""
    for node in nodes:
        if isinstance(node, (ast.If, ast.Try)):
            yield from _flatten(node.body + getattr(node, "orelse", []) + getattr(node, "handlers", []))
        elif isinstance(node, ast.ExceptHandler):
            yield from _flatten(node.body)
        else:
            yield node


def files(sub: str) -> list[Path]:
    return sorted((PKG / sub).rglob("*.py"))


ABOVE_THE_ENV = ("hdppo.engine", "hdppo.runtime", "hdppo.integrations", "hdppo.analysis", "hdppo.cli")


def test_the_environment_side_never_imports_the_engine_or_the_commands() -> None:
    bad = [f"{module_name(p)} imports {m}" for sub in ("team", "sims") for p in files(sub) for m, _ in imports(p)
           if m.startswith(ABOVE_THE_ENV)]
    assert not bad, "hdppo.team and hdppo.sims must stand alone:\n" + "\n".join(bad)


def test_simulator_adapters_import_only_the_simulator_side() -> None:
    """A batch adapter (base, pettingzoo, gymnasium, parallel_view, scene) needs nothing of the
    hierarchy; only an adapter that makes whole scenarios (vmas_scenario, jaxmarl_scenario, SMAX's hierarchy) builds on
    hdppo.team."""
    makes_scenarios = {"hdppo.sims.vmas", "hdppo.sims.jaxmarl", "hdppo.sims.smax_hier"}
    bad = [f"{module_name(p)} imports {m}" for p in files("sims") if module_name(p) not in makes_scenarios
           for m, _ in imports(p) if not (m.startswith("hdppo.sims") or m == "hdppo.errors")]
    assert not bad, "\n".join(bad)


def test_the_library_never_imports_the_commands() -> None:
    """hdppo.cli and hdppo.analysis (diagnose, ablate, bench, plot) sit on top: nothing below imports them."""
    below = ("team", "sims", "engine", "runtime", "integrations")
    bad = [f"{module_name(p)} imports {m}" for sub in below for p in files(sub) for m, _ in imports(p)
           if m.startswith(("hdppo.cli", "hdppo.analysis"))]
    assert not bad, "\n".join(bad)


def test_the_engine_uses_the_runtime_only_to_evaluate_during_training() -> None:
    """engine/evaluation.py plays the committed team through hdppo.runtime.evaluate (the code `hdppo
    eval` runs); no other engine module imports the runtime, and the runtime never imports the
    trainer, the loop or that driver."""
    bad = [f"{module_name(p)} imports {m}" for p in files("engine") if module_name(p) != "hdppo.engine.evaluation"
           for m, _ in imports(p) if m.startswith("hdppo.runtime")]
    driver = ("hdppo.engine.trainer", "hdppo.engine.loop", "hdppo.engine.evaluation", "hdppo.engine.entry")
    bad += [f"{module_name(p)} imports {m}" for p in files("runtime") for m, _ in imports(p) if m.startswith(driver)]
    assert not bad, "\n".join(bad)


def test_engine_contracts_come_from_messages_only() -> None:
    contracts = set(__import__("hdppo.engine.messages", fromlist=["__all__"]).__all__)
    bad = []
    for p in files("engine"):
        if p.name == "messages.py":
            continue
        for m, names in imports(p):
            if m in ("hdppo.team.hierarchy", "hdppo.engine.worker", "hdppo.team.interfaces"):
                taken = sorted(set(names) & contracts) or (names if m == "hdppo.team.interfaces" else [])
                bad += [f"{module_name(p)} takes {n} from {m}" for n in taken]
    assert not bad, "import contracts from hdppo.engine.messages:\n" + "\n".join(bad)


def test_workers_and_the_engine_core_never_import_ray() -> None:
    """Only the Ray backend (engine/backends/ray*.py) and the RLlib integration import ray."""
    bad = []
    for p in files("engine"):
        if p.name.startswith("ray"):
            continue
        tree = ast.parse(p.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            bad += [f"{module_name(p)} imports {n}" for n in names if n == "ray" or n.startswith("ray.")]
    assert not bad, "\n".join(bad)


def import_graph(module_level: bool) -> nx.DiGraph:
    """Module -> module for every hdppo import (`from hdppo.x import y` counts as hdppo.x.y when y
    is a module); module_level: only the imports that run at import time or that type checkers see."""
    graph = nx.DiGraph()
    known = {module_name(p) for p in PKG.rglob("*.py")}
    for p in PKG.rglob("*.py"):
        src = module_name(p)
        for m, names in imports(p, module_level=module_level):
            targets = [f"{m}.{n}" for n in names if f"{m}.{n}" in known] or [m]
            for target in targets:
                if target in known and target != src and not src.startswith(target + "."):
                    graph.add_edge(src, target)
    return graph


def test_imports_have_no_cycles_lazy_ones_included() -> None:
    cycles = list(nx.simple_cycles(import_graph(module_level=False)))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c + [c[0]]) for c in cycles[:5])


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The rules above read real import statements, lazy ones included."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from hdppo.engine.worker import Worker\n")
    assert imports(probe) == [("hdppo.engine.worker", ["Worker"])]
    assert imports(probe, module_level=True) == []
