"""Every client against the secured services: Kafka on SASL_SSL (SCRAM-SHA-512) and Cassandra
with a password over TLS, started once per session by ``scripts/services.sh start --secure``
(the ``secure_services`` fixture; never the shared plain services).

A short crawl goes end to end through them: ``admin create-topics``/``create-schema``, a
``streamcrawl worker`` (Faust/aiokafka, and its sink: cassandra-driver), ``seed``, ``pages``
and ``status`` (confluent-kafka; ``status --exact``: cassandra-driver). Then each command meets
a wrong password and a certificate its CA does not sign (and Cassandra's commands no password
and no TLS): one line on stderr naming the setting to check, no traceback, exit 1, within
seconds (the clients keep retrying a refusal: only its explanation stops them before the 10 s
connect timeout).
"""

from __future__ import annotations

import collections
import json
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.site import Cluster, cli, free_port, page_requests, serve_site

pytestmark = [pytest.mark.integration, pytest.mark.secure]

KAFKA_SECURITY = (
    "STREAMCRAWL_KAFKA_SECURITY_PROTOCOL",
    "STREAMCRAWL_KAFKA_SASL_MECHANISM",
    "STREAMCRAWL_KAFKA_SASL_USERNAME",
    "STREAMCRAWL_KAFKA_SASL_PASSWORD",
    "STREAMCRAWL_KAFKA_SSL_CAFILE",
)
CASSANDRA_SECURITY = (
    "STREAMCRAWL_CASSANDRA_USERNAME",
    "STREAMCRAWL_CASSANDRA_PASSWORD",
    "STREAMCRAWL_CASSANDRA_SSL",
    "STREAMCRAWL_CASSANDRA_SSL_CAFILE",
)

ORIGINS, PAGES = 2, 6


def without(env: dict[str, str], *names: str) -> dict[str, str]:
    """``env`` minus ``names`` (an empty variable is not an unset one: ``Path("")`` is ".")."""
    return {k: v for k, v in env.items() if k not in names}


def unique(secure_services: dict[str, str], **extra: str) -> dict[str, str]:
    """The secured services' settings with a topic prefix and keyspace of this test's own."""
    tag = uuid.uuid4().hex[:10]
    return {
        **secure_services,
        "STREAMCRAWL_TOPIC_PREFIX": f"sec-{tag}",
        "STREAMCRAWL_CASSANDRA_KEYSPACE": f"sec_{tag}",
        "STREAMCRAWL_PARTITIONS": "2",
        **extra,
    }


