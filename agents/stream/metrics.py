"""Prometheus metrics of one worker, in a registry of its own (several apps per test process).

Names are ``streamcrawl_<component>_<metric>``, the same words the logs use. No Faust import:
the Kafka wiring renders ``Metrics.render()`` at ``GET /metrics``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, get_args

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from streamcrawl.agents.frontier.scheduler import DispatchKind
from streamcrawl.agents.robots.rules import ROBOTS_BLOCKED
from streamcrawl.schemas.records import Outcome, Page

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Label values known in advance, exported at 0 from the start: a series that appears only with
# its first error makes ``rate()`` miss that error and leaves a dashboard panel empty.
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx")
ORIGIN_STATES = ("ready", "waiting", "fetching")
SINK_KINDS = ("page", "status")
RETRY_REASONS = ("backpressure", "error")
PUBLISH_WHAT = ("report", "outcome")
STAGE_KINDS = get_args(DispatchKind)
CONSUMED_TOPICS = ("frontier", "outcomes", "pages", "status", "control", "budget")
_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_WAIT = (0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300)
_TURNAROUND = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5)
_EVENT = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5)


class BadMessages(Protocol):
    """What a consumer counts the undecodable messages it skips in (``Metrics``, and a render
    worker's ``RenderMetrics``)."""

    @property
    def bad_messages(self) -> Counter: ...


class Metrics:
    """Every metric of a worker. One instance per app; never the global default registry.

    The metrics are attributes, made by one method per component (``_fetch_metrics``...)."""

    def __init__(
        self, registry: CollectorRegistry | None = None, *, state_dir: Path | None = None
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        # process_cpu_seconds_total, process_resident_memory_bytes, ...: the CPU-bound side of
        # the dashboard's politeness-bound vs CPU-bound panel.
        ProcessCollector(registry=r)
        if state_dir is not None:
            r.register(StateVolume(state_dir))
        self._fetch_metrics(r)
        self._scheduler_metrics(r)
        self._frontier_metrics(r)
        self._sink_metrics(r)
        self._kafka_metrics(r)
        self._worker_metrics(r)
        self._initialize()

    def _fetch_metrics(self, r: CollectorRegistry) -> None:
        """Fetches: pages, bytes, latency, outcomes; what robots.txt or the SSRF guard refused."""
        self.pages = Counter(
            "streamcrawl_fetch_pages",
            "Pages fetched, by HTTP status class.",
            ["status_class"],
            registry=r,
        )
        self.bytes = Counter("streamcrawl_fetch_bytes", "Body bytes of fetched pages.", registry=r)
        self.fetch_latency = Histogram(
            "streamcrawl_fetch_latency_seconds",
            "Fetch duration (request start to outcome).",
            buckets=_LATENCY,
            registry=r,
        )
        self.outcomes = Counter(
            "streamcrawl_fetch_outcomes",
            "Fetch outcomes by kind and state.",
            ["kind", "state"],
            registry=r,
        )
        self.robots_denied = Counter(
            "streamcrawl_robots_denials", "URLs denied by robots.txt.", registry=r
        )
        self.blocked = Counter(
            "streamcrawl_fetch_blocked",
            "Fetches the SSRF guard refused (the host's addresses are not public or allowed).",
            registry=r,
        )

    def _scheduler_metrics(self, r: CollectorRegistry) -> None:
        """The scheduler: politeness waits, turnaround, origins and dispatches in flight."""
        self.politeness_wait = Histogram(
            "streamcrawl_scheduler_politeness_wait_seconds",
            "Seconds between two consecutive request starts (robots.txt or page) on one "
            "origin in this worker; politeness keeps it at or above the origin's delay.",
            buckets=_WAIT,
            registry=r,
        )
        self.turnaround = Histogram(
            "streamcrawl_scheduler_turnaround_seconds",
            "Seconds from the end of a request to the start of its origin's next one in this "
            "worker (the first after it); without a delay, all of it is the wiring's latency: "
            "publishing the report, and applying it when the next URL depends on it.",
            buckets=_TURNAROUND,
            registry=r,
        )
        self.unapplied = Gauge(
            "streamcrawl_scheduler_unapplied",
            "Fetched URLs whose outcome the frontier has not applied yet (fetching pauses at "
            "the cap).",
            registry=r,
        )
        self.origins_tracked = Gauge(
            "streamcrawl_scheduler_origins",
            "Origins with work in the scheduler's memory (at most max_origins_in_memory).",
            registry=r,
        )
        self.in_flight = Gauge(
            "streamcrawl_scheduler_in_flight", "Dispatches in flight.", registry=r
        )
        self.origins_by_state = Gauge(
            "streamcrawl_scheduler_origins_by_state",
            "Origins with work in the scheduler: ready (may start a request now, waiting for "
            "capacity), waiting (politeness delay, backoff, paused or not due) and fetching "
            "(a request in flight or its outcome not applied yet).",
            ["state"],
            registry=r,
        )

    def _frontier_metrics(self, r: CollectorRegistry) -> None:
        """The frontier agent: batches applied, URLs admitted, deduplicated, ended, queued."""
        self.frontier_batch = Histogram(
            "streamcrawl_frontier_batch_seconds",
            "Time the frontier agent spent applying one batch of events and making it durable.",
            buckets=_EVENT,
            registry=r,
        )
        self.frontier_batch_events = Histogram(
            "streamcrawl_frontier_batch_events",
            "Events per batch the frontier agent applied.",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
            registry=r,
        )
        self.duplicates = Counter(
            "streamcrawl_frontier_duplicates",
            "Discovered URLs already seen (filtered).",
            registry=r,
        )
        self.admitted = Counter(
            "streamcrawl_frontier_admitted", "URLs queued by the frontier.", registry=r
        )
        self.terminal = Counter(
            "streamcrawl_frontier_terminal",
            "Terminal URL states published.",
            ["state"],
            registry=r,
        )
        self.retries = Counter(
            "streamcrawl_frontier_retries", "Fetch retries scheduled.", registry=r
        )
        self.unknown_crawl = Counter(
            "streamcrawl_frontier_unknown_crawl",
            "Messages skipped because their crawl spec never arrived.",
            registry=r,
        )
        self.queue_size = Gauge(
            "streamcrawl_frontier_queue_size",
            "Queued URLs per assigned partition.",
            ["partition"],
            registry=r,
        )

    def _sink_metrics(self, r: CollectorRegistry) -> None:
        """The sink: writes, records, lag, pauses and retries."""
        self.sink_latency = Histogram(
            "streamcrawl_sink_write_latency_seconds",
            "Duration of one sink batch write.",
            buckets=_LATENCY,
            registry=r,
        )
        self.sink_rows = Counter(
            "streamcrawl_sink_records",
            "Records written by the sink, by kind.",
            ["kind"],
            registry=r,
        )
        self.sink_consumer_lag = Gauge(
            "streamcrawl_sink_consumer_lag",
            "Messages of pages/status the sink has not written yet, by topic and partition.",
            ["topic", "partition"],
            registry=r,
        )
        self.sink_paused = Gauge(
            "streamcrawl_sink_paused",
            "1 while the sink has stopped fetching to retry a write (Cassandra slower than the "
            "crawl), else 0.",
            registry=r,
        )
        self.sink_backpressure = Counter(
            "streamcrawl_sink_backpressure",
            "Sink writes retried after backpressure.",
            registry=r,
        )
        self.sink_retries = Counter(
            "streamcrawl_sink_retries",
            "Sink batch writes retried, by reason (backpressure, error).",
            ["reason"],
            registry=r,
        )

    def _kafka_metrics(self, r: CollectorRegistry) -> None:
        """Kafka: messages consumed, produced and refused, lag, rebalances and partitions."""
        self.bad_messages = Counter(
            "streamcrawl_kafka_bad_messages",
            "Undecodable messages skipped, by topic.",
            ["topic"],
            registry=r,
        )
        self.consumer_lag = Gauge(
            "streamcrawl_kafka_consumer_lag",
            "Messages not yet consumed, by topic and partition.",
            ["topic", "partition"],
            registry=r,
        )
        self.messages_sent = Counter(
            "streamcrawl_kafka_messages_sent",
            "Messages produced, by topic.",
            ["topic"],
            registry=r,
        )
        self.publish_failures = Counter(
            "streamcrawl_kafka_publish_failures",
            "Reports that could not be published (report), and bare failure outcomes that "
            "could not be published either (outcome).",
            ["what"],
            registry=r,
        )
        self.capture_bytes = Counter(
            "streamcrawl_kafka_capture_bytes",
            "Bytes of the capture values published on captures (crawls that archive WARC), "
            "before the producer's compression.",
            registry=r,
        )
        self.messages_split = Counter(
            "streamcrawl_kafka_reports_split",
            "Reports split or cut to fit the topics' message size.",
            registry=r,
        )
        self.rebalances = Counter(
            "streamcrawl_kafka_rebalances",
            "Partition assignments this worker received from its consumer group.",
            registry=r,
        )
        self.partitions_assigned = Gauge(
            "streamcrawl_kafka_partitions_assigned",
            "Frontier partitions this worker owns.",
            registry=r,
        )

    def _worker_metrics(self, r: CollectorRegistry) -> None:
        """The worker: stage failures, dependency health, readiness, table recovery."""
        self.stage_failures = Counter(
            "streamcrawl_pipeline_stage_failures",
            "Dispatches whose stage raised (retried as an internal error), by kind.",
            ["kind"],
            registry=r,
        )
        self.health_up = Gauge(
            "streamcrawl_health_up",
            "1 while the dependency (kafka, cassandra) answers the worker's probe, else 0.",
            # Not `service`: the Prometheus Operator's scrape sets that target label itself.
            ["dependency"],
            registry=r,
        )
        self.health_reconnects = Counter(
            "streamcrawl_health_reconnects",
            "Times a dependency (kafka, cassandra) answered again after its probe had failed.",
            ["dependency"],
            registry=r,
        )
        self.ready = Gauge(
            "streamcrawl_worker_ready",
            "1 while the worker is ready (what /readyz answers), else 0.",
            registry=r,
        )
        self.recovery_seconds = Gauge(
            "streamcrawl_tables_recovery_seconds",
            "Seconds the running table recovery has taken so far (after an assignment, the "
            "worker replays its partitions' changelogs before it serves them); 0 when none runs.",
            registry=r,
        )
        self.recovery_reseeks = Counter(
            "streamcrawl_tables_recovery_reseeks",
            "Changelog partitions a table recovery had stopped reading (no record for 20 s "
            "with records left) and sought again.",
            registry=r,
        )

    def _initialize(self) -> None:
        """Export every known label value at 0 (see ``STATUS_CLASSES``)."""
        for status_class in STATUS_CLASSES:
            self.pages.labels(status_class)
        for state in ORIGIN_STATES:
            self.origins_by_state.labels(state)
        for kind in SINK_KINDS:
            self.sink_rows.labels(kind)
        for reason in RETRY_REASONS:
            self.sink_retries.labels(reason)
        for what in PUBLISH_WHAT:
            self.publish_failures.labels(what)
        for stage in STAGE_KINDS:
            self.stage_failures.labels(stage)
        for topic in CONSUMED_TOPICS:
            self.bad_messages.labels(topic)

    def fetched(self, outcome: Outcome, page: Page | None) -> None:
        """Count one dispatch result (any kind)."""
        self.outcomes.labels(outcome.kind, outcome.state).inc()
        if outcome.state == "robots_denied":
            self.robots_denied.inc()
        elif outcome.state == "blocked" or outcome.robots_status == ROBOTS_BLOCKED:
            self.blocked.inc()
        if outcome.started_at > 0 and outcome.finished_at >= outcome.started_at:
            self.fetch_latency.observe(outcome.finished_at - outcome.started_at)
        if page is not None:
            self.pages.labels(f"{page.status // 100}xx").inc()
            self.bytes.inc(page.body_bytes)

    def render(self) -> bytes:
        """The text exposition format of every metric."""
        return generate_latest(self.registry)


class StateVolume(Collector):
    """Free and total bytes of the filesystem that holds the worker's RocksDB state, read at
    each scrape (``streamcrawl_state_volume_{free,size}_bytes``); nothing while the directory
    does not exist yet."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            usage = shutil.disk_usage(self.path)
        except OSError:
            return
        yield GaugeMetricFamily(
            "streamcrawl_state_volume_free_bytes",
            "Bytes free to the worker on the filesystem of its state directory.",
            value=usage.free,
        )
        yield GaugeMetricFamily(
            "streamcrawl_state_volume_size_bytes",
            "Size in bytes of the filesystem of the worker's state directory.",
            value=usage.total,
        )
