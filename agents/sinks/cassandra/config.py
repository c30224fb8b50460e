"""``CassandraConfig``: the Cassandra sink's own settings.

A plain frozen dataclass, so the stages never import the wiring's ``Settings`` (which builds
it: ``Settings.cassandra_config()``) and importing it does not load the Cassandra driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class CassandraConfig:
    """Where the sink's Cassandra is and how hard to drive it; ``Settings`` builds it.

    ``where`` is the contact points as the operator gave them (quoted in errors).
    """

    hosts: tuple[str, ...] = ("127.0.0.1",)
    port: int = 9042
    where: str = "127.0.0.1:9042"
    keyspace: str = "streamcrawl"
    replication: str = "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    local_dc: str | None = None
    ssl: bool = False
    """Connect over TLS, verifying the nodes' certificates and host names."""
    ssl_cafile: str | None = None
    """CA bundle (PEM) for ``ssl``; ``None``: the system's CAs."""
    concurrency: int = 32
    """Statements (or batches) in flight."""
