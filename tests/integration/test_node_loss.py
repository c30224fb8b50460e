"""Lose a node, lose nothing: crawls on a three-node Kafka and Cassandra, one node killed.

A private cluster of three KRaft brokers and three Cassandra nodes on 127.0.0.1-3
(``scripts/services.sh start --nodes 3``), with the replicated settings of the chart's
production values: topics at replication factor 3 and ``min.insync.replicas`` 2, producers
with ``acks=all`` and idempotence, the keyspace at replication factor 3 written and read at
LOCAL_QUORUM. Mid-crawl, one node dies (``kill -9``), is paused past the session timeout
(SIGSTOP) or all brokers restart one after the other; and, beyond what these settings survive,
two brokers of three die for 20 s. Each time the crawl must finish without an operator and
keep the promises of ``tests/integration/faults.py``: every URL in exactly one
terminal state, no duplicate rows, refetches bounded by the requests in flight, per-origin gaps
at the server never under the delay.

The suite (and so CI) runs one fault, the leader of a frontier partition killed; every fault
runs with ``STREAMCRAWL_CLUSTER_TESTS=1`` (``scripts/loop_tests.py`` loops them), none with
``STREAMCRAWL_CLUSTER_TESTS=0``. The six JVMs take 3.7 GiB and 30-45 s to start.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from streamcrawl.topology.admin import config as admin_config
from tests.integration.faults import (
    check_crawl,
    crawling,
    requested,
    wait_requests,
    wait_until,
)
from tests.integration.site import ROOT, Cluster

# No kafka/cassandra markers: these tests bring their own three-node services.
pytestmark = [pytest.mark.integration, pytest.mark.slow]
ASKED = os.environ.get("STREAMCRAWL_CLUSTER_TESTS", "")
FAULTS = [
    "frontier-leader",
    "changelog-leader",
    "cassandra-node",
    "rolling-restart",
    "sigstop-broker",
    "two-brokers",
]
OUTAGE_S = 20.0  # two brokers of three down

SERVICES = str(ROOT / "scripts" / "services.sh")
ORIGINS, PAGES, DELAY = 2, 60, 0.3
REPLICATED = {
    "STREAMCRAWL_REPLICATION_FACTOR": "3",
    "STREAMCRAWL_MIN_INSYNC_REPLICAS": "2",
    "STREAMCRAWL_CASSANDRA_REPLICATION": "{'class': 'SimpleStrategy', 'replication_factor': 3}",
    "STREAMCRAWL_CASSANDRA_WRITE_CONSISTENCY": "LOCAL_QUORUM",
    "STREAMCRAWL_CASSANDRA_READ_CONSISTENCY": "LOCAL_QUORUM",
}


def services(state: Path, *args: str, timeout: float = 900) -> None:
    proc = subprocess.run(
        [SERVICES, *args],
        env={**os.environ, "STREAMCRAWL_SERVICES_DIR": str(state)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"services.sh {' '.join(args)}:\n{proc.stderr[-3000:]}"


def env_file(state: Path) -> dict[str, str]:
    env = {}
    for line in (state / "env").read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        if key.strip():
            env[key.strip()] = value.strip().strip("'\"")
    return env


@pytest.fixture(scope="module")
def three_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A three-node Kafka and Cassandra of this module's own; stopped at the end.
    ``STREAMCRAWL_CLUSTER_SERVICES_DIR`` names one already started (development reruns)."""
    given = os.environ.get("STREAMCRAWL_CLUSTER_SERVICES_DIR")
    if given:
        yield Path(given)
        return
    state = tmp_path_factory.mktemp("cluster")
    services(state, "start", "--nodes", "3")
    try:
        yield state
    finally:
        services(state, "stop")


@pytest.fixture
def replicated(three_nodes: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's environment: the three-node services and the replicated settings (read by
    ``Cluster.create`` and the workers it starts); every node up again before the test."""
    for key, value in {**env_file(three_nodes), **REPLICATED}.items():
        monkeypatch.setenv(key, value)
    # Nodes a failed test left paused or down come back.
    services(three_nodes, "unpause", "kafka", "cassandra")
    services(three_nodes, "resume")
    return three_nodes


def busiest(cluster: Cluster, topic: str) -> int:
    """The partition of ``topic`` with the most messages so far."""
    consumer = Consumer(admin_config.librdkafka_config(cluster.settings()) | {"group.id": "probe"})
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(cluster.settings().partitions)
        }
    finally:
        consumer.close()
    return max(ends, key=lambda p: ends[p])


def leader(cluster: Cluster, topic: str, partition: int) -> int:
    """The broker (node id 1-3) that leads ``topic``'s ``partition`` now."""
    client = AdminClient(admin_config.librdkafka_config(cluster.settings()))
    meta = client.list_topics(topic, timeout=10).topics[topic]
    return int(meta.partitions[partition].leader)


