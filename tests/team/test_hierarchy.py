"""HierarchyEnv semantics against plain reference loops: SMDP rewards/discounts, deaths, goals, aggregation."""
from __future__ import annotations

import numpy as np
import pytest

from hdppo.team import aggregate as agg
from hdppo.team.controllers import uniform_policy
from hdppo.team.hierarchy import HierarchyEnv
from tests.helpers.scripted_env import make_scenario, reward_of


def run_episode(hier: HierarchyEnv, policy=None):
    """Step one copy until its first episode ends; returns the recorded closes per layer."""
    pols = [uniform_policy(inf, 3) for inf in hier.info]
    closes = {inf.name: [] for inf in hier.info}
    opened = {inf.name: {} for inf in hier.info}
    for _ in range(100):
        def act(d):
            t = int(d.t[0])
            for s in np.flatnonzero(d.mask[0]):
                opened[hier.info[d.layer].name][int(s)] = t
            return (policy or pols[d.layer])(d) if policy is None else policy(d)
        t_now = int(hier.t[0])
        res = hier.step(act)
        for inf, step in zip(hier.info, res.layers):
            for s in np.flatnonzero(step.closed[0]):
                closes[inf.name].append((inf.slot_names[s], opened[inf.name][int(s)], t_now,
                                         float(step.reward[0, s]), float(step.discount[0, s]),
                                         bool(step.terminal[0, s]), bool(step.truncated[0, s])))
        if res.done[0]:
            return closes, res.episodes[0]
    raise AssertionError("episode did not end")


