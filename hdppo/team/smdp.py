"""Semi-MDP transition bookkeeping of one layer's decision slots, over [E, S] arrays.

A slot's transition opens when it decides, accrues `sum_k gamma^k r_k` over the env steps until it
closes, and closes at its next decision boundary (discount `gamma^k`), or earlier when its episode
or node ends: terminal (discount 0) unless a time limit ended it (truncated: the trainer bootstraps
from the final observation). The rules in words, for one slot:

    decide:  open = True;  R = 0;  d = 1
    step:    if open: R += d * r;  d *= gamma
    close:   emit (R, terminal ? 0 : d, terminal, truncated);  open = False
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Closed:
    """The transitions that closed at one env step, arrays [E, S]."""

    closed: np.ndarray
    reward: np.ndarray         # float32: the accrued discounted reward
    discount: np.ndarray       # float32: gamma^k for a continuing or truncated slot, 0 when terminal
    terminal: np.ndarray
    truncated: np.ndarray


class Transitions:
    """One layer's open transitions: which slots are open, their accrued reward and discount."""

    def __init__(self, n_envs: int, n_slots: int, gamma: float) -> None:
        self.gamma = float(gamma)
        self.open = np.zeros((n_envs, n_slots), dtype=bool)
        self.reward = np.zeros((n_envs, n_slots), dtype=np.float64)
        self.discount = np.ones((n_envs, n_slots), dtype=np.float64)

    def reset(self, envs: np.ndarray) -> None:
        """Forget every transition of the copies in envs [E] (a new episode)."""
        self.open[envs] = False
        self.reward[envs] = 0.0
        self.discount[envs] = 1.0

    def start(self, mask: np.ndarray) -> None:
        """The slots in mask [E, S] decided: each opens a fresh transition."""
        self.open |= mask
        self.reward[mask] = 0.0
        self.discount[mask] = 1.0

    def accrue(self, slot_reward: np.ndarray) -> None:
        """Add this env step's reward [E, S] to every open transition, then discount once more."""
        self.reward += np.where(self.open, self.discount * slot_reward, 0.0)
        self.discount = np.where(self.open, self.discount * self.gamma, self.discount)

    def close(self, boundary: np.ndarray, ended: np.ndarray, truncated: np.ndarray) -> Closed:
        """Close the open slots at a decision boundary [E] or whose episode/node ended [E, S];
        `truncated` [E, S] says which ends were time limits (they keep their discount)."""
        ended = self.open & ended
        closed = ended | (self.open & boundary[:, None])
        truncated = ended & truncated
        terminal = ended & ~truncated
        out = Closed(closed, self.reward.astype(np.float32),
                     np.where(terminal, 0.0, self.discount).astype(np.float32), terminal, truncated)
        self.open = self.open & ~closed
        return out
