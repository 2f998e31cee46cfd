"""The aggregates across seeds against hand-computed values and rliable's own numbers: the IQM, the
mean's Student-t interval and the IQM's stratified-bootstrap interval (seeded, reproducible)."""
from __future__ import annotations

import numpy as np
import pytest

from hdppo.analysis.seeds import across_seeds, aggregate_evals, iqm, iqm_ci, stratified_bootstrap_ci
from hdppo.stats import t_ci


def test_the_iqm_is_the_mean_of_the_middle_half() -> None:
    assert iqm([1, 2, 3, 4, 10]) == 3.0                     # one cut at each end of five: mean(2, 3, 4)
    assert iqm(np.arange(8.0)) == 3.5                       # two cut at each end of eight: mean(2, 3, 4, 5)
    assert iqm([[1, 5], [2, 7], [3, 6], [4, 9], [10, 8]]) == 5.5       # a runs x tasks matrix: all ten scores
    assert iqm([2.0, 4.0]) == 3.0                           # nothing to cut: the mean


def test_the_t_interval_of_three_seeds_by_hand() -> None:
    m, lo, hi = t_ci([1.0, 2.0, 3.0])                       # sd 1, t(0.975, 2 dof) = 4.302653
    half = 4.302652729911275 / np.sqrt(3)
    assert m == 2.0 and lo == pytest.approx(2 - half) and hi == pytest.approx(2 + half)
    assert t_ci([5.0]) == (5.0, 5.0, 5.0) and t_ci([1.0, 1.0]) == (1.0, 1.0, 1.0)
    assert all(np.isnan(t_ci([])))


def test_the_stratified_bootstrap_matches_rliable() -> None:
    """rliable 1.2.0's get_interval_estimates(..., aggregate_iqm, reps=50000) gives these intervals."""
    assert stratified_bootstrap_ci([1, 2, 3, 4, 10]) == pytest.approx((4 / 3, 8.0))
    assert stratified_bootstrap_ci([[1, 5], [2, 7], [3, 6], [4, 9], [10, 8]]) == pytest.approx((4.0, 23 / 3))


def test_the_bootstrap_interval_holds_the_iqm_and_is_seeded() -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=6)
    m, lo, hi = iqm_ci(x)
    assert lo <= m <= hi and lo < hi
    assert iqm_ci(x) == (m, lo, hi)                                      # the same seed: the same interval
    assert stratified_bootstrap_ci(x, reps=500, seed=1) != stratified_bootstrap_ci(x, reps=500, seed=2)


def test_strata_are_redrawn_apart() -> None:
    """Each task's runs are redrawn on their own: a task whose runs all agree adds no width."""
    x = np.array([[0.0, 10.0], [1.0, 10.0], [2.0, 10.0]])
    lo, hi = stratified_bootstrap_ci(x, np.mean, reps=2000)
    assert 5.0 <= lo < hi <= 6.0                            # (task-0 mean in [0, 2] + 10) / 2


def test_across_seeds_and_rates() -> None:
    agg = across_seeds([0.0, 0.0, 1.0], bounds=(0.0, 1.0))
    assert agg["mean"][1] == 0.0 and agg["mean"][2] <= 1.0             # cut to the rate's range
    assert agg["iqm"][0] == pytest.approx(1 / 3)
    assert across_seeds([0.0, 0.0, 1.0])["mean"][1] < 0.0


def one_eval(team: float, win: float) -> dict:
    ci = (team, team - 1, team + 1)
    return {"team_return": ci, "layers": {"low": ci}, "length": (30.0, 30.0, 30.0),
            "outcomes": {"win": (win, 0.0, 1.0)}}


def test_aggregate_evals_takes_each_seeds_mean_of_every_metric() -> None:
    agg = aggregate_evals({0: one_eval(1.0, 0.0), 1: one_eval(2.0, 0.5), 2: one_eval(3.0, 1.0)})
    assert list(agg) == ["team_return", "return/low", "length", "win"]
    assert agg["team_return"]["per_seed"] == {0: 1.0, 1: 2.0, 2: 3.0}
    assert agg["team_return"]["mean"] == pytest.approx(t_ci([1.0, 2.0, 3.0]))
    assert agg["team_return"]["iqm"][0] == 2.0
    assert agg["win"]["mean"][1] >= 0.0 and agg["win"]["mean"][2] <= 1.0   # a rate stays in [0, 1]
    assert agg["length"]["mean"] == (30.0, 30.0, 30.0)
