"""Secrets never leak: processes run with a canary password (Kafka SASL and Cassandra) and
everything they wrote is searched for it: logs (at DEBUG), crash tracebacks, validation errors,
``/metrics`` and the other web pages, ``status`` and ``pages`` output, and every message on the
crawl's topics (control included).

Against the shared PLAINTEXT services: a worker that carries the Cassandra password (the server
asks for none) crawls a site end to end; a worker and every CLI command that must speak SASL to
a PLAINTEXT listener fail, and their errors and tracebacks are searched too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from tests.httpserver import RecordingServer, html
from tests.integration.site import STREAMCRAWL, Cluster, cli, free_port, service_env

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration]

CANARY = "canary-" + uuid.uuid4().hex  # a password nothing else could contain
SASL = {
    "STREAMCRAWL_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "STREAMCRAWL_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
    "STREAMCRAWL_KAFKA_SASL_USERNAME": "streamcrawl",
    "STREAMCRAWL_KAFKA_SASL_PASSWORD": CANARY,
}
CASSANDRA_AUTH = {
    "STREAMCRAWL_CASSANDRA_USERNAME": "crawler",
    "STREAMCRAWL_CASSANDRA_PASSWORD": CANARY,
}


def leaks(text: str | bytes) -> bool:
    data = text.encode() if isinstance(text, str) else text
    return CANARY.encode() in data


def topic_bytes(bootstrap: str, prefix: str) -> list[bytes]:
    """Every key and value on every topic of ``prefix`` (changelogs included)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"secrets-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        topics = [t for t in consumer.list_topics(timeout=10).topics if t.startswith(prefix)]
        assert any(t.endswith(".control") for t in topics), topics
        consumer.subscribe(topics)
        found: list[bytes] = []
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 5:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            idle_since = time.monotonic()
            found += [msg.key() or b"", msg.value() or b""]
        return found
    finally:
        consumer.close()


def test_a_crawl_with_a_cassandra_password_leaks_it_nowhere(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, partitions=2)
    env = {**cluster.env, **CASSANDRA_AUTH, "STREAMCRAWL_LOG_LEVEL": "DEBUG"}
    try:
        with RecordingServer() as srv:
            srv.routes["/"] = html('<title>a</title><a href="/b">b</a>')
            srv.routes["/b"] = html("<title>b</title>")
            worker = cluster.start_worker("w1", **CASSANDRA_AUTH, STREAMCRAWL_LOG_LEVEL="DEBUG")
            worker.wait_ready()
            seeded = cli(env, "seed", srv.url("/"), "--crawl-id", "secret", "--delay", "0")
            assert seeded.returncode == 0, seeded.stderr
            states = cluster.wait_states(2, timeout=90)
        assert set(states.values()) == {"fetched"}
        pages = {path: worker.get(path)[1] for path in ("/metrics", "/healthz", "/readyz")}
        assert "streamcrawl_fetch_pages" in pages["/metrics"]
        outputs = [
            cli(env, "status", "--crawl-id", "secret"),
            cli(env, "status", "--crawl-id", "secret", "--json"),
            cli(env, "pages", "--crawl-id", "secret", "--from-beginning"),
        ]
        assert all(p.returncode == 0 for p in outputs), [p.stderr for p in outputs]
        messages = topic_bytes(
            cluster.env["STREAMCRAWL_KAFKA_BOOTSTRAP"], cluster.env["STREAMCRAWL_TOPIC_PREFIX"]
        )
        worker.proc.send_signal(signal.SIGTERM)
        worker.proc.wait(60)
    finally:
        cluster.stop_all()
    log = worker.log.read_bytes()
    assert b"DEBUG" in log  # it really logged at DEBUG
    assert not leaks(log), "the worker log holds the password"
    for path, text in pages.items():
        assert not leaks(text), path
    for proc in [seeded, *outputs]:
        assert not leaks(proc.stdout) and not leaks(proc.stderr), proc.args
    assert messages and not any(leaks(m) for m in messages), "a topic holds the password"


def test_failing_sasl_clients_leak_the_password_nowhere(tmp_path: Path) -> None:
    """SASL to a PLAINTEXT listener: every client fails; its error, traceback and DEBUG log
    are searched."""
    base = {**service_env(), "STREAMCRAWL_TOPIC_PREFIX": f"secret-{uuid.uuid4().hex[:8]}"}
    env = {**base, **SASL, **CASSANDRA_AUTH}
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [STREAMCRAWL, "worker"],
            env={
                **os.environ,
                **env,
                "STREAMCRAWL_LOG_LEVEL": "DEBUG",
                "STREAMCRAWL_STATE_DIR": str(tmp_path / "state"),
                "STREAMCRAWL_WEB_PORT": str(free_port()),
            },
            stdout=log,
            stderr=log,
        )
        try:
            worker.wait(45)
        except subprocess.TimeoutExpired:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(30)
    commands = [
        ("admin", "create-topics"),
        ("seed", "http://127.0.0.1:9/", "--crawl-id", "c"),
        ("status",),
        ("pages", "--from-beginning"),
        ("pause", "--crawl-id", "c"),
    ]
    failed = [cli(env, *args, timeout=120) for args in commands]
    # Validation errors: a bad value next to the secrets, and a combination that cannot work.
    invalid = [
        cli({**env, "STREAMCRAWL_PARTITIONS": "zero"}, "admin", "create-topics"),
        cli({**env, "STREAMCRAWL_KAFKA_SASL_MECHANISM": ""}, "status"),
        cli({**base, "STREAMCRAWL_KAFKA_SASL_PASSWORD": CANARY}, "status"),
    ]
    log_text = log_path.read_bytes()
    assert b"SASL" in log_text, log_text[-2000:]  # it tried to authenticate
    assert not leaks(log_text), "the SASL worker's log or traceback holds the password"
    for proc in failed + invalid:
        assert proc.returncode != 0, proc.args
        assert not leaks(proc.stdout) and not leaks(proc.stderr), (proc.args, proc.stderr)
