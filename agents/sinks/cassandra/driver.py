"""The Cassandra driver seen from asyncio: connect, the schema, and many statements at once.

``execute_many`` runs a group of statements (bound statements or small unlogged batches) with
at most ``window`` in flight and wakes the event loop ONCE, when the last one ended: the
driver's callbacks run on its own thread, and a wake-up per statement (a
``call_soon_threadsafe`` each) cost the sink more CPU than the rows. The driver's own
``execute_concurrent_async`` blocks its caller until every statement ended, so it cannot be
called from the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from importlib import resources
from typing import Any

from cassandra import ConsistencyLevel, DependencyException, OperationTimedOut
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import (
    EXEC_PROFILE_DEFAULT,
    Cluster,
    ExecutionProfile,
    NoHostAvailable,
    ResultSet,
)
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

from streamcrawl.agents.errors import ConfigError, CrawlError
from streamcrawl.agents.sinks.cassandra.config import CassandraConfig
from streamcrawl.agents.sinks.cassandra.pack import (
    DEFAULT_BOUNDS,
    SETTINGS,
    Bounds,
    lowest,
    node_bounds,
)
from streamcrawl.agents.sinks.cassandra.replication import RingCheck
from streamcrawl.agents.sinks.cassandra.security import explain, ssl_context

CONNECT_TIMEOUT_S = 10.0
PROTOCOL_VERSION = 5  # Cassandra >= 4.0; set, so the driver does not probe (and warn) at connect

Call = tuple[Any, Any]  # (statement, paging state or None)
Result = tuple[bool, Any]  # (True, ResultSet) or (False, the exception)


def execute_many(session: Any, calls: Sequence[Call], window: int) -> asyncio.Future[list[Result]]:
    """Execute ``calls`` (at most ``window`` in flight); the future has one result per call, in
    order. Never raises: an error is a ``(False, exc)`` result."""
    return _Group(session, calls, window, asyncio.get_running_loop()).start()


class _Group:
    """One ``execute_many``: the driver thread's callbacks count down, the last one settles."""

    def __init__(
        self, session: Any, calls: Sequence[Call], window: int, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.session, self.calls, self.window, self.loop = session, calls, window, loop
        self.results: list[Result] = [(False, None)] * len(calls)
        self.left = len(calls)
        self.next = 0
        self.lock = threading.Lock()
        self.done: asyncio.Future[list[Result]] = loop.create_future()

    def start(self) -> asyncio.Future[list[Result]]:
        if not self.calls:
            self.done.set_result([])
        for _ in range(min(self.window, len(self.calls))):
            self._submit()
        return self.done

    def _take(self) -> int | None:
        with self.lock:
            if self.next >= len(self.calls):
                return None
            self.next += 1
            return self.next - 1

    def _submit(self) -> None:
        """Start the next call; one that fails to start counts as ended (and the next starts)."""
        while (i := self._take()) is not None:
            statement, paging_state = self.calls[i]
            try:
                future = self.session.execute_async(statement, paging_state=paging_state)
            except Exception as exc:  # e.g. no host available, raised before sending
                if self._ended(i, (False, exc)):
                    return
                continue
            future.add_callbacks(
                self._succeeded, self._failed, callback_args=(i, future), errback_args=(i,)
            )
            return

    def _succeeded(self, rows: Any, i: int, future: Any) -> None:
        if not self._ended(i, (True, ResultSet(future, rows))):
            self._submit()

    def _failed(self, exc: BaseException, i: int) -> None:
        if not self._ended(i, (False, exc)):
            self._submit()

    def _ended(self, i: int, result: Result) -> bool:
        """Record a result; True when it was the last (the loop is woken, once)."""
        with self.lock:
            self.results[i] = result
            self.left -= 1
            last = self.left == 0
        if last:
            self.loop.call_soon_threadsafe(self._settle)
        return last

    def _settle(self) -> None:
        if not self.done.done():  # the awaiting task may have been cancelled
            self.done.set_result(self.results)


_THRESHOLDS = f"SELECT name, value FROM system_views.settings WHERE name IN {tuple(SETTINGS)}"


def batch_bounds(cluster: Cluster, session: Any) -> tuple[Bounds, str]:
    """The bounds of the sink's batches on this cluster (blocking): the lowest of
    ``pack.node_bounds`` over the nodes that are up, since any node may coordinate a batch.
    Each node answers from ``system_views.settings`` (Cassandra >= 4.0); one that cannot (an
    older Cassandra, a role that may not read ``system_views``, a timeout) counts with
    Cassandra's defaults. Also returns what each node said, for the log."""
    found: list[Bounds] = []
    said: list[str] = []
    for host in cluster.metadata.all_hosts():
        if not host.is_up:
            continue
        try:
            rows = session.execute(_THRESHOLDS, host=host, timeout=CONNECT_TIMEOUT_S)
            bounds, text = node_bounds({row.name: row.value for row in rows})
        except Exception as exc:  # any failure: the defaults, said in the log
            bounds, text = DEFAULT_BOUNDS, f"not read ({type(exc).__name__}), the defaults"
        found.append(bounds)
        said.append(f"{host.endpoint}: {text}")
    return lowest(found), "; ".join(said) or "no node up: the defaults"


def quiet_driver_logs() -> None:
    """Hide the driver's connection tracebacks: an unreachable node becomes ONE error line.

    Kept with ``--log-level DEBUG``.
    """
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("cassandra").setLevel(logging.CRITICAL)


def connect(config: CassandraConfig, keyspace: str | None = None) -> tuple[Cluster, Any]:
    """A connected Cluster and Session (blocking), with a password and TLS when configured.

    Raises CrawlError if Cassandra is unreachable or refuses us (the cause and the setting to
    check: ``cassandra_security.explain``), ConfigError for a CA file that cannot be loaded.

    Uses the libev event loop when the driver wheel has it compiled in, else asyncio's (the
    asyncore default is deprecated in 3.11 and gone in 3.12).

    Statements run at ``config.read_consistency`` unless they carry their own level (the
    sink's writes carry ``config.write_consistency``).
    """
    auth = None
    if config.username:
        auth = PlainTextAuthProvider(config.username, config.password or "")
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=config.local_dc)),
        consistency_level=ConsistencyLevel.name_to_value[config.read_consistency],
        request_timeout=CONNECT_TIMEOUT_S,
    )
    cluster = Cluster(
        contact_points=list(config.hosts),
        protocol_version=PROTOCOL_VERSION,
        port=config.port,
        auth_provider=auth,
        ssl_context=ssl_context(config),
        connection_class=_connection_class(),
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=CONNECT_TIMEOUT_S,
        control_connection_timeout=CONNECT_TIMEOUT_S,
    )
    try:
        return cluster, cluster.connect(keyspace)
    except (NoHostAvailable, OperationTimedOut) as exc:
        cluster.shutdown()
        raise explain(config, exc) or CrawlError(
            f"cannot reach Cassandra at {config.where} within "
            f"{CONNECT_TIMEOUT_S:g} s: is it up? (STREAMCRAWL_CASSANDRA_HOSTS / "
            f"--cassandra-hosts) ({_short(exc)})"
        ) from None


