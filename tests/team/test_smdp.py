"""team/smdp.py against a scalar reference: one slot's semi-MDP transitions written from the
definition (R = sum_j gamma^j r_{t0+j} over the n steps from the decision, discount gamma^n, or 0
when the episode or the node ended without a time limit)."""
from __future__ import annotations

import numpy as np
import pytest

from hdppo.team.smdp import Transitions


def reference(decide, rewards, ended, truncated, boundary, gamma):
    """Closed transitions of one slot as (step, R, discount, terminal, truncated), from the definition."""
    out, start = [], None
    for t in range(len(rewards)):
        if decide[t]:
            start = t
        if start is None:
            continue
        if ended[t] or boundary[t]:
            n = t - start + 1
            R = sum(gamma ** j * rewards[start + j] for j in range(n))
            term = bool(ended[t] and not truncated[t])
            out.append((t, R, 0.0 if term else gamma ** n, term, bool(ended[t] and truncated[t])))
            start = None
    return out


@pytest.mark.parametrize("seed", range(5))
def test_transitions_match_the_reference_for_every_slot(seed: int) -> None:
    rng = np.random.default_rng(seed)
    E, S, T, k, gamma = 4, 3, 60, 4, 0.9
    rewards = rng.normal(size=(T, E, S))
    ended = rng.random((T, E, S)) < 0.08
    truncated = ended & (rng.random((T, E, S)) < 0.5)
    t_in_episode = np.zeros((T, E), dtype=int)
    for e in range(E):                         # copies out of phase: episodes restart after an end
        phase = rng.integers(k)
        for t in range(T):
            t_in_episode[t, e] = (t + phase) % 37
    boundary = (t_in_episode + 1) % k == 0
    decide = np.zeros((T, E, S), dtype=bool)
    tr = Transitions(E, S, gamma)
    got: dict[tuple[int, int], list] = {(e, s): [] for e in range(E) for s in range(S)}
    after_end = np.ones((E, S), dtype=bool)
    for t in range(T):
        decide[t] = (t_in_episode[t] % k == 0)[:, None] | after_end      # a slot decides again after its end
        tr.start(decide[t])
        tr.accrue(rewards[t])
        c = tr.close(boundary[t], ended[t], truncated[t])
        for e, s in zip(*np.nonzero(c.closed)):
            got[e, s].append((t, float(c.reward[e, s]), float(c.discount[e, s]), bool(c.terminal[e, s]),
                              bool(c.truncated[e, s])))
        after_end = ended[t]
    for (e, s), rows in got.items():
        want = reference(decide[:, e, s], rewards[:, e, s], ended[:, e, s], truncated[:, e, s],
                         boundary[:, e], gamma)
        assert len(rows) == len(want) > 0
        for a, b in zip(rows, want):
            assert a[0] == b[0] and a[3:] == b[3:]
            assert a[1] == pytest.approx(b[1], rel=1e-5, abs=1e-5) and a[2] == pytest.approx(b[2], rel=1e-5)


def test_reset_forgets_open_transitions_of_those_copies_only() -> None:
    tr = Transitions(2, 1, 0.5)
    tr.start(np.array([[True], [True]]))
    tr.accrue(np.array([[1.0], [2.0]]))
    tr.reset(np.array([True, False]))
    c = tr.close(np.array([True, True]), np.zeros((2, 1), bool), np.zeros((2, 1), bool))
    assert c.closed.tolist() == [[False], [True]]
    assert c.reward[1, 0] == 2.0 and c.discount[1, 0] == 0.5 and not tr.open.any()
