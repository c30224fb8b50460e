"""The Kafka wiring's agents in one event loop, without a broker: for tests that must hold for
both wirings (the embedded crawl and the Kafka agents) against local HTTP servers.

``FetchService`` (real ``Stages``, real HTTP) and ``FrontierAgent`` run over dict tables; the
publisher routes ``frontier``/``outcomes`` values back to the frontier agent in order (one
queue: per-partition order is kept), collects ``status`` and ``pages``, and refuses a value
over ``MESSAGE_LIMIT`` as the broker would (``pages``: ``PAGE_LIMIT``). The broker's own
behaviour (delivery, rebalances) is what ``tests/integration/test_topology*.py`` test.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from streamcrawl.agents.fetch import make_session
from streamcrawl.agents.kafka_frontier import FrontierAgent, Where
from streamcrawl.agents.kafka_scheduler import FetchService
from streamcrawl.agents.kafka_state import TableStore, partition_for
from streamcrawl.agents.metrics import Metrics
from streamcrawl.agents.pipeline import Stages
from streamcrawl.agents.rules import CrawlRules
from streamcrawl.schemas.codec import decode, encode
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, Page, UrlRef, UrlStatus

MESSAGE_LIMIT = 1024 * 1024  # Kafka's default max.message.bytes (the topics but pages)
PAGE_LIMIT = 16 * 1024 * 1024  # the pages topic's (Settings.max_message_bytes)
SETTLE = 0.5  # seconds of nothing in flight and nothing queued that end the crawl


class MessageTooLarge(Exception):
    """What the broker answers to a value over the topic's max.message.bytes."""


class View:
    """The one crawl's rules; no other partition admits anything (no page budget sharing)."""

    def __init__(self, rules: CrawlRules) -> None:
        self._rules = rules

    def rules(self, crawl_id: str) -> CrawlRules | None:
        return self._rules if crawl_id == self._rules.policy.crawl_id else None

    async def wait_rules(self, crawl_id: str, timeout: float) -> CrawlRules | None:
        return self.rules(crawl_id)

    def admitted_elsewhere(self, crawl_id: str, partition: int, partitions: int) -> int:
        return 0


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

    def __post_init__(self) -> None:
        self.rules = CrawlRules.from_policy(self.policy)
        self.store = TableStore({}, {}, {})
        self._inbox: asyncio.Queue[tuple[str, int, bytes]] = asyncio.Queue()
        self._offset = 0
        view = View(self.rules)
        self.service = FetchService(
            store=self.store,
            view=view,  # type: ignore[arg-type]
            publish=self._publish,
            mark=self._mark,
            unstick=lambda _p: None,
            metrics=self.metrics,
            partitions=self.partitions,
            concurrency=self.concurrency,
            page_bytes=PAGE_LIMIT,
        )
        self.agent = FrontierAgent(
            store=self.store,
            view=view,  # type: ignore[arg-type]
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

    async def _mark(self, partition: int, value: bytes) -> None:
        return None

    async def _consume(self) -> None:
        while True:
            short, partition, value = await self._inbox.get()
            self._offset += 1
            await self.agent.handle(Where(f"t.{short}", partition, self._offset), value)
            self._inbox.task_done()

    def _idle(self) -> bool:
        svc = self.service
        return self._inbox.empty() and not svc._inflight and len(svc.scheduler) == 0

    async def run(self, timeout: float = 60.0) -> AgentsCrawl:
        """Seed, crawl until nothing is queued or in flight for ``SETTLE`` s (or ``timeout``)."""
        svc = self.service
        svc.owned = set(range(self.partitions))
        svc._stages = Stages(make_session(self.policy, limit=self.concurrency), svc._seen)
        seeds: dict[str, list[UrlRef]] = {}
        for seed in self.policy.seeds:
            canon = self.rules.canonicalizer.canonicalize(seed)
            seeds.setdefault(canon.origin, []).append(UrlRef(canon.url, 0, None))
        for origin, refs in seeds.items():
            batch = FrontierBatch(crawl_id=self.policy.crawl_id, origin=origin, urls=tuple(refs))
            await self._publish("frontier", [(origin.encode(), encode(batch))])
        tasks = [asyncio.create_task(self._consume()), asyncio.create_task(svc._dispatch_loop())]
        deadline = time.monotonic() + timeout
        idle_since: float | None = None
        try:
            while time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                if not self._idle():
                    idle_since = None
                elif idle_since is None:
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since >= SETTLE:
                    break
            else:
                raise AssertionError(f"the agents did not finish within {timeout} s")
        finally:
            svc.stopping = True
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await svc._finish(list(svc._inflight), 1.0)
            await svc._stages.session.close()
        return self

    def states(self) -> dict[str, UrlStatus]:
        """URL -> its terminal status; fails if a URL got two."""
        out: dict[str, UrlStatus] = {}
        for status in self.statuses:
            assert status.url not in out, f"two terminal states for {status.url}"
            out[status.url] = status
        return out
