"""What crosses the network per update of each layer, computed from the real policies (and measured).

Per layer and per worker, one update of the layer moves:

- gradients mode: `epochs x minibatches` parameter vectors down (each minibatch call carries the
  version the server published after the previous one) and as many gradient vectors up, all
  float32, so `2 x epochs x minibatches x 4 x params` bytes;
- experience mode: one parameter vector down and the worker's batch up: one row per decision of a
  living slot, `rollout / interval x envs_per_worker x slots` rows at most, each row the slot's
  observation (float32), its action, logp, value, advantage and return (float32), plus the action
  mask, role and centralized-critic input when the layer uses them.

`layer_costs` computes these numbers; `measured_costs` runs one inline worker until every layer has
been due and weighs the objects a backend actually ships (pickled, as Ray serialises them).
`python -m examples.studies.netcost spread grid` prints the table in docs/engine.md.
"""
from __future__ import annotations

import argparse
import pickle
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np

FLOAT = 4   # bytes of a float32


@dataclass
class LayerCost:
    layer: str
    interval: int
    slots: int                 # decision slots per env copy (nodes, or (parent, child) pairs)
    obs_dim: int
    params: int                # parameter count of the layer's actor-critic
    param_bytes: int           # one parameter vector (float32): a pull
    rows: int                  # transitions per worker per update, at most (experience batch rows)
    row_bytes: int             # bytes of one transition in a Batch
    calls: int                 # gradient calls per worker per update (epochs x minibatches)
    gradients_down: int        # bytes per worker per update, gradients mode: parameters received
    gradients_up: int          # ... gradients sent
    experience_down: int       # bytes per worker per update, experience mode: parameters received
    experience_up: int         # ... the batch sent

    @property
    def gradients_total(self) -> int:
        return self.gradients_down + self.gradients_up

    @property
    def experience_total(self) -> int:
        return self.experience_down + self.experience_up


def row_bytes(info: Any, lc: Any, has_mask: bool = False) -> int:
    """Bytes of one transition of a layer's Batch (see `hdppo.engine.learner.Batch`): obs (float32), action
    (int64, or float32 per Box dimension), logp, value, advantage and return (float32), plus the action
    mask (one bool per action), the role (int64) and the centralized critic's input (3 x obs) when used."""
    space = info.action_space
    discrete = isinstance(space, gym.spaces.Discrete)
    action = 8 if discrete else FLOAT * int(np.prod(space.shape or (1,)))
    n = info.obs_dim * FLOAT + action + 4 * FLOAT
    if has_mask and discrete:
        n += int(space.n)
    if lc.roles:
        n += 8
    if lc.centralized:
        n += 3 * info.obs_dim * FLOAT
    return n


def _setup(scenario: str, scenario_overrides: dict | None, train_overrides: dict | None):
    from hdppo.engine.config import resolve_overrides
    from hdppo.engine.spec import layer_infos
    from hdppo.team.scenario import load_scenario
    sc = load_scenario(scenario)
    cfg0 = sc.make_config()
    names = [s.name for s in sc.build_layers(cfg0)]
    keys = set(cfg0.__dataclass_fields__)
    overrides = {k: str(v) for k, v in (train_overrides or {}).items()}
    overrides.update({k: str(v) for k, v in (scenario_overrides or {}).items()})
    tc, scen = resolve_overrides(overrides, names, keys)
    cfg = sc.make_config(scen)
    return sc, cfg, scen, tc, layer_infos(sc, cfg, tc.seed)


def layer_costs(scenario: str, scenario_overrides: dict | None = None,
                train_overrides: dict | None = None) -> list[LayerCost]:
    """Bytes per worker per update of every layer (top to bottom), computed from the policies the
    trainer would build. `train_overrides` are `hdppo train` keys (`envs_per_worker`, `low.rollout`)."""
    from hdppo.engine.learner import build_policy
    sc, cfg, _, tc, infos = _setup(scenario, scenario_overrides, train_overrides)
    from hdppo.team.hierarchy import HierarchyEnv
    probe = HierarchyEnv(sc, cfg, n_envs=1, seed=tc.seed)
    try:
        has_mask = probe.env.action_mask is not None
    finally:
        probe.close()
    out = []
    for i, info in enumerate(infos):
        lc = tc.layer(info.name)
        params = sum(p.numel() for p in build_policy(info, lc, 0).parameters())
        pbytes = params * FLOAT
        # a slot closes rollout / interval transitions per rollout on average (a transition still open
        # at the end of a rollout is carried into the next one)
        rows = round(lc.rollout_steps(info.interval) * tc.envs_per_worker * info.n_slots / info.interval)
        rb = row_bytes(info, lc, has_mask and i == len(infos) - 1)
        calls = lc.epochs * lc.minibatches
        out.append(LayerCost(info.name, info.interval, info.n_slots, info.obs_dim, params, pbytes, rows, rb, calls,
                             gradients_down=calls * pbytes, gradients_up=calls * pbytes,
                             experience_down=pbytes, experience_up=rows * rb))
    return out


