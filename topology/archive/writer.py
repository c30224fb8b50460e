"""``streamcrawl warc``: the ``captures`` topic into WARC files, offsets committed only once the
records are durable.

One loop, in its own consumer group (``topics.warc_group``; several writers share it, each with
its own files, named by host): poll a batch (``batch.take``), ``WarcFiles.write`` it, ``sync``
(fsync), and only then commit the batch's offsets, synchronously. So a crash at any point
loses nothing that was committed, and replays at most the batches written since the last
commit: their records come again with the same WARC-Record-IDs (derived from the capture:
``agents/sinks/warc``), which an index build drops (docs/warc.md, "Kafka wiring"). At start,
``recover`` closes the ``.open`` files a crash left, cut to their last complete record.

No Faust, no asyncio: a plain confluent-kafka consumer. A writer that stops (SIGTERM/SIGINT via
``stop``) finishes the batch in hand, closes its file (renamed ``.warc.gz``) and leaves the
group.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.sinks.warc.files import WarcFiles, recover
from streamcrawl.schemas.records import Capture
from streamcrawl.topology.admin import topics
from streamcrawl.topology.admin.config import librdkafka_config
from streamcrawl.topology.admin.errors import ConnectionErrors
from streamcrawl.topology.archive.batch import Batch, take
from streamcrawl.topology.settings import Settings

log = logging.getLogger(__name__)

BATCH_MESSAGES = 1000  # at most this many captures per fsync and commit
POLL_S = 1.0  # the longest a batch waits for messages; also how soon a stop is seen
# A writer killed -9 hands its partitions over after this (librdkafka's default is 45 s).
SESSION_TIMEOUT_MS = 15_000
# Commits refused because the group moved on: the batch was written, another writer gets its
# partitions and writes those captures again (same record ids: dropped by the index).
_REBALANCED = {
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.UNKNOWN_MEMBER_ID,
}


class CaptureConsumer(Protocol):
    """What the loop needs of ``confluent_kafka.Consumer``."""

    def consume(self, num_messages: int = ..., timeout: float = ...) -> list[Message]: ...

    def commit(
        self, *, offsets: list[TopicPartition], asynchronous: Literal[False]
    ) -> list[TopicPartition]: ...

    def close(self) -> None: ...


class Files(Protocol):
    """What the loop needs of ``agents.sinks.warc.files.WarcFiles``."""

    @property
    def closed(self) -> tuple[Path, ...]: ...

    def write(self, captures: Iterable[Capture]) -> int: ...

    def sync(self) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None: ...


@dataclass
class Totals:
    """What a writer did since it started."""

    captures: int = 0
    skipped: int = 0
    batches: int = 0
    commit_failures: int = 0


class ArchiveWriter:
    """The poll, write, sync, commit loop over one consumer and one set of files."""

    def __init__(self, consumer: CaptureConsumer, files: Files, batch: int = BATCH_MESSAGES):
        self.consumer = consumer
        self.files = files
        self.batch = batch
        self.totals = Totals()
        # Offsets whose records are durable but whose commit failed: retried with the next.
        self.pending: dict[tuple[str, int], int] = {}
        self.in_file = 0  # captures in the file being written

    def step(self) -> int:
        """One batch: poll, write, sync, commit. Returns the captures written (0: none came).

        Raises ``CrawlError`` on a fatal consumer error; whatever the write or the sync
        raises (a full disk) propagates before anything is committed.
        """
        batch: Batch = take(self.consumer.consume(num_messages=self.batch, timeout=POLL_S))
        for capture in batch.captures:
            self._write(capture)
        if batch.captures:
            self.files.sync()  # durable: only now may the offsets be committed
        self.totals.captures += len(batch.captures)
        self.totals.skipped += batch.skipped
        if batch.next_offsets:
            self.totals.batches += 1
            self.pending |= batch.next_offsets
            self.commit()
        return len(batch.captures)

    def _write(self, capture: Capture) -> None:
        """Write one capture; log the file it closed, if it did (``max_size`` reached)."""
        before = len(self.files.closed)
        self.files.write((capture,))
        self.in_file += 1
        if len(self.files.closed) > before:
            self._log_closed()

    def _log_closed(self) -> None:
        path = self.files.closed[-1]
        size = path.stat().st_size if path.exists() else 0
        log.info("closed %s: %d captures, %d bytes", path, self.in_file, size)
        self.in_file = 0

    def commit(self, only: set[tuple[str, int]] | None = None) -> None:
        """Commit the pending offsets (of the partitions in ``only``, when given), waiting for
        the broker. A refused commit keeps them pending and is logged, never raised: their
        captures are already in the files, and at worst they are written again after a
        restart or a rebalance."""
        keys = [k for k in self.pending if only is None or k in only]
        if not keys:
            return
        offsets = [TopicPartition(t, p, self.pending[(t, p)]) for t, p in sorted(keys)]
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            self.totals.commit_failures += 1
            err = exc.args[0] if exc.args else None
            moved = isinstance(err, KafkaError) and err.code() in _REBALANCED
            log.warning(
                "cannot commit the offsets of captures already written (%s): %s",
                "the group rebalanced" if moved else "will retry with the next batch",
                exc,
            )
            return
        for key in keys:
            del self.pending[key]

    def on_revoke(self, _consumer: object, partitions: Sequence[TopicPartition]) -> None:
        """Before partitions leave: commit what was written of them, then forget them (the
        next owner starts at the last commit either way)."""
        revoked = {(tp.topic, tp.partition) for tp in partitions}
        self.commit(revoked)
        for key in revoked & set(self.pending):
            del self.pending[key]

    def run(self, stop: threading.Event) -> Totals:
        """Batches until ``stop`` is set; then close the file (renamed ``.warc.gz``) and leave
        the group. On an exception the file is left ``.open`` (it may end mid-record after a
        failed write) for ``recover`` at the next start; its synced captures are kept."""
        try:
            with self.files:
                while not stop.is_set():
                    self.step()
                closing = self.files.closed
            if self.files.closed != closing:
                self._log_closed()
        finally:
            self.consumer.close()
        return self.totals


def consumer_config(settings: Settings, errors: ConnectionErrors) -> dict[str, Any]:
    """The writers' consumer: their own group, no auto commit, the oldest captures first."""
    return (
        librdkafka_config(settings)
        | errors.config()
        | {
            "group.id": topics.warc_group(settings),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": 3_000,
        }
    )


def open_writer(
    settings: Settings,
    out: Path,
    *,
    prefix: str,
    max_size: int,
    info: Mapping[str, str] | None = None,
) -> ArchiveWriter:
    """A writer of ``captures`` into ``out``, subscribed and ready to ``run``.

    First ``recover(out)``: the ``.open`` files a crash left are cut to their last complete
    capture and closed (each logged), Kafka or not. Then the brokers are checked: ``CrawlError``
    with one line when they are unreachable, refuse the credentials or certificate, or have no
    ``captures`` topic. ``ConfigError`` for a prefix unfit for a file name.
    """
    try:
        files = WarcFiles(out, prefix=prefix, max_size=max_size, info=info)  # no file yet
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    recover(out)
    errors = ConnectionErrors()
    consumer = Consumer(consumer_config(settings, errors))
    name = topics.topic_name(settings, "captures")
    try:
        topics.assign_all(consumer, settings, errors, name, 0)  # the check only:
        consumer.unassign()  # the group assigns the partitions
    except BaseException:
        consumer.close()
        raise
    writer = ArchiveWriter(consumer, files)
    consumer.subscribe([name], on_revoke=writer.on_revoke)
    log.info("writing %s into %s (group %s)", name, out, topics.warc_group(settings))
    return writer
