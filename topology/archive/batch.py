"""One poll of the ``captures`` topic, as the WARC writer takes it: the captures to write, and
the offsets to commit once they are durable.

Pure (no client, no files): ``take`` reads confluent-kafka ``Message`` objects and decides,
for each, to write it, skip it (undecodable, a tombstone) or stop on it (a fatal consumer
error). A skipped message is committed with the others: it would be as bad on a replay.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Message, TopicPartition

from streamcrawl.agents.errors import CrawlError
from streamcrawl.schemas.codec import BadMessage, decode
from streamcrawl.schemas.records import Capture

log = logging.getLogger(__name__)


@dataclass
class Batch:
    """Captures in the order they came, and per partition the offset after the last message
    taken (written or skipped): what to commit once the captures are durable."""

    captures: list[Capture] = field(default_factory=list)
    next_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    skipped: int = 0

    def offsets(self) -> list[TopicPartition]:
        """``next_offsets`` as the ``TopicPartition`` list ``Consumer.commit`` takes."""
        return [TopicPartition(t, p, o) for (t, p), o in sorted(self.next_offsets.items())]


def take(messages: Iterable[Message]) -> Batch:
    """The batch of ``messages`` (one ``Consumer.consume`` result).

    An undecodable value (``BadMessage``) or a tombstone is logged and skipped, never stops the
    writer. Raises ``CrawlError`` on a fatal or non-retriable consumer error; a retriable one
    is logged.
    """
    batch = Batch()
    for msg in messages:
        err = msg.error()
        if err is not None:
            _consumer_error(msg, err)
            continue
        topic, partition, offset = msg.topic() or "", msg.partition() or 0, msg.offset() or 0
        batch.next_offsets[(topic, partition)] = offset + 1
        where = {"partition": partition, "offset": offset}
        value = msg.value()
        if value is None:
            log.warning("skipping a tombstone on %s at offset %d", topic, offset, extra=where)
            batch.skipped += 1
            continue
        try:
            batch.captures.append(decode("captures", value))
        except BadMessage as exc:
            log.warning("skipping %s message %d:%d: %s", topic, partition, offset, exc, extra=where)
            batch.skipped += 1
    return batch


def _consumer_error(msg: Message, err: KafkaError) -> None:
    if err.code() == KafkaError._PARTITION_EOF:
        return
    if err.fatal() or not err.retriable():
        raise CrawlError(f"Kafka consumer error on {msg.topic()}: {err.str()}")
    log.warning("Kafka consumer: %s", err.str())