@pytest.fixture(scope="session")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA that signed nothing the services present."""
    folder = tmp_path_factory.mktemp("other-ca")
    key, cert = str(folder / "ca.key"), str(folder / "ca.crt")
    args = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    args += ["-subj", "/CN=not the services' CA", "-keyout", key, "-out", cert]
    subprocess.run(
        ["openssl", *args],
        check=True,
        capture_output=True,
    )
    return folder / "ca.crt"


@pytest.fixture(scope="module")
def setup_env(secure_services: dict[str, str]) -> dict[str, str]:
    """Topics and keyspace made by the CLI through the secured services."""
    env = unique(secure_services)
    for action in ("create-topics", "create-schema"):
        done = cli(env, "admin", action)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip(), f"admin {action} printed nothing"
    return env


def test_the_services_refuse_plaintext_clients(
    setup_env: dict[str, str], secure_services: dict[str, str]
) -> None:
    """Nothing reaches them without TLS and credentials."""
    plain = without(setup_env, *KAFKA_SECURITY)
    assert cli(plain, "admin", "create-topics").returncode == 1
    assert cli(without(setup_env, *CASSANDRA_SECURITY), "status", "--exact").returncode == 1


@pytest.fixture(scope="module")
def crawled(
    secure_services: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, object]]:
    """One worker crawls 2 x 6 pages through the secured Kafka and into the secured Cassandra."""
    tmp = tmp_path_factory.mktemp("secure-crawl")
    cluster = Cluster.create(tmp, partitions=2, services=secure_services)
    try:
        with serve_site(ORIGINS, PAGES) as servers:
            worker = cluster.start_worker("w1")
            worker.wait_ready()
            cluster.seed([s.url("/") for s in servers], "secure", "--delay", "0.05")
            states = cluster.wait_states(ORIGINS * PAGES, timeout=120)
            requests = sum(len(page_requests(s)) for s in servers)
        yield {"cluster": cluster, "states": states, "requests": requests, "log": worker.log}
    finally:
        cluster.stop_all()


def test_a_crawl_runs_end_to_end_through_the_secured_services(
    crawled: dict[str, object],
) -> None:
    cluster = crawled["cluster"]
    assert isinstance(cluster, Cluster)
    assert collections.Counter(crawled["states"].values()) == {"fetched": ORIGINS * PAGES}  # type: ignore[attr-defined]
    assert crawled["requests"] == ORIGINS * PAGES
    pages = cli(cluster.env, "pages", "--from-beginning", "--crawl-id", "secure")
    assert pages.returncode == 0, pages.stderr
    urls = {json.loads(line)["url"] for line in pages.stdout.splitlines()}
    assert urls == set(crawled["states"])  # type: ignore[call-overload]
    for source in ([], ["--exact"]):  # the counts topic (Kafka), then Cassandra's rows
        status = cli(cluster.env, "status", "--crawl-id", "secure", "--json", *source)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["states"]["fetched"] == ORIGINS * PAGES


# --- refusals: one line, exit 1 ----------------------------------------------------------------

CASSANDRA_COMMANDS = [["admin", "create-schema"], ["status", "--exact"]]
KAFKA_COMMANDS = [
    ["admin", "create-topics"],
    ["seed", "http://127.0.0.1:9/", "--crawl-id", "refused"],
    ["pages", "--from-beginning"],
    ["pause", "--crawl-id", "refused"],
    ["status"],
    ["worker"],
    ["warc", "--out", str(Path(tempfile.gettempdir()) / "streamcrawl-refused-warc")],
]
REFUSED_WITHIN_S = 8.0  # under the 10 s connect timeout: the refusal itself was recognised


def worker_env(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """Where a worker that should never start would keep its state and serve its web port."""
    port = str(free_port())
    return {**env, "STREAMCRAWL_STATE_DIR": str(tmp_path / "state"), "STREAMCRAWL_WEB_PORT": port}


@pytest.mark.parametrize("command", KAFKA_COMMANDS, ids=lambda c: c[0] if c[0] != "admin" else c[1])
def test_a_wrong_kafka_password_is_one_line(
    setup_env: dict[str, str], command: list[str], tmp_path: Path
) -> None:
    env = {**worker_env(setup_env, tmp_path), "STREAMCRAWL_KAFKA_SASL_PASSWORD": "not-the-password"}
    started = time.monotonic()
    done = cli(env, *command)
    assert time.monotonic() - started < REFUSED_WITHIN_S
    user = "user 'streamcrawl'"
    assert_one_line_refusal(done, f"refused the SASL credentials of {user}", "SASL_PASSWORD")
    assert "not-the-password" not in done.stderr


@pytest.mark.parametrize("command", KAFKA_COMMANDS, ids=lambda c: c[0] if c[0] != "admin" else c[1])
def test_an_untrusted_kafka_certificate_is_one_line(
    setup_env: dict[str, str], other_ca: Path, command: list[str], tmp_path: Path
) -> None:
    env = {**worker_env(setup_env, tmp_path), "STREAMCRAWL_KAFKA_SSL_CAFILE": str(other_ca)}
    started = time.monotonic()
    done = cli(env, *command)
    assert time.monotonic() - started < REFUSED_WITHIN_S
    assert_one_line_refusal(done, "certificate is not trusted", "STREAMCRAWL_KAFKA_SSL_CAFILE")


def test_a_worker_refused_by_cassandra_is_one_line(
    setup_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**worker_env(setup_env, tmp_path), "STREAMCRAWL_CASSANDRA_PASSWORD": "not-the-password"}
    assert_one_line_refusal(cli(env, "worker"), "refused the credentials", "CASSANDRA_PASSWORD")


def assert_one_line_refusal(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for text in expected:
        assert text in lines[0], lines[0]


@pytest.mark.parametrize("command", CASSANDRA_COMMANDS, ids=" ".join)
def test_a_wrong_cassandra_password_is_one_line(
    setup_env: dict[str, str], command: list[str]
) -> None:
    done = cli({**setup_env, "STREAMCRAWL_CASSANDRA_PASSWORD": "not-the-password"}, *command)
    assert_one_line_refusal(
        done, "refused the credentials of user 'streamcrawl'", "STREAMCRAWL_CASSANDRA_PASSWORD"
    )
    assert "not-the-password" not in done.stderr


@pytest.mark.parametrize("command", CASSANDRA_COMMANDS, ids=" ".join)
def test_an_untrusted_cassandra_certificate_is_one_line(
    setup_env: dict[str, str], other_ca: Path, command: list[str]
) -> None:
    done = cli({**setup_env, "STREAMCRAWL_CASSANDRA_SSL_CAFILE": str(other_ca)}, *command)
    assert_one_line_refusal(done, "not trusted", "STREAMCRAWL_CASSANDRA_SSL_CAFILE")


def test_cassandra_without_a_password_is_one_line(setup_env: dict[str, str]) -> None:
    env = without(setup_env, "STREAMCRAWL_CASSANDRA_USERNAME", "STREAMCRAWL_CASSANDRA_PASSWORD")
    assert_one_line_refusal(cli(env, "status", "--exact"), "requires a password")


def test_cassandra_without_tls_is_one_line(setup_env: dict[str, str]) -> None:
    env = without(setup_env, "STREAMCRAWL_CASSANDRA_SSL", "STREAMCRAWL_CASSANDRA_SSL_CAFILE")
    assert_one_line_refusal(cli(env, "status", "--exact"), "does it require TLS?")


def test_cassandra_with_the_system_cas_is_one_line(setup_env: dict[str, str]) -> None:
    """TLS on, no CA file: the system's CAs do not know the services' CA."""
    env = without(setup_env, "STREAMCRAWL_CASSANDRA_SSL_CAFILE")
    assert_one_line_refusal(cli(env, "status", "--exact"), "not trusted")
