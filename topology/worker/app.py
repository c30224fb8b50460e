"""The Faust app of the Kafka wiring: topics, tables, agents, services and web endpoints.

Wiring only (docs/architecture.md, "The Kafka topology"); the crawl logic is in the pure
stages. One ``create_app`` call per worker (no module-level app):

- ``frontier`` agent (concurrency 1, the single table writer) over ``frontier`` + ``outcomes``
  (whose ``SlotMessage`` records are render workers' claims of its origins' slots);
- ``FetchService``: scheduler + fetcher, reads tables, publishes pages/batches/outcomes;
- the sink: a plain consumer of ``pages`` + ``status`` in its own group ``<prefix>-sink``
  (when ``settings.sink_enabled``);
- ``SharedView``: every crawl spec (``control``) and page-budget count (``<prefix>.budget``);
- ``GET /metrics`` (Prometheus), ``/healthz`` (the loop runs), ``/readyz`` (partitions assigned,
  tables recovered, specs read, and neither Kafka nor Cassandra unreachable for longer than
  ``unready_after_s``: ``agents/stream/health.py``).

Exactly-once and the ``confluent://`` transport are deliberately not used (docs/architecture.md,
"Delivery: at least once", says why).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import faust
from faust.types import TP
from faust.web import Request, Response, View
from mode import Service

from streamcrawl.agents.net.core import CrawlCore
from streamcrawl.agents.sinks.contract import Sink
from streamcrawl.agents.stream.control import SharedView
from streamcrawl.agents.stream.fetch_service import FetchService
from streamcrawl.agents.stream.frontier_agent import FrontierAgent, Publisher
from streamcrawl.agents.stream.health import Health, kafka_probe, sink_probe
from streamcrawl.agents.stream.metrics import CONTENT_TYPE, Metrics
from streamcrawl.agents.stream.partitioner import key_partition
from streamcrawl.agents.stream.sink_agent import SinkConsumer
from streamcrawl.agents.stream.tables import TableStore
from streamcrawl.topology.admin.topics import app_id, durability_configs, sink_group, topic_name
from streamcrawl.topology.settings import Settings
from streamcrawl.topology.worker.acks import log_start_offset, refuse_untracked_acks, untrack
from streamcrawl.topology.worker.batching import DurableCommit, run_batches
from streamcrawl.topology.worker.clients import (
    BULK_TOPICS,
    aiokafka_connection,
    bulk_producer,
    faust_acks,
    faust_credentials,
    use_producer_settings,
)
from streamcrawl.topology.worker.internals import (
    committed_offset,
    fetch_in_windows,
    fetch_worker_in_windows,
    read_offset,
    refresh_metadata,
    seek_uncommitted_to_start,
    sink_fetch_in_windows,
)
from streamcrawl.topology.worker.rebalance import RebalanceGate
from streamcrawl.topology.worker.recovery_watch import RecoveryWatch
from streamcrawl.topology.worker.table_reads import DirectReads
from streamcrawl.topology.worker.table_stores import RocksTable

log = logging.getLogger(__name__)

# The frontier agent's inputs: same key (origin) and partition count, so Faust assigns an
# origin's partition of both to one worker, its owner. Not a third: with render workers'
# claims of slots on a ``slots`` topic read here too, a partition was left undelivered after a
# SIGTERM handover in 3 of 7 guarantee-loop runs; they travel on ``outcomes``.
FRONTIER_INPUTS = ("frontier", "outcomes")
HEALTH_STALE = 30.0  # /healthz fails when the dispatch loop has not run for this long


def broker_urls(settings: Settings) -> list[str]:
    """``kafka://host:port`` for every bootstrap server."""
    return [f"kafka://{host}" for host in settings.kafka_bootstrap.split(",")]


