"""``KafkaConnection``: how an agent's aiokafka client reaches and authenticates to the brokers.

The agents never read the wiring's settings: the wiring builds this mapping
(``streamcrawl.topology.worker.clients.aiokafka_connection``) and the agent passes it to the
client as keyword arguments, ``AIOKafkaConsumer(*topics, **connection, group_id=...)``.
"""

from __future__ import annotations

import ssl
from typing import Literal, Required, TypedDict


class KafkaConnection(TypedDict, total=False):
    """aiokafka client keyword arguments: bootstrap servers, TLS and SASL (when used)."""

    bootstrap_servers: Required[str]
    security_protocol: Required[Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]]
    ssl_context: ssl.SSLContext
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    sasl_plain_username: str
    sasl_plain_password: str
