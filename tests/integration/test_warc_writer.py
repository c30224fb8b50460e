"""``streamcrawl warc --out DIR`` against the real broker: captures published on ``captures``
end up in closed WARC files that ``warcio check`` accepts; SIGTERM closes the file and exits 0;
a writer killed -9 mid-stream loses nothing once restarted (``recover`` closes its ``.open``
file), and what a replay writes again carries the same WARC-Record-IDs, which the CDXJ index
keeps once (docs/warc.md, "Kafka wiring").
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from warcio.archiveiterator import ArchiveIterator

from streamcrawl.agents.sinks.warc.index import cdxj_lines
from streamcrawl.agents.sinks.warc.records import record_id
from streamcrawl.schemas.codec import encode
from streamcrawl.schemas.records import Capture
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.settings import Settings, load_settings
from tests import warc_tools
from tests.captures import capture
from tests.integration.site import STREAMCRAWL

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 3


@pytest.fixture
def settings(kafka_bootstrap: str, topic_prefix: str) -> Settings:
    settings = load_settings(
        kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix, partitions=PARTITIONS
    )
    admin.create_topics(settings)
    return settings


def captures(n: int, size: int, seed: int = 0) -> list[Capture]:
    """``n`` captures over 7 origins (all partitions), each page ``size`` random bytes (they do
    not compress: the files grow as fast as the topic)."""
    rng = random.Random(seed)
    return [
        capture(
            f"/p{i}",
            rng.randbytes(size),
            crawl_id="archive",
            origin=f"http://h{i % 7}.test",
            date=1.7e9 + i,
        )
        for i in range(n)
    ]


def publish(settings: Settings, caps: list[Capture], *extra: bytes) -> int:
    """Publish ``caps`` (and ``extra`` raw values) on ``captures``; returns the message count."""
    values = [(c.origin.encode(), encode(c)) for c in caps]
    values += [(b"http://h0.test", value) for value in extra]
    admin.publish(settings, "captures", values, "captures")
    return len(values)


class Writer:
    """``streamcrawl warc --out DIR`` as a subprocess, its log in ``DIR.log``; one a failed
    test left running is killed by ``no_writer_left``."""

    started: list[subprocess.Popen[bytes]] = []

    def __init__(self, settings: Settings, out: Path, *flags: str) -> None:
        env = {
            **os.environ,
            "STREAMCRAWL_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
            "STREAMCRAWL_TOPIC_PREFIX": settings.topic_prefix,
        }
        self.log = out.with_suffix(".log")
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [STREAMCRAWL, "warc", "--out", str(out), *flags], env=env, stderr=log
            )
        Writer.started.append(self.proc)

    def text(self) -> str:
        return self.log.read_text("utf-8", "replace")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


@pytest.fixture(autouse=True)
def no_writer_left() -> Iterator[None]:
    yield
    while Writer.started:
        proc = Writer.started.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def committed(settings: Settings) -> int:
    """Messages of ``captures`` the writers' group has committed, all partitions."""
    consumer = Consumer(
        {"bootstrap.servers": settings.kafka_bootstrap, "group.id": admin.warc_group(settings)}
    )
    try:
        name = admin.topic_name(settings, "captures")
        tps = [TopicPartition(name, p) for p in range(PARTITIONS)]
        return sum(max(tp.offset, 0) for tp in consumer.committed(tps, timeout=10))
    except KafkaException:
        # A broker started moments ago may not have its group coordinator yet (the offsets
        # topic is created on first use): nothing is known committed, ask again.
        return 0
    finally:
        consumer.close()


