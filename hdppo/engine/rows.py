"""The metric rows a run writes, built in one place from plain data (episodes, update statistics,
worker results): `run` rows, one row per layer update, one per worker of a layer."""
from __future__ import annotations

import numpy as np

from hdppo.engine.diagnostics import action_divergence, state_divergence
from hdppo.engine.messages import CollectResult


def episode_mean(episodes: list[dict], key: str) -> float | None:
    """Mean of `key` over the episodes that have it (None when none does)."""
    vals = [e[key] for e in episodes if key in e]
    return float(np.mean(vals)) if vals else None


def run_row(env_steps: int, sps: float, cpu_percent: float, episodes: list[dict],
            results: list[CollectResult], goal_success: dict[str, float]) -> dict[str, float]:
    """The `run` row: throughput, every numeric episode scalar averaged over the window, each worker's
    env steps/s in this collect, and each layer's pooled goal success."""
    row: dict[str, float] = {"env_steps": env_steps, "sps": sps, "cpu_percent": cpu_percent,
                             "episodes": len(episodes)}
    if episodes:
        for key in episodes[-1]:
            vals = [e[key] for e in episodes if isinstance(e.get(key), (int, float))]
            if vals and key != "env":
                row[key] = float(np.mean(vals))
    for r in results:
        row[f"worker_{r.worker}_sps"] = r.env_steps / max(r.seconds, 1e-9)
    for name, rate in goal_success.items():
        row[f"goal_success/{name}"] = rate
    return row


def layer_row(version: int, updates: int, dropped: int, staleness: dict[int, int], updates_rows: list[dict],
              results: list[CollectResult], layer: str, episodes: list[dict],
              goal_success: float | None) -> dict[str, float]:
    """One layer's row after an update: server counters, the mean of every number the updates report
    (the loss terms by their names, grad_norm, lr, epochs, ...), staleness, the value fit and
    divergence over each worker's latest batch, the layer's return and goal success."""
    values: dict[str, float] = {"version": version, "optimizer_steps": updates, "dropped_gradients": dropped}
    for key in dict.fromkeys(k for r in updates_rows for k, v in r.items() if isinstance(v, (int, float))):
        values[key] = float(np.mean([r[key] for r in updates_rows if key in r]))
    if staleness:
        total = sum(staleness.values())
        values["staleness_mean"] = sum(k * v for k, v in staleness.items()) / total
        values["staleness_max"] = float(max(staleness))
        for k, v in sorted(staleness.items()):
            values[f"staleness_{k}"] = v
    stats = [r.layer_stats[layer] for r in results if r.layer_stats.get(layer)]
    if stats:
        values["explained_variance"] = float(np.nanmean([s["explained_variance"] for s in stats]))
        values["transitions"] = float(sum(s["transitions"] for s in stats))
        with_obs = [s for s in stats if "obs_mean" in s]
        values["state_divergence"] = state_divergence([s["obs_mean"] for s in with_obs],
                                                      [s["obs_std"] for s in with_obs])
        values["action_divergence"] = action_divergence([s.get("action_hist") for s in with_obs])
    ret = episode_mean(episodes, f"return/{layer}")
    if ret is not None:
        values["return"] = ret
    if goal_success is not None:
        values["goal_success"] = goal_success
    return values


def worker_rows(layer: str, updates_rows: list[dict], results: list[CollectResult]) -> dict[int, dict[str, float]]:
    """Per worker of a layer: its env steps/s, gradient cosine to the aggregate, value fit."""
    cosines: dict[int, list[float]] = {}
    for row in updates_rows:
        for w, c in (row.get("per_worker_cosine") or {}).items():
            cosines.setdefault(w, []).append(c)
    out = {}
    for r in results:
        row = {"sps": r.env_steps / max(r.seconds, 1e-9)}
        if r.worker in cosines:
            row["grad_cosine"] = float(np.nanmean(cosines[r.worker]))
        st = r.layer_stats.get(layer)
        if st:
            row["transitions"] = st["transitions"]
            row["explained_variance"] = st["explained_variance"]
        out[r.worker] = row
    return out
