"""The Kafka wiring's archive end to end: a worker crawls a local site for two crawls, one seeded
with ``--warc``; ``streamcrawl warc`` writes what the worker published on ``captures``. Every
page of the archived crawl is in the WARC files, the other crawl published no capture at all
(crawls that do not archive pay nothing on the broker), and the files pass ``warcio check``.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from streamcrawl.agents.sinks.warc.index import cdxj_lines
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.settings import Settings
from tests.integration.site import Cluster, page_path, serve_site
from tests.integration.test_warc_writer import (  # noqa: F401 - no_writer_left: a fixture
    Writer,
    closed_files,
    committed,
    no_writer_left,
    records,
)

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration]

ORIGINS, PAGES = 2, 15


def end_offsets(settings: Settings) -> int:
    """Messages on ``captures``, all partitions."""
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "ends"})
    try:
        name = admin.topic_name(settings, "captures")
        return sum(
            consumer.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1]
            for p in range(settings.partitions)
        )
    finally:
        consumer.close()


def wait_crawls(cluster: Cluster, expected: dict[str, int], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        rows = cluster.query("SELECT crawl_id, state FROM {ks}.url_status")
        done = collections.Counter(r.crawl_id for r in rows if r.state == "fetched")
        if all(done[c] >= n for c, n in expected.items()):
            return
        assert time.monotonic() < deadline, f"fetched so far: {dict(done)}"
        time.sleep(1.0)


@pytest.fixture
def archived(tmp_path: Path) -> Iterator[dict[str, Any]]:
    cluster = Cluster.create(tmp_path, partitions=3)
    try:
        with serve_site(ORIGINS, PAGES) as servers:
            settings = cluster.settings()
            writer = Writer(settings, tmp_path / "warc")
            worker = cluster.start_worker("w1")
            worker.wait_ready()
            roots = [s.url("/") for s in servers]
            cluster.seed(roots, "plain", "--delay", "0.02")
            cluster.seed(roots, "arch", "--delay", "0.02", "--warc")
            wait_crawls(cluster, {"plain": ORIGINS * PAGES, "arch": ORIGINS * PAGES})
            total = end_offsets(settings)
            deadline = time.monotonic() + 60
            while committed(settings) < total:
                assert time.monotonic() < deadline, writer.text()
                time.sleep(0.2)
            assert writer.stop() == 0, writer.text()
            pages = {s.url(page_path(i)) for s in servers for i in range(PAGES)}
            yield {"worker": worker, "out": tmp_path / "warc", "total": total, "pages": pages}
    finally:
        cluster.stop_all()


def test_an_archived_crawl_is_in_the_warc_files_and_the_other_publishes_nothing(
    archived: dict[str, Any],
) -> None:
    paths = closed_files(archived["out"])
    responses = [(uri, body) for kind, _, uri, _, body in records(paths) if kind == "response"]
    pages = [(uri, payload) for uri, payload in responses if not uri.endswith("/robots.txt")]
    assert {uri for uri, _ in pages} == archived["pages"]
    assert len(pages) == len(archived["pages"])  # the crawl without --warc archived nothing
    assert all(b"<title>o" in payload for _, payload in pages)
    worker = archived["worker"]
    # One capture per fetch of the archived crawl (pages, and its robots.txt when it fetched
    # one), none for the other: the topic holds exactly what the files hold.
    sent = worker.metric("streamcrawl_kafka_messages_sent_total", topic="captures")
    assert sent == archived["total"]
    assert archived["total"] == len(responses)
    assert worker.metric("streamcrawl_kafka_capture_bytes_total") > 0
    assert len(cdxj_lines(paths)) == len(responses)