def create_app(
    settings: Settings, *, sink: Sink | None = None, core: CrawlCore | None = None
) -> faust.App:
    """A worker app for ``settings``. ``sink`` overrides the Cassandra sink (tests); ``core``
    builds the stages (default: over ``settings.network()``: guard, proxy, credentials)."""
    app = _faust_app(settings)
    use_producer_settings(app, settings)
    metrics = Metrics(state_dir=settings.state_dir)
    fetch_worker_in_windows(app)  # while records come, fetches wait up to 100 ms for more
    topic = partial(_topic, app, settings)
    out = _output_topics(settings, topic)
    bulk = bulk_producer(app)  # pages and captures: their bodies in large batches
    publish = _publisher(app, settings, bulk, metrics)
    tables = {name: _table(app, settings, name) for name in ("seen", "pending", "origins")}
    store = TableStore(*(DirectReads(tables[n]) for n in ("seen", "pending", "origins")))
    view = _shared_view(settings, metrics)
    rebalancing = RebalanceGate(app)
    agent: list[FrontierAgent] = []  # made below, over the fetch service it calls
    fetcher = FetchService(
        store=store,
        view=view,
        publish=publish,
        mark=_marker(out["outcomes"]),
        unstick=_unsticker(app, settings, agent),
        metrics=metrics,
        partitions=settings.partitions,
        concurrency=settings.concurrency,
        page_bytes=settings.max_message_bytes,
        max_origins=settings.max_origins_in_memory,
        halted=lambda: bool(app.should_stop),
        rebalancing=rebalancing,
        core=core if core is not None else CrawlCore(settings.network()),
        render_wait=settings.render_wait,
    )
    frontier = _frontier_agent(app, settings, store, view, publish, fetcher, metrics, tables)
    agent.append(frontier)
    _add_frontier_agent(app, settings, topic, frontier, fetcher, metrics)
    sinker = _sink_consumer(settings, sink, view, metrics)
    health, close_probe = _health(settings, metrics, sinker)
    watch = RecoveryWatch(app, metrics, broker_down=lambda: "kafka" in health.down_since)
    # Started with the app, not among its services: Faust starts those after the first recovery.
    app.add_dependency(watch)
    recovery = RecoveryClock(app)
    _on_rebalance(app, settings, fetcher, rebalancing, metrics, recovery, watch)
    _add_services(
        app,
        settings,
        budget=out["budget"],
        health=health,
        view=view,
        bulk=bulk,
        fetcher=fetcher,
        sinker=sinker,
        close_probe=close_probe,
    )
    _add_pages(app, fetcher, view, health, sinker, recovery)
    return app


def _faust_app(settings: Settings) -> faust.App:
    """The Faust app: brokers, table store, producer and consumer settings, timeouts."""
    return faust.App(
        app_id(settings),
        broker=broker_urls(settings),
        broker_credentials=faust_credentials(settings),
        store="rocksdb://",
        Table=RocksTable,  # its store closes revoked databases without a full collection
        datadir=str(table_dir(settings)),
        table_standby_replicas=settings.standby_replicas,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,  # changelogs, ``budget``
        topic_disable_leader=True,
        web_port=settings.web_port,
        web_bind=settings.web_host,
        key_serializer="raw",
        value_serializer="raw",
        producer_acks=faust_acks(settings),  # idempotence: use_producer_settings below
        producer_max_request_size=settings.max_message_bytes,
        # Pages carry their bodies: compressed by the producer (the topic's zstd keeps them).
        producer_compression_type="zstd",
        producer_partitioner=key_partition,  # the default one, each key hashed once
        consumer_max_fetch_size=settings.max_message_bytes,
        broker_commit_interval=1.0,
        # A worker killed -9 hands its partitions over after this (Faust's default is 60 s);
        # the rebalance timeout leaves room for REVOKE_GRACE of in-flight requests.
        broker_session_timeout=15.0,
        broker_heartbeat_interval=3.0,
        broker_rebalance_timeout=40.0,
        autodiscover=False,
    )


def _topic(app: faust.App, settings: Settings, *shorts: str, **kwargs: Any) -> Any:
    """A Faust topic over the topics ``shorts`` (short names), raw bytes keys and values."""
    return app.topic(
        *(topic_name(settings, s) for s in shorts),
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        **kwargs,
    )


