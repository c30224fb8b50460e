"""Every ``Settings`` field has an effect: set to a value other than its default, it reaches the
component that uses it (the Faust app, the fetch service, the sink consumer, the Cassandra
driver, the Kafka clients, the worker). A field nothing reads is a lie to operators, so a new
field without a case here fails ``test_every_field_has_a_case``.
"""

from __future__ import annotations

import asyncio
import ssl
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cassandra import ConsistencyLevel
from pydantic import SecretStr

from streamcrawl.agents.sinks.cassandra import driver as sink_cassandra_driver
from streamcrawl.agents.sinks.cassandra import sink as sink_cassandra
from streamcrawl.topology.admin import config as admin_config
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.settings import Settings, load_settings
from streamcrawl.topology.worker import app as app_module
from streamcrawl.topology.worker import render as render_module
from tests.unit.test_kafka_clients import cafile  # noqa: F401 - a fixture
from tests.unit.test_replication_settings import faust_producer, prepared_levels, session_level
from tests.unit.test_seed_defaults import published
from tests.unit.worker_run import run_worker

SASL = {
    "kafka_security_protocol": "SASL_PLAINTEXT",
    "kafka_sasl_mechanism": "SCRAM-SHA-512",
    "kafka_sasl_username": "crawler",
    "kafka_sasl_password": SecretStr("s3cret"),
}


PROXY = "http://127.0.0.1:3128"
CREDENTIALS_DIR = Path(tempfile.mkdtemp(prefix="streamcrawl-test-settings-"))
(CREDENTIALS_DIR / "FILED").write_text("bearer:from-a-file\n")


def proxy_of(built: Built) -> Any:
    return built.fetch["core"].network.proxy


def proxy_auth(build: Callable[[Settings], Built], s: Settings, mp: pytest.MonkeyPatch) -> Any:
    """The proxy's Proxy-Authorization, with the credential it names held by the process."""
    mp.setenv("STREAMCRAWL_CREDENTIAL_PX", "basic:u:p")
    auth = proxy_of(build(s)).auth
    return auth.encode() if auth is not None else None


@dataclass
class Built:
    """What ``create_app`` built, and with which arguments."""

    app: Any
    fetch: dict[str, Any] = field(default_factory=dict)
    sink: list[tuple[Any, ...]] = field(default_factory=list)
    health: dict[str, Any] = field(default_factory=dict)


@pytest.fixture
def build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[Settings], Built]:
    """``create_app(settings)`` with its services recorded instead of run."""

    def make(settings: Settings) -> Built:
        built = Built(app=None)

        class FetchService(app_module.FetchService):
            def __init__(self, **kwargs: Any) -> None:
                built.fetch.update(kwargs)
                super().__init__(**kwargs)

        class SinkConsumer(app_module.SinkConsumer):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                built.sink.append(args)
                super().__init__(*args, **kwargs)

        class Health(app_module.Health):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                built.health.update(kwargs)
                super().__init__(*args, **kwargs)

        monkeypatch.setattr(app_module, "FetchService", FetchService)
        monkeypatch.setattr(app_module, "Health", Health)
        monkeypatch.setattr(app_module, "SinkConsumer", SinkConsumer)
        built.app = app_module.create_app(settings)
        return built

    return make


