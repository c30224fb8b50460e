"""The decoded values a ``Changes`` overlay keeps (``Changes.load``): each key decoded once,
forgotten when the key is written or deleted, handed to the frontier as copies; and a batch of
the frontier agent writes, sends and reports exactly what it did when every read decoded."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec
import pytest

from streamcrawl.agents.frontier import records
from streamcrawl.agents.frontier.frontier import Frontier
from streamcrawl.agents.frontier.records import load_origin, origin_key, store_origin
from streamcrawl.agents.frontier.store import Changes, MemoryStore
from streamcrawl.agents.stream.frontier_agent import Where
from streamcrawl.schemas.codec import decode, encode
from streamcrawl.schemas.records import OriginState, QueueEntry
from tests.unit.test_frontier_batches import agent, fetched, links
from tests.unit.test_kafka_frontier import HERE, ORIGIN

_encode = msgspec.msgpack.Encoder().encode
KEY = origin_key(ORIGIN)


class Decoder:
    """Counts its calls, so a test can tell a decode from a cached value."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, raw: bytes) -> OriginState:
        self.calls += 1
        return msgspec.msgpack.decode(raw, type=OriginState)


def state(tail: int) -> OriginState:
    return OriginState(origin=ORIGIN, tail=tail)


def test_a_key_is_decoded_once_and_forgotten_when_written_or_deleted() -> None:
    store = MemoryStore()
    store.write({KEY: _encode(state(1))})
    ch, decode = Changes(store), Decoder()
    assert [ch.load(KEY, decode).tail for _ in range(3)] == [1, 1, 1]  # type: ignore[union-attr]
    assert decode.calls == 1
    ch.put(KEY, _encode(state(2)))  # a write without its decoded value: decode it again
    assert ch.load(KEY, decode).tail == 2  # type: ignore[union-attr]
    ch.delete(KEY)
    assert ch.load(KEY, decode) is None
    given = state(3)
    ch.put(KEY, _encode(given), decoded=given)
    assert ch.load(KEY, decode) is given and decode.calls == 2
    ch.commit()
    store.write({KEY: _encode(state(4))})  # the store moved on after the commit
    assert ch.load(KEY, decode).tail == 4  # type: ignore[union-attr]


def test_the_frontier_gets_copies_that_its_changes_cannot_reach() -> None:
    store = MemoryStore()
    store.write({KEY: _encode(state(1))})
    ch = Changes(store)
    first = load_origin(ch, ORIGIN)
    first.tail = 9
    first.inline.append(QueueEntry(crawl_id="c", url=ORIGIN + "/x", depth=0))
    assert load_origin(ch, ORIGIN) == state(1)  # changed but not stored: not seen
    stored = state(5)
    store_origin(ch, stored)
    stored.done.append(4)  # changed after it was stored: not seen either
    assert load_origin(ch, ORIGIN) == state(5)
    assert ch.get(KEY) == _encode(state(5))


def test_a_stored_record_read_back_is_not_decoded_and_stays_out_of_reach(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The record a commit wrote is what the next overlay reads: the state store_origin encoded
    # is served for those bytes (a copy), and what a caller changes never reaches it.
    calls = []
    monkeypatch.setattr(
        records, "decode_origin", lambda raw: calls.append(raw) or _decode_state(raw)
    )
    store = MemoryStore()
    ch = Changes(store)
    stored = state(5)
    stored.inline.append(QueueEntry(crawl_id="c", url=ORIGIN + "/x", depth=0))
    store_origin(ch, stored)
    ch.commit()
    stored.tail = 7  # after the write: not in the record
    first = load_origin(Changes(store), ORIGIN)
    assert first.tail == 5 and calls == []
    first.inline.clear()
    first.done.append(3)
    assert load_origin(store, ORIGIN).inline == stored.inline and calls == []
    store.write({KEY: _encode(state(6))})  # bytes nobody encoded here: decoded
    assert load_origin(Changes(store), ORIGIN).tail == 6 and len(calls) == 1


_decode_state = msgspec.msgpack.Decoder(OriginState).decode


def _run(monkeypatch: pytest.MonkeyPatch, cached: bool) -> tuple[Any, list[Any], Any]:
    monkeypatch.setattr(time, "time", lambda: 1000.0)  # the counts record's updated_at
    if not cached:

        def load(self: Changes, key: bytes, decode: Any) -> Any:
            raw = self.get(key)
            return None if raw is None else decode(raw)

        monkeypatch.setattr(Changes, "load", load)
    a, rec, hook, store = agent(max_pages=200)
    a.frontier = Frontier(clock=lambda: 1000.0, jitter=lambda: 0.5)  # the same statuses twice
    first = [(Where("x.frontier", HERE, 0), links(ORIGIN, "/", *(f"/p{i}" for i in range(70))))]
    asyncio.run(a.handle_batch(first))
    # One batch, one overlay: outcomes (one a retry) interleaved with links, past a sealed
    # segment of 64 entries, every event reading the origin the one before it changed.
    events = []
    for seq in range(66):
        more = [f"/n{seq}", f"/p{seq}"]
        outcome = fetched(ORIGIN, seq, "/" if seq == 0 else f"/p{seq - 1}", *more)
        if seq == 3:
            retry = msgspec.structs.replace(decode("outcomes", outcome), state="retry", error="t")
            outcome = encode(retry)
        events.append((Where("x.outcomes", HERE, 10 + 2 * seq), outcome))
        events.append((Where("x.frontier", HERE, 11 + 2 * seq), links(ORIGIN, f"/m{seq}")))
    asyncio.run(a.handle_batch(events))
    return rec.batches, hook.calls, dict(store._tables[KEY[0]])  # type: ignore[attr-defined]


def test_a_batch_does_what_it_did_when_every_read_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cached = _run(monkeypatch, cached=True)
    with monkeypatch.context() as m:
        decoding = _run(m, cached=False)
    assert cached == decoding
    batches, calls, origins = cached
    assert len(batches) == 2 and len(calls) > 130
    final = msgspec.msgpack.decode(origins[KEY], type=OriginState)
    # The retry holds the head; the seqs after it ended out of order; its entry, in a sealed
    # segment, was patched: every part of the layout went through the overlay's cache.
    assert final.head == 3 and len(final.done) == 62 and 3 in final.patched
