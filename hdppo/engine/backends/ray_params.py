"""The Ray backend's parameter transport: the driver's table of published versions (`RayParams`),
the board actor for mid-rollout refreshes (`ParamBoard`) and the worker's side (`ActorParams`).

Each call to a worker carries the layers published since that worker's previous call: inline when
small, else a reference to the one copy the driver `ray.put` in the object store (Ray resolves it
before the call runs; a node fetches one object once, however many of its workers use it).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import ray

from hdppo.engine.params import ParamStore

INLINE_BYTES = 100 * 1024     # parameters up to this size travel inline with the calls (Ray's own limit)...
INLINE_TOTAL_BYTES = 4 << 20  # ...unless all workers' copies together exceed this: then via ray.put


class RayParams(ParamStore):
    """The driver's side: the newest (version, ent_coef, parameters) of each layer.

    A published version goes into the object store once (`ray.put`) and workers receive its
    reference; a small one (at most `INLINE_BYTES`, and at most `INLINE_TOTAL_BYTES` over all
    workers) travels inline with the calls instead, which is what Ray itself does with small
    arguments and saves an object-store round trip per update. `changes(sent)` lists what a worker
    has not been sent yet; the backend ships it with the worker's next call. `read` is for the
    driver (tests, debugging).
    """

    def __init__(self, board: Any = None, n_workers: int = 1) -> None:
        self._table: dict[str, tuple[int, int, float, Any]] = {}   # layer -> (seq, version, ent, ref|array)
        self._seq = 0
        self._board = board
        self._n_workers = max(n_workers, 1)

    def publish(self, layer: str, version: int, ent_coef: float, flat: np.ndarray) -> None:
        flat = np.array(flat, dtype=np.float32)         # float32 like SharedParams; our own copy
        inline = flat.nbytes <= INLINE_BYTES and flat.nbytes * self._n_workers <= INLINE_TOTAL_BYTES
        payload = flat if inline else ray.put(flat)
        self._seq += 1
        self._table[layer] = (self._seq, int(version), float(ent_coef), payload)
        if self._board is not None:
            self._board.set.remote(layer, int(version), float(ent_coef), [payload])   # boxed: stays a reference

    def read(self, layer: str, have: int) -> tuple[int, float, np.ndarray] | None:
        item = self._table.get(layer)
        if item is None or item[1] <= have:
            return None
        return item[1], item[2], np.array(_resolve(item[3]), dtype=np.float32)

    def changes(self, sent: dict[str, int]) -> list[tuple[str, int, int, float, Any]]:
        """(layer, seq, version, ent_coef, ref|array) of every layer published since `sent` (layer -> seq)."""
        return [(layer, seq, version, ent, payload) for layer, (seq, version, ent, payload) in self._table.items()
                if sent.get(layer) != seq]


def _resolve(payload: Any) -> np.ndarray:
    return ray.get(payload) if isinstance(payload, ray.ObjectRef) else payload


class ParamBoard:
    """The newest (version, ent_coef, [ref]) per layer, for workers refreshing mid-rollout (async)."""

    def __init__(self) -> None:
        self._data: dict[str, tuple[int, float, list]] = {}

    def set(self, layer: str, version: int, ent_coef: float, box: list) -> None:
        self._data[layer] = (version, ent_coef, box)

    def latest(self, layer: str, have: int) -> tuple[int, float, list] | None:
        item = self._data.get(layer)
        return None if item is None or item[0] <= have else item


class ActorParams(ParamStore):
    """The worker's side: the parameters that came with its calls (and, for layers refreshed
    mid-rollout, the board's newest). The first read of a layer in a call uses what the call carried,
    which is the newest version at the time the driver submitted it."""

    def __init__(self, board: Any = None, live: bool = False) -> None:
        self._data: dict[str, tuple[int, float, np.ndarray]] = {}
        self._fresh: set[str] = set()
        self._board = board if live else None

    def publish(self, layer: str, version: int, ent_coef: float, flat: np.ndarray) -> None:
        self._data[layer] = (int(version), float(ent_coef), np.array(flat, dtype=np.float32))  # own copy

    def begin_call(self) -> None:
        self._fresh = set(self._data)

    def read(self, layer: str, have: int) -> tuple[int, float, np.ndarray] | None:
        if layer in self._fresh:
            self._fresh.discard(layer)
        elif self._board is not None:
            item = self._data.get(layer)
            newer = ray.get(self._board.latest.remote(layer, max(have, item[0] if item else -1)))
            if newer is not None:
                version, ent, (payload,) = newer
                self.publish(layer, version, ent, _resolve(payload))
        item = self._data.get(layer)
        if item is None or item[0] <= have:
            return None
        return item
