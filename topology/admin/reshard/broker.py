"""What a reshard asks of Kafka (confluent-kafka): read a partition whole, write records to
given partitions, the workers' group and its committed offsets, create, grow and delete topics.

Every call raises CrawlError with one line naming what failed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions, NewTopic

from streamcrawl.agents.errors import CrawlError
from streamcrawl.topology.admin.config import librdkafka_config, librdkafka_producer_config
from streamcrawl.topology.admin.errors import ConnectionErrors
from streamcrawl.topology.admin.topics import (
    CONNECT_TIMEOUT_S,
    connected_metadata,
    flush_or_explain,
    wait_for_topics,
)
from streamcrawl.topology.settings import Settings

HEADER = "streamcrawl-reshard-from"  # a copied event's old name, ``topic/partition@offset``
READ_TIMEOUT_S = 60.0  # a partition read that makes no progress for this long fails


@dataclass(frozen=True)
class Record:
    offset: int
    key: bytes | None
    value: bytes | None
    origin: bytes | None = None  # the HEADER of a copied event


class Broker:
    """One admin client, consumer and producer for a reshard run."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.errors = ConnectionErrors()
        base = librdkafka_config(settings) | self.errors.config()
        self.admin = AdminClient(base)
        self.consumer = Consumer(
            base
            | {
                "group.id": f"streamcrawl-reshard-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 50,  # a read ends at the partitions' ends: do not linger
            }
        )
        self.producer = Producer(librdkafka_producer_config(settings) | self.errors.config())
        self.failures: list[str] = []

    def close(self) -> None:
        self.consumer.close()

    def partitions(self) -> dict[str, int]:
        """Topic -> partition count, for every topic."""
        metadata = connected_metadata(self.admin, self.settings, self.errors)
        return {n: len(m.partitions) for n, m in metadata.topics.items() if not m.error}

    def read(self, topic: str, partition: int, start: int | None = None) -> Iterator[Record]:
        """The records of one partition from ``start`` (default: its oldest) to its end."""
        yield from self.read_all(topic, {partition: start})[partition]

    def read_all(self, topic: str, starts: dict[int, int | None]) -> dict[int, list[Record]]:
        """The records of several partitions of ``topic``, each from its start (None: its
        oldest) to its end as of the call, read with one assignment."""
        found: dict[int, list[Record]] = {p: [] for p in starts}
        ends: dict[int, int] = {}
        assign = []
        for p, start in starts.items():
            low, high = self.consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=CONNECT_TIMEOUT_S
            )
            first = low if start is None else max(low, start)
            if first < high:
                ends[p] = high
                assign.append(TopicPartition(topic, p, first))
        if not assign:
            return found
        self.consumer.assign(assign)
        last = {tp.partition: tp.offset - 1 for tp in assign}
        idle = time.monotonic()
        while any(last[p] < ends[p] - 1 for p in ends):
            batch = self.consumer.consume(1000, timeout=0.2)
            if batch:
                idle = time.monotonic()
            elif time.monotonic() - idle > READ_TIMEOUT_S:
                raise CrawlError(f"cannot read {topic}: no progress for {READ_TIMEOUT_S:.0f} s")
            for m in batch:
                p = m.partition() or 0
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        last[p] = max(last[p], (m.offset() or 0) - 1)
                        continue
                    raise CrawlError(f"cannot read {topic}/{p}: {err.str()}")
                offset = m.offset() or 0
                if offset >= ends[p]:
                    continue  # written after the call: not ours to read
                last[p] = offset
                origin = dict(m.headers() or []).get(HEADER)
                found[p].append(
                    Record(
                        offset, m.key(), m.value(), origin if isinstance(origin, bytes) else None
                    )
                )
        self.consumer.unassign()
        return found

    def state(self, topic: str, partition: int) -> dict[bytes, bytes]:
        """A compacted partition's final state: the last value per key, tombstones applied."""
        return self.states(topic, [partition])[partition]

    def states(self, topic: str, partitions: Iterable[int]) -> dict[int, dict[bytes, bytes]]:
        """``state`` of several partitions, read together."""
        result: dict[int, dict[bytes, bytes]] = {}
        for p, records in self.read_all(topic, dict.fromkeys(partitions)).items():
            found = result[p] = {}
            for r in records:
                if r.key is None:
                    continue
                if r.value is None:
                    found.pop(r.key, None)
                else:
                    found[r.key] = r.value
        return result

    def send(
        self,
        topic: str,
        partition: int,
        key: bytes,
        value: bytes | None,
        origin: bytes | None = None,
        delivered: Any = None,
    ) -> None:
        """Produce one record to ``partition``; ``flush`` waits for it (``delivered(offset)``
        is called with its offset)."""

        def report(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                self.failures.append(f"{topic}: {err.str()}")
            elif delivered is not None:
                delivered(msg.offset())

        headers: list[tuple[str, str | bytes | None]] | None = (
            [(HEADER, origin)] if origin is not None else None
        )
        while True:
            try:
                self.producer.produce(
                    topic,
                    key=key,
                    value=value,
                    partition=partition,
                    headers=headers,
                    on_delivery=report,
                )
                return
            except BufferError:  # the local queue is full: let deliveries drain it
                self.producer.poll(0.1)

    def flush(self) -> None:
        flush_or_explain(self.producer, self.settings, self.errors)
        if self.failures:
            raise CrawlError(f"cannot write {self.failures[0]}")

    def members(self, group: str) -> int:
        """Active members of consumer group ``group`` (0 when it has none or does not exist)."""
        try:
            found = self.admin.describe_consumer_groups([group])[group].result(
                timeout=CONNECT_TIMEOUT_S
            )
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                return 0
            raise CrawlError(f"cannot describe consumer group {group}: {exc}") from None
        return len(found.members)

    def committed(self, group: str, topic: str, count: int) -> dict[int, int | None]:
        """Partition -> the offset ``group`` committed on ``topic`` (None: none)."""
        conf = librdkafka_config(self.settings) | {"group.id": group, "enable.auto.commit": False}
        probe = Consumer(conf)  # never subscribes: it does not join the group
        try:
            tps = probe.committed(
                [TopicPartition(topic, p) for p in range(count)], timeout=CONNECT_TIMEOUT_S
            )
        except KafkaException as exc:
            raise CrawlError(f"cannot read the offsets of group {group}: {exc}") from None
        finally:
            probe.close()
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in tps}

    def create(self, topics: Iterable[tuple[str, int, dict[str, str]]]) -> list[str]:
        """Create the topics that do not exist yet; returns the names created."""
        existing = self.partitions()
        new = [
            NewTopic(
                name,
                num_partitions=n,
                replication_factor=self.settings.replication_factor,
                config=config,
            )
            for name, n, config in topics
            if name not in existing
        ]
        if not new:
            return []
        created = []
        for name, future in self.admin.create_topics(new, request_timeout=15).items():
            try:
                future.result()
                created.append(name)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise CrawlError(f"cannot create topic {name}: {exc.args[0].str()}") from None
        wait_for_topics(self.admin, [t.topic for t in new])
        return created

    def grow(self, names: Iterable[str], partitions: int) -> list[str]:
        """Give the topics among ``names`` that have fewer ``partitions`` partitions."""
        existing = self.partitions()
        grow = [
            NewPartitions(n, partitions) for n in names if existing.get(n, partitions) < partitions
        ]
        if not grow:
            return []
        for name, future in self.admin.create_partitions(grow, request_timeout=15).items():
            try:
                future.result()
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.INVALID_PARTITIONS:  # a rerun: done
                    raise CrawlError(f"cannot add partitions to {name}: {exc}") from None
        return [g.topic for g in grow]

    def delete(self, names: list[str], groups: list[str]) -> None:
        """Delete topics and consumer groups (missing ones are skipped)."""
        existing = self.partitions()
        names = [n for n in names if n in existing]
        for name, future in (
            self.admin.delete_topics(names, operation_timeout=30).items() if names else []
        ):
            try:
                future.result()
            except KafkaException as exc:
                raise CrawlError(f"cannot delete topic {name}: {exc}") from None
        for group in groups:
            if self.members(group):
                raise CrawlError(f"consumer group {group} has members: stop them first")
            for future in self.admin.delete_consumer_groups([group], request_timeout=15).values():
                try:
                    future.result()
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                        raise CrawlError(f"cannot delete consumer group {group}: {exc}") from None
