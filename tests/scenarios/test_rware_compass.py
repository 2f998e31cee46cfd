"""rware `compass=true`: the flat robots observe the target their goal-free shaping measures progress
to, grounded as the dispatcher's robots observe their goal, on the native batch and the PettingZoo env
alike; off by default, refused with a dispatcher."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rware", reason="pip install 'hdppo[rware]'")

from rware.warehouse import Direction

from hdppo.errors import ScenarioError
from hdppo.scenarios.rware import SCENARIO

RWARE_OBS = 71                                   # rware's own flattened observation


def _env(**keys):
    env = SCENARIO.env(SCENARIO.make_config({"size": "tiny-4ag", **keys}))
    env.reset(seed=1)
    return env


def _noop(env) -> dict:
    obs, *_ = env.step({n: 0 for n in env.possible_agents})
    return obs


def test_off_by_default_and_refused_with_a_dispatcher():
    assert _env().observation_space("robot_0").shape == (RWARE_OBS,)
    assert _env(compass=True).observation_space("robot_0").shape == (RWARE_OBS + 5,)
    assert SCENARIO.batched_env(SCENARIO.make_config({"size": "tiny-4ag"}), 2, 0).obs.shape == (2, 4, RWARE_OBS)
    with pytest.raises(ScenarioError, match="compass=true with layers=2"):
        SCENARIO.build_layers(SCENARIO.make_config({"compass": True, "layers": 2}))


def test_the_compass_points_at_the_nearest_free_request_then_the_delivery_cell():
    env = _env(compass=True)
    w = env.env.unwrapped
    for b, x in zip(w.agents[1:], (0, 3, 9)):   # the others empty, on the top highway row
        b.x, b.y, b.carrying_shelf = x, 0, None
    a = w.agents[0]
    assert (w.request_queue[2].x, w.request_queue[2].y) == (8, 8)      # seed 1: the request nearest (8, 10)
    a.x, a.y, a.dir = 8, 10, Direction.UP
    w._recalc_grid()
    scale = sum(w.grid_size)
    c = _noop(env)["robot_0"][RWARE_OBS:]
    np.testing.assert_allclose(c, [2 / scale, 0, 1, 0, 0], atol=1e-6)   # two cells ahead, fetch leg
    a.dir = Direction.LEFT                       # turned: the same shelf is now on the robot's right
    np.testing.assert_allclose(_noop(env)["robot_0"][RWARE_OBS:], [0, 2 / scale, 1, 0, 0], atol=1e-6)
    s = w.request_queue[2]                       # under it and loaded: the nearest delivery cell
    a.x, a.y, a.dir, a.carrying_shelf = s.x, s.y, Direction.DOWN, s
    w._recalc_grid()
    c = _noop(env)["robot_0"][RWARE_OBS:]
    gx, gy = min(w.goals, key=lambda g: abs(g[0] - a.x) + abs(g[1] - a.y))
    np.testing.assert_allclose(c, [(gy - a.y) / scale, (a.x - gx) / scale, 0, 1, 0], atol=1e-6)


def test_no_vector_while_every_request_is_carried():
    env = _env(compass=True, hard=True)          # two requests: robots 1 and 2 carry them
    w = env.env.unwrapped
    for b, s in zip(w.agents[1:3], w.request_queue):
        b.x, b.y, b.carrying_shelf = s.x, s.y, s
    w.agents[0].carrying_shelf = None
    w._recalc_grid()
    np.testing.assert_array_equal(_noop(env)["robot_0"][RWARE_OBS:], [0, 0, 1, 0, 0])


def test_the_batch_observes_as_the_pettingzoo_env():
    """Same seed and actions: the native batch's compass observations equal the PettingZoo env's,
    across deliveries of the random walk's own and a reset."""
    cfg = SCENARIO.make_config({"size": "tiny-4ag", "hard": True, "compass": True})
    batch, env = SCENARIO.batched_env(cfg, 2, 5), SCENARIO.env(cfg)
    obs, _ = env.reset(seed=5)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(520):
        np.testing.assert_allclose(batch.obs[0], np.stack([obs[a] for a in env.possible_agents]), atol=1e-6)
        act = rng.integers(0, 5, (2, 4))
        step = batch.step(act)
        obs, *_ = env.step({n: int(act[0, i]) for i, n in enumerate(env.possible_agents)})
        if step.done[0]:
            batch.reset_done(step.done)
            ends += 1
            obs, _ = env.reset()                  # rware draws on from seed 5, as copy 0 does
    assert ends == 1 and batch.obs.shape[-1] == RWARE_OBS + 5
