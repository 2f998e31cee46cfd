"""What training prints: `progress` is auto (a live table on a terminal, lines elsewhere), lines or off."""
from __future__ import annotations

import pytest

import hdppo
from hdppo.engine.config import progress_mode, train_config_from_dict
from hdppo.errors import ConfigError


def test_hdppo_train_prints_no_progress_by_default(tmp_path, tiny, capsys) -> None:
    """`progress=False` is hdppo.train's documented default; it printed `[hdppo concurrent] steps ...`."""
    hdppo.train("grid", {**tiny, "steps": 256}, layers="low", out=tmp_path / "quiet")
    assert "[hdppo" not in capsys.readouterr().out
    hdppo.train("grid", {**tiny, "steps": 256}, layers="low", out=tmp_path / "shown", progress=True)
    assert "[hdppo concurrent] steps" in capsys.readouterr().out      # not a terminal: lines


def test_booleans_keep_the_meaning_they_had() -> None:
    assert progress_mode(True) == progress_mode("true") == "auto"
    assert progress_mode(False) == progress_mode("false") == "lines"       # --no-progress, old config.json
    assert train_config_from_dict({"progress": False}).progress == "lines"
    assert train_config_from_dict({"progress": True}).progress == "auto"
    with pytest.raises(ConfigError, match="progress"):
        progress_mode("loud")
