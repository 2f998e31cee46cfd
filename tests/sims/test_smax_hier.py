"""SMAX's target hierarchy without JAX: grounding an enemy goal from a made-up world state."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from hdppo.sims.smax import world_units
from hdppo.sims.smax_hier import flat_intrinsic, ground, held_targets, living_enemies, nearest_enemy, squad_origin


def world(units: list[tuple[float, float, float]]) -> np.ndarray:
    """A 1-copy SMAX world state from (health fraction, x, y) per unit: 10 features each, then team and type."""
    per = np.zeros((len(units), 10), np.float32)
    per[:, :3] = units
    return np.concatenate([per.ravel(), np.zeros(2 * len(units), np.float32)])[None]


SZ = SimpleNamespace(A=2, K=2, F=7, scale=32.0, members=np.array([[True, True]]))
# ally 0 at (8, 16), ally 1 dead; enemy 0 at (24, 8) with half health, enemy 1 dead
W = world([(1.0, 8, 16), (0.0, 0, 0), (0.5, 24, 8), (0.0, 0, 0)])


def test_world_units_reads_positions_and_health() -> None:
    pos, hp = world_units(W, 4)
    np.testing.assert_array_equal(pos[0], [[8, 16], [0, 0], [24, 8], [0, 0]])
    np.testing.assert_array_equal(hp[0], [1.0, 0.0, 0.5, 0.0])


def test_a_living_enemy_grounds_as_its_vector_health_and_index() -> None:
    got = ground(W, np.array([[[8.0, 16.0]]]), np.array([[True]]), np.array([[0]]), SZ)[0, 0]
    np.testing.assert_allclose(got, [0.5, -0.25, np.hypot(0.5, 0.25), 0.5, 1.0, 1.0, 0.0], rtol=1e-6)


def test_a_dead_enemy_or_a_dead_child_grounds_without_a_vector() -> None:
    dead_enemy = ground(W, np.array([[[8.0, 16.0]]]), np.array([[True]]), np.array([[1]]), SZ)[0, 0]
    np.testing.assert_array_equal(dead_enemy, [0, 0, 0, 0, 0, 0, 1])
    dead_child = ground(W, np.zeros((1, 1, 2)), np.array([[False]]), np.array([[0]]), SZ)[0, 0]
    np.testing.assert_array_equal(dead_child, [0, 0, 0, 0.5, 1, 1, 0])


def test_a_squad_is_placed_at_its_living_units_centroid() -> None:
    centre, live = squad_origin(W, SZ)
    np.testing.assert_array_equal(centre[0], [[8, 16]])                     # the dead ally does not count
    assert live.tolist() == [[True]]
    gone, live = squad_origin(world([(0, 0, 0), (0, 0, 0), (0.5, 24, 8), (0, 0, 0)]), SZ)
    assert live.tolist() == [[False]] and not gone.any()


class _Env:
    """The two world states flat_intrinsic reads: before and after one step."""

    def __init__(self, before: np.ndarray, after: np.ndarray) -> None:
        self.before, self.after = before, after

    def state_before_step(self) -> np.ndarray:
        return self.before

    def state(self) -> np.ndarray:
        return self.after


SZ3 = SimpleNamespace(A=2, K=3, F=8, scale=32.0)
# ally 0 at (0, 0), ally 1 at (30, 0); enemy 0 at (4, 0) (1.0), enemy 1 at (2, 0) but dead, enemy 2 at (26, 0) (0.5)
BEFORE = world([(1.0, 0, 0), (1.0, 30, 0), (1.0, 4, 0), (0.0, 2, 0), (0.5, 26, 0)])


def test_each_ally_is_paired_with_its_nearest_living_enemy() -> None:
    k, has = nearest_enemy(BEFORE, SZ3)
    assert k.tolist() == [[0, 2]] and has.tolist() == [[True, True]]       # enemy 1 is nearer ally 0, but dead


def test_the_flat_shaping_pays_what_the_nearest_enemy_lost() -> None:
    after = world([(1.0, 0, 0), (1.0, 30, 0), (0.75, 4, 0), (0.0, 2, 0), (0.0, 26, 0)])    # enemy 2 killed
    got = flat_intrinsic(SZ3)(SimpleNamespace(env=_Env(BEFORE, after)))
    np.testing.assert_allclose(got, [[0.25, 0.5]])                         # a kill pays what it had left


def test_the_flat_shaping_pays_nothing_to_the_dead_nor_for_healing_nor_without_enemies() -> None:
    dead_ally = world([(1.0, 0, 0), (0.0, 30, 0), (1.0, 4, 0), (0.0, 2, 0), (0.5, 26, 0)])
    after = world([(1.0, 0, 0), (0.0, 30, 0), (1.0, 4, 0), (0.0, 2, 0), (0.0, 26, 0)])
    np.testing.assert_array_equal(flat_intrinsic(SZ3)(SimpleNamespace(env=_Env(dead_ally, after))), [[0.0, 0.0]])
    fresh = world([(1.0, 0, 0), (1.0, 30, 0), (1.0, 4, 0), (1.0, 2, 0), (1.0, 26, 0)])   # a reset: health back up
    np.testing.assert_array_equal(flat_intrinsic(SZ3)(SimpleNamespace(env=_Env(BEFORE, fresh))), [[0.0, 0.0]])
    none_left = world([(1.0, 0, 0), (1.0, 30, 0), (0.0, 4, 0), (0.0, 2, 0), (0.0, 26, 0)])
    k, has = nearest_enemy(none_left, SZ3)
    assert has.tolist() == [[False, False]]
    np.testing.assert_array_equal(flat_intrinsic(SZ3)(SimpleNamespace(env=_Env(none_left, none_left))), [[0.0, 0.0]])


def test_the_commander_and_squads_may_name_only_living_enemies() -> None:
    """Enemy 1 is dead in W: every node's row allows enemy 0 only (a goal naming enemy 1 would be a
    decision wasted until the next one: it never succeeds and grounds without a vector)."""
    ctx = SimpleNamespace(env=_Env(W, W), alive=np.ones((1, 3), bool))
    np.testing.assert_array_equal(living_enemies(SZ)(ctx), [[[True, False]] * 3])
    both = world([(1.0, 8, 16), (1.0, 9, 16), (0.5, 24, 8), (0.2, 20, 8)])
    assert living_enemies(SZ)(SimpleNamespace(env=_Env(W, both), alive=np.ones((1, 1), bool))).all()


def test_with_hold_a_child_keeps_its_living_target_and_the_others_choose_among_the_living() -> None:
    """Three enemies, enemy 1 dead. One node, three child slots: slot 0 holds enemy 2 (alive: kept),
    slot 1 holds enemy 1 (dead: free among 0 and 2), slot 2 holds nothing yet (free)."""
    sz = SimpleNamespace(A=1, K=3)
    three = world([(1.0, 8, 16), (0.4, 20, 8), (0.0, 0, 0), (1.0, 24, 8)])
    ctx = SimpleNamespace(env=_Env(three, three), child_goals=np.array([[[2, 1, 0]]]),
                          child_holds=np.array([[[True, True, False]]]))
    np.testing.assert_array_equal(held_targets(sz)(ctx)[0, 0], [[False, False, True], [True, False, True],
                                                                [True, False, True]])


def _decision(legal: np.ndarray) -> SimpleNamespace:
    """An untrained commander's decision over E copies x S squads, with its goal mask `legal` [E, S, K]."""
    return SimpleNamespace(mask=np.ones(legal.shape[:2], bool), action_mask=legal, obs=None)


