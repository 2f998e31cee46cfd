"""RwareBatch steps as rware 2.0 itself (through the scenario's PettingZoo env and hdppo's adapter) for
the same seeds and actions, across an episode end, with deliveries, refused moves and collisions
(networkx's tie-breaks included) happening; E copies together equal E single copies."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("rware", reason="pip install 'hdppo[rware]'")

from hdppo.errors import ScenarioError
from hdppo.scenarios.rware import SCENARIO, episode_info
from hdppo.sims import rware_moves
from hdppo.sims.pettingzoo import PettingZooBatch
from hdppo.sims.rware_batch import DX, DY, FORWARD, LOAD, RwareBatch
from hdppo.sims.rware_layout import layout
from tests.helpers.batch import assert_copies_match


def busy(env: RwareBatch, rng: np.random.Generator) -> np.ndarray:
    """Actions [E, U] that make things happen: mostly each robot's greedy step along its leg (to the
    nearest requested shelf, to a delivery cell, off the highways to set a shelf down), else random
    with forward and load favoured; read from env's state (equal in both paths while they agree)."""
    E, U = env.x.shape
    act = rng.choice(5, size=(E, U), p=[0.05, 0.5, 0.1, 0.1, 0.25])
    for e in range(E):
        for u in range(U):
            if rng.random() < 0.3:
                continue
            x, y, s = env.x[e, u], env.y[e, u], env.carrying[e, u]
            if s < 0:
                q = env.queue[e]
                cells = np.stack([env.shelf_x[e, q], env.shelf_y[e, q]], 1)
            elif env.requested[e, s]:
                cells = env.goals
            elif not env.highways[y, x]:
                act[e, u] = LOAD
                continue
            else:
                continue
            tx, ty = cells[np.abs(cells - (x, y)).sum(1).argmin()]
            if (tx, ty) == (x, y):
                act[e, u] = LOAD if s < 0 else 0
                continue
            want = (0 if ty < y else 1) if abs(ty - y) >= abs(tx - x) else (2 if tx < x else 3)
            act[e, u] = FORWARD if env.dir[e, u] == want else rng.choice([2, 3])
    return act


class Counting:
    """Wraps rware_moves.networkx_commit to count the networkx tie-breaks."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        inner = rware_moves.networkx_commit

        def wrapped(*args):
            self.calls += 1
            return inner(*args)
        monkeypatch.setattr(rware_moves, "networkx_commit", wrapped)


def reference(size: str, hard: bool, n: int) -> PettingZooBatch:
    """The scenario's env path before the native batch: copies of rware through GymnasiumMultiAgent."""
    cfg = SCENARIO.make_config({"size": size, "hard": hard})
    units = [f"robot_{i}" for i in range(layout(size, hard).n_agents)]
    return PettingZooBatch(lambda: SCENARIO.env(cfg), units, n, None, episode_info)


@pytest.mark.parametrize("size,hard,seed", [("tiny-2ag", False, 0), ("tiny-4ag", True, 5), ("small-4ag", False, 9)])
def test_steps_equal_rware_through_the_adapter(size, hard, seed, monkeypatch):
    ties = Counting(monkeypatch)
    n = 3
    env, ref = RwareBatch(size, hard, n, seed), reference(size, hard, n)
    assert env.obs_space == ref.obs_space and env.action_space == ref.action_space and env.units == ref.units
    env.reset(seed=seed)
    ref.reset(seed=seed)
    rng = np.random.default_rng(seed)
    delivered = blocked = ends = 0
    for t in range(560):
        np.testing.assert_array_equal(env.obs, ref.obs, err_msg=f"obs at step {t}")
        np.testing.assert_array_equal(env.alive, ref.alive)
        act = busy(env, rng)
        x, y = env.x.copy(), env.y.copy()
        out, want = env.step(act), ref.step(act)
        for field in ("rewards", "terminated", "truncated", "done"):
            np.testing.assert_array_equal(getattr(out, field), getattr(want, field), err_msg=f"{field} at step {t}")
        np.testing.assert_array_equal(env.obs, ref.obs, err_msg=f"obs after step {t}")
        np.testing.assert_array_equal(env.alive, ref.alive)
        assert out.rewards.dtype == np.float32
        H, W = env.grid_size
        before = env.before
        tx = np.clip(before.x + DX[ref.obs[..., 3:7].argmax(-1)], 0, W - 1)
        ty = np.clip(before.y + DY[ref.obs[..., 3:7].argmax(-1)], 0, H - 1)
        stuck = (act == FORWARD) & ((tx != x) | (ty != y)) & (env.x == x) & (env.y == y)
        blocked += int(stuck.sum())
        delivered += int(out.rewards.sum())
        for e in np.flatnonzero(out.done):
            assert env.episode_info(int(e)) == ref.episode_info(int(e))
            ends += 1
        env.reset_done(out.done)
        ref.reset_done(out.done)
    assert ends == n and delivered >= 3 and blocked >= 20 and ties.calls >= 1, (ends, delivered, blocked, ties.calls)


