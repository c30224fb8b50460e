"""The sink agent's body: pages and terminal URL states from Kafka into the sink, idempotently.

``SinkConsumer`` polls a batch, awaits ``write_batch`` and only then commits its offsets, so
offsets are committed only after the sink wrote the rows (no unawaited tasks; a worker stopped
mid-write leaves the batch uncommitted, and it is written again after the restart). On
``SinkBackpressure`` the same records are retried after ``retry_after`` seconds, never dropped;
a bad message is logged with its position, counted and skipped.

No Faust import: a plain aiokafka consumer; events are ``(topic, partition, offset, value)``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import CommitFailedError, ConsumerStoppedError, IllegalStateError
from mode import Service

from streamcrawl.agents.errors import SinkBackpressure
from streamcrawl.agents.sinks.contract import Sink
from streamcrawl.agents.stream.connection import KafkaConnection
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.schemas.codec import BadMessage, decode
from streamcrawl.schemas.records import Page, UrlStatus

log = logging.getLogger(__name__)

MAX_BACKOFF = 30.0  # cap on one wait after an unexpected sink error


Position = tuple[str, int, int, bytes | None]  # topic, partition, offset, value


def decode_batch(
    events: Sequence[Position], metrics: Metrics
) -> tuple[list[Page], list[UrlStatus]]:
    """Split a batch into pages and statuses; bad messages are logged, counted and dropped."""
    pages: list[Page] = []
    statuses: list[UrlStatus] = []
    for topic, partition, offset, value in events:
        short = topic.rpartition(".")[2]
        try:
            record = decode(short, value if value is not None else b"")
        except BadMessage as exc:
            metrics.bad_messages.labels(short).inc()
            log.warning(
                "skipping bad %s message at %s/%s@%s: %s",
                short,
                topic,
                partition,
                offset,
                exc,
                extra={"topic": topic, "partition": partition, "offset": offset},
            )
            continue
        if isinstance(record, Page):
            pages.append(record)
        else:
            statuses.append(record)
    return pages, statuses


async def write_batch(
    sink: Sink,
    events: Sequence[Position],
    metrics: Metrics,
    pause: Callable[[bool], None] = lambda _paused: None,
    keep_body: Callable[[str], bool] = lambda _crawl_id: True,
    keep_versions: Callable[[str], int] = lambda _crawl_id: 0,
) -> None:
    """Write one batch, retrying until it is written (backpressure: after ``retry_after``,
    other errors: exponential backoff). Returns only once the sink took every record.

    ``pause(True)`` before the first wait and ``pause(False)`` once written: the consumer stops
    fetching while the sink is slower than the crawl, so records wait in Kafka (the lag grows,
    ``streamcrawl_sink_consumer_lag``), never dropped. A page's body is written only if
    ``keep_body(crawl_id)`` (the crawl's ``store_bodies``): the stream carries it anyway. The
    sink keeps ``keep_versions(crawl_id)`` versions of a crawl's pages (``keep_versions``)."""
    pages, statuses = decode_batch(events, metrics)
    pages = [
        p if p.body is None or keep_body(p.crawl_id) else msgspec.structs.replace(p, body=None)
        for p in pages
    ]
    if not pages and not statuses:
        return
    crawls = {p.crawl_id: keep_versions(p.crawl_id) for p in pages}
    # Only crawls that keep versions are named (none: the plain two-argument write).
    versions = {crawl_id: n for crawl_id, n in crawls.items() if n > 0}
    wait, paused, n = 0.5, False, len(pages) + len(statuses)
    while True:
        started = time.monotonic()
        try:
            if versions:
                await sink.write(pages, statuses, versions)
            else:
                await sink.write(pages, statuses)
        except SinkBackpressure as exc:
            metrics.sink_backpressure.inc()
            metrics.sink_retries.labels("backpressure").inc()
            log.warning("sink backpressure: retrying %d records in %.1f s", n, exc.retry_after)
            delay = exc.retry_after
        except Exception:
            metrics.sink_retries.labels("error").inc()
            log.exception("sink write failed: retrying %d records in %.1f s", n, wait)
            delay, wait = wait, min(MAX_BACKOFF, wait * 2)
        else:
            metrics.sink_latency.observe(time.monotonic() - started)
            metrics.sink_rows.labels("page").inc(len(pages))
            metrics.sink_rows.labels("status").inc(len(statuses))
            if paused:
                pause(False)
                metrics.sink_paused.set(0)
            return
        if not paused:
            pause(True)
            metrics.sink_paused.set(1)
            paused = True
        await asyncio.sleep(delay)


def sink_lag(high_watermark: int, written: int) -> int:
    """Messages of one partition the sink has not written: its end minus the next to write."""
    return max(0, high_watermark - written)


SINK_BATCH = 500  # records per poll and sink write
# How long a poll waits for records: a record ends the wait at once (stopping too), so this
# only sets how often an idle sink wakes: rarely (docs/performance.md, "An idle worker").
SINK_POLL_MS = 5000
# After a poll that found fewer than SINK_BATCH records, how long to let more arrive before
# writing: at low rates a poll returns one or two records, and each write pays its fixed
# costs (the Cassandra calls of a status batch, the offset commit) for them alone. With 1 s a
# worker at tens of pages a second writes once a second (docs/performance.md, "Batch windows
# and the cost per second").
SINK_WINDOW = 1.0


class SinkConsumer(Service):
    """The sink as a plain consumer of ``pages`` and ``status`` in its own group.

    Not a Faust agent: Faust 0.15 stopped delivering some partitions to the sink agent after
    its group was reset to replay (seen in ``test_replaying_the_sink_topics...``), and its
    ``noack_take`` can buffer one event twice and lose another. A group of its own
    (``<prefix>-sink``) also makes a replay an ordinary operation: reset that group, nothing
    else moves. Offsets are committed only after ``write_batch`` returned; a commit refused
    after a rebalance is harmless (the new owner writes the same rows again, idempotently).
    """

    def __init__(
        self,
        connection: KafkaConnection,
        max_message_bytes: int,
        topics: Sequence[str],
        group: str,
        open_sink: Callable[[], Awaitable[Sink]],
        metrics: Metrics,
        keep_body: Callable[[str], bool] = lambda _crawl_id: True,
        tune_consumer: Callable[[AIOKafkaConsumer], None] = lambda _consumer: None,
        keep_versions: Callable[[str], int] = lambda _crawl_id: 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.keep_body = keep_body
        self.keep_versions = keep_versions  # crawl id -> its CrawlPolicy.keep_versions
        self.tune_consumer = tune_consumer  # called with the consumer once it started
        self.connection = connection
        self.max_message_bytes = max_message_bytes
        self.topics = list(topics)
        self.group = group
        self.open_sink = open_sink
        self.metrics = metrics
        self.sink: Sink | None = None  # once opened (the health probe reads through it)
        self._consumer: AIOKafkaConsumer | None = None
        self._written: dict[Any, int] = {}  # partition -> next offset to write (committed)

    async def on_start(self) -> None:
        self._consumer = AIOKafkaConsumer(
            *self.topics,
            **self.connection,
            group_id=self.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # a new group starts with the first page
            max_partition_fetch_bytes=self.max_message_bytes,
            fetch_max_bytes=max(self.max_message_bytes, 52428800),
        )
        await self._consumer.start()
        self.tune_consumer(self._consumer)
        self.add_future(self._run())

    async def on_stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()

    async def _run(self) -> None:
        try:
            await self._consume()
        except ConsumerStoppedError:
            if not self.should_stop:
                raise
            # Stopped mid-batch (``on_stop`` closed the consumer, e.g. in the window's sleep):
            # the batch's offsets stay uncommitted and it is written again after the restart.

    async def _consume(self) -> None:
        assert self._consumer is not None
        consumer = self._consumer
        sink = self.sink = await self.open_sink()
        while not self.should_stop:
            batch = await consumer.getmany(timeout_ms=SINK_POLL_MS, max_records=SINK_BATCH)
            if not batch:
                continue
            batch = await self._fill(batch)
            events = [
                (m.topic, m.partition, m.offset, m.value) for msgs in batch.values() for m in msgs
            ]
            await write_batch(
                sink, events, self.metrics, self._pause, self.keep_body, self.keep_versions
            )
            offsets = {tp: msgs[-1].offset + 1 for tp, msgs in batch.items()}
            try:
                await consumer.commit(offsets)
            except (CommitFailedError, IllegalStateError) as exc:
                log.info("sink commit refused after a rebalance (rows are written): %s", exc)
            self._written.update(offsets)
            self.update_lag()

    async def _fill(self, batch: dict[Any, list[Any]]) -> dict[Any, list[Any]]:
        """``batch`` and what arrives within ``SINK_WINDOW`` after it, until ``SINK_BATCH``
        records (each partition's records stay in offset order). A poll returns once records
        came (a few times a second with the wiring's fetch windows), so a batch that fills is
        written without waiting out the window."""
        n = sum(len(msgs) for msgs in batch.values())
        assert self._consumer is not None
        deadline = time.monotonic() + SINK_WINDOW
        while n < SINK_BATCH:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                break
            more = await self._consumer.getmany(timeout_ms=left_ms, max_records=SINK_BATCH - n)
            for tp, msgs in more.items():
                batch.setdefault(tp, []).extend(msgs)
                n += len(msgs)
        return batch

    def _pause(self, paused: bool) -> None:
        """Stop (or restart) fetching every assigned partition while the sink retries."""
        assert self._consumer is not None
        partitions = self._consumer.assignment()
        if paused:
            self._consumer.pause(*partitions)
        else:
            self._consumer.resume(*partitions)

    def update_lag(self) -> None:
        """Set ``streamcrawl_sink_consumer_lag``: per assigned partition, the messages the
        broker has (last known high watermark) that the sink has not written yet."""
        if self._consumer is None:
            return
        for tp in self._consumer.assignment():
            high = self._consumer.highwater(tp)
            written = self._written.get(tp)
            if high is not None and written is not None:
                lag = sink_lag(high, written)
                self.metrics.sink_consumer_lag.labels(tp.topic, str(tp.partition)).set(lag)
