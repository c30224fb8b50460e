"""The frontier agent's Faust plumbing: events in batches, and a batch made durable.

``run_batches`` feeds the agent: a reader task iterates the stream without acknowledging
(``noack``) into a bounded queue; the agent's own task takes what is buffered (at most
``FRONTIER_BATCH`` events, waiting at most ``FRONTIER_WITHIN`` after the first), applies them
and only then acknowledges them, in order. The reader never holds events back: a loop that
waited on the stream itself for "one more" event while holding a batch unacknowledged could
wait forever (the stream skips stale events and blocks while a rebalance has suspended flow
control), and Faust's rebalance waits for every unacknowledged event (``wait_empty``): the
worker then applied nothing, for good.

``DurableCommit`` is the ``Committer`` of the Faust wiring. Faust's own route (a table write
queues its changelog message in the producer buffer; the offset commit flushes the producer
first) is not a guarantee: the buffer's flush gives up after 0.1 s without a message sent, and
a commit can then run ahead of changelog messages still queued. Here every message of a batch
(statuses, re-keyed URLs, budget counts, changelog records) is produced directly, and the
batch returns only when Kafka acked all of them; the table changes go in the crash-safe stages
of ``agents.stream.tables.write_stages``, each acked before the next is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from faust.types import TP

from streamcrawl.agents.stream.frontier_agent import Enter, FrontierAgent, Sends, Where, Writes
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.agents.stream.tables import STAGES, namespaces, write_stages
from streamcrawl.topology.worker.internals import set_current_event

log = logging.getLogger(__name__)

FRONTIER_BATCH = 500  # events applied together at most
# How long a batch waits for more events after its first one. Short against the delays it
# could add (only robots.txt, retries and backoffs hold their origin's slot until applied),
# long enough that at low rates many events share one commit, so that a page costs about
# what it costs at high rates: 200 ms rather than 50 cut a worker's CPU per page at low rates,
# and longer measured no better (docs/performance.md, "Batch windows and the cost per second").
FRONTIER_WITHIN = 0.2
# The window while a dispatch waits for an apply (``hurry``): its request starts no earlier than
# this after the outcome came, and events arriving together still share a commit.
HURRY_WITHIN = 0.02


async def run_batches(
    stream: Any,
    frontier: FrontierAgent,
    metrics: Metrics,
    *,
    untrack: Callable[[Any], None],
    hurry: Callable[[], bool] = lambda: False,
    max_events: int = FRONTIER_BATCH,
    within: float = FRONTIER_WITHIN,
    hurry_within: float = HURRY_WITHIN,
) -> None:
    """The frontier agent's body: apply the stream's events in batches, ack them after.

    ``untrack(event)`` is called for an event the frontier refused (read out of order: it is
    never acknowledged, and read again after a seek). It must take the event out of what a
    rebalance or a stop waits for (Faust's ``consumer.unacked``): Faust waits for every
    unacknowledged event that is still referenced, and its own stream iterator keeps the
    last event it yielded while it awaits the next one, so a refused event read last before
    a rebalance held the worker in ``wait_empty`` for good.

    ``hurry()``: a dispatch waits for the frontier to apply an outcome (the fetch service's
    ``waiting_on_apply``); the batch then waits ``hurry_within`` instead of ``within`` for
    more: the wait is added to that dispatch."""
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=2 * max_events)
    # Set by the reader once the queue holds the rest of a batch: the window then ends early.
    # The batch task wakes once per window, not once per event (at low rates events come one
    # at a time, and a timed ``queue.get`` per event was a task and a timer each).
    filled = asyncio.Event()

    def window() -> float:
        """How long a batch waits for more events after its first."""
        return hurry_within if hurry() else within

    reader = asyncio.ensure_future(_read(stream, queue, filled, max_events))
    try:
        while True:
            events = await _next_batch(queue, reader, filled, max_events, window)
            if events is None:
                return
            await _apply(stream, frontier, metrics, events, untrack)
            # Nor are the events kept alive here while the next batch is awaited (memory,
            # and an event untracked by mistake would be waited for as long as it lives).
            del events
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader


async def _read(
    stream: Any, queue: asyncio.Queue[Any], filled: asyncio.Event, max_events: int
) -> None:
    """The reader task: put the stream's events, unacknowledged, into ``queue``."""
    async for event in stream.noack().events():
        await queue.put(event)
        del event  # not held while the stream waits for the next: see ``run_batches``
        if queue.qsize() >= max_events - 1:
            filled.set()


async def _next_batch(
    queue: asyncio.Queue[Any],
    reader: asyncio.Future[None],
    filled: asyncio.Event,
    max_events: int,
    window: Callable[[], float],
) -> list[Any] | None:
    """The next batch: its first event and what the queue holds ``window()`` seconds later (or
    once it holds a full one), at most ``max_events``; None: the stream ended (or it raises)."""
    getter = asyncio.ensure_future(queue.get())
    done, _ = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
    if reader in done:
        getter.cancel()
        reader.result()  # the stream ended or failed: raise it
        return None
    events = [getter.result()]
    if queue.qsize() < max_events - 1:
        filled.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(filled.wait(), window())
    while len(events) < max_events and not queue.empty():
        events.append(queue.get_nowait())
    return events


async def _apply(
    stream: Any,
    frontier: FrontierAgent,
    metrics: Metrics,
    events: list[Any],
    untrack: Callable[[Any], None],
) -> None:
    """Apply one batch, then acknowledge its events in order (``untrack`` the refused ones)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    refused = await frontier.handle_batch(
        [
            (Where(e.message.topic, e.message.partition, e.message.offset), e.message.value)
            for e in events
        ],
        _enter({e.message.partition: e for e in events}),
    )
    for i, event in enumerate(events):  # in order: Faust commits up to the first gap
        if i in refused:  # read out of order, before a seek: read again later
            untrack(event)
        else:
            await stream.ack(event)
    metrics.frontier_batch.observe(loop.time() - started)
    metrics.frontier_batch_events.observe(len(events))


def _enter(latest: dict[int, Any]) -> Enter:
    """``enter(p)``: make the batch's (last) event of partition ``p`` the current one."""
    return lambda partition: set_current_event(latest[partition])


class DurableCommit:
    """Produces a batch's messages and table changes and waits for Kafka's acks."""

    def __init__(
        self, app: Any, name: Callable[[str], str], tables: dict[str, Any], metrics: Metrics
    ) -> None:
        self.app = app
        self.name = name  # a topic's short name -> its name (topology.admin.topics.topic_name)
        self.metrics = metrics
        self.tables = namespaces(tables["seen"], tables["pending"], tables["origins"])

    async def __call__(self, sends: Sends, writes: Writes, enter: Enter) -> None:
        producer = self.app.producer
        acks: list[Awaitable[Any]] = []
        for short, items in sends.items():
            topic = self.name(short)
            for k, v in items:
                acks.append(await producer.send(topic, k, v, None, None, None))
            self.metrics.messages_sent.labels(short).inc(len(items))
        stages = {p: write_stages(changes) for p, changes in writes.items()}
        persisted: dict[tuple[Any, int], int] = {}
        for stage in range(STAGES):
            logged: list[tuple[Any, int, Awaitable[Any]]] = []
            for partition, by_stage in stages.items():
                if not by_stage[stage]:
                    continue
                enter(partition)
                for key, value in by_stage[stage]:
                    table = self.tables[key[0]]
                    if value is None:
                        with contextlib.suppress(KeyError):
                            del table.data[key]
                    else:
                        table.data[key] = value
                    topic = table.changelog_topic.get_topic_name()
                    fut = await producer.send(topic, key, value, partition, None, None)
                    logged.append((table, partition, fut))
            results = await asyncio.gather(*(fut for _, _, fut in logged))
            for (table, partition, _), meta in zip(logged, results, strict=True):
                persisted[(table, partition)] = max(
                    persisted.get((table, partition), -1), meta.offset
                )
        await asyncio.gather(*acks)
        for (table, partition), offset in persisted.items():
            # What Faust's changelog callback records: the local RocksDB has the changelog up
            # to here, so a restart with this state directory recovers only what came after.
            topic = table.changelog_topic.get_topic_name()
            table.data.set_persisted_offset(TP(topic, partition), offset)


__all__: Sequence[str] = ("DurableCommit", "run_batches")