def _output_topics(settings: Settings, topic: Callable[..., Any]) -> dict[str, Any]:
    """The topics the worker sends to, by short name (``budget`` declared by the worker)."""
    out = {s: topic(s, internal=False) for s in ("frontier", "outcomes", "pages", "status")}
    out["budget"] = topic(
        "budget", internal=True, partitions=1, compacting=True, config=durability_configs(settings)
    )
    out["counts"] = topic("counts", internal=False)  # created by `admin create-topics`
    return out


def _publisher(app: faust.App, settings: Settings, bulk: Any, metrics: Metrics) -> Publisher:
    """The ``publish`` of the fetch service and the frontier agent: one producer send each."""

    async def publish(
        short: str, items: Sequence[tuple[bytes, bytes]], *, on_commit: bool = False
    ) -> None:
        """Send and wait for every ack (Faust ``send`` returns the delivery future).

        ``on_commit``: send now without waiting. Before Faust commits an offset it flushes the
        producer (``Consumer._commit_offsets``), so these are acked before the offset of the
        event that sent them is committed; one that fails for good crashes the worker, so that
        its event is replayed rather than committed without it. (Not Faust's attachments,
        ``stream_publish_on_commit``: they are only sent when the partition's offset commits,
        and a partition whose commit stalls held its statuses back; seen in the kill -9 test.)
        """
        # The producer itself, not ``Topic.send``: Faust's per-send sensors and message
        # futures cost a saturated worker CPU for nothing (docs/performance.md, "Producer
        # settings and compression").
        name = topic_name(settings, short)
        # ``on_commit`` sends rely on Faust flushing its own producer before a commit.
        producer = bulk if short in BULK_TOPICS and not on_commit else app.producer
        futures: list[Any] = [  # asyncio futures of the acks (aiokafka's)
            await producer.send(name, k, v, None, None, None) for k, v in items
        ]
        if on_commit:
            for fut in futures:
                fut.add_done_callback(delivered)
        else:
            for fut in futures:
                await fut
        metrics.messages_sent.labels(short).inc(len(items))

    def delivered(fut: Any) -> None:
        if fut.cancelled() or fut.exception() is None:
            return
        log.critical("a message of the frontier agent was not delivered: %r", fut.exception())
        app.add_future(app.crash(fut.exception()))

    return publish


def _marker(outcomes: Any) -> Callable[[int, bytes], Awaitable[None]]:
    """The fetch service's ``mark``: a value sent to one partition of ``outcomes``."""

    async def mark(partition: int, value: bytes) -> None:
        """Send ``value`` to one partition of ``outcomes`` and wait for the ack."""
        fut = await outcomes.send(key=None, value=value, partition=partition, force=True)
        await fut

    return mark


def _unsticker(
    app: faust.App, settings: Settings, agent: Sequence[FrontierAgent]
) -> Callable[[int], None]:
    """The fetch service's ``unstick``, over the frontier agent (``agent[0]``, once made)."""
    seeks: set[asyncio.Future[None]] = set()

    def unstick(partition: int) -> None:
        """Put the frontier agent's input partitions back among those the consumer fetches,
        and read each again from the first offset the agent has not applied in order.

        Faust's recovery seek (``Consumer.perform_seek``) seeks partition after partition in
        the consumer's thread, a committed-offset round trip each, and only then sets its read
        offsets: a partition's records fetched again in between, below the offset it had read
        before the seek, are dropped as read already (``Consumer.getmany``), so the agent
        never gets them and refuses every catch-up marker after them (seen after a SIGTERM
        handover: one partition's origins never dispatched again). ``seek_wait`` sets the
        read offset with the seek."""
        tps = {TP(topic_name(settings, short), partition) for short in FRONTIER_INPUTS}
        app.consumer.resume_partitions(tps)
        if not agent:
            return
        offsets = {tp: agent[0].first_unapplied(tp.topic, tp.partition) for tp in tps}
        again = {tp: offset for tp, offset in offsets.items() if offset > 0}
        if again:
            seek = asyncio.ensure_future(app.consumer.seek_wait(again))
            seeks.add(seek)
            seek.add_done_callback(partial(_sought, seeks, partition))

    return unstick


