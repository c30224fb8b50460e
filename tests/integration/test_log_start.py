"""A crawl whose partitions' logs no longer start at 0 and whose group has no committed offset
(its offsets expired while the topics kept their retention): the worker's consumer resets to
the log start, and the frontier agent takes that as the floor of its offset order
(``agents.stream.order.OffsetOrder``), so its catch-up markers count and the crawl completes.
Before, every event from the log start on read as out of order: nothing acknowledged, no partition
ever dispatched, the crawl stalled for good."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streamcrawl.topology.admin import config as admin_config
from tests.integration.faults import check_crawl
from tests.integration.site import Cluster, serve_site

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration]

DELETED = 5  # records per partition that retention "deleted"


def start_logs_past_zero(cluster: Cluster, partitions: int) -> None:
    """Each partition of ``frontier`` and ``outcomes`` holds ``DELETED`` records, then has
    them deleted (as retention would): its log starts at ``DELETED``, nothing committed."""
    settings = cluster.settings()
    conf = admin_config.librdkafka_config(settings)
    topics = [f"{settings.topic_prefix}.{short}" for short in ("frontier", "outcomes")]
    producer = Producer(conf)
    for topic in topics:
        for p in range(partitions):
            for _ in range(DELETED):
                producer.produce(topic, b"expired", key=b"expired", partition=p)
    assert producer.flush(30) == 0
    admin = AdminClient(conf)
    upto = [TopicPartition(t, p, DELETED) for t in topics for p in range(partitions)]
    for tp, future in admin.delete_records(upto, operation_timeout=30).items():
        assert future.result(timeout=30).low_watermark == DELETED, tp


def test_a_crawl_on_logs_that_start_past_zero_with_no_committed_offset_completes(
    tmp_path: Path,
) -> None:
    origins, pages, delay = 2, 20, 0.05
    cluster = Cluster.create(tmp_path, partitions=origins)
    try:
        start_logs_past_zero(cluster, origins)
        with serve_site(origins, pages, spread=origins) as servers:
            worker = cluster.start_worker("w1")
            worker.wait_ready()
            cluster.seed([s.url("/") for s in servers], "logstart", "--delay", str(delay))
            check_crawl(cluster, servers, pages, delay, in_flight=0, timeout=90)
            log = worker.log.read_text()
            assert log.count("ignored: an earlier offset was not applied here") == 0
            assert f"log start of {cluster.settings().topic_prefix}.outcomes/" in log
    finally:
        cluster.stop_all()
