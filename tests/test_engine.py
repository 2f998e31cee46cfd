"""The DPPO engine: backend parity, learning on small seeded budgets, servers, checkpoints."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hdppo.checkpoint import load_checkpoint, save_checkpoint
from hdppo.params import MemoryParams
from hdppo.scenario import load_scenario
from hdppo.server import ParameterServer, aggregation_weights
from hdppo.train_config import resolve_overrides, train_config_to_dict
from hdppo.trainer import RunSpec, Trainer, layer_infos
from hdppo.worker import GradResult, Worker, WorkerSpec

GRID_LAYERS = ["high", "mid", "low"]
LOW_ON_GOALS = {"w_ext.low": "0", "w_int.low": "1", "lr": "1e-3", "rollout": "16", "progress": "false"}


def train(out: Path, layers: list[str], scenario: str = "grid", frozen: dict | None = None, **overrides) -> Trainer:
    names = [s.name for s in load_scenario(scenario).build_layers(load_scenario(scenario).make_config())]
    keys = set(load_scenario(scenario).make_config().__dataclass_fields__)
    tc, scen = resolve_overrides({k: str(v) for k, v in overrides.items()}, names, keys)
    t = Trainer(RunSpec(scenario, scen, tc, layers, frozen or {}, out))
    t.run()
    return t


def params_of(run: Path, layer: str) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in load_checkpoint(run / "checkpoints" / layer)[0].items()}


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


def test_inline_and_process_give_identical_parameters(tmp_path):
    common = dict(steps=1500, workers=2, envs_per_worker=2, seed=3, progress="false", rollout=32)
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
    common = dict(steps=600, workers=1, envs_per_worker=2, backend="inline", progress="false", rollout=16)
    a = params_of(train(tmp_path / "a", ["low"], seed=1, **common).out, "low")
    b = params_of(train(tmp_path / "b", ["low"], seed=1, **common).out, "low")
    c = params_of(train(tmp_path / "c", ["low"], seed=2, **common).out, "low")
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not all(np.array_equal(a[k], c[k]) for k in a)


@pytest.mark.parametrize("mode,sync", [("gradients", "sync"), ("gradients", "async"),
                                       ("experience", "sync"), ("experience", "async")])
def test_low_layer_learns_its_goals_in_every_mode(tmp_path, mode, sync):
    """--layer low with sampled goals: goal success well above the untrained policy."""
    run = train(tmp_path / "run", ["low"], steps=16000, workers=2, envs_per_worker=8, backend="inline",
                seed=0, mode=mode, sync=sync, **LOW_ON_GOALS).out
    before = goal_success(run, initial_checkpoint(tmp_path / "init"))
    after = goal_success(run, run / "checkpoints" / "low")
    assert after > before + 0.15, (before, after)


def random_team(episodes: int, seed: int) -> dict[str, float]:
    """Team return and targets claimed when every layer acts uniformly at random."""
    from hdppo.controllers import uniform_policy
    from hdppo.hierarchy import HierarchyEnv
    sc = load_scenario("grid")
    hier = HierarchyEnv(sc, n_envs=8, seed=seed)
    pols = [uniform_policy(inf, seed + inf.index) for inf in hier.info]
    done: list[dict] = []
    while len(done) < episodes:
        done += hier.step(lambda d: pols[d.layer](d)).episodes
    return {k: float(np.mean([e[k] for e in done[:episodes]])) for k in ("team_return", "targets_claimed")}


def test_all_layers_beat_a_random_team(tmp_path):
    from hdppo.evaluate import evaluate
    run = train(tmp_path / "run", GRID_LAYERS, steps=30000, workers=2, envs_per_worker=8, backend="inline",
                seed=0, lr="1e-3", rollout="16", progress="false").out
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


def _server(lc_overrides=None):
    sc = load_scenario("grid")
    info = layer_infos(sc, sc.make_config(), 0)[2]
    tc, _ = resolve_overrides(lc_overrides or {}, GRID_LAYERS, set())
    return ParameterServer(info, tc.layers["low"], seed=0)


def test_sync_apply_equals_one_step_on_the_weighted_mean_gradient():
    s1, s2 = _server({"max_grad_norm": "1e9"}), _server({"max_grad_norm": "1e9"})
    rng = np.random.default_rng(0)
    g = [rng.normal(size=s1.n_params).astype(np.float32) for _ in range(2)]
    stats = {"pg_loss": 0, "v_loss": 0, "entropy": 0, "approx_kl": 0, "clipfrac": 0}
    s1.apply([GradResult("low", 0, 0, 10, g[0], stats), GradResult("low", 1, 0, 30, g[1], stats)])
    s2.apply([GradResult("low", 0, 0, 1, (0.25 * g[0] + 0.75 * g[1]).astype(np.float32), stats)])
    np.testing.assert_allclose(s1.params(), s2.params(), rtol=1e-6, atol=1e-7)
    assert s1.version == 1


def test_async_drops_gradients_older_than_max_staleness():
    s = _server({"max_staleness": "1"})
    g = np.ones(s.n_params, np.float32)
    assert s.apply_async(GradResult("low", 0, 0, 5, g, {}))          # staleness 0
    assert s.apply_async(GradResult("low", 0, 0, 5, g, {}))          # staleness 1
    assert not s.apply_async(GradResult("low", 0, 0, 5, g, {}))      # staleness 2 > 1: dropped
    assert s.stats.dropped == 1 and s.version == 2 and s.stats.staleness == {0: 1, 1: 1, 2: 1}


def test_schedules_decay_lr_and_entropy():
    s = _server()
    s.set_progress(0.0)
    assert s.optimizer.param_groups[0]["lr"] == pytest.approx(3e-4) and s.ent_coef == pytest.approx(0.01)
    s.set_progress(0.5)
    assert s.optimizer.param_groups[0]["lr"] == pytest.approx(1.5e-4) and s.ent_coef == pytest.approx(0.0055)
    s.set_progress(1.0)
    assert s.ent_coef == pytest.approx(0.001)


def test_server_state_round_trip_restores_adam_exactly(tmp_path):
    s = _server()
    rng = np.random.default_rng(1)
    for _ in range(3):
        s.apply_async(GradResult("low", 0, s.version, 4, rng.normal(size=s.n_params).astype(np.float32), {}))
    tensors, meta = s.state()
    save_checkpoint(tmp_path / "ck", tensors, meta)
    t = _server()
    t.load_state(*load_checkpoint(tmp_path / "ck"))
    g = rng.normal(size=s.n_params).astype(np.float32)
    s.apply_async(GradResult("low", 0, s.version, 4, g, {}))
    t.apply_async(GradResult("low", 0, t.version, 4, g, {}))
    np.testing.assert_array_equal(s.params(), t.params())
    assert t.version == s.version == 4


def test_async_process_backend_trains_and_counts_staleness(tmp_path):
    run = train(tmp_path / "run", ["low"], steps=3000, workers=2, envs_per_worker=2, backend="process",
                seed=0, sync="async", max_staleness=0, rollout=16, progress="false").out
    _, meta = load_checkpoint(run / "checkpoints" / "low")
    assert meta["version"] > 0
    import csv
    rows = list(csv.DictReader(open(run / "metrics" / "low.csv")))
    assert rows and "staleness_mean" in rows[-1]
    # two workers racing with max_staleness 0: gradients that arrive a version late are dropped
    assert float(rows[-1]["staleness_max"]) >= 1
    assert meta["dropped"] > 0 and meta["updates"] > 0


def test_centralized_critic_and_role_embeddings_train(tmp_path):
    run = train(tmp_path / "run", GRID_LAYERS, steps=1200, workers=1, envs_per_worker=2, backend="inline",
                seed=0, centralized="true", roles="true", rollout=16, progress="false").out
    for layer in GRID_LAYERS:
        tensors, meta = load_checkpoint(run / "checkpoints" / layer)
        assert meta["policy"]["centralized"] and meta["policy"]["n_roles"] > 0
        assert any("roles" in k for k in tensors)
        assert meta["version"] > 0


def test_box_goals_train_and_stay_inside_their_space(tmp_path):
    """An upper layer with a Box goal space: Gaussian head, actions clipped into the space."""
    example = str(Path(__file__).resolve().parents[1] / "examples" / "scenarios" / "adversary.py")
    sc = load_scenario(example)
    cfg = sc.make_config({"continuous": True})
    names = [s.name for s in sc.build_layers(cfg)]
    tc, _ = resolve_overrides({"steps": "800", "workers": "1", "envs_per_worker": "2", "backend": "inline",
                               "rollout": "20", "progress": "false"}, names, set())
    t = Trainer(RunSpec(example, {"continuous": True}, tc, names, {}, tmp_path / "run"))
    t.run()
    info = t.infos[0]
    import gymnasium as gym
    assert isinstance(info.action_space, gym.spaces.Box)
    _, meta = load_checkpoint(tmp_path / "run" / "checkpoints" / info.name)
    assert meta["version"] > 0
