"""``status`` without scans: the last ``counts`` message of each partition, and the sink's lag.

Each frontier partition's complete terminal-state counts are the last message of the
``counts`` partition of the same number (``agents/stream/counts.py``), so a report costs one
message and two watermark requests per partition, whatever the size of the crawl. The sink's
lag is the messages of ``pages`` + ``status`` not yet committed by the ``<prefix>-sink`` group.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import msgspec
from confluent_kafka import Consumer, KafkaException, TopicPartition

from streamcrawl.agents.errors import CrawlError
from streamcrawl.agents.sinks.contract import CrawlStats
from streamcrawl.agents.stream.counts import PartitionCounts, decode_counts
from streamcrawl.topology.admin import config as admin_config
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.admin.errors import ConnectionErrors
from streamcrawl.topology.settings import Settings

READ_TIMEOUT_S = 10.0


def read_status(
    settings: Settings,
) -> tuple[dict[str, CrawlStats], int | None, dict[str, dict[str, Any]]]:
    """(crawl id -> CrawlStats summed over the partitions, the sink's lag in messages, crawl id
    -> its revisits (``revisits``) for the continuous crawls).

    The lag is None when the sink group has committed nothing yet. Raises CrawlError if Kafka
    is unreachable or the topics are missing.
    """
    errors = ConnectionErrors()
    conf = (
        admin_config.librdkafka_config(settings)
        | errors.config()
        | {
            "group.id": admin.sink_group(settings),  # only to read its committed offsets: never
            "enable.auto.commit": False,  # subscribes (no join) and never commits
            "fetch.wait.max.ms": 10,  # the 12-ish messages are there: do not wait for more
        }
    )
    consumer = Consumer(conf)
    try:
        # Connected first: refused credentials or an untrusted certificate are one line now,
        # not a timeout of the metadata request below.
        admin.connected_metadata(consumer, settings, errors)
        stats: dict[str, CrawlStats] = {}
        records = _last_records(consumer, settings)
        for record in records:
            for crawl_id, counts in record.crawls.items():
                crawl = stats.setdefault(crawl_id, CrawlStats())
                for state, n in counts.states.items():
                    crawl.states[state] = crawl.states.get(state, 0) + n
                crawl.widen(counts.first_fetched_at, counts.last_fetched_at)
        return stats, _sink_lag(consumer, settings), revisits(records, time.time())
    finally:
        consumer.close()


def _partitions(consumer: Consumer, settings: Settings, short: str) -> list[TopicPartition]:
    name = admin.topic_name(settings, short)
    try:
        topic = consumer.list_topics(name, timeout=admin.CONNECT_TIMEOUT_S).topics.get(name)
    except KafkaException as exc:
        raise admin.unreachable(settings, exc) from None
    if topic is None or topic.error is not None or not topic.partitions:
        raise CrawlError(
            f"topic {name} does not exist: run `streamcrawl admin create-topics` "
            "(and check STREAMCRAWL_TOPIC_PREFIX / --topic-prefix)"
        )
    return [TopicPartition(name, p) for p in sorted(topic.partitions)]


def _watermarks(consumer: Consumer, tp: TopicPartition) -> tuple[int, int]:
    low, high = consumer.get_watermark_offsets(tp, timeout=admin.CONNECT_TIMEOUT_S)
    return int(low), int(high)


def _last_records(consumer: Consumer, settings: Settings) -> list[PartitionCounts]:
    """The last message of every non-empty ``counts`` partition, decoded."""
    wanted = []
    for tp in _partitions(consumer, settings, "counts"):
        low, high = _watermarks(consumer, tp)
        if high > low:
            wanted.append(TopicPartition(tp.topic, tp.partition, high - 1))
    if not wanted:
        return []
    consumer.assign(wanted)
    found: dict[int, PartitionCounts] = {}
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(found) < len(wanted):
        if time.monotonic() > deadline:
            raise CrawlError(
                f"read {len(found)} of {len(wanted)} counts partitions of "
                f"{wanted[0].topic} within {READ_TIMEOUT_S:g} s: is the broker overloaded?"
            )
        msg = consumer.poll(0.1)
        if msg is None or msg.error() is not None:
            continue
        partition = msg.partition() or 0
        try:
            found[partition] = decode_counts(msg.value() or b"")
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            print(f"streamcrawl: skipping counts partition {partition}: {exc}", file=sys.stderr)
            found[partition] = PartitionCounts(partition=partition)
    return list(found.values())


def _sink_lag(consumer: Consumer, settings: Settings) -> int | None:
    tps = [*_partitions(consumer, settings, "pages"), *_partitions(consumer, settings, "status")]
    committed = consumer.committed(tps, timeout=admin.CONNECT_TIMEOUT_S)
    if all(tp.offset < 0 for tp in committed):
        return None
    lag = 0
    for tp in committed:
        low, high = _watermarks(consumer, tp)
        lag += high - (tp.offset if tp.offset >= 0 else low)
    return lag


def revisits(records: list[PartitionCounts], now: float) -> dict[str, dict[str, Any]]:
    """Crawl id -> what its revisits do, summed over the partitions, for the crawls that have
    any: ``waiting`` (in lanes), ``due_now`` and ``due_next_hour`` (from the due buckets: to
    within a bucket, a quarter of the crawl's shortest interval at most), ``oldest_due_at``
    (when the longest-waiting due revisit fell due, to within a bucket; null: none overdue),
    ``fetched`` (revisits done), ``per_s`` (their rate) and ``changed_share`` (of those, the
    share that found a change or the page gone)."""
    out: dict[str, dict[str, Any]] = {}
    for record in records:
        for crawl_id, c in record.crawls.items():
            if not (c.revisits or c.due):
                continue
            r = out.setdefault(
                crawl_id,
                {"waiting": 0, "due_now": 0, "due_next_hour": 0, "oldest_due_at": None,
                 "fetched": 0, "changed": 0, "first": None, "last": None},
            )  # fmt: skip
            width = c.due_width or 3600.0
            for bucket, n in c.due.items():
                start = int(bucket) * width
                r["waiting"] += n
                if start <= now:
                    r["due_now"] += n
                    oldest = r["oldest_due_at"]
                    r["oldest_due_at"] = start if oldest is None else min(oldest, start)
                elif start <= now + 3600:
                    r["due_next_hour"] += n
            r["fetched"] += c.revisits
            r["changed"] += c.changed
            for key, at, pick in (
                ("first", c.first_revisit_at, min),
                ("last", c.last_revisit_at, max),
            ):
                if at is not None:
                    r[key] = at if r[key] is None else pick(r[key], at)
    for r in out.values():
        first, last = r.pop("first"), r.pop("last")
        span = (last - first) if first is not None and last is not None else 0.0
        r["per_s"] = round(r["fetched"] / span, 3) if span > 0 else None
        changed = r.pop("changed")
        r["changed_share"] = round(changed / r["fetched"], 3) if r["fetched"] else None
    return out


def report(
    stats: dict[str, CrawlStats],
    crawl_id: str | None,
    *,
    revisited: dict[str, dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The ``status --json`` object: ``{"crawl_id", "states", "pages_per_s", **extra}``; without
    ``crawl_id`` the sum of all crawls (``crawl_id`` null) plus ``"crawls": {id: ...}``. A
    continuous crawl also has ``"revisits"`` (``revisits``)."""
    crawls: dict[str, dict[str, Any]] = {
        cid: {"states": s.all_states(), "pages_per_s": s.pages_per_s()}
        for cid, s in sorted(stats.items())
    }
    for cid, r in (revisited or {}).items():
        if cid in crawls:
            crawls[cid]["revisits"] = r
    if crawl_id is not None:
        one = crawls.get(crawl_id) or {"states": CrawlStats().all_states(), "pages_per_s": None}
        return {"crawl_id": crawl_id, **one, **extra}
    totals = CrawlStats().all_states()
    for crawl in crawls.values():
        for state, n in crawl["states"].items():
            totals[state] += n
    return {"crawl_id": None, "states": totals, "pages_per_s": None, **extra, "crawls": crawls}
