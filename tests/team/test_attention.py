"""Layer.attend: what a node observes is filtered by its goal; off, observations are untouched."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hdppo.errors import ScenarioError
from hdppo.team.controllers import uniform_policy
from hdppo.team.graph import AgentGraph
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.scenario import Entities, Layer
from tests.helpers.scripted_env import make_scenario

# ScriptedEnv's unit observation is 3 floats; as 3 one-float entities, mid's goal k (Discrete(3)) keeps
# feature k of each unit, all others read 0


def goal_entity(goals, ctx):
    return np.arange(3) == goals[..., None]


def with_low(scenario, **fields):
    """The scripted scenario with fields set on its bottom layer ('low')."""
    def layers(cfg):
        *upper, low = scenario.layers(cfg)
        return [*upper, dataclasses.replace(low, **fields)]
    return dataclasses.replace(scenario, layers=layers)


def unit_obs(hier: HierarchyEnv, steps: int = 12, seed: int = 5):
    """(obs, env obs, goals, goal features) at each step the units decide, under random upper layers."""
    pols = [uniform_policy(inf, seed + inf.index) for inf in hier.info]
    seen = []

    def act(d):
        if d.layer == hier.n_layers - 1:
            seen.append((d.obs.copy(), hier.env.obs.copy(), hier.goals[-1].copy(), hier.goal_features(2).copy()))
        return pols[d.layer](d)
    for _ in range(steps):
        hier.step(act)
    return seen


@pytest.mark.parametrize("fields", [dict(attend=goal_entity, entities=Entities(0, 1, 3)),
                                    dict(attend=goal_entity)],             # a per-feature mask [E, N, D]
                         ids=["entities", "features"])
def test_units_observe_only_the_entity_of_their_goal_at_every_decision(fields) -> None:
    scenario, cfg = make_scenario(max_steps=12, mid_interval=2)
    hier = HierarchyEnv(with_low(scenario, **fields), cfg, n_envs=3, seed=0)
    seen = unit_obs(hier)
    assert len(seen) == 12
    changed = False
    for k, (obs, env_obs, goals, goal_feat) in enumerate(seen):
        keep = np.arange(3) == goals[..., None]
        np.testing.assert_array_equal(obs[..., :3], np.where(keep, env_obs, 0))
        np.testing.assert_array_equal(obs[..., 3:], goal_feat)        # the grounded goal is never filtered
        changed |= k > 0 and bool((goals != seen[k - 1][2]).any())
    assert changed, "the goals never changed, so the test saw no re-allocation"


def test_hooks_and_parents_still_see_the_whole_features() -> None:
    scenario, cfg = make_scenario(max_steps=6)
    hier = HierarchyEnv(with_low(scenario, attend=goal_entity, entities=Entities(0, 1, 3)), cfg, seed=0)
    np.testing.assert_array_equal(hier.features(2), hier.env.obs)
    np.testing.assert_array_equal(hier.context(2).features, hier.env.obs)


def test_off_observations_are_the_env_observation_and_the_goal() -> None:
    scenario, cfg = make_scenario(max_steps=12, mid_interval=2)
    off = unit_obs(HierarchyEnv(scenario, cfg, n_envs=3, seed=0))
    keep_all = unit_obs(HierarchyEnv(with_low(scenario, attend=lambda g, ctx: np.ones(g.shape + (3,), bool)), cfg,
                                     n_envs=3, seed=0))
    for (obs, env_obs, _, goal_feat), (same, *_) in zip(off, keep_all, strict=True):
        np.testing.assert_array_equal(obs, np.concatenate([env_obs, goal_feat], axis=2))
        np.testing.assert_array_equal(obs, same)


def test_the_observation_space_keeps_its_width_and_admits_zero() -> None:
    scenario, cfg = make_scenario()
    off = HierarchyEnv(scenario, cfg).info[2].obs_space
    on = HierarchyEnv(with_low(scenario, attend=goal_entity, entities=Entities(0, 1, 3)), cfg).info[2].obs_space
    assert on.shape == off.shape
    assert (on.low <= 0).all() and (on.high >= 0).all()


@pytest.mark.parametrize("attend", [lambda g, ctx: np.ones(g.shape + (2,), bool),
                                    lambda g, ctx: (np.arange(3) == g[..., None]).astype(np.float32)],
                         ids=["shape", "dtype"])
def test_a_wrong_mask_names_the_layer_the_expected_shape_and_the_fix(attend) -> None:
    scenario, cfg = make_scenario()
    with pytest.raises(ScenarioError) as exc:
        HierarchyEnv(with_low(scenario, attend=attend, entities=Entities(0, 1, 3)), cfg, n_envs=2, seed=0).step(
            lambda d: np.zeros(d.mask.shape, np.int64))
    problem = str(exc.value).splitlines()[0]
    assert "attend of layer 'low'" in problem and "expected bool (2, 4, 3)" in problem
    assert "fix: return a bool array [E, N, entities.count]" in str(exc.value)


@pytest.mark.parametrize(("where", "fields", "says"), [
    ("top", dict(attend=goal_entity), "as the top layer it receives no goals"),
    ("low", dict(entities=Entities(0, 1, 3)), "declares entities but no attend"),
    ("low", dict(attend=goal_entity, entities=Entities(0, 0, 3)), "use offset >= 0, size >= 1 and count >= 1"),
    ("low", dict(attend=goal_entity, entities=Entities(1, 1, 3)), "ends at feature 4, but its own features have 3"),
])
def test_an_attend_that_cannot_work_is_refused_when_the_team_is_built(where, fields, says) -> None:
    scenario, cfg = make_scenario()
    if where == "top":                 # a flat team: its one layer has no parent
        scenario = dataclasses.replace(scenario, layers=lambda cfg: [Layer("low", **fields)],
                                       graph=lambda cfg, agents: AgentGraph.groups(agents))
    else:
        scenario = with_low(scenario, **fields)
    with pytest.raises(ScenarioError, match=says):
        HierarchyEnv(scenario, cfg)


def test_an_upper_layer_attends_in_its_own_part_and_still_sees_its_children_whole() -> None:
    scenario, cfg = make_scenario(max_steps=8, mid_interval=2, high_interval=2)

    def layers(cfg):
        high, mid, low = scenario.layers(cfg)
        return [high, dataclasses.replace(mid, attend=lambda g, ctx: np.arange(7) % 2 == g[..., None]), low]
    hier = HierarchyEnv(dataclasses.replace(scenario, layers=layers), cfg, n_envs=2, seed=0)
    pols = [uniform_policy(inf, 3 + inf.index) for inf in hier.info]
    seen = 0

    def act(d):
        nonlocal seen
        if d.layer == 1:
            E, N, C = hier.idx[1].shape
            obs = d.obs.reshape(E, N, C, -1)
            keep = np.arange(7) % 2 == hier.goals[1][..., None]                   # [E, N, 7]
            own = np.where(keep, hier.features(1), 0)
            np.testing.assert_array_equal(obs[..., :7], np.broadcast_to(own[:, :, None], (E, N, C, 7)))
            children = hier.env.obs[np.arange(E)[:, None, None], hier.idx[1]]     # [E, N, C, 3]
            np.testing.assert_array_equal(obs[..., 9:12], children)
            seen += 1
        return pols[d.layer](d)
    for _ in range(8):
        hier.step(act)
    assert seen == 4
