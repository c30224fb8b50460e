"""Replication, acks, idempotence and consistency: the settings, every client built from them,
and the safety rules `admin create-topics` and `admin create-schema` apply
(``topology/admin/safety.py``, ``agents/sinks/cassandra/replication.py``). Against the real
services: tests/integration/test_replication_admin.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cassandra import ConsistencyLevel

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.sinks.cassandra import driver as cassandra_driver
from streamcrawl.agents.sinks.cassandra import sink as cassandra_sink
from streamcrawl.agents.sinks.cassandra.replication import (
    ALL_DCS,
    check_ring,
    consistency_warnings,
    replicas_needed,
    replicas_per_dc,
    replication_drift,
)
from streamcrawl.topology.admin import config as admin_config
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.admin.safety import existing_topic_warnings, topic_warnings
from streamcrawl.topology.settings import Settings, load_settings
from streamcrawl.topology.worker.app import create_app

NTS3 = "{'class': 'NetworkTopologyStrategy', 'dc1': 3}"
PRODUCTION = {
    "replication_factor": 3,
    "min_insync_replicas": 2,
    "cassandra_replication": NTS3,
}


def settings(tmp_path: Path, **fields: Any) -> Settings:
    return load_settings(state_dir=tmp_path / "state", **fields)


# --- the settings -----------------------------------------------------------------------------


def test_the_defaults_fit_one_broker_and_one_node_and_are_durable(tmp_path: Path) -> None:
    s = settings(tmp_path)
    assert (s.replication_factor, s.min_insync_replicas) == (1, 1)
    assert (s.kafka_acks, s.kafka_idempotence) == ("all", True)
    assert replicas_per_dc(s.cassandra_replication) == {ALL_DCS: 1}
    assert (s.cassandra_write_consistency, s.cassandra_read_consistency) == (
        "LOCAL_QUORUM",
        "LOCAL_QUORUM",
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"replication_factor": 2, "min_insync_replicas": 3},
            "STREAMCRAWL_MIN_INSYNC_REPLICAS (3) exceeds STREAMCRAWL_REPLICATION_FACTOR (2)",
        ),
        ({"kafka_acks": "1"}, "STREAMCRAWL_KAFKA_IDEMPOTENCE needs STREAMCRAWL_KAFKA_ACKS=all"),
        ({"kafka_acks": "0"}, "STREAMCRAWL_KAFKA_ACKS"),
        ({"cassandra_replication": "3 copies"}, "STREAMCRAWL_CASSANDRA_REPLICATION"),
        ({"cassandra_read_consistency": "ANY"}, "STREAMCRAWL_CASSANDRA_READ_CONSISTENCY"),
        ({"cassandra_write_consistency": "SERIAL"}, "STREAMCRAWL_CASSANDRA_WRITE_CONSISTENCY"),
    ],
    ids=["isr-above-rf", "idempotent-acks-1", "acks-0", "not-a-map", "read-any", "write-serial"],
)
def test_combinations_that_cannot_work_are_one_line_errors(
    tmp_path: Path, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        settings(tmp_path, **fields)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_acks_1_is_allowed_without_idempotence(tmp_path: Path) -> None:
    s = settings(tmp_path, kafka_acks="1", kafka_idempotence=False)
    assert admin_config.librdkafka_producer_config(s)["acks"] == "1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{'class': 'SimpleStrategy', 'replication_factor': 3}", {ALL_DCS: 3}),
        ("{'class': 'SimpleStrategy', 'replication_factor': '1'}", {ALL_DCS: 1}),  # as exported
        (NTS3, {"dc1": 3}),
        ("{'class': 'NetworkTopologyStrategy', 'dc1': '3', 'dc2': '2'}", {"dc1": 3, "dc2": 2}),
        ("{'class': 'org.apache.cassandra.locator.NetworkTopologyStrategy', 'a': 3}", {"a": 3}),
        ("{'class': 'NetworkTopologyStrategy', 'replication_factor': 3}", {ALL_DCS: 3}),
        ("{'class': 'NetworkTopologyStrategy', 'dc1': '3/1'}", {"dc1": 3}),  # transient
        ("{'class': 'EverywhereStrategy'}", {}),
    ],
)
def test_replicas_per_dc(text: str, expected: dict[str, int]) -> None:
    assert replicas_per_dc(text) == expected


@pytest.mark.parametrize("text", ["", "3", "{'replication_factor': 3}", "{'class': 'X', 'a': 'b'}"])
def test_replicas_per_dc_refuses_what_is_not_a_replication_map(text: str) -> None:
    with pytest.raises(ValueError):
        replicas_per_dc(text)


# --- every producer: acks all, idempotent -----------------------------------------------------


def test_the_confluent_producers_wait_for_every_replica_idempotently(tmp_path: Path) -> None:
    conf = admin_config.librdkafka_producer_config(settings(tmp_path))
    assert (conf["acks"], conf["enable.idempotence"]) == ("all", True)
    off = admin_config.librdkafka_producer_config(settings(tmp_path, kafka_idempotence=False))
    assert off["enable.idempotence"] is False


def built_producer(producer: Any) -> dict[str, Any]:
    """What the aiokafka producer that a Faust producer (``app.producer``, or the worker's
    producer for bodies) builds is set to."""

    async def settings_of() -> dict[str, Any]:
        made = producer._new_producer()
        try:
            return {
                "acks": made._sender._acks,
                "idempotent": made._txn_manager is not None,
                "batch": made._message_accumulator._batch_size,
                "batch_ttl_s": made._message_accumulator._batch_ttl,
                "connection_ms": made.client._request_timeout_ms,
                "request_ms": made._request_timeout_ms,
                "compression": made._compression_type,
                "max_request": made._max_request_size,
            }
        finally:
            await made.stop()

    return asyncio.run(settings_of())


def faust_producer(s: Settings) -> tuple[int, bool]:
    """(acks, idempotent) of the aiokafka producer Faust's producer builds for the worker."""
    made = built_producer(create_app(s).producer)
    return made["acks"], made["idempotent"]


