"""Where workers read each layer's latest parameters: a small store with publish/read.

`MemoryParams` serves the inline backend (same process); `SharedParams` puts each layer's flat
parameters in shared memory behind a sequence counter, so worker processes read them without a
copy through a pipe and never see a half-written vector.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from multiprocessing import shared_memory

import numpy as np

HEADER = 4   # float64 slots: sequence counter, version, entropy coefficient, spare


class ParamStore(ABC):
    @abstractmethod
    def publish(self, layer: str, version: int, ent_coef: float, flat: np.ndarray) -> None:
        """Make version `version` of a layer's parameters visible to workers."""

    @abstractmethod
    def read(self, layer: str, have: int) -> tuple[int, float, np.ndarray] | None:
        """(version, ent_coef, params) if newer than `have`, else None."""


class MemoryParams(ParamStore):
    def __init__(self) -> None:
        self._data: dict[str, tuple[int, float, np.ndarray]] = {}

    def publish(self, layer: str, version: int, ent_coef: float, flat: np.ndarray) -> None:
        self._data[layer] = (version, ent_coef, flat.copy())

    def read(self, layer: str, have: int) -> tuple[int, float, np.ndarray] | None:
        item = self._data.get(layer)
        if item is None or item[0] <= have:
            return None
        return item[0], item[1], item[2].copy()


class SharedParams(ParamStore):
    """One shared-memory block per layer: float64 header + float32 parameters."""

    def __init__(self, sizes: dict[str, int] | None = None, names: dict[str, tuple[str, int]] | None = None) -> None:
        self._blocks: dict[str, shared_memory.SharedMemory] = {}
        self._sizes: dict[str, int] = {}
        self._owner = names is None
        if names is None:
            for layer, n in (sizes or {}).items():
                shm = shared_memory.SharedMemory(create=True, size=HEADER * 8 + 4 * n)
                np.ndarray((HEADER,), np.float64, shm.buf)[:] = [0, -1, 0, 0]
                self._blocks[layer], self._sizes[layer] = shm, n
        else:
            for layer, (name, n) in names.items():
                self._blocks[layer], self._sizes[layer] = _attach(name), n

    def names(self) -> dict[str, tuple[str, int]]:
        """What a worker process needs to attach: layer -> (block name, parameter count)."""
        return {k: (b.name, self._sizes[k]) for k, b in self._blocks.items()}

    def _views(self, layer: str) -> tuple[np.ndarray, np.ndarray]:
        buf = self._blocks[layer].buf
        return np.ndarray((HEADER,), np.float64, buf), np.ndarray((self._sizes[layer],), np.float32, buf, HEADER * 8)

    def publish(self, layer: str, version: int, ent_coef: float, flat: np.ndarray) -> None:
        head, body = self._views(layer)
        head[0] += 1                      # odd: writing
        body[:] = flat
        head[1], head[2] = version, ent_coef
        head[0] += 1                      # even: stable

    def read(self, layer: str, have: int) -> tuple[int, float, np.ndarray] | None:
        head, body = self._views(layer)
        while True:
            seq = head[0]
            if int(head[1]) <= have:
                return None
            if int(seq) % 2:
                continue
            out = body.copy()
            version, ent = int(head[1]), float(head[2])
            if head[0] == seq:
                return version, ent, out

    def close(self) -> None:
        _release(self._blocks, self._owner)


class SharedGrads:
    """A gradient slot per (worker, layer) in shared memory; workers write, the driver reads."""

    def __init__(self, n_workers: int = 0, sizes: dict[str, int] | None = None,
                 names: dict[str, tuple[str, int]] | None = None) -> None:
        self._owner = names is None
        self._blocks: dict[str, shared_memory.SharedMemory] = {}
        self._shape: dict[str, tuple[int, int]] = {}
        if names is None:
            for layer, n in (sizes or {}).items():
                self._blocks[layer] = shared_memory.SharedMemory(create=True, size=max(4 * n * n_workers, 4))
                self._shape[layer] = (n_workers, n)
        else:
            for layer, (name, n) in names.items():
                shm = _attach(name)
                self._blocks[layer] = shm
                self._shape[layer] = (shm.size // (4 * n) if n else 0, n)

    def names(self) -> dict[str, tuple[str, int]]:
        return {k: (b.name, self._shape[k][1]) for k, b in self._blocks.items()}

    def slot(self, layer: str, worker: int) -> np.ndarray:
        w, n = self._shape[layer]
        return np.ndarray((w, n), np.float32, self._blocks[layer].buf)[worker]

    def close(self) -> None:
        _release(self._blocks, self._owner)


def _release(blocks: dict[str, shared_memory.SharedMemory], owner: bool) -> None:
    """Detach from every block; the creator also frees them."""
    for shm in blocks.values():
        shm.close()
        if owner:
            shm.unlink()
    blocks.clear()


def _attach(name: str) -> shared_memory.SharedMemory:
    """Attach to a block the driver created (spawned workers share the driver's resource tracker,
    so the driver's unlink at close is the one cleanup)."""
    return shared_memory.SharedMemory(name=name)
