"""``status`` without scans: the last ``counts`` message of each partition, and the sink's lag.

Each frontier partition's complete terminal-state counts are the last message of the
``counts`` partition of the same number (``agents/stream/counts.py``), so a report costs one
message per partition, whatever the size of the crawl. The sink's lag is the messages of
``pages`` + ``status`` not yet committed by the ``<prefix>-sink`` group.

A reading asks the broker for every partition's offsets at once: one ``ListOffsets`` request
for the log starts and one for the ends (per leader broker), however many partitions; a
reader keeps the topics' partitions it looked up for ``PARTITIONS_TTL_S`` (each a
``Metadata`` request). A long-lived reader (``status --watch``, the bench's poller) is one
client of the broker, not one per reading (docs/performance.md, "The broker's bill").

``status --watch`` (``topology/cli/watch.py``) reads the same through one long-lived
``StatusReader``, plus each frontier partition's owner and input lags in the workers' group,
and derives the queue depths and the slowest origins from the same records.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

import msgspec
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec  # (re-exported undeclared)

from streamcrawl.agents.errors import CrawlError
from streamcrawl.agents.sinks.contract import CrawlStats
from streamcrawl.agents.stream.counts import PartitionCounts, decode_counts
from streamcrawl.topology.admin import config as admin_config
from streamcrawl.topology.admin import errors as kafka_errors
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.admin.errors import ConnectionErrors
from streamcrawl.topology.settings import Settings

READ_TIMEOUT_S = 10.0
# How long a reader trusts the partitions it looked up (a reshard makes new topics, never
# changes the count of one; a deleted topic is noticed within this).
PARTITIONS_TTL_S = 60.0

Offsets = dict[tuple[str, int], tuple[int, int]]  # (topic, partition) -> (log start, end)


@dataclass
class PartitionView:
    """One frontier partition as the workers' consumer group has it: ``owner`` the member
    assigned it (``client id@host``; None: unassigned), ``frontier_lag``/``outcomes_lag`` the
    messages of that partition of ``frontier``/``outcomes`` past the group's committed offset
    (from the log start when it committed none)."""

    partition: int
    owner: str | None
    frontier_lag: int
    outcomes_lag: int


@dataclass
class Snapshot:
    """One reading (``StatusReader.read``): ``at`` its wall-clock time; ``stats`` (crawl id ->
    its counts summed over the partitions), ``sink_lag`` (messages of ``pages`` + ``status`` the
    sink has not committed; None before its first commit), ``revisits`` (``revisits``) and
    ``errors`` (``crawl_errors``); ``records`` the last counts record of each partition;
    ``partitions`` empty unless read ``with_workers``, and then also when the workers' group
    could not be read (``workers_error`` says why: an ACL, say)."""

    at: float
    stats: dict[str, CrawlStats]
    sink_lag: int | None
    revisits: dict[str, dict[str, Any]]
    records: list[PartitionCounts]
    partitions: list[PartitionView] = field(default_factory=list)
    workers_error: str | None = None
    errors: dict[str, dict[str, int]] = field(default_factory=dict)


class StatusReader:
    """Reads ``Snapshot``s over one consumer (which never joins a group nor commits) and, for
    the partitions' owners, one admin client; ``timeout`` bounds each request. Kafka errors
    raise ``CrawlError``; the clients reconnect by themselves, so a later ``read`` may
    succeed."""

    def __init__(self, settings: Settings, *, timeout: float = READ_TIMEOUT_S) -> None:
        self.settings = settings
        self.timeout = timeout
        self.errors = ConnectionErrors()
        conf = (
            admin_config.librdkafka_config(settings)
            | self.errors.config()
            | {
                "group.id": admin.sink_group(settings),  # only to read its committed offsets:
                "enable.auto.commit": False,  # never subscribes (no join) and never commits
                "fetch.wait.max.ms": 10,  # the 12-ish messages are there: do not wait for more
            }
        )
        self.consumer = Consumer(conf)
        self._admin: AdminClient | None = None
        self._topics: dict[str, tuple[float, list[TopicPartition]]] = {}

    def __enter__(self) -> StatusReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.consumer.close()

    def connect(self) -> None:
        """Raises CrawlError at once for refused credentials or an untrusted certificate (one
        line, not a timeout of a later request), else if no broker answers."""
        admin.connected_metadata(self.consumer, self.settings, self.errors)

    def read(self, *, with_workers: bool = False) -> Snapshot:
        """The counts, the sink's lag and (``with_workers``) each partition's owner and lag.
        Raises CrawlError (one line) for any Kafka error."""
        try:
            return self._read(with_workers)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else exc
            raise CrawlError(
                f"reading the status from Kafka at {self.settings.kafka_bootstrap} failed: {error}"
            ) from None

    def _read(self, with_workers: bool) -> Snapshot:
        shorts = ["counts", "pages", "status"] + (["frontier", "outcomes"] if with_workers else [])
        parts = {short: self._partitions(short) for short in shorts}
        try:
            offsets = self._offsets([tp for tps in parts.values() for tp in tps])
        except KafkaException:
            self._topics.clear()  # a topic deleted since its lookup is named by a new one
            for short in shorts:
                self._partitions(short)
            raise
        records = self._last_records(parts["counts"], offsets)
        snapshot = summarize(records, self._sink_lag(parts, offsets), time.time())
        if with_workers:
            try:
                snapshot.partitions = self._workers(parts, offsets)
            except KafkaException as exc:  # the counts still tell most of the story
                snapshot.workers_error = str(exc.args[0] if exc.args else exc)
        return snapshot

    def _partitions(self, short: str) -> list[TopicPartition]:
        """The topic's partitions, looked up at most once per ``PARTITIONS_TTL_S``."""
        name = admin.topic_name(self.settings, short)
        cached = self._topics.get(name)
        if cached is not None and time.monotonic() - cached[0] < PARTITIONS_TTL_S:
            return cached[1]
        try:
            topic = self.consumer.list_topics(name, timeout=self.timeout).topics.get(name)
        except KafkaException as exc:
            raise kafka_errors.unreachable(self.settings, self.timeout, exc) from None
        if topic is None or topic.error is not None or not topic.partitions:
            raise CrawlError(
                f"topic {name} does not exist: run `streamcrawl admin create-topics` "
                "(and check STREAMCRAWL_TOPIC_PREFIX / --topic-prefix)"
            )
        tps = [TopicPartition(name, p) for p in sorted(topic.partitions)]
        self._topics[name] = (time.monotonic(), tps)
        return tps

    def _offsets(self, tps: list[TopicPartition]) -> Offsets:
        """Every partition's (log start, end): one request per spec and leader broker."""
        client = self._client()
        found: dict[tuple[str, int], list[int]] = {(tp.topic, tp.partition): [0, 0] for tp in tps}
        specs = (OffsetSpec.earliest(), OffsetSpec.latest())  # type: ignore[no-untyped-call]
        for i, spec in enumerate(specs):
            asked = {TopicPartition(tp.topic, tp.partition): spec for tp in tps}
            futures = client.list_offsets(asked, request_timeout=self.timeout)
            for tp, future in futures.items():
                found[(tp.topic, tp.partition)][i] = int(
                    future.result(timeout=self.timeout + 1).offset
                )
        return {key: (low, high) for key, (low, high) in found.items()}

    def _last_records(
        self, counts: list[TopicPartition], offsets: Offsets
    ) -> list[PartitionCounts]:
        """The last message of every non-empty ``counts`` partition, decoded."""
        wanted = []
        for tp in counts:
            low, high = offsets[(tp.topic, tp.partition)]
            if high > low:
                wanted.append(TopicPartition(tp.topic, tp.partition, high - 1))
        if not wanted:
            return []
        self.consumer.assign(wanted)
        found: dict[int, PartitionCounts] = {}
        deadline = time.monotonic() + self.timeout
        while len(found) < len(wanted):
            if time.monotonic() > deadline:
                raise CrawlError(
                    f"read {len(found)} of {len(wanted)} counts partitions of "
                    f"{wanted[0].topic} within {self.timeout:g} s: is the broker overloaded?"
                )
            msg = self.consumer.poll(0.1)
            if msg is None or msg.error() is not None:
                continue
            partition = msg.partition() or 0
            try:
                found[partition] = decode_counts(msg.value() or b"")
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                print(f"streamcrawl: skipping counts partition {partition}: {exc}", file=sys.stderr)
                found[partition] = PartitionCounts(partition=partition)
        self.consumer.unassign()
        return [found[p] for p in sorted(found)]

    def _sink_lag(self, parts: dict[str, list[TopicPartition]], offsets: Offsets) -> int | None:
        tps = [*parts["pages"], *parts["status"]]
        committed = self.consumer.committed(tps, timeout=self.timeout)
        if all(tp.offset < 0 for tp in committed):
            return None
        return sum(_lag(tp, offsets) for tp in committed)

    def _workers(
        self, parts: dict[str, list[TopicPartition]], offsets: Offsets
    ) -> list[PartitionView]:
        """Each frontier partition's owner in the workers' group, and its two input lags."""
        group = admin.app_id(self.settings)
        owners = self._owners(group)
        frontier, outcomes = parts["frontier"], parts["outcomes"]
        committed = self._committed(group, [*frontier, *outcomes])
        views = []
        for f, o in zip(frontier, outcomes, strict=False):
            f_at = committed.get((f.topic, f.partition), TopicPartition(f.topic, f.partition))
            o_at = committed.get((o.topic, o.partition), TopicPartition(o.topic, o.partition))
            views.append(
                PartitionView(
                    f.partition, owners.get(f.partition), _lag(f_at, offsets), _lag(o_at, offsets)
                )
            )
        return views

    def _client(self) -> AdminClient:
        if self._admin is None:
            conf = admin_config.librdkafka_config(self.settings) | self.errors.config()
            self._admin = AdminClient(conf)
        return self._admin

    def _owners(self, group: str) -> dict[int, str]:
        """Frontier partition -> ``client id@host`` of the member that has it (the member id's
        tail added where two members would read the same)."""
        future = self._client().describe_consumer_groups([group], request_timeout=self.timeout)
        try:
            description = future[group].result(timeout=self.timeout + 1)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:  # no worker started yet
                return {}
            raise
        frontier = admin.topic_name(self.settings, "frontier")
        labels = [f"{m.client_id}@{m.host.lstrip('/')}" for m in description.members]
        owners: dict[int, str] = {}
        for member, label in zip(description.members, labels, strict=True):
            if labels.count(label) > 1:
                label += "#" + member.member_id[-6:]
            for tp in member.assignment.topic_partitions:
                if tp.topic == frontier:
                    owners[tp.partition] = label
        return owners

    def _committed(
        self, group: str, tps: list[TopicPartition]
    ) -> dict[tuple[str, int], TopicPartition]:
        request = [ConsumerGroupTopicPartitions(group, tps)]
        future = self._client().list_consumer_group_offsets(request, request_timeout=self.timeout)
        result = future[group].result(timeout=self.timeout + 1)
        return {(tp.topic, tp.partition): tp for tp in result.topic_partitions or []}