def reference(cfg, gamma):
    """Expected closes from a plain per-slot loop over the episode (independent of the arrays)."""
    U, size, T = cfg.n_units, cfg.squad_size, cfg.max_steps
    death = {u: int(cfg.deaths.get(str(u), 10**9)) for u in range(U)}
    end = min(T - 1, max(death.values()))        # last step of the episode
    squads = [list(range(s * size, (s + 1) * size)) for s in range(U // size)]
    units_of = {"low": [[u] for u in range(U)], "mid": squads, "high": [list(range(U))]}
    interval = {"low": 1, "mid": cfg.mid_interval, "high": cfg.high_interval}

    def alive(units, t):       # alive at the start of step t
        return any(t <= death[u] for u in units)

    def node_reward(units, t):
        return sum(reward_of(t, u) for u in units if t <= death[u])

    expected = {}
    for layer in ("high", "mid", "low"):
        out = []
        nodes = units_of[layer]
        if layer == "low":
            slots = [(f"u{u}", [u], [u]) for u in range(U)]
        elif cfg.choice == "per_child":
            below = units_of["mid"] if layer == "high" else units_of["low"]
            per = len(below) // len(nodes)
            slots = [(f"{layer}_{n}/{j}", nodes[n], below[n * per + j]) for n in range(len(nodes)) for j in range(per)]
        else:
            slots = [(f"{layer}_{n}", nodes[n], nodes[n]) for n in range(len(nodes))]
        k = interval[layer]
        for name, node_units, life_units in slots:
            for d in range(0, end + 1, k):
                if not alive(life_units, d):
                    continue
                r, j = 0.0, d
                while True:
                    r += gamma ** (j - d) * node_reward(node_units, j)
                    died = not alive(life_units, j + 1)
                    if j == end or died:
                        all_dead = all(death[u] <= j for u in range(U))
                        trunc = j == T - 1 and not died
                        if died and j == T - 1:   # died exactly at the time limit: terminated wins
                            trunc = False
                        term = not trunc and (died or all_dead)
                        disc = 0.0 if term else gamma ** (j - d + 1)
                        out.append((name, d, j, r, disc, term, trunc))
                        break
                    if j - d + 1 == k:
                        out.append((name, d, j, r, gamma ** k, False, False))
                        break
                    j += 1
        expected[layer] = sorted(out)
    return expected


CASES = [
    dict(),                                                      # truncation, full intervals
    dict(max_steps=7),                                           # truncation inside every upper interval
    dict(deaths={"0": 1}),                                       # a unit dies mid-interval
    dict(deaths={"0": 1, "1": 2}),                               # a whole squad dies inside an interval
    dict(deaths={"0": 2, "1": 2, "2": 5, "3": 4}),                # everyone dies: terminated before the limit
    dict(deaths={"3": 7}),                                       # death at the time-limit step
    dict(choice="broadcast", deaths={"1": 0, "2": 3}),
    dict(mid_interval=3, high_interval=6, max_steps=11, deaths={"2": 4}),
]


@pytest.mark.parametrize("case", CASES)
def test_smdp_rewards_and_discounts_match_reference_loop(case):
    scenario, cfg = make_scenario(gamma=0.9, **case)
    hier = HierarchyEnv(scenario, cfg, n_envs=1, seed=0)
    closes, episode = run_episode(hier)
    want = reference(cfg, 0.9)
    for layer in ("high", "mid", "low"):
        got = sorted(closes[layer])
        assert want[layer], layer
        assert [g[:3] for g in got] == [w[:3] for w in want[layer]], layer
        for g, w in zip(got, want[layer]):
            assert g[3] == pytest.approx(w[3], rel=1e-5), (layer, g, w)
            assert g[4] == pytest.approx(w[4], rel=1e-6), (layer, g, w)
            assert g[5:] == w[5:], (layer, g, w)


def test_hand_computed_squad_death_inside_interval():
    # gamma 0.5; squad 0 = u0 (dies at step 1) + u1 (dies at step 2); mid interval 4
    scenario, cfg = make_scenario(gamma=0.5, deaths={"0": 1, "1": 2}, mid_interval=4, high_interval=4)
    hier = HierarchyEnv(scenario, cfg, n_envs=1, seed=0)
    closes, _ = run_episode(hier)
    # u0 rewards: 11, 12 ; u1 rewards: -10.5, -11, -11.5 (steps 0..2)
    step_r = [11 - 10.5, 12 - 11, -11.5]
    want = step_r[0] + 0.5 * step_r[1] + 0.25 * step_r[2]
    (name, start, end, r, disc, term, trunc), = [c for c in closes["mid"] if c[0] == "mid_0/1"]
    assert (start, end, term, trunc, disc) == (0, 2, True, False, 0.0)
    assert r == pytest.approx(want)
    (_, _, end0, r0, disc0, term0, _), = [c for c in closes["mid"] if c[0] == "mid_0/0"]
    # the pair whose child u0 died ends at step 1 with the squad's reward over steps 0..1
    assert (end0, term0, disc0) == (1, True, 0.0) and r0 == pytest.approx(step_r[0] + 0.5 * step_r[1])


def test_dead_units_never_get_actions_and_inactive_nodes_make_no_transitions():
    scenario, cfg = make_scenario(deaths={"0": 0, "1": 1}, max_steps=9)
    hier = HierarchyEnv(scenario, cfg, n_envs=1, seed=0)
    closes, _ = run_episode(hier)    # ScriptedEnv raises if an action reaches a dead unit
    assert all(c[1] == 0 for c in closes["low"] if c[0] in ("u0",))
    assert max(c[1] for c in closes["low"] if c[0] == "u1") == 1
    assert all(c[1] <= 1 for c in closes["mid"] if c[0].startswith("mid_0"))   # squad 0 is gone after step 1
    assert not [c for c in closes["high"] if c[0] == "high_0/0" and c[1] > 0]


def _goal_policy(hier, layer_goals):
    def act(d):
        info = hier.info[d.layer]
        if d.layer in layer_goals:
            return np.broadcast_to(np.asarray(layer_goals[d.layer]), (1, info.n_slots)).astype(np.int64)
        return np.zeros((1, info.n_slots), dtype=np.int64)
    return act


def test_per_child_gives_each_child_its_own_goal():
    scenario, cfg = make_scenario(choice="per_child")
    hier = HierarchyEnv(scenario, cfg, n_envs=1, seed=0)
    hier.step(_goal_policy(hier, {0: [1, 0], 1: [2, 0, 1, 2]}))
    assert hier.goals[1][0].tolist() == [1, 0]
    assert hier.goals[2][0].tolist() == [2, 0, 1, 2]
    # the grounded goal (one-hot by default) is appended to each unit's observation
    obs = hier.decision_obs(2)[0]
    assert obs[:, -3:].argmax(axis=1).tolist() == [2, 0, 1, 2]


def test_broadcast_gives_all_children_the_parent_goal():
    scenario, cfg = make_scenario(choice="broadcast")
    hier = HierarchyEnv(scenario, cfg, n_envs=1, seed=0)
    assert hier.info[1].n_slots == 2 and hier.info[0].n_slots == 1
    hier.step(_goal_policy(hier, {0: [1], 1: [2, 1]}))
    assert hier.goals[1][0].tolist() == [1, 1]
    assert hier.goals[2][0].tolist() == [2, 2, 1, 1]


def test_goals_change_only_at_the_parents_interval():
    """What units and squads observe as their goal changes only when their parent decides, even though
    the parents pick a new goal at every one of their decisions."""
    scenario, cfg = make_scenario(choice="per_child", mid_interval=2, high_interval=4, max_steps=8)
    hier = HierarchyEnv(scenario, cfg, n_envs=1, seed=0)
    n_goals = {0: 2, 1: 3}                               # high picks squad goals in 0..1, mid unit goals in 0..2
    calls = {0: 0, 1: 0}
    seen = {1: [], 2: []}                                # layer -> [(t, goal observed per slot)]
    offset = {1: hier.info[1].feature_space.shape[0], 2: hier.info[2].feature_space.shape[0]}

    def act(d):
        info = hier.info[d.layer]
        t = int(d.t[0])
        if d.layer > 0:
            g = d.obs[0, :, offset[d.layer]:offset[d.layer] + n_goals[d.layer - 1]]
            assert set(np.unique(g)) <= {0.0, 1.0} and (g.sum(axis=1) == 1).all(), g   # one-hot
            seen[d.layer].append((t, g.argmax(axis=1).tolist()))
        if d.layer == 2:
            return np.zeros((1, info.n_slots), dtype=np.int64)
        calls[d.layer] += 1                              # a new goal for every slot at every decision
        return ((calls[d.layer] + np.arange(info.n_slots)) % n_goals[d.layer])[None].astype(np.int64)

    for _ in range(8):
        hier.step(act)
    # units decide every step; mid's k-th decision (t = 2k) gave unit u the goal (k + 1 + u) % 3
    assert [t for t, _ in seen[2]] == list(range(8))
    assert seen[2] == [(t, [(t // 2 + 1 + u) % 3 for u in range(4)]) for t in range(8)]
    changed = [t for t in range(1, 8) if seen[2][t][1] != seen[2][t - 1][1]]
    assert changed == [2, 4, 6]
    # squads decide at t = 0, 2, 4, 6; each (squad, child) slot sees its squad's goal from high's k-th
    # decision (t = 4k): (k + 1 + squad) % 2
    assert seen[1] == [(t, [(t // 4 + 1 + s // 2) % 2 for s in range(4)]) for t in (0, 2, 4, 6)]


def _reference_features(feat, alive, children):
    out = []
    for kids in children:
        live = [c for c in kids if alive[c]]
        if live:
            mean = np.mean([feat[c] for c in live], axis=0)
            mx = np.max([feat[c] for c in live], axis=0)
        else:
            mean = mx = np.zeros(feat.shape[1])
        out.append(np.concatenate([mean, mx, [len(live) / len(kids)]]))
    return np.array(out)


def test_default_features_match_reference_loop():
    rng = np.random.default_rng(0)
    for _ in range(20):
        E, Nc, D = 3, int(rng.integers(2, 9)), int(rng.integers(1, 5))
        n = int(rng.integers(1, Nc + 1))
        groups = np.array_split(rng.permutation(Nc), n)
        C = max(len(g) for g in groups)
        idx = np.zeros((E, n, C), dtype=np.int64)
        struct = np.zeros((E, n, C), dtype=bool)
        for j, g in enumerate(groups):
            idx[:, j, :len(g)] = g
            struct[:, j, :len(g)] = True
        feat = rng.normal(size=(E, Nc, D)).astype(np.float32)
        alive = rng.random((E, Nc)) < 0.6
        got = agg.default_features(feat, alive, idx, struct)
        for e in range(E):
            want = _reference_features(feat[e], alive[e], [list(g) for g in groups])
            np.testing.assert_allclose(got[e], want, rtol=1e-5, atol=1e-6)


def test_sum_children_matches_reference_loop():
    rng = np.random.default_rng(1)
    idx = np.array([[[0, 2], [1, 3]]])
    mask = np.array([[[True, True], [True, False]]])
    vals = rng.normal(size=(1, 4))
    got = agg.sum_children(vals, idx, mask)
    np.testing.assert_allclose(got[0], [vals[0, 0] + vals[0, 2], vals[0, 1]])


def test_many_copies_equal_single_copies():
    """Batched copies step exactly like one copy each (same seeds, same actions)."""
    from hdppo.team.scenario import load_scenario
    sc = load_scenario("spread")
    cfg = sc.make_config({"max_cycles": 12})
    many = HierarchyEnv(sc, cfg, n_envs=3, seed=5)
    singles = [HierarchyEnv(sc, cfg, n_envs=1, seed=5 + e) for e in range(3)]
    rng = np.random.default_rng(0)
    for _ in range(30):
        acts = {}

        def act_many(d):
            info = many.info[d.layer]
            a = rng.integers(info.action_space.n, size=(3, info.n_slots))
            acts[d.layer] = a
            return a
        res = many.step(act_many)
        for e, one in enumerate(singles):
            r1 = one.step(lambda d: acts[d.layer][e:e + 1])
            for a, b in zip(res.layers, r1.layers):
                np.testing.assert_array_equal(a.closed[e], b.closed[0])
                np.testing.assert_allclose(a.reward[e], b.reward[0], rtol=1e-6)
            np.testing.assert_allclose(many.decision_obs(2)[e], one.decision_obs(2)[0], rtol=1e-6)


def test_spatial_groups_are_recomputed_at_every_reset():
    """Squads formed by position at reset: each squad holds the units nearest each other."""
    import dataclasses

    from hdppo.team.graph import AgentGraph, spatial_groups
    from hdppo.team.scenario import load_scenario
    grid = load_scenario("grid")
    scenario = dataclasses.replace(
        grid, graph=lambda cfg, agents: AgentGraph.groups(agents, [cfg.squad_size], spatial=True))
    cfg = scenario.make_config({"n_units": 6, "squad_size": 3, "size": 9, "max_steps": 3})
    hier = HierarchyEnv(scenario, cfg, n_envs=3, seed=4)
    seen = set()
    for _ in range(4):
        pos = hier.env.positions()
        for e in range(3):
            want = spatial_groups(pos[e].astype(float), 3)
            got = np.zeros(6, dtype=int)
            for squad in range(2):
                got[hier.idx[1][e, squad][hier.struct[1][e, squad]]] = squad
            # same partition as the reference grouping (squad labels may differ)
            assert {frozenset(np.flatnonzero(got == g)) for g in range(2)} == \
                   {frozenset(np.flatnonzero(want == g)) for g in range(2)}
            seen.add(tuple(got))
        pols = [uniform_policy(inf, 0) for inf in hier.info]
        for _ in range(3):   # max_steps=3: every copy ends its episode and regroups
            hier.step(lambda d: pols[d.layer](d))
    assert len(seen) > 1      # the grouping really changes between episodes
