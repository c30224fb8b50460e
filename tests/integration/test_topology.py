"""The Kafka wiring end to end: real Kafka + Cassandra, workers as ``streamcrawl worker``
subprocesses, local HTTP origins that log every request.

Here: one worker crawls 3 x 100 pages (exactly-once rows, one terminal state per URL, one
request per page, politeness gaps); the sink replays its topics from offset 0 (same rows); bad
messages on every input topic are skipped and counted. Crash and rebalance tests are in
``test_topology_faults.py``.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streamcrawl.topology.admin import config as admin_config
from streamcrawl.topology.admin import topics as admin
from tests.integration.site import STREAMCRAWL, Cluster, page_requests, serve_site

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration]

ORIGINS, PAGES, DELAY = 3, 100, 0.1
SINK_TABLES = ("pages", "url_status", "crawl_origins")


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One worker crawls the 3 x 100 site; yields the cluster, worker and request logs."""
    cluster = Cluster.create(tmp_path_factory.mktemp("e2e"), partitions=3)
    try:
        with serve_site(ORIGINS, PAGES) as servers:
            worker = cluster.start_worker("w1")
            worker.wait_ready()
            cluster.seed([s.url("/") for s in servers], "e2e", "--delay", str(DELAY))
            states = cluster.wait_states(ORIGINS * PAGES, timeout=120)
            logs = {s.origin: list(s.log) for s in servers}
        yield {"cluster": cluster, "worker": worker, "states": states, "logs": logs}
    finally:
        cluster.stop_all()


def test_one_worker_crawls_everything_once_and_politely(crawled: dict[str, Any]) -> None:
    cluster: Cluster = crawled["cluster"]
    assert collections.Counter(crawled["states"].values()) == {"fetched": ORIGINS * PAGES}
    assert len(cluster.rows("pages")) == ORIGINS * PAGES  # keyed by (crawl, URL): one per page
    for origin, times in fetch_starts(cluster).items():
        assert min(b - a for a, b in itertools.pairwise(times)) >= DELAY, origin
    for origin, log in crawled["logs"].items():
        paths = [r.path for r in log]
        assert paths.count("/robots.txt") == 1, origin
        requested = [p for p in paths if p != "/robots.txt"]
        assert len(requested) == PAGES and len(set(requested)) == PAGES, origin
        arrivals = sorted(log, key=lambda r: r.t)
        gaps = [(b.t - a.t, a.path, b.path) for a, b in itertools.pairwise(arrivals)]
        # kernel arrival times (tests/arrivals.py), and a start stamped after the write:
        # exact, no slack
        assert min(gaps)[0] >= DELAY, (origin, min(gaps))
    worker = crawled["worker"]
    assert worker.metric("streamcrawl_fetch_pages_total", status_class="2xx") == ORIGINS * PAGES
    assert worker.get("/healthz")[0] == 200


def test_status_reads_the_frontier_counts(crawled: dict[str, Any]) -> None:
    cluster: Cluster = crawled["cluster"]
    env = {**os.environ, **cluster.env}
    fast = subprocess.run(
        [STREAMCRAWL, "status", "--json", "--crawl-id", "e2e"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    exact = subprocess.run(
        [STREAMCRAWL, "status", "--json", "--exact", "--crawl-id", "e2e"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    counted, stored = json.loads(fast.stdout), json.loads(exact.stdout)
    assert counted["states"] == stored["states"]
    assert counted["states"]["fetched"] == ORIGINS * PAGES
    assert (counted["source"], stored["source"]) == ("counts", "cassandra")
    assert counted["sink_lag"] == 0  # wait_states waited for every row


def test_replaying_the_sink_topics_leaves_the_same_rows(crawled: dict[str, Any]) -> None:
    cluster: Cluster = crawled["cluster"]
    before = {t: cluster.rows(t) for t in SINK_TABLES}
    worker = crawled["worker"]
    worker.proc.terminate()  # SIGTERM: graceful, exit 0
    assert worker.proc.wait(60) == 0
    settings = cluster.settings()
    sink_topics = [admin.topic_name(settings, t) for t in ("pages", "status")]
    group = admin.sink_group(settings)
    client = AdminClient(admin_config.librdkafka_config(settings))
    reset = ConsumerGroupTopicPartitions(
        group, [TopicPartition(t, p, 0) for t in sink_topics for p in range(settings.partitions)]
    )
    for fut in client.alter_consumer_group_offsets([reset]).values():
        fut.result()
    messages = end_offsets(settings, sink_topics)
    again = cluster.start_worker("w1-replay")
    again.wait_ready()
    _wait_committed(client, group, messages)
    after = {t: cluster.rows(t) for t in SINK_TABLES}
    assert after == before


def test_bad_messages_are_logged_counted_and_skipped(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, partitions=3)
    try:
        with serve_site(1, 10) as servers:
            origin = servers[0].origin
            settings = cluster.settings()
            producer = Producer(admin_config.librdkafka_producer_config(settings))
            garbage = [b"not json", b'{"v": 99}', b"{}"]
            for short in ("frontier", "outcomes", "pages", "status"):
                for value in garbage:
                    producer.produce(
                        admin.topic_name(settings, short), key=origin.encode(), value=value
                    )
            producer.produce(admin.topic_name(settings, "control"), key=b"junk", value=b"[1,2")
            assert producer.flush(10) == 0
            worker = cluster.start_worker("w1")
            worker.wait_ready()
            cluster.seed([servers[0].url("/")], "bad", "--delay", "0")
            states = cluster.wait_states(10, timeout=60)
            assert collections.Counter(states.values()) == {"fetched": 10}
            assert len(page_requests(servers[0])) == 10
            for short in ("frontier", "outcomes", "pages", "status"):
                bad = worker.metric("streamcrawl_kafka_bad_messages_total", topic=short)
                assert bad == 3, short
            assert worker.metric("streamcrawl_kafka_bad_messages_total", topic="control") == 1
            assert worker.proc.poll() is None  # no crash loop
            assert "skipping bad frontier message at" in worker.log.read_text()
    finally:
        cluster.stop_all()


def fetch_starts(cluster: Cluster) -> dict[str, list[float]]:
    """origin -> the start times of its fetched pages (``Page.fetched_at``), sorted."""
    starts: dict[str, list[float]] = collections.defaultdict(list)
    for row in cluster.query("SELECT origin, fetched_at FROM {ks}.pages"):
        starts[row.origin].append(row.fetched_at)
    return {origin: sorted(times) for origin, times in starts.items()}


def end_offsets(settings: Any, topics: list[str]) -> dict[tuple[str, int], int]:
    """High watermark of every partition of ``topics`` (no compaction: = message count)."""
    consumer = Consumer(admin_config.librdkafka_config(settings) | {"group.id": "offsets-probe"})
    try:
        return {
            (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1]
            for t in topics
            for p in range(settings.partitions)
        }
    finally:
        consumer.close()


def _wait_committed(
    client: AdminClient, group: str, ends: dict[tuple[str, int], int], timeout: float = 60.0
) -> None:
    """Wait until ``group`` committed the end offset of every partition in ``ends``."""
    import time

    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in ends])
    deadline = time.monotonic() + timeout
    committed: dict[tuple[str, int], int] = {}
    while time.monotonic() < deadline:
        result = client.list_consumer_group_offsets([request])[group].result()
        committed = {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}
        if all(committed.get(k, -1) >= v for k, v in ends.items()):
            return
        time.sleep(0.5)
    raise AssertionError(f"sink did not catch up: committed {committed}, end {ends}")
