"""Layer.goal_mask: an upper layer chooses only the goals its hook allows, at every decision."""
from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

from hdppo.errors import ScenarioError
from hdppo.team.controllers import uniform_policy
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.layer_view import LayerView
from tests.helpers.scripted_env import make_scenario

# ScriptedEnv's mid layer gives Discrete(3) goals; the mask below allows goal (t + node) % 3 and
# goal 0, so it differs per node and per step, and a stale or missing mask shows in the goals given


def shifting(ctx) -> np.ndarray:
    E, N = ctx.alive.shape
    k = (np.asarray(ctx.t)[:, None] + np.arange(N)) % 3                         # [E, N]
    return (np.arange(3) == k[..., None]) | (np.arange(3) == 0)


def with_mid(scenario, **fields):
    """The scripted scenario with fields set on its 'mid' layer."""
    def layers(cfg):
        return [dataclasses.replace(lay, **fields) if lay.name == "mid" else lay for lay in scenario.layers(cfg)]
    return dataclasses.replace(scenario, layers=layers)


def run(hier: HierarchyEnv, steps: int, seed: int = 3):
    """(step, decision mask, action mask, actions) of every mid decision, under uniform policies."""
    pols = [uniform_policy(inf, seed + inf.index) for inf in hier.info]
    seen = []

    def act(d):
        a = pols[d.layer](d)
        if d.layer == 1:
            seen.append((d.t.copy(), d.mask.copy(), None if d.action_mask is None else d.action_mask.copy(), a))
        return a
    for _ in range(steps):
        hier.step(act)
    return seen


@pytest.mark.parametrize("choice", ["per_child", "broadcast"])
def test_each_slot_decides_under_its_nodes_mask_of_that_step_and_children_get_only_legal_goals(choice) -> None:
    scenario, cfg = make_scenario(max_steps=12, mid_interval=1, choice=choice)
    hier = HierarchyEnv(with_mid(scenario, goal_mask=shifting), cfg, n_envs=3, seed=0)
    seen = run(hier, 12)
    assert len(seen) == 12
    C = hier.idx[1].shape[2]
    for t, mask, amask, actions in seen:
        k = (t[:, None] + np.arange(hier.alive[1].shape[1])) % 3                # the hook's rows, per node
        nodes = (np.arange(3) == k[..., None]) | (np.arange(3) == 0)
        want = np.repeat(nodes, C, axis=1) if choice == "per_child" else nodes
        np.testing.assert_array_equal(amask, want)
        legal = np.take_along_axis(amask, actions[..., None], axis=-1)[..., 0]
        assert legal[mask].all()
    given = np.concatenate([a[m] for _, m, _, a in seen])
    assert set(given.tolist()) == {0, 1, 2}, "every goal is legal somewhere, so a uniform layer gives each"


def hold(ctx) -> np.ndarray:
    """Per child slot: only the goal the child holds, else (no goal yet this episode) any of the 3."""
    held = np.arange(3) == np.asarray(ctx.child_goals)[..., None]               # [E, N, C, 3]
    return np.where(np.asarray(ctx.child_holds)[..., None], held, True)


def test_a_per_child_mask_gives_each_child_slot_its_own_row_so_children_keep_their_goals() -> None:
    """A hook's [E, N, C, n] rows reach each slot (node-major, as the slots are): a child keeps the
    goal it was first given for its whole episode, and a new episode starts free (child_holds False)."""
    scenario, cfg = make_scenario(max_steps=6, mid_interval=1, choice="per_child")
    hier = HierarchyEnv(with_mid(scenario, goal_mask=hold), cfg, n_envs=3, seed=0)
    seen = run(hier, 18)                                                         # 3 episodes per copy
    episode = np.full(3, -1)
    first: dict[tuple[int, int], np.ndarray] = {}
    for t, mask, amask, actions in seen:
        episode += t == 0
        fresh = t == 0
        assert amask[fresh].all()                                                # a new episode: any goal
        np.testing.assert_array_equal(amask[~fresh].sum(-1), 1)                  # later: one goal per slot
        for e in range(3):
            start = first.setdefault((e, int(episode[e])), actions[e].copy())
            live = mask[e]
            np.testing.assert_array_equal(actions[e][live], start[live], err_msg=f"copy {e} at step {t[e]}")
    assert len(first) == 9
    assert len(np.unique(np.stack(list(first.values())))) > 1, "the first goals are free: a uniform layer varies"


