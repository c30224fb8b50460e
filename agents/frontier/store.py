"""Key-value state behind the frontier: an abstract store, in-memory and RocksDB implementations.

The frontier never writes directly: it computes a ``Changes`` overlay that the wiring commits
with one ``Store.write``: atomic in the embedded stores (one RocksDB write batch together with
the output offsets), key by key in the Faust tables (``TableStore``, in a crash-safe order: a
kill -9 can leave a prefix of one commit, which the replayed event completes). Keys are bytes
with a one-letter namespace prefix.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from streamcrawl.agents.errors import StateError

# Namespaces. One store holds them all; the Faust wiring maps each to its own table.
SEEN = b"s"  # seen-set: crawl id + URL hash -> first depth
# An unreleased queue layout's (a key per queued seq); nothing writes or reads it any more, but
# the Faust wiring still routes it to the ``pending`` table (agents/stream/tables.py).
PENDING = b"p"
SEGMENTS = b"q"  # per-origin FIFO: origin + segment number -> Segment (agents/frontier/queue.py)
ORIGINS = b"o"  # origin -> OriginState
REVISITS = b"r"  # revisit lanes: origin + crawl + level + seq -> QueueEntry (revisits.py)
META = b"m"  # crawl-level values (budgets, output offsets)

Value = bytes | None  # None marks a deletion inside a change set
_T = TypeVar("_T")


class Store(abc.ABC):
    """A byte-keyed store with multi-key writes (atomic unless the backend says otherwise)."""

    @abc.abstractmethod
    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or ``None`` when absent."""

    @abc.abstractmethod
    def write(self, changes: Mapping[bytes, Value]) -> None:
        """Apply all ``changes`` (``None`` deletes): all or nothing in ``MemoryStore`` and
        ``RocksStore``; ``TableStore`` writes key by key in a crash-safe order instead."""

    @abc.abstractmethod
    def scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every key/value whose key starts with ``prefix``, in key order."""

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op for stores without resources
        """Release resources; the store is unusable afterwards."""


class MemoryStore(Store):
    """A dict: for tests and throwaway crawls."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def write(self, changes: Mapping[bytes, Value]) -> None:
        for key, value in changes.items():
            if value is None:
                self._data.pop(key, None)
            else:
                self._data[key] = value

    def scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        for key in sorted(k for k in self._data if k.startswith(prefix)):
            yield key, self._data[key]


# RocksDB keeps every write of a memtable in memory until the memtable is full (64 MiB by
# default, up to 2 of them), and the frontier rewrites small keys often (an origin's state
# several times per page, a pending entry put then deleted), so with the defaults a process's
# RSS grows with the crawl until its memtables are full. Small memtables and a bounded block cache
# keep it flat; a bloom filter keeps the de-duplication look-ups of unseen URLs off the disk.
WRITE_BUFFER_BYTES = 4 << 20
WRITE_BUFFERS = 2
BLOCK_CACHE_BYTES = 8 << 20
BLOOM_BITS_PER_KEY = 10
SEEN_CACHE = 32768  # seen marks (and META values) a RocksStore keeps in memory (~5 MB)
_CACHED = frozenset({SEEN, META})  # small values read per link, per batch (the page budget)
# Origin records and sealed queue segments: a few KB each, read several times per page (the
# frontier's apply and admit, the scheduler's look at the queue head) and decoded by content
# (``queue._decode_segment`` hashes the bytes, ``records.load_origin`` compares them): the very
# object written is served, so the hash is computed once and the comparison is by identity.
RECORD_CACHE_BYTES = 8 << 20
_RECORDS = frozenset({ORIGINS, SEGMENTS})


def rocks_options() -> Any:
    """``rocksdict.Options`` for a bounded-memory store in raw bytes mode."""
    from rocksdict import BlockBasedOptions, Cache, Options

    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_write_buffer_size(WRITE_BUFFER_BYTES)
    options.set_max_write_buffer_number(WRITE_BUFFERS)
    table = BlockBasedOptions()
    table.set_block_cache(Cache(BLOCK_CACHE_BYTES))
    table.set_bloom_filter(BLOOM_BITS_PER_KEY, False)
    options.set_block_based_table_factory(table)
    return options


