"""The one TLS client context of every connection the crawler makes to its services.

Kafka (aiokafka, Faust) and Cassandra get the same context: the server's certificate and host
name are verified, against the given CA bundle or else the system's CAs. A bundle that cannot be
loaded is a ``ConfigError`` naming the setting, worded the same for every service.
"""

from __future__ import annotations

import ssl
from os import PathLike

from streamcrawl.agents.errors import ConfigError


def client_context(cafile: str | PathLike[str] | None, setting: str) -> ssl.SSLContext:
    """A verifying TLS client context; ``cafile`` ``None``: the system's CAs.

    Raises ``ConfigError`` naming ``setting`` (the environment variable) when ``cafile`` is
    missing or is not a PEM CA bundle.
    """
    try:
        return ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"invalid setting {setting}={cafile}: cannot load it as a PEM CA bundle "
            f"({exc.strerror or exc})"
        ) from None
