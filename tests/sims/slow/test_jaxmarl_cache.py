"""JAX's persistent compilation cache: a second process stepping the same SMAX batch loads the
compiled step that the first one wrote instead of compiling it again; HDPPO_JAX_CACHE=off and a
cache the user configured for JAX are honoured."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.helpers import JAXMARL

pytestmark = JAXMARL

STEP_ONCE = """
import json, jax, jax.monitoring as mon
import numpy as np
hits = []
mon.register_event_listener(lambda name, **kw: hits.append(name) if name.endswith("cache_hits") else None)
from hdppo.team.scenario import load_scenario
sc = load_scenario("smax_3m")
env = sc.batched_env(sc.make_config({}), 3, 0)
env.reset(seed=0)
env.step(np.argmax(env.action_mask, -1))
print(json.dumps({"hits": len(hits), "dir": jax.config.jax_compilation_cache_dir}))
"""


def step_once(**env: str) -> dict:
    """In a fresh process: step a SMAX batch once; the cache hits and the cache folder JAX used."""
    keep = {k: v for k, v in os.environ.items() if k not in ("HDPPO_JAX_CACHE", "JAX_COMPILATION_CACHE_DIR")}
    out = subprocess.run([sys.executable, "-c", STEP_ONCE], env={**keep, **env}, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_second_process_loads_the_compiled_step_from_the_cache(tmp_path):
    cache = tmp_path / "jax"
    first = step_once(HDPPO_JAX_CACHE=str(cache))
    assert first == {"hits": 0, "dir": str(cache)} and any(cache.iterdir())
    assert step_once(HDPPO_JAX_CACHE=str(cache))["hits"] > 0


def test_off_leaves_jax_without_a_cache_and_a_users_own_jax_cache_wins(monkeypatch, tmp_path):
    import jax

    from hdppo.sims.jaxmarl import use_compile_cache
    before = jax.config.jax_compilation_cache_dir
    try:
        jax.config.update("jax_compilation_cache_dir", None)
        monkeypatch.setenv("HDPPO_JAX_CACHE", "off")
        assert use_compile_cache() is None and jax.config.jax_compilation_cache_dir is None
        own = str(tmp_path / "mine")
        jax.config.update("jax_compilation_cache_dir", own)
        monkeypatch.setenv("HDPPO_JAX_CACHE", str(tmp_path / "ours"))
        assert use_compile_cache() == own and jax.config.jax_compilation_cache_dir == own
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
