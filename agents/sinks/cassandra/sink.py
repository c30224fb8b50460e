"""The Cassandra sink: pages and terminal URL states, written idempotently.

Every write carries ``USING TIMESTAMP`` = the record's own time in microseconds (see
``schemas/cassandra.cql``), so replaying a topic from any offset leaves the same rows and a
later fetch wins over an earlier one in any arrival order.

The rows of a write go in unlogged batches within the cluster's batch warnings, read at
``start`` (``pack.py``: with Cassandra's defaults, at most 10 partitions and 4 KiB, about one
request per page; raised for a crawl, several pages a request: docs/performance.md, "The sink's
requests"), page rows first and the small rows
(URL states, a crawl's origins not yet written by this sink) in the room they leave; a row too
big for a batch is a request of its own. All run
at once (at most ``CassandraConfig.concurrency`` in flight) with one event-loop wake-up for the
whole group (``driver.py``). Failed requests are retried with exponential backoff
on timeouts and unavailability; if Cassandra still refuses, ``write`` raises
``SinkBackpressure`` and the caller must keep (not acknowledge) the input and try again:
nothing is dropped.

A crawl that keeps versions (``CrawlPolicy.keep_versions`` = N) also gets a ``page_versions``
row per new or changed page, in the same requests; once they are written, one read of each
such URL's N+1 newest versions and, when there are N+1, one range deletion of the older ones
(``_trim``; why that is replay-safe: ``schemas/cassandra.cql``).

A page's ``links`` go in its own row as one JSON text cell (the wire's encoding of
``Page.links``), bounded by the crawl's ``max_page_links``: never a row per link. Its ``data``
(what the crawl's extractors read, docs/extraction.md) is one JSON text cell too, null when the
crawl has no extractors.

Nullable columns of ``url_status`` are stored as ``''`` / ``0`` instead of null: a null is a
tombstone, and reading a 100 k-row partition full of them hits Cassandra's
``tombstone_failure_threshold``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import msgspec
from cassandra import OperationTimedOut
from cassandra import RequestExecutionException as _RequestFailed
from cassandra.cluster import Cluster, NoHostAvailable
from cassandra.query import BatchStatement, BatchType

from streamcrawl.agents.errors import CrawlError, SinkBackpressure
from streamcrawl.agents.sinks.cassandra.config import CassandraConfig
from streamcrawl.agents.sinks.cassandra.driver import (
    Call,
    Result,
    batch_bounds,
    connect,
    execute_many,
    write_level,
)
from streamcrawl.agents.sinks.cassandra.pack import DEFAULT_BOUNDS, Bounds, Group, Row, pack
from streamcrawl.agents.sinks.contract import (
    FIRST_WINS_BASE,
    ORIGIN_BUCKETS,
    CrawlStats,
    Version,
    micros,
    origin_bucket,
    url_hash,
    version_of,
    versioned,
)
from streamcrawl.schemas.codec import BadMessage, decode, encode
from streamcrawl.schemas.records import (
    CrawlPolicy,
    Outlink,
    Page,
    PageData,
    TerminalState,
    UrlStatus,
)

log = logging.getLogger(__name__)

TABLES = ("pages", "url_status", "crawl_origins", "crawls", "page_versions")
RETRYABLE = (_RequestFailed, OperationTimedOut, NoHostAvailable)
SCAN_PAGE_ROWS = 5000
KNOWN_ORIGINS = 100_000  # (crawl, origin) pairs remembered as written to crawl_origins

# Page fields, in Struct order, are the columns of ``pages`` (plus the key's url_hash).
_PAGE_FIELDS = tuple(f for f in Page.__struct_fields__ if f != "v")
_PAGE_COLUMNS = ", ".join(_PAGE_FIELDS)
_LINKS = _PAGE_FIELDS.index("links")
_DATA = _PAGE_FIELDS.index("data")
_BUCKETS = list(range(ORIGIN_BUCKETS))
# What Cassandra counts per cell (a column, a map entry) beside its value when it sizes a
# batch against batch_size_warn_threshold: timestamp, TTL, deletion time, framing. Generous:
# a flat 256 bytes per page row and 64 per state row let batches over the threshold through
# (Cassandra logged them); with 32 per cell a saturated crawl (the bench's 8 x 500 row) logged
# none.
_CELL = 32
_encode_json = msgspec.json.Encoder().encode
_decode_links = msgspec.json.Decoder(tuple[Outlink, ...]).decode
_decode_data = msgspec.json.Decoder(PageData).decode
_STATEMENTS = {
    "page": f"INSERT INTO {{ks}}.pages (url_hash, {_PAGE_COLUMNS}, checked_at) "
    f"VALUES (?, {', '.join('?' * len(_PAGE_FIELDS))}, ?) USING TIMESTAMP ?",
    # A revisit that found the stored copy unchanged, or gone: never the copy itself.
    "checked": "UPDATE {ks}.pages USING TIMESTAMP ? SET change = ?, checked_at = ? "
    "WHERE crawl_id = ? AND url_hash = ?",
    "gone": "UPDATE {ks}.pages USING TIMESTAMP ? SET change = ?, checked_at = ?, status = ? "
    "WHERE crawl_id = ? AND url_hash = ?",
    "version": "INSERT INTO {ks}.page_versions (crawl_id, url_hash, fetched_at, body_sha256, "
    "status, change, body_bytes) VALUES (?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?",
    "newest_versions": "SELECT fetched_at FROM {ks}.page_versions "
    "WHERE crawl_id = ? AND url_hash = ? LIMIT ?",
    "trim_versions": "DELETE FROM {ks}.page_versions USING TIMESTAMP ? "
    "WHERE crawl_id = ? AND url_hash = ? AND fetched_at < ?",
    "versions": "SELECT fetched_at, body_sha256, status, change FROM {ks}.page_versions "
    "WHERE crawl_id = ? AND url_hash = ?",
    "status": "INSERT INTO {ks}.url_status (crawl_id, origin, bucket, url, state, depth, attempts, "
    "status, last_error, final_url, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "USING TIMESTAMP ?",
    "origin": "INSERT INTO {ks}.crawl_origins (crawl_id, origin) VALUES (?, ?) USING TIMESTAMP 1",
    "spec": "UPDATE {ks}.crawls USING TIMESTAMP ? SET spec = ?, state = ?, updated_at = ? "
    "WHERE crawl_id = ?",
    "created": "UPDATE {ks}.crawls USING TIMESTAMP ? SET created_at = ? WHERE crawl_id = ?",
    "get_page": f"SELECT {_PAGE_COLUMNS} FROM {{ks}}.pages WHERE crawl_id = ? AND url_hash = ?",
    "get_status": "SELECT * FROM {ks}.url_status WHERE crawl_id = ? AND origin = ? AND bucket = ? "
    "AND url = ?",
    "get_spec": "SELECT spec, created_at FROM {ks}.crawls WHERE crawl_id = ?",
    "origins": "SELECT origin FROM {ks}.crawl_origins WHERE crawl_id = ?",
    "scan_states": "SELECT state, updated_at FROM {ks}.url_status "
    "WHERE crawl_id = ? AND origin = ? AND bucket IN ?",
    "crawl_ids": "SELECT DISTINCT crawl_id FROM {ks}.crawl_origins",
}


class CassandraSink:
    """Writes ``Page`` and ``UrlStatus`` records to the keyspace of ``config``.

    ``start`` before use, ``stop`` after. ``retries``/``backoff`` tune the retry of failed
    statements (``backoff`` doubles per attempt, capped at ``max_backoff``).
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
        self._known_origins: dict[tuple[str, str], None] = {}  # insertion-ordered, bounded
        self.bounds: Bounds = DEFAULT_BOUNDS
        """What a batch may hold: the cluster's batch warnings as ``start`` read them."""

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
        if not missing and meta is not None:  # a keyspace of an earlier schema version
            columns = meta.tables["pages"].columns
            missing = [f"pages.{c}" for c in (*_PAGE_FIELDS, "checked_at") if c not in columns]
        if missing:
            await self.stop()
            raise CrawlError(
                f"Cassandra keyspace {keyspace!r} lacks tables {', '.join(missing)}: run "
                "`streamcrawl admin create-schema` (STREAMCRAWL_CASSANDRA_KEYSPACE, "
                "--cassandra-keyspace)"
            )
        self._prepared = await asyncio.to_thread(self._prepare)
        self.bounds, said = await asyncio.to_thread(batch_bounds, cluster, self._session)
        log.info(
            "Cassandra sink: batches of at most %d partitions and %d bytes (%s)",
            self.bounds.partitions, self.bounds.nbytes, said,
        )  # fmt: skip

    def _prepare(self) -> dict[str, Any]:
        """Every statement, prepared; the writes at the config's write level (the reads run at
        the session's, ``config.read_consistency``)."""
        prepared = {}
        for name, cql in _STATEMENTS.items():
            # Qualified names, not `USE keyspace` (Cassandra 5 warns on every prepare).
            statement = self._session.prepare(cql.replace("{ks}", self._config.keyspace))
            statement.is_idempotent = True  # every write carries its own timestamp
            statement.fetch_size = SCAN_PAGE_ROWS
            if not cql.startswith("SELECT"):
                statement.consistency_level = write_level(self._config)
            prepared[name] = statement
        return prepared

    async def stop(self) -> None:
        """Close the connections (idempotent)."""
        cluster, self._cluster, self._session = self._cluster, None, None
        if cluster is not None:
            await asyncio.to_thread(cluster.shutdown)

    async def write(
        self,
        pages: Sequence[Page],
        statuses: Sequence[UrlStatus],
        keep_versions: Mapping[str, int] | None = None,
    ) -> None:
        """Write pages, terminal URL states and the versions of crawls that keep them
        (``keep_versions``: crawl id -> N); returns when every row is written.

        Raises ``SinkBackpressure`` when Cassandra kept refusing after the retries: some rows
        may be written, none are lost as long as the caller retries the whole input (which is
        harmless: the writes are idempotent).
        """
        to_version = versioned(pages, keep_versions or {})
        rows = [self._page_row(p) for p in pages]
        small = self._status_rows(statuses) + [self._version_row(p) for p, _n in to_version]
        seen = dict.fromkeys((s.crawl_id, s.origin) for s in statuses)
        new_origins = [key for key in seen if key not in self._known_origins]
        small += [
            ("origin", key, 2 * _CELL + len(key[0]) + len(key[1]), key[:1]) for key in new_origins
        ]
        await self._all([self._call(group) for group in pack(rows, small, self.bounds)])
        for key in new_origins:  # only once written: a failed write is retried whole
            self._known_origins[key] = None
        while len(self._known_origins) > KNOWN_ORIGINS:
            del self._known_origins[next(iter(self._known_origins))]
        await self._trim({(p.crawl_id, url_hash(p.url)): n for p, n in to_version})

    def _version_row(self, p: Page) -> Row:
        """The ``page_versions`` row of a new or changed page."""
        hashed, v = url_hash(p.url), version_of(p)
        values = (p.crawl_id, hashed, *v, p.body_bytes, micros(p.fetched_at))
        size = 8 * _CELL + len(p.crawl_id) + len(hashed) + len(v.body_sha256)
        return ("version", values, size, ("version", p.crawl_id, hashed))

    async def _trim(self, keep: dict[tuple[str, str], int]) -> None:
        """Keep the newest N versions of each (crawl id, url hash) of ``keep`` (-> N): read
        its N+1 newest, and if there are N+1, delete those fetched before the N-th newest
        with the N-th's fetch time as write timestamp, so that a replayed older version
        stays deleted (``schemas/cassandra.cql``). Run after the versions are written."""
        if not keep:
            return
        keys = list(keep)
        found = await self._all([self._bind("newest_versions", (*k, keep[k] + 1)) for k in keys])
        deletes = []
        for key, rs in zip(keys, found, strict=True):
            newest = [row.fetched_at for row in rs.current_rows]
            if len(newest) > keep[key]:
                oldest_kept = newest[keep[key] - 1]
                values = (micros(oldest_kept), *key, oldest_kept)
                deletes.append(self._bind("trim_versions", values))
        if deletes:
            await self._all(deletes)

    def _page_row(self, p: Page) -> Row:
        """The ``pages`` row of ``p``, its estimated size and its partition (a revisit that
        found the page unchanged or gone: the update of its check, not a row)."""
        hashed = url_hash(p.url)
        partition = ("page", p.crawl_id, hashed)
        at = micros(p.fetched_at)
        if p.change == "unchanged":
            checked = (at, p.change, p.fetched_at, p.crawl_id, hashed)
            return ("checked", checked, 6 * _CELL + len(p.crawl_id), partition)
        if p.change == "gone":
            gone = (at, p.change, p.fetched_at, p.status, p.crawl_id, hashed)
            return ("gone", gone, 7 * _CELL + len(p.crawl_id), partition)
        row = [getattr(p, f) for f in _PAGE_FIELDS]
        links = _encode_json(p.links)
        row[_LINKS] = links.decode("utf-8")
        data = _encode_json(p.data) if p.data is not None else b""
        row[_DATA] = data.decode("utf-8") if p.data is not None else None
        size = _CELL * (len(row) + 1 + len(p.headers)) + len(links) + len(p.url) + len(p.final_url)
        size += len(data) + len(p.main_text or "")
        size += len(p.crawl_id) + len(p.origin) + len(p.title or "") + len(p.body_sha256)
        size += sum(len(k) + len(v) for k, v in p.headers.items())
        size += sum(len(r) for r in p.redirects) + len(p.canonical or "")
        size += sum(_CELL + len(e) for e in (*p.plugin_errors, *p.assets))
        if p.body is not None:
            size += len(p.body.encode("utf-8", "surrogatepass"))
        return ("page", (hashed, *row, p.fetched_at, at), size, partition)

    def _status_rows(self, statuses: Sequence[UrlStatus]) -> list[Row]:
        """url_status rows, those of one partition (crawl, origin, bucket) together."""
        rows: dict[tuple[str, str, int], list[Row]] = {}
        for s in statuses:
            bucket = origin_bucket(url_hash(s.url))
            row = (
                s.crawl_id, s.origin, bucket, s.url, s.state.value, s.depth, s.attempts,
                s.status or 0, s.last_error or "", s.final_url or "", s.updated_at,
                micros(s.updated_at),
            )  # fmt: skip
            size = _CELL * len(row) + len(s.crawl_id) + len(s.origin) + len(s.url)
            size += len(s.last_error or "") + len(s.final_url or "")
            key = (s.crawl_id, s.origin, bucket)
            rows.setdefault(key, []).append(("status", row, size, key))
        return [item for group in rows.values() for item in group]

    def _call(self, group: Group) -> Call:
        """One request: the bound statement of a lone row, else an unlogged batch."""
        if len(group) == 1:
            return self._bind(*group[0])
        batch = BatchStatement(
            batch_type=BatchType.UNLOGGED, consistency_level=write_level(self._config)
        )
        batch.is_idempotent = True
        for name, row in group:
            batch.add(self._prepared[name], row)
        return (batch, None)

    def _bind(self, name: str, row: tuple[Any, ...]) -> Call:
        return (self._prepared[name].bind(row), None)

    async def write_spec(self, policy: CrawlPolicy, at: float | None = None) -> None:
        """Record the crawl's spec as of ``at`` (epoch seconds, default now).

        Pass the control message's Kafka timestamp as ``at`` to make replays of the control
        topic idempotent. ``created_at`` keeps the earliest ``at`` ever written.
        """
        at = time.time() if at is None else at
        spec = encode(policy).decode("utf-8")
        await self._all(
            [
                self._bind("spec", (micros(at), spec, policy.state, at, policy.crawl_id)),
                self._bind("created", (FIRST_WINS_BASE - micros(at), at, policy.crawl_id)),
            ]
        )

    async def counts(self, crawl_id: str | None) -> dict[str, dict[str, int]]:
        """crawl id -> {terminal state -> URLs}, every state present; one crawl or all.

        Exact: reads every state row of the crawl (one paged query per origin of
        ``crawl_origins``); meant for operators, not for a hot path.
        """
        return {cid: s.all_states() for cid, s in (await self.stats(crawl_id)).items()}

    async def stats(self, crawl_id: str | None) -> dict[str, CrawlStats]:
        """crawl id -> CrawlStats; a given but unknown ``crawl_id`` maps to empty stats."""
        if crawl_id is not None:
            crawl_ids = [crawl_id]
        else:
            crawl_ids = sorted({row.crawl_id async for row in self._rows("crawl_ids", ())})
        found = {cid: CrawlStats() for cid in crawl_ids}

        async def scan(cid: str, origin: str) -> None:
            async for row in self._rows("scan_states", (cid, origin, _BUCKETS)):
                found[cid].add(row.state, row.updated_at)

        for cid in crawl_ids:
            origins = [row.origin async for row in self._rows("origins", (cid,))]
            await asyncio.gather(*(scan(cid, origin) for origin in origins))
        return found

    async def _rows(self, name: str, params: tuple[Any, ...]) -> AsyncIterator[Any]:
        """Every row of a query, page by page (paging without blocking the event loop)."""
        paging_state = None
        while True:
            (rs,) = await self._all([(self._prepared[name].bind(params), paging_state)])
            for row in rs.current_rows:
                yield row
            paging_state = rs.paging_state
            if paging_state is None:
                return

    async def _one(self, name: str, params: tuple[Any, ...]) -> list[Any]:
        (rs,) = await self._all([self._bind(name, params)])
        return list(rs.current_rows)

    async def get_page(self, crawl_id: str, url: str) -> Page | None:
        """The stored page of ``url`` (the requested canonical URL), or None (also when only
        a revisit's check of it was written: no copy to show)."""
        rows = await self._one("get_page", (crawl_id, url_hash(url)))
        if not rows or rows[0].url is None:  # a revisit's check only: its copy is not stored
            return None
        row = rows[0]._asdict()
        row.update(
            headers=dict(row["headers"] or {}),
            redirects=tuple(row["redirects"] or ()),
            plugin_errors=tuple(row["plugin_errors"] or ()),
            assets=tuple(row["assets"] or ()),
            links=_decode_links(row["links"]) if row["links"] else (),
            links_truncated=bool(row["links_truncated"]),
            data=_decode_data(row["data"]) if row["data"] is not None else None,
        )
        return Page(**row)

    async def versions(self, crawl_id: str, url: str) -> list[Version]:
        """The kept versions of ``url``, newest first; empty when none are kept."""
        rows = await self._one("versions", (crawl_id, url_hash(url)))
        return [Version(r.fetched_at, r.body_sha256, r.status, r.change) for r in rows]

    async def get_status(self, crawl_id: str, origin: str, url: str) -> UrlStatus | None:
        """The stored terminal state of ``url``, or None."""
        rows = await self._one("get_status", (crawl_id, origin, origin_bucket(url_hash(url)), url))
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
        rows = await self._one("get_spec", (crawl_id,))
        if not rows or rows[0].spec is None:
            return None
        try:
            return decode("control", rows[0].spec), rows[0].created_at
        except BadMessage as exc:
            raise CrawlError(f"unreadable spec of crawl {crawl_id!r} in Cassandra: {exc}") from None

    async def _all(self, calls: list[Call]) -> list[Any]:
        """Run the calls at once and return their ResultSets, in order; failed calls are
        retried (only they) with backoff. Raises a non-retryable error as is, and
        SinkBackpressure after ``retries`` retries of a retryable one."""
        results: list[Any] = [None] * len(calls)
        pending = list(range(len(calls)))
        delay, error = self._backoff, None
        for attempt in range(self._retries + 1):
            outcomes = await self._execute([calls[i] for i in pending])
            failed = []
            for i, (ok, value) in zip(pending, outcomes, strict=True):
                if ok:
                    results[i] = value
                elif isinstance(value, RETRYABLE):
                    failed.append(i)
                    error = value
                else:
                    raise value
            if not failed:
                return results
            pending = failed
            if attempt < self._retries:
                log.warning(
                    "Cassandra: %d statements failed (%r), retry in %.1f s",
                    len(failed),
                    error,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_backoff)
        raise SinkBackpressure(
            f"Cassandra at {self._config.where} refused {len(pending)} statements "
            f"{self._retries + 1} times ({error!r}): pause and retry",
            retry_after=delay,
        )

    async def _execute(self, calls: list[Call]) -> list[Result]:
        """The driver bridge (one event-loop wake-up per group); tests replace it."""
        if self._session is None:
            raise CrawlError("CassandraSink used before start() or after stop()")
        return await execute_many(self._session, calls, self._config.concurrency)
