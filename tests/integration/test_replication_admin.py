"""`admin create-topics` and `admin create-schema` against the single-node services: the
replication settings reach every topic, and what cannot work on one broker or one node is
refused in one line before anything is created (the rules: tests/unit/
test_replication_settings.py)."""

from __future__ import annotations

import os
import subprocess
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigSource
from confluent_kafka.admin._config import ConfigResource

from streamcrawl.agents.sinks.cassandra.driver import connect
from streamcrawl.topology.admin import config as admin_config
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.settings import load_settings
from tests.integration.test_admin import SHORT, STREAMCRAWL


def run_cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [STREAMCRAWL, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=os.environ | (env or {}),
    )


def min_insync(client: AdminClient, name: str) -> tuple[str, bool]:
    """The topic's min.insync.replicas, and whether the topic itself sets it."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    entry = client.describe_configs([resource])[resource].result()["min.insync.replicas"]
    return entry.value, entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


@pytest.mark.kafka
@pytest.mark.integration
def test_every_created_topic_sets_min_insync_replicas(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    settings = load_settings(kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix)
    warnings: list[str] = []
    lines = admin.create_topics(settings, warn=warnings.append)
    assert warnings == []  # one broker, replication 1: nothing to say
    client = AdminClient(admin_config.librdkafka_config(settings))
    names = [admin.changelog_name(settings, t) for t in admin.TABLES]
    names += [admin.topic_name(settings, s) for s in SHORT]
    assert [line.split()[1] for line in lines] == names
    assert {min_insync(client, name) for name in names} == {("1", True)}
    assert all("replication 1" in line for line in lines)


@pytest.mark.kafka
@pytest.mark.integration
def test_more_replicas_than_brokers_is_one_line_and_creates_nothing(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    flags = ("--kafka-bootstrap", kafka_bootstrap, "--topic-prefix", topic_prefix)
    result = run_cli("admin", "create-topics", *flags, "--replication-factor", "3")
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert "STREAMCRAWL_REPLICATION_FACTOR (kafka.replicationFactor) is 3" in line
    assert "the cluster has 1 broker" in line and result.stdout == ""
    settings = load_settings(kafka_bootstrap=kafka_bootstrap)
    client = AdminClient(admin_config.librdkafka_config(settings))
    assert not [t for t in client.list_topics(timeout=10).topics if t.startswith(topic_prefix)]

    ok = run_cli("admin", "create-topics", *flags)  # the default, 1: silent
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr


@pytest.mark.kafka
@pytest.mark.integration
def test_min_insync_above_replication_is_one_line(kafka_bootstrap: str, topic_prefix: str) -> None:
    flags = ("--kafka-bootstrap", kafka_bootstrap, "--topic-prefix", topic_prefix)
    env = {"STREAMCRAWL_MIN_INSYNC_REPLICAS": "2"}
    result = run_cli("admin", "create-topics", *flags, env=env)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert "STREAMCRAWL_MIN_INSYNC_REPLICAS (2) exceeds" in line


def schema_cli(hosts: str, keyspace: str, **env: str) -> Any:
    flags = ("--cassandra-hosts", hosts, "--cassandra-keyspace", keyspace)
    return run_cli("admin", "create-schema", *flags, env=env)


@pytest.mark.cassandra
@pytest.mark.integration
def test_create_schema_refuses_levels_one_node_cannot_meet(cassandra_hosts: str) -> None:
    keyspace = f"ks_{uuid.uuid4().hex[:10]}"
    three = "{'class': 'SimpleStrategy', 'replication_factor': 3}"
    result = schema_cli(cassandra_hosts, keyspace, STREAMCRAWL_CASSANDRA_REPLICATION=three)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert "LOCAL_QUORUM needs 2 replicas but the cluster has 3 replicas on 1 node" in line
    cluster, _session = connect(load_settings(cassandra_hosts=cassandra_hosts).cassandra_config())
    try:
        assert keyspace not in cluster.metadata.keyspaces  # refused before creating
    finally:
        cluster.shutdown()

    two = schema_cli(cassandra_hosts, keyspace, STREAMCRAWL_CASSANDRA_WRITE_CONSISTENCY="TWO")
    assert two.returncode == 2 and "TWO needs 2 replicas" in two.stderr


@pytest.mark.cassandra
@pytest.mark.integration
def test_create_schema_checks_the_existing_keyspace(
    cassandra_hosts: str, cassandra_keyspace: str
) -> None:
    """The fixture's keyspace has 1 replica: the setting's 3 are not what the levels meet."""
    nts = "{'class': 'NetworkTopologyStrategy', 'datacenter1': 3}"
    result = schema_cli(cassandra_hosts, cassandra_keyspace, STREAMCRAWL_CASSANDRA_REPLICATION=nts)
    assert result.returncode == 0, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("streamcrawl: warning: the keyspace exists with replication")
