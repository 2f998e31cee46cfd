"""rware's hooks on the native batch give the numbers they gave on rware's own objects: for the same
seeds, actions and dispatcher goals, the grounded goals, goal success, the robots' intrinsic reward
(layers=2), the flat shaping (layers=1), the dispatcher's view and the deliveries equal the hooks as
they were on rware's objects (tests/helpers/rware_objects.py; its goal success follows the
first-lift rule since 2026-12-03) on the scenario's PettingZoo env, step by step."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

pytest.importorskip("rware", reason="pip install 'hdppo[rware]'")

from hdppo import LayerContext
from hdppo.scenarios import rware as new
from hdppo.scenarios.rware import SCENARIO, episode_info, make_batch, queue_size
from hdppo.sims.pettingzoo import PettingZooBatch
from hdppo.sims.rware_batch import RwareBatch
from hdppo.team.assembly import make_env_and_graph
from tests.helpers import rware_objects as old
from tests.sims.test_rware_batch import busy


@contextlib.contextmanager
def _picks_kept(env, ref):
    """The shelves' first-pick marks of both warehouses restored after the block."""
    batch, objects = env.picked.copy(), [set(e.picked) for e in ref.raw_envs]
    yield
    env.picked[...] = batch
    for e, marks in zip(ref.raw_envs, objects):
        e.picked = marks


def _ctx(env, goals, alive, **more):
    return LayerContext(None, alive, goals=goals, env=env, **more)


@pytest.mark.parametrize("size,hard,shaping,seed", [("tiny-4ag", True, "progress", 1), ("small-4ag", False, "flat", 2),
                                                    ("tiny-4ag", True, "flat", 3), ("tiny-4ag", True, "carried", 4)])
def test_hooks_on_the_batch_equal_the_hooks_on_rwares_objects(size, hard, shaping, seed):
    cfg = SCENARIO.make_config({"size": size, "hard": hard, "layers": 1 if shaping == "flat" else 2})
    robots, queue = queue_size(cfg)
    E = 2
    ref = PettingZooBatch(lambda: SCENARIO.env(cfg), [f"robot_{i}" for i in range(robots)], E, None, episode_info)
    env = make_batch(cfg, E, seed)
    ref.reset(seed=seed)
    env.reset(seed=seed)
    observe_old, _ = old.dispatcher_view(robots, queue)
    observe_new, _ = new.dispatcher_view(robots, queue)
    rng = np.random.default_rng(seed)
    goals = np.zeros((E, robots), np.int64)
    rewarded = successes = delivered = picks = setdowns = 0.0
    for t in range(520):
        if t % 10 == 0:
            goals = rng.integers(0, queue, (E, robots))
        alive = env.alive.copy()
        before_old = old.ground(goals, _ctx(ref, goals, alive))
        before_new = new.ground(goals, _ctx(env, goals, alive))
        np.testing.assert_array_equal(before_new, before_old, err_msg=f"ground at step {t}")
        np.testing.assert_array_equal(new.ground(goals, _ctx(ref, goals, alive)), before_old)  # raw_envs path
        np.testing.assert_array_equal(observe_new(_ctx(env, goals, alive)), observe_old(_ctx(ref, goals, alive)))
        act = busy(env, rng)
        out, want = env.step(act), ref.step(act)
        np.testing.assert_array_equal(out.rewards, want.rewards)
        after_old = old.ground(goals, _ctx(ref, goals, alive))
        after_new = new.ground(goals, _ctx(env, goals, alive))
        np.testing.assert_array_equal(after_new, after_old, err_msg=f"ground after step {t}")
        more = {"goal_features": after_new, "prev_goal_features": before_new}
        with _picks_kept(env, ref):               # the raw_envs path, leaving the pick marks as they were
            via_objects = new.success(_ctx(ref, goals, alive, **more))
        with _picks_kept(env, ref) if shaping == "flat" else contextlib.nullcontext():
            # one context per step for the success and the reward, as the engine's (both mark first picks)
            ctx_new, ctx_old = _ctx(env, goals, alive, **more), _ctx(ref, goals, alive, **more)
            got = new.success(ctx_new)
            np.testing.assert_array_equal(got, old.success(ctx_old))
            np.testing.assert_array_equal(via_objects, got)
        if shaping == "progress":
            r_new, r_old = new.progress(ctx_new), old.progress(ctx_old)
        elif shaping == "carried":                # no object-based twin: the same hook on both envs' state
            r_new, r_old = new.carried_progress(ctx_new), new.carried_progress(ctx_old)
            setdowns += float((r_new <= -1).sum())
        else:
            r_new, r_old = new.flat_shaping(_ctx(env, goals, alive)), old.flat_shaping(_ctx(ref, goals, alive))
        np.testing.assert_array_equal(r_new, r_old, err_msg=f"{shaping} at step {t}")
        assert r_new.dtype == r_old.dtype
        rewarded += float((r_new >= 1).sum())
        successes += float(got.sum())
        picks += float(((before_new[..., 2 + new.FETCH] > 0) & (after_new[..., 2 + new.DELIVER] > 0)).sum())
        delivered += float(out.rewards.sum())
        for e in np.flatnonzero(out.done):
            assert env.episode_info(int(e)) == ref.episode_info(int(e))
        env.reset_done(out.done)
        ref.reset_done(out.done)
    assert delivered >= 1 and picks >= 3 and successes >= 3 and rewarded >= 3, (delivered, picks, successes, rewarded)
    assert shaping != "carried" or setdowns >= 1, setdowns


def test_the_scenario_trains_on_the_batch_and_hooks_refuse_other_envs():
    cfg = SCENARIO.make_config({"size": "tiny-4ag", "hard": True, "layers": 2})
    env, graph = make_env_and_graph(SCENARIO, cfg, 3, 0, SCENARIO.build_layers(cfg))
    assert isinstance(env, RwareBatch) and env.n_envs == 3 and list(graph.units) == env.units
    from types import SimpleNamespace

    from hdppo.errors import ScenarioError
    goals = np.zeros((1, 4), np.int64)
    with pytest.raises(ScenarioError, match="sim=RwareBatch"):
        new.ground(goals, _ctx(SimpleNamespace(), goals, np.ones((1, 4), bool)))
