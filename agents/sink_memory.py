"""The sink contract, and ``MemorySink``: the in-memory twin of ``CassandraSink``.

Both sinks keep, per row, the version with the highest write timestamp, where the timestamp is
the record's own time (``Page.fetched_at``, ``UrlStatus.updated_at``) in microseconds. A replay
rewrites what is there, a newer record wins, an older one is ignored, whatever the order of
arrival (ARCHITECTURE §4 invariant 4). On equal timestamps the write that arrives later wins
here; Cassandra keeps the larger value per cell instead. Equal timestamps with different
content do not happen for one URL (a re-fetch is a later fetch).

``tests/integration/test_sinks.py`` runs one suite over both implementations.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from streamcrawl.schemas.records import CrawlPolicy, Page, TerminalState, UrlStatus

ORIGIN_BUCKETS = 64
"""Buckets per (crawl, origin) in ``pages_by_origin`` and ``url_status``."""
CRAWL_SHARDS = 256
"""Shards per crawl in ``url_state_by_crawl``, which ``counts`` scans."""
K = TypeVar("K")
V = TypeVar("V")

FIRST_WINS_BASE = 1 << 62
"""``created_at`` is written with timestamp BASE - time so that the earliest value wins."""


def url_hash(url: str) -> str:
    """32 hex chars: blake2b with a 16-byte digest of the canonical URL's UTF-8 bytes."""
    return hashlib.blake2b(url.encode("utf-8"), digest_size=16).hexdigest()


def origin_bucket(hashed: str) -> int:
    """The ``bucket`` of a URL (from its ``url_hash``) in the per-origin tables."""
    return int(hashed[:8], 16) % ORIGIN_BUCKETS


def crawl_shard(hashed: str) -> int:
    """The ``shard`` of a URL (from its ``url_hash``) in ``url_state_by_crawl``."""
    return int(hashed[:8], 16) % CRAWL_SHARDS


def micros(seconds: float) -> int:
    """Epoch seconds -> the integer microseconds used as write timestamp."""
    return round(seconds * 1_000_000)


@dataclass
class CrawlStats:
    """What ``status`` shows for one crawl: URLs per terminal state and the fetch time span."""

    states: dict[str, int] = field(default_factory=dict)
    first_fetched_at: float | None = None
    last_fetched_at: float | None = None

    def add(self, state: str, updated_at: float) -> None:
        """Count one URL in ``state``; fetched URLs also widen the fetch time span."""
        self.states[state] = self.states.get(state, 0) + 1
        if state == TerminalState.FETCHED:
            first, last = self.first_fetched_at, self.last_fetched_at
            self.first_fetched_at = updated_at if first is None else min(first, updated_at)
            self.last_fetched_at = updated_at if last is None else max(last, updated_at)

    def all_states(self) -> dict[str, int]:
        """Every terminal state, in declaration order, 0 when none."""
        return {state.value: self.states.get(state.value, 0) for state in TerminalState}

    def pages_per_s(self) -> float | None:
        """Fetched pages per second between the first and last fetch; None below two pages."""
        fetched = self.states.get(TerminalState.FETCHED, 0)
        if fetched < 2 or self.first_fetched_at is None or self.last_fetched_at is None:
            return None
        span = self.last_fetched_at - self.first_fetched_at
        return round(fetched / span, 3) if span > 0 else None


class Sink(Protocol):
    """What the sink agent and the ``status`` command use. Every write is idempotent."""

    async def start(self) -> None: ...
    async def write(self, pages: Sequence[Page], statuses: Sequence[UrlStatus]) -> None: ...
    async def write_spec(self, policy: CrawlPolicy, at: float | None = None) -> None: ...
    async def counts(self, crawl_id: str | None) -> dict[str, dict[str, int]]: ...
    async def stats(self, crawl_id: str | None) -> dict[str, CrawlStats]: ...
    async def get_page(self, crawl_id: str, url: str) -> Page | None: ...
    async def get_status(self, crawl_id: str, origin: str, url: str) -> UrlStatus | None: ...
    async def get_spec(self, crawl_id: str) -> tuple[CrawlPolicy, float] | None: ...
    async def stop(self) -> None: ...


class MemorySink:
    """Dict tables with Cassandra's last-write-wins rule on the record timestamps."""

    def __init__(self) -> None:
        self._pages: dict[tuple[str, str], tuple[int, Page]] = {}
        self._statuses: dict[tuple[str, str], tuple[int, UrlStatus]] = {}
        self._specs: dict[str, tuple[int, CrawlPolicy]] = {}
        self._created: dict[str, float] = {}

    async def start(self) -> None:
        """Nothing to connect to."""

    async def stop(self) -> None:
        """Nothing to release; the tables stay readable."""

    async def write(self, pages: Sequence[Page], statuses: Sequence[UrlStatus]) -> None:
        """Upsert pages (timestamp ``fetched_at``) and URL states (timestamp ``updated_at``)."""
        for page in pages:
            _upsert(self._pages, (page.crawl_id, url_hash(page.url)), micros(page.fetched_at), page)
        for status in statuses:
            key = (status.crawl_id, status.url)
            _upsert(self._statuses, key, micros(status.updated_at), status)

    async def write_spec(self, policy: CrawlPolicy, at: float | None = None) -> None:
        """Upsert the crawl's spec with timestamp ``at`` (default now); first ``at`` is kept."""
        at = time.time() if at is None else at
        _upsert(self._specs, policy.crawl_id, micros(at), policy)
        self._created[policy.crawl_id] = min(at, self._created.get(policy.crawl_id, at))

    async def counts(self, crawl_id: str | None) -> dict[str, dict[str, int]]:
        """crawl id -> {terminal state -> URLs}, every state present; one crawl or all."""
        return {cid: s.all_states() for cid, s in (await self.stats(crawl_id)).items()}

    async def stats(self, crawl_id: str | None) -> dict[str, CrawlStats]:
        """crawl id -> CrawlStats; a given but unknown ``crawl_id`` maps to empty stats."""
        found: dict[str, CrawlStats] = {} if crawl_id is None else {crawl_id: CrawlStats()}
        for (cid, _url), (_ts, status) in self._statuses.items():
            if crawl_id is None or cid == crawl_id:
                found.setdefault(cid, CrawlStats()).add(status.state.value, status.updated_at)
        return found

    async def get_page(self, crawl_id: str, url: str) -> Page | None:
        """The stored page of ``url`` (the requested canonical URL), or None."""
        row = self._pages.get((crawl_id, url_hash(url)))
        return row[1] if row else None

    async def get_status(self, crawl_id: str, origin: str, url: str) -> UrlStatus | None:
        """The stored terminal state of ``url``, or None."""
        row = self._statuses.get((crawl_id, url))
        return row[1] if row and row[1].origin == origin else None

    async def get_spec(self, crawl_id: str) -> tuple[CrawlPolicy, float] | None:
        """The latest spec of the crawl and when the crawl was first recorded, or None."""
        row = self._specs.get(crawl_id)
        return (row[1], self._created[crawl_id]) if row else None


def _upsert(table: dict[K, tuple[int, V]], key: K, ts: int, value: V) -> None:
    """Store ``value`` unless the row holds a write with a larger timestamp."""
    current = table.get(key)
    if current is None or ts >= current[0]:
        table[key] = (ts, value)