def _pickled(obj: Any) -> int:
    return len(pickle.dumps(obj, protocol=5))


def measured_costs(scenario: str, scenario_overrides: dict | None = None,
                   train_overrides: dict | None = None, max_collects: int = 64) -> dict[str, dict[str, int]]:
    """Run one inline worker until every trained layer has been due once and weigh, per layer, what a
    backend ships: the parameter vector, one gradient answer and the experience answer (pickled with
    protocol 5, as Ray serialises them; numpy buffers count once). Also the batch's rows."""
    from hdppo.engine.config import train_config_to_dict
    from hdppo.engine.learner import flat_params
    from hdppo.engine.messages import WorkerSpec
    from hdppo.engine.params import MemoryParams
    from hdppo.engine.worker import Worker
    _, _, scen, tc, infos = _setup(scenario, scenario_overrides, train_overrides)
    names = [i.name for i in infos]
    worker = Worker(WorkerSpec(scenario, scen, train_config_to_dict(tc), 0, names), MemoryParams())
    got: dict[str, dict[str, int]] = {}
    try:
        for rt in worker.layers:
            assert rt.policy is not None                  # every layer is trained here (trained=names)
            worker.params.publish(rt.info.name, 0, rt.lc.ent_coef, flat_params(rt.policy))
        for _ in range(max_collects):
            result = worker.collect()
            for name in result.due:
                if name in got:
                    continue
                rt = worker.by_name[name]
                assert rt.policy is not None
                grad = worker.gradient(name, 0, 0)
                assert grad.grad is not None                  # a due layer has a batch, so a gradient
                version, batch = worker.experience(name)
                assert batch is not None                      # due in this collect, so it has one
                batch_bytes = sum(getattr(batch, k).nbytes for k in
                                  ("obs", "actions", "logp", "values", "advantages", "returns", "action_mask",
                                   "roles", "critic_obs") if getattr(batch, k) is not None)
                got[name] = {"params": sum(p.numel() for p in rt.policy.parameters()),
                             "param_pickle": _pickled(flat_params(rt.policy)),
                             "grad_nbytes": int(grad.grad.nbytes), "grad_pickle": _pickled(grad),
                             "rows": len(batch), "batch_nbytes": int(batch_bytes),
                             "experience_pickle": _pickled((version, batch))}
            if len(got) == len(names):
                break
    finally:
        worker.close()
    return got


def _kib(n: float) -> str:
    return f"{n / 1024:,.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):,.2f} MiB"


def table(scenarios: list[str], train_overrides: dict | None = None, measure: bool = False) -> str:
    """A markdown table of `layer_costs` (and, with `measure`, the measured sizes) for each scenario."""
    head = ("| scenario | layer | interval | slots | obs | params | pull | grads mode: per update "
            "(down + up) | rows | bytes/row | experience mode: per update (down + up) |")
    if measure:
        head += " measured grad / batch (pickled) |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name in scenarios:
        measured = measured_costs(name, None, train_overrides) if measure else {}
        for c in layer_costs(name, None, train_overrides):
            row = (f"| {name} | {c.layer} | {c.interval} | {c.slots} | {c.obs_dim} | {c.params:,} | "
                   f"{_kib(c.param_bytes)} | {c.calls} x 2 x {_kib(c.param_bytes)} = {_kib(c.gradients_total)} | "
                   f"{c.rows:,} | {c.row_bytes} | {_kib(c.experience_down)} + {_kib(c.experience_up)} = "
                   f"{_kib(c.experience_total)} |")
            if measure:
                m = measured.get(c.layer)
                row += (f" {_kib(m['grad_pickle'])} / {_kib(m['experience_pickle'])} ({m['rows']:,} rows) |"
                        if m else " - |")
            lines.append(row)
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenarios", nargs="*", default=["spread", "grid"])
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="hdppo train settings, e.g. envs_per_worker=16 low.rollout=128 epochs=4")
    p.add_argument("--measure", action="store_true", help="also run one inline worker and weigh what it ships")
    args = p.parse_args()
    overrides = dict(kv.split("=", 1) for kv in args.set)
    print(table(args.scenarios, overrides, args.measure))
    if not args.measure:
        return
    for name in args.scenarios:
        print(name, {c.layer: asdict(c) for c in layer_costs(name, None, overrides)})


if __name__ == "__main__":
    main()
