"""The worker's Kafka clients: aiokafka and Faust connection arguments from ``Settings``, and
the acks, idempotence and request timeout of Faust's producer. (The consumers' fetch windows,
which aiokafka fixes at construction, are switched in ``topology.worker.internals``.)

The librdkafka spelling of the same settings, and ``check_security`` that both sides call
first, are in ``topology.admin.config`` (its docstring has the table of the three spellings).
Faust gets ``faust_credentials``, made from the same aiokafka arguments. The password is
unwrapped only here, into the arguments a client is built with.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import TYPE_CHECKING, Any

from streamcrawl.agents.stream.connection import KafkaConnection
from streamcrawl.agents.tls import client_context
from streamcrawl.topology.admin.config import SASL, TLS, check_security
from streamcrawl.topology.admin.errors import refused_credentials, tls_failed, unreachable
from streamcrawl.topology.settings import ENV_PREFIX, Settings
from streamcrawl.topology.worker.internals import use_producer

if TYPE_CHECKING:
    import faust
    from faust.types.auth import CredentialsT


def ssl_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context for SSL and SASL_SSL (verifying the brokers against ``kafka_ssl_cafile``,
    else the system's CAs); ``None`` without TLS."""
    if settings.kafka_security_protocol not in TLS:
        return None
    return client_context(settings.kafka_ssl_cafile, f"{ENV_PREFIX}KAFKA_SSL_CAFILE")


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


def faust_acks(settings: Settings) -> int:
    """Faust's ``producer_acks`` for ``settings.kafka_acks``: -1 (all) or 1."""
    return -1 if settings.kafka_acks == "all" else 1


def aiokafka_producer_settings(settings: Settings) -> dict[str, object]:
    """An aiokafka producer's acks and idempotence for ``settings`` (the render worker's)."""
    return {
        "acks": "all" if settings.kafka_acks == "all" else 1,
        "enable_idempotence": settings.kafka_idempotence,
    }


# How long one request to one broker may go unanswered before the producer drops that
# connection and sends the batch again, to the partition's leader of the moment. A broker that
# hangs (SIGSTOP, a frozen VM) keeps its connections and answers nothing: with Faust's
# producer_request_timeout (20 minutes) as the request timeout too, every batch it led waited
# that long after the controller had moved its partitions (tests/integration/test_node_loss.py,
# sigstop-broker).
PRODUCER_CONNECTION_TIMEOUT_MS = 30_000


def use_producer_settings(app: faust.App, settings: Settings) -> None:
    """Install the worker's Faust producer (the worker's messages and table changelogs):
    idempotent when ``settings.kafka_idempotence`` says so, and with a request timeout apart
    from the batches' delivery timeout. Its acks are Faust's ``producer_acks``
    (``faust_acks``).

    Faust has no setting for idempotence: it asks aiokafka for it only in transactions,
    through a private method that ``internals.use_producer`` extends. aiokafka has one
    ``request_timeout_ms`` for two things Kafka's own producer keeps apart (KIP-91): how long a
    request waits for its broker (``request.timeout.ms``), and how long a batch may wait for
    delivery before it is failed (``delivery.timeout.ms``). A short one fails batches during a
    broker outage (``LeaderNotAvailableError``), and an idempotent producer whose batch was
    dropped sends the next with a gap in its sequence numbers, which the broker refuses for
    good (``OutOfOrderSequenceNumber``; aiokafka issue #1017, librdkafka #2163; a 30 s
    producer_request_timeout crashed tests/integration/test_service_faults.py this way). So
    batches keep Faust's long timeout (they are retried, never expired, through an outage)
    and only the connections of the producer's client (``internals.use_producer``) get
    PRODUCER_CONNECTION_TIMEOUT_MS."""
    use_producer(
        app,
        idempotent=settings.kafka_idempotence,
        connection_timeout_ms=PRODUCER_CONNECTION_TIMEOUT_MS,
    )


# The topics whose messages carry page bodies. aiokafka sends one produce request to a broker at
# a time, every batch that is ready in it, and a full batch makes the next send to its partition
# wait until the sender has taken it. Through Faust's producer (16 KiB batches) a page of a few
# KB filled a batch every few sends, and the frontier's small messages queued behind bodies on
# their way to the broker. Their own producer, with batches of BULK_BATCH_BYTES, lets the
# bodies go in large batches while outcomes, links and changelog writes take Faust's producer:
# a worker with many origins crawls faster for less CPU a page (docs/performance.md, "A
# producer for bodies").
BULK_TOPICS = frozenset({"pages", "captures"})
BULK_BATCH_BYTES = 256 * 1024


def bulk_producer(app: faust.App) -> Any:
    """A second Faust producer of the worker's transport, for BULK_TOPICS: the same brokers,
    credentials, acks, idempotence and timeouts as ``app.producer`` (``use_producer_settings``
    first), batches of up to BULK_BATCH_BYTES. The caller starts and stops it (a mode
    ``Service``); nothing is sent ``on_commit`` through it, so Faust's flush of its own producer
    before a commit need not cover it."""
    producer = app.transport.create_producer(beacon=app.beacon)
    producer.max_batch_size = BULK_BATCH_BYTES  # under max_message_bytes (1 MiB at least)
    return producer


def check_connection(settings: Settings, timeout: float) -> None:
    """Connect to each bootstrap server the way the worker's aiokafka clients do (TLS, SASL);
    return at the first that accepts us. Raises CrawlError naming the cause (refused
    credentials, an untrusted certificate) or, when none answers, ``admin.errors.unreachable``."""
    from aiokafka.conn import create_conn
    from aiokafka.errors import KafkaError as AioKafkaError
    from aiokafka.errors import SaslAuthenticationFailed

    kwargs: dict[str, Any] = dict(aiokafka_connection(settings))
    kwargs.pop("bootstrap_servers")

    async def attempt(host: str, port: int) -> BaseException | None:
        try:
            conn = await asyncio.wait_for(
                create_conn(host, port, request_timeout_ms=int(timeout * 1000), **kwargs),
                timeout,
            )
        except (OSError, TimeoutError, AioKafkaError) as exc:
            return exc
        conn.close()
        return None

    last: BaseException | None = None
    for server in settings.kafka_bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        last = asyncio.run(attempt(host.strip("[]"), int(port or 9092)))
        if last is None:
            return
        if isinstance(last, SaslAuthenticationFailed):
            raise refused_credentials(settings)
        if isinstance(last, ssl.SSLError):
            raise tls_failed(settings, str(last))
    raise unreachable(settings, timeout, last)