class RocksStore(Store):
    """RocksDB through rocksdict, in raw bytes mode; survives ``kill -9`` (write-ahead log).

    The last ``SEEN_CACHE`` seen marks and ``META`` values read or written are kept in memory:
    a page links mostly URLs seen before, each such link would be a RocksDB read, and the
    admitted count is read per batch. So are the origin records and queue segments last read or
    written, up to ``RECORD_CACHE_BYTES``: each is read several times per page, and serving the
    same bytes object makes the decoders' look-ups by content cheap. This process
    is the only writer (RocksDB's lock), and ``write`` updates both caches once the batch is
    written.
    """

    def __init__(self, path: Path) -> None:
        from rocksdict import Rdict

        path.mkdir(parents=True, exist_ok=True)
        try:
            self._db = Rdict(str(path), rocks_options())
        except Exception as exc:  # rocksdict raises plain Exception for lock/corruption errors
            raise StateError(
                f"cannot open the state in {path}: {exc}. If another streamcrawl uses it, stop "
                "that one; if it is corrupt, delete the directory to start the crawl afresh."
            ) from exc
        self._cache: dict[bytes, bytes] = {}  # recent seen marks and META values (LRU)
        self._records: dict[bytes, bytes] = {}  # recent origin records and segments (LRU)
        self._record_bytes = 0

    def get(self, key: bytes) -> bytes | None:
        # Each cache holds only keys of its namespaces: look in both before asking which.
        for cache in (self._cache, self._records):
            hit = cache.pop(key, None)
            if hit is not None:
                cache[key] = hit  # most recently used last
                return hit
        value = self._db.get(key)
        if value is None:
            return None
        value = bytes(value)
        prefix = key[:1]
        if prefix in _CACHED:
            self._remember(key, value)
        elif prefix in _RECORDS:
            self._remember_record(key, value)
        return value

    def write(self, changes: Mapping[bytes, Value]) -> None:
        from rocksdict import WriteBatch

        batch = WriteBatch(raw_mode=True)
        for key, value in changes.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        self._db.write(batch)
        for key, value in changes.items():  # written: the caches follow (never ahead of it)
            prefix = key[:1]
            if prefix in _CACHED:
                self._cache.pop(key, None)
                if value is not None:
                    self._remember(key, value)
            elif prefix in _RECORDS:
                old = self._records.pop(key, None)
                if old is not None:
                    self._record_bytes -= len(old)
                if value is not None:
                    self._remember_record(key, value)

    def _remember(self, key: bytes, value: bytes) -> None:
        self._cache[key] = value
        if len(self._cache) > SEEN_CACHE:
            del self._cache[next(iter(self._cache))]  # the least recently used

    def _remember_record(self, key: bytes, value: bytes) -> None:
        self._records[key] = value
        self._record_bytes += len(value)
        while self._record_bytes > RECORD_CACHE_BYTES and self._records:
            oldest = next(iter(self._records))  # the least recently used
            self._record_bytes -= len(self._records.pop(oldest))

    def scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        it = self._db.iter()
        it.seek(prefix)
        while it.valid():
            key = bytes(it.key())
            if not key.startswith(prefix):
                break
            yield key, bytes(it.value())
            it.next()

    def close(self) -> None:
        self._db.close()


class Changes:
    """Pending writes over a store: reads see them first; ``commit`` applies them in one
    ``Store.write``.

    It also keeps the decoded value of keys read with ``load`` or written with
    ``put(..., decoded=)``: a record that every event of a batch reads (an origin's, which
    holds its open queue segment) is decoded once per overlay, not once per event. A ``put``
    without ``decoded`` or a ``delete`` of the key forgets it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.writes: dict[bytes, Value] = {}
        self._decoded: dict[bytes, object] = {}

    def get(self, key: bytes) -> bytes | None:
        if key in self.writes:
            return self.writes[key]
        return self.store.get(key)

    def load(self, key: bytes, decode: Callable[[bytes], _T]) -> _T | None:
        """``decode`` of the value of ``key`` (``None`` when absent), decoded once: the object
        is the overlay's, shared by every ``load`` of the key: copy it before changing it."""
        if key in self._decoded:
            return cast(_T, self._decoded[key])
        raw = self.get(key)
        value = None if raw is None else decode(raw)
        self._decoded[key] = value
        return value

    def put(self, key: bytes, value: bytes, *, decoded: object | None = None) -> None:
        """Write ``value``; ``decoded`` (an object nobody changes afterwards) is what it
        decodes to, served to the next ``load``."""
        self.writes[key] = value
        if decoded is None:
            self._decoded.pop(key, None)
        else:
            self._decoded[key] = decoded

    def delete(self, key: bytes) -> None:
        self.writes[key] = None
        self._decoded.pop(key, None)

    def commit(self, extra: Mapping[bytes, Value] | None = None) -> None:
        """Write everything, plus ``extra`` (e.g. output offsets), in one ``Store.write``."""
        if extra:
            self.writes.update(extra)
        if self.writes:
            self.store.write(self.writes)
        self.writes = {}
        self._decoded = {}  # the store may change under a later use of this overlay
