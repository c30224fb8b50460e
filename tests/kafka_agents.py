"""The Kafka wiring's agents in one event loop, without a broker: for tests that must hold for
both wirings (the embedded crawl and the Kafka agents) against local HTTP servers.

``FetchService`` (real ``Stages``, real HTTP) and ``FrontierAgent`` run over dict tables, wired
only through what the worker itself calls: the agent's ``handle`` per event, the service's
``start``/``rebuild``/``stop`` (with its catch-up markers), a ``SharedView`` holding the spec and
the page budget counts, and the publisher protocol both take. The publisher routes
``frontier``/``outcomes`` values back to the frontier agent in order (one queue: per-partition
order is kept), collects ``status`` and ``pages``, and refuses a value over ``MESSAGE_LIMIT`` as
the broker would (``pages``: ``PAGE_LIMIT``); ``render`` values go to a ``RenderAgent`` (the
render worker's) in the same loop, each as a task. The broker's own behaviour (delivery, rebalances)
is what ``tests/integration/test_topology*.py`` test.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from streamcrawl.agents.content.listings import plan_seeds
from streamcrawl.agents.frontier.records import decode_origin
from streamcrawl.agents.frontier.store import ORIGINS
from streamcrawl.agents.net.core import CrawlCore
from streamcrawl.agents.net.network import Network
from streamcrawl.agents.net.render_stage import RenderStage
from streamcrawl.agents.plugins.registry import Registry
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.render.browser import RenderSettings
from streamcrawl.agents.stream.control import SharedView
from streamcrawl.agents.stream.fetch_service import FetchService
from streamcrawl.agents.stream.frontier_agent import FrontierAgent, Where
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.agents.stream.render_agent import RenderAgent
from streamcrawl.agents.stream.render_metrics import RenderMetrics
from streamcrawl.agents.stream.tables import TableStore, partition_for
from streamcrawl.schemas.codec import decode, encode
from streamcrawl.schemas.records import (
    CrawlPolicy,
    Page,
    UrlStatus,
)
from streamcrawl.topology.worker.internals import refresh_metadata
from tests.httpserver import LOOPBACK_GUARD

MESSAGE_LIMIT = 1024 * 1024  # Kafka's default max.message.bytes (the topics but pages)
PAGE_LIMIT = 16 * 1024 * 1024  # the pages topic's (Settings.max_message_bytes)
SETTLE = 0.1  # seconds of empty queues and an idle agent that end the crawl


class MessageTooLarge(Exception):
    """What the broker answers to a value over the topic's max.message.bytes."""


