"""Where each table entry of one old partition goes at another partition count: pure.

An origin's partition is Kafka's murmur2 of the origin mod the partition count, the same
function the producers partition with (``agents.stream.tables.partition_for``). Each key of the
three tables names what decides its partition:

=================  =========================================  ===============================
table / namespace  key                                        new partition
=================  =========================================  ===============================
``origins`` ``o``  origin                                     the origin's
``pending`` ``q``  origin, segment number                     the origin's
``pending`` ``r``  origin, crawl, level, seq (revisit lanes)  the origin's
``seen`` ``s``     crawl id, blake2b of the URL               the origin of the URL (below)
``origins`` ``m``  ``counts``, partition                      merged (``tally.py``)
``pending`` ``p``  an unreleased layout's, never read         dropped
=================  =========================================  ===============================

A seen mark's key does not name its origin. A URL still queued or waiting in a revisit lane
has its entry (crawl id and URL) in its origin's queue, so its seen key is computed again
from the entry and the mark follows its origin. A mark with no entry (a URL that has ended,
a redirect's final URL) goes to every new partition its origin can have: an origin in old
partition ``p`` of ``n`` has murmur2 ``h`` with ``h % n == p``, so its new partition ``h % m``
is one of those ``q`` with ``q % gcd(n, m) == p % gcd(n, m)`` (``candidates``): one when ``m``
divides ``n``, ``m / n`` when ``n`` divides ``m``. Only the origin's owner reads its marks: the
copies elsewhere are never read (their cost is docs/kubernetes.md's, "Partitions").

A seen mark names the event that queued or ended it (``topic/partition@offset``, for the
replay of a partly applied event, ``agents.frontier.statuses``); an event reshard copies to
the new topics is renamed in it (``renamed``), so that replay still recognises it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import msgspec

from streamcrawl.agents.frontier import queue
from streamcrawl.agents.frontier.records import decode_origin, seen_key
from streamcrawl.agents.frontier.store import (
    META,
    ORIGINS,
    PENDING,
    REVISITS,
    SEEN,
    SEGMENTS,
    MemoryStore,
)
from streamcrawl.agents.stream.tables import partition_for
from streamcrawl.schemas.records import OriginState, QueueEntry
from streamcrawl.topology.admin.reshard import tail

TABLES = ("seen", "pending", "origins")
Tables = dict[str, dict[bytes, bytes]]  # table -> key -> value: one partition's final state

_decode_segment = msgspec.msgpack.Decoder(queue.Segment).decode
_decode_entry = msgspec.msgpack.Decoder(QueueEntry).decode
_MARKS = (b"?", b"!")  # seen values that name an event (frontier.py's _QUEUED, _ENDED)


@dataclass(frozen=True)
class Placed:
    """One entry in its new partition. ``origin``: the origin it belongs to; ``None`` for a
    seen mark whose origin is not known (one copy in each candidate partition)."""

    table: str
    partition: int
    key: bytes
    value: bytes
    origin: str | None


def candidates(old_partition: int, old_count: int, new_count: int) -> list[int]:
    """Every new partition an origin of ``old_partition`` can hash to (module docstring)."""
    step = math.gcd(old_count, new_count)
    return [q for q in range(new_count) if q % step == old_partition % step]


def key_origin(key: bytes) -> str | None:
    """The origin an ``o``, ``q`` or ``r`` key names; None for other namespaces."""
    space = key[:1]
    if space == ORIGINS:
        return key[1:].decode()
    if space in (SEGMENTS, REVISITS):
        return key[1 : key.index(b"\x00")].decode()
    return None


def entries(tables: Tables) -> Iterator[tuple[str, QueueEntry]]:
    """(origin, entry) of every queue entry and revisit lane entry the partition holds."""
    for key, value in tables.get("origins", {}).items():
        if key[:1] == ORIGINS:
            state = decode_origin(value)
            for entry in (*state.inline, *state.patched.values()):
                if entry is not None:
                    yield state.origin, entry
    for key, value in tables.get("pending", {}).items():
        origin = key_origin(key)
        if origin is None:
            continue
        if key[:1] == SEGMENTS:
            for entry in _decode_segment(value).entries:
                if entry is not None:
                    yield origin, entry
        else:
            yield origin, _decode_entry(value)


def seen_origins(tables: Tables) -> dict[bytes, str]:
    """Seen key -> origin, for every URL with an entry in the partition's queues or lanes."""
    return {seen_key(entry.crawl_id, entry.url): origin for origin, entry in entries(tables)}


def renamed(value: bytes, events: Mapping[bytes, bytes], partition: int | None = None) -> bytes:
    """A seen value with the event it names renamed by ``events`` (old -> new name), placed
    at new ``partition``: an event copied in pieces (``agents.stream.links.frontier_pieces``)
    is renamed to its piece there."""
    if value[:1] not in _MARKS or value[1:2] != b"\x00":
        return value
    parts = value.split(b"\x00")
    new = None if partition is None else events.get(tail.piece_name(parts[1], partition))
    if new is None:
        new = events.get(parts[1])
    if new is None:
        return value
    parts[1] = new
    return b"\x00".join(parts)


def place(
    tables: Tables,
    old_partition: int,
    old_count: int,
    new_count: int,
    events: Mapping[bytes, bytes] | None = None,
) -> Iterator[Placed]:
    """Every entry of ``tables`` (old partition ``old_partition`` of ``old_count``) in its
    partition of ``new_count``, but the counters (``tally.py`` merges them) and the unreleased
    layout's keys. ``events``: old -> new names of the events copied to the new topics."""
    events = events or {}
    spread = candidates(old_partition, old_count, new_count)
    for table in ("origins", "pending"):
        for key, value in tables.get(table, {}).items():
            origin = key_origin(key)
            if origin is not None:
                yield Placed(table, partition_for(origin, new_count), key, value, origin)
    owners = seen_origins(tables)
    for key, value in tables.get("seen", {}).items():
        if key[:1] != SEEN:
            continue
        owner = owners.get(key)
        if owner is not None:
            q = partition_for(owner, new_count)
            yield Placed("seen", q, key, renamed(value, events, q), owner)
        else:
            for q in spread:
                yield Placed("seen", q, key, renamed(value, events, q), None)


def skipped(tables: Tables) -> int:
    """Keys ``place`` leaves out that ``tally.py`` does not take either (the unreleased
    layout's ``p`` keys, unknown namespaces): reported, never read by a worker."""
    known = {("origins", ORIGINS), ("origins", META), ("pending", SEGMENTS)}
    known |= {("pending", REVISITS), ("seen", SEEN)}
    return sum(
        1
        for table, rows in tables.items()
        for key in rows
        if (table, key[:1]) not in known or key[:1] == PENDING
    )


def queued(tables: Tables, new_count: int) -> dict[int, Counter[str]]:
    """New partition -> crawl id -> URLs queued and not ended (what ``status`` shows as a
    partition's queue), from the partition's origins and segments."""
    store = MemoryStore()
    store.write({k: v for k, v in tables.get("pending", {}).items() if k[:1] == SEGMENTS})
    found: dict[int, Counter[str]] = {}
    for key, value in tables.get("origins", {}).items():
        if key[:1] != ORIGINS:
            continue
        state: OriginState = decode_origin(value)
        counter = found.setdefault(partition_for(state.origin, new_count), Counter())
        for seq in range(state.head, state.tail):
            entry = queue.entry_at(store, state, seq)
            if entry is not None:
                counter[entry.crawl_id] += 1
    return found
