"""The Kafka wiring in one process, for behaviour tests: the worker's ``FrontierAgent`` and
``FetchService`` over dict tables, with the topics replaced by one in-process queue.

``crawl_kafka`` takes the same arguments and returns the same ``(summary, pages, urls)`` as the
embedded helper of tests/integration/test_embedded_crawl.py, so one test body checks both
wirings (its ``run_crawl`` fixture). Built only on what the worker itself calls: the agent's
``handle`` per event, the service's ``start``/``rebuild``/``stop``, a ``SharedView`` holding the
spec, and the publisher protocol both take; the frontier and outcome events of every partition
go through one FIFO queue, which is one order Kafka may deliver them in.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import msgspec

from streamcrawl.agents.kafka_control import SharedView
from streamcrawl.agents.kafka_frontier import FrontierAgent, Where
from streamcrawl.agents.kafka_scheduler import FetchService
from streamcrawl.agents.kafka_state import TableStore, partition_for
from streamcrawl.agents.metrics import Metrics
from streamcrawl.agents.rules import CrawlRules
from streamcrawl.agents.state import ORIGINS
from streamcrawl.schemas.codec import decode, encode
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, OriginState, UrlRef

PARTITIONS = 4
PREFIX = "inprocess"
_decode_origin = msgspec.msgpack.Decoder(OriginState).decode


class Topics:
    """The publisher of both components: ``frontier``/``outcomes`` values are queued for the
    frontier agent (partition by the key, as Kafka's murmur2 does), ``pages`` and ``status``
    are collected, ``budget`` counts go to the shared view."""

    def __init__(self, view: SharedView) -> None:
        self.view = view
        self.events: asyncio.Queue[tuple[str, int, int, bytes]] = asyncio.Queue()
        self.offsets: dict[tuple[str, int], int] = {}
        self.pages: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self.busy = False  # the frontier agent is handling an event

    async def __call__(
        self, short: str, items: Any, *, on_commit: bool = False
    ) -> None:  # the ``Publisher`` protocol
        for key, value in items:
            if short in ("frontier", "outcomes"):
                self._queue(short, partition_for(key.decode(), PARTITIONS), value)
            elif short == "pages":
                self.pages.append(msgspec.to_builtins(decode("pages", value)))
            elif short == "status":
                self.statuses.append(msgspec.to_builtins(decode("status", value)))
            elif short == "budget":
                self.view.budgets[key] = int(value)
            else:
                raise AssertionError(f"unexpected topic {short}")

    async def mark(self, partition: int, value: bytes) -> None:
        self._queue("outcomes", partition, value)

    def _queue(self, short: str, partition: int, value: bytes) -> None:
        offset = self.offsets.get((short, partition), 0)
        self.offsets[(short, partition)] = offset + 1
        self.events.put_nowait((short, partition, offset, value))


async def _consume(agent: FrontierAgent, topics: Topics) -> None:
    """The frontier agent's stream: one ``handle`` per event, in order."""
    while True:
        short, partition, offset, value = await topics.events.get()
        topics.busy = True
        await agent.handle(Where(f"{PREFIX}.{short}", partition, offset), value)
        topics.busy = False


def _drained(store: TableStore) -> bool:
    """Every origin's queue is empty: a fetched URL stays at its head until its outcome was
    applied, so nothing is in flight either."""
    return all((state := _decode_origin(raw)).head >= state.tail for _, raw in store.scan(ORIGINS))


async def crawl_kafka(
    tmp_path: Path, seeds: list[str], timeout: float = 60.0, **policy: Any
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Crawl ``seeds`` through the Kafka agents; ``(summary, pages, urls)`` as the embedded
    helper returns them (``summary`` has ``pages``, ``states`` and ``elapsed_s``)."""
    spec = CrawlPolicy(crawl_id="t", seeds=tuple(seeds), **{"delay": 0.0, **policy})
    metrics = Metrics()
    view = SharedView(None, f"{PREFIX}.control", f"{PREFIX}.budget", metrics)
    view.policies[spec.crawl_id] = spec
    topics = Topics(view)
    store = TableStore({}, {}, {})
    service = FetchService(
        store=store,
        view=view,
        publish=topics,
        mark=topics.mark,
        unstick=lambda partition: None,
        metrics=metrics,
        partitions=PARTITIONS,
        concurrency=8,
    )
    agent = FrontierAgent(
        store=store,
        view=view,
        publish=topics,
        hook=service,
        metrics=metrics,
        partitions=PARTITIONS,
    )
    started = time.monotonic()
    consumer = asyncio.create_task(_consume(agent, topics))
    await service.start()
    try:
        service.rebuild(set(range(PARTITIONS)))  # catch-up markers first, as on assignment
        await _seed(topics, spec)
        await _wait_drained(store, topics, consumer, timeout)
    finally:
        await service.stop()
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)
    summary = {
        "pages": len(topics.pages),
        "states": _count(topics.statuses),
        "elapsed_s": time.monotonic() - started,
    }
    return summary, topics.pages, topics.statuses


async def _seed(topics: Topics, spec: CrawlPolicy) -> None:
    """One frontier batch per seed origin, as ``streamcrawl seed`` publishes them."""
    canonicalizer = CrawlRules.from_policy(spec).canonicalizer
    by_origin: dict[str, list[UrlRef]] = {}
    for seed in spec.seeds:
        canon = canonicalizer.canonicalize(seed)
        by_origin.setdefault(canon.origin, []).append(UrlRef(canon.url, 0, None))
    for origin, refs in by_origin.items():
        batch = FrontierBatch(crawl_id=spec.crawl_id, origin=origin, urls=tuple(refs))
        await topics("frontier", [(origin.encode(), encode(batch))])


async def _wait_drained(
    store: TableStore, topics: Topics, consumer: asyncio.Task[None], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    quiet = 0  # consecutive idle looks: a publish may be between two awaits
    while quiet < 3:
        await asyncio.sleep(0.02)
        if consumer.done():
            consumer.result()  # the agent raised: fail the test with its error
        idle = topics.events.empty() and not topics.busy and _drained(store)
        quiet = quiet + 1 if idle else 0
        if time.monotonic() > deadline:
            raise TimeoutError(f"the in-process Kafka crawl did not drain in {timeout} s")


def _count(statuses: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status["state"]] = counts.get(status["state"], 0) + 1
    return counts
