"""bench/probes/broker_log.py, broker_requests.py and broker_jfr.py on hand-made inputs: a
request-log line is read back (API, connection, topics, group), each of the worker's clients
is told by what its connection asks for, requests are counted by client and API inside a time
window only, and broker threads and profile samples land in their groups."""

from __future__ import annotations

import json

from bench.probes import broker_log
from bench.probes.broker_jfr import work_of
from bench.probes.broker_requests import thread_group, threads_between

PREFIX = "bench-0123456789"


def line(t_ms: int, api: str, conn: str, request: dict, client: str = "aiokafka-0.14.0") -> str:
    body = {
        "isForwarded": False,
        "requestHeader": {"requestApiKey": 0, "clientId": client, "requestApiKeyName": api},
        "request": request,
        "response": {"errorCode": 0},
        "connection": f"127.0.0.1:9092-127.0.0.1:{conn}",
        "listener": "PLAINTEXT",
        "clientInformation": {"softwareName": "unknown"},
    }
    return f"{t_ms} Completed request:{json.dumps(body)}"


def fetch(*shorts: str) -> dict:
    return {"topics": [{"topic": f"{PREFIX}.{s}", "partitions": []} for s in shorts]}


def produce(*topics: str) -> dict:
    return {"acks": -1, "topicData": [{"name": t, "partitionData": []} for t in topics]}


def group(name: str) -> dict:
    return {"groupId": f"{PREFIX}-{name}", "memberId": "m"}


LOG = [
    line(1000, "FETCH", "1-0", fetch("frontier", "outcomes"), client="faust-0.15.3"),
    line(1000, "HEARTBEAT", "2-0", group("worker"), client="faust-0.15.3"),
    line(1000, "OFFSET_COMMIT", "2-0", group("worker"), client="faust-0.15.3"),
    line(1000, "PRODUCE", "3-0", produce(f"{PREFIX}.outcomes", f"{PREFIX}-worker-seen-changelog")),
    line(1000, "PRODUCE", "4-0", produce(f"{PREFIX}.pages")),
    line(1000, "FETCH", "5-0", fetch("pages", "status")),
    line(1000, "HEARTBEAT", "6-0", group("sink")),
    line(1000, "FETCH", "7-0", fetch("control", "budget")),
    line(1000, "METADATA", "8-0", {"topics": [{"name": f"{PREFIX}.frontier"}]}),
    line(1000, "LIST_OFFSETS", "9-0", fetch("counts"), client="rdkafka"),
    line(1000, "PRODUCE", "10-0", produce(f"{PREFIX}.frontier"), client="rdkafka"),
    "[2026-12-07 00:00:00,000] INFO something else (kafka.server)",
]


def test_a_line_is_read_back() -> None:
    r = broker_log.parse_line(LOG[2])
    assert r is not None
    assert (r.t_ms, r.api, r.client_id) == (1000, "OFFSET_COMMIT", "faust-0.15.3")
    assert r.connection == "127.0.0.1:9092-127.0.0.1:2-0"
    assert r.groups == (f"{PREFIX}-worker",)
    produced = broker_log.parse_line(LOG[3])
    assert produced is not None
    assert produced.topics == (f"{PREFIX}.outcomes", f"{PREFIX}-worker-seen-changelog")
    assert broker_log.parse_line(LOG[-1]) is None


def test_each_client_is_told_by_its_connection() -> None:
    requests = [r for ln in LOG if (r := broker_log.parse_line(ln)) is not None]
    roles = {
        conn.rsplit(":", 1)[1]: broker_log.role(c)
        for conn, c in broker_log.connections(requests, PREFIX).items()
    }
    assert roles == {
        "1-0": "Faust consumer: fetch",
        "2-0": "Faust consumer: group",
        "3-0": "Faust producer",
        "4-0": "bulk producer",
        "5-0": "sink consumer: fetch",
        "6-0": "sink consumer: group",
        "7-0": "control view consumer",
        "8-0": "health probe",
        "9-0": "bench status poller",
        "10-0": "CLI (seed, admin)",
    }
    assert set(roles.values()) <= set(broker_log.ROLES)


def test_requests_are_counted_in_their_window_only() -> None:
    early = line(500, "FETCH", "1-0", fetch("frontier"), client="faust-0.15.3")
    late = line(3000, "FETCH", "1-0", fetch("frontier"), client="faust-0.15.3")
    requests = [r for ln in [early, *LOG, late] if (r := broker_log.parse_line(ln)) is not None]
    counted = broker_log.by_role_and_api(requests, PREFIX, 0.9, 2.0)
    assert counted["Faust consumer: fetch"] == {"FETCH": 1}
    assert counted["Faust consumer: group"] == {"HEARTBEAT": 1, "OFFSET_COMMIT": 1}
    assert sum(sum(apis.values()) for apis in counted.values()) == 11


def test_broker_threads_land_in_their_groups() -> None:
    assert thread_group("data-plane-kafka-request-handler-3") == "request handlers"
    name = "data-plane-kafka-network-thread-1-PLAINTEXT-PLAINTEXT-0"  # Kafka 4.1's names
    assert thread_group(name) == "network (client listener)"
    controller = name.replace("1-PLAINTEXT", "1-CONTROLLER")
    assert thread_group(controller) == "network (controller listener)"
    assert thread_group("ExpirationReaper-1-Fetch") == "purgatory and executors"
    assert thread_group("C2 CompilerThread0") == "JIT"
    assert thread_group("GC Thread#1") == "GC"
    a = {"0x1": ("data-plane-kafka-request-handler-0", 1.0)}
    b = {"0x1": ("data-plane-kafka-request-handler-0", 1.5), "0x2": ("C1 CompilerThread0", 0.25)}
    assert threads_between(a, b) == {"request handlers": 0.5, "JIT": 0.25}


def test_a_sample_is_named_by_its_leafmost_known_frame() -> None:
    stack = [
        "com.github.luben.zstd.ZstdInputStreamNoFinalizer.readInternal",
        "org.apache.kafka.storage.internals.log.LogValidator.validateMessagesAndAssignOffsets",
        "kafka.server.ReplicaManager.appendRecordsToLeader",
        "kafka.server.KafkaApis.handleProduceRequest",
    ]
    assert work_of(stack) == "compression"
    assert work_of(stack[1:]) == "CRC and batch validation"
    assert work_of(["kafka.server.KafkaApis.handleHeartbeatRequest"]).startswith("request dispatch")
    assert work_of(["java.lang.Object.wait"]) == "other"