def _connection_class() -> Any:
    try:
        from cassandra.io.libevreactor import LibevConnection

        return LibevConnection
    except (ImportError, DependencyException):
        from cassandra.io.asyncioreactor import AsyncioConnection

        return AsyncioConnection


def _short(exc: BaseException) -> str:
    errors = getattr(exc, "errors", None)
    if errors:
        return "; ".join(f"{host}: {err}" for host, err in errors.items())[:300]
    return str(exc)[:300]


def schema_statements(config: CassandraConfig) -> list[str]:
    """The CQL of ``schemas/cassandra.cql`` for the config's keyspace and replication."""
    text = resources.files("streamcrawl.schemas").joinpath("cassandra.cql").read_text("utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    statements = [s.strip() for s in "\n".join(lines).split(";\n") if s.strip()]
    return [
        s.rstrip(";")
        .replace("{keyspace}", config.keyspace)
        .replace("{replication}", config.replication)
        for s in statements
    ]


def write_level(config: CassandraConfig) -> Any:
    """The driver's value of ``config.write_consistency``, for write statements and batches."""
    return ConsistencyLevel.name_to_value[config.write_consistency]


def ring(cluster: Cluster, keyspace: str) -> tuple[dict[str, int], str | None]:
    """Nodes per data centre of the connected ``cluster`` (down ones included), and the
    replication map of ``keyspace`` if it exists."""
    nodes: dict[str, int] = {}
    for host in cluster.metadata.all_hosts():
        nodes[host.datacenter or ""] = nodes.get(host.datacenter or "", 0) + 1
    meta = cluster.metadata.keyspaces.get(keyspace)
    return nodes, None if meta is None else meta.replication_strategy.export_for_schema()


def create_schema(config: CassandraConfig, check: RingCheck | None = None) -> list[str]:
    """Create the keyspace and tables if missing (idempotent); returns the statements applied.

    ``check`` (``replication.check_ring``) sees the ring first (``ring``) and may refuse it
    by raising, before anything is created. Raises ConfigError for a replication map Cassandra
    rejects, CrawlError if unreachable.
    """
    from cassandra.protocol import RequestValidationException

    cluster, session = connect(config)
    applied = []
    try:
        if check is not None:
            check(*ring(cluster, config.keyspace))
        for statement in schema_statements(config):
            try:
                session.execute(statement, timeout=60)
            except RequestValidationException as exc:
                if statement.startswith("CREATE KEYSPACE"):
                    raise ConfigError(
                        f"invalid setting STREAMCRAWL_CASSANDRA_REPLICATION "
                        f"{config.replication!r}: {exc}"
                    ) from None
                what = statement.split("(")[0].strip()
                raise CrawlError(f"Cassandra refused `{what}`: {exc}") from None
            applied.append(statement)
    finally:
        cluster.shutdown()
    return applied