def test_the_worker_producer_waits_for_every_replica_idempotently(tmp_path: Path) -> None:
    assert faust_producer(settings(tmp_path)) == (-1, True)
    assert faust_producer(settings(tmp_path, kafka_idempotence=False)) == (-1, False)
    assert faust_producer(settings(tmp_path, kafka_acks="1", kafka_idempotence=False)) == (
        1,
        False,
    )


def test_the_worker_producer_times_out_requests_not_batches(tmp_path: Path) -> None:
    """A request to a frozen broker gives up after PRODUCER_CONNECTION_TIMEOUT_MS, so the batch
    goes to the new leader; the batch itself keeps Faust's producer_request_timeout (20
    minutes): a batch expired in an outage would break the idempotent sequence for good."""
    from streamcrawl.topology.worker.clients import PRODUCER_CONNECTION_TIMEOUT_MS

    for idempotent in (True, False):
        app = create_app(settings(tmp_path, kafka_idempotence=idempotent))
        made = built_producer(app.producer)
        assert made["connection_ms"] == PRODUCER_CONNECTION_TIMEOUT_MS == 30_000
        assert made["batch_ttl_s"] == app.conf.producer_request_timeout == 1200.0
        assert made["request_ms"] == 1_200_000


# --- min.insync.replicas on every topic -------------------------------------------------------


