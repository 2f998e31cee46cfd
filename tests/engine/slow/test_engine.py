"""The DPPO engine: backend parity, learning on small seeded budgets, servers, checkpoints."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hdppo.engine.checkpoint import load_checkpoint, save_checkpoint
from hdppo.engine.config import resolve_overrides, train_config_to_dict
from hdppo.engine.params import MemoryParams
from hdppo.engine.server import ParameterServer, aggregation_weights
from hdppo.engine.spec import RunSpec, layer_infos
from hdppo.engine.trainer import Trainer
from hdppo.engine.worker import GradResult, Worker, WorkerSpec
from hdppo.team.scenario import load_scenario
from tests.helpers import ROOT
from tests.helpers.engine import GRID_LAYERS, grid_server, params_of, train

LOW_ON_GOALS = {"w_ext.low": "0", "w_int.low": "1", "lr": "1e-3", "rollout": "16", "progress": "false"}


def goal_success(run: Path, layer_ckpt: Path, steps: int = 300, seed: int = 99, **scenario) -> float:
    """Low-layer goal success of a checkpoint acting under uniformly sampled goals."""
    tc, _ = resolve_overrides({"envs_per_worker": "8", "seed": str(seed)}, GRID_LAYERS, set())
    spec = WorkerSpec("grid", scenario, train_config_to_dict(tc), 0, trained=[], frozen={"low": str(layer_ckpt)})
    w = Worker(spec, MemoryParams())
    for _ in range(steps):
        w.hier.step(w._act)
    return w.hier.pop_goal_stats()["low"]


def initial_checkpoint(path: Path, layer: str = "low", seed: int = 0, **scenario) -> Path:
    """The untrained policy a run starts from, saved like a trained one."""
    sc = load_scenario("grid")
    info = layer_infos(sc, sc.make_config(scenario), 0)[GRID_LAYERS.index(layer)]
    tc, _ = resolve_overrides({}, GRID_LAYERS, set())
    server = ParameterServer(info, tc.layers[layer], seed=seed * 31 + GRID_LAYERS.index(layer))
    tensors, meta = server.state()
    save_checkpoint(path, tensors, meta)
    return path


@pytest.mark.long(40)
def test_inline_and_process_give_identical_parameters(tmp_path):
    # epochs=2: the backends' equality does not need the default's 16 passes (half the test's CPU)
    common = dict(steps=1500, workers=2, envs_per_worker=2, seed=3, progress="false", rollout=32, epochs=2)
    a = train(tmp_path / "inline", GRID_LAYERS, backend="inline", **common)
    b = train(tmp_path / "process", GRID_LAYERS, backend="process", **common)
    for layer in GRID_LAYERS:
        pa, pb = params_of(a.out, layer), params_of(b.out, layer)
        assert pa.keys() == pb.keys()
        for k in pa:
            np.testing.assert_array_equal(pa[k], pb[k], err_msg=f"{layer}:{k}")
    versions = [load_checkpoint(a.out / "checkpoints" / layer)[1]["version"] for layer in GRID_LAYERS]
    assert all(v > 0 for v in versions)


def test_same_seed_same_run_and_other_seed_differs(tmp_path):
    common = dict(steps=600, workers=1, envs_per_worker=2, backend="inline", progress="false", rollout=16, epochs=2)
    a = params_of(train(tmp_path / "a", ["low"], seed=1, **common).out, "low")
    b = params_of(train(tmp_path / "b", ["low"], seed=1, **common).out, "low")
    c = params_of(train(tmp_path / "c", ["low"], seed=2, **common).out, "low")
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not all(np.array_equal(a[k], c[k]) for k in a)


@pytest.mark.parametrize("mode,sync", [("gradients", "sync"), ("gradients", "async"),
                                       ("experience", "sync"), ("experience", "async")])
@pytest.mark.long(25)
def test_low_layer_learns_its_goals_in_every_mode(tmp_path, mode, sync):
    """--layer low with sampled goals: goal success well above the untrained policy (0.45). Measured
    at these 8,000 steps: 0.71, 0.77, 0.73 and 0.80 after (gradients sync/async, experience
    sync/async); at 16,000 steps, the test's budget until 2026-12-03, 0.84 and 0.79 for gradients."""
    run = train(tmp_path / "run", ["low"], steps=8000, workers=2, envs_per_worker=8, backend="inline",
                seed=0, mode=mode, sync=sync, **LOW_ON_GOALS).out
    before = goal_success(run, initial_checkpoint(tmp_path / "init"))
    after = goal_success(run, run / "checkpoints" / "low")
    assert after > before + 0.15, (before, after)