def _sought(seeks: set[asyncio.Future[None]], partition: int, seek: asyncio.Future[None]) -> None:
    seeks.discard(seek)
    if not seek.cancelled() and seek.exception() is not None:
        log.warning(  # revoked meanwhile, or the broker away: the next attempt seeks again
            "cannot seek partition %s to read it again: %r",
            partition,
            seek.exception(),
            extra={"partition": partition},
        )


def _table(app: faust.App, settings: Settings, name: str) -> Any:
    """The Faust table ``name``: raw bytes, RocksDB options and changelog durability."""
    # key_type/value_type bytes select the "raw" serializer for the table and changelog.
    return app.Table(
        name,
        key_type=bytes,
        value_type=bytes,
        partitions=settings.partitions,
        options=table_options(settings),
        extra_topic_configs=durability_configs(settings),  # the changelog's
    )


def _shared_view(settings: Settings, metrics: Metrics) -> SharedView:
    """The view of every crawl spec (``control``) and page-budget count (``budget``)."""
    return SharedView(
        aiokafka_connection(settings),
        topic_name(settings, "control"),
        topic_name(settings, "budget"),
        metrics,
        tune_consumer=fetch_in_windows,
        refresh_metadata=refresh_metadata,
    )


def _frontier_agent(
    app: faust.App,
    settings: Settings,
    store: TableStore,
    view: SharedView,
    publish: Publisher,
    fetcher: FetchService,
    metrics: Metrics,
    tables: dict[str, Any],
) -> FrontierAgent:
    """The frontier's single table writer, committing through ``DurableCommit``."""
    return FrontierAgent(
        store=store,
        view=view,
        publish=publish,
        hook=fetcher,
        metrics=metrics,
        partitions=settings.partitions,
        commit=DurableCommit(app, partial(topic_name, settings), tables, metrics),
        committed=lambda topic, partition: committed_offset(app.consumer, topic, partition),
        log_start=lambda topic, partition: log_start_offset(app.consumer, topic, partition),
    )


def _add_frontier_agent(
    app: faust.App,
    settings: Settings,
    topic: Callable[..., Any],
    frontier: FrontierAgent,
    fetcher: FetchService,
    metrics: Metrics,
) -> None:
    """The Faust agent ``frontier`` over ``frontier`` + ``outcomes`` (same key and partition
    count: co-partitioned), concurrency 1."""

    @app.agent(topic(*FRONTIER_INPUTS, internal=False), name="frontier", concurrency=1)
    async def apply_frontier(stream: Any) -> None:
        # Batches of what is buffered, acknowledged once durable (topology/worker/batching.py); an
        # event the stream skipped is never acknowledged (topology/worker/acks.py).
        inputs = {topic_name(settings, short) for short in FRONTIER_INPUTS}
        refuse_untracked_acks(app.consumer, inputs)
        seek_uncommitted_to_start(app.consumer, inputs)
        await run_batches(
            stream,
            frontier,
            metrics,
            untrack=lambda e: untrack(app.consumer, e),
            hurry=fetcher.waiting_on_apply,
        )


def _sink_consumer(
    settings: Settings, sink: Sink | None, view: SharedView, metrics: Metrics
) -> SinkConsumer | None:
    """The sink's consumer of ``pages`` + ``status``; None unless ``settings.sink_enabled``."""
    sinker = None
    if settings.sink_enabled:
        sinker = SinkConsumer(
            aiokafka_connection(settings),
            settings.max_message_bytes,
            [topic_name(settings, "pages"), topic_name(settings, "status")],
            sink_group(settings),
            _sink_opener(settings, sink),
            metrics,
            keep_body=lambda crawl_id: _stores_bodies(view, crawl_id),
            keep_versions=lambda crawl_id: _keeps_versions(view, crawl_id),
            tune_consumer=sink_fetch_in_windows,
        )
    return sinker