def declared_budget(app: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The topic the worker's services declare at start (``budget``), recorded, not created."""
    import faust

    declared: list[Any] = []

    async def record(self: Any) -> None:
        declared.append(self)

    async def add(service: Any) -> Any:
        return service

    monkeypatch.setattr(faust.Topic, "maybe_declare", record)
    (services,) = app._extra_services

    async def start() -> None:
        service = services()
        service.add_runtime_dependency = add
        await service.on_start()

    asyncio.run(start())
    (topic,) = declared
    return topic


def test_every_topic_gets_min_insync_replicas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = settings(tmp_path, **PRODUCTION)
    configs = admin.topic_configs(s)
    assert set(configs) == set(admin.TOPICS)
    assert {c["min.insync.replicas"] for c in configs.values()} == {"2"}
    app = create_app(s)
    assert app.conf.topic_replication_factor == 3  # the topics Faust creates
    for table in admin.TABLES:  # Faust's changelogs, should a worker create one
        assert app.tables[table].changelog_topic.config["min.insync.replicas"] == "2"
    budget = declared_budget(app, monkeypatch)
    assert budget.get_topic_name() == f"{s.topic_prefix}.budget"
    assert budget.config["min.insync.replicas"] == "2"


# --- Cassandra: every statement at its level --------------------------------------------------


def prepared_levels(s: Settings) -> dict[str, Any]:
    """The consistency level of each statement the Cassandra sink prepares (None: the
    session's, the read level), and of its batches under ``"batch"``."""
    sink = cassandra_sink.CassandraSink(s.cassandra_config())
    sink._session = SimpleNamespace(prepare=lambda cql: SimpleNamespace(cql=cql))
    sink._prepared = sink._prepare()
    levels = {name: getattr(p, "consistency_level", None) for name, p in sink._prepared.items()}
    batch, _ = sink._call([])  # a batch (of no rows here)
    return levels | {"batch": batch.consistency_level}


def session_level(s: Settings, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The consistency level of the driver session's default profile (the reads')."""
    made: list[dict[str, Any]] = []

    def cluster(**kwargs: Any) -> Any:
        made.append(kwargs)
        return SimpleNamespace(connect=lambda keyspace: None)

    monkeypatch.setattr(cassandra_driver, "Cluster", cluster)
    cassandra_driver.connect(s.cassandra_config())
    (profile,) = made[0]["execution_profiles"].values()
    return profile.consistency_level


def test_writes_and_reads_run_at_their_levels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = settings(tmp_path, cassandra_write_consistency="QUORUM", cassandra_read_consistency="ONE")
    levels = prepared_levels(s)
    reads = {n for n, cql in cassandra_sink._STATEMENTS.items() if cql.startswith("SELECT")}
    assert reads and all(levels[n] is None for n in reads)
    assert {levels[n] for n in set(levels) - reads} == {ConsistencyLevel.QUORUM}
    assert session_level(s, monkeypatch) == ConsistencyLevel.ONE
    default = settings(tmp_path)
    assert set(prepared_levels(default).values()) == {None, ConsistencyLevel.LOCAL_QUORUM}
    assert session_level(default, monkeypatch) == ConsistencyLevel.LOCAL_QUORUM


# --- safety: Kafka ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rf", "isr", "acks", "brokers", "expected"),
    [
        (1, 1, "all", 1, []),  # a laptop: silent
        (3, 2, "all", 3, []),  # production
        (3, 2, "all", 5, []),
        (1, 1, "all", 3, ["is 1 on a cluster of 3 brokers"]),
        (2, 2, "all", 3, ["one broker down stops every write"]),
        (3, 3, "all", 3, ["its partitions; set it to 2"]),
        (3, 1, "all", 3, ["met by the leader alone"]),
        (2, 1, "all", 2, []),
        (3, 2, "1", 3, ["KAFKA_ACKS (kafka.acks) is 1"]),
        (1, 1, "1", 1, []),
    ],
)
def test_topic_warnings(rf: int, isr: int, acks: str, brokers: int, expected: list[str]) -> None:
    warnings = topic_warnings(rf, isr, acks, brokers)
    assert len(warnings) == len(expected)
    for line, part in zip(warnings, expected, strict=True):
        assert part in line and "\n" not in line


def test_more_replicas_than_brokers_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"is 3 but the cluster has 1 broker: .* at most 1"):
        topic_warnings(3, 2, "all", 1)


def test_existing_topics_with_other_replication() -> None:
    assert existing_topic_warnings(3, 2, {"a": 3, "b": 3}) == []
    (line,) = existing_topic_warnings(3, 2, {"a": 3, "b": 2, "c": 2})
    assert line.startswith("topic b (and 1 more) has 2 replicas, STREAMCRAWL_REPLICATION_FACTOR")
    with pytest.raises(ConfigError, match="topic b has 1 replica, fewer than"):
        existing_topic_warnings(3, 2, {"a": 3, "b": 1})


# --- safety: Cassandra ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "replicas", "needed"),
    [("ONE", 3, 1), ("LOCAL_QUORUM", 3, 2), ("QUORUM", 2, 2), ("QUORUM", 5, 3), ("ALL", 3, 3)],
)
def test_replicas_needed(level: str, replicas: int, needed: int) -> None:
    assert replicas_needed(level, replicas) == needed


SIMPLE1 = {ALL_DCS: 1}
SIMPLE3 = {ALL_DCS: 3}


@pytest.mark.parametrize(
    ("replication", "nodes", "write", "read", "expected"),
    [
        (SIMPLE1, {"datacenter1": 1}, "LOCAL_QUORUM", "LOCAL_QUORUM", []),  # a laptop
        (SIMPLE1, {"datacenter1": 1}, "ONE", "ONE", []),
        ({"dc1": 3}, {"dc1": 3}, "LOCAL_QUORUM", "LOCAL_QUORUM", []),  # production
        ({"dc1": 3, "dc2": 3}, {"dc1": 3, "dc2": 4}, "LOCAL_QUORUM", "QUORUM", []),
        (SIMPLE3, {"dc1": 5}, "QUORUM", "LOCAL_QUORUM", []),
        (SIMPLE1, {"dc1": 3}, "LOCAL_QUORUM", "LOCAL_QUORUM", ["keeps 1 replica in the cluster"]),
        ({"dc1": 3}, {"dc1": 3}, "ALL", "LOCAL_QUORUM", ["WRITE_CONSISTENCY (cassandra"]),
        ({"dc1": 3}, {"dc1": 3}, "LOCAL_QUORUM", "THREE", ["READ_CONSISTENCY (cassandra"]),
        ({"dc1": 2}, {"dc1": 3}, "LOCAL_QUORUM", "QUORUM", ["needs 2 of the 2"] * 2),
        ({"dc1": 3}, {"dc1": 3}, "ONE", "LOCAL_QUORUM", ["acknowledged by one replica"]),
        ({"dc1": 3}, {"dc1": 3}, "ANY", "ONE", ["acknowledged by one replica"]),
        (SIMPLE3, {"dc1": 2}, "LOCAL_QUORUM", "ONE", ["needs 2 of the 2 replicas the cluster"]),
    ],
)
def test_consistency_warnings(
    replication: dict[str, int],
    nodes: dict[str, int],
    write: str,
    read: str,
    expected: list[str],
) -> None:
    warnings = consistency_warnings(replication, nodes, write, read)
    assert len(warnings) == len(expected), warnings
    for line, part in zip(warnings, expected, strict=True):
        assert part in line and "\n" not in line


@pytest.mark.parametrize(
    ("replication", "nodes", "write", "match"),
    [
        (SIMPLE3, {"datacenter1": 1}, "LOCAL_QUORUM", "needs 2 replicas but the cluster has 3 "),
        (SIMPLE1, {"datacenter1": 3}, "THREE", "THREE needs 3 replicas but the cluster has 1 "),
        ({"dc1": 3}, {"datacenter1": 3}, "LOCAL_QUORUM", "names data centre dc1, which has no"),
    ],
)
def test_levels_that_can_never_be_met_are_refused(
    replication: dict[str, int], nodes: dict[str, int], write: str, match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        consistency_warnings(replication, nodes, write, "LOCAL_QUORUM")


def test_an_existing_keyspace_is_checked_as_it_is(tmp_path: Path) -> None:
    """create-schema never alters a keyspace: its own replication is what the levels meet."""
    assert replication_drift(NTS3, "{'class': 'NetworkTopologyStrategy', 'dc1': '3'}") == []
    (drift,) = replication_drift(NTS3, "{'class': 'SimpleStrategy', 'replication_factor': '1'}")
    assert "does not alter it" in drift
    warned: list[str] = []
    check = check_ring(settings(tmp_path, **PRODUCTION).cassandra_config(), warned.append)
    check({"dc1": 3}, "{'class': 'SimpleStrategy', 'replication_factor': '1'}")
    assert len(warned) == 2 and "keeps 1 replica" in warned[1]
    warned.clear()
    check({"dc1": 3}, None)  # a new keyspace: the setting's replication
    assert warned == []