def started(built: Built, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The services the worker starts (no Kafka: the budget topic declaration is skipped)."""
    import faust

    async def no_declare(self: Any) -> None:
        return None

    monkeypatch.setattr(faust.Topic, "maybe_declare", no_declare)
    (services,) = built.app._extra_services

    names: list[str] = []

    async def add(service: Any) -> Any:
        names.append(type(service).__name__)
        return service

    async def run() -> None:
        service = services()
        service.add_runtime_dependency = add
        await service.on_start()

    asyncio.run(run())
    return names


@dataclass
class Cluster:
    """The Cassandra driver's Cluster, recorded: what ``connect`` would connect with."""

    kwargs: dict[str, Any]

    def connect(self, keyspace: str | None) -> str | None:
        return keyspace


def cassandra(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(sink_cassandra_driver, "Cluster", lambda **kw: Cluster(kw))
    cluster, _ = sink_cassandra_driver.connect(settings.cassandra_config())
    assert isinstance(cluster, Cluster)
    kw = cluster.kwargs
    auth = kw["auth_provider"]
    (profile,) = kw["execution_profiles"].values()
    context = kw.get("ssl_context")
    return {
        "tls_cas": None if context is None else _ca_names(context),
        "hosts": (tuple(kw["contact_points"]), kw["port"]),
        "auth": None if auth is None else (auth.username, auth.password),
        "local_dc": profile.load_balancing_policy._child_policy.local_dc,
    }


def _ca_names(context: ssl.SSLContext) -> list[str]:
    """Common names of the CA certificates a TLS context trusts (loaded from a file)."""
    return [dict(x[0] for x in c["subject"]).get("commonName", "") for c in context.get_ca_certs()]


def sink_window(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> int:
    """Statements the Cassandra sink keeps in flight."""
    windows: list[int] = []

    def execute_many(session: Any, calls: Any, window: int) -> Any:
        windows.append(window)
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        future.set_result([])
        return future

    monkeypatch.setattr(sink_cassandra, "execute_many", execute_many)
    sink = sink_cassandra.CassandraSink(settings.cassandra_config())
    sink._session = object()
    asyncio.run(sink._execute([]))
    return windows[0]


def worker_run(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any]:
    """``streamcrawl worker`` with ``settings`` in its environment: its log level and settings."""
    for name, value in settings.model_dump().items():
        raw = value.get_secret_value() if isinstance(value, SecretStr) else value
        if raw is not None and name in settings.model_fields_set:
            monkeypatch.setenv(f"STREAMCRAWL_{name.upper()}", str(raw))
    run = run_worker(monkeypatch)
    return run.loglevel, run.settings


# field -> (base settings, new value, observe, expected): what the component built from the
# settings shows (``observe``) is ``expected`` with the new value, something else without it.
Observe = Callable[[Settings, Callable[[Settings], Built], pytest.MonkeyPatch], Any]


def app_conf(name: str) -> Observe:
    return lambda s, build, mp: getattr(build(s).app.conf, name)


def seeded(field: str, *flags: str) -> Observe:
    """The ``field`` of the policy ``streamcrawl seed URL *flags`` publishes."""
    return lambda s, build, mp: getattr(published(mp, *flags, settings=s), field)


CASES: dict[str, tuple[dict[str, Any], Any, Observe, Any]] = {
    "kafka_bootstrap": (
        {},
        "10.0.0.1:9999,10.0.0.2:9999",
        lambda s, build, mp: (
            [str(u) for u in build(s).app.conf.broker],
            build(s).fetch["view"].connection["bootstrap_servers"],
            admin_config.librdkafka_config(s)["bootstrap.servers"],
        ),
        (
            ["kafka://10.0.0.1:9999", "kafka://10.0.0.2:9999"],
            "10.0.0.1:9999,10.0.0.2:9999",
            "10.0.0.1:9999,10.0.0.2:9999",
        ),
    ),
    "kafka_security_protocol": (
        {},
        "SSL",
        lambda s, build, mp: (
            type(build(s).app.conf.broker_credentials).__name__,
            build(s).fetch["view"].connection["security_protocol"],
            admin_config.librdkafka_config(s)["security.protocol"],
        ),
        ("SSLCredentials", "SSL", "SSL"),
    ),
    "kafka_sasl_mechanism": (
        SASL,
        "PLAIN",
        lambda s, build, mp: (
            build(s).app.conf.broker_credentials.mechanism.value,
            admin_config.librdkafka_config(s)["sasl.mechanism"],
        ),
        ("PLAIN", "PLAIN"),
    ),
    "kafka_sasl_username": (
        SASL,
        "someone-else",
        lambda s, build, mp: (
            build(s).app.conf.broker_credentials.username,
            admin_config.librdkafka_config(s)["sasl.username"],
        ),
        ("someone-else", "someone-else"),
    ),
    "kafka_sasl_password": (
        SASL,
        SecretStr("other"),
        lambda s, build, mp: (
            build(s).app.conf.broker_credentials.password,
            admin_config.librdkafka_config(s)["sasl.password"],
        ),
        ("other", "other"),
    ),
    # kafka_ssl_cafile: test_the_ca_file_reaches_every_kafka_client
    "topic_prefix": (
        {},
        "other-prefix",
        lambda s, build, mp: (
            build(s).app.conf.id,
            sorted(build(s).app.agents["frontier"].channel.topics),
            admin.topic_name(s, "control"),
        ),
        (
            "other-prefix-worker",
            ["other-prefix.frontier", "other-prefix.outcomes"],
            "other-prefix.control",
        ),
    ),
    "partitions": (
        {},
        7,
        lambda s, build, mp: (
            build(s).app.conf.topic_partitions,
            build(s).app.tables["seen"].partitions,
            build(s).fetch["partitions"],
        ),
        (7, 7, 7),
    ),
    # set from `<prefix>.generation` (tests/unit/test_reshard_plan.py)
    "generation": (
        {},
        2,
        lambda s, build, mp: (
            build(s).app.conf.id,
            sorted(build(s).app.agents["frontier"].channel.topics),
            admin.topic_name(s, "pages"),
        ),
        (
            "streamcrawl-g2-worker",
            ["streamcrawl.g2.frontier", "streamcrawl.g2.outcomes"],
            "streamcrawl.pages",
        ),
    ),
    "replication_factor": ({}, 3, app_conf("topic_replication_factor"), 3),
    # the replication settings, every producer and statement: test_replication_settings.py
    "min_insync_replicas": (
        {"replication_factor": 3},
        2,
        lambda s, build, mp: (
            admin.topic_configs(s)["status"]["min.insync.replicas"],
            build(s).app.tables["seen"].changelog_topic.config["min.insync.replicas"],
        ),
        ("2", "2"),
    ),
    "kafka_acks": (
        {"kafka_idempotence": False},
        "1",
        lambda s, build, mp: (
            build(s).app.conf.producer_acks,
            admin_config.librdkafka_producer_config(s)["acks"],
        ),
        (1, "1"),
    ),
    "kafka_idempotence": (
        {},
        False,
        lambda s, build, mp: (
            faust_producer(s)[1],
            admin_config.librdkafka_producer_config(s)["enable.idempotence"],
        ),
        (False, False),
    ),
    "cassandra_write_consistency": (
        {},
        "QUORUM",
        lambda s, b, mp: prepared_levels(s)["batch"],
        ConsistencyLevel.QUORUM,
    ),
    "cassandra_read_consistency": (
        {},
        "ONE",
        lambda s, b, mp: session_level(s, mp),
        ConsistencyLevel.ONE,
    ),
    "standby_replicas": ({}, 2, app_conf("table_standby_replicas"), 2),
    "cassandra_hosts": (
        {},
        "10.1.1.1:9999,10.1.1.2",
        lambda s, b, mp: cassandra(s, mp)["hosts"],
        (("10.1.1.1", "10.1.1.2"), 9999),
    ),
    "cassandra_keyspace": (
        {},
        "other_ks",
        lambda s, b, mp: sink_cassandra_driver.schema_statements(s.cassandra_config())[0],
        "CREATE KEYSPACE IF NOT EXISTS other_ks WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}",
    ),
    "cassandra_replication": (
        {},
        "{'class': 'NetworkTopologyStrategy', 'dc1': 3}",
        lambda s, b, mp: sink_cassandra_driver.schema_statements(s.cassandra_config())[0],
        "CREATE KEYSPACE IF NOT EXISTS streamcrawl WITH replication = "
        "{'class': 'NetworkTopologyStrategy', 'dc1': 3}",
    ),
    "cassandra_username": (
        {"cassandra_password": SecretStr("pw")},
        "crawler",
        lambda s, b, mp: cassandra(s, mp)["auth"],
        ("crawler", "pw"),
    ),
    "cassandra_password": (
        {"cassandra_username": "crawler"},
        SecretStr("other"),
        lambda s, b, mp: cassandra(s, mp)["auth"],
        ("crawler", "other"),
    ),
    "cassandra_ssl": ({}, True, lambda s, b, mp: cassandra(s, mp)["tls_cas"] is not None, True),
    "cassandra_ssl_cafile": (
        {"cassandra_ssl": True},
        "CAFILE",
        lambda s, b, mp: "streamcrawl-test-ca" in cassandra(s, mp)["tls_cas"],
        True,
    ),
    "allow_networks": (
        {},
        "10.9.0.0/16",
        lambda s, build, mp: build(s).fetch["core"].network.guard.allows("10.9.8.7"),
        True,
    ),
    # what a proxy does to a crawl: tests/integration/test_requests.py
    "proxy": ({}, PROXY, lambda s, build, mp: proxy_of(build(s)) and proxy_of(build(s)).url, PROXY),
    "no_proxy_for": (
        {"proxy": PROXY},
        "a.test",
        lambda s, build, mp: proxy_of(build(s)).route("http://x.a.test/") is None,
        True,
    ),
    "proxy_credential": (
        {"proxy": PROXY},
        "PX",
        lambda s, build, mp: proxy_auth(build, s, mp),
        "Basic dTpw",
    ),
    "credentials_dir": (
        {},
        CREDENTIALS_DIR,
        lambda s, build, mp: build(s).fetch["core"].network.credentials.get("FILED") is not None,
        True,
    ),
    "cassandra_local_dc": ({}, "dc7", lambda s, b, mp: cassandra(s, mp)["local_dc"], "dc7"),
    "state_dir": (
        {},
        Path("/nonexistent/state-7"),
        app_conf("datadir"),
        Path("/nonexistent/state-7"),
    ),
    "table_memory_mb": (
        {},
        64,
        lambda s, build, mp: build(s).app.tables["seen"].options["block_cache_size"],
        32 * 1024 * 1024,
    ),
    "web_host": ({}, "127.0.0.7", app_conf("web_bind"), "127.0.0.7"),
    "web_port": ({}, 7777, app_conf("web_port"), 7777),
    "concurrency": ({}, 5, lambda s, build, mp: build(s).fetch["concurrency"], 5),
    # what the bound does: tests/unit/test_origin_index.py
    "max_origins_in_memory": ({}, 123, lambda s, build, mp: build(s).fetch["max_origins"], 123),
    "sink_concurrency": ({}, 3, lambda s, b, mp: sink_window(s, mp), 3),
    # what the wait does: tests/integration/test_render_kafka.py
    "render_wait": ({}, 7.0, lambda s, build, mp: build(s).fetch["render_wait"], 7.0),
    "render_concurrency": ({}, 5, lambda s, b, mp: render_worker(s), (5, 5)),
    # what the port serves: tests/unit/test_render_web.py
    "render_web_port": ({}, 7070, lambda s, b, mp: render_web_bind(s, mp), 7070),
    "sink_enabled": (
        {},
        False,
        lambda s, build, mp: "SinkConsumer" in started(build(s), mp),
        False,
    ),
    "fetch_enabled": (
        {},
        False,
        lambda s, build, mp: "FetchService" in started(build(s), mp),
        False,
    ),
    "max_message_bytes": (
        {},
        2 * 1024 * 1024,
        lambda s, build, mp: (
            build(s).app.conf.producer_max_request_size,
            build(s).app.conf.consumer_max_fetch_size,
            build(s).fetch["page_bytes"],
            build(s).sink[0][1],
            admin.topic_configs(s)["pages"]["max.message.bytes"],
            admin.topic_configs(s)["captures"]["max.message.bytes"],
            admin_config.librdkafka_producer_config(s)["message.max.bytes"],
        ),
        (2097152,) * 4 + ("2097152", "2097152", 2097152),
    ),
    "log_level": ({}, "ERROR", lambda s, b, mp: worker_run(s, mp)[0], "ERROR"),
    "unready_after_s": ({}, 90.0, lambda s, build, mp: build(s).health["unready_after"], 90.0),
    # how the seed defaults and the flags combine: tests/unit/test_seed_defaults.py
    "seed_recrawl_after": ({}, "2d", seeded("recrawl_after"), 2 * 86_400.0),
    "seed_recrawl_min": ({"seed_recrawl_after": "1d"}, "1h", seeded("recrawl_min"), 3_600.0),
    "seed_recrawl_max": ({"seed_recrawl_after": "1d"}, "30d", seeded("recrawl_max"), 30 * 86_400.0),
    "seed_recrawl_mode": ({"seed_recrawl_after": "1d"}, "fixed", seeded("recrawl_mode"), "fixed"),
    "seed_keep_versions": ({}, 3, seeded("keep_versions"), 3),
    "seed_warc": ({}, True, seeded("warc"), True),
}


def render_worker(settings: Settings) -> tuple[int, int]:
    """Requests a render worker takes at a time, and pages its browser renders at once."""

    async def built() -> tuple[int, int]:
        worker = render_module.build(settings)
        try:
            return worker.service.concurrency, worker.core.renderer().settings.concurrency
        finally:
            await worker.stages.close()

    return asyncio.run(built())


def render_web_bind(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> int:
    """The port a render worker serves its ``/healthz`` and ``/metrics`` on."""
    bound: list[int] = []

    async def start(host: str, port: int, *_args: Any) -> None:
        bound.append(port)

    async def built() -> None:
        worker = render_module.build(settings)
        try:
            await render_module.start_web(settings, worker, asyncio.Event())
        finally:
            await worker.stages.close()

    monkeypatch.setattr(render_module.render_web, "start", start)
    asyncio.run(built())
    return bound[0]


def test_every_field_has_a_case() -> None:
    assert set(CASES) | {"kafka_ssl_cafile"} == set(Settings.model_fields)


@pytest.fixture
def settings_of(tmp_path: Path, cafile: Path) -> Iterator[Callable[..., Settings]]:  # noqa: F811
    def make(**fields: Any) -> Settings:
        given = {"state_dir": tmp_path / "state"} | fields
        given = {k: cafile if v == "CAFILE" else v for k, v in given.items()}
        return load_settings(**given)

    yield make


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_field_reaches_its_component(
    name: str,
    settings_of: Callable[..., Settings],
    build: Callable[[Settings], Built],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, value, observe, expected = CASES[name]
    assert observe(settings_of(**base), build, monkeypatch) != expected  # the default differs
    assert observe(settings_of(**(base | {name: value})), build, monkeypatch) == expected


def test_the_ca_file_reaches_every_kafka_client(
    settings_of: Callable[..., Settings],
    build: Callable[[Settings], Built],
    cafile: Path,  # noqa: F811
) -> None:
    import ssl

    s = settings_of(kafka_security_protocol="SSL", kafka_ssl_cafile="CAFILE")
    assert admin_config.librdkafka_config(s)["ssl.ca.location"] == str(cafile)
    built = build(s)
    for context in (
        built.app.conf.broker_credentials.context,
        built.fetch["view"].connection["ssl_context"],
    ):
        assert isinstance(context, ssl.SSLContext)
        subjects = [dict(x[0] for x in c["subject"]) for c in context.get_ca_certs()]
        assert {"commonName": "streamcrawl-test-ca"} in subjects


def test_a_default_worker_keeps_no_standby_replicas(
    settings_of: Callable[..., Settings], build: Callable[[Settings], Built]
) -> None:
    """Standby copies are off unless asked for: faust-streaming 0.15's standby reads can skip
    the head of a changelog (docs/architecture.md, "Standby replicas")."""
    assert build(settings_of()).app.conf.table_standby_replicas == 0
