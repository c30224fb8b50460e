"""The Kafka runner's pieces that need no broker: partitions, endpoints, the RSS/CPU meter."""

from __future__ import annotations

import os
import time

import pytest

from bench import kafka_topology, runners
from bench.measure import ServiceMeter


@pytest.mark.parametrize(("origins", "partitions"), [(1, 2), (8, 8), (63, 12), (256, 12)])
def test_partitions_follow_origins(origins: int, partitions: int) -> None:
    class Spec:
        pass

    spec = Spec()
    spec.origins = origins  # type: ignore[attr-defined]
    assert kafka_topology.kafka_partitions(spec) == partitions  # type: ignore[arg-type]


def test_service_env_without_services_is_not_run(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("STREAMCRAWL_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.delenv("STREAMCRAWL_CASSANDRA_HOSTS", raising=False)
    monkeypatch.setattr(kafka_topology, "REPO", tmp_path)
    with pytest.raises(runners.NotRun):
        kafka_topology._service_env()


def test_service_env_reads_services_file(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("STREAMCRAWL_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.delenv("STREAMCRAWL_CASSANDRA_HOSTS", raising=False)
    (tmp_path / ".services").mkdir()
    (tmp_path / ".services" / "env").write_text(
        "export STREAMCRAWL_KAFKA_BOOTSTRAP=127.0.0.1:1\nexport STREAMCRAWL_CASSANDRA_HOSTS='h:2'\n"
    )
    monkeypatch.setattr(kafka_topology, "REPO", tmp_path)
    assert kafka_topology._service_env() == {
        "STREAMCRAWL_KAFKA_BOOTSTRAP": "127.0.0.1:1",
        "STREAMCRAWL_CASSANDRA_HOSTS": "h:2",
    }


def test_service_meter_samples_rss_and_cpu_so_far() -> None:
    m = ServiceMeter([os.getpid()], interval=0.02).start()
    t = time.process_time()
    while time.process_time() - t < 0.1:
        pass
    assert m.cpu_now() > 0.05
    time.sleep(0.1)
    assert m.stop() > 0.05
    assert m.rss_samples and m.rss_samples[0][1] > 1


# Lines of a worker's /metrics, as prometheus-client renders them (a run's metrics-w1.txt).
METRICS = """\
# HELP streamcrawl_fetch_pages_total Pages fetched, by HTTP status class.
# TYPE streamcrawl_fetch_pages_total counter
streamcrawl_fetch_pages_total{status_class="2xx"} 790.0
streamcrawl_fetch_pages_total{status_class="4xx"} 10.0
streamcrawl_fetch_pages_created{status_class="2xx"} 1.7650e+09
streamcrawl_frontier_batch_events_count 282.0
streamcrawl_frontier_batch_events_sum 14335.0
streamcrawl_frontier_batch_events_bucket{le="1.0"} 3.0
streamcrawl_sink_write_latency_seconds_count 56.0
streamcrawl_kafka_messages_sent_total{topic="outcomes"} 1200.0
streamcrawl_kafka_messages_sent_total{topic="frontier"} 323.0
streamcrawl_kafka_messages_sent_created{topic="frontier"} 1.7650e+09
"""


def test_metric_sum_adds_every_labelled_sample_of_one_name_only() -> None:
    assert kafka_topology.metric_sum(METRICS, "streamcrawl_fetch_pages_total") == 800.0
    assert kafka_topology.metric_sum(METRICS, "streamcrawl_frontier_batch_events_count") == 282
    assert kafka_topology.metric_sum(METRICS, "streamcrawl_fetch_pages") == 0.0  # a prefix


def test_worker_counts_sum_over_workers_by_topic() -> None:
    other = METRICS.replace('topic="frontier"} 323.0', 'topic="frontier"} 77.0')
    counts = kafka_topology.worker_counts([METRICS, other])
    assert counts == {
        "frontier_batches": 564.0,
        "frontier_events": 28670.0,
        "sink_writes": 112.0,
        "sent.outcomes": 2400.0,
        "sent.frontier": 400.0,
    }
    assert kafka_topology.worker_counts([]) == {
        "frontier_batches": 0.0,
        "frontier_events": 0.0,
        "sink_writes": 0.0,
    }
