"""``CassandraConfig``: the Cassandra sink's own settings.

A plain frozen dataclass, so the stages never import the wiring's ``Settings`` (which builds
it: ``Settings.cassandra_config()``) and importing it does not load the Cassandra driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# The levels a statement may be run at (the driver's names). SERIAL and LOCAL_SERIAL are for
# lightweight transactions, which the sink never runs; ANY and EACH_QUORUM are write-only.
ReadConsistency = Literal["ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_QUORUM", "LOCAL_ONE"]
WriteConsistency = Literal[
    "ANY", "ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_QUORUM", "EACH_QUORUM", "LOCAL_ONE"
]


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
    write_consistency: WriteConsistency = "LOCAL_QUORUM"
    """Level of every write (rows, batches, version trims)."""
    read_consistency: ReadConsistency = "LOCAL_QUORUM"
    """Level of every read (``status --exact``, ``pages``, the sink's version reads)."""
