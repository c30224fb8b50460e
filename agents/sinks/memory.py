"""``MemorySink``: the in-memory twin of ``CassandraSink``, under ``agents.sinks.contract``.

On equal timestamps the write that arrives later wins here; Cassandra keeps the larger value per
cell instead. Equal timestamps with different content do not happen for one URL (a re-fetch is
a later fetch). ``tests/integration/test_sinks.py`` runs one suite over both implementations.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TypeVar

from streamcrawl.agents.sinks.contract import CrawlStats, micros, url_hash
from streamcrawl.schemas.records import CrawlPolicy, Page, UrlStatus

K = TypeVar("K")
V = TypeVar("V")


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
