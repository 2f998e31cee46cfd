"""`hdppo.train(...)`: the Python entry point, a RunSpec resolved and run by the Trainer."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hdppo.engine.spec import RunSpec
from hdppo.engine.trainer import Trainer
from hdppo.runfolder import checkpoint_arg, record_resolved, record_scenario


def train(scenario: str, overrides: dict[str, Any] | None = None, *, layers: str | list[str] = "all",
          out: str | Path | None = None, progress: bool = False, callbacks: Iterable[Any] | None = None,
          load: Mapping[str, str | Path] | None = None) -> Path:
    """Train `scenario` (a name from `hdppo scenarios` or a file path) and return its run folder.

    `overrides` take typed values: `hdppo.train("spread", {"steps": 50_000, "workers": 2})`. The
    run folder is the same as `hdppo train`'s: eval, plot, resume and `hdppo.load` work on it.
    `progress=True` shows what `hdppo train` shows (a live table on a terminal, lines elsewhere);
    the default prints nothing (`"progress": "lines"` in overrides prints the lines).
    `callbacks` are called after each update, commit and eval during training and may stop it
    (`hdppo.Callback`, hdppo/engine/callbacks.py). `load` is `--load`: {layer: checkpoint folder
    or run folder}; a loaded layer that is not trained acts frozen, one that is trained starts from it.
    """
    settings = {"progress": "auto" if progress else "off", **(overrides or {})}
    frozen = {layer: checkpoint_arg(path, layer) for layer, path in (load or {}).items()}
    spec = RunSpec.from_overrides(scenario, settings, layers=layers, frozen=frozen, out=out)
    trainer = Trainer(spec, callbacks=callbacks)
    record_scenario(trainer.out, spec.scenario)
    record_resolved(trainer.out, workers=spec.train.n_workers())
    trainer.run()
    return trainer.out