def _health(
    settings: Settings, metrics: Metrics, sinker: SinkConsumer | None
) -> tuple[Health, Callable[[], Awaitable[None]]]:
    """The health of Kafka (and of Cassandra with a sink), and the Kafka probe's close."""
    frontier_topic = topic_name(settings, "frontier")
    probe_kafka, close_probe = kafka_probe(aiokafka_connection(settings), frontier_topic)
    probes = {"kafka": probe_kafka}
    if sinker is not None:
        probes["cassandra"] = sink_probe(lambda: sinker.sink)
    health = Health(probes, metrics, unready_after=settings.unready_after_s)
    return health, close_probe


def _on_rebalance(
    app: faust.App,
    settings: Settings,
    fetcher: FetchService,
    rebalancing: RebalanceGate,
    metrics: Metrics,
    recovery: RecoveryClock,
    watch: RecoveryWatch,
) -> None:
    """Faust's rebalance signals, to the fetch service, rebalance gate and recovery clocks."""
    frontier_topic = topic_name(settings, "frontier")

    def owned() -> set[int]:
        return {
            tp.partition for tp in app.assignor.assigned_actives() if tp.topic == frontier_topic
        }

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def on_revoked(_app: Any, revoked: set[TP], **_: Any) -> None:
        await fetcher.revoke({tp.partition for tp in revoked if tp.topic == frontier_topic})

    @app.on_partitions_assigned.connect  # type: ignore[arg-type]
    async def on_assigned(_app: Any, assigned: set[TP], **_: Any) -> None:
        # Sent before the recovery of this generation starts: its assignment.
        rebalancing.assigned()
        metrics.rebalances.inc()
        recovery.started()
        watch.assigned()
        fetcher.assigned({tp.partition for tp in assigned if tp.topic == frontier_topic})

    @app.on_rebalance_complete.connect  # type: ignore[arg-type]
    async def on_recovered(_app: Any, **_: Any) -> None:
        # Sent by Faust once table recovery finished: the tables are complete now (or a
        # recovery of an earlier generation ended: FetchService.rebuild ignores that one).
        recovery.ended()
        fetcher.rebuild(owned())


def _add_services(
    app: faust.App,
    settings: Settings,
    *,
    budget: Any,
    health: Health,
    view: SharedView,
    bulk: Any,
    fetcher: FetchService,
    sinker: SinkConsumer | None,
    close_probe: Callable[[], Awaitable[None]],
) -> None:
    """The services that start and stop with the worker (``WorkerServices``)."""

    @app.service
    class WorkerServices(Service):
        """Starts the shared view, then the fetcher (after the first table recovery)."""

        async def on_start(self) -> None:
            await budget.maybe_declare()
            await self.add_runtime_dependency(health)
            await self.add_runtime_dependency(view)
            if settings.fetch_enabled:
                await self.add_runtime_dependency(bulk)  # children stop in reverse: after it
                await self.add_runtime_dependency(fetcher)
            if sinker is not None:
                await self.add_runtime_dependency(sinker)

        async def on_stop(self) -> None:
            await close_probe()


class RecoveryClock:
    """How long the running table recovery has taken (``streamcrawl_tables_recovery_seconds``):
    from the assignment that started it until Faust's recovery has completed."""

    def __init__(self, app: faust.App) -> None:
        self.app = app
        self.since: float | None = None

    def _completed(self) -> bool:
        return bool(self.app.tables.recovery.completed.is_set())  # type: ignore[attr-defined]

    def started(self) -> None:
        self.since = time.monotonic()

    def ended(self) -> None:
        if self._completed():
            self.since = None

    def seconds(self) -> float:
        if self.since is None or self._completed():
            return 0.0
        return time.monotonic() - self.since


def table_dir(settings: Settings) -> Path:
    """Where the worker keeps its table copies: ``state_dir``, ``state_dir/g<N>`` from
    generation 2 on. Faust names a copy by table and partition only, with the changelog offset
    it holds inside, so a copy of another generation's partition would be taken for this
    one's (a pod keeps its volume across `admin reshard`)."""
    if settings.generation == 1:
        return settings.state_dir
    return settings.state_dir / f"g{settings.generation}"