@dataclass
class AgentsCrawl:
    """One crawl through the Kafka agents; ``statuses``/``pages`` are what the sink would get."""

    policy: CrawlPolicy
    partitions: int = 4
    concurrency: int = 8
    statuses: list[UrlStatus] = field(default_factory=list)
    pages: list[Page] = field(default_factory=list)
    refused: int = 0  # values refused as too large
    metrics: Metrics = field(default_factory=Metrics)
    # The process's network (proxy, credentials); default: loopback allowed, nothing else.
    network: Network = field(default_factory=lambda: Network(guard=LOOPBACK_GUARD))
    plugins: Registry | None = None  # where the crawl's plugins are found (docs/plugins.md)
    # The process's browser settings (crawls with --render); None: the defaults.
    render: RenderSettings | None = None

    def __post_init__(self) -> None:
        self.rules = CrawlRules.from_policy(self.policy, self.plugins, missing_ok=True)
        self.store = TableStore({}, {}, {})
        self.view = SharedView(
            None,  # type: ignore[arg-type]
            "t.control",
            "t.budget",
            self.metrics,
            refresh_metadata=refresh_metadata,
            plugins=self.plugins,
        )
        self.view.policies[self.policy.crawl_id] = self.policy
        self._inbox: asyncio.Queue[tuple[str, int, bytes]] = asyncio.Queue()
        # each topic partition's next offset: the agent acknowledges and takes catch-up markers
        # only in offset order (agents/stream/order.py), as a Kafka partition delivers them
        self._offsets: dict[tuple[str, int], int] = {}
        self._busy = False
        self.service = FetchService(
            store=self.store,
            view=self.view,
            publish=self._publish,
            mark=self._mark,
            unstick=lambda _p: None,
            metrics=self.metrics,
            partitions=self.partitions,
            concurrency=self.concurrency,
            page_bytes=PAGE_LIMIT,
            core=CrawlCore(self.network),
        )
        # The render workers' agent, in this loop (``render`` values go to it as tasks).
        self.render_core = CrawlCore(self.network, self.render)
        self.renderer: RenderAgent | None = None
        self._rendering: set[asyncio.Task[None]] = set()
        self.agent = FrontierAgent(
            store=self.store,
            view=self.view,
            publish=self._publish,
            hook=self.service,
            metrics=self.metrics,
            partitions=self.partitions,
        )

    async def _publish(
        self, short: str, items: Sequence[tuple[bytes, bytes]], *, on_commit: bool = False
    ) -> None:
        limit = PAGE_LIMIT if short == "pages" else MESSAGE_LIMIT
        if any(len(v) > limit for _, v in items):
            self.refused += 1
            raise MessageTooLarge(f"a {short} value is over {limit} bytes")
        for key, value in items:
            if short in ("frontier", "outcomes"):
                self._inbox.put_nowait((short, partition_for(key.decode(), self.partitions), value))
            elif short == "status":
                self.statuses.append(decode("status", value))
            elif short == "pages":
                self.pages.append(decode("pages", value))
            elif short == "budget":
                self.view.budgets[key] = int(value)
            elif short == "render":
                assert self.renderer is not None
                task = asyncio.ensure_future(self.renderer.handle(value))
                self._rendering.add(task)
                task.add_done_callback(self._rendering.discard)

    async def _mark(self, partition: int, value: bytes) -> None:
        self._inbox.put_nowait(("outcomes", partition, value))

    async def _consume(self) -> None:
        """The frontier agent's stream: one ``handle`` per event, in order."""
        while True:
            short, partition, value = await self._inbox.get()
            offset = self._offsets.get((short, partition), 0)
            self._offsets[short, partition] = offset + 1
            self._busy = True
            await self.agent.handle(Where(f"t.{short}", partition, offset), value)
            self._busy = False

    def _idle(self) -> bool:
        """Nothing queued for the agent and every origin's queue empty: a fetched URL stays at
        its queue head until its outcome was applied, so nothing is in flight either."""
        drained = all(
            (state := decode_origin(raw)).head >= state.tail for _, raw in self.store.scan(ORIGINS)
        )
        return self._inbox.empty() and not self._busy and drained

    async def run(self, timeout: float = 60.0, *, for_seconds: float | None = None) -> AgentsCrawl:
        """Seed, crawl until idle for ``SETTLE`` s; fails after ``timeout`` s. ``for_seconds``:
        crawl that long, then stop (a continuous crawl is never idle)."""
        consumer = asyncio.create_task(self._consume())
        stages = self.render_core.stages(lambda _crawl, _url: False, render=True)
        self.renderer = RenderAgent(
            RenderStage(stages), self.view, self._publish, RenderMetrics(), PAGE_LIMIT
        )
        await self.service.start()
        try:
            every = set(range(self.partitions))
            self.service.assigned(every)  # the group's assignment, then its tables recovered:
            self.service.rebuild(every)  # markers first
            await self._seed()
            if for_seconds is None:
                await self._wait_idle(consumer, timeout)
            else:
                await asyncio.sleep(for_seconds)
                if consumer.done():
                    consumer.result()
        finally:
            await self.service.stop()
            consumer.cancel()
            for task in self._rendering:
                task.cancel()
            await asyncio.gather(consumer, *self._rendering, return_exceptions=True)
            await stages.close()
            await self.render_core.close()
        return self

    async def _seed(self) -> None:
        """One frontier batch per seed origin, as ``streamcrawl seed`` publishes them."""
        for batch in plan_seeds(self.rules):  # what the seed command sends
            await self._publish("frontier", [(batch.origin.encode(), encode(batch))])

    async def _wait_idle(self, consumer: asyncio.Task[None], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        idle_since: float | None = None
        while True:
            await asyncio.sleep(0.02)
            if consumer.done():
                consumer.result()  # the agent raised: fail with its error
            if time.monotonic() > deadline:
                raise AssertionError(f"the agents did not finish within {timeout} s")
            if not self._idle():
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= SETTLE:
                return

    def states(self) -> dict[str, UrlStatus]:
        """URL -> its terminal status; fails if a URL got two."""
        out: dict[str, UrlStatus] = {}
        for status in self.statuses:
            assert status.url not in out, f"two terminal states for {status.url}"
            out[status.url] = status
        return out
