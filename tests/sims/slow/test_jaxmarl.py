"""JaxMARL adapter: it steps exactly as JaxMARL's own `step` for the same keys and actions, keeps the
batch contract and its seeds, and maps SMAX's deaths, ends and wins. Each batch shape compiles for
seconds, so these sit in slow/; the tests share one env (3m, 20 steps) and E in {1, 3}."""
from __future__ import annotations

import numpy as np
import pytest

from hdppo.errors import ConfigError
from hdppo.sims.jaxmarl import JaxmarlBatch, cached_env
from hdppo.sims.smax import SmaxBatch, smax_env
from tests.helpers import JAXMARL
from tests.helpers.batch import assert_copies_match

pytestmark = JAXMARL

SHORT = dict(max_steps=20)          # short episodes, so a few dozen steps cross several resets


def _env(map_name: str = "3m", **kw):
    return cached_env(smax_env, dict(map_name=map_name, **{**SHORT, **kw}))


def legal(batch, rng: np.random.Generator) -> np.ndarray:
    """A random legal action per unit (stop for the dead)."""
    keys = np.where(batch.action_mask, rng.random(batch.action_mask.shape), -1.0)
    return keys.argmax(-1)


class Reference:
    """JaxMARL's own stepping of E copies, one by one: copy e's key PRNGKey(seed + e), split each
    step; `env.step` (with its auto-reset) for the next state, `env.step_env` for the last view."""

    def __init__(self, env, n_envs: int, seed: int) -> None:
        import jax  # here, not at collection (seconds on every xdist worker)
        self.env, self.agents = env, env.agents
        self.keys = [jax.random.PRNGKey(seed + e) for e in range(n_envs)]
        self.states, self.obs = [], []
        for e in range(n_envs):
            self.keys[e], k = jax.random.split(self.keys[e])
            obs, state = env.reset(k)
            self.states.append(state)
            self.obs.append(obs)

    def view(self, e: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        av = self.env.get_avail_actions(self.states[e])
        return (np.stack([np.asarray(self.obs[e][a]) for a in self.agents]), np.asarray(self.obs[e]["world_state"]),
                np.stack([np.asarray(av[a]) for a in self.agents]).astype(bool))

    def step(self, e: int, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        """(last obs, rewards, unit dones, done) of copy e; its state moves on (reset when done)."""
        import jax
        act = {a: jax.numpy.asarray(actions[i], jax.numpy.int32) for i, a in enumerate(self.agents)}
        self.keys[e], k = jax.random.split(self.keys[e])
        last, _, _, _, _ = self.env.step_env(jax.random.split(k)[0], self.states[e], act)
        obs, state, rew, dones, _ = self.env.step(k, self.states[e], act)
        self.states[e], self.obs[e] = state, obs
        return (np.stack([np.asarray(last[a]) for a in self.agents]), np.array([float(rew[a]) for a in self.agents]),
                np.array([bool(dones[a]) for a in self.agents]), bool(dones["__all__"]))


@pytest.mark.parametrize("dead_units", ["stay", "leave"])
def test_adapter_steps_exactly_as_jaxmarl(dead_units):
    """Same keys and actions over 60 steps (3 episode ends per copy at least): equal observations,
    world states, avail actions, rewards and ends, the auto-reset included. `stay`: every unit
    gets JaxMARL's reward and ends with the episode; `leave`: a unit leaves when it dies."""
    E, seed = 3, 7
    env = _env()
    batch = SmaxBatch(env, E, seed, dead_units=dead_units)
    batch.reset(seed)
    ref = Reference(env, E, seed)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(60):
        for e in range(E):
            obs, world, avail = ref.view(e)
            if dead_units == "stay":
                np.testing.assert_array_equal(batch.obs[e], obs)
            np.testing.assert_array_equal(batch.state()[e], world)
            np.testing.assert_array_equal(batch.action_mask[e], avail)
        actions = legal(batch, rng)
        was_alive = batch.alive.copy()
        out = batch.step(actions)
        for e in range(E):
            last, rew, unit_done, done = ref.step(e, actions[e])
            live = was_alive[e]
            np.testing.assert_array_equal(batch.obs[e][live], last[live])
            np.testing.assert_array_equal(out.rewards[e], np.where(live, rew, 0.0).astype(np.float32))
            ends_now = live & done if dead_units == "stay" else live & (unit_done | done)
            np.testing.assert_array_equal(out.terminated[e] | out.truncated[e], ends_now)
            assert out.done[e] == done
        ends += int(out.done.sum())
        batch.reset_done(out.done)
    assert ends >= 3 * E


def test_the_dead_stay_by_default_and_keep_the_team_reward():
    """SMAX pays a dead ally its team's reward "to allow for noble sacrifice": by default a unit
    that died stays in the episode (alive to hdppo, only stop legal) and gets that reward, so the
    actions that led to its death are credited with what its team earns after it."""
    E, seed = 3, 7
    env = _env()
    batch = SmaxBatch(env, E, seed)
    batch.reset(seed)
    ref = Reference(env, E, seed)
    rng = np.random.default_rng(0)
    paid_dead = 0
    for _ in range(60):
        actions = legal(batch, rng)
        out = batch.step(actions)
        for e in range(E):
            _, rew, unit_done, done = ref.step(e, actions[e])
            dead = unit_done & (not done)
            if dead.any():
                assert batch.alive[e][dead].all() and not (out.terminated[e] | out.truncated[e])[dead].any()
                assert not batch.action_mask[e][dead][:, :4].any()          # the dead may only stop
                np.testing.assert_array_equal(out.rewards[e][dead], rew[dead].astype(np.float32))
                paid_dead += int((rew[dead] != 0).sum())
        batch.reset_done(out.done)
    assert paid_dead >= 1          # some dead ally was paid for its team's damage


def test_dead_units_refuses_an_unknown_choice():
    with pytest.raises(ConfigError, match=r"dead_units='gone'.*stay"):
        SmaxBatch(_env(), 1, 0, dead_units="gone")


def test_copies_stepped_together_equal_single_copies():
    n = assert_copies_match(lambda n, seed: SmaxBatch(_env(), n, seed), n_envs=3, steps=45, act=legal)
    assert n >= 3


def test_seeded_runs_repeat_and_seeds_differ():
    def run(seed: int) -> list[np.ndarray]:
        b = SmaxBatch(_env(), 3, seed)
        b.reset(seed)
        rng = np.random.default_rng(1)
        out = [b.obs.copy()]
        for _ in range(25):
            res = b.step(legal(b, rng))
            b.reset_done(res.done)
            out.append(b.obs.copy())
        return out
    a, b, c = run(3), run(3), run(4)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not all(np.array_equal(x, z) for x, z in zip(a, c))


def test_time_limit_truncates_and_a_decided_battle_terminates():
    b = SmaxBatch(_env(max_steps=3), 3, 0)
    b.reset(0)
    stop = np.full((3, 3), 4)              # every unit stands still: nobody is in range, nobody dies
    for _ in range(3):                     # SMAX checks its step count before counting the step:
        assert not b.step(stop).done.any()     # max_steps=3 ends after the 4th
    res = b.step(stop)
    assert res.done.all() and res.truncated.all() and not res.terminated.any()
    assert b.episode_info(0) == {"terminated": 0.0, "win": 0.0, "allies_alive": 1.0, "enemies_killed": 0.0}
    b.reset_done(res.done)
    assert b.alive.all()


def test_dead_units_leave_and_a_lost_battle_is_no_win():
    b = SmaxBatch(_env(), 1, 0, dead_units="leave")
    b.reset(0)
    stop = np.full((1, 3), 4)          # standing still, the allies are shot down one by one (in 13 steps)
    deaths = 0
    for _ in range(21):
        alive = b.alive.copy()
        res = b.step(stop)
        died = alive & ~b.alive & ~res.done[:, None]
        deaths += int(died.sum())
        assert (res.terminated[died]).all() and not res.truncated[died].any()
        if died.any():
            assert not b.action_mask[died][:, :4].any()      # the dead may only stop
        if res.done.any():
            break
    assert res.done[0] and res.terminated[0][alive[0]].all()
    info = b.episode_info(0)
    assert info["terminated"] == 1.0 and info["win"] == 0.0 and info["allies_alive"] == 0.0 and deaths == 2


def test_any_jaxmarl_env_plugs_in():
    """A registered JaxMARL env with no masks or world state (MPE simple spread): the generic adapter."""
    b = JaxmarlBatch(cached_env("MPE_simple_spread_v3", {}), 3, 0)
    b.reset(0)
    assert b.action_mask is None and b.state().shape == (3, 3 * b.obs.shape[2])
    for _ in range(25):                                   # 25 steps, ended after the 26th as in JaxMARL
        assert not b.step(np.zeros((3, 3), np.int64)).done.any()
    res = b.step(np.zeros((3, 3), np.int64))
    assert res.done.all() and res.truncated.all() and b.episode_info(0) == {"terminated": 0.0}