def random_team(episodes: int, seed: int) -> dict[str, float]:
    """Team return and targets claimed when every layer acts uniformly at random."""
    from hdppo.team.controllers import uniform_policy
    from hdppo.team.hierarchy import HierarchyEnv
    sc = load_scenario("grid")
    hier = HierarchyEnv(sc, n_envs=8, seed=seed)
    pols = [uniform_policy(inf, seed + inf.index) for inf in hier.info]
    done: list[dict] = []
    while len(done) < episodes:
        done += hier.step(lambda d: pols[d.layer](d)).episodes
    return {k: float(np.mean([e[k] for e in done[:episodes]])) for k in ("team_return", "targets_claimed")}


@pytest.mark.long(50)
def test_all_layers_beat_a_random_team(tmp_path):
    """Three layers trained together beat uniformly random layers. epochs=4: the default's 16 passes
    took 2.6x the time for the same verdict (seed 0, margins over the random team: return +1.26 and
    claimed +0.25 at 4 epochs, +1.82 and +0.32 at 16; the bars are +0.4 and +0.1)."""
    from hdppo.runtime.evaluate import evaluate
    run = train(tmp_path / "run", GRID_LAYERS, steps=15000, workers=2, envs_per_worker=8, backend="inline",
                seed=0, lr="1e-3", rollout="16", progress="false", epochs=4).out
    trained = evaluate(run, episodes=64, seed=5)
    baseline = random_team(64, seed=5)
    assert trained["team_return"][0] > baseline["team_return"] + 0.4, (trained, baseline)
    assert trained["targets_claimed"][0] > baseline["targets_claimed"] + 0.1, (trained, baseline)


def test_server_aggregates_by_samples_uniform_and_return():
    counts, rets = np.array([1, 3, 0]), np.array([0.0, 1.0, 5.0])
    np.testing.assert_allclose(aggregation_weights("samples", counts, rets), [0.25, 0.75, 0.0])
    np.testing.assert_allclose(aggregation_weights("uniform", counts, rets), [0.5, 0.5, 0.0])
    w = aggregation_weights("return", counts, rets)
    assert w[2] == 0 and w[1] > w[0] and w.sum() == pytest.approx(1.0)


def test_sync_apply_equals_one_step_on_the_weighted_mean_gradient():
    s1, s2 = grid_server({"max_grad_norm": "1e9"}), grid_server({"max_grad_norm": "1e9"})
    rng = np.random.default_rng(0)
    g = [rng.normal(size=s1.n_params).astype(np.float32) for _ in range(2)]
    stats = {"pg_loss": 0, "v_loss": 0, "entropy": 0, "approx_kl": 0, "clipfrac": 0}
    s1.apply([GradResult("low", 0, 0, 10, g[0], stats), GradResult("low", 1, 0, 30, g[1], stats)])
    s2.apply([GradResult("low", 0, 0, 1, (0.25 * g[0] + 0.75 * g[1]).astype(np.float32), stats)])
    np.testing.assert_allclose(s1.params(), s2.params(), rtol=1e-6, atol=1e-7)
    assert s1.version == 1


