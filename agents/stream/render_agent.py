"""The render worker's body: pages handed on by fetch workers in, their records out.

``RenderAgent.handle`` takes one ``render`` value (a ``RenderRequest``): a bad message is logged,
counted and skipped; a request past its ``expires_at`` is skipped (its fetch worker published
the page's HTTP copy itself); otherwise the page is rendered and read (``RenderStage.run``,
under the crawl's rules from the ``SharedView`` of crawl specs) and its report published as the
fetch service publishes one: the page (and capture) and the other origins' link batches
first, the outcome last, all keyed by origin (``publish_report``).

``RenderService`` is the consumer: a plain aiokafka consumer in the render workers' group
(``topics.render_group``), no tables. It takes up to ``concurrency`` requests at a time,
renders them together and commits their offsets only once every report is in Kafka, so a
worker killed mid-way leaves them uncommitted: the group hands them to a worker again and they
are rendered again (idempotent: docs/rendering.md, "The Kafka wiring").
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import CommitFailedError, IllegalStateError
from mode import Service

from streamcrawl.agents.net.render_stage import RenderStage
from streamcrawl.agents.net.stages import Report
from streamcrawl.agents.stream.connection import KafkaConnection
from streamcrawl.agents.stream.control import SharedView
from streamcrawl.agents.stream.frontier_agent import Publisher
from streamcrawl.agents.stream.messages import frontier_values, report_messages
from streamcrawl.agents.stream.render_metrics import RenderMetrics
from streamcrawl.schemas.codec import BadMessage, decode
from streamcrawl.schemas.records import RenderRequest

log = logging.getLogger(__name__)

RULES_WAIT = 60.0  # seconds a request waits for its crawl's spec (as the frontier agent)
POLL_MS = 1000  # the longest an idle consumer waits; also how soon a stop is seen


async def publish_report(publish: Publisher, report: Report, page_bytes: int) -> None:
    """Page, capture and link batches first, the outcome last (as ``FetchService._publish``):
    once the outcome is applied the URL leaves its queue, so everything it produced must
    already be in Kafka. Other origins' batches go keyed by their own origin."""
    messages = report_messages(report, page_bytes=page_bytes)
    key = messages.origin.encode()
    sends = []
    if messages.pages:
        sends.append(publish("pages", [(key, v) for v in messages.pages]))
    if messages.captures:
        sends.append(publish("captures", [(key, v) for v in messages.captures]))
    if messages.batches:
        values = frontier_values(messages.batches)
        sends.append(publish("frontier", [(origin.encode(), v) for origin, v in values]))
    if sends:
        await asyncio.gather(*sends)
    await publish("outcomes", [(key, messages.outcome)])


class RenderAgent:
    """Renders one request at a time per call; ``handle`` may run concurrently."""

    def __init__(
        self,
        stage: RenderStage,
        view: SharedView,
        publish: Publisher,
        metrics: RenderMetrics,
        page_bytes: int,
    ) -> None:
        self.stage = stage
        self.view = view
        self.publish = publish
        self.metrics = metrics
        self.page_bytes = page_bytes
        self.rendered = 0  # requests rendered and published (tests, logs)
        self.expired = 0  # requests past their expires_at, skipped

    async def handle(self, value: bytes, where: str = "render") -> None:
        """Render and publish the request ``value``; raises only if publishing failed (the
        caller must not commit its offset then)."""
        try:
            req = decode("render", value)
        except BadMessage as exc:
            self.metrics.bad_messages.labels("render").inc()
            log.warning("skipping bad render message at %s: %s", where, exc)
            return
        assert isinstance(req, RenderRequest)
        extra: dict[str, object] = {"origin": req.origin}
        if req.expires_at < time.time():
            self.expired += 1
            self.metrics.skipped()
            log.warning(
                "render of %s expired: its fetch worker gave up", req.final_url, extra=extra
            )
            return
        rules = await self.view.wait_rules(req.crawl_id, RULES_WAIT)
        if rules is None:
            self.metrics.skipped()
            log.warning("no spec for crawl %s: %s not rendered", req.crawl_id, req.final_url)
            return
        started = time.perf_counter()
        report = await self.stage.run(req, rules)
        seconds = time.perf_counter() - started
        await publish_report(self.publish, report, self.page_bytes)
        self.metrics.rendered(report.page, seconds)
        self.rendered += 1
        log.info("rendered %s (%s)", req.final_url, report.page and report.page.render, extra=extra)


class RenderService(Service):
    """The render workers' consumer of ``topic`` in ``group`` (see the module docstring)."""

    def __init__(
        self,
        *,
        connection: KafkaConnection,
        topic: str,
        group: str,
        agent: RenderAgent,
        concurrency: int,
        fetch_bytes: int,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.connection = connection
        self.topic = topic
        self.group = group
        self.agent = agent
        self.concurrency = concurrency
        self.fetch_bytes = fetch_bytes
        self._consumer: AIOKafkaConsumer | None = None
        self._consuming: asyncio.Future[None] | None = None

    async def on_start(self) -> None:
        self._consumer = AIOKafkaConsumer(
            self.topic,
            **self.connection,
            group_id=self.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=self.fetch_bytes,
            fetch_max_bytes=max(self.fetch_bytes, 52_428_800),
            # A render takes seconds: the poll interval bounds a batch, not a message.
            max_poll_interval_ms=600_000,
            session_timeout_ms=15_000,
            heartbeat_interval_ms=3_000,
        )
        await self._consumer.start()
        self._consuming = self.add_future(self._consume())

    def ended(self) -> bool:
        """Whether the consumer loop has ended: stopped, or raised (``/healthz``); False
        before it starts."""
        return self._consuming is not None and self._consuming.done()

    async def on_stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()

    async def _consume(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not self.should_stop:
            try:
                batch = await consumer.getmany(timeout_ms=POLL_MS, max_records=self.concurrency)
            except IllegalStateError:
                return  # stopping
            if not batch:
                continue
            items = [(tp, m) for tp, msgs in batch.items() for m in msgs]
            await asyncio.gather(
                *(
                    self.agent.handle(m.value or b"", f"{tp.topic}/{tp.partition}@{m.offset}")
                    for tp, m in items
                )
            )
            offsets = {tp: msgs[-1].offset + 1 for tp, msgs in batch.items()}
            try:
                await consumer.commit(offsets)
            except CommitFailedError as exc:  # rebalanced: another worker renders them again
                log.info("render commit refused after a rebalance: %s", exc)
