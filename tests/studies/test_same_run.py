"""A finished run is still what its command makes, or the settings that differ are named; and an
evidence report refuses runs that their listed commands would no longer make (e.g. made under an
older default), instead of publishing commands that give other numbers."""
from __future__ import annotations

import json
import re

import pytest

from examples.studies.evidence import EvidencePlan, Variant
from examples.studies.evidence import main as evidence_main
from examples.studies.same_run import changed_settings, compared, flatten
from hdppo.cli import main as cli_main
from hdppo.engine.config import LayerConfig

ARGS = ["grid", "--layer", "all", "--steps", "512", "--seed", "0", "--no-progress", "layers=1", "workers=1",
        "backend=inline", "envs_per_worker=4", "rollout=16", "minibatches=1", "log_every=0"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("same") / "run"
    assert cli_main(["train", *ARGS, "--out", str(folder), "epochs=2"]) == 0
    return folder


def test_flatten_joins_nested_keys_and_keeps_lists_whole():
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": "x"}) == {"a.b": 1, "a.c": [1, 2], "d": "x"}


def test_only_what_training_does_is_compared():
    assert not compared("train.steps") and not compared("train.log_every")
    assert compared("train.layers.low.epochs") and compared("train.seed") and compared("scenario_config.steps")


def test_the_same_command_makes_the_same_run(run):
    assert changed_settings(run, [*ARGS, "--out", str(run), "epochs=2"]) == []
    # the budget and the logging are not what training does
    assert changed_settings(run, [*ARGS, "--out", str(run), "epochs=2", "--steps", "9999", "checkpoint_every=7"]) == []


def test_a_default_that_changed_since_the_run_is_named(run):
    # the command without `epochs=2` resolves to today's default, as a run made under an older default would
    got = changed_settings(run, [*ARGS, "--out", str(run)])
    assert got == [f"train.layers.low.epochs: 2 in the run, {LayerConfig().epochs} now"]


def test_scenario_parameters_and_layers_are_compared(run):
    config = json.loads((run / "config.json").read_text())
    size = config["scenario_config"]["size"]
    got = changed_settings(run, [*ARGS, "--out", str(run), "epochs=2", f"size={size + 1}"])
    assert got == [f"scenario_config.size: {size} in the run, {size + 1} now"]


def test_a_setting_added_since_the_run_counts_only_where_the_command_sets_it(run, tmp_path):
    """A run made before a scenario key existed is still what its command makes while the command
    leaves that key at its default; a command that sets it makes another run."""
    old = tmp_path / "old"
    old.mkdir()
    config = json.loads((run / "config.json").read_text())
    size = config["scenario_config"].pop("size")        # as if `size` were newer than the run
    (old / "config.json").write_text(json.dumps(config))
    assert changed_settings(old, [*ARGS, "epochs=2"]) == []
    assert changed_settings(old, [*ARGS, "epochs=2", f"size={size}"]) == [
        f"scenario_config.size: (not recorded) in the run, {size} now"]


def test_an_evidence_report_refuses_runs_its_commands_would_not_make(tmp_path):
    out = tmp_path / "ev"
    common = ["workers=1", "backend=inline", "envs_per_worker=4", "rollout=16", "minibatches=1", "log_every=0"]
    made = EvidencePlan("grid", "success", 512, [0], [Variant("flat", ["layers=1"])], common=[*common, "epochs=2"],
                        eval_episodes=4, out=out)
    evidence_main(made, "x.py", ["--write", str(tmp_path / "docs")])
    # the same plan without the pinned value: its commands now resolve to the current default
    later = EvidencePlan("grid", "success", 512, [0], [Variant("flat", ["layers=1"])], common=common,
                         eval_episodes=4, out=out)
    stale = f"train.layers.low.epochs: 2 in the run, {LayerConfig().epochs} now"
    for argv in (["--report-only"], []):
        with pytest.raises(SystemExit, match=re.escape(f"flat-seed0: {stale}")):
            evidence_main(later, "x.py", argv)
    evidence_main(made, "x.py", ["--report-only"])       # the plan that made them still reports them


def test_a_key_whose_default_changed_behaviour_counts_for_runs_made_before_it():
    """smax's `dead_units` arrived with the default `stay`; runs made before it took the dead out
    (`leave`). A 3m hierarchy run made before it was reused by vs_jaxmarl.py as current (a key newer
    than the run was taken to keep the old behaviour). Its field now says what those runs did
    (metadata "before"), so such a run is what `dead_units=leave` makes, not the default."""
    pytest.importorskip("jaxmarl", reason="pip install 'hdppo[smax]'")
    from examples.studies.same_run import changed_from, resolved_config
    argv = ["smax_3m", "--layer", "all", "--steps", "512", "--seed", "0", "hier=true"]
    recorded = resolved_config(argv)
    assert recorded["scenario_config"].pop("dead_units") == "stay"       # as made before the key existed
    assert changed_from(recorded, argv) == [
        "scenario_config.dead_units: (not recorded: runs before it behaved as leave) in the run, stay now"]
    assert changed_from(recorded, [*argv, "dead_units=leave"]) == []
