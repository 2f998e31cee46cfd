"""rware's goal-free shaping for the flat team: progress toward the nearest free requested shelf, one
reward per pick of a request (not farmed by setting the shelf down and lifting it again), one per
delivery; off by default, so the flat team's reward stays the env's."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("rware", reason="pip install 'hdppo[rware]'")

from hdppo import LayerContext
from hdppo.scenarios.rware import SCENARIO, flat_shaping

NOOP, FORWARD, LOAD = 0, 1, 4


def _flat(**keys):
    cfg = SCENARIO.make_config({"size": "tiny-4ag", **keys})
    env = SCENARIO.env(cfg)
    env.reset(seed=1)
    return cfg, env


def _step(env, robot0: int) -> np.ndarray:
    """Step with robot 0 doing `robot0` (the others still), and return the shaping of that step."""
    env.step({n: (robot0 if i == 0 else NOOP) for i, n in enumerate(env.possible_agents)})
    ctx = LayerContext(None, np.ones((1, len(env.possible_agents)), bool), env=SimpleNamespace(raw_envs=[env]))
    return flat_shaping(ctx)[0]


def _park_others(w) -> None:
    """Robots 1.. empty, on the top highway row, out of robot 0's way (seed 1's tiny-4ag layout)."""
    for b, x in zip(w.agents[1:], (0, 3, 9)):
        b.x, b.y, b.carrying_shelf = x, 0, None
    w._recalc_grid()


def test_off_by_default_and_weighted_by_w_int_low():
    cfg, _ = _flat()
    (low,) = SCENARIO.build_layers(cfg)
    assert low.intrinsic is flat_shaping and low.w_int == 0.0          # the flat team learns from env reward
    (low,) = SCENARIO.build_layers(SCENARIO.make_config({"size": "tiny-4ag", "w_int.low": 0.05}))
    assert low.w_int == 0.05


def test_a_pick_is_rewarded_once_per_request_and_a_delivery_once():
    _, env = _flat()
    w = env.env.unwrapped
    _park_others(w)
    a, s = w.agents[0], w.request_queue[0]
    assert not w.highways[s.y, s.x]
    a.x, a.y = s.x, s.y                         # robot 0 under a requested shelf no robot carries
    w._recalc_grid()
    r = _step(env, LOAD)
    assert a.carrying_shelf is s and r[0] == 1.0 and (r[1:] == 0).all()
    assert _step(env, LOAD)[0] == 0.0 and a.carrying_shelf is None       # set down where it stood
    assert _step(env, LOAD)[0] == 0.0 and a.carrying_shelf is s          # lifted again: no second reward
    a.x, a.y = w.goals[0]                       # onto a delivery cell with it: the next step delivers
    s.x, s.y = a.x, a.y
    w._recalc_grid()
    r = _step(env, NOOP)
    assert s not in w.request_queue and r[0] == 1.0 and env.deliveries == 1.0


def test_progress_toward_the_nearest_free_requested_shelf():
    from rware.warehouse import Direction
    _, env = _flat()
    w = env.env.unwrapped
    _park_others(w)
    a = w.agents[0]
    assert (w.request_queue[2].x, w.request_queue[2].y) == (8, 8)      # seed 1: the request nearest (8, 10)
    a.x, a.y, a.dir = 8, 10, Direction.UP       # two cells below it, facing it
    w._recalc_grid()
    assert _step(env, FORWARD)[0] == 1.0 and (a.x, a.y) == (8, 9)
    a.dir = Direction.DOWN
    assert _step(env, FORWARD)[0] == -1.0 and (a.x, a.y) == (8, 10)
    b, s = w.agents[1], w.request_queue[2]      # another robot carries that shelf, to the cell beside
    b.x, b.y, b.carrying_shelf = 9, 10, s       # robot 0's: no longer free, so it does not count
    s.x, s.y = b.x, b.y
    a.x, a.y, a.dir = 8, 9, Direction.DOWN
    w._recalc_grid()
    r = _step(env, FORWARD)                     # away from the nearest free one, (2, 7): 8 -> 9 cells
    assert (a.x, a.y) == (8, 10) and r[0] == -1.0
    assert _step(env, NOOP)[0] == 0.0


@pytest.mark.parametrize("carry", [False, True], ids=["first-pick", "carry_potential"])
def test_the_dispatchers_robots_cannot_farm_picks_either(carry):
    """layers=2: lifting the assigned shelf, setting it down and lifting it again used to earn +1 a
    pick, +0.5 a step; a pick now counts once per request, as for the flat team. With
    carry_potential=true every lift pays +1 and every set-down undelivered -1: the loop nets 0 and
    each set-down costs at once (with first picks only it cost nothing)."""
    from hdppo.scenarios.rware import ground
    cfg = SCENARIO.make_config({"size": "tiny-4ag", "layers": 2, "carry_potential": carry})
    (_, low) = SCENARIO.build_layers(cfg)
    progress = low.intrinsic
    env = SCENARIO.env(cfg)
    env.reset(seed=1)
    w = env.env.unwrapped
    _park_others(w)
    a, s = w.agents[0], w.request_queue[0]
    a.x, a.y = s.x, s.y
    w._recalc_grid()
    goals = np.array([[0, 0, 0, 0]])

    def ctx(**more):
        return LayerContext(None, np.ones((1, 4), bool), goals=goals, env=SimpleNamespace(raw_envs=[env]), **more)
    rewards = []
    for _ in range(6):                            # load, unload, load, ...
        before = ground(goals, ctx())
        env.step({n: (LOAD if i == 0 else NOOP) for i, n in enumerate(env.possible_agents)})
        rewards.append(progress(ctx(goal_features=ground(goals, ctx()), prev_goal_features=before))[0, 0])
    want = [1.0, -1.0, 1.0, -1.0, 1.0, -1.0] if carry else [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert rewards == want and a.carrying_shelf is None


def test_carry_potential_pays_the_flat_team_each_lift_and_takes_it_back_on_a_set_down():
    cfg, env = _flat(carry_potential=True)
    (low,) = SCENARIO.build_layers(cfg)
    w = env.env.unwrapped
    _park_others(w)
    a, s = w.agents[0], w.request_queue[0]
    a.x, a.y = s.x, s.y
    w._recalc_grid()
    ctx = LayerContext(None, np.ones((1, 4), bool), env=SimpleNamespace(raw_envs=[env]))
    rewards = []
    for _ in range(4):                            # load, unload, load, unload
        env.step({n: (LOAD if i == 0 else NOOP) for i, n in enumerate(env.possible_agents)})
        rewards.append(low.intrinsic(ctx)[0])
    assert [r[0] for r in rewards] == [1.0, -1.0, 1.0, -1.0] and all((r[1:] == 0).all() for r in rewards)
    env.step({n: (LOAD if i == 0 else NOOP) for i, n in enumerate(env.possible_agents)})
    assert a.carrying_shelf is s and low.intrinsic(ctx)[0][0] == 1.0
    a.x, a.y = w.goals[0]                       # carrying it onto a delivery cell: +1, no set-down
    s.x, s.y = a.x, a.y
    w._recalc_grid()
    env.step({n: NOOP for n in env.possible_agents})
    assert low.intrinsic(ctx)[0][0] == 1.0 and env.deliveries == 1.0


def test_a_robot_back_where_it_started_has_earned_no_progress():
    """Forward, turn around, forward, turn around: robot 0 ends where it began, facing the same way,
    the warehouse unchanged, so the progress it earned sums to 0 from every cell and facing. (It was
    measured to the target nearest the robot's new cell only: between two equally near requests a
    robot earned +1 each way, and a flat team at w_int.low=0.05 learned to pace, delivering nothing.)"""
    from rware.warehouse import Direction
    _, env = _flat()
    w = env.env.unwrapped
    _park_others(w)
    a = w.agents[0]
    H, W = w.grid_size
    LEFT = 2
    cycles = 0
    for y in range(1, H):
        for x in range(W):
            for facing in Direction:
                a.x, a.y, a.dir, a.carrying_shelf = x, y, facing, None
                w._recalc_grid()
                earned = _step(env, FORWARD)[0]
                if (a.x, a.y) == (x, y):
                    continue                      # a wall or a robot ahead: no move to undo
                for act in (LEFT, LEFT, FORWARD, LEFT, LEFT):
                    earned += _step(env, act)[0]
                assert (a.x, a.y, a.dir) == (x, y, facing)
                assert earned == 0.0, (x, y, facing, earned)
                cycles += 1
    assert cycles > 50
