"""The layout of an origin's durable FIFO queue: segments, so a page costs no queue writes.

Seqs ``[head, tail)`` of an origin are its queued URLs. They are cut into segments of
``SEGMENT`` consecutive seqs (segment ``n`` holds seqs ``[n * SEGMENT, (n + 1) * SEGMENT)``):

- the open segment (the one the next seq goes to) lives inline in the origin's record
  (``OriginState.inline``), which the frontier rewrites anyway, once per batch;
- when the tail fills it, it is sealed: written once under its own key (``segment_key``) and
  never rewritten; a retry's new attempt count goes to ``OriginState.patched`` instead;
- URLs ended out of order (``per_origin_concurrency`` > 1, holes) are listed in
  ``OriginState.done`` until the head passes them; the head is the cursor, in the same record;
- a sealed segment is deleted once the head has passed all of it.

So queuing and ending a URL cost no write of their own: an origin's record per batch, plus two
writes per ``SEGMENT`` URLs (a key per URL, written and deleted, would cost two per URL).

Crash order (``agents.stream.tables``): segments are written first, the origin record after the
seen marks, deletions last. A crash after a segment but before its origin record leaves a key
that the replay writes again (same seqs, same key); the inline entries of the record are the
truth for the open segment, so such a key is ignored until the seal rewrites it. A crash after
the record but before a deletion leaves a segment the head has passed: the replayed outcome
finds its seq ended and deletes it again (``forget_replayed``).

This is the only layout read: the one before it (a key per queued seq) was never released
(docs/compatibility.md).
"""

from __future__ import annotations

import bisect
import functools

import msgspec

from streamcrawl.agents.frontier.store import SEGMENTS, Changes, Store
from streamcrawl.schemas.records import OriginState, QueueEntry

SEGMENT = 64  # seqs per segment: the inline part of an origin record holds fewer than this

_encode = msgspec.msgpack.Encoder().encode


class Segment(msgspec.Struct, frozen=True, array_like=True):
    """A sealed segment: the entries of seqs ``[first, first + len(entries))``."""

    first: int
    entries: tuple[QueueEntry | None, ...]


_decode_segment_raw = msgspec.msgpack.Decoder(Segment).decode


@functools.lru_cache(maxsize=256)
def _decode_segment(raw: bytes) -> Segment:
    # A sealed segment is read at every look at its origin's head (the scheduler's too):
    # decoding it once per distinct value keeps that a hash look-up. Keyed by the bytes, so
    # a rewritten key is never served stale.
    return _decode_segment_raw(raw)


def segment_key(origin: str, number: int) -> bytes:
    return SEGMENTS + origin.encode() + b"\x00" + number.to_bytes(8, "big")


def open_start(st: OriginState) -> int:
    """The first seq of the inline (open) segment: ``st.inline`` holds ``[open_start, tail)``."""
    return st.tail // SEGMENT * SEGMENT


def entry_at(store: Store | Changes, st: OriginState, seq: int) -> QueueEntry | None:
    """The queued entry at ``seq``, or ``None`` if it has ended (or was never queued)."""
    if seq < st.head or seq >= st.tail or seq in st.done:
        return None
    patched = st.patched.get(seq)
    if patched is not None:
        return patched
    start = open_start(st)
    if seq >= start:
        return st.inline[seq - start]
    raw = store.get(segment_key(st.origin, seq // SEGMENT))
    if raw is None:
        return None
    segment = _decode_segment(raw)
    index = seq - segment.first
    return segment.entries[index] if 0 <= index < len(segment.entries) else None


def push(ch: Changes, st: OriginState, seq: int, entry: QueueEntry) -> None:
    """Queue ``entry`` at ``seq`` (>= the tail; seqs skipped on the way are holes, ended)."""
    while st.tail < seq:
        hole = st.tail
        _append(ch, st, None)
        _mark_done(st, hole)
    _append(ch, st, entry)
    advance(ch, st)


def replace(ch: Changes, st: OriginState, seq: int, entry: QueueEntry) -> None:
    """Give the queued ``seq`` a new entry (a retry's attempt count and last error); it
    changes only ``st`` (``ch`` for the same call shape as the other changes)."""
    start = open_start(st)
    if seq >= start:
        st.inline[seq - start] = entry
    else:
        st.patched[seq] = entry  # sealed segments are never rewritten


def end(ch: Changes, st: OriginState, seq: int) -> None:
    """The entry at ``seq`` reached a terminal state: drop it and move the head past it."""
    st.patched.pop(seq, None)
    start = open_start(st)
    if seq >= start:
        st.inline[seq - start] = None  # keeps the positions; a nil is one byte
    _mark_done(st, seq)
    advance(ch, st)


def advance(ch: Changes, st: OriginState) -> None:
    """Move the head past ended seqs, deleting every sealed segment it has passed."""
    old = st.head
    while st.head < st.tail and entry_at(ch, st, st.head) is None:
        if st.done and st.done[0] == st.head:
            st.done.pop(0)
        st.head += 1
    for number in range(old // SEGMENT, st.head // SEGMENT):
        ch.delete(segment_key(st.origin, number))


def forget_replayed(ch: Changes, st: OriginState, seq: int) -> None:
    """A replayed outcome of an ended ``seq``: delete its segment again if the head has passed
    it (the first deletion may have been lost in the crash that caused the replay)."""
    number = seq // SEGMENT
    if (number + 1) * SEGMENT <= st.head:
        ch.delete(segment_key(st.origin, number))


def _append(ch: Changes, st: OriginState, entry: QueueEntry | None) -> None:
    st.inline.append(entry)
    st.tail += 1
    if st.tail % SEGMENT == 0:
        first = st.tail - len(st.inline)
        if st.head < st.tail:  # else every entry has ended: nothing to keep
            segment = Segment(first=first, entries=tuple(st.inline))
            ch.put(segment_key(st.origin, (st.tail - 1) // SEGMENT), _encode(segment))
        st.inline = []


def _mark_done(st: OriginState, seq: int) -> None:
    if seq >= st.head and seq not in st.done:
        bisect.insort(st.done, seq)