def _lag(committed: TopicPartition, offsets: Offsets) -> int:
    """Messages of a partition past its committed offset (from the log start where none)."""
    low, high = offsets[(committed.topic, committed.partition)]
    return high - (committed.offset if committed.offset >= 0 else low)


def summarize(records: list[PartitionCounts], sink_lag: int | None, at: float) -> Snapshot:
    """The ``Snapshot`` of ``records`` read at ``at``: their counts summed per crawl."""
    stats: dict[str, CrawlStats] = {}
    for record in records:
        for crawl_id, counts in record.crawls.items():
            crawl = stats.setdefault(crawl_id, CrawlStats())
            for state, n in counts.states.items():
                crawl.states[state] = crawl.states.get(state, 0) + n
            crawl.widen(counts.first_fetched_at, counts.last_fetched_at)
    return Snapshot(
        at, stats, sink_lag, revisits(records, at), records, errors=crawl_errors(records)
    )


def read_status(settings: Settings) -> Snapshot:
    """One ``Snapshot`` (without the workers). Raises CrawlError if Kafka is unreachable or
    the topics are missing."""
    with StatusReader(settings) as reader:
        # Connected first: refused credentials or an untrusted certificate are one line now,
        # not a timeout of the metadata request below.
        reader.connect()
        return reader.read()


