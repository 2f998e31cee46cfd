"""examples/evidence/smax.py: on each hard map its three arms differ only by what each tests (the
goal-free shaping, the hierarchy) and run at hdppo's default config on vs_jaxmarl.py's frames."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.parametrize("map_name", ["5m_vs_6m", "smacv2_10_units"])
def test_the_arms_differ_only_by_the_thing_each_tests(map_name):
    from examples.benchmarks.vs_jaxmarl import UPDATE_FRAMES
    from examples.evidence.smax import plan
    from examples.studies.protocol import FLAT, HIER, SHAPED
    p = plan(map_name, Path("/tmp/x"))
    assert p.out == Path(f"/tmp/x/smax-{map_name}") and p.scenario == f"smax_{map_name}"
    flat, shaped, hier = (p.command(arm, 2) for arm in (FLAT, SHAPED, HIER))
    assert flat[:3] == ["hdppo", "train", f"smax_{map_name}"] and flat[flat.index("--steps") + 1] == "2015232"
    assert -(-2_000_000 // UPDATE_FRAMES) * UPDATE_FRAMES == p.steps          # vs_jaxmarl.py's budget
    assert shaped == [str(p.out / "flat_shaped-seed2") if a == str(p.out / "flat-seed2") else a
                      for a in flat] + ["w_int.low=0.1"]
    assert hier == [str(p.out / "hier-seed2") if a == str(p.out / "flat-seed2") else a for a in flat] + ["hier=true"]
    assert not any(a.startswith(("epochs=", "lr", "minibatches=", "dead_units")) for a in flat + shaped + hier)
    assert p.seeds == [0, 1, 2, 3, 4] and p.skills is None and p.rate and p.outcome == "win"


def test_report_only_without_the_runs_names_the_missing_run_and_the_fix(tmp_path, capsys):
    from examples.evidence.smax import main
    with pytest.raises(SystemExit) as exc:
        main(["--report-only", "--map", "5m_vs_6m", "--seeds", "0", "--out", str(tmp_path), "--write", str(tmp_path)])
    msg = str(exc.value)
    assert str(tmp_path / "smax-5m_vs_6m" / "flat-seed0") in msg and "without --report-only" in msg
    assert not list(tmp_path.rglob("*.md"))                 # no report of nothing is written


def test_the_skills_design_trains_the_units_first_under_team_targets_then_the_upper_layers_over_them():
    """--design skills: the hierarchy's skill run (a fifth of its budget, counted in it) draws one living
    enemy per decision for the team, then a fresh commander and squads train over the frozen units on
    the env reward; the flat arms are those of the joint design, in the design's own folder."""
    from examples.evidence.smax import FRAMES, SKILL_FRAMES, plan
    from examples.studies.protocol import FLAT, HIER, SHAPED
    joint, p = plan("5m_vs_6m", Path("/tmp/x")), plan("5m_vs_6m", Path("/tmp/x"), design="skills")
    assert p.out == Path("/tmp/x/smax-5m_vs_6m-skills") and p.name == "smax-5m_vs_6m-skills"
    skill = p.skill_command(1)
    assert "--skills" in skill and skill[skill.index("--steps") + 1] == str(SKILL_FRAMES) == "400000"
    assert {"hier=true", "goal_sampler=team", "workers=2"} <= set(skill)
    hier = p.command(HIER, 1)
    assert hier[hier.index("--steps") + 1] == str(FRAMES - SKILL_FRAMES)          # before the skill run ends
    assert hier[hier.index("--layer") + 1] == "high,mid" and f"low={p.skill_dir(1)}" in hier
    assert "hier=true" in hier and "goal_sampler=team" not in hier
    for arm in (FLAT, SHAPED):
        assert [a.replace("-skills", "") for a in p.command(arm, 1)] == joint.command(arm, 1)
    with pytest.raises(ValueError, match="design"):
        plan("5m_vs_6m", design="staged")


def test_report_only_looks_for_the_skills_designs_runs_in_its_own_folder(tmp_path):
    from examples.evidence.smax import main
    with pytest.raises(SystemExit) as exc:
        main(["--report-only", "--design", "skills", "--map", "5m_vs_6m", "--seeds", "0", "--out", str(tmp_path)])
    assert str(tmp_path / "smax-5m_vs_6m-skills" / "flat-seed0") in str(exc.value)


def test_the_protocol_pages_and_the_jaxmarl_runner_write_no_file_of_the_same_name():
    """Both write into docs/evidence: the protocol's report of 5m_vs_6m wrote its figure over the
    runner's figure of that map (both smax-5m_vs_6m.png). The protocol writes NAME.md, NAME.png and
    NAME-runs.json (examples.studies.evidence.report, data_file)."""
    import examples.benchmarks.vs_jaxmarl as vs
    from examples.evidence.smax import DESIGNS, MAPS, plan
    runner = {vs.figure_name(m) for m in vs.MAPS} | {"smax.md", vs.DATA_FILE}
    for map_name in MAPS:
        for design in DESIGNS:
            name = plan(map_name, design=design).name
            assert not {f"{name}.md", f"{name}.png", f"{name}-runs.json"} & runner, name
