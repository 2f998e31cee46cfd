"""JaxMARL adapter, the parts that compile nothing: its config refuses clashing or odd keys, and
unknown maps and env names fail with the known ones listed, and without JaxMARL a scenario says
which extra to install (the stepping tests are in slow/)."""
from __future__ import annotations

import sys

import pytest

from hdppo.errors import ConfigError, ScenarioError
from hdppo.sims.jaxmarl import compile_cache_dir, jaxmarl_config, make_env
from hdppo.sims.smax import smax_env
from tests.helpers import NEEDS_JAXMARL


def test_without_jaxmarl_a_scenario_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "jaxmarl", None)      # import jaxmarl raises ImportError
    with pytest.raises(ScenarioError, match=r"hdppo\[smax\]"):
        smax_env("3m")


def test_config_refuses_clashes_and_odd_types():
    with pytest.raises(ConfigError, match="clashes"):
        jaxmarl_config("C", layers=1, gamma=0.9, use_state=True, w_int=1.0)
    with pytest.raises(ConfigError, match="bool, int, float or str"):
        jaxmarl_config("C", unit_type_health=[45.0])
    cfg = jaxmarl_config("C", max_steps=50, map_name="3m")()
    assert cfg.max_steps == 50 and cfg.layers == 1


@NEEDS_JAXMARL
def test_unknown_map_and_env_name_list_the_known_ones():
    with pytest.raises(ScenarioError, match="3s5z"):
        smax_env("4m")
    with pytest.raises(ScenarioError, match="MPE_simple_spread_v3"):
        make_env("no_such_env")


def test_the_compile_cache_folder_is_the_users_choice_else_the_xdg_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("HDPPO_JAX_CACHE", "off")
    assert compile_cache_dir() is None
    monkeypatch.setenv("HDPPO_JAX_CACHE", str(tmp_path / "jax"))
    assert compile_cache_dir() == str(tmp_path / "jax")
    monkeypatch.delenv("HDPPO_JAX_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache_dir() == str(tmp_path / "xdg" / "hdppo" / "jax")