def test_a_per_child_mask_is_refused_on_a_broadcast_layer_naming_the_shape() -> None:
    scenario, cfg = make_scenario(max_steps=6, mid_interval=1, choice="broadcast")
    hier = HierarchyEnv(with_mid(scenario, goal_mask=hold), cfg, n_envs=2, seed=0)
    with pytest.raises(ScenarioError, match=r"returned bool \(2, 2, \d, 3\), expected bool \(2, 2, 3\)"):
        run(hier, 1)


def test_without_a_goal_mask_upper_decisions_carry_no_action_mask() -> None:
    scenario, cfg = make_scenario(max_steps=6, mid_interval=1)
    assert all(amask is None for _, _, amask, _ in run(HierarchyEnv(scenario, cfg, seed=0), 6))


def test_a_node_with_no_legal_goal_may_give_any() -> None:
    scenario, cfg = make_scenario(max_steps=6, mid_interval=1)
    none = with_mid(scenario, goal_mask=lambda ctx: np.zeros(ctx.alive.shape + (3,), bool))
    for _, _, amask, _ in run(HierarchyEnv(none, cfg, seed=0), 6):
        assert amask.all()


def test_a_mask_of_the_wrong_shape_names_the_layer_the_expected_shape_and_the_fix() -> None:
    scenario, cfg = make_scenario(max_steps=6)
    bad = with_mid(scenario, goal_mask=lambda ctx: np.ones(ctx.alive.shape, bool))
    hier = HierarchyEnv(bad, cfg, n_envs=2, seed=0)
    with pytest.raises(ScenarioError, match=r"goal_mask of layer 'mid' returned bool \(2, 2\), expected bool "
                                            r"\(2, 2, 3\) or \(2, 2, 2, 3\)\n  fix: return a bool array"):
        run(hier, 1)


@pytest.mark.parametrize("layer, space, problem", [
    ("low", None, "bottom layer 'low' sets goal_mask"),
    ("mid", gym.spaces.Box(-1, 1, (2,)), "layer 'mid' sets goal_mask on a Box goal space")])
def test_goal_mask_where_no_discrete_goal_is_chosen_is_refused_when_the_scenario_loads(layer, space, problem) -> None:
    scenario, cfg = make_scenario(max_steps=6)
    fields = {"goal_mask": lambda ctx: None} | ({} if space is None else {"goal_space": space})

    def layers(c):
        return [dataclasses.replace(lay, **fields) if lay.name == layer else lay for lay in scenario.layers(c)]
    with pytest.raises(ScenarioError, match=problem):
        HierarchyEnv(dataclasses.replace(scenario, layers=layers), cfg, seed=0)


def test_the_layer_view_of_a_masked_layer_observes_its_mask_as_pettingzoo_does() -> None:
    scenario, cfg = make_scenario(max_steps=6, mid_interval=1)
    view = LayerView(with_mid(scenario, goal_mask=shifting), "mid", cfg, seed=0)
    obs, _ = view.reset(seed=0)
    agent = view.agents[0]
    assert isinstance(view.observation_space(agent), gym.spaces.Dict)
    assert view.observation_space(agent)["action_mask"].shape == (3,)
    for t in range(3):
        for a in view.agents:
            node = view.info.slot_names.index(a) // view.hier.idx[1].shape[2]
            want = (np.arange(3) == (t + node) % 3) | (np.arange(3) == 0)
            np.testing.assert_array_equal(obs[a]["action_mask"], want.astype(np.int8))
        obs, *_ = view.step({a: 0 for a in view.agents})
