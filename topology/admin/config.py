"""Every Kafka client's connection settings, from ``Settings``: with ``topology.worker.clients``
(the aiokafka and Faust side), the one place that reads the bootstrap servers, the security
protocol, SASL and the CA file.

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

This module holds the librdkafka column and ``check_security``, which both sides call first:
a combination that cannot work (SASL without a mechanism, user or password; a CA file that is
missing or without TLS; SASL settings without SASL) raises ``ConfigError`` naming the
variables, as the Helm chart refuses to render it. The password stays a ``SecretStr`` in
``Settings`` and is unwrapped only into the arguments a client is built with.
"""

from __future__ import annotations

import logging
from typing import Any

from streamcrawl.agents.errors import ConfigError
from streamcrawl.topology.settings import ENV_PREFIX, Settings

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
    """confluent-kafka producer settings: murmur2 partitioning like Faust and aiokafka, the
    acks and idempotence of the settings (every in-sync replica, idempotent: the defaults),
    pages up to ``max_message_bytes``."""
    return librdkafka_config(settings) | {
        "partitioner": PARTITIONER,
        "acks": settings.kafka_acks,
        "enable.idempotence": settings.kafka_idempotence,
        "message.max.bytes": settings.max_message_bytes,
    }
