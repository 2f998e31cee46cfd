"""A torch random stream of one's own: sampling inside `active()` neither reads nor moves the global
stream, so several workers (or teams) in one process stay independent and reproducible."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


class TorchStream:
    def __init__(self, seed: int) -> None:
        self._state = torch.Generator().manual_seed(seed).get_state()

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        saved = torch.get_rng_state()
        torch.set_rng_state(self._state)
        try:
            yield
        finally:
            self._state = torch.get_rng_state()
            torch.set_rng_state(saved)
