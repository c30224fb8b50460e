"""The frontier's table entries: their keys, the origin records (one codec; the last record
of an origin written or read kept decoded), a crawl's admitted counter, and an origin's queued
entries in order. The layout of the queue itself is ``agents.frontier.queue``; what a URL's seen
entry holds, ``agents.frontier.statuses``.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable

import msgspec

from streamcrawl.agents.frontier import queue
from streamcrawl.agents.frontier.store import META, ORIGINS, SEEN, Changes, Store
from streamcrawl.schemas.records import OriginState, QueueEntry

# The one codec of the ``origins`` values (msgpack ``OriginState``): the frontier writes them;
# it, the embedded runner's restore and the Kafka scheduler's refill read them.
encode_origin: Callable[[OriginState], bytes] = msgspec.msgpack.Encoder().encode
decode_origin: Callable[[bytes], OriginState] = msgspec.msgpack.Decoder(OriginState).decode


@functools.lru_cache(maxsize=16384)  # a page links mostly URLs linked before: one hash each
def seen_key(crawl_id: str, url: str) -> bytes:
    digest = hashlib.blake2b(url.encode(), digest_size=16).digest()
    return SEEN + crawl_id.encode() + b"\x00" + digest


def origin_key(origin: str) -> bytes:
    return ORIGINS + origin.encode()


def admitted_key(crawl_id: str) -> bytes:
    return META + b"admitted\x00" + crawl_id.encode()


def assets_key(crawl_id: str) -> bytes:
    """Key of the page assets this store queued for the crawl (its asset budget)."""
    return META + b"assets\x00" + crawl_id.encode()


ORIGIN_MEMO = 256  # origins whose last record written or read is kept decoded


class _OriginMemo:
    """The decoded state of the record last written or read, per origin, for the last
    ``ORIGIN_MEMO`` origins.

    A page's outcome reads its origin's record, which the previous page's wrote: remembering
    the state each write encoded makes that read a comparison and a copy instead of a decode
    (the record holds the open queue segment, dozens of entries). Served only for the same
    bytes, so a record changed anywhere else is decoded afresh. The states are shared: callers
    copy them (``copy_origin``)."""

    def __init__(self) -> None:
        self._states: dict[bytes, tuple[bytes, OriginState]] = {}

    def decode(self, key: bytes, raw: bytes) -> OriginState:
        kept = self._states.pop(key, None)
        if kept is not None and (kept[0] is raw or kept[0] == raw):
            state = kept[1]
        else:
            state = decode_origin(raw)
        self.remember(key, raw, state)
        return state

    def remember(self, key: bytes, raw: bytes, state: OriginState) -> None:
        self._states[key] = (raw, state)
        if len(self._states) > ORIGIN_MEMO:
            del self._states[next(iter(self._states))]  # the least recently used


_origins = _OriginMemo()


def load_origin(store: Store | Changes, origin: str) -> OriginState:
    """The origin's state, the caller's to change (a fresh object: a copy of the state the
    overlay or the memo of decoded records holds, see ``store_origin``)."""
    key = origin_key(origin)
    if isinstance(store, Changes):
        state = store.load(key, functools.partial(_origins.decode, key))
    else:
        raw = store.get(key)
        state = None if raw is None else _origins.decode(key, raw)
    return OriginState(origin=origin) if state is None else copy_origin(state)


def store_origin(ch: Changes, st: OriginState) -> None:
    """Write ``st``; the overlay keeps a copy, so changes the caller makes later stay out."""
    key, raw, kept = origin_key(st.origin), encode_origin(st), copy_origin(st)
    _origins.remember(key, raw, kept)
    ch.put(key, raw, decoded=kept)


def copy_origin(st: OriginState) -> OriginState:
    """A copy of ``st`` that nobody else changes."""
    # Queue entries are frozen: copying the containers (and the lanes, which are not) makes
    # a state nobody else changes.
    return msgspec.structs.replace(
        st,
        inline=list(st.inline),
        done=list(st.done),
        patched=dict(st.patched),
        lanes=[msgspec.structs.replace(lane) for lane in st.lanes],
    )


def admitted_count(store: Store | Changes, crawl_id: str) -> int:
    raw = store.get(admitted_key(crawl_id))
    return 0 if raw is None else int(raw)


def assets_count(store: Store | Changes, crawl_id: str) -> int:
    raw = store.get(assets_key(crawl_id))
    return 0 if raw is None else int(raw)


def queued_entries(
    store: Store | Changes,
    state: OriginState,
    limit: int,
    skip: set[int] | frozenset[int] = frozenset(),
) -> list[tuple[int, QueueEntry]]:
    """Up to ``limit`` entries from the head of the origin's queue, skipping seqs in ``skip``."""
    found: list[tuple[int, QueueEntry]] = []
    seq = state.head
    while seq < state.tail and len(found) < limit:
        if seq not in skip:
            entry = queue.entry_at(store, state, seq)
            if entry is not None:
                found.append((seq, entry))
        seq += 1
    return found