def crawl_errors(records: list[PartitionCounts]) -> dict[str, dict[str, int]]:
    """Crawl id -> its own errors (``CrawlCounts.errors``: a plugin a worker lacks) -> the
    URLs that ended ``failed`` with it, summed over the partitions, for the crawls that have
    any."""
    out: dict[str, dict[str, int]] = {}
    for record in records:
        for crawl_id, c in record.crawls.items():
            for error, n in c.errors.items():
                errors = out.setdefault(crawl_id, {})
                errors[error] = errors.get(error, 0) + n
    return out


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


def queue_depths(
    records: list[PartitionCounts], crawl_id: str | None = None
) -> tuple[dict[str, int], dict[int, int]]:
    """The URLs queued and not yet ended (``CrawlCounts.refused``): per crawl, and per
    partition (all crawls, or ``crawl_id``'s). First fetches only: a continuous crawl's
    revisits wait in lanes (``revisits``). A record written before ``refused`` existed counts
    its URLs ended at admission as queued ones ended; a partition's depth is then clamped at 0.
    """
    crawls: dict[str, int] = {}
    partitions: dict[int, int] = {}
    for record in records:
        here = 0
        for cid, c in record.crawls.items():
            if crawl_id is not None and cid != crawl_id:
                continue
            depth = max(0, (c.admitted or 0) - (sum(c.states.values()) - c.refused))
            crawls[cid] = crawls.get(cid, 0) + depth
            here += depth
        partitions[record.partition] = here
    return crawls, partitions


