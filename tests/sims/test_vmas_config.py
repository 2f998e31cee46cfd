"""A vmas_scenario config passes VMAS only its task parameters: every key of ScenarioConfig (gamma,
w_ext, w_int, interval, shared_reward) stays hdppo's, so a new hdppo key never reaches VMAS's make_env."""
from __future__ import annotations

import dataclasses

import pytest

from hdppo.errors import ConfigError
from hdppo.sims.vmas import task_kwargs, vmas_config
from hdppo.team.scenario import ScenarioConfig


def test_only_task_parameters_go_to_vmas():
    cfg = vmas_config("Cfg", n_agents=4, line_length=2.0)()
    assert task_kwargs(cfg) == {"n_agents": 4, "line_length": 2.0}
    assert {f.name for f in dataclasses.fields(ScenarioConfig)} <= {f.name for f in dataclasses.fields(cfg)}


def test_a_task_parameter_named_like_an_hdppo_key_is_refused():
    with pytest.raises(ConfigError, match="'shared_reward' clashes"):
        vmas_config("Cfg", shared_reward=True)