def table_options(settings: Settings) -> dict[str, int]:
    """Faust RocksDB options for one table partition, within ``settings.table_memory_mb``.

    Faust's defaults (64 MiB memtables x 3, a 2 GiB block cache, per table *and* partition)
    let a worker's RSS grow with the crawl for its first hundreds of thousands of pages: every
    frontier write stays in a memtable until it fills. Half the budget goes to two memtables,
    half to the block cache; a new dict per table, as Faust pops keys out of it.
    """
    quarter = settings.table_memory_mb * 1024 * 1024 // 4
    return {
        "write_buffer_size": quarter,
        "max_write_buffer_number": 2,
        "block_cache_size": 2 * quarter,
        "bloom_filter_size": 10,
    }


def _stores_bodies(view: SharedView, crawl_id: str) -> bool:
    """The crawl asked the sink to keep bodies (``--store-bodies``); unknown crawl: no."""
    rules = view.rules(crawl_id)
    return rules is not None and rules.policy.store_bodies


def _keeps_versions(view: SharedView, crawl_id: str) -> int:
    """The crawl's ``keep_versions`` (``seed --keep-versions``); unknown crawl: 0."""
    policy = view.policies.get(crawl_id)
    return 0 if policy is None else policy.keep_versions


def _sink_opener(settings: Settings, sink: Sink | None) -> Callable[[], Awaitable[Sink]]:
    """The sink to write to: ``sink`` (tests), else Cassandra, connected when first needed."""

    async def open_sink() -> Sink:
        if sink is not None:
            return sink
        from streamcrawl.agents.sinks.cassandra.sink import CassandraSink

        cassandra = CassandraSink(settings.cassandra_config())
        await cassandra.start()
        return cassandra

    return open_sink


def _add_pages(
    app: faust.App,
    fetcher: FetchService,
    view: SharedView,
    health: Health,
    sinker: SinkConsumer | None,
    recovery: RecoveryClock,
) -> None:
    metrics = health.metrics

    def ready() -> tuple[bool, str]:
        unready = health.unready()
        if unready is not None:
            return False, unready
        recovery = app.tables.recovery  # type: ignore[attr-defined]
        if app.rebalancing or not recovery.completed.is_set():
            return False, "table recovery in progress"
        if not fetcher.owned:
            return False, "no partitions assigned"
        if not view.ready.is_set():
            return False, "crawl specs not read yet"
        return True, "ready"

    @app.page("/healthz")
    async def healthz(self: View, request: Request) -> Response:
        stale = fetcher.loop_alive and time.time() - fetcher.loop_alive > HEALTH_STALE
        if stale:
            return self.text("dispatch loop stalled\n", status=503)
        return self.text("ok\n")

    @app.page("/readyz")
    async def readyz(self: View, request: Request) -> Response:
        ok, why = ready()
        return self.text(why + "\n", status=200 if ok else 503)

    @app.page("/metrics")
    async def metrics_page(self: View, request: Request) -> Response:
        for partition, size in fetcher.queue_sizes().items():
            metrics.queue_size.labels(str(partition)).set(size)
        metrics.ready.set(1 if ready()[0] else 0)
        metrics.partitions_assigned.set(len(fetcher.owned))
        metrics.recovery_seconds.set(recovery.seconds())
        for state, n in fetcher.scheduler.census(time.time()).items():
            metrics.origins_by_state.labels(state).set(n)
        _consumer_lag(app, metrics)
        if sinker is not None:
            sinker.update_lag()
        # As a header: aiohttp refuses a charset inside its content_type argument.
        return self.bytes(metrics.render(), headers={"Content-Type": CONTENT_TYPE})


def _consumer_lag(app: faust.App, metrics: Metrics) -> None:
    metrics.consumer_lag.clear()
    try:
        consumer = app.consumer
        for tp in consumer.assignment():
            if tp.topic.endswith("-changelog"):
                continue
            read = read_offset(consumer, tp)
            high = consumer.highwater(tp)
            if high is not None:
                lag = max(0, high - (read + 1 if read is not None else 0))
                metrics.consumer_lag.labels(tp.topic, str(tp.partition)).set(lag)
    except Exception:  # not started / rebalancing: lag is unknown, not an error
        log.debug("consumer lag unavailable", exc_info=True)