def test_async_drops_gradients_older_than_max_staleness():
    s = grid_server({"max_staleness": "1"})
    g = np.ones(s.n_params, np.float32)
    assert s.apply_async(GradResult("low", 0, 0, 5, g, {}))          # staleness 0
    assert s.apply_async(GradResult("low", 0, 0, 5, g, {}))          # staleness 1
    assert not s.apply_async(GradResult("low", 0, 0, 5, g, {}))      # staleness 2 > 1: dropped
    assert s.stats.dropped == 1 and s.version == 2 and s.stats.staleness == {0: 1, 1: 1, 2: 1}


def test_schedules_decay_lr_and_entropy():
    s = grid_server({"lr_decay": "true"})
    s.set_progress(0.0)
    assert s.optimizer.param_groups[0]["lr"] == pytest.approx(3e-4) and s.ent_coef == pytest.approx(0.01)
    s.set_progress(0.5)
    assert s.optimizer.param_groups[0]["lr"] == pytest.approx(1.5e-4) and s.ent_coef == pytest.approx(0.0055)
    s.set_progress(1.0)
    assert s.ent_coef == pytest.approx(0.001)
    constant = grid_server()                # the default keeps lr constant; entropy still decays
    constant.set_progress(0.5)
    assert constant.optimizer.param_groups[0]["lr"] == pytest.approx(3e-4)
    assert constant.ent_coef == pytest.approx(0.0055)


def test_server_state_round_trip_restores_adam_exactly(tmp_path):
    s = grid_server()
    rng = np.random.default_rng(1)
    for _ in range(3):
        s.apply_async(GradResult("low", 0, s.version, 4, rng.normal(size=s.n_params).astype(np.float32), {}))
    tensors, meta = s.state()
    save_checkpoint(tmp_path / "ck", tensors, meta)
    t = grid_server()
    t.load_state(*load_checkpoint(tmp_path / "ck"))
    g = rng.normal(size=s.n_params).astype(np.float32)
    s.apply_async(GradResult("low", 0, s.version, 4, g, {}))
    t.apply_async(GradResult("low", 0, t.version, 4, g, {}))
    np.testing.assert_array_equal(s.params(), t.params())
    assert t.version == s.version == 4


def test_async_staleness_with_real_workers_at_known_versions():
    """Async DPPO, made deterministic: two real workers compute gradients of their own rollouts; the
    fast one reads every version the server publishes, the slow one's store lags at chosen versions.
    The server applies a gradient up to max_staleness versions old and drops (and counts) older ones."""
    from hdppo.engine.learner import flat_params
    tc, _ = resolve_overrides({"envs_per_worker": "2", "rollout": "16", "seed": "0", "sync": "async",
                               "max_staleness": "1", "backend": "inline"}, GRID_LAYERS, set())
    sc = load_scenario("grid")
    server = ParameterServer(layer_infos(sc, sc.make_config(), 0)[2], tc.layers["low"], seed=0)
    fast_store, slow_store = MemoryParams(), MemoryParams()
    for store in (fast_store, slow_store):
        store.publish("low", server.version, server.ent_coef, server.params())
    fast = Worker(WorkerSpec("grid", {}, train_config_to_dict(tc), 0, trained=["low"]), fast_store)
    slow = Worker(WorkerSpec("grid", {}, train_config_to_dict(tc), 1, trained=["low"]), slow_store)
    assert fast.collect().due == ["low"] and slow.collect().due == ["low"]
    history = {0: server.params()}                         # parameters of every version the server made

    def send(worker, mb, want_version, applied):
        before = server.params()
        g = worker.gradient("low", 0, mb)
        assert g.version == want_version and g.n > 0 and np.abs(g.grad).sum() > 0
        np.testing.assert_array_equal(flat_params(worker.by_name["low"].policy), history[want_version])
        assert server.apply_async(g) is applied
        if applied:
            assert not np.array_equal(server.params(), before)
            history[server.version] = server.params()
            fast_store.publish("low", server.version, server.ent_coef, server.params())
        else:
            np.testing.assert_array_equal(server.params(), before)   # a dropped gradient changes nothing

    send(fast, 0, want_version=0, applied=True)              # staleness 0 -> version 1
    send(slow, 0, want_version=0, applied=True)              # staleness 1 (= max_staleness) -> version 2
    send(slow, 1, want_version=0, applied=False)             # staleness 2 > 1: dropped
    send(fast, 1, want_version=2, applied=True)              # the fast worker read version 2: -> version 3
    slow_store.publish("low", 1, server.ent_coef, history[1])
    send(slow, 2, want_version=1, applied=False)             # version 1 against 3: staleness 2, dropped
    slow_store.publish("low", server.version, server.ent_coef, server.params())
    send(slow, 3, want_version=3, applied=True)              # caught up: staleness 0 -> version 4
    assert server.version == 4 and server.stats.updates == 4 and server.stats.dropped == 2
    assert server.stats.staleness == {0: 3, 1: 1, 2: 2}
    _, meta = server.state()
    assert (meta["version"], meta["updates"], meta["dropped"]) == (4, 4, 2)


