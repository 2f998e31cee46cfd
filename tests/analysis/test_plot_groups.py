"""Which runs `hdppo plot` averages as seeds of one config, and the band it draws."""
from __future__ import annotations

import numpy as np

from hdppo.analysis.plot import band, metric_bounds, seed_group_key


def config(seed: int, **train) -> dict:
    return {"scenario": "grid", "layer_names": ["low"],
            "train": {"seed": seed, "steps": 1000, "progress": True, "lr": 1e-3, **train}}


def test_seeds_differing_only_in_settings_that_do_not_train_are_one_group() -> None:
    """`--no-progress` (saved as train.progress) split one config's seeds into two groups."""
    base = seed_group_key(config(0))
    assert seed_group_key(config(1, progress=False)) == base
    assert seed_group_key(config(2, steps=5000, checkpoint_seconds=10, log_every=2)) == base
    assert seed_group_key(config(3, lr=3e-4)) != base           # a training setting: another config


def test_the_band_of_a_rate_stays_inside_zero_and_one() -> None:
    """Three seeds' 0/1 returns gave a band from -0.6 to 0.8."""
    x = np.array([0.0, 100.0])
    curves = [(x, np.array([0.0, 1.0])), (x, np.array([0.0, 0.0])), (x, np.array([0.0, 0.0]))]
    _, mean, lo, hi = band(curves, points=2)
    assert lo[-1] < 0.0                                       # the t band alone leaves [0, 1]
    assert metric_bounds(curves) == (0.0, 1.0)
    _, mean, lo, hi = band(curves, points=2, bounds=metric_bounds(curves))
    assert mean[-1] == np.float64(1 / 3) and lo[-1] == 0.0 and 1 / 3 < hi[-1] <= 1.0


def test_an_unbounded_metric_keeps_its_whole_band() -> None:
    x = np.array([0.0, 100.0])
    curves = [(x, np.array([0.0, -5.0])), (x, np.array([0.0, 3.0]))]
    assert metric_bounds(curves) is None
