"""Per-layer rollout storage in a worker: decision rows [E, S] filled in when transitions close."""
from __future__ import annotations

import numpy as np

from hdppo.engine.learner import Batch
from hdppo.engine.ppo import explained_variance, smdp_gae


class RolloutBuffer:
    """Rows appended at the env steps where the layer decided; each (env, slot) holds at most one open
    transition. `take` returns the closed transitions with SMDP-GAE advantages and keeps open ones."""

    def __init__(self, n_envs: int, n_slots: int) -> None:
        self.E, self.S = n_envs, n_slots
        self.rows: list[dict[str, np.ndarray]] = []
        self.open_row = np.full((n_envs, n_slots), -1, dtype=np.int64)
        self.env_steps = 0

    def add(self, obs: np.ndarray, mask: np.ndarray, actions: np.ndarray, logp: np.ndarray, values: np.ndarray,
            action_mask: np.ndarray | None, critic: np.ndarray | None) -> None:
        row = {"obs": obs.astype(np.float32, copy=True), "valid": mask.copy(), "actions": actions.copy(),
               "logp": logp, "values": values,
               "rewards": np.zeros((self.E, self.S), np.float32), "discounts": np.zeros((self.E, self.S), np.float32),
               "raw_rewards": np.zeros((self.E, self.S), np.float32),
               "closed": np.zeros((self.E, self.S), bool)}
        if action_mask is not None:
            row["action_mask"] = action_mask.copy()
        if critic is not None:
            row["critic_obs"] = critic
        self.open_row[mask] = len(self.rows)
        self.rows.append(row)

    def close(self, closed: np.ndarray, rewards: np.ndarray, discounts: np.ndarray,
              raw_rewards: np.ndarray | None = None) -> None:
        """Fill reward and discount of the transitions that closed at this step (arrays [E, S]);
        `raw_rewards` are the same rewards before normalisation (for statistics; default `rewards`)."""
        raw = rewards if raw_rewards is None else raw_rewards
        closing = closed & (self.open_row >= 0)
        rows = self.open_row[closing]
        if rows.size == 0:
            return
        lo, hi = rows.min(), rows.max()
        if lo == hi:              # the usual case: every closing transition started at the same row
            row = self.rows[lo]
            np.copyto(row["rewards"], rewards, where=closing)
            np.copyto(row["discounts"], discounts, where=closing)
            np.copyto(row["raw_rewards"], raw, where=closing)
            row["closed"] |= closing
        else:
            e, s = np.nonzero(closing)
            for r in np.unique(rows):
                sel = rows == r
                row = self.rows[r]
                row["rewards"][e[sel], s[sel]] = rewards[e[sel], s[sel]]
                row["discounts"][e[sel], s[sel]] = discounts[e[sel], s[sel]]
                row["raw_rewards"][e[sel], s[sel]] = raw[e[sel], s[sel]]
                row["closed"][e[sel], s[sel]] = True
        self.open_row[closing] = -1

    def take(self, lam: float, roles: np.ndarray | None) -> Batch:
        """Closed transitions as a flat Batch; rows with open transitions move to a fresh buffer."""
        if not self.rows:
            return _empty_batch()
        arr = {k: np.stack([r[k] for r in self.rows]) for k in self.rows[0]}
        adv, ret = smdp_gae(arr["rewards"], arr["values"], arr["discounts"], arr["valid"], arr["closed"], lam)
        sel = arr["valid"] & arr["closed"]
        t_idx, e_idx, s_idx = np.nonzero(sel)
        batch = Batch(obs=arr["obs"][sel], actions=arr["actions"][sel], logp=arr["logp"][sel],
                      values=arr["values"][sel], advantages=adv[sel], returns=ret[sel],
                      action_mask=arr["action_mask"][sel] if "action_mask" in arr else None,
                      roles=roles[s_idx] if roles is not None else None,
                      critic_obs=arr["critic_obs"][sel] if "critic_obs" in arr else None)
        batch.stats = {"explained_variance": explained_variance(batch.values, batch.returns) if len(batch) > 1
                       else float("nan"), "transitions": len(batch),
                       "reward_mean": float(arr["rewards"][sel].mean()) if len(batch) else float("nan"),
                       "raw_reward_mean": float(arr["raw_rewards"][sel].mean()) if len(batch) else float("nan")}
        self._carry(arr)
        return batch

    def _carry(self, arr: dict[str, np.ndarray]) -> None:
        """Keep only the rows holding open transitions, re-indexed from 0."""
        keep = sorted(set(self.open_row[self.open_row >= 0].tolist()))
        new_rows = []
        remap = np.full(len(self.rows), -1, dtype=np.int64)
        for j, r in enumerate(keep):
            row = self.rows[r]
            is_open = self.open_row == r
            row = dict(row)
            row["valid"] = is_open
            row["closed"] = np.zeros_like(is_open)
            new_rows.append(row)
            remap[r] = j
        live = self.open_row >= 0
        self.open_row[live] = remap[self.open_row[live]]
        self.rows = new_rows
        self.env_steps = 0


def _empty_batch() -> Batch:
    z = np.zeros((0,), np.float32)
    return Batch(obs=np.zeros((0, 0), np.float32), actions=z, logp=z, values=z, advantages=z, returns=z,
                 stats={"transitions": 0, "explained_variance": float("nan"), "reward_mean": float("nan"),
                        "raw_reward_mean": float("nan")})
