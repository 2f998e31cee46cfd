"""`hdppo diagnose RUN --ablate`: do more workers help? Re-train the run's config for a short budget
learning from k of its N workers' data (k = 1..N; every worker still steps its envs, a layer's
`pool` says whose data it learns from) and compare the final team return of each k.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from hdppo.engine.metrics import read_csv
from hdppo.runfolder import load_run_config, resolve_scenario

FINAL_ROWS = 5          # the final return is the mean of the last logged rows of run.csv


def _spec(run: Path, config: dict[str, Any], k: int, steps: int, out: Path):
    from hdppo.engine.config import train_config_from_dict
    from hdppo.engine.spec import RunSpec
    tc = train_config_from_dict(config["train"])
    tc = dataclasses.replace(tc, steps=steps, progress="off")
    for name in config["layers"]:
        tc.layers[name] = dataclasses.replace(tc.layer(name), pool=k)
    return RunSpec(resolve_scenario(run, config), config["scenario_overrides"], tc, list(config["layers"]),
                   dict(config["frozen"]), out)


def final_return(run: Path) -> float:
    vals = [r["team_return"] for r in read_csv(run, "run") if np.isfinite(r.get("team_return", np.nan))]
    return float(np.mean(vals[-FINAL_ROWS:])) if vals else float("nan")


def ablation_plan(run: str | Path, steps: int = 0) -> tuple[int, int]:
    """(workers, env steps per run) of `hdppo diagnose RUN --ablate`: the run's workers, and `steps`
    or the run's budget capped at 100,000."""
    from hdppo.analysis.diagnose import run_workers
    from hdppo.errors import ConfigError
    config = load_run_config(run)
    steps = steps or min(int(config["train"]["steps"]), 100_000)
    if steps < 1:
        raise ConfigError(f"--ablate-steps {steps} is not a budget", "pass --ablate-steps N with N >= 1")
    return run_workers(run, config), steps


def ablate(run: str | Path, steps: int, workers: int, out: str | Path | None = None) -> dict[str, Any]:
    """Train k = 1..workers pools for `steps` env steps each (finished ones in `out` are reused) and
    write out/ablate.json and out/ablate.png; returns the summary."""
    from hdppo.engine.trainer import Trainer
    run = Path(run)
    config = load_run_config(run)
    out = Path(out) if out else run / "diagnose" / "ablate"
    rows: list[dict[str, Any]] = []
    for k in range(1, workers + 1):
        folder = out / f"pool-{k}"
        state = folder / "state.json"
        if not (state.is_file() and json.loads(state.read_text()).get("finished")):
            Trainer(_spec(run, config, k, steps, folder)).run()
        rows.append({"workers_learnt_from": k, "final_team_return": final_return(folder), "run": str(folder)})
    base = rows[-1]["final_team_return"]
    for r in rows:
        r["change_vs_all"] = r["final_team_return"] - base
    summary = {"run": str(run), "steps": steps, "workers": workers, "rows": rows}
    out.mkdir(parents=True, exist_ok=True)
    (out / "ablate.json").write_text(json.dumps(summary, indent=2))
    _plot(summary, out / "ablate.png")
    return summary


def _plot(summary: dict[str, Any], png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ks = [r["workers_learnt_from"] for r in summary["rows"]]
    ys = [r["final_team_return"] for r in summary["rows"]]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar([str(k) for k in ks], ys, color="#1f77b4")
    ax.set_xlabel(f"workers whose data the layers learn from (of {summary['workers']})")
    ax.set_ylabel("final team return")
    ax.set_title(f"{summary['steps']:,} env steps each")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
