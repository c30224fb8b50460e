"""The Cassandra sink: pages and terminal URL states, written idempotently.

Every INSERT carries ``USING TIMESTAMP`` = the record's own time in microseconds (see
``schemas/cassandra.cql``), so replaying a topic from any offset leaves the same rows and a
later fetch wins over an earlier one in any arrival order. Writes run concurrently (at most
``CassandraConfig.concurrency`` in flight), each retried with exponential backoff on timeouts and
unavailability; if Cassandra still refuses, ``write`` raises ``SinkBackpressure`` and the caller
must keep (not acknowledge) the input and try again: nothing is dropped.

Nullable columns of the listing tables are stored as ``''`` / ``0`` instead of null: a null
is a tombstone, and scanning a 100 k-row partition full of them hits Cassandra's
``tombstone_failure_threshold``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from importlib import resources
from typing import Any

from cassandra import ConsistencyLevel, DependencyException, OperationTimedOut
from cassandra import RequestExecutionException as _RequestFailed
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

from streamcrawl.agents.errors import ConfigError, CrawlError, SinkBackpressure
from streamcrawl.agents.sink import (
    CRAWL_SHARDS,
    FIRST_WINS_BASE,
    CrawlStats,
    crawl_shard,
    micros,
    origin_bucket,
    url_hash,
)
from streamcrawl.agents.sink_config import CassandraConfig
from streamcrawl.schemas.codec import BadMessage, decode, encode
from streamcrawl.schemas.records import CrawlPolicy, Page, TerminalState, UrlStatus

log = logging.getLogger(__name__)

TABLES = ("pages", "pages_by_origin", "url_status", "url_state_by_crawl", "crawls")
RETRYABLE = (_RequestFailed, OperationTimedOut, NoHostAvailable)
CONNECT_TIMEOUT_S = 10.0
PROTOCOL_VERSION = 5  # Cassandra >= 4.0; set, so the driver does not probe (and warn) at connect
SCAN_PAGE_ROWS = 5000

# Page fields, in Struct order, are the columns of ``pages`` (plus the key's url_hash).
_PAGE_FIELDS = tuple(f for f in Page.__struct_fields__ if f != "v")
_PAGE_COLUMNS = ", ".join(_PAGE_FIELDS)
_STATEMENTS = {
    "page": f"INSERT INTO {{ks}}.pages (url_hash, {_PAGE_COLUMNS}) "
    f"VALUES (?, {', '.join('?' * len(_PAGE_FIELDS))}) USING TIMESTAMP ?",
    "page_by_origin": "INSERT INTO {ks}.pages_by_origin (crawl_id, origin, bucket, url, url_hash, "
    "final_url, status, content_type, title, depth, fetched_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?",
    "status": "INSERT INTO {ks}.url_status (crawl_id, origin, bucket, url, state, depth, attempts, "
    "status, last_error, final_url, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "USING TIMESTAMP ?",
    "state_by_crawl": "INSERT INTO {ks}.url_state_by_crawl "
    "(crawl_id, shard, url, state, updated_at) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?",
    "spec": "UPDATE {ks}.crawls USING TIMESTAMP ? SET spec = ?, state = ?, updated_at = ? "
    "WHERE crawl_id = ?",
    "created": "UPDATE {ks}.crawls USING TIMESTAMP ? SET created_at = ? WHERE crawl_id = ?",
    "get_page": f"SELECT {_PAGE_COLUMNS} FROM {{ks}}.pages WHERE crawl_id = ? AND url_hash = ?",
    "get_status": "SELECT * FROM {ks}.url_status WHERE crawl_id = ? AND origin = ? AND bucket = ? "
    "AND url = ?",
    "get_spec": "SELECT spec, created_at FROM {ks}.crawls WHERE crawl_id = ?",
    "scan_states": "SELECT state, updated_at FROM {ks}.url_state_by_crawl "
    "WHERE crawl_id = ? AND shard = ?",
    "crawl_ids": "SELECT DISTINCT crawl_id, shard FROM {ks}.url_state_by_crawl",
}


class CassandraSink:
    """Writes ``Page`` and ``UrlStatus`` records to the keyspace of ``config``.

    ``start`` before use, ``stop`` after. ``retries``/``backoff`` tune the retry of one statement
    (``backoff`` doubles per attempt, capped at ``max_backoff``).
    """

    def __init__(
        self,
        config: CassandraConfig,
        *,
        retries: int = 5,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
    ) -> None:
        self._config = config
        self._retries = retries
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._cluster: Cluster | None = None
        self._session: Any = None
        self._prepared: dict[str, Any] = {}
        self._slots = asyncio.Semaphore(config.concurrency)

    async def start(self) -> None:
        """Connect and prepare the statements.

        Raises CrawlError if Cassandra is unreachable or the schema is missing (with the
        command that creates it).
        """
        cluster, self._session = await asyncio.to_thread(connect, self._config)
        self._cluster = cluster
        keyspace = self._config.keyspace
        meta = cluster.metadata.keyspaces.get(keyspace)
        missing = [t for t in TABLES if meta is None or t not in meta.tables]
        if missing:
            await self.stop()
            raise CrawlError(
                f"Cassandra keyspace {keyspace!r} lacks tables {', '.join(missing)}: run "
                "`streamcrawl admin create-schema` (STREAMCRAWL_CASSANDRA_KEYSPACE, "
                "--cassandra-keyspace)"
            )
        self._prepared = await asyncio.to_thread(self._prepare)

    def _prepare(self) -> dict[str, Any]:
        prepared = {}
        for name, cql in _STATEMENTS.items():
            # Qualified names, not `USE keyspace` (Cassandra 5 warns on every prepare).
            statement = self._session.prepare(cql.replace("{ks}", self._config.keyspace))
            statement.is_idempotent = True  # every write carries its own timestamp
            statement.fetch_size = SCAN_PAGE_ROWS
            prepared[name] = statement
        return prepared

    async def stop(self) -> None:
        """Close the connections (idempotent)."""
        cluster, self._cluster, self._session = self._cluster, None, None
        if cluster is not None:
            await asyncio.to_thread(cluster.shutdown)

    async def write(self, pages: Sequence[Page], statuses: Sequence[UrlStatus]) -> None:
        """Write pages and terminal URL states; returns when every row is written.

        Raises ``SinkBackpressure`` when Cassandra kept refusing after the retries: some rows
        may be written, none are lost as long as the caller retries the whole input (which is
        harmless: the writes are idempotent).
        """
        calls = [call for page in pages for call in self._page_rows(page)]
        calls += [call for status in statuses for call in self._status_rows(status)]
        await self._all(calls)

    def _page_rows(self, p: Page) -> list[tuple[str, tuple[Any, ...]]]:
        h, ts = url_hash(p.url), micros(p.fetched_at)
        page = (h, *(getattr(p, f) for f in _PAGE_FIELDS), ts)
        listing = (
            p.crawl_id, p.origin, origin_bucket(h), p.url, h, p.final_url, p.status,
            p.content_type or "", p.title or "", p.depth, p.fetched_at, ts,
        )  # fmt: skip
        return [("page", page), ("page_by_origin", listing)]

    def _status_rows(self, s: UrlStatus) -> list[tuple[str, tuple[Any, ...]]]:
        h, ts = url_hash(s.url), micros(s.updated_at)
        row = (
            s.crawl_id, s.origin, origin_bucket(h), s.url, s.state.value, s.depth, s.attempts,
            s.status or 0, s.last_error or "", s.final_url or "", s.updated_at, ts,
        )  # fmt: skip
        by_crawl = (s.crawl_id, crawl_shard(h), s.url, s.state.value, s.updated_at, ts)
        return [("status", row), ("state_by_crawl", by_crawl)]

    async def write_spec(self, policy: CrawlPolicy, at: float | None = None) -> None:
        """Record the crawl's spec as of ``at`` (epoch seconds, default now).

        Pass the control message's Kafka timestamp as ``at`` to make replays of the control
        topic idempotent. ``created_at`` keeps the earliest ``at`` ever written.
        """
        at = time.time() if at is None else at
        spec = encode(policy).decode("utf-8")
        await self._all(
            [
                ("spec", (micros(at), spec, policy.state, at, policy.crawl_id)),
                ("created", (FIRST_WINS_BASE - micros(at), at, policy.crawl_id)),
            ]
        )

    async def counts(self, crawl_id: str | None) -> dict[str, dict[str, int]]:
        """crawl id -> {terminal state -> URLs}, every state present; one crawl or all.

        Exact: scans the crawl's rows in ``url_state_by_crawl`` (paged), which costs one read per
        URL; meant for operators, not for a hot path.
        """
        return {cid: s.all_states() for cid, s in (await self.stats(crawl_id)).items()}

    async def stats(self, crawl_id: str | None) -> dict[str, CrawlStats]:
        """crawl id -> CrawlStats; a given but unknown ``crawl_id`` maps to empty stats."""
        if crawl_id is not None:
            crawl_ids = [crawl_id]
        else:
            crawl_ids = sorted({row.crawl_id async for row in self._rows("crawl_ids", ())})
        found = {cid: CrawlStats() for cid in crawl_ids}

        async def scan(cid: str, shard: int) -> None:
            async for row in self._rows("scan_states", (cid, shard)):
                found[cid].add(row.state, row.updated_at)

        for cid in crawl_ids:
            await asyncio.gather(*(scan(cid, shard) for shard in range(CRAWL_SHARDS)))
        return found

    async def _rows(self, name: str, params: tuple[Any, ...]) -> AsyncIterator[Any]:
        """Every row of a query, page by page (paging without blocking the event loop)."""
        paging_state = None
        while True:
            rs = await self._run(name, params, paging_state)
            for row in rs.current_rows:
                yield row
            paging_state = rs.paging_state
            if paging_state is None:
                return

    async def get_page(self, crawl_id: str, url: str) -> Page | None:
        """The stored page of ``url`` (the requested canonical URL), or None."""
        rows = (await self._run("get_page", (crawl_id, url_hash(url)))).current_rows
        if not rows:
            return None
        row = rows[0]._asdict()
        row.update(headers=dict(row["headers"] or {}), redirects=tuple(row["redirects"] or ()))
        return Page(**row)

    async def get_status(self, crawl_id: str, origin: str, url: str) -> UrlStatus | None:
        """The stored terminal state of ``url``, or None."""
        key = (crawl_id, origin, origin_bucket(url_hash(url)), url)
        rows = (await self._run("get_status", key)).current_rows
        if not rows:
            return None
        r = rows[0]
        return UrlStatus(
            crawl_id=r.crawl_id, url=r.url, origin=r.origin, state=TerminalState(r.state),
            depth=r.depth, attempts=r.attempts, status=r.status or None,
            last_error=r.last_error or None, final_url=r.final_url or None,
            updated_at=r.updated_at,
        )  # fmt: skip

    async def get_spec(self, crawl_id: str) -> tuple[CrawlPolicy, float] | None:
        """The latest spec of the crawl and when the crawl was first recorded, or None."""
        rows = (await self._run("get_spec", (crawl_id,))).current_rows
        if not rows or rows[0].spec is None:
            return None
        try:
            return decode("control", rows[0].spec), rows[0].created_at
        except BadMessage as exc:
            raise CrawlError(f"unreadable spec of crawl {crawl_id!r} in Cassandra: {exc}") from None

    async def _all(self, calls: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Run the statements concurrently; raise the first failure once all have ended."""
        results = await asyncio.gather(
            *(self._run(name, params) for name, params in calls), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _run(self, name: str, params: tuple[Any, ...], paging_state: Any = None) -> Any:
        """Execute one prepared statement with retries; returns its ResultSet (one page).

        Raises SinkBackpressure after ``retries`` failed retries of a retryable error.
        """
        delay = self._backoff
        for attempt in range(self._retries + 1):
            async with self._slots:
                try:
                    return await self._execute(self._prepared[name], params, paging_state)
                except RETRYABLE as exc:
                    error = exc
            if attempt < self._retries:
                log.warning("Cassandra %s failed (%r), retry in %.1f s", name, error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_backoff)
        raise SinkBackpressure(
            f"Cassandra at {self._config.where} refused {name} "
            f"{self._retries + 1} times ({error!r}): pause and retry",
            retry_after=delay,
        )

    async def _execute(self, statement: Any, params: tuple[Any, ...], paging_state: Any) -> Any:
        """``execute_async`` bridged to asyncio; the driver's callbacks run on its own thread."""
        if self._session is None:
            raise CrawlError("CassandraSink used before start() or after stop()")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        response = self._session.execute_async(statement, params, paging_state=paging_state)

        def settle(error: BaseException | None) -> None:
            if done.done():
                return
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(response.result())  # already complete: does not block

        response.add_callbacks(
            lambda _rows: loop.call_soon_threadsafe(settle, None),
            lambda exc: loop.call_soon_threadsafe(settle, exc),
        )
        return await done


def connect(config: CassandraConfig, keyspace: str | None = None) -> tuple[Cluster, Any]:
    """A connected Cluster and Session (blocking); raises CrawlError if Cassandra is unreachable.

    Uses the libev event loop when the driver wheel has it compiled in, else asyncio's (the
    asyncore default is deprecated in 3.11 and gone in 3.12).
    """
    auth = None
    if config.username:
        auth = PlainTextAuthProvider(config.username, config.password or "")
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=config.local_dc)),
        consistency_level=ConsistencyLevel.LOCAL_QUORUM,
        request_timeout=CONNECT_TIMEOUT_S,
    )
    cluster = Cluster(
        contact_points=list(config.hosts),
        protocol_version=PROTOCOL_VERSION,
        port=config.port,
        auth_provider=auth,
        connection_class=_connection_class(),
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=CONNECT_TIMEOUT_S,
        control_connection_timeout=CONNECT_TIMEOUT_S,
    )
    try:
        return cluster, cluster.connect(keyspace)
    except (NoHostAvailable, OperationTimedOut) as exc:
        cluster.shutdown()
        raise CrawlError(
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


def create_schema(config: CassandraConfig) -> list[str]:
    """Create the keyspace and tables if missing (idempotent); returns the statements applied.

    Raises ConfigError for a replication map Cassandra rejects, CrawlError if unreachable.
    """
    from cassandra.protocol import RequestValidationException

    cluster, session = connect(config)
    applied = []
    try:
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
