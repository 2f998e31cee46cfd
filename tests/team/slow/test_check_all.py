"""Every registered scenario and every example passes `hdppo check`."""
from __future__ import annotations

import pytest

from hdppo.team.check import run_check
from hdppo.team.scenario import scenario_names
from tests.helpers import ROOT

EXAMPLES = sorted(str(p) for p in (ROOT / "examples" / "scenarios").glob("*.py"))
# scenarios and example files whose env is an optional extra: skipped without it (the test extra
# installs all but smax, whose JAX install is ~580 MB)
NEEDS = {"foraging.py": ("lbforaging", "gymnasium-ma"), "rware": ("rware", "rware"),
         **{f"smax_{m}": ("jaxmarl", "smax") for m in ("3m", "2s3z", "5m_vs_6m", "3s5z", "smacv2_10_units")}}


# the SMAX targets join the `jaxmarl` tests' worker, which has compiled their steps (tests/conftest.py)
TARGETS = [pytest.param(t, marks=pytest.mark.jaxmarl) if NEEDS.get(t, ("",))[0] == "jaxmarl" else t
           for t in [n for n, _ in scenario_names()] + EXAMPLES]


@pytest.mark.parametrize("target", TARGETS)
def test_scenario_passes_check(target):
    module, extra = NEEDS.get(target.rsplit("/", 1)[-1], (None, None))
    if module is not None:
        pytest.importorskip(module, reason=f"{target} needs {module}: pip install 'hdppo[{extra}]'")
    report = run_check(target, episodes=2, n_envs=2, seed=0, api_cycles=60)
    failed = [f"{line.name}: {line.detail}" for line in report.lines if not line.ok]
    assert report.ok, failed
    assert len(report.lines) >= 8    # loads, API test, graph, episodes, spaces, intervals, deaths, SMDP, rewards...


def test_check_fails_on_a_broken_scenario_with_the_reason():
    report = run_check(str(ROOT / "tests" / "scenarios_broken" / "bad_interval.py"))
    assert not report.ok
    assert "multiple" in report.lines[-1].detail


def test_a_hook_raising_while_the_copies_are_built_is_a_fail_line_with_its_traceback(monkeypatch, capsys):
    """positions(env) runs when the `graph valid` step resets the copies: a FAIL line naming the hook's
    file and line, exit status 1, and `--debug` prints the full traceback."""
    from hdppo.cli import main
    from hdppo.team.scenario import load_scenario

    def positions(env):
        raise ValueError("positions broke")

    monkeypatch.setattr(load_scenario("battle"), "positions", positions)
    report = run_check("battle", episodes=1, n_envs=1, seed=0, api_cycles=10)
    line = report.lines[-1]
    assert line.name == "graph valid" and not line.ok
    assert "ValueError: positions broke at line" in line.detail and __file__ in line.detail
    assert main(["check", "battle", "--episodes", "1", "--envs", "1", "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "positions broke" in err