def test_async_process_backend_trains_and_counts_staleness(tmp_path):
    """Two processes racing in async mode: how many gradients arrive late depends on timing, but the
    bookkeeping must add up whatever happened (max_staleness 0: applied = staleness 0, dropped = the rest)."""
    from hdppo.engine.metrics import read_csv
    run = train(tmp_path / "run", ["low"], steps=3000, workers=2, envs_per_worker=2, backend="process",
                seed=0, sync="async", max_staleness=0, rollout=16, epochs=2, progress="false").out
    _, meta = load_checkpoint(run / "checkpoints" / "low")
    rows = read_csv(run, "low")
    assert rows
    last = rows[-1]
    counts = {int(k[len("staleness_"):]): int(v) for k, v in last.items()
              if k.startswith("staleness_") and k[len("staleness_"):].isdigit() and v == v}
    assert min(counts) >= 0 and counts.get(0, 0) >= 1          # the first gradient is always fresh
    assert meta["updates"] == counts[0] == int(last["optimizer_steps"])
    # value_norm statistics are published as versions of their own, one per worker batch
    assert meta["version"] == meta["updates"] + meta["stat_versions"] >= int(last["version"])
    assert meta["stat_versions"] >= 2
    assert meta["dropped"] == sum(n for s, n in counts.items() if s > 0) == int(last["dropped_gradients"])
    assert last["staleness_max"] == max(counts)
    assert last["staleness_mean"] == pytest.approx(sum(s * n for s, n in counts.items()) / sum(counts.values()))
    # every worker rollout of 16 steps x 2 copies yields epochs x minibatches gradients
    lc = resolve_overrides({"epochs": "2"}, GRID_LAYERS, set())[0].layers["low"]
    assert sum(counts.values()) % (lc.epochs * lc.minibatches) == 0


def _trained_policies(run: Path, tc) -> dict[str, tuple]:
    """Per layer: (policy as trained, policy as the run started it), rebuilt from the checkpoints."""
    from hdppo.engine.checkpoint import load_module_state
    from hdppo.engine.learner import build_policy
    sc = load_scenario("grid")
    out = {}
    for i, info in enumerate(layer_infos(sc, sc.make_config(), tc.seed)):
        tensors, meta = load_checkpoint(run / "checkpoints" / info.name)
        assert meta["policy"]["centralized"] and meta["policy"]["n_roles"] == int(info.slot_roles.max()) + 1
        trained = build_policy(info, tc.layers[info.name], 0)
        load_module_state(trained, tensors)
        initial = build_policy(info, tc.layers[info.name], tc.seed * 31 + i)    # the server's seed
        out[info.name] = (trained, initial)
    return out


