"""One suite for every Store implementation (in-memory and RocksDB)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streamcrawl.agents.errors import StateError
from streamcrawl.agents.frontier import store as state
from streamcrawl.agents.frontier.store import (
    META,
    ORIGINS,
    SEEN,
    SEGMENTS,
    WRITE_BUFFER_BYTES,
    WRITE_BUFFERS,
    Changes,
    MemoryStore,
    RocksStore,
    Store,
)


@pytest.fixture(params=["memory", "rocksdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else RocksStore(tmp_path / "db")
    yield s
    s.close()


def test_get_write_delete(store: Store) -> None:
    assert store.get(b"k") is None
    store.write({b"k": b"v", b"j": b"w"})
    assert store.get(b"k") == b"v"
    store.write({b"k": None})
    assert store.get(b"k") is None and store.get(b"j") == b"w"


def test_scan_is_prefix_bounded_and_ordered(store: Store) -> None:
    store.write({b"pb": b"2", b"pa": b"1", b"q": b"3", b"o": b"0"})
    assert list(store.scan(b"p")) == [(b"pa", b"1"), (b"pb", b"2")]
    assert list(store.scan(b"z")) == []


def test_changes_overlay_reads_its_own_writes_and_commits_atomically(store: Store) -> None:
    store.write({b"a": b"1"})
    ch = Changes(store)
    ch.put(b"b", b"2")
    ch.delete(b"a")
    assert ch.get(b"a") is None and ch.get(b"b") == b"2"
    assert store.get(b"a") == b"1" and store.get(b"b") is None  # nothing visible before commit
    ch.commit({b"c": b"3"})
    assert (store.get(b"a"), store.get(b"b"), store.get(b"c")) == (None, b"2", b"3")


def test_cached_reads_follow_every_write(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    # RocksStore serves recently used seen marks and META values from memory: a write, an
    # overwrite or a deletion must reach what the next read returns, and the bound must hold.
    monkeypatch.setattr(state, "SEEN_CACHE", 2)
    keys = [SEEN + b"k%d" % i for i in range(4)]
    store.write({key: b"1" for key in keys})
    assert [store.get(key) for key in keys] == [b"1"] * 4
    assert len(getattr(store, "_seen", ())) <= 2
    store.write({keys[3]: b"2", keys[2]: None})  # the two most recently read
    assert [store.get(key) for key in reversed(keys)] == [b"2", None, b"1", b"1"]
    store.write({keys[0]: None})
    assert store.get(keys[0]) is None and store.get(keys[1]) == b"1"
    counter = META + b"admitted"  # META values are kept too
    store.write({counter: b"1"})
    assert store.get(counter) == b"1"
    store.write({counter: b"2"})
    assert store.get(counter) == b"2"


def test_cached_records_follow_every_write(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    # RocksStore serves origin records and queue segments from memory up to a byte bound: a
    # write, an overwrite or a deletion must reach the next read, the very bytes written are
    # served (the decoders keyed by content hash them once), and the bound must hold.
    monkeypatch.setattr(state, "RECORD_CACHE_BYTES", 10)
    origin, segment = ORIGINS + b"http://a", SEGMENTS + b"http://a\x00\x00"
    value = b"12345"
    store.write({origin: value, segment: b"abcde"})
    assert store.get(origin) == value and store.get(segment) == b"abcde"
    if isinstance(store, RocksStore):
        assert store.get(origin) is value
    store.write({origin: b"xyz", segment: None})
    assert store.get(origin) == b"xyz" and store.get(segment) is None
    store.write({ORIGINS + b"http://b": b"0123456789"})  # alone fills the bound
    assert store.get(origin) == b"xyz" and store.get(ORIGINS + b"http://b") == b"0123456789"
    assert getattr(store, "_record_bytes", 0) <= 10


def test_rocks_state_survives_reopen(tmp_path: Path) -> None:
    s = RocksStore(tmp_path / "db")
    s.write({b"k": b"v"})
    s.close()
    s = RocksStore(tmp_path / "db")
    assert s.get(b"k") == b"v"
    s.close()


def test_rocks_locked_dir_gives_an_actionable_error(tmp_path: Path) -> None:
    s = RocksStore(tmp_path / "db")
    try:
        with pytest.raises(StateError, match="stop that one"):
            RocksStore(tmp_path / "db")
    finally:
        s.close()


def test_rocks_memtables_stay_within_their_budget(tmp_path: Path) -> None:
    """The frontier's write pattern (a key rewritten again and again, keys put then deleted)
    must not pile up in memory: memtables are flushed at WRITE_BUFFER_BYTES."""
    s = RocksStore(tmp_path / "db")
    try:
        value = b"x" * 200
        for i in range(60_000):  # ~24 MiB written: six times one memtable
            s.write({b"o" + str(i % 50).encode(): value, b"p%d" % i: value})
            s.write({b"p%d" % i: None})
        in_memory = s._db.property_int_value("rocksdb.cur-size-all-mem-tables")
        assert in_memory is not None
        assert in_memory <= WRITE_BUFFERS * WRITE_BUFFER_BYTES * 1.1
        assert s.get(b"o7") == value and s.get(b"p59999") is None
    finally:
        s.close()
