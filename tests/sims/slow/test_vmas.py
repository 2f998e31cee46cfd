"""VMAS adapter: it steps exactly as VMAS does, maps ends and actions right, its scenarios check and
train, and it fails clearly without VMAS or with an unknown task."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from hdppo.errors import ScenarioError
from hdppo.team.check import run_check

vmas = pytest.importorskip("vmas")
torch = pytest.importorskip("torch")

from vmas.simulator.core import Agent, Sphere, World  # noqa: E402
from vmas.simulator.scenario import BaseScenario  # noqa: E402

from hdppo.sims.vmas import VmasBatch, vmas_scenario  # noqa: E402
from tests.helpers.cli import cli  # noqa: E402

BALANCE = dict(n_agents=3, package_mass=5, random_package_pos_on_line=True)


class Countdown(BaseScenario):
    """Two agents; the task itself ends every copy after `end` steps (a terminal end, not a time limit)."""

    def make_world(self, batch_dim, device, **kwargs):
        self.end = kwargs.pop("end", 3)
        world = World(batch_dim, device)
        for i in range(2):
            world.add_agent(Agent(name=f"agent_{i}", shape=Sphere(0.05)))
        self.t = torch.zeros(batch_dim, device=device)
        return world

    def reset_world_at(self, env_index=None):
        for a in self.world.agents:
            a.set_pos(torch.zeros(2, device=self.world.device), batch_index=env_index)
        if env_index is None:
            self.t[:] = 0
        else:
            self.t[env_index] = 0

    def post_step(self):
        self.t += 1

    def observation(self, agent):
        return torch.cat([agent.state.pos, agent.state.vel], dim=-1)

    def reward(self, agent):
        return -torch.linalg.vector_norm(agent.state.pos, dim=-1)

    def done(self):
        return self.t >= self.end


def _reference(task, n_envs, seed, max_steps, continuous, actions, partial_reset, **kw):
    """VMAS's own stepping of the same actions: per step obs [E, U, D], rewards [E, U], (term, trunc) [E]."""
    env = vmas.make_env(task, num_envs=n_envs, device="cpu", continuous_actions=continuous, max_steps=max_steps,
                        seed=seed, terminated_truncated=True, **kw)
    obs = env.reset(seed=seed)
    out = [np.stack([o.numpy() for o in obs], axis=1)]
    for t, act in enumerate(actions):
        if continuous:
            lo = np.stack([np.asarray(s.low) for s in env.action_space])
            hi = np.stack([np.asarray(s.high) for s in env.action_space])
            act = np.clip(act, lo, hi)
            tensors = [torch.tensor(act[:, i], dtype=torch.float32) for i in range(act.shape[1])]
        else:
            tensors = [torch.tensor(act[:, i:i + 1]) for i in range(act.shape[1])]
        obs, rews, term, trunc, _ = env.step(tensors)
        out.append((np.stack([o.numpy() for o in obs], 1), np.stack([r.numpy() for r in rews], 1),
                    term.numpy(), trunc.numpy()))
        done = term.numpy() | trunc.numpy()
        if t == partial_reset:
            done = done.copy()
            done[1] = True
        if done.all():
            env.reset()
        else:
            for i in np.flatnonzero(done):
                env.reset_at(int(i), return_observations=False)
        obs = env.get_from_scenario(get_observations=True, get_rewards=False, get_infos=False, get_dones=False)[0]
        out.append(np.stack([o.numpy() for o in obs], 1))
    return out


def _adapter(task, n_envs, seed, max_steps, continuous, actions, partial_reset, **kw):
    b = VmasBatch(task, n_envs, max_steps=max_steps, continuous_actions=continuous, seed=seed, **kw)
    b.reset(seed)
    out = [b.obs.copy()]
    for t, act in enumerate(actions):
        res = b.step(act)
        out.append((b.obs.copy(), res.rewards, res.terminated, res.truncated, res.done))
        mask = res.done.copy()
        if t == partial_reset:
            mask[1] = True
        b.reset_done(mask)
        out.append(b.obs.copy())
    return out


@pytest.mark.parametrize("task,continuous,kw", [("balance", True, BALANCE),
                                                ("navigation", False, dict(n_agents=3))])
def test_adapter_steps_exactly_as_vmas(task, continuous, kw):
    """Same seed and actions: identical observations, rewards and ends over two episodes, including
    a batched reset at the time limit and resets of single copies (reset_at)."""
    E, steps, max_steps, partial = 3, 11, 4, 5
    rng = np.random.default_rng(0)
    n = kw["n_agents"]
    actions = [rng.uniform(-1.5, 1.5, (E, n, 2)).astype(np.float32) if continuous
               else rng.integers(0, 9, (E, n)) for _ in range(steps)]
    mine = _adapter(task, E, 5, max_steps, continuous, actions, partial, **kw)
    ref = _reference(task, E, 5, max_steps, continuous, actions, partial, **kw)
    np.testing.assert_array_equal(mine[0], ref[0])
    for k in range(steps):
        obs, rew, term, trunc, done = mine[1 + 2 * k]
        r_obs, r_rew, r_term, r_trunc = ref[1 + 2 * k]
        np.testing.assert_array_equal(obs, r_obs)
        np.testing.assert_array_equal(rew, r_rew)
        np.testing.assert_array_equal(term, np.repeat(r_term[:, None], n, 1))
        np.testing.assert_array_equal(trunc, np.repeat((r_trunc & ~r_term)[:, None], n, 1))
        np.testing.assert_array_equal(done, r_term | r_trunc)
        np.testing.assert_array_equal(mine[2 + 2 * k], ref[2 + 2 * k])       # after the resets
    ends = np.array([m[4] for m in mine[1::2]])             # [steps, E]
    assert ends[max_steps - 1].all()                       # the time limit ended every copy at once
    assert ends[partial + 2, [0, 2]].all() and not ends[partial + 2, 1]   # later, copy 1 out of phase
    after_step, after_reset = mine[1 + 2 * partial][0], mine[2 + 2 * partial]
    assert not np.array_equal(after_reset[1], after_step[1])   # copy 1 restarted (reset_at) ...
    np.testing.assert_array_equal(after_reset[[0, 2]], after_step[[0, 2]])   # ... and only copy 1


