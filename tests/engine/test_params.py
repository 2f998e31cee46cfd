"""hdppo.engine.params: the parameter stores workers read from (in memory, and shared memory across processes)."""
from __future__ import annotations

import multiprocessing as mp
import time
from multiprocessing import shared_memory

import numpy as np
import pytest

from hdppo.engine.params import MemoryParams, SharedParams

SPAWN = mp.get_context("spawn")


@pytest.fixture(params=["memory", "shared"])
def store(request):
    if request.param == "memory":
        yield MemoryParams()
    else:
        s = SharedParams({"low": 5, "high": 3})
        yield s
        s.close()


def test_publish_read_round_trip_and_only_when_newer(store):
    assert store.read("low", -1) is None                  # nothing published yet
    low = np.arange(5, dtype=np.float32) * 0.5
    store.publish("low", 0, 0.01, low)
    version, ent, got = store.read("low", -1)
    assert (version, ent) == (0, pytest.approx(0.01)) and got.dtype == np.float32
    np.testing.assert_array_equal(got, low)
    assert store.read("low", 0) is None                   # not newer than what the reader has
    assert store.read("low", 5) is None
    store.publish("low", 3, 0.005, low + 1)
    store.publish("high", 7, 0.02, np.array([1.0, -2.0, 3.0], np.float32))
    version, ent, got = store.read("low", 0)
    assert (version, ent) == (3, pytest.approx(0.005))
    np.testing.assert_array_equal(got, low + 1)
    assert store.read("low", 3) is None
    version, _, got = store.read("high", 3)               # layers are independent
    assert version == 7
    np.testing.assert_array_equal(got, [1.0, -2.0, 3.0])


def test_reads_are_copies(store):
    flat = np.ones(5, np.float32)
    store.publish("low", 1, 0.0, flat)
    flat[:] = 9.0                                        # the publisher reuses its buffer
    _, _, got = store.read("low", 0)
    np.testing.assert_array_equal(got, np.ones(5))
    got[:] = -1.0                                        # a reader scribbles on what it got
    np.testing.assert_array_equal(store.read("low", 0)[2], np.ones(5))


def _attach_and_read(names, have, q):
    s = SharedParams(names=names)
    try:
        got = s.read("low", have)
        none = s.read("low", got[0]) if got is not None else "missing"
        q.put((got[0], got[1], got[2].tolist(), none))
    finally:
        s.close()


def test_a_store_attached_by_names_in_another_process_reads_what_the_owner_published():
    owner = SharedParams({"low": 4})
    try:
        assert owner.names()["low"][1] == 4
        owner.publish("low", 12, 0.25, np.array([1.5, -2.0, 0.0, 8.0], np.float32))
        q = SPAWN.Queue()
        p = SPAWN.Process(target=_attach_and_read, args=(owner.names(), 11, q))
        p.start()
        version, ent, flat, again = q.get(timeout=60)
        p.join(timeout=60)
        assert p.exitcode == 0
        assert (version, ent, flat, again) == (12, 0.25, [1.5, -2.0, 0.0, 8.0], None)
        # the child's close detached it without freeing the block: the owner still reads it
        assert owner.read("low", 0)[0] == 12
    finally:
        owner.close()


def _publish_versions(names, size, stop, limit):
    """Publish versions 1, 2, ... until the reader sets `stop` (or `limit` versions, a safety net)."""
    s = SharedParams(names=names)
    try:
        v = 0
        while not stop.is_set() and v < limit:
            v += 1
            s.publish("w", v, float(v), np.full(size, v, np.float32))
    finally:
        s.close()


def test_no_torn_reads_while_another_process_publishes():
    """The writer keeps publishing until the reader has read many versions, so the reads overlap the
    writes even on a loaded machine (a fixed number of versions could all be written before the
    reader's first read)."""
    size, wanted, limit = 250_000, 50, 1_000_000
    owner = SharedParams({"w": size})
    stop = SPAWN.Event()
    try:
        writer = SPAWN.Process(target=_publish_versions, args=(owner.names(), size, stop, limit))
        writer.start()
        have, versions = 0, []
        deadline = time.monotonic() + 120
        while len(versions) < wanted and time.monotonic() < deadline and (writer.is_alive() or have == 0):
            got = owner.read("w", have)
            if got is None:
                continue
            version, ent, flat = got
            assert version > have, (version, have)           # versions never go back
            assert ent == float(version)
            lo, hi = float(flat.min()), float(flat.max())
            assert lo == hi == version, f"torn read: version {version}, elements from {lo} to {hi}"
            have = version
            versions.append(version)
        stop.set()
        writer.join(timeout=60)
        assert writer.exitcode == 0
        assert len(versions) == wanted, f"read only {len(versions)} versions while the writer published"
        assert versions[-1] < limit                         # the writer was still publishing: reads overlapped writes
    finally:
        stop.set()
        owner.close()


def test_owner_close_frees_the_blocks_and_a_reader_close_does_not():
    owner = SharedParams({"a": 8, "b": 2})
    names = {k: v[0] for k, v in owner.names().items()}
    owner.publish("a", 1, 0.0, np.arange(8, dtype=np.float32))
    reader = SharedParams(names=owner.names())
    reader.close()
    again = shared_memory.SharedMemory(name=names["a"])      # still there after a reader's close
    again.close()
    assert owner.read("a", 0)[0] == 1
    owner.close()
    for name in names.values():
        with pytest.raises(FileNotFoundError):
            shared_memory.SharedMemory(name=name)
