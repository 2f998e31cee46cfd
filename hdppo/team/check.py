"""`hdppo check`: PettingZoo API tests plus hdppo's hierarchy conformance over random episodes."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hdppo.errors import HdppoError
from hdppo.team.attention import keep_mask
from hdppo.team.controllers import uniform_policy
from hdppo.team.hierarchy import Decision, HierarchyEnv, StepResult
from hdppo.team.scenario import load_scenario


@dataclass
class CheckLine:
    name: str
    ok: bool
    detail: str = ""
    trace: str = ""             # the traceback of a hook's exception (`hdppo check --debug` prints it)


@dataclass
class CheckReport:
    scenario: str
    lines: list[CheckLine] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(line.ok for line in self.lines) and bool(self.lines)

    def add(self, name: str, ok: bool, detail: str = "", trace: str = "") -> bool:
        self.lines.append(CheckLine(name, ok, detail, trace))
        return ok

    def add_hook_error(self, name: str, exc: Exception, prefix: str = "") -> None:
        """A FAIL line for an exception raised inside a scenario hook, at the hook's file and line,
        with the traceback kept for `--debug`."""
        import traceback
        frame = user_frame(exc)
        where = f" at line {frame.lineno} of {frame.filename}" if frame is not None else ""
        fix = "; fix the scenario hook (run with --debug for the traceback)" if frame is not None else ""
        self.add(name, False, f"{prefix}{type(exc).__name__}: {exc}".strip() + where + fix,
                 "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))


def user_frame(exc: BaseException) -> Any:
    """The innermost frame of an exception's traceback in the user's own code: not hdppo itself and
    not an installed library (judged by location, so a project in a folder named hdppo counts)."""
    import site
    import sysconfig
    import traceback
    skip = [str(Path(__file__).resolve().parents[1]) + os.sep]
    skip += [str(Path(p).resolve()) + os.sep for p in {*site.getsitepackages(), sysconfig.get_paths()["stdlib"]}]
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not str(Path(f.filename).resolve()).startswith(tuple(skip))]
    return frames[-1] if frames else None


def run_check(target: str, overrides: dict[str, Any] | None = None, episodes: int = 4, n_envs: int = 2,
              seed: int = 0, api_cycles: int = 200) -> CheckReport:
    """Run every check on scenario `target` (a name or a path); never raises for scenario faults."""
    report = CheckReport(target)
    try:
        scenario = load_scenario(target)
        report.scenario = scenario.name
        cfg = scenario.make_config(overrides)
        specs = scenario.build_layers(cfg)
    except HdppoError as exc:
        report.add("scenario loads", False, exc.message())
        return report
    report.add("scenario loads", True, f"{scenario.name}: {len(specs)} layers ({', '.join(s.name for s in specs)})")
    if not _api_test(report, "env passes PettingZoo parallel_api_test",
                     lambda: scenario.env(cfg), api_cycles):
        return report
    # conformance runs with intrinsic terms off, env weights 1 and every node on its own units' reward,
    # so rewards must be conserved
    names = [s.name for s in specs]
    plain = dataclasses.replace(cfg, w_int={n: 0.0 for n in names}, w_ext={n: 1.0 for n in names},
                                shared_reward={n: False for n in names})
    try:
        hier = HierarchyEnv(scenario, plain, n_envs=n_envs, seed=seed)
    except HdppoError as exc:
        report.add("graph valid", False, exc.message())
        return report
    except Exception as exc:  # a hook called while building (positions, graph, batched_env) raised
        report.add_hook_error("graph valid", exc)
        return report
    report.add("graph valid", True, _graph_summary(hier))
    try:
        _conformance(report, hier, episodes, seed)
    except HdppoError as exc:
        report.add("hierarchy runs", False, exc.message())
        return report
    except Exception as exc:  # a scenario hook (goal_features, intrinsic, observe, ...) raised
        report.add_hook_error("hierarchy runs", exc)
        return report
    finally:
        hier.close()
    from hdppo.team.layer_view import LayerView
    for name in names:
        _api_test(report, f"layer view {name!r} passes parallel_api_test",
                  functools.partial(LayerView, scenario, name, cfg, seed=seed), max(api_cycles // 4, 20))
    return report


def _api_test(report: CheckReport, name: str, make: Callable[[], Any], cycles: int) -> bool:
    from pettingzoo.test import parallel_api_test
    try:
        env = make()
    except Exception as exc:
        report.add_hook_error(name, exc, prefix="building the env raised ")
        return False
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            parallel_api_test(env, num_cycles=cycles)
    except Exception as exc:  # the PettingZoo test asserts, or a scenario hook raised inside the env
        report.add_hook_error(name, exc)
        return False
    finally:
        with contextlib.suppress(Exception):
            env.close()
    return report.add(name, True)


def _graph_summary(hier: HierarchyEnv) -> str:
    parts = [f"{inf.name}: {len(inf.nodes)} nodes / {inf.n_slots} slots, every {inf.interval}" for inf in hier.info]
    return "; ".join(parts)


class _Recorder:
    """Watches decisions and closes to check the hierarchy semantics in docs/architecture.md."""

    def __init__(self, hier: HierarchyEnv, seed: int) -> None:
        self.hier = hier
        self.policies = [uniform_policy(inf, seed + 101 * inf.index) for inf in hier.info]
        self.problems: dict[str, list[str]] = {k: [] for k in
                                               ("spaces", "intervals", "dead", "rewards", "transitions", "discounts",
                                                "attention")}
        self.kept = {i: [0, 0] for i, spec in enumerate(hier.specs) if spec.attend is not None}
        self.open = [np.zeros((hier.n_envs, inf.n_slots), dtype=bool) for inf in hier.info]
        self.decisions = [0] * len(hier.info)
        self.deaths = 0

    def note(self, key: str, msg: str) -> None:
        if len(self.problems[key]) < 3:
            self.problems[key].append(msg)

    def act(self, d: Decision) -> np.ndarray:
        hier, info = self.hier, self.hier.info[d.layer]
        obs = d.obs[d.mask]
        self.decisions[d.layer] += int(d.mask.sum())
        if obs.size:
            space = info.obs_space
            bad = ~np.isfinite(obs) | (obs < space.low - 1e-5) | (obs > space.high + 1e-5)
            if bad.any():
                row, col = np.argwhere(bad)[0]
                self.note("spaces", f"layer {info.name!r}: feature {col} = {obs[row, col]} outside "
                                    f"[{space.low[col]}, {space.high[col]}]")
            if obs.shape[1] != info.obs_dim:
                self.note("spaces", f"layer {info.name!r}: obs width {obs.shape[1]} != {info.obs_dim}")
        assert d.t is not None                         # HierarchyEnv stamps each decision with its copies' steps
        late = d.mask & ((d.t % info.interval) != 0)[:, None]
        if late.any():
            self.note("intervals",
                      f"layer {info.name!r} decided at t={d.t[np.argwhere(late)[0][0]]}, interval {info.interval}")
        dead = d.mask & ~hier.slot_alive(d.layer)
        if d.layer == len(hier.info) - 1:
            dead |= d.mask & ~hier.env.alive
        if dead.any():
            e, s = np.argwhere(dead)[0]
            self.note("dead", f"layer {info.name!r} slot {info.slot_names[s]!r} decided while dead (copy {e})")
        self.open[d.layer] |= d.mask
        if d.layer in self.kept:
            self.attention(d)
        return self.policies[d.layer](d)

    def attention(self, d: Decision) -> None:
        """An attending layer's deciding nodes observe their features where attend keeps them, else 0."""
        hier, i = self.hier, d.layer
        spec, info = hier.specs[i], hier.info[i]
        width = int(info.feature_space.shape[0])
        keep = keep_mask(spec, hier.context(i), width, hier.scenario.name)              # [E, N, D]
        E, N = keep.shape[:2]
        own = d.obs.reshape(E, N, -1, d.obs.shape[2])[:, :, 0, :width]         # per_child: the parent's part
        deciding = np.asarray(d.mask.reshape(E, N, -1).any(axis=2))
        wrong = deciding[..., None] & np.where(keep, own != hier.features(i), own != 0)
        if wrong.any():
            e, n, f = np.argwhere(wrong)[0]
            self.note("attention", f"layer {info.name!r} node {info.nodes[n]!r} observes feature {f} = "
                                   f"{own[e, n, f]}, attend {'keeps' if keep[e, n, f] else 'drops'} it")
        kept, ent = keep[deciding], spec.entities
        flags = kept if ent is None else kept[:, ent.offset:ent.end:ent.size]        # one flag per entity
        self.kept[i][0] += int(flags.sum())
        self.kept[i][1] += len(kept)

    def after(self, result: StepResult, prev_alive: np.ndarray) -> None:
        hier = self.hier
        self.deaths += int((prev_alive & ~hier.env.alive & ~result.done[:, None]).sum())
        for i, step in enumerate(result.layers):
            info = hier.info[i]
            stray = step.closed & ~self.open[i]
            if stray.any():
                self.note("transitions", f"layer {info.name!r} closed a transition that was never opened")
            self.open[i] &= ~step.closed
            if result.done.any() and self.open[i][result.done].any():
                self.note("transitions", f"layer {info.name!r} left a transition open at the end of an episode")
                self.open[i][result.done] = False
            cont = step.closed & ~step.terminal
            if cont.any():
                k = np.round(np.log(np.clip(step.discount[cont], 1e-30, None)) / np.log(hier.gamma)).astype(int)
                exact = np.isclose(step.discount[cont], hier.gamma ** k, rtol=1e-5)
                if not (exact.all() and (k >= 1).all() and (k <= info.interval).all()):
                    self.note("discounts", f"layer {info.name!r}: discount {step.discount[cont][0]} is not gamma^k "
                                           f"with 1 <= k <= {info.interval}")
            if (step.discount[step.terminal] != 0).any():
                self.note("discounts", f"layer {info.name!r}: a terminal transition has a non-zero discount")
        for ep in result.episodes:
            units = ep["unit_env_returns"]
            for name, members in ep["members"].items():
                got = ep["node_returns"][name]
                want = np.array([units[m].sum() for m in members])
                if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
                    j = int(np.argmax(np.abs(got - want)))
                    node = hier.info[[i.name for i in hier.info].index(name)].nodes[j]
                    self.note("rewards", f"layer {name!r} node {node!r}:"
                                         f" episode reward {got[j]:.6g} != its units' env rewards {want[j]:.6g}")


