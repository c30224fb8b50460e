"""The sink contract: what every sink keeps, and the helpers that shape its rows.

Two implementations of ``Sink``: ``agents.sinks.cassandra.sink.CassandraSink`` (the Kafka
wiring) and ``agents.sinks.memory.MemorySink`` (its in-memory twin, for tests and in-process
wiring); ``tests/integration/test_sinks.py`` runs one suite over both. The embedded crawl's
``agents.sinks.files.JsonlOutput`` is not a ``Sink``: it appends JSON lines synchronously
inside the embedded runner's state commit and answers no queries.

Both ``Sink`` implementations keep, per row, the version with the highest write timestamp,
where the timestamp is the record's own time (``Page.fetched_at``, ``UrlStatus.updated_at``) in
microseconds. A replay rewrites what is there, a newer record wins, an older one is ignored,
whatever the order of arrival (docs/architecture.md, invariant "idempotent sink").

A crawl that keeps versions (``CrawlPolicy.keep_versions`` = N > 0) also has, per URL, a
version for each page record that found the page new or changed (``versioned``), the newest N
kept: the same N rows whatever the order or repetition of the records (``schemas/cassandra.cql``
says how Cassandra's deletions stay replay-safe).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from streamcrawl.schemas.records import CrawlPolicy, Page, TerminalState, UrlStatus

ORIGIN_BUCKETS = 64
"""Buckets per (crawl, origin) in the per-origin listing tables."""

FIRST_WINS_BASE = 1 << 62
"""``created_at`` is written with timestamp BASE - time so that the earliest value wins."""


def url_hash(url: str) -> str:
    """32 hex chars: blake2b with a 16-byte digest of the canonical URL's UTF-8 bytes."""
    return hashlib.blake2b(url.encode("utf-8"), digest_size=16).hexdigest()


def origin_bucket(hashed: str) -> int:
    """The ``bucket`` of a URL (from its ``url_hash``) in the per-origin tables."""
    return int(hashed[:8], 16) % ORIGIN_BUCKETS


def micros(seconds: float) -> int:
    """Epoch seconds -> the integer microseconds used as write timestamp."""
    return round(seconds * 1_000_000)


class Version(NamedTuple):
    """One kept version of a page (``Sink.versions``): a fetch that found it new or changed."""

    fetched_at: float
    body_sha256: str
    status: int
    change: str


def version_of(page: Page) -> Version:
    """The version a new or changed page record adds (one ``versioned`` selected)."""
    return Version(page.fetched_at, page.body_sha256, page.status, page.change or "")


def versioned(pages: Sequence[Page], keep_versions: Mapping[str, int]) -> list[tuple[Page, int]]:
    """The pages that add a version, each with its crawl's N: new or changed pages of crawls
    whose ``keep_versions`` (crawl id -> N, absent: 0) is above 0."""
    out = []
    for page in pages:
        n = keep_versions.get(page.crawl_id, 0)
        if n > 0 and page.change in ("new", "changed"):
            out.append((page, n))
    return out


@dataclass
class CrawlStats:
    """What ``status`` shows for one crawl: URLs per terminal state and the fetch time span."""

    states: dict[str, int] = field(default_factory=dict)
    first_fetched_at: float | None = None
    last_fetched_at: float | None = None

    def add(self, state: str, updated_at: float, n: int = 1) -> None:
        """Count ``n`` URLs in ``state``; fetched URLs also widen the fetch time span."""
        self.states[state] = self.states.get(state, 0) + n
        if state == TerminalState.FETCHED:
            self.widen(updated_at, updated_at)

    def widen(self, first: float | None, last: float | None) -> None:
        """Widen the fetch time span to include ``[first, last]`` (``None``: unknown)."""
        if first is not None:
            old = self.first_fetched_at
            self.first_fetched_at = first if old is None else min(old, first)
        if last is not None:
            old = self.last_fetched_at
            self.last_fetched_at = last if old is None else max(old, last)

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
    """What the sink consumer and the ``status`` command use. Every write is idempotent.

    ``write`` returns once every row is stored, or raises ``SinkBackpressure`` (the caller keeps
    its input and retries it whole: nothing is dropped). ``keep_versions`` maps a crawl id to
    its ``CrawlPolicy.keep_versions`` (absent: 0, no versions); ``versions`` lists a URL's kept
    versions, newest first (empty: none kept).
    """

    async def start(self) -> None: ...
    async def write(
        self,
        pages: Sequence[Page],
        statuses: Sequence[UrlStatus],
        keep_versions: Mapping[str, int] | None = None,
    ) -> None: ...
    async def write_spec(self, policy: CrawlPolicy, at: float | None = None) -> None: ...
    async def counts(self, crawl_id: str | None) -> dict[str, dict[str, int]]: ...
    async def stats(self, crawl_id: str | None) -> dict[str, CrawlStats]: ...
    async def get_page(self, crawl_id: str, url: str) -> Page | None: ...
    async def get_status(self, crawl_id: str, origin: str, url: str) -> UrlStatus | None: ...
    async def get_spec(self, crawl_id: str) -> tuple[CrawlPolicy, float] | None: ...
    async def versions(self, crawl_id: str, url: str) -> list[Version]: ...
    async def stop(self) -> None: ...
