"""The `hdppo` parser: top-level help, the shared flags on every subcommand, one module per command."""
from __future__ import annotations

import pytest

from hdppo.cli import build_parser, main, parse
from hdppo.cli.app import COMMANDS


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_top_level_help_lists_every_command(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    """It crashed with `ValueError: unsupported format character 'b'` (a bare % in plot's help)."""
    assert main([flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: hdppo")
    for name in ("scenarios", "check", "train", "eval", "plot", "export", "render", "diagnose", "bench"):
        assert name in out
    assert "95%" in out and "%%" not in out


def test_every_subcommand_has_help_and_the_shared_debug_flag(capsys: pytest.CaptureFixture[str]) -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(c.__name__.rsplit(".", 1)[1].rstrip("_") for c in COMMANDS)
    for name in sub.choices:
        assert main([name, "--help"]) == 0, name
        assert "--debug" in capsys.readouterr().out, name


def test_debug_counts_before_or_after_the_subcommand() -> None:
    assert parse(["--debug", "check", "grid"]).debug is True
    assert parse(["check", "grid", "--debug"]).debug is True
    assert parse(["check", "grid"]).debug is False


def test_a_resumed_stage_rates_only_its_own_steps() -> None:
    """After --resume the summary divided all of the stage's steps by the resumed part's seconds."""
    from hdppo.cli.train import stage_summary
    info = {"env_steps": 10_000, "env_steps_run": 2_000, "seconds": 4.0, "rounds": {"low": 5},
            "optimizer_steps": {"low": 40}}
    line = stage_summary("concurrent", info, resumed=True)
    assert line.startswith("stage concurrent: 2,000 env steps in 4.0 s (500 steps/s) since the resume, 10,000 in all")
    assert "PPO updates {'low': 5}, optimizer steps {'low': 40}" in line
    fresh = stage_summary("concurrent", {**info, "env_steps_run": 10_000})
    assert "(2,500 steps/s)" in fresh and "since the resume" not in fresh