@pytest.mark.long(45)
def test_centralized_critic_and_role_embeddings_train(tmp_path):
    """What the options do when the workers act: the critic reads the other slots of the env copy and
    the actor does not; role embeddings tell apart slots with the same observation; training moves them."""
    import torch

    from hdppo.engine.learner import flat_params
    from hdppo.team.interfaces import Decision
    t = train(tmp_path / "run", GRID_LAYERS, steps=1200, workers=1, envs_per_worker=2, backend="inline",
              seed=0, centralized="true", roles="true", rollout=16, epochs=2, progress="false")
    policies = _trained_policies(t.out, t.tc)
    for layer, (trained, initial) in policies.items():
        before, after = dict(initial.named_parameters()), dict(trained.named_parameters())
        for name in ("actor_roles.weight", "critic_roles.weight", "critic_body.0.weight"):
            assert not torch.equal(before[name], after[name]), f"{layer}: training left {name} unchanged"

    # a worker acting with the trained weights, as the run's workers do
    store = MemoryParams()
    for layer, (trained, _) in policies.items():
        store.publish(layer, 1, 0.0, flat_params(trained))
    w = Worker(WorkerSpec("grid", {}, train_config_to_dict(t.tc), 0, trained=GRID_LAYERS), store)
    w.pull()
    rng = np.random.default_rng(0)
    for i, rt in enumerate(w.layers):
        assert rt.version == 1 and rt.lc.centralized and rt.roles is not None
        alive = w.hier.slot_alive(i)
        assert alive[0, :2].all(), "slots 0 and 1 of copy 0 are alive at the start"

        def run(obs):
            a, logp, v, _ = w._sample(rt.policy, Decision(i, obs, alive.copy()), rt.roles, True, deterministic=True)
            return a, logp, v

        obs = w.hier.decision_obs(i).astype(np.float32).copy()
        a, logp, v = run(obs)
        # another slot's observation changes, slot 0's own stays: slot 0's value moves, its action does not
        other = obs.copy()
        other[0, 1] += rng.normal(0.0, 1.0, size=other.shape[2]).astype(np.float32)
        a2, logp2, v2 = run(other)
        assert abs(float(v2[0, 0] - v[0, 0])) > 1e-4, f"{rt.info.name}: the critic ignores the other slots"
        np.testing.assert_array_equal(a2[0, 0], a[0, 0])
        np.testing.assert_array_equal(logp2[0, 0], logp[0, 0])
        np.testing.assert_array_equal(v2[1], v[1])           # the other env copy is a different joint state

        # every slot of copy 0 sees the same observation: only the role tells them apart
        same = obs.copy()
        same[0, :] = obs[0, 0]
        _, logp3, v3 = run(same)
        rows = torch.from_numpy(same[0])
        roles = torch.from_numpy(rt.roles)
        logits = rt.policy.distribution(rows, roles=roles).logits.detach().numpy()
        for s in range(1, rt.info.n_slots):
            if rt.roles[s] == rt.roles[0]:
                np.testing.assert_allclose(logits[s], logits[0], rtol=1e-6)
                assert v3[0, s] == pytest.approx(float(v3[0, 0]), rel=1e-6)
            else:
                assert not np.allclose(logits[s], logits[0], rtol=0, atol=1e-6), (rt.info.name, s)
                assert abs(float(v3[0, s] - v3[0, 0])) > 1e-5, (rt.info.name, s)


