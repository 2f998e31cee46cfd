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
