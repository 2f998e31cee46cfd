"""A report's final-eval cache (RUN/evidence_eval.json) is played again when its records lack an
episode key the report reads: a report asking for rware's newer `lifts` took a cache made before it
and averaged a missing value into one seed's mean."""
from __future__ import annotations

import json

import hdppo.runtime.evaluate as evaluate
from examples.studies.evidence import final_episodes


def test_a_cache_without_a_key_the_report_reads_is_played_again(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    (run / "state.json").write_text(json.dumps({"env_steps": 1000}))
    played = []

    def play(run, episodes, seed, **kw):
        played.append(seed)
        keys = {"deliveries": 2.0} if len(played) == 1 else {"deliveries": 2.0, "lifts": 5.0}
        return [dict(keys) for _ in range(episodes)]
    monkeypatch.setattr(evaluate, "play", play)
    assert final_episodes(run, 3, 7) == [{"deliveries": 2.0}] * 3            # an older cache: no lifts
    assert final_episodes(run, 3, 7, keys=("deliveries",)) == [{"deliveries": 2.0}] * 3 and len(played) == 1
    got = final_episodes(run, 3, 7, keys=("deliveries", "lifts"))
    assert len(played) == 2 and all(e["lifts"] == 5.0 for e in got)
    assert final_episodes(run, 3, 7, keys=("lifts",)) == got and len(played) == 2      # cached now


def test_a_team_played_on_another_map_is_cached_apart_and_by_its_keys(tmp_path, monkeypatch):
    """final_episodes with scenario overrides plays the run there (play's `overrides`) and caches it in
    a file of its own, keyed by them: the home eval's cache stays, other overrides play again."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "state.json").write_text(json.dumps({"env_steps": 1000}))
    played = []

    def play(run, episodes, seed, overrides=None, **kw):
        played.append(overrides)
        return [{"win": 0.0 if overrides else 1.0} for _ in range(episodes)]
    monkeypatch.setattr(evaluate, "play", play)
    assert final_episodes(run, 2, 7) == [{"win": 1.0}] * 2
    assert final_episodes(run, 2, 7, overrides={"size": "32"}) == [{"win": 0.0}] * 2
    assert final_episodes(run, 2, 7) == [{"win": 1.0}] * 2                              # home: still cached
    assert final_episodes(run, 2, 7, overrides={"size": "32"}) == [{"win": 0.0}] * 2
    assert played == [None, {"size": "32"}]
    final_episodes(run, 2, 7, overrides={"size": "40"})
    assert played[-1] == {"size": "40"} and len(played) == 3