def test_task_end_is_terminal_and_time_limit_is_truncation():
    b = VmasBatch(Countdown, 2, max_steps=5, continuous_actions=True, seed=0, end=3)
    b.reset(0)
    zero = np.zeros((2, 2, 2), np.float32)
    for _ in range(2):
        res = b.step(zero)
        assert not res.done.any() and b.alive.all()
    res = b.step(zero)
    assert res.terminated.all() and not res.truncated.any() and res.done.all() and not b.alive.any()
    assert b.episode_info(0)["terminated"] == 1.0
    info = VmasBatch("balance", 2, seed=0, max_steps=3, **BALANCE)
    info.reset(0)
    for _ in range(3):
        res = info.step(np.zeros((2, 3, 2), np.float32))
    assert res.done.all() and set(info.episode_info(1)) == {"terminated", "pos_rew", "ground_rew"}
    b.reset_done(res.done)
    assert b.alive.all()

    b = VmasBatch(Countdown, 2, max_steps=2, continuous_actions=True, seed=0, end=3)
    b.reset(0)
    b.step(zero)
    res = b.step(zero)
    assert res.truncated.all() and not res.terminated.any() and res.done.all()
    assert b.episode_info(1)["terminated"] == 0.0

    b = VmasBatch(Countdown, 2, max_steps=3, continuous_actions=True, seed=0, end=3)
    b.reset(0)
    b.step(zero), b.step(zero)
    res = b.step(zero)                                       # both at once: terminal wins
    assert res.terminated.all() and not res.truncated.any()


def test_continuous_actions_are_clipped_to_each_agent_range_and_state_concatenates_obs():
    b = VmasBatch("balance", 2, seed=1, **BALANCE)
    b.reset(1)
    assert b.action_space.shape == (2,) and np.all(b.action_space.high == 1.0)
    b.step(np.full((2, 3, 2), 50.0, np.float32))             # VMAS itself would refuse these
    assert b.state().shape == (2, 3 * b.obs_space.shape[0])
    np.testing.assert_array_equal(b.state()[0], b.obs[0].reshape(-1))
    assert b.positions().shape == (2, 3, 2)


def test_own_scenario_class_becomes_an_hdppo_scenario(tmp_path):
    """A BaseScenario subclass through vmas_scenario: hdppo check passes on the file."""
    scenario = tmp_path / "my_vmas.py"
    scenario.write_text(
        "from hdppo.sims.vmas import vmas_scenario\n"
        "from vmas.scenarios.debug.goal import Scenario as Goal\n"
        "SCENARIO = vmas_scenario(Goal, name='goal', max_steps=20)\n")
    report = run_check(str(scenario), episodes=1, n_envs=2, seed=0, api_cycles=20)
    assert report.ok, [f"{line.name}: {line.detail}" for line in report.lines if not line.ok]


@pytest.mark.parametrize("target,overrides", [
    ("vmas_balance", {"layers": "3"}),
    ("vmas_navigation", {"continuous_actions": "false"}),
    ("vmas_transport_squads", {"layers": "1"}),
])
def test_builtin_variants_pass_check(target, overrides):
    """Defaults are checked by test_check_all; here the other team shapes and action kinds."""
    report = run_check(target, overrides, episodes=1, n_envs=2, seed=0, api_cycles=20)
    assert report.ok, [f"{line.name}: {line.detail}" for line in report.lines if not line.ok]


def test_training_the_squads_writes_checkpoints(tmp_path, capsys):
    out = tmp_path / "run"
    rc, _, err = cli(capsys, "train", "vmas_transport_squads", "--layer", "all", "--steps", "2000", "--backend",
                     "inline", "--workers", "1", "--seed", "0", "--no-progress", "envs_per_worker=4",
                     "rollout=20", "epochs=1", "minibatches=1", "--out", out)
    assert rc == 0, err
    for layer in ("high", "mid", "low"):
        assert (out / "checkpoints" / layer / "meta.json").is_file()


def test_scenarios_lists_the_vmas_scenarios(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    rc, out, _ = cli(capsys, "scenarios")
    assert rc == 0
    for name in ("vmas_balance", "vmas_navigation", "vmas_transport", "vmas_simple_spread", "vmas_transport_squads"):
        assert name in out and "does not load" not in out


def test_unknown_task_names_the_known_ones():
    with pytest.raises(ScenarioError) as exc:
        VmasBatch("no_such_task", 2)
    assert "no task named 'no_such_task'" in exc.value.problem and "balance" in exc.value.fix


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_is_a_config_error():
    from hdppo.errors import ConfigError
    with pytest.raises(ConfigError) as exc:
        VmasBatch("balance", 2, device="cuda", **BALANCE)
    assert "sim_device=cpu" in exc.value.fix


def test_a_task_parameter_vmas_does_not_use_is_an_error():
    with pytest.raises(ScenarioError) as exc:
        VmasBatch("balance", 1, n_agents=3, pakage_mass=5)
    assert "pakage_mass" in exc.value.problem


def test_missing_vmas_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "vmas", None)           # `import vmas` now raises ImportError
    with pytest.raises(ScenarioError) as exc:
        vmas_scenario("balance").batched_env(vmas_scenario("balance").make_config(), 2, 0)
    assert "not installed" in exc.value.problem and "pip install" in exc.value.fix
