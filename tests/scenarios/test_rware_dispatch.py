"""rware's scripted dispatcher (the goal sampler of `--skills` on layers=2): requested shelves no robot
carries go, nearest pair first, one each to the robots carrying nothing; a robot left over gets its
nearest free shelf. Read from the dispatcher's real slot observations in a HierarchyEnv."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rware", reason="pip install 'hdppo[rware]'")

from hdppo.scenarios.rware import SCENARIO
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.interfaces import Decision

# tiny-4ag-hard: 4 robots, 2 requested shelves, an 11 x 10 grid; shelves A and B are requested
A, B, OTHER = 5, 20, 9                   # shelf ids


def _scene(w, e: int, robots: list[tuple[int, int, int]], a_at=(1, 1), b_at=(8, 8)) -> None:
    """Copy e: queue [A, B] at a_at / b_at; robots (x, y, carried shelf id or -1); a carried shelf
    moves with its robot."""
    w.requested[e] = False
    w.queue[e] = [A, B]
    w.requested[e, [A, B]] = True
    (w.shelf_x[e, A], w.shelf_y[e, A]), (w.shelf_x[e, B], w.shelf_y[e, B]) = a_at, b_at
    for u, (x, y, shelf) in enumerate(robots):
        w.x[e, u], w.y[e, u], w.carrying[e, u] = x, y, shelf
        if shelf >= 0:
            w.shelf_x[e, shelf], w.shelf_y[e, shelf] = x, y


def test_the_dispatcher_matches_nearest_pairs_first_and_skips_carried_shelves():
    cfg = SCENARIO.make_config({"size": "tiny-4ag", "hard": True, "layers": 2})
    dispatcher = SCENARIO.build_layers(cfg)[0]
    assert dispatcher.scripted is not None
    hier = HierarchyEnv(SCENARIO, cfg, n_envs=2, seed=0)
    try:
        hier.reset(seed=0)
        w = hier.env
        # copy 0: robot 1 is 1 cell from B, robot 2 is 2 from A; robot 0 (3 from B, 11 from A) is left
        # over and goes after its nearest, B; robot 3 carries another shelf (its goal is no leg of it)
        _scene(w, 0, [(7, 6, -1), (8, 7, -1), (1, 3, -1), (5, 5, OTHER)])
        # copy 1: robot 0 carries A, so every idle robot is sent to B, even robot 2 right by A's shelf cell
        _scene(w, 1, [(1, 2, A), (6, 0, -1), (1, 0, -1), (9, 9, -1)], a_at=(1, 1))
        hier._compute_features()
        obs = hier.decision_obs(0)
        goals = np.asarray(dispatcher.scripted(Decision(0, obs, np.ones(obs.shape[:2], bool))))
    finally:
        hier.close()
    assert goals.shape == (2, 4) and goals.dtype == np.int64
    np.testing.assert_array_equal(goals[0, :3], [1, 1, 0])           # queue entry 0 is A, 1 is B
    np.testing.assert_array_equal(goals[1, 1:], [1, 1, 1])


def test_free_goals_masks_the_requests_a_robot_carries():
    cfg = SCENARIO.make_config({"size": "tiny-4ag", "hard": True, "layers": 2, "free_goals": True})
    hier = HierarchyEnv(SCENARIO, cfg, n_envs=3, seed=0)
    try:
        hier.reset(seed=0)
        w = hier.env
        _scene(w, 0, [(7, 6, -1), (8, 7, -1), (1, 3, -1), (5, 5, OTHER)])    # neither request carried
        _scene(w, 1, [(1, 2, A), (6, 0, -1), (1, 0, -1), (9, 9, -1)])       # robot 0 carries A (entry 0)
        _scene(w, 2, [(1, 2, A), (8, 8, B), (1, 0, -1), (9, 9, -1)])        # both carried: any goal
        hier._compute_features()
        legal = hier.goal_mask(0)
    finally:
        hier.close()
    assert legal is not None and legal.shape == (3, 4, 2)               # [E, the dispatcher's 4 slots, Q]
    np.testing.assert_array_equal(legal[0], np.ones((4, 2), bool))
    np.testing.assert_array_equal(legal[1], [[False, True]] * 4)
    np.testing.assert_array_equal(legal[2], np.ones((4, 2), bool))


def test_free_goals_and_hold_are_off_by_default_and_only_for_the_dispatcher():
    from hdppo.errors import ScenarioError
    hier = HierarchyEnv(SCENARIO, SCENARIO.make_config({"size": "tiny-4ag", "hard": True, "layers": 2}),
                        n_envs=1, seed=0)
    try:
        hier.reset(seed=0)
        assert hier.goal_mask(0) is None
    finally:
        hier.close()
    with pytest.raises(ScenarioError, match="free_goals=true with layers=1"):
        SCENARIO.build_layers(SCENARIO.make_config({"free_goals": True}))
    with pytest.raises(ScenarioError, match="hold=true with layers=1"):
        SCENARIO.build_layers(SCENARIO.make_config({"hold": True}))


def test_hold_keeps_a_robots_request_until_its_shelf_is_lifted():
    cfg = SCENARIO.make_config({"size": "tiny-4ag", "hard": True, "layers": 2, "hold": True})
    hier = HierarchyEnv(SCENARIO, cfg, n_envs=2, seed=0)
    try:
        hier.reset(seed=0)
        w = hier.env
        assert hier.idx[0][0, 0].tolist() == [0, 1, 2, 3]      # the dispatcher's slot u is robot u
        book = hier.layers[1].goals
        book.set[:] = False
        hier._compute_features()
        assert hier.goal_mask(0).all()             # no robot holds a goal yet: any request
        book.goals[:] = [1, 0, 1, 0]               # robots 0, 2 hold B (entry 1); 1, 3 hold A (entry 0)
        book.set[:] = True
        # copy 0: nothing carried, so every robot keeps its request; copy 1: robot 0 carries A, so it
        # (carrying) and robots 1 and 3 (whose A is taken) may get either; robot 2 keeps B
        _scene(w, 0, [(7, 6, -1), (8, 7, -1), (1, 3, -1), (5, 5, -1)])
        _scene(w, 1, [(1, 2, A), (6, 0, -1), (1, 0, -1), (9, 9, -1)])
        hier._compute_features()
        legal = hier.goal_mask(0)
    finally:
        hier.close()
    assert legal is not None and legal.shape == (2, 4, 2)
    np.testing.assert_array_equal(legal[0], [[False, True], [True, False], [False, True], [True, False]])
    np.testing.assert_array_equal(legal[1], [[True, True], [True, True], [False, True], [True, True]])