def _conformance(report: CheckReport, hier: HierarchyEnv, episodes: int, seed: int) -> None:
    hier.detailed_stats = True
    rec = _Recorder(hier, seed)
    finished, steps = 0, 0
    max_steps = 20000
    while finished < episodes and steps < max_steps:
        prev_alive = hier.env.alive.copy()
        result = hier.step(rec.act)
        rec.after(result, prev_alive)
        finished += len(result.episodes)
        steps += 1
    report.add(f"{episodes} random episodes finish", finished >= episodes,
               f"{finished} episodes in {steps} steps x {hier.n_envs} copies, {rec.deaths} unit deaths")
    p = rec.problems
    spaces_detail = ", ".join(f"{inf.name} {inf.obs_dim}-d" for inf in hier.info)
    report.add("observations inside their spaces", not p["spaces"], "; ".join(p["spaces"]) or spaces_detail)
    report.add("intervals honoured", not p["intervals"],
               "; ".join(p["intervals"]) or ", ".join(f"{inf.name} every {inf.interval}" for inf in hier.info))
    report.add("dead units never act", not p["dead"], "; ".join(p["dead"]) or f"{rec.deaths} deaths seen")
    report.add("semi-MDP transitions open and close once", not p["transitions"] and not p["discounts"],
               "; ".join(p["transitions"] + p["discounts"]) or "discounts are gamma^k, 0 when terminal")
    if rec.kept:
        report.add("observations keep what attend keeps", not p["attention"],
                   "; ".join(p["attention"]) or _kept_summary(hier, rec.kept))
    report.add("rewards conserved (intrinsic off)", not p["rewards"] and finished > 0,
               "; ".join(p["rewards"]) or "each node's episode reward = sum of its units' env rewards")


def _kept_summary(hier: HierarchyEnv, kept: dict[int, list[int]]) -> str:
    """Per attending layer, how many entities (or features) a deciding node kept on average."""
    parts = []
    for i, (n_kept, n) in kept.items():
        spec, width = hier.specs[i], int(hier.info[i].feature_space.shape[0])
        of = f"{spec.entities.count} entities" if spec.entities is not None else f"{width} features"
        parts.append(f"{spec.name} keeps {n_kept / max(n, 1):.2f} of {of}, dropped ones read 0")
    return "; ".join(parts)


def print_report(report: CheckReport, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table
    console = console or Console()
    table = Table(title=f"hdppo check {report.scenario}", show_lines=False)
    table.add_column("", width=4)
    table.add_column("check")
    table.add_column("detail", overflow="fold")
    for line in report.lines:
        mark = "[green]PASS[/]" if line.ok else "[red]FAIL[/]"
        table.add_row(mark, line.name, line.detail)
    console.print(table)
    console.print("[green]all checks passed[/]" if report.ok else "[red]some checks failed[/]")