def wait_committed(settings: Settings, total: int, writer: Writer, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while (done := committed(settings)) < total:
        assert writer.proc.poll() is None, f"the writer exited:\n{writer.text()}"
        assert time.monotonic() < deadline, f"{done} of {total} committed:\n{writer.text()}"
        time.sleep(0.2)


def rewind(settings: Settings) -> None:
    """Commit offset 0 for the (stopped) writers' group: what a crash before every commit
    would leave, so the next writer replays the whole topic."""
    consumer = Consumer(
        {"bootstrap.servers": settings.kafka_bootstrap, "group.id": admin.warc_group(settings)}
    )
    try:
        name = admin.topic_name(settings, "captures")
        offsets = [TopicPartition(name, p, 0) for p in range(PARTITIONS)]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


def records(paths: list[Path]) -> Iterator[tuple[str, str, str, str, bytes]]:
    """(WARC-Type, WARC-Record-ID, WARC-Target-URI, WARC-Date, payload) of every record."""
    for path in paths:
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                h = record.rec_headers
                yield (
                    record.rec_type,
                    h.get_header("WARC-Record-ID"),
                    h.get_header("WARC-Target-URI") or "",
                    h.get_header("WARC-Date"),
                    record.content_stream().read(),
                )


def closed_files(out: Path) -> list[Path]:
    assert not list(out.glob("*.open")), "a file was left open"
    paths = sorted(out.glob("*.warc.gz"))
    assert paths
    for path in paths:  # our WARC 1.1 rules, warcio check, FastWARC's digests
        warc_tools.check(path)
    return paths


def check_archive(paths: list[Path], caps: list[Capture]) -> dict[str, int]:
    """Every capture's response is in ``paths`` with its payload and its derived record id;
    a record written twice has the same id both times; the index has each response once.
    Returns how often each response id was written."""
    written: dict[str, int] = defaultdict(int)
    ids_of: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    payloads = {}
    for kind, rid, uri, date, payload in records(paths):
        ids_of[(kind, uri, date)].add(rid)
        if kind == "response":
            written[rid] += 1
            payloads[rid] = payload
    assert all(len(ids) == 1 for ids in ids_of.values()), "a record came back with a new id"
    for c in caps:
        (x,) = c.exchanges
        rid = record_id(c.crawl_id, x.target_uri, x.date, "response")
        assert written[rid] >= 1, f"{c.url} is missing"
        assert payloads[rid] == x.payload
    lines = cdxj_lines(paths)
    assert len(lines) == len(caps) == len(written)
    assert {json.loads(line.split(" ", 2)[2])["url"] for line in lines} == {c.url for c in caps}
    return written


def test_captures_become_closed_warc_files_and_sigterm_exits_0(
    settings: Settings, tmp_path: Path
) -> None:
    caps = captures(60, 4_000)
    total = publish(settings, caps[:30], b"{not a capture", *[encode(c) for c in caps[30:]])
    out = tmp_path / "warc"
    writer = Writer(settings, out, "--warc-max-size", "64K")
    wait_committed(settings, total, writer)
    assert writer.stop() == 0, writer.text()
    paths = closed_files(out)
    assert len(paths) >= 3  # 240 KB of payloads, rotated at 64 KiB
    assert max(written for written in check_archive(paths, caps).values()) == 1
    log = writer.text()
    assert "skipping" in log and "captures" in log  # the bad message, logged and committed
    assert f"closed {paths[0]}" in log and "Traceback" not in log


def test_a_replay_writes_the_same_record_ids_and_the_index_keeps_each_once(
    settings: Settings, tmp_path: Path
) -> None:
    caps = captures(20, 2_000, seed=1)
    total = publish(settings, caps)
    out = tmp_path / "warc"
    first = Writer(settings, out)
    wait_committed(settings, total, first)
    assert first.stop() == 0, first.text()
    rewind(settings)  # as if the writer had crashed after its writes, before any commit
    second = Writer(settings, out)
    wait_committed(settings, total, second)
    assert second.stop() == 0, second.text()
    written = check_archive(closed_files(out), caps)
    assert set(written.values()) == {2}  # every record twice, under the same id


def test_a_writer_killed_mid_stream_loses_nothing_after_a_restart(
    settings: Settings, tmp_path: Path
) -> None:
    caps = captures(1_500, 40_000, seed=2)  # 60 MB
    total = publish(settings, caps)
    out = tmp_path / "warc"
    first = Writer(settings, out, "--warc-max-size", "8M")
    deadline = time.monotonic() + 60
    while (done := committed(settings)) == 0:
        assert first.proc.poll() is None and time.monotonic() < deadline, first.text()
        time.sleep(0.02)
    first.proc.kill()
    first.proc.wait(10)
    assert done < total, "the writer was done before it could be killed"
    assert list(out.glob("*.open")), "no file was open when the writer was killed"
    second = Writer(settings, out, "--warc-max-size", "8M")
    wait_committed(settings, total, second, timeout=180)  # its group waits out the dead member
    assert second.stop() == 0, second.text()
    assert "warc recovery" in second.text()
    written = check_archive(closed_files(out), caps)
    assert sum(written.values()) >= total  # at least once; what was replayed, twice