def test_resets_draw_as_rware_with_the_same_seeds():
    import rware  # noqa: F401 - registers the rware-* ids
    env = RwareBatch("small-4ag", True, 2, seed=7)
    for e in range(2):
        w = gym.make("rware-small-4ag-hard-v2", disable_env_checker=True)
        w.reset(seed=7 + e)
        u = w.unwrapped
        assert [(a.x, a.y, a.dir.value) for a in u.agents] == list(zip(env.x[e], env.y[e], env.dir[e]))
        assert [s.id - 1 for s in u.request_queue] == env.queue[e].tolist()
        assert [(s.x, s.y) for s in u.shelfs] == list(zip(env.shelf_x[e], env.shelf_y[e]))
        np.testing.assert_array_equal(u.highways.astype(bool), env.highways)
        assert [tuple(g) for g in u.goals] == [tuple(g) for g in env.goals] and u.grid_size == env.grid_size


def test_commits_equal_networkx_on_crowded_grids():
    """The array resolution equals rware's networkx one on crowded 4 x 4 grids (chains, swaps, cycles
    of three and more, ties), copy by copy."""
    rng = np.random.default_rng(0)
    E, U, W = 400, 9, 4
    cells = np.stack([rng.permutation(W * W)[:U] for _ in range(E)])
    x, y = cells % W, cells // W
    d = rng.integers(0, 4, (E, U))
    go = rng.random((E, U)) < 0.8
    # copy 0: robots 0-3 turn round the 2 x 2 block at (0, 0) (a cycle of four), robot 4 drives into it;
    # copy 1: robots 0 and 1 swap, robot 2 drives into robot 1's cell
    cells[0], d[0, :5], go[0, :5] = [0, 1, 5, 4, 2, 12, 13, 14, 15], [3, 1, 2, 0, 2], True
    cells[1], d[1, :3], go[1, :3] = [0, 1, 2, 8, 9, 12, 13, 14, 15], [3, 2, 2], True
    x, y = cells % W, cells // W
    tx = np.where(go, np.clip(x + DX[d], 0, W - 1), x)
    ty = np.where(go, np.clip(y + DY[d], 0, W - 1), y)
    agent_at = np.full((E, W * W), -1)
    agent_at[np.arange(E)[:, None], cells] = np.arange(U)
    xy = np.stack([np.arange(W * W) % W, np.arange(W * W) // W], 1)
    got = rware_moves.commit(cells, ty * W + tx, agent_at[np.arange(E)[:, None], ty * W + tx], xy)
    for e in range(E):
        np.testing.assert_array_equal(got[e], rware_moves.networkx_commit(xy[cells[e]], xy[ty[e] * W + tx[e]]))
    assert got[0, :5].tolist() == [True, True, True, True, False] and not got[1, :3].any()
    # a robot drove into the cell a moving robot left, outside the cycle too
    assert (got[2:] & go[2:] & (agent_at[np.arange(2, E)[:, None], (ty * W + tx)[2:]] >= 0)).any()


class WithState(RwareBatch):
    """The batch with its exposed arrays as a global state, so the contract compares them too."""

    @property
    def state_space(self) -> gym.spaces.Box:            # type: ignore[override]
        n = self.state().shape[1]
        return gym.spaces.Box(-1.0, 1e3, (n,), np.float32)

    def state(self) -> np.ndarray:
        parts = [self.x, self.y, self.dir, self.carrying, self.shelf_x, self.shelf_y, self.queue, self.requested,
                 self.agent_at.reshape(self.n_envs, -1), self.shelf_at.reshape(self.n_envs, -1), self.t[:, None]]
        return np.concatenate([np.asarray(p, np.float32) for p in parts], axis=1)


def test_copies_stepped_together_equal_single_copies():
    n = assert_copies_match(lambda n, seed: WithState("tiny-4ag", False, n, seed), 3, 520, busy)
    assert n == 3


def test_bad_sizes_and_actions_are_refused():
    with pytest.raises(ScenarioError, match="huge-2ag"):
        RwareBatch("huge-2ag")
    with pytest.raises(ScenarioError, match="requests no shelf"):
        RwareBatch("tiny-1ag", hard=True)
    env = RwareBatch("tiny-2ag", n_envs=2)
    with pytest.raises(ScenarioError, match="shape"):
        env.step(np.zeros((2, 3), np.int64))
    with pytest.raises(ScenarioError, match=r"0\.\.4"):
        env.step(np.full((2, 2), 5))
