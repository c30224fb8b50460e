"""Every Kafka client's connection settings, from ``Settings``: the one place that reads the
bootstrap servers, the security protocol, SASL and the CA file.

Three client libraries talk to the brokers, each spelling the same settings its own way:

===========================  ===============================  ==========================
``Settings`` field           aiokafka (agents) / Faust         librdkafka (CLI, admin)
===========================  ===============================  ==========================
``kafka_bootstrap``          ``bootstrap_servers`` / broker    ``bootstrap.servers``
``kafka_security_protocol``  ``security_protocol``             ``security.protocol``
``kafka_sasl_mechanism``     ``sasl_mechanism``                ``sasl.mechanism``
``kafka_sasl_username``      ``sasl_plain_username``           ``sasl.username``
``kafka_sasl_password``      ``sasl_plain_password``           ``sasl.password``
``kafka_ssl_cafile``         ``ssl_context`` (its CA)          ``ssl.ca.location``
===========================  ===============================  ==========================

Faust gets ``faust_credentials``, made from the same aiokafka arguments. The password stays a
``SecretStr`` in ``Settings`` and is unwrapped only here, into the arguments a client is built
with. A combination that cannot work (SASL without a mechanism, user or password; a CA file
that is missing or without TLS; SASL settings without SASL) raises ``ConfigError`` naming the
variables, as the Helm chart refuses to render it.
"""

from __future__ import annotations

import logging
import ssl
from time import monotonic
from typing import TYPE_CHECKING, Any

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.stream.connection import KafkaConnection
from streamcrawl.topology.settings import ENV_PREFIX, Settings

if TYPE_CHECKING:
    import faust
    from aiokafka import AIOKafkaConsumer
    from faust.types.auth import CredentialsT

# Faust/aiokafka/Java partition keys by murmur2; librdkafka's default is CRC32, which would
# put an origin's seeds on a partition whose frontier agent does not own that origin.
PARTITIONER = "murmur2_random"
TLS = ("SSL", "SASL_SSL")
SASL = ("SASL_PLAINTEXT", "SASL_SSL")


def check_security(settings: Settings) -> None:
    """Raise ``ConfigError`` if the security settings cannot work together."""
    protocol = settings.kafka_security_protocol
    env = f"{ENV_PREFIX}KAFKA_"
    if protocol in SASL:
        missing = [
            f"{env}SASL_{name.upper()}"
            for name, value in (
                ("mechanism", settings.kafka_sasl_mechanism),
                ("username", settings.kafka_sasl_username),
                ("password", settings.kafka_sasl_password),
            )
            if not value
        ]
        if missing:
            raise ConfigError(f"{env}SECURITY_PROTOCOL is {protocol}: set {', '.join(missing)}")
    elif settings.kafka_sasl_mechanism or settings.kafka_sasl_username:
        raise ConfigError(
            f"{env}SASL_* is set but {env}SECURITY_PROTOCOL is {protocol}: "
            "use SASL_PLAINTEXT or SASL_SSL, or unset the SASL settings"
        )
    cafile = settings.kafka_ssl_cafile
    if cafile and protocol not in TLS:
        raise ConfigError(
            f"{env}SSL_CAFILE is set but {env}SECURITY_PROTOCOL is {protocol}: use SSL or SASL_SSL"
        )
    if cafile and not cafile.is_file():
        raise ConfigError(f"{env}SSL_CAFILE {cafile}: no such file")


