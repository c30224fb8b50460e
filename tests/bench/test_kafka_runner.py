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