def test_the_team_sampler_gives_every_squad_of_a_copy_one_living_enemy() -> None:
    """goal_sampler=team over 3 squads and 4 enemies: copy 0 has enemies 1 and 3 alive, copy 1 none
    left (any enemy then). Each copy's squads share one draw, among the allowed, uniform over them,
    the same draws for the same seed."""
    from hdppo.sims.smax_hier import team_target
    legal = np.zeros((2, 3, 4), bool)
    legal[0, :, [1, 3]] = True
    act = team_target(SimpleNamespace(K=4))
    draws = [act(_decision(legal), rng=rng) for rng in [np.random.default_rng(0)] for _ in range(400)]
    goals = np.stack(draws)                                                   # [400, E, S]
    assert (goals == goals[..., :1]).all()                                    # one target per copy
    assert set(goals[:, 0, 0].tolist()) == {1, 3}
    assert abs((goals[:, 0, 0] == 1).mean() - 0.5) < 0.1                      # uniform over the allowed
    assert set(goals[:, 1, 0].tolist()) == {0, 1, 2, 3}                       # none alive: any
    again = np.stack([act(_decision(legal), rng=rng) for rng in [np.random.default_rng(0)] for _ in range(400)])
    np.testing.assert_array_equal(goals, again)


def test_with_hold_the_team_sampler_leaves_a_squad_its_held_target() -> None:
    """hold=true: squad 2 holds enemy 0 (its mask allows only that); squads 0 and 1 are free among the
    living 0, 1 and 3 and share their draw."""
    from hdppo.sims.smax_hier import team_target
    legal = np.zeros((1, 3, 4), bool)
    legal[0, :2, [0, 1, 3]] = True
    legal[0, 2, 0] = True
    act, rng = team_target(SimpleNamespace(K=4)), np.random.default_rng(1)
    goals = np.stack([act(_decision(legal), rng=rng)[0] for _ in range(200)])   # [200, S]
    assert (goals[:, 2] == 0).all() and (goals[:, 0] == goals[:, 1]).all()
    assert set(goals[:, 0].tolist()) == {0, 1, 3}
