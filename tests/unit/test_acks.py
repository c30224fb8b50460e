"""The frontier agent's consumer never acknowledges an event its stream skipped
(``topology.worker.acks``): faust-streaming's stream does, and the offset would be committed though
nothing applied the event."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import faust
import faust.streams
import pytest
from faust.types import TP
from faust.types.tuples import ConsumerMessage as Message

from streamcrawl.topology.worker.acks import refuse_untracked_acks, untrack

TOPIC = "t.outcomes"


async def _event(topic: Any, offset: int) -> Any:
    message = Message(
        TOPIC, 0, offset, 0.0, None, [], b"k", b"v", None, tp=TP(TOPIC, 0), generation_id=0
    )
    return await topic.decode(message, propagate=True)


async def test_an_event_the_stream_skips_during_a_rebalance_is_not_acknowledged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pure-Python stream iterator acknowledges a skipped event (the compiled one, used
    where faust-streaming's extension is built, does not)."""
    monkeypatch.setattr(faust.streams, "_CStreamIterator", None)
    app = faust.App("acks-test", broker="kafka://127.0.0.1:9", autodiscover=False)
    topic = app.topic(
        TOPIC, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    acked: list[int] = []
    consumer = app.consumer
    consumer.ack = lambda message: acked.append(message.offset) or True  # no broker here
    refuse_untracked_acks(consumer, {TOPIC})
    app.consumer_generation_id = 0
    # subscribed, as the worker's consumer is (the conductor's index, built when it starts):
    # the events the stream delivers are tracked
    app.topics._acking_topics.add(TOPIC)
    stream = topic.stream()
    queue = stream.channel.queue  # the iterator of the topic the stream reads
    delivered: list[int] = []

    async def read() -> None:
        async for event in stream.noack().events():
            delivered.append(event.message.offset)
            await stream.ack(event)

    app.flow_control.resume()  # a running worker (flow starts suspended)
    reader = asyncio.ensure_future(read())
    try:
        app.flow_control.suspend()  # a rebalance under way: the stream skips what it finds
        queue.put_nowait(await _event(topic, 7))
        await asyncio.sleep(0.1)
        app.flow_control.resume()
        queue.put_nowait(await _event(topic, 8))
        await asyncio.sleep(0.1)
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
    assert delivered == [8]
    assert acked == [8]  # the skipped event 7 was not acknowledged: it holds the commit back


def test_other_topics_and_delivered_events_are_acknowledged() -> None:
    acked: list[int] = []

    class Consumer:
        def ack(self, message: Any) -> bool:
            acked.append(message.offset)
            return True

    consumer = Consumer()
    refuse_untracked_acks(consumer, {TOPIC})
    refuse_untracked_acks(consumer, {TOPIC})  # once is enough
    other = Message("t.pages", 0, 1, 0.0, None, [], b"k", b"v", None)
    skipped = Message(TOPIC, 0, 2, 0.0, None, [], b"k", b"v", None)
    delivered = Message(TOPIC, 0, 3, 0.0, None, [], b"k", b"v", None)
    delivered.tracked = True
    assert [consumer.ack(m) for m in (other, skipped, delivered)] == [True, False, True]
    assert acked == [1, 3]


async def test_the_stream_keeps_its_last_event_and_untrack_stops_the_wait_for_it() -> None:
    """Faust's compiled stream iterator keeps the last event it yielded while it awaits the
    next; unacknowledged, that event is one a rebalance waits for (``consumer.unacked``), so
    a refused event is untracked (``run_batches``) rather than left to the garbage collector."""
    assert faust.streams._CStreamIterator is not None  # the extension the worker runs with
    app = faust.App("acks-test", broker="kafka://127.0.0.1:9", autodiscover=False)
    topic = app.topic(
        TOPIC, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    consumer = app.consumer
    app.consumer_generation_id = 0
    app.topics._acking_topics.add(TOPIC)
    stream = topic.stream()
    refs: list[weakref.ref[Any]] = []

    async def read() -> None:
        async for event in stream.noack().events():
            refs.append(weakref.ref(event))
            del event  # nothing of ours holds it

    app.flow_control.resume()
    reader = asyncio.ensure_future(read())
    try:
        stream.channel.queue.put_nowait(await _event(topic, 7))
        await asyncio.sleep(0.1)  # delivered; the stream awaits the next event
        gc.collect()
        (ref,) = refs
        held = ref()
        assert held is not None  # Faust's iterator still holds it
        assert [m.offset for m in consumer.unacked] == [7]  # so wait_empty would wait
        untrack(consumer, held)
        assert list(consumer.unacked) == []
        assert not held.message.acked  # untracked, not acknowledged: its offset stays uncommitted
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