def ssl_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context for SSL and SASL_SSL (verifying the brokers against ``kafka_ssl_cafile``,
    else the system's CAs); ``None`` without TLS."""
    if settings.kafka_security_protocol not in TLS:
        return None
    from aiokafka.helpers import create_ssl_context

    cafile = settings.kafka_ssl_cafile
    try:
        context: ssl.SSLContext = create_ssl_context(cafile=str(cafile) if cafile else None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{ENV_PREFIX}KAFKA_SSL_CAFILE {cafile}: {exc}") from None
    return context


def aiokafka_connection(settings: Settings) -> KafkaConnection:
    """aiokafka keyword arguments for an agent's consumer (and the base of Faust's)."""
    check_security(settings)
    conn = KafkaConnection(
        bootstrap_servers=settings.kafka_bootstrap,
        security_protocol=settings.kafka_security_protocol,
    )
    context = ssl_context(settings)
    if context is not None:
        conn["ssl_context"] = context
    if settings.kafka_security_protocol in SASL:
        # check_security made sure all three are set
        assert settings.kafka_sasl_mechanism and settings.kafka_sasl_username
        assert settings.kafka_sasl_password is not None
        conn["sasl_mechanism"] = settings.kafka_sasl_mechanism
        conn["sasl_plain_username"] = settings.kafka_sasl_username
        conn["sasl_plain_password"] = settings.kafka_sasl_password.get_secret_value()
    return conn


def faust_credentials(settings: Settings) -> CredentialsT | None:
    """Faust's ``broker_credentials``: SASL (over TLS for SASL_SSL), TLS only, or ``None``."""
    from faust.auth import SASLCredentials, SSLCredentials

    conn = aiokafka_connection(settings)
    context = conn.get("ssl_context")
    if "sasl_mechanism" in conn:
        return SASLCredentials(
            username=conn["sasl_plain_username"],
            password=conn["sasl_plain_password"],
            mechanism=conn["sasl_mechanism"],
            ssl_context=context,
        )
    return SSLCredentials(context) if context is not None else None


class _LibrdkafkaLog:
    """librdkafka's log lines at DEBUG: a dead broker is reported once, by our own error.

    (librdkafka otherwise prints a connection failure to stderr every few milliseconds.)
    """

    _log = logging.getLogger("librdkafka")

    def log(self, _level: int, msg: str, *args: Any) -> None:
        self._log.debug(msg, *args)


def librdkafka_config(settings: Settings) -> dict[str, Any]:
    """confluent-kafka settings shared by every client (admin, consumer, producer)."""
    check_security(settings)
    conf: dict[str, Any] = {
        "bootstrap.servers": settings.kafka_bootstrap,
        "security.protocol": settings.kafka_security_protocol,
        "logger": _LibrdkafkaLog(),
    }
    if settings.kafka_security_protocol in SASL:
        assert settings.kafka_sasl_password is not None  # check_security
        conf["sasl.mechanism"] = settings.kafka_sasl_mechanism
        conf["sasl.username"] = settings.kafka_sasl_username
        conf["sasl.password"] = settings.kafka_sasl_password.get_secret_value()
    if settings.kafka_ssl_cafile:
        conf["ssl.ca.location"] = str(settings.kafka_ssl_cafile)
    return conf


def librdkafka_producer_config(settings: Settings) -> dict[str, Any]:
    """confluent-kafka producer settings: murmur2 partitioning like Faust and aiokafka, acks
    from every in-sync replica, idempotent, pages up to ``max_message_bytes``."""
    return librdkafka_config(settings) | {
        "partitioner": PARTITIONER,
        "acks": "all",
        "enable.idempotence": True,
        "message.max.bytes": settings.max_message_bytes,
    }


# Consumer fetches of the worker (Faust's consumer: ``frontier``, ``outcomes``, changelogs; the
# sink's: ``pages``, ``status``; the shared view's: ``control``, ``budget``). With aiokafka's one
# byte, the broker answered a fetch as soon as anything arrived: a worker crawling 16-32 pages/s
# got an answer, and woke its threads, for nearly every message (~40 fetches a second on Faust's
# consumer alone). After a fetch that brought records, the next one waits up to
# FETCH_MAX_WAIT_MS for FETCH_MIN_BYTES (a saturated worker fills them sooner); after one that
# brought none it waits up to IDLE_FETCH_MAX_WAIT_MS (Faust's own 1.5 s; aiokafka's default is
# 0.5 s) but returns with the first record, so that an idle worker fetches rarely and a record
# is not delayed. Between fetches, aiokafka's fetch routine also woke on a 200 ms timer (its
# ``consumer_timeout_ms``; now FETCHER_TIMEOUT_S) to look over every assigned partition,
# though each event it acts on (a fetch done, records consumed, a seek, a resume, a new
# assignment, a metadata refresh) wakes it through a future of its own: 5 wake-ups a second
# per consumer, the largest share of an idle worker's loop. Measured in docs/architecture.md
# (issue 11).
FETCH_MIN_BYTES = 64 * 1024
FETCH_MAX_WAIT_MS = 100
IDLE_FETCH_MAX_WAIT_MS = 1500
FETCHER_TIMEOUT_S = 1.5


def fetch_in_windows(consumer: AIOKafkaConsumer) -> None:
    """Switch a started ``consumer``'s fetches between the window above (while records come)
    and the idle wait (once a fetch brought nothing), and slow its fetch routine's timer.
    aiokafka's fetcher reads these values each time it builds a fetch request or waits;
    ``_proc_fetch_request`` says whether records came."""
    fetcher = consumer._fetcher
    fetcher._fetcher_timeout = max(fetcher._fetcher_timeout, FETCHER_TIMEOUT_S)
    fetcher._fetch_max_wait_ms = max(fetcher._fetch_max_wait_ms, IDLE_FETCH_MAX_WAIT_MS)
    idle = (fetcher._fetch_min_bytes, fetcher._fetch_max_wait_ms)
    proc = fetcher._proc_fetch_request

    async def proc_fetch_request(*args: Any) -> bool:
        got: bool = await proc(*args)
        busy = (FETCH_MIN_BYTES, FETCH_MAX_WAIT_MS)
        fetcher._fetch_min_bytes, fetcher._fetch_max_wait_ms = busy if got else idle
        return got

    fetcher._proc_fetch_request = proc_fetch_request


def fetch_worker_in_windows(app: faust.App) -> None:
    """``fetch_in_windows`` for Faust's worker consumer (Faust has no setting for its fetches:
    it passes aiokafka a fixed ``fetch_max_wait_ms``): its transport builds the consumer thread
    through these subclasses."""
    from faust.transport.drivers import aiokafka as driver

    class ConsumerThread(driver.AIOKafkaConsumerThread):
        async def on_start(self) -> None:
            await super().on_start()
            fetch_in_windows(self._ensure_consumer())

    class Consumer(driver.Consumer):
        def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

        async def verify_all_partitions_active(self) -> None:
            """Faust's livelock check (every 2.5 commit intervals: it logs a partition whose
            events stopped), without Faust's ``await self.sleep(0)`` per partition: a task
            and a timer each, ~24 a second for an idle worker's 60 partitions, for checks
            of a few microseconds."""
            now = monotonic()
            for tp in self.assignment():
                if self.should_stop:
                    return
                self.verify_event_path(now, tp)

    app.transport.Consumer = Consumer  # type: ignore[misc]
