"""The frontier agent's Faust plumbing with fakes for the stream and the producer: a batch is
applied even when the stream has nothing more to give, events are acknowledged only after
their batch is durable and in order, and the changelog stages are acked one after another."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from streamcrawl.agents.frontier.store import META, ORIGINS, PENDING, SEEN
from streamcrawl.agents.stream.frontier_agent import Enter, Where
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.topology.worker.acks import untrack as untrack_event
from streamcrawl.topology.worker.batching import DurableCommit, run_batches
from tests.fake_stream import Event, Message, Stream, run_for


class Frontier:
    def __init__(self, stream: Stream, fail: bool = False, refuse: int | None = None) -> None:
        self.stream = stream
        self.fail = fail
        self.refuse = refuse  # the offset of an event not to be acknowledged (out of order)
        self.batches: list[list[tuple[int, int]]] = []
        self.acked_before: list[int] = []

    async def handle_batch(
        self, events: Sequence[tuple[Where, bytes | None]], enter: Enter
    ) -> set[int]:
        self.acked_before.append(len(self.stream.acked))
        for where, _ in events:
            enter(where.partition)
        await asyncio.sleep(0.01)  # the commit's round trips
        if self.fail:
            raise ConnectionError("broker down")
        self.batches.append([(w.partition, w.offset) for w, _ in events])
        return {i for i, (w, _) in enumerate(events) if w.offset == self.refuse}


def test_a_lone_event_is_applied_though_the_stream_gives_nothing_more() -> None:
    stream = Stream([Event(0, 7)])
    frontier = Frontier(stream)
    asyncio.run(run_for(stream, frontier, 0.3, within=0.05))
    assert frontier.batches == [[(0, 7)]]
    assert stream.acked == [(0, 7)]


def test_a_batch_waits_for_more_events_unless_a_dispatch_waits_for_it() -> None:
    """With a window of 30 s a lone event waits for company; when the fetch service says an
    origin's next request waits for an apply (``hurry``), it waits ``hurry_within`` only."""
    waiting = Stream([Event(0, 7)])
    frontier = Frontier(waiting)
    asyncio.run(run_for(waiting, frontier, 0.3, within=30.0))
    assert frontier.batches == []
    hurried = Stream([Event(0, 7)])
    frontier = Frontier(hurried)
    asyncio.run(run_for(hurried, frontier, 0.3, within=30.0, hurry=lambda: True))
    assert frontier.batches == [[(0, 7)]]


def test_events_are_acked_after_their_batch_in_order_and_batches_are_bounded() -> None:
    events = [Event(p, o) for o in range(10) for p in (0, 1)]
    stream = Stream(events)
    frontier = Frontier(stream)
    asyncio.run(run_for(stream, frontier, 0.5, max_events=8, within=0.05))
    assert [len(b) for b in frontier.batches] == [8, 8, 4]
    assert frontier.acked_before == [0, 8, 16]  # nothing of a batch acked before it is applied
    assert stream.acked == [(e.message.partition, e.message.offset) for e in events]


def test_an_event_the_frontier_refuses_is_not_acked() -> None:
    # Read out of order: acknowledged, Faust could commit past the event before it that was
    # skipped, and that event would never be applied.
    stream = Stream([Event(0, 1), Event(0, 2), Event(0, 3)])
    frontier = Frontier(stream, refuse=2)
    asyncio.run(run_for(stream, frontier, 0.3, within=0.05))
    assert frontier.batches == [[(0, 1), (0, 2), (0, 3)]]
    assert stream.acked == [(0, 1), (0, 3)]
    assert stream.untracked == [(0, 2)]  # nothing waits for it: it is never acknowledged


def test_a_failed_batch_acks_nothing_and_raises() -> None:
    stream = Stream([Event(0, 1), Event(0, 2)])
    frontier = Frontier(stream, fail=True)
    with pytest.raises(ConnectionError):
        # the default window (0.2 s) must pass before the batch is applied: a generous bound,
        # left as soon as the loop raises (0.3 s once failed on a loaded machine)
        asyncio.run(run_for(stream, frontier, 10.0))
    assert stream.acked == []


class Table:
    def __init__(self, name: str, journal: list[str]) -> None:
        self.name = name
        self.data = Data(journal, name)
        self.changelog_topic = self

    def get_topic_name(self) -> str:
        return f"{self.name}-changelog"


class Data(dict[bytes, bytes]):
    def __init__(self, journal: list[str], name: str) -> None:
        super().__init__()
        self.journal, self.name, self.persisted = journal, name, {}

    def set_persisted_offset(self, tp: Any, offset: int) -> None:
        self.persisted[tp.partition] = offset


class Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, int | None]] = []
        self.futures: list[asyncio.Future[Any]] = []

    async def send(self, topic: str, key: bytes, value: Any, partition: Any, *_: Any) -> Any:
        self.sent.append((topic, key, partition))
        fut = asyncio.get_running_loop().create_future()
        self.futures.append(fut)
        return fut

    def ack_all(self) -> int:
        n = 0
        for i, fut in enumerate(self.futures):
            if not fut.done():
                fut.set_result(type("Meta", (), {"offset": i})())
                n += 1
        return n


