"""``admin create-topics|create-schema`` and ``pause|resume|stop`` against the real services."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.cimpl import NewTopic

from streamcrawl.agents.errors import ConfigError, CrawlError
from streamcrawl.agents.sinks.cassandra.driver import connect, create_schema
from streamcrawl.agents.sinks.cassandra.sink import TABLES
from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.admin import config as admin_config
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.settings import Settings, load_settings

STREAMCRAWL = str(Path(sys.executable).parent / "streamcrawl")
SHORT = (
    "frontier",
    "outcomes",
    "pages",
    "status",
    "control",
    "counts",
    "captures",
    "render",
    "grants",
)


def kafka_settings(bootstrap: str, prefix: str, partitions: int = 3) -> Settings:
    return load_settings(kafka_bootstrap=bootstrap, topic_prefix=prefix, partitions=partitions)


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [STREAMCRAWL, *argv], capture_output=True, text=True, timeout=120, check=False
    )


def topic_config(client: AdminClient, name: str) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    entries = client.describe_configs([resource])[resource].result()
    return {key: entry.value for key, entry in entries.items()}


@pytest.mark.kafka
@pytest.mark.integration
def test_create_topics_is_idempotent_and_applies_configs(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    settings = kafka_settings(kafka_bootstrap, topic_prefix)
    first = admin.create_topics(settings)
    changelogs = [admin.changelog_name(settings, table) for table in admin.TABLES]
    assert [line.split()[:2] for line in first] == [
        ["created", name] for name in [*changelogs, *(f"{topic_prefix}.{s}" for s in SHORT)]
    ]
    second = admin.create_topics(settings)
    assert all(line.startswith("exists ") for line in second), second

    client = AdminClient(admin_config.librdkafka_config(settings))
    partitions = admin.existing_partitions(client, settings)
    assert {partitions[f"{topic_prefix}.{short}"] for short in SHORT} == {3}
    for short in ("pages", "captures"):  # page bodies, raw payloads: as big, compressed
        configs = topic_config(client, f"{topic_prefix}.{short}")
        assert configs["compression.type"] == "zstd"
        assert configs["max.message.bytes"] == str(settings.max_message_bytes)
    assert topic_config(client, f"{topic_prefix}.control")["cleanup.policy"] == "compact"
    assert topic_config(client, f"{topic_prefix}.status")["cleanup.policy"] == "delete"
    for name in changelogs:  # Faust's table changelogs: same partitions, compacted
        assert partitions[name] == 3
        assert topic_config(client, name)["cleanup.policy"] == "compact"


@pytest.mark.kafka
@pytest.mark.integration
def test_existing_topic_gets_our_configs(kafka_bootstrap: str, topic_prefix: str) -> None:
    settings = kafka_settings(kafka_bootstrap, topic_prefix)
    client = AdminClient(admin_config.librdkafka_config(settings))
    name = f"{topic_prefix}.pages"
    client.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)])[name].result()
    admin.wait_for_topics(client, [name])
    lines = admin.create_topics(settings)
    assert lines[-1] == (
        f"updated {name}: compression.type=zstd (was producer), "
        f"max.message.bytes={settings.max_message_bytes} (was 1048588)"
    )
    deadline = time.monotonic() + 10  # the broker applies altered configs asynchronously
    while topic_config(client, name)["compression.type"] != "zstd":
        assert time.monotonic() < deadline
        time.sleep(0.1)


@pytest.mark.kafka
@pytest.mark.integration
def test_partition_mismatch_is_refused_before_any_change(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    settings = kafka_settings(kafka_bootstrap, topic_prefix, partitions=3)
    client = AdminClient(admin_config.librdkafka_config(settings))
    name = f"{topic_prefix}.frontier"
    client.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])[name].result()
    admin.wait_for_topics(client, [name])
    with pytest.raises(ConfigError) as raised:
        admin.create_topics(settings)
    message = str(raised.value)
    assert f"topic {name} has 2 partitions, settings say 3" in message
    assert "kafka-topics --alter" in message and "STREAMCRAWL_PARTITIONS=2" in message
    assert set(admin.existing_partitions(client, settings)) & {
        f"{topic_prefix}.{short}" for short in SHORT
    } == {name}  # nothing else was created

    result = run_cli(
        "admin", "create-topics", "--kafka-bootstrap", kafka_bootstrap,
        "--topic-prefix", topic_prefix, "--partitions", "3",
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "has 2 partitions" in result.stderr
    ok = run_cli(
        "admin", "create-topics", "--kafka-bootstrap", kafka_bootstrap,
        "--topic-prefix", topic_prefix, "--partitions", "2",
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    created = len(SHORT) - 1 + len(admin.TABLES)  # all but the existing frontier topic
    assert ok.stdout.count("created ") == created and f"exists {name}" in ok.stdout


def test_unreachable_kafka_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin, "CONNECT_TIMEOUT_S", 1.0)
    settings = kafka_settings("127.0.0.1:1", "unused")
    with pytest.raises(CrawlError, match=r"cannot reach Kafka at 127\.0\.0\.1:1 within 1 s"):
        admin.create_topics(settings)


@pytest.mark.cassandra
@pytest.mark.integration
def test_create_schema_twice(cassandra_hosts: str, cassandra_keyspace: str) -> None:
    settings = load_settings(cassandra_hosts=cassandra_hosts, cassandra_keyspace=cassandra_keyspace)
    first = create_schema(settings.cassandra_config())
    assert first == create_schema(settings.cassandra_config())
    assert first[0].startswith(f"CREATE KEYSPACE IF NOT EXISTS {cassandra_keyspace} ")
    assert all("IF NOT EXISTS" in statement for statement in first)
    cluster, _session = connect(settings.cassandra_config())
    try:
        assert set(TABLES) <= set(cluster.metadata.keyspaces[cassandra_keyspace].tables)
    finally:
        cluster.shutdown()
    result = run_cli(
        "admin", "create-schema", "--cassandra-hosts", cassandra_hosts,
        "--cassandra-keyspace", cassandra_keyspace,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(";\n") == len(first) and result.stderr == ""


@pytest.mark.cassandra
@pytest.mark.integration
def test_bad_replication_is_a_config_error(cassandra_hosts: str, cassandra_keyspace: str) -> None:
    settings = load_settings(
        cassandra_hosts=cassandra_hosts,
        cassandra_keyspace=cassandra_keyspace + "_new",  # the fixture's keyspace already exists
        cassandra_replication="{'class': 'NoSuchStrategy'}",
    )
    with pytest.raises(ConfigError, match="STREAMCRAWL_CASSANDRA_REPLICATION"):
        create_schema(settings.cassandra_config())


@pytest.mark.kafka
@pytest.mark.integration
def test_pause_resume_stop_republish_the_latest_spec(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    settings = kafka_settings(kafka_bootstrap, topic_prefix)
    admin.create_topics(settings)
    flags = ("--kafka-bootstrap", kafka_bootstrap, "--topic-prefix", topic_prefix)
    unknown = run_cli("pause", "--crawl-id", "nope", *flags)
    assert unknown.returncode == 1 and "unknown crawl 'nope'" in unknown.stderr

    spec = CrawlPolicy(crawl_id="c1", seeds=("https://example.org/",), max_pages=5)
    admin.publish_control(settings, msgspec.structs.replace(spec, max_pages=1))
    admin.publish_control(settings, spec)  # the latest spec is the one re-published
    admin.publish_control(settings, CrawlPolicy(crawl_id="c2"))
    for verb, state in (("pause", "paused"), ("resume", "running"), ("stop", "stopped")):
        result = run_cli(verb, "--crawl-id", "c1", *flags)
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"crawl c1: {state}\n"
        policies = admin.read_control(settings)
        assert policies["c1"] == msgspec.structs.replace(spec, state=state)
        assert policies["c2"].state == "running"
    again = run_cli("resume", "--crawl-id", "c1", *flags)
    assert again.returncode == 1 and "is stopped" in again.stderr
