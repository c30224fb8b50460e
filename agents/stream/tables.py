"""The frontier's ``Store`` over Faust tables, and the origin -> partition mapping.

``TableStore`` maps the one-letter namespaces of ``agents.frontier.store`` onto three
partitioned, changelogged tables: ``seen``, ``pending`` (queue segments, and the previous
layout's one key per URL) and ``origins`` (which also holds the per-partition ``META``
counters, so they move with the partition). Keys keep their namespace byte, so a table row
reads the same as a row of the embedded RocksDB store.

No Faust import here: a table is anything with ``get``/``__setitem__``/``__delitem__``/``items``
(a dict in the unit tests). Writes are only legal inside the frontier agent's stream iteration;
reads are legal anywhere.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, TypeVar

from streamcrawl.agents.frontier.store import (
    META,
    ORIGINS,
    PENDING,
    REVISITS,
    SEEN,
    SEGMENTS,
    Store,
    Value,
)
from streamcrawl.agents.stream.partitioner import key_hash

# Crash-safe write order. Faust writes a table key by key (RocksDB put + a changelog message),
# so a kill -9 can leave a prefix of one commit; the source event is then replayed over it.
# Sealed queue segments (and the previous layout's entries) first, then the seen marks, then
# the origin (head cursor, tail, the open segment's entries: ``agents.frontier.queue``), then
# the counters (``META``: admitted per crawl, for the page budget), deletions last:
#  - segments without seen marks: the replay re-queues at the same seqs (same keys): no effect;
#  - seen marks without the origin: a URL's seen mark names the event that queued it and its
#    seq (``Frontier.admit``'s ``source``), so the replay queues it at that same seq: neither
#    lost nor fetched twice (written the other way round, origin before seen, the replay
#    queued the URLs at a new tail, and each was fetched twice);
#  - seen + origin without the counter: the budget undercounts this event's URLs (a bounded
#    overshoot); a counter written first would make the replay count them twice and end
#    queued URLs ``cancelled`` (two terminal states for one URL; test_frontier_batches.py);
#  - an origin with its head moved, a passed segment not yet deleted: the replayed outcome
#    finds its seq ended and deletes the segment again.
# An origin whose tail counts a sealed segment that is not written could lose its URLs, so
# segments always come first.
_T = TypeVar("_T")
_ORDER = {PENDING[0]: 0, SEGMENTS[0]: 0, REVISITS[0]: 0, SEEN[0]: 1, ORIGINS[0]: 2, META[0]: 3}


# The same order in stages, for a wiring that makes a batch of writes durable itself (the
# frontier agent's changelog sends): each stage is acknowledged by Kafka before the next one
# is sent, so a crash leaves every earlier stage whole and any subset of the current one.
# Within a stage any subset is as safe as a prefix (the keys of one stage are independent:
# entries, seen marks, origins, then counters and deletions), so the cases above still hold.
STAGES = 4
_STAGE = _ORDER


def partition_for(origin: str, partitions: int) -> int:
    """The partition Kafka's default (murmur2) partitioner gives the key ``origin``.

    Identical to aiokafka's ``DefaultPartitioner`` and to librdkafka's ``murmur2_random`` for a
    non-empty key, so seeds, links and outcomes of one origin meet in one partition.
    """
    return key_hash(origin.encode()) % partitions  # murmur2, remembered per key


def write_order(changes: Mapping[bytes, Value]) -> list[tuple[bytes, Value]]:
    """``changes`` in the crash-safe order (see ``_ORDER``); stable within a namespace."""
    return sorted(
        changes.items(),
        key=lambda kv: (kv[1] is None, _ORDER.get(kv[0][0], 4)),
    )


def write_stages(changes: Mapping[bytes, Value]) -> list[list[tuple[bytes, Value]]]:
    """``write_order(changes)`` cut into the ``STAGES`` crash-ordered stages (some empty):
    queue entries, seen marks, origins, counters and deletions."""
    stages: list[list[tuple[bytes, Value]]] = [[] for _ in range(STAGES)]
    for key, value in write_order(changes):
        stages[STAGES - 1 if value is None else _STAGE.get(key[0], 2)].append((key, value))
    return stages


def namespaces(seen: _T, pending: _T, origins: _T) -> dict[int, _T]:
    """Namespace byte -> the table that holds it (``META`` rides in ``origins``)."""
    return {
        SEEN[0]: seen,
        PENDING[0]: pending,
        SEGMENTS[0]: pending,
        REVISITS[0]: pending,  # revisit lanes (agents/frontier/revisits.py), like segments
        ORIGINS[0]: origins,
        META[0]: origins,
    }


class TableStore(Store):
    """A ``Store`` whose namespaces live in three tables (``META`` rides in ``origins``)."""

    def __init__(
        self,
        seen: MutableMapping[bytes, Any],
        pending: MutableMapping[bytes, Any],
        origins: MutableMapping[bytes, Any],
    ) -> None:
        self._tables = namespaces(seen, pending, origins)

    def _table(self, key: bytes) -> MutableMapping[bytes, Any]:
        try:
            return self._tables[key[0]]
        except (KeyError, IndexError):
            raise ValueError(f"key {key[:16]!r} has no known namespace") from None

    def get(self, key: bytes) -> bytes | None:
        value = self._table(key).get(key)
        return None if value is None else bytes(value)

    def write(self, changes: Mapping[bytes, Value]) -> None:
        """Apply ``changes`` key by key in the crash-safe order (not atomic: see ``_ORDER``).

        Must run inside the frontier agent's stream iteration (Faust's rule for table writes).
        """
        for key, value in write_order(changes):
            table = self._table(key)
            if value is None:
                with contextlib.suppress(KeyError):
                    del table[key]
            else:
                table[key] = value

    def walk(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Rows of ``prefix``'s (locally visible) table whose key starts with it, in the
        table's own order, streamed: no copy of the table (for ``agents.stream.origin_index``)."""
        for key, value in self._table(prefix).items():
            if bytes(key).startswith(prefix):
                yield bytes(key), bytes(value)

    def scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Rows of the (locally visible) table of ``prefix`` whose key starts with it, sorted.

        Faust tables have no range reads: this walks the whole local table, so it is meant for
        the small ``origins`` table on partition assignment, not for the hot path.
        """
        table = self._table(prefix)
        rows = [(bytes(k), bytes(v)) for k, v in table.items() if bytes(k).startswith(prefix)]
        yield from sorted(rows)
