"""The sink agent's body: pages and terminal URL states from Kafka into the sink, idempotently.

The wiring hands over a small batch of events (``stream.noack_take``) and acknowledges them
itself after ``write_batch`` returned, so offsets are committed only after the sink wrote the
rows (no unawaited tasks; a worker stopped mid-write leaves the batch unacknowledged, and it is
written again after the restart). On ``SinkBackpressure``
the same batch is retried after ``retry_after`` seconds, never dropped; a bad message is logged
with its position, counted and skipped.

No Faust import: events are passed as ``(topic, partition, offset, value)`` tuples.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol

from agents.errors import SinkBackpressure
from agents.metrics import Metrics
from schemas.codec import BadMessage, decode
from schemas.records import Page, UrlStatus

log = logging.getLogger(__name__)

MAX_BACKOFF = 30.0  # cap on one wait after an unexpected sink error


class Sink(Protocol):
    """``agents.sink_cassandra.CassandraSink`` / ``agents.sink_memory.MemorySink``."""

    async def write(self, pages: Sequence[Page], statuses: Sequence[UrlStatus]) -> Any: ...


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


async def write_batch(sink: Sink, events: Sequence[Position], metrics: Metrics) -> None:
    """Write one batch, retrying until it is written (backpressure: after ``retry_after``,
    other errors: exponential backoff). Returns only once the sink took every record."""
    pages, statuses = decode_batch(events, metrics)
    if not pages and not statuses:
        return
    wait = 0.5
    while True:
        started = time.monotonic()
        try:
            await sink.write(pages, statuses)
        except SinkBackpressure as exc:
            metrics.sink_backpressure.inc()
            log.warning(
                "sink backpressure: retrying %d records in %.1f s",
                len(pages) + len(statuses),
                exc.retry_after,
            )
            await asyncio.sleep(exc.retry_after)
        except Exception:
            log.exception(
                "sink write failed: retrying %d records in %.1f s", len(pages) + len(statuses), wait
            )
            await asyncio.sleep(wait)
            wait = min(MAX_BACKOFF, wait * 2)
        else:
            metrics.sink_latency.observe(time.monotonic() - started)
            metrics.sink_rows.labels("page").inc(len(pages))
            metrics.sink_rows.labels("status").inc(len(statuses))
            return