def _watch_box_goals(monkeypatch, seen: dict) -> None:
    """Record, from every Worker in this process, the Gaussian samples of a Box goal layer (layer 0), the
    goals the HierarchyEnv stores for its children and what the children observe as their goal."""
    orig_sample, orig_act = Worker._sample, Worker._act

    def sample(self, policy, d, *args, **kw):
        out = orig_sample(self, policy, d, *args, **kw)
        if d.layer == 0:
            seen["raw"].append(out[0].copy())
            self._pending_goals = (out[0].copy(), d.mask.copy())
        return out

    def act(self, d):
        actions = orig_act(self, d)
        if d.layer == 1:
            seen["stored"].append(self.hier.goals[1].copy())
            off = self.hier.info[1].feature_space.shape[0]
            # the adversary example grounds a goal as (vector to the goal landmark) + goal offset
            seen["observed"].append(d.obs[..., off:off + 2] - d.obs[..., 0:2])
            pending = getattr(self, "_pending_goals", None)
            if pending is not None:          # goals set at this step: the clipped samples of the deciding slots
                raw, mask = pending
                seen["decided"].append((raw[mask], self.hier.goals[1][mask]))
                self._pending_goals = None
            seen["unit_actions"].append(actions.copy())
        return actions

    monkeypatch.setattr(Worker, "_sample", sample)
    monkeypatch.setattr(Worker, "_act", act)


def test_box_goals_train_and_stay_inside_their_space(tmp_path, monkeypatch):
    """An upper layer with a Box goal space: its Gaussian samples leave the space, but the goals its
    children get, and observe, are those samples clipped into it, during and after training."""
    example = str(ROOT / "examples" / "scenarios" / "adversary.py")
    sc = load_scenario(example)
    cfg = sc.make_config({"continuous": True})
    names = [s.name for s in sc.build_layers(cfg)]
    seen = {k: [] for k in ("raw", "stored", "observed", "decided", "unit_actions")}
    _watch_box_goals(monkeypatch, seen)
    tc, _ = resolve_overrides({"steps": "800", "workers": "1", "envs_per_worker": "2", "backend": "inline",
                               "rollout": "20", "progress": "false"}, names, set())
    t = Trainer(RunSpec(example, {"continuous": True}, tc, names, {}, tmp_path / "run"))
    t.run()
    info = t.infos[0]
    import gymnasium as gym
    space = info.action_space
    assert isinstance(space, gym.spaces.Box) and space.shape == (2,)
    low, high = space.low, space.high
    _, meta = load_checkpoint(tmp_path / "run" / "checkpoints" / info.name)
    assert meta["version"] > 0

    raw = np.concatenate([r.reshape(-1, 2) for r in seen["raw"]])
    assert len(raw) >= 100
    outside = (raw < low) | (raw > high)
    assert outside.any(axis=1).mean() > 0.2, "the Gaussian head never left the box: clipping is not exercised"

    def assert_goals_inside(key: str, atol: float = 0.0):
        g = np.concatenate([x.reshape(-1, 2) for x in seen[key]])
        assert (g >= low - atol).all() and (g <= high + atol).all(), (key, g.min(axis=0), g.max(axis=0))

    def assert_clipped_samples_are_the_goals():
        assert seen["decided"]
        for sample, goal in seen["decided"]:
            np.testing.assert_allclose(goal, np.clip(sample, low, high), rtol=0, atol=1e-6)
        for stored, observed in zip(seen["stored"], seen["observed"]):
            np.testing.assert_allclose(observed, stored, rtol=0, atol=1e-5)

    assert_goals_inside("stored")
    assert_goals_inside("observed", atol=1e-5)
    assert_clipped_samples_are_the_goals()
    acts = np.concatenate([a.reshape(-1, 5) for a in seen["unit_actions"]])   # the units' Box(0, 1) forces too
    assert (acts >= 0).all() and (acts <= 1).all()
    assert len(seen["decided"]) >= 800 // (2 * info.interval) // 2

    # after training: the trained commander, sampling, still hands out goals inside the box
    for k in seen:
        seen[k].clear()
    spec = WorkerSpec(example, {"continuous": True}, train_config_to_dict(tc), 0, trained=["low"],
                      frozen={info.name: str(tmp_path / "run" / "checkpoints" / info.name)})
    w = Worker(spec, MemoryParams())
    w.pull = lambda layer=None: None           # the low layer acts with its initial weights
    for _ in range(60):
        w.hier.step(w._act)
    assert_goals_inside("stored")
    assert_goals_inside("observed", atol=1e-5)
    assert_clipped_samples_are_the_goals()