def test_the_changelog_stages_are_acked_one_after_another() -> None:
    journal: list[str] = []
    tables = {name: Table(name, journal) for name in ("seen", "pending", "origins")}
    producer = Producer()
    app = type("App", (), {"producer": producer})()
    commit = DurableCommit(app, lambda short: f"x.{short}", tables, Metrics())
    writes = {
        3: {
            SEEN + b"u": b"1",
            PENDING + b"o\x00\x01": b"entry",
            ORIGINS + b"o": b"state",
            META + b"admitted": b"5",
            PENDING + b"o\x00\x00": None,
        }
    }
    entered: list[int] = []

    async def go() -> list[list[str]]:
        task = asyncio.ensure_future(commit({"status": [(b"o", b"s")]}, writes, entered.append))
        seen_per_step = []
        for _ in range(6):
            await asyncio.sleep(0.01)
            seen_per_step.append([t for t, _, _ in producer.sent])
            producer.ack_all()
        await asyncio.wait_for(task, 1)
        return seen_per_step

    steps = asyncio.run(go())
    assert steps[0] == ["x.status", "pending-changelog"]  # the sends go out with the first stage
    assert steps[1][2:] == ["seen-changelog"]  # each stage only once the last one is acked
    assert steps[2][3:] == ["origins-changelog"]
    assert steps[3][4:] == ["origins-changelog", "pending-changelog"]  # counters, deletions
    assert [p for t, _, p in producer.sent if t.endswith("changelog")] == [3] * 5
    assert set(entered) == {3}
    assert dict(tables["pending"].data) == {PENDING + b"o\x00\x01": b"entry"}
    assert tables["seen"].data.persisted == {3: 2}  # the changelog offset, for a restart


def test_a_refused_event_is_not_kept_alive_while_the_next_batch_is_awaited() -> None:
    """Faust's rebalance waits for every unacknowledged event that is still referenced (a
    WeakSet): a refused event the batch loop kept would hold the worker there for good."""
    refs: list[weakref.ref[Event]] = []

    class Fresh(Stream):  # holds no event itself once it was yielded
        async def events(self) -> AsyncIterator[Event]:
            for offset in (1, 2):
                refs.append(weakref.ref(made := Event(0, offset)))
                yield made
                del made
            await asyncio.Event().wait()

    stream = Fresh([])
    frontier = Frontier(stream, refuse=2)

    async def run_then_look() -> list[bool]:
        task = asyncio.ensure_future(
            run_batches(stream, frontier, Metrics(), untrack=stream.untrack, within=0.05)  # type: ignore[arg-type]
        )
        await asyncio.sleep(0.3)  # the batch is applied; the loop awaits the next one
        gc.collect()
        alive = [ref() is not None for ref in refs]
        task.cancel()
        return alive

    assert asyncio.run(run_then_look()) == [False, False]
    assert frontier.batches == [[(0, 1), (0, 2)]]
    assert stream.acked == [(0, 1)]


def test_a_refused_event_the_stream_still_holds_is_not_waited_for() -> None:
    """Faust's compiled stream iterator keeps the last event it yielded while it awaits the
    next one; a refused event read last before a rebalance must not hold ``wait_empty``."""
    unacked: weakref.WeakSet[Message] = weakref.WeakSet()  # Faust's ``consumer.unacked``

    class Holding(Stream):
        async def events(self) -> AsyncIterator[Event]:
            last = None
            for offset in (1, 2):
                last = Event(0, offset)
                unacked.add(last.message)  # tracked as it is delivered
                yield last
            await asyncio.Event().wait()  # ``last`` (the refused event) stays referenced

        async def ack(self, event: Event) -> bool:
            unacked.discard(event.message)
            return await super().ack(event)

    stream = Holding([])
    frontier = Frontier(stream, refuse=2)

    async def run_then_look() -> list[int]:
        untrack = lambda e: untrack_event(Consumer(unacked), e)  # noqa: E731
        task = asyncio.ensure_future(
            run_batches(stream, frontier, Metrics(), untrack=untrack, within=0.05)  # type: ignore[arg-type]
        )
        for _ in range(500):  # until the batch is applied (a loaded machine takes longer)
            await asyncio.sleep(0.02)
            if stream.acked or task.done():
                break
        await asyncio.sleep(0.05)  # the stream now holds offset 2, awaiting the next event
        if task.done():
            task.result()  # raise what ended the loop
        gc.collect()
        left = [m.offset for m in unacked]
        task.cancel()
        return left

    assert asyncio.run(run_then_look()) == []
    assert stream.acked == [(0, 1)]  # the refused event is still not acknowledged


@dataclass
class Consumer:
    unacked: weakref.WeakSet[Message]
