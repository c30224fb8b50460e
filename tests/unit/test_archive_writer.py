"""The WARC writer's loop (topology/archive): offsets are committed only after the captures they
cover are written and synced; a bad message is skipped, never stops it; a refused commit is
retried, never raised. Against the real broker and files: tests/integration/test_warc_writer.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from streamcrawl.agents.errors import CrawlError
from streamcrawl.agents.sinks.warc.files import WarcFiles
from streamcrawl.schemas.codec import encode
from streamcrawl.schemas.records import Capture
from streamcrawl.topology.archive.batch import take
from streamcrawl.topology.archive.writer import ArchiveWriter
from streamcrawl.topology.cli.main import main
from tests.captures import capture

TOPIC = "t.captures"


def message(offset: int, value: bytes | None, partition: int = 0) -> Message:
    return Message(topic=TOPIC, partition=partition, offset=offset, key=b"k", value=value)


def failed(code: int, *, fatal: bool = False, retriable: bool = False) -> Message:
    return Message(
        topic=TOPIC, partition=0, error=KafkaError(code, fatal=fatal, retriable=retriable)
    )


class Consumer:
    """Hands out the polls it was given, then nothing; records every call in ``log``."""

    def __init__(self, log: list[Any], *polls: list[Message]) -> None:
        self.log = log
        self.polls = list(polls)
        self.refuse: list[KafkaException] = []

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        return self.polls.pop(0) if self.polls else []

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> None:
        assert asynchronous is False
        if self.refuse:
            raise self.refuse.pop(0)
        self.log.append(("commit", [(tp.partition, tp.offset) for tp in offsets]))

    def close(self) -> None:
        self.log.append(("consumer closed",))


class Files:
    def __init__(self, log: list[Any], fail_sync: bool = False) -> None:
        self.log = log
        self.fail_sync = fail_sync
        self.closed: tuple[Path, ...] = ()

    def __enter__(self) -> Files:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is None:
            self.close()
        else:
            self.log.append(("left open",))

    def write(self, captures: Iterable[Capture]) -> int:
        urls = [c.url for c in captures]
        if self.log and self.log[-1][0] == "write":  # one capture at a time: one entry
            self.log[-1][1].extend(urls)
        else:
            self.log.append(("write", urls))
        return len(urls)

    def sync(self) -> None:
        if self.fail_sync:
            raise OSError(28, "No space left on device")
        self.log.append(("sync",))

    def close(self) -> None:
        self.log.append(("files closed",))
        self.closed = (*self.closed, Path("/nonexistent/x.warc.gz"))


def test_offsets_are_committed_after_the_captures_are_written_and_synced() -> None:
    log: list[Any] = []
    poll = [message(7, encode(capture("/a"))), message(3, encode(capture("/b")), partition=1)]
    writer = ArchiveWriter(Consumer(log, poll), Files(log))
    assert writer.step() == 2
    assert log == [
        ("write", ["http://a.test/a", "http://a.test/b"]),
        ("sync",),
        ("commit", [(0, 8), (1, 4)]),  # the next offset to read, per partition
    ]


def test_nothing_is_committed_when_the_sync_fails() -> None:
    log: list[Any] = []
    writer = ArchiveWriter(Consumer(log, [message(0, encode(capture()))]), Files(log, True))
    with pytest.raises(OSError, match="No space left"):
        writer.step()
    assert [entry[0] for entry in log] == ["write"]  # no commit: the batch is polled again


def test_a_bad_message_is_skipped_and_committed_with_the_batch() -> None:
    log: list[Any] = []
    poll = [message(0, b"{not json"), message(1, None), message(2, encode(capture("/c")))]
    writer = ArchiveWriter(Consumer(log, poll), Files(log))
    assert writer.step() == 1
    assert log == [("write", ["http://a.test/c"]), ("sync",), ("commit", [(0, 3)])]
    assert writer.totals.skipped == 2


def test_a_batch_of_bad_messages_only_is_committed_without_a_write() -> None:
    log: list[Any] = []
    writer = ArchiveWriter(Consumer(log, [message(4, b"[]")]), Files(log))
    assert writer.step() == 0
    assert log == [("commit", [(0, 5)])]


def test_a_refused_commit_is_retried_with_the_next_batch() -> None:
    log: list[Any] = []
    consumer = Consumer(
        log, [message(0, encode(capture("/a")))], [message(0, encode(capture("/b")), 1)]
    )
    consumer.refuse.append(KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT)))
    writer = ArchiveWriter(consumer, Files(log))
    writer.step()
    assert writer.pending == {(TOPIC, 0): 1} and writer.totals.commit_failures == 1
    writer.step()
    assert log[-1] == ("commit", [(0, 1), (1, 1)]) and writer.pending == {}


def test_a_revoked_partition_is_committed_then_forgotten() -> None:
    log: list[Any] = []
    consumer = Consumer(log)
    writer = ArchiveWriter(consumer, Files(log))
    writer.pending = {(TOPIC, 0): 5, (TOPIC, 1): 9}
    consumer.refuse.append(KafkaException(KafkaError(KafkaError.REBALANCE_IN_PROGRESS)))
    writer.on_revoke(consumer, [TopicPartition(TOPIC, 1)])
    assert writer.pending == {(TOPIC, 0): 5}  # the next owner starts at the last commit
    writer.on_revoke(consumer, [TopicPartition(TOPIC, 0)])
    assert log == [("commit", [(0, 5)])] and writer.pending == {}


def test_run_closes_the_files_then_leaves_the_group_when_stopped() -> None:
    log: list[Any] = []
    stop = threading.Event()

    class Stopping(Files):
        def sync(self) -> None:
            super().sync()
            stop.set()  # SIGTERM while the first batch is written: it is still committed

    writer = ArchiveWriter(Consumer(log, [message(0, encode(capture()))]), Stopping(log))
    totals = writer.run(stop)
    assert [entry[0] for entry in log] == [
        "write",
        "sync",
        "commit",
        "files closed",
        "consumer closed",
    ]
    assert totals.captures == 1


def test_a_fatal_consumer_error_stops_the_writer_in_one_line() -> None:
    with pytest.raises(CrawlError, match=r"Kafka consumer error on t\.captures"):
        take([failed(KafkaError._FATAL, fatal=True)])
    assert take([failed(KafkaError._PARTITION_EOF)]).next_offsets == {}
    assert take([failed(KafkaError._TRANSPORT, retriable=True)]).captures == []


def test_a_failed_write_leaves_the_file_open_for_recovery() -> None:
    """A file that may end mid-record is never renamed complete: ``recover`` cuts it."""
    log: list[Any] = []
    writer = ArchiveWriter(Consumer(log, [message(0, encode(capture()))]), Files(log, True))
    with pytest.raises(OSError):
        writer.run(threading.Event())
    assert [entry[0] for entry in log] == ["write", "left open", "consumer closed"]


# --- the command ---------------------------------------------------------------------------------


def test_warc_without_out_or_with_a_bad_prefix_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["warc"]) == 2
    assert main(["warc", "--out", str(tmp_path), "--prefix", "a b"]) == 2
    assert main(["warc", "index", str(tmp_path / "none")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "streamcrawl: error: warc needs --out DIR to write (or `streamcrawl warc index DIR`)",
        "streamcrawl: error: WARC file prefix 'a b': use letters, digits and -_.",
        f"streamcrawl: error: {tmp_path / 'none'}: not a directory",
    ]


def test_index_reads_the_closed_files_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with WarcFiles(tmp_path, hostname="h") as files:
        files.write([capture("/a"), capture("/b")])
    with WarcFiles(tmp_path, hostname="h") as files:
        files.write([capture("/a")])  # a replay: the same record ids
        files.sync()
        assert len(list(tmp_path.glob("*.open"))) == 1  # being written: not indexed
        assert main(["warc", "index", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" ")[0] for line in lines] == ["test,a)/a", "test,a)/b"]
    assert main(["warc", "index", str(tmp_path), "-o", str(tmp_path / "all.cdxj")]) == 0
    assert len((tmp_path / "all.cdxj").read_text().splitlines()) == 2  # each record once
