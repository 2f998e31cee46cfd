"""Bytes per layer per update (`examples/studies/netcost.py`): the computed figures of docs/engine.md agree with
the parameter servers and with what one worker actually ships (no Ray needed)."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from examples.studies.netcost import layer_costs, measured_costs, table
from hdppo.engine.config import resolve_overrides
from hdppo.engine.server import ParameterServer
from hdppo.engine.spec import layer_infos

SMALL = {"envs_per_worker": 2, "rollout": 40, "epochs": 2, "minibatches": 3}   # 40: a multiple of every interval


@pytest.mark.timeout(120)
@pytest.mark.parametrize("scenario", ["grid", "spread"])
def test_computed_bytes_match_the_servers_and_what_a_worker_ships(scenario):
    costs = {c.layer: c for c in layer_costs(scenario, None, SMALL)}
    got = measured_costs(scenario, None, SMALL)
    assert set(got) == set(costs) and len(costs) == 3
    from hdppo.team.scenario import load_scenario
    sc = load_scenario(scenario)
    names = [c.layer for c in layer_costs(scenario, None, SMALL)]
    tc, _ = resolve_overrides({k: str(v) for k, v in SMALL.items()}, names, set())
    for info in layer_infos(sc, sc.make_config(), tc.seed):
        c, m = costs[info.name], got[info.name]
        assert ParameterServer(info, tc.layers[info.name], seed=0).n_params == c.params == m["params"]
        assert c.param_bytes == 4 * c.params == m["grad_nbytes"]
        assert c.calls == 6 and c.gradients_up == c.gradients_down == 6 * c.param_bytes
        assert c.experience_down == c.param_bytes and c.experience_up == c.rows * c.row_bytes
        # pickled as Ray serialises them: the float32 vector plus a few hundred bytes
        assert c.param_bytes < m["param_pickle"] < c.param_bytes + 1024
        assert c.param_bytes < m["grad_pickle"] < c.param_bytes + 4096
        # every row of the shipped batch weighs exactly row_bytes
        assert m["batch_nbytes"] == m["rows"] * c.row_bytes
        assert m["batch_nbytes"] < m["experience_pickle"] < m["batch_nbytes"] + 4096
        # units decide every step: exactly the computed rows. Upper layers also decide when an
        # episode starts inside an interval, so they may have a few more.
        if c.interval == 1:
            assert m["rows"] == c.rows == 40 * 2 * c.slots
        else:
            assert c.rows <= m["rows"] <= 1.25 * c.rows


def test_the_table_has_one_row_per_layer():
    text = table(["grid"], {"envs_per_worker": 16})
    lines = text.splitlines()
    assert len(lines) == 2 + 3
    assert "| grid | low | 1 | 4 | 18 | 13,448 |" in text          # default: centralized critic, value_norm


def test_bytes_of_a_box_action_layer():
    """A continuous action costs 4 bytes per dimension, a discrete one 8 (int64)."""
    import gymnasium as gym

    from examples.studies.netcost import row_bytes
    from hdppo.engine.config import LayerConfig

    class Info:
        obs_dim, name = 10, "low"
        action_space = gym.spaces.Box(-1, 1, (3,), np.float32)
    assert row_bytes(Info, LayerConfig(centralized=False)) == 10 * 4 + 3 * 4 + 16
    Info.action_space = gym.spaces.Discrete(5)
    assert row_bytes(Info, LayerConfig(centralized=False), has_mask=True) == 10 * 4 + 8 + 16 + 5
    assert row_bytes(Info, LayerConfig(roles=True, centralized=True)) == 10 * 4 + 8 + 16 + 8 + 3 * 10 * 4
    assert pickle.loads(pickle.dumps(np.zeros(3, np.float32))).nbytes == 12
