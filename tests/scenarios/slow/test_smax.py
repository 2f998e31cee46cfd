"""SMAX scenarios: a short training on 3m finishes and `hdppo eval` reports its win rate, trained
units never take a masked action, a bad `dead_units` is refused with its choices, and the other team
shapes pass `hdppo check` (the defaults of every map are checked by tests/team/slow/test_check_all.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hdppo.team.check import run_check
from tests.helpers import JAXMARL, TINY_CLI
from tests.helpers.cli import cli

pytestmark = JAXMARL

# the tiny settings with 8 copies a worker (SMAX episodes last tens of steps)
RUN = [a if a != "envs_per_worker=2" else "envs_per_worker=8" for a in TINY_CLI]

STRICT = '''
import numpy as np
from hdppo.sims.jaxmarl import jaxmarl_scenario
from hdppo.sims.smax import SmaxBatch, smax_env


class Strict(SmaxBatch):
    """SMAX 3m that fails the run when a living unit takes an action its mask forbids."""

    def step(self, actions):
        legal = np.take_along_axis(self.action_mask, np.asarray(actions)[..., None], -1)[..., 0]
        if (self.alive & ~legal).any():
            raise AssertionError("a masked action was taken")
        return super().step(actions)


SCENARIO = jaxmarl_scenario(smax_env, name="strict_3m", batch=Strict, map_name="3m", max_steps=40)
'''


def test_short_training_on_3m_then_eval_reports_a_win_rate(tmp_path, capsys):
    run = tmp_path / "run"
    rc, _, err = cli(capsys, "train", "smax_3m", "--steps", "3000", *RUN, "--out", run)
    assert rc == 0, err
    rc, out, err = cli(capsys, "eval", run, "--episodes", "8", "--json")
    assert rc == 0, err
    result = json.loads((run / "eval.json").read_text())
    win = result["outcomes"]["win"]
    assert 0.0 <= win[0] <= 1.0 and {"allies_alive", "enemies_killed", "terminated"} <= set(result["outcomes"])


def test_trained_units_never_take_a_masked_action(tmp_path, capsys):
    strict = tmp_path / "strict_3m.py"
    strict.write_text(STRICT)
    import importlib.util
    spec = importlib.util.spec_from_file_location("strict_3m", strict)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    batch = module.SCENARIO.batched_env(module.SCENARIO.make_config(), 2, 0)
    batch.reset(0)
    with pytest.raises(AssertionError, match="masked"):     # the checker bites: attack enemy 0, out of range
        batch.step(np.full((2, 3), 5))
    rc, _, err = cli(capsys, "train", strict, "--steps", "2000", *RUN, "--out", tmp_path / "run")
    assert rc == 0, err


@pytest.mark.parametrize("target,overrides", [("smax_3s5z", {"layers": "3", "squad_size": "4"}),
                                              ("smax_3m", {"use_state": "true"})])
def test_other_team_shapes_pass_check(target, overrides):
    report = run_check(target, overrides, episodes=1, n_envs=2, seed=0, api_cycles=20)
    assert report.ok, [f"{line.name}: {line.detail}" for line in report.lines if not line.ok]


def test_a_bad_dead_units_value_names_the_choices_and_saves_nothing(tmp_path, capsys):
    run = tmp_path / "run"
    rc, _, err = cli(capsys, "train", "smax_3m", "dead_units=gone", "--steps", "1000", *RUN, "--out", run)
    assert rc != 0 and "dead_units='gone' is not one of ['stay', 'leave']" in err and "dead_units=leave" in err
    assert "fix the scenario's" not in err and not run.exists()