def replicas(cluster: Cluster, topic: str) -> int:
    client = AdminClient(admin_config.librdkafka_config(cluster.settings()))
    meta = client.list_topics(topic, timeout=10).topics[topic]
    return min(len(p.replicas) for p in meta.partitions.values())


def changelog_topic(cluster: Cluster) -> str:
    client = AdminClient(admin_config.librdkafka_config(cluster.settings()))
    prefix = cluster.env["STREAMCRAWL_TOPIC_PREFIX"]
    names = sorted(
        t
        for t in client.list_topics(timeout=10).topics
        if t.startswith(prefix) and t.endswith("-changelog") and "origins" in t
    )
    assert names, "no changelog topic of the origins table"
    return names[0]


def crawl_through(
    state: Path, tmp_path: Path, crawl_id: str, fault: str, *, in_flight: int = ORIGINS
) -> None:
    extra: dict[str, float] = {}
    with crawling(tmp_path, crawl_id, ORIGINS, PAGES, DELAY) as (cluster, servers, _workers):
        wait_requests(servers, 20)
        prefix = cluster.env["STREAMCRAWL_TOPIC_PREFIX"]
        assert replicas(cluster, f"{prefix}.frontier") == 3  # the crawl really is replicated
        assert replicas(cluster, changelog_topic(cluster)) == 3
        frontier = f"{prefix}.frontier"
        if fault == "frontier-leader":
            node = leader(cluster, frontier, busiest(cluster, frontier))
            services(state, "kill", f"kafka:{node}")
            wait_requests(servers, 60)
            services(state, "resume", f"kafka:{node}")
        elif fault == "changelog-leader":
            node = leader(cluster, changelog_topic(cluster), 0)
            services(state, "kill", f"kafka:{node}")
            wait_requests(servers, 60)
            services(state, "resume", f"kafka:{node}")
        elif fault == "cassandra-node":
            services(state, "kill", "cassandra:2")
            wait_requests(servers, 60)
            services(state, "resume", "cassandra:2")
        elif fault == "rolling-restart":
            for node in (1, 2, 3):
                services(state, "stop", f"kafka:{node}")
                services(state, "resume", f"kafka:{node}")
                time.sleep(5)  # in sync again before the next one goes
        elif fault == "sigstop-broker":
            hot = busiest(cluster, frontier)
            node = leader(cluster, frontier, hot)
            services(state, "pause", f"kafka:{node}")
            # Longer than the brokers' session timeout: the controller fences it and moves
            # its partitions' leadership to the other two.
            wait_until(
                lambda: leader(cluster, frontier, hot) != node,
                60,
                "leadership did not move off the paused broker",
                interval=1,
            )
            wait_requests(servers, 60)
            services(state, "unpause", f"kafka:{node}")
        elif fault == "two-brokers":
            # Beyond what the settings survive: one in-sync replica is left, under min ISR 2,
            # so no write is acknowledged and the crawl waits; it loses nothing, and goes on
            # by itself once a second broker is back.
            services(state, "kill", "kafka:2", "kafka:3")
            before = requested(servers)
            time.sleep(OUTAGE_S)
            extra["requests_during_outage"] = requested(servers) - before
            services(state, "resume", "kafka:2")
            wait_requests(servers, before + 20, timeout=180)
            services(state, "resume", "kafka:3")
        else:
            raise AssertionError(fault)
        check_crawl(cluster, servers, PAGES, DELAY, in_flight=in_flight, timeout=300, **extra)


@pytest.mark.parametrize("fault", FAULTS if ASKED == "1" else FAULTS[:1])
def test_a_node_lost_mid_crawl_loses_nothing(fault: str, replicated: Path, tmp_path: Path) -> None:
    crawl_through(replicated, tmp_path, f"loss-{fault}", fault)


test_a_node_lost_mid_crawl_loses_nothing.__test__ = ASKED != "0"  # type: ignore[attr-defined]
