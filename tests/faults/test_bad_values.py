"""Out-of-range values are refused before any process starts or any folder is made: rc 2 and one
`hdppo: error:` line naming the key, with a fix (a negative max_grad_norm used to flip the gradient)."""
from __future__ import annotations

import pytest

from tests.helpers.cli import cli

BAD = [
    ("max_grad_norm=-1", "max_grad_norm"), ("max_grad_norm=0", "max_grad_norm"), ("max_grad_norm=inf", "max_grad_norm"),
    ("gamma=1.5", "gamma"), ("gamma=-1", "gamma"), ("gamma=0", "gamma"),
    ("low.hidden=0", "low.hidden"), ("hidden=64,-1", "hidden"), ("ent_coef=-5", "ent_coef"),
    ("ent_coef_final=-0.1", "ent_coef_final"), ("vf_coef=-1", "vf_coef"), ("lr=0", "lr"), ("lr=-1e-3", "lr"),
    ("lr=nan", "lr"), ("clip_eps=0", "clip_eps"), ("gae_lambda=1.5", "gae_lambda"), ("epochs=0", "epochs"),
    ("minibatches=0", "minibatches"), ("rollout=-1", "rollout"), ("pool=-1", "pool"),
    ("max_staleness=-1", "max_staleness"), ("device=tpu", "tpu"), ("device=cuda:7", "cuda:7"),
    ("steps=0", "steps"), ("envs_per_worker=0", "envs_per_worker"), ("workers=-2", "workers"),
    ("finetune=1.0", "finetune"), ("checkpoint_seconds=0", "checkpoint_seconds"),
    ("worker_timeout=-5", "worker_timeout"), ("log_every=-1", "log_every"), ("activation=sigmoid", "activation"),
    ("policy=transformer", "policy"), ("worker_cpus=0", "worker_cpus"), ("checkpoint_every=0", "checkpoint_every"),
    ("seed=-1", "seed"),
]


@pytest.mark.parametrize("value,key", BAD, ids=[b[0] for b in BAD])
def test_bad_value_is_refused_before_anything_starts(value, key, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    out = tmp_path / "run"
    flags = [*(["--workers", "2"] if key != "workers" else []), *(["--steps", "64"] if key != "steps" else [])]
    rc, _, err = cli(capsys, "train", "grid", "--layer", "all", "--backend", "process", *flags, "--no-progress",
                     value, "--out", out)
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("hdppo: error:") and key in lines[0], err
    assert len(lines) == 2 and lines[1].strip().startswith("fix:"), err
    assert not out.exists()


# ---- numeric flags of every command (issue 25, item 8): argparse types shared from hdppo.cli.common ----
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from hdppo.cli import main
    run = tmp_path_factory.mktemp("flags") / "run"
    assert main(["train", "grid", "--layer", "low", "--steps", "32", "--backend", "inline", "--workers", "1",
                 "--no-progress", "envs_per_worker=2", "rollout=16", "epochs=1", "minibatches=1", "--out",
                 str(run)]) == 0
    return run


FLAGS = [
    (["render", "RUN", "--fps", "0"], "--fps"), (["render", "RUN", "--pixels", "0"], "--pixels"),
    (["render", "RUN", "--pixels", "100000"], "--pixels"), (["render", "RUN", "--max-steps", "-1"], "--max-steps"),
    (["render", "RUN", "--episodes", "0"], "--episodes"), (["render", "RUN", "--every", "0"], "--every"),
    (["render", "RUN", "--fps", "ten"], "--fps"), (["render", "RUN", "--seed", "-1"], "--seed"),
    (["eval", "RUN", "--episodes", "0"], "--episodes"),
    (["eval", "RUN", "--seed", "99999999999999999999999"], "--seed"),
    (["check", "grid", "--episodes", "0"], "--episodes"), (["check", "grid", "--envs", "0"], "--envs"),
    (["check", "grid", "--envs", "100000"], "--envs"),
    (["diagnose", "RUN", "--steps", "0"], "--steps"), (["diagnose", "RUN", "--steps", "-5"], "--steps"),
    (["diagnose", "RUN", "--ablate-steps", "-1"], "--ablate-steps"),
]


@pytest.mark.parametrize("args, flag", FLAGS, ids=[" ".join(a[0:1] + a[2:]) for a, _ in FLAGS])
def test_an_out_of_range_flag_is_one_line_naming_it(args, flag, tiny_run, capsys, monkeypatch):
    """render --fps 0, --pixels 0 / 100000 and --max-steps -1 gave tracebacks; each is refused as
    the command line is read, before the run is opened."""
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.chdir(tiny_run.parent)                    # render's default --out lands here, if anywhere
    before = sorted(p.name for p in tiny_run.parent.iterdir())
    rc, out, err = cli(capsys, *[str(tiny_run) if a == "RUN" else a for a in args])
    assert "Traceback" not in out + err, err
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"hdppo: error: {flag} must be "), err
    assert lines[1].startswith("  fix: pass a whole number"), err
    assert sorted(p.name for p in tiny_run.parent.iterdir()) == before       # nothing written


@pytest.mark.parametrize("command, make", [("export", "file"), ("diagnose", "file"), ("render", "folder")])
def test_an_out_that_is_the_wrong_kind_of_path_is_one_line(command, make, tiny_run, tmp_path, capsys, monkeypatch):
    """export --out EXISTING_FILE was a FileExistsError traceback."""
    monkeypatch.setenv("COLUMNS", "300")
    target = tmp_path / ("taken" if make == "file" else "episode.gif")
    if make == "file":
        target.write_text("keep me")
    else:
        target.mkdir()
    rc, out, err = cli(capsys, command, tiny_run, "--out", target)
    assert "Traceback" not in out + err, err
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("hdppo: error: --out") and str(target) in lines[0], err
    assert lines[1].startswith("  fix: "), err
    assert (target.read_text() == "keep me") if make == "file" else not any(target.iterdir())
    rc, out, err = cli(capsys, command, tiny_run, "--out", target / "below")
    assert rc == 2 and "Traceback" not in out + err and (make == "folder" or "which is a file" in err), err


def test_render_refuses_frames_that_cannot_fit_in_memory(tiny_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setattr("hdppo.engine.preflight.available_memory", lambda: 1 << 30)
    rc, out, err = cli(capsys, "render", tiny_run, "--pixels", "4096", "--max-steps", "1000",
                       "--out", tmp_path / "e.gif")
    assert "Traceback" not in out + err and rc == 2, err
    assert "1,000 frames of 4096 x 4096 pixels need 46.9 GiB" in err and "--max-steps" in err, err
    assert not (tmp_path / "e.gif").exists()
