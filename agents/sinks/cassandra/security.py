"""Cassandra over TLS and with a password: the TLS context, and one readable line for each way
a secured node refuses a client (``driver.connect`` uses both).

A refusal names its cause and the setting to check: bad credentials, no credentials, a
certificate the CA does not verify, a node that wants TLS or one that does not speak it. A CA
file that cannot be loaded is a ``ConfigError`` (``agents.tls``).
"""

from __future__ import annotations

import ssl

from cassandra import AuthenticationFailed

from streamcrawl.agents.errors import CrawlError
from streamcrawl.agents.sinks.cassandra.config import CassandraConfig
from streamcrawl.agents.tls import client_context


def ssl_context(config: CassandraConfig) -> ssl.SSLContext | None:
    """The TLS context for ``config.ssl`` (certificate and host name verified), else None.

    Raises ConfigError if ``config.ssl_cafile`` cannot be loaded.
    """
    if not config.ssl:
        return None
    return client_context(config.ssl_cafile, "STREAMCRAWL_CASSANDRA_SSL_CAFILE")


class CassandraRefused(CrawlError):
    """Cassandra answered but refused us (credentials, certificate, TLS): retrying cannot help."""


def explain(config: CassandraConfig, exc: BaseException) -> CassandraRefused | None:
    """The one-line error for a connect that failed for a security reason; None for others
    (a node that does not answer)."""
    where = f"Cassandra at {config.where}"
    for err in list(getattr(exc, "errors", {}).values()) or [exc]:
        text = str(err)
        if isinstance(err, AuthenticationFailed):
            if not config.username:
                return CassandraRefused(
                    f"{where} requires a password: set STREAMCRAWL_CASSANDRA_USERNAME and "
                    "STREAMCRAWL_CASSANDRA_PASSWORD"
                )
            return CassandraRefused(
                f"{where} refused the credentials of user {config.username!r}: "
                "check STREAMCRAWL_CASSANDRA_USERNAME and STREAMCRAWL_CASSANDRA_PASSWORD"
            )
        if "CERTIFICATE_VERIFY_FAILED" in text:
            return CassandraRefused(
                f"TLS with {where} failed: its certificate is not trusted "
                f"({_reason(text)}); is STREAMCRAWL_CASSANDRA_SSL_CAFILE the CA that signed it?"
            )
        if "WRONG_VERSION_NUMBER" in text:
            return CassandraRefused(
                f"TLS with {where} failed: the node does not speak TLS on this port; set "
                "STREAMCRAWL_CASSANDRA_SSL=false, or enable its client_encryption_options"
            )
        if isinstance(err, ConnectionResetError) and not config.ssl:
            return CassandraRefused(
                f"{where} closed the connection: does it require TLS? "
                "(STREAMCRAWL_CASSANDRA_SSL=true and STREAMCRAWL_CASSANDRA_SSL_CAFILE)"
            )
    return None


def _reason(text: str) -> str:
    """``certificate verify failed: self-signed certificate in certificate chain``."""
    start = text.find("certificate verify failed")
    return text[start:].split(" (_ssl.c")[0] if start >= 0 else text[:200]