def slowest_origins(
    records: list[PartitionCounts], crawl_id: str | None = None, limit: int = 10
) -> list[dict[str, Any]]:
    """The ``limit`` slowest origins (``CrawlCounts.slowest``) of all crawls or ``crawl_id``,
    slowest first: ``{"origin", "crawl_id", "latency_s", "fetches", "partition"}``."""
    found = sorted(
        ((-s.latency, s.origin, cid, s.fetches, record.partition)
         for record in records
         for cid, c in record.crawls.items()
         if crawl_id is None or cid == crawl_id
         for s in c.slowest),
    )[:limit]  # fmt: skip
    return [
        {"origin": origin, "crawl_id": cid, "latency_s": -latency, "fetches": fetches,
         "partition": partition}
        for latency, origin, cid, fetches, partition in found
    ]  # fmt: skip


def report(
    stats: dict[str, CrawlStats],
    crawl_id: str | None,
    *,
    revisited: dict[str, dict[str, Any]] | None = None,
    errors: dict[str, dict[str, int]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The ``status --json`` object: ``{"crawl_id", "states", "pages_per_s", **extra}``; without
    ``crawl_id`` the sum of all crawls (``crawl_id`` null) plus ``"crawls": {id: ...}``. A
    continuous crawl also has ``"revisits"`` (``revisits``), a crawl with errors of its own
    ``"errors"`` (``crawl_errors``)."""
    crawls: dict[str, dict[str, Any]] = {
        cid: {"states": s.all_states(), "pages_per_s": s.pages_per_s()}
        for cid, s in sorted(stats.items())
    }
    for key, per_crawl in (("revisits", revisited), ("errors", errors)):
        for cid, value in (per_crawl or {}).items():
            if cid in crawls:
                crawls[cid][key] = value
    if crawl_id is not None:
        one = crawls.get(crawl_id) or {"states": CrawlStats().all_states(), "pages_per_s": None}
        return {"crawl_id": crawl_id, **one, **extra}
    totals = CrawlStats().all_states()
    for crawl in crawls.values():
        for state, n in crawl["states"].items():
            totals[state] += n
    return {"crawl_id": None, "states": totals, "pages_per_s": None, **extra, "crawls": crawls}
