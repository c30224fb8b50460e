"""``streamcrawl render-worker``: the Kafka wiring's render stage, in a process of its own.

It holds the one browser of the process (fetch workers never start one): it reads the crawl
specs (``SharedView`` over ``control`` and ``budget``, as every worker), consumes ``render`` in
the group ``topics.render_group`` (``agents.stream.render_agent.RenderService``) and publishes
pages, captures, link batches and outcomes with an idempotent aiokafka producer keyed and
partitioned as the fetch workers' (murmur2 of the origin). No tables, no Faust app: it owns no
state, so any number of them may run (docs/rendering.md, "The Kafka wiring"). A page's
subrequest to another origin is sent in a loan of that origin's slot from its owner
(``agents.stream.slot_client.RemoteSlots``: claims on ``outcomes``, grants on ``grants``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from aiokafka import AIOKafkaProducer

from streamcrawl.agents.net.core import CrawlCore
from streamcrawl.agents.net.render_stage import RenderStage
from streamcrawl.agents.net.stages import Stages
from streamcrawl.agents.render.browser import RenderSettings
from streamcrawl.agents.stream.control import SharedView
from streamcrawl.agents.stream.frontier_agent import Publisher
from streamcrawl.agents.stream.partitioner import key_partition
from streamcrawl.agents.stream.render_agent import RenderAgent, RenderService
from streamcrawl.agents.stream.render_metrics import RenderMetrics
from streamcrawl.agents.stream.slot_client import RemoteSlots
from streamcrawl.topology.admin.topics import render_group, topic_name
from streamcrawl.topology.settings import Settings
from streamcrawl.topology.worker import render_web
from streamcrawl.topology.worker.clients import (
    PRODUCER_CONNECTION_TIMEOUT_MS,
    aiokafka_connection,
    aiokafka_producer_settings,
)
from streamcrawl.topology.worker.internals import refresh_metadata

log = logging.getLogger(__name__)


@dataclass
class RenderWorker:
    """What ``build`` made: start ``view`` and ``producer``, then ``service``."""

    view: SharedView
    producer: AIOKafkaProducer
    service: RenderService
    stages: Stages
    core: CrawlCore
    metrics: RenderMetrics
    slots: RemoteSlots  # loans of other origins' slots, for the renders' subrequests


def build(settings: Settings, core: CrawlCore | None = None) -> RenderWorker:
    """The render worker of ``settings`` (call inside a running event loop). ``core``: the
    stages' factory (default: over ``settings.network()``, the browser rendering
    ``settings.render_concurrency`` pages at once)."""
    if core is None:
        render = RenderSettings(concurrency=settings.render_concurrency)
        core = CrawlCore(settings.network(), render)
    connection = aiokafka_connection(settings)
    metrics = RenderMetrics()
    view = SharedView(
        connection,
        topic_name(settings, "control"),
        topic_name(settings, "budget"),
        metrics,
        refresh_metadata=refresh_metadata,
    )
    producer = AIOKafkaProducer(
        **connection,
        **aiokafka_producer_settings(settings),
        compression_type="zstd",
        max_request_size=settings.max_message_bytes,
        partitioner=key_partition,
        connections_max_idle_ms=540_000,
        request_timeout_ms=PRODUCER_CONNECTION_TIMEOUT_MS,
    )
    publish = _publisher(settings, producer)
    slots = RemoteSlots(
        publish, connection, topic_name(settings, "grants"), producer.partitions_for
    )
    stages = core.stages(lambda _crawl, _url: False, render=True, lender=slots)
    metrics.watch(core.renderer())
    agent = RenderAgent(
        RenderStage(stages),
        view,
        publish,
        metrics,
        page_bytes=settings.max_message_bytes,
    )
    service = RenderService(
        connection=connection,
        topic=topic_name(settings, "render"),
        group=render_group(settings),
        agent=agent,
        concurrency=settings.render_concurrency,
        fetch_bytes=settings.max_message_bytes,
    )
    return RenderWorker(view, producer, service, stages, core, metrics, slots)


def _publisher(settings: Settings, producer: AIOKafkaProducer) -> Publisher:
    async def publish(
        short: str, items: Sequence[tuple[bytes, bytes]], *, on_commit: bool = False
    ) -> None:
        """Send every value and wait for its ack (``on_commit`` is the fetch service's)."""
        name = topic_name(settings, short)
        futures = [await producer.send(name, value, key=key) for key, value in items]
        await asyncio.gather(*futures)

    return publish


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    """Run a render worker until ``stop`` is set; then finish the batch in hand (its offsets
    committed), stop the browser and leave the group."""
    worker = build(settings)
    web = await start_web(settings, worker, stop)
    await worker.producer.start()
    await worker.view.start()
    try:
        await worker.slots.start()
        await worker.view.ready.wait()
        await worker.service.start()
        log.info("render worker started: %s", topic_name(settings, "render"))
        await stop.wait()
    finally:
        await web.stop()
        await worker.service.stop()
        await worker.slots.stop()
        await worker.view.stop()
        await worker.producer.stop()
        await worker.stages.close()
        await worker.core.close()  # the browser


async def start_web(
    settings: Settings, worker: RenderWorker, stop: asyncio.Event
) -> render_web.WebPort:
    """The worker's ``/healthz`` and ``/metrics`` on ``settings.render_web_port`` (started
    first: a port already taken fails the start at once)."""
    unhealthy = partial(_unhealthy, worker, stop)
    return await render_web.start(
        settings.web_host, settings.render_web_port, worker.metrics, unhealthy
    )


def _unhealthy(worker: RenderWorker, stop: asyncio.Event) -> str | None:
    """Why the worker's ``/healthz`` fails: its consumer loop ended and it is not stopping."""
    if worker.service.ended() and not stop.is_set():
        return "render consumer stopped"
    return None


def run(settings: Settings) -> None:
    """Run a render worker until SIGTERM or SIGINT (exit 0)."""
    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(settings, stop)

    asyncio.run(main())
