"""Real Kafka and Cassandra for the test session: a pytest plugin (registered by tests/conftest.py).

Each service's endpoint comes from the first of:

1. the environment: ``STREAMCRAWL_KAFKA_BOOTSTRAP``, ``STREAMCRAWL_CASSANDRA_HOSTS``;
2. testcontainers, when ``docker info`` succeeds and the ``testcontainers`` package is installed;
3. ``scripts/services.sh start`` with a private temporary state folder, stopped at session end.

Services start once per session, after collection, and only when a selected test needs them
(marker ``kafka`` or ``cassandra``, or one of the fixtures below); a fixture requested
dynamically (``request.getfixturevalue``) starts its service on demand. A service that cannot
start skips the tests that need it, except under ``CI=true``, where it is an error; and under
``CI=true`` any skipped test fails the session, so CI cannot go green without the services.

Fixtures: ``kafka_bootstrap``, ``kafka_admin``, ``cassandra_hosts``, ``cassandra_cluster``
(session scope); ``topic_prefix``, ``consumer_group``, ``cassandra_keyspace``,
``cassandra_session`` (one per test).

``secure_services`` (session scope, marker ``secure``) is a second Kafka + Cassandra, started
once per session with ``scripts/services.sh start --secure`` into its own temporary state folder
(Kafka on SASL_SSL with SCRAM-SHA-512, Cassandra with a password over TLS): the
``STREAMCRAWL_*`` variables a client needs, credentials and CA included. It starts in the
background at collection, beside the plain services. ``STREAMCRAWL_SECURE_SERVICES_ENV`` names
the env file of secured services already running instead (never stopped by the session).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVICES_SH = ROOT / "scripts" / "services.sh"
ENV_VARS = {"kafka": "STREAMCRAWL_KAFKA_BOOTSTRAP", "cassandra": "STREAMCRAWL_CASSANDRA_HOSTS"}
# Fixtures that imply a service, so that a test needs no marker to get one.
SERVICE_FIXTURES = {
    "kafka": {"kafka_bootstrap", "kafka_admin"},
    "cassandra": {
        "cassandra_hosts",
        "cassandra_cluster",
        "cassandra_keyspace",
        "cassandra_session",
    },
}
START_TIMEOUT_S = 900  # a cold ~/.m2 plus two JVM starts on a busy 2-core machine
SECURE_FIXTURES = {"secure_services"}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"true", "1", "yes"}


def parse_hosts(hosts: str, default_port: int = 9042) -> tuple[list[str], int]:
    """``"h1:p,h2:p"`` -> (["h1", "h2"], p): the Cassandra driver takes one port for all hosts."""
    names, port = [], default_port
    for item in filter(None, (part.strip() for part in hosts.split(","))):
        host, sep, maybe_port = item.rpartition(":")
        if sep and maybe_port.isdigit():
            names.append(host.strip("[]"))
            port = int(maybe_port)
        else:
            names.append(item.strip("[]"))
    return names, port


class ServiceUnavailable(Exception):
    """A service needed by a test could not be provided."""


class Services:
    """Endpoints of the services the session needs, and whatever was started to provide them."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.endpoints: dict[str, str] = {}
        self.errors: dict[str, str] = {}
        self.state_dir: Path | None = None  # private scripts/services.sh state folder
        self.containers: list[Any] = []

    # -- providing ---------------------------------------------------------------------------

    def ensure(self, names: set[str]) -> None:
        missing = {n for n in names if n not in self.endpoints and n not in self.errors}
        for name in sorted(missing):
            if os.environ.get(ENV_VARS[name]):
                self.endpoints[name] = os.environ[ENV_VARS[name]]
                missing.discard(name)
        if missing and docker_available() and testcontainers_available():
            missing = {name for name in sorted(missing) if not self._start_container(name)}
        if missing:
            self._start_local(missing)

    def endpoint(self, name: str) -> str:
        self.ensure({name})
        if name in self.errors:
            message = f"{name} unavailable: {self.errors[name]}"
            if in_ci():
                pytest.fail(f"{message} (CI=true: a missing service is an error)", pytrace=False)
            pytest.skip(message)
        return self.endpoints[name]

    def _start_local(self, names: set[str]) -> None:
        if self.state_dir is None:
            self.state_dir = Path(tempfile.mkdtemp(prefix="streamcrawl-services-"))
        env = {
            **os.environ,
            # Never the developer's own .services: `stop` at session end must not touch those.
            "STREAMCRAWL_SERVICES_DIR": str(self.state_dir),
            "PYTHON": sys.executable,
        }
        self._say(f"starting {' and '.join(sorted(names))} (scripts/services.sh, {self.state_dir})")
        started = time.monotonic()
        try:
            result = subprocess.run(
                ["bash", str(SERVICES_SH), "start", *sorted(names)],
                env=env,
                capture_output=True,
                text=True,
                timeout=START_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            self._fail_all(names, f"scripts/services.sh start took over {START_TIMEOUT_S}s")
            return
        if result.returncode != 0:
            self._fail_all(names, f"scripts/services.sh start failed:\n{result.stderr.strip()}")
            return
        exported = read_env_file(self.state_dir / "env")
        for name in names:
            if ENV_VARS[name] in exported:
                self.endpoints[name] = exported[ENV_VARS[name]]
            else:
                self.errors[name] = f"services.sh wrote no {ENV_VARS[name]}"
        self._say(f"ready in {time.monotonic() - started:.0f}s: {self._describe(names)}")

    def _start_container(self, name: str) -> bool:
        """Start ``name`` with testcontainers; False (and a note) if that fails."""
        try:
            if name == "kafka":
                from testcontainers.kafka import KafkaContainer

                image = os.environ.get("STREAMCRAWL_KAFKA_IMAGE", "confluentinc/cp-kafka:7.9.0")
                container = KafkaContainer(image).with_kraft()
                container.start()
                self.containers.append(container)
                self.endpoints[name] = container.get_bootstrap_server()
            else:
                from testcontainers.cassandra import CassandraContainer

                image = os.environ.get("STREAMCRAWL_CASSANDRA_IMAGE", "cassandra:5.0")
                container = CassandraContainer(image)
                container.start()
                self.containers.append(container)
                host, port = container.get_container_host_ip(), container.get_exposed_port(9042)
                self.endpoints[name] = f"{host}:{port}"
        except Exception as exc:
            self._say(f"testcontainers could not start {name} ({exc!r}); trying services.sh")
            return False
        return True

    def _fail_all(self, names: set[str], message: str) -> None:
        for name in names:
            self.errors[name] = message
        self._say(message)

    # -- stopping ----------------------------------------------------------------------------

    def close(self) -> None:
        for container in self.containers:
            with contextlib.suppress(Exception):
                container.stop()
        if self.state_dir is not None:
            stop_services(self.config, self.state_dir, keep=bool(self.errors))

    # -- reporting ---------------------------------------------------------------------------

    def _describe(self, names: set[str]) -> str:
        return ", ".join(f"{n} at {self.endpoints.get(n, '-')}" for n in sorted(names))

    def _say(self, message: str) -> None:
        _say(self.config, message)


class SecureServices:
    """The secured Kafka + Cassandra of the session: ``services.sh start --secure``, started in
    the background (``launch``) and waited for by the first test that needs them."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.state_dir: Path | None = None
        self.proc: subprocess.Popen[str] | None = None
        self.started = 0.0
        self.env: dict[str, str] | None = None
        self.error: str | None = None

    def launch(self) -> None:
        if self.proc is not None or self.env is not None:
            return
        given = os.environ.get("STREAMCRAWL_SECURE_SERVICES_ENV")
        if given:
            self.env = read_env_file(Path(given))
            return
        self.state_dir = Path(tempfile.mkdtemp(prefix="streamcrawl-secure-services-"))
        env = {
            **os.environ,
            "STREAMCRAWL_SERVICES_DIR": str(self.state_dir),
            "PYTHON": sys.executable,
        }
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            ["bash", str(SERVICES_SH), "start", "--secure"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait(self) -> dict[str, str]:
        self.launch()
        if self.env is None and self.error is None:
            assert self.proc is not None and self.state_dir is not None
            try:
                _, stderr = self.proc.communicate(timeout=START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                _, stderr = self.proc.communicate()
                stderr = f"took over {START_TIMEOUT_S}s\n{stderr}"
            if self.proc.returncode == 0:
                self.env = read_env_file(self.state_dir / "env")
                elapsed = time.monotonic() - self.started
                _say(self.config, f"secured services ready {elapsed:.0f}s after launch")
            else:
                self.error = f"scripts/services.sh start --secure failed:\n{stderr.strip()}"
        if self.error is not None:
            if in_ci():
                pytest.fail(f"{self.error} (CI=true: a missing service is an error)", pytrace=False)
            pytest.skip(self.error)
        assert self.env is not None
        return dict(self.env)

    def close(self) -> None:
        if self.state_dir is None:
            return
        if self.proc is not None and self.proc.poll() is None:
            self.proc.communicate(timeout=START_TIMEOUT_S)
        stop_services(self.config, self.state_dir, keep=self.error is not None)


def stop_services(config: pytest.Config, state_dir: Path, *, keep: bool) -> None:
    """``services.sh stop`` on ``state_dir``; the folder is removed unless ``keep`` (the logs of
    a failed start) or the stop failed."""
    result = subprocess.run(
        ["bash", str(SERVICES_SH), "stop"],
        env={**os.environ, "STREAMCRAWL_SERVICES_DIR": str(state_dir)},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode == 0 and not keep:
        shutil.rmtree(state_dir, ignore_errors=True)
    else:
        _say(config, f"services stopped; logs kept in {state_dir}\n{result.stderr.strip()}")


def _say(config: pytest.Config, message: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"[streamcrawl services] {message}")


def read_env_file(path: Path) -> dict[str, str]:
    """The ``export NAME=value`` lines written by scripts/services.sh."""
    values = {}
    for line in path.read_text().splitlines():
        name, sep, value = line.removeprefix("export ").partition("=")
        if sep:
            values[name.strip()] = value.strip()
    return values


def docker_available() -> bool:
    """A running Docker engine: `docker --version` answers even where no engine runs."""
    if os.environ.get("STREAMCRAWL_TESTCONTAINERS", "1") == "0" or not shutil.which("docker"):
        return False
    try:
        probe = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def testcontainers_available() -> bool:
    try:
        import testcontainers  # noqa: F401
    except ImportError:
        return False
    return True


def needs_secure(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("secure") is not None or bool(fixtures & SECURE_FIXTURES)


def needed_services(item: pytest.Item) -> set[str]:
    fixtures = set(getattr(item, "fixturenames", ()))
    return {
        name
        for name, implied in SERVICE_FIXTURES.items()
        if item.get_closest_marker(name) is not None or fixtures & implied
    }


# -- hooks -----------------------------------------------------------------------------------

_services_key = pytest.StashKey[Services]()
_secure_key = pytest.StashKey[SecureServices]()


def pytest_configure(config: pytest.Config) -> None:
    # Also declared in pyproject.toml; repeated here so that --strict-markers holds without it.
    registered = {line.split(":")[0].strip() for line in config.getini("markers")}
    for line in (
        "kafka: needs a real Kafka broker",
        "cassandra: needs a real Cassandra node",
        "integration: talks to real services or local HTTP servers",
        "secure: needs the secured (SASL_SSL, TLS + password) Kafka and Cassandra",
    ):
        if line.split(":")[0] not in registered:
            config.addinivalue_line("markers", line)
    config.stash[_services_key] = Services(config)
    config.stash[_secure_key] = SecureServices(config)


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A test that uses a service fixture carries the marker, so `-m "not kafka"` deselects it.
    for item in items:
        for name in needed_services(item):
            if item.get_closest_marker(name) is None:
                item.add_marker(name)
        if needs_secure(item) and item.get_closest_marker("secure") is None:
            item.add_marker("secure")


def pytest_collection_finish(session: pytest.Session) -> None:
    # Start everything the selected tests need at once (in parallel), before any test runs, so
    # that start-up time does not count against the first test's timeout.
    if session.config.option.collectonly:
        return
    needed = set().union(*(needed_services(item) for item in session.items))
    if needed or any(needs_secure(item) for item in session.items):
        _install_sigterm_handler()
    if any(needs_secure(item) for item in session.items):
        # In the background: it starts beside the plain services, not after them.
        session.config.stash[_secure_key].launch()
    if needed:
        session.config.stash[_services_key].ensure(needed)


def pytest_unconfigure(config: pytest.Config) -> None:
    services = config.stash.get(_services_key, None)
    if services is not None:
        services.close()
    secure = config.stash.get(_secure_key, None)
    if secure is not None:
        secure.close()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not in_ci() or session.exitstatus != pytest.ExitCode.OK:
        return
    skipped = reporter.stats.get("skipped", [])
    if skipped:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter.write_sep(
            "!", f"CI=true: {len(skipped)} skipped test(s) fail the run (see the skip reasons)"
        )


def _install_sigterm_handler() -> None:
    # A plain SIGTERM would end pytest without cleanup and leave the JVMs running; turned into
    # KeyboardInterrupt, pytest unwinds and pytest_unconfigure stops them.
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, interrupt)


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def kafka_bootstrap(pytestconfig: pytest.Config) -> str:
    """``host:port`` of a Kafka broker (PLAINTEXT), shared by the session."""
    return pytestconfig.stash[_services_key].endpoint("kafka")


@pytest.fixture(scope="session")
def secure_services(pytestconfig: pytest.Config) -> dict[str, str]:
    """``STREAMCRAWL_*`` settings of the secured Kafka (SASL_SSL, SCRAM-SHA-512) and Cassandra
    (password, TLS): endpoints, credentials and the CA file. Shared: do not modify it."""
    return pytestconfig.stash[_secure_key].wait()


@pytest.fixture(scope="session")
def cassandra_hosts(pytestconfig: pytest.Config) -> str:
    """Cassandra contact points as in ``STREAMCRAWL_CASSANDRA_HOSTS``: ``host:port[,...]``."""
    return pytestconfig.stash[_services_key].endpoint("cassandra")


@pytest.fixture(scope="session")
def kafka_admin(kafka_bootstrap: str) -> Any:
    """A confluent-kafka ``AdminClient`` for the session's broker."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def topic_prefix() -> str:
    """A topic name prefix unique to this test, e.g. ``t1a2b3c4d``."""
    return f"t{uuid.uuid4().hex[:8]}"


@pytest.fixture
def consumer_group() -> str:
    """A consumer group id unique to this test."""
    return f"g{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def cassandra_cluster(cassandra_hosts: str) -> Iterator[Any]:
    """A connected ``cassandra.cluster.Cluster``, shut down at session end."""
    from cassandra.cluster import Cluster

    hosts, port = parse_hosts(cassandra_hosts)
    cluster = Cluster(hosts, port=port, connect_timeout=10)
    yield cluster
    cluster.shutdown()


@pytest.fixture(scope="session")
def _cassandra_admin(cassandra_cluster: Any) -> Any:
    return cassandra_cluster.connect()


@pytest.fixture
def cassandra_keyspace(_cassandra_admin: Any) -> Iterator[str]:
    """A keyspace unique to this test (SimpleStrategy, RF 1), dropped afterwards."""
    name = f"ks_{uuid.uuid4().hex[:10]}"
    _cassandra_admin.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', "
        "'replication_factor': 1}"
    )
    yield name
    _cassandra_admin.execute(f"DROP KEYSPACE IF EXISTS {name}")


@pytest.fixture
def cassandra_session(cassandra_cluster: Any, cassandra_keyspace: str) -> Iterator[Any]:
    """A driver ``Session`` using this test's ``cassandra_keyspace``."""
    session = cassandra_cluster.connect(cassandra_keyspace)
    yield session
    session.shutdown()
