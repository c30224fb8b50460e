"""Why a Kafka client cannot use the brokers, in one line that names the setting to check.

A broker that refuses a client's SASL credentials or presents a certificate the client's CA
does not verify looks, to the caller, like a broker that does not answer: librdkafka's
``list_topics`` and ``flush`` time out, aiokafka's bootstrap raises "Unable to bootstrap". The
cause only reaches librdkafka's ``error_cb`` (``ConnectionErrors``) or aiokafka's connection
exceptions (``topology.worker.clients.check_connection``, run before a worker starts);
``explain`` turns it into the ``CrawlError`` the CLI prints.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError

from streamcrawl.agents.errors import CrawlError
from streamcrawl.topology.settings import Settings

# librdkafka reports these at once and keeps retrying; either explains a failed connection.
_FATAL_CODES = (KafkaError._AUTHENTICATION, KafkaError._SSL)


class ConnectionErrors:
    """librdkafka ``error_cb`` (add ``config()`` to a client's settings): keeps the first error
    that explains why no broker can be used. librdkafka calls it from ``poll``/``flush``."""

    def __init__(self) -> None:
        self.cause: KafkaError | None = None

    def config(self) -> dict[str, Any]:
        return {"error_cb": self}

    def __call__(self, err: KafkaError) -> None:
        if self.cause is None and err.code() in _FATAL_CODES:
            self.cause = err

    def failure(self, settings: Settings) -> CrawlError | None:
        """The explained error, or None if nothing explains the failure (yet)."""
        if self.cause is None:
            return None
        if self.cause.code() == KafkaError._AUTHENTICATION:
            return refused_credentials(settings)
        return tls_failed(settings, self.cause.str())


def unreachable(settings: Settings, timeout: float, exc: BaseException | None = None) -> CrawlError:
    """The one-line error for brokers that did not answer within ``timeout`` seconds."""
    detail = f" ({exc})" if exc is not None else ""
    protocol = settings.kafka_security_protocol
    return CrawlError(
        f"cannot reach Kafka at {settings.kafka_bootstrap} within {timeout:g} s: "
        f"is the broker up, and does it speak {protocol} there? (STREAMCRAWL_KAFKA_BOOTSTRAP "
        f"/ --kafka-bootstrap, STREAMCRAWL_KAFKA_SECURITY_PROTOCOL){detail}"
    )


def refused_credentials(settings: Settings) -> CrawlError:
    return CrawlError(
        f"Kafka at {settings.kafka_bootstrap} refused the SASL credentials of user "
        f"{settings.kafka_sasl_username!r} ({settings.kafka_sasl_mechanism}): check "
        "STREAMCRAWL_KAFKA_SASL_USERNAME and STREAMCRAWL_KAFKA_SASL_PASSWORD"
    )


def tls_failed(settings: Settings, reason: str) -> CrawlError:
    where = f"TLS with Kafka at {settings.kafka_bootstrap} failed"
    if "certificate verify failed" in reason:
        return CrawlError(
            f"{where}: the broker's certificate is not trusted ({_verify_reason(reason)}); "
            "is STREAMCRAWL_KAFKA_SSL_CAFILE the CA that signed it?"
        )
    return CrawlError(
        f"{where} ({reason[:200]}): does the broker speak "
        f"{settings.kafka_security_protocol} on this port? (STREAMCRAWL_KAFKA_SECURITY_PROTOCOL)"
    )


def _verify_reason(text: str) -> str:
    """``certificate verify failed: self-signed certificate in certificate chain``."""
    start = text.find("certificate verify failed")
    return text[start:].split(" (")[0].split(": broker certificate")[0]
