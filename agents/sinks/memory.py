"""``MemorySink``: the in-memory twin of ``CassandraSink``, under ``agents.sinks.contract``.

Like Cassandra, it keeps the newest write per cell where the two differ: a revisit's check
(``change``, and a gone page's ``status``) is a register of its own beside the stored copy, so
a check and a copy give the same page whatever their order. A range deletion of
``page_versions`` is a floor per URL: versions fetched before it are gone, also those written
again later (Cassandra: the tombstone's timestamp is the floor's fetch time).

On equal timestamps the write that arrives later wins here; Cassandra keeps the larger value per
cell instead. Equal timestamps with different content do not happen for one URL (a re-fetch is
a later fetch). ``tests/integration/test_sinks.py`` runs one suite over both implementations.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TypeVar

import msgspec

from streamcrawl.agents.sinks.contract import (
    CrawlStats,
    Version,
    micros,
    url_hash,
    version_of,
    versioned,
)
from streamcrawl.schemas.records import CrawlPolicy, Page, UrlStatus

K = TypeVar("K")
V = TypeVar("V")
Key = tuple[str, str]  # (crawl id, url hash)


class MemorySink:
    """Dict tables with Cassandra's last-write-wins rule on the record timestamps."""

    def __init__(self) -> None:
        self._pages: dict[Key, tuple[int, Page]] = {}
        self._checks: dict[Key, tuple[int, str]] = {}  # the latest check's change
        self._gone: dict[Key, tuple[int, int]] = {}  # the latest gone check's status
        self._versions: dict[Key, dict[float, Version]] = {}
        self._floors: dict[Key, float] = {}  # versions fetched before it were deleted
        self._statuses: dict[tuple[str, str], tuple[int, UrlStatus]] = {}
        self._specs: dict[str, tuple[int, CrawlPolicy]] = {}
        self._created: dict[str, float] = {}

    async def start(self) -> None:
        """Nothing to connect to."""

    async def stop(self) -> None:
        """Nothing to release; the tables stay readable."""

    async def write(
        self,
        pages: Sequence[Page],
        statuses: Sequence[UrlStatus],
        keep_versions: Mapping[str, int] | None = None,
    ) -> None:
        """Upsert pages (timestamp ``fetched_at``), URL states (timestamp ``updated_at``) and
        the versions of crawls that keep them (``keep_versions``: crawl id -> N)."""
        for page in pages:
            key = (page.crawl_id, url_hash(page.url))
            at = micros(page.fetched_at)
            if page.change == "gone":
                _upsert(self._gone, key, at, page.status)
            if page.change in ("unchanged", "gone"):
                _upsert(self._checks, key, at, page.change)  # the stored copy stays
            else:
                _upsert(self._pages, key, at, page)
        for page, n in versioned(pages, keep_versions or {}):
            self._add_version((page.crawl_id, url_hash(page.url)), page, n)
        for status in statuses:
            key = (status.crawl_id, status.url)
            _upsert(self._statuses, key, micros(status.updated_at), status)

    def _add_version(self, key: Key, page: Page, n: int) -> None:
        """Store the version unless deleted already, then keep the newest ``n`` (a floor)."""
        if page.fetched_at < self._floors.get(key, float("-inf")):
            return
        kept = self._versions.setdefault(key, {})
        kept[page.fetched_at] = version_of(page)
        newest = sorted(kept, reverse=True)
        if len(newest) > n:  # every kept version is at or above the floor: it only rises
            self._floors[key] = newest[n - 1]
            for fetched_at in newest[n:]:
                del kept[fetched_at]

    async def versions(self, crawl_id: str, url: str) -> list[Version]:
        """The kept versions of ``url``, newest first; empty when none are kept."""
        kept = self._versions.get((crawl_id, url_hash(url)), {})
        return [kept[at] for at in sorted(kept, reverse=True)]

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
        """The stored page of ``url`` (the requested canonical URL), or None (also when only
        a revisit's check of it was written: no copy to show). A check newer than the copy
        sets its ``change`` (and a gone check its ``status``)."""
        key = (crawl_id, url_hash(url))
        row = self._pages.get(key)
        if row is None:
            return None
        at, page = row
        check, gone = self._checks.get(key), self._gone.get(key)
        if check is not None and check[0] > at:
            page = msgspec.structs.replace(page, change=check[1])
        if gone is not None and gone[0] > at:
            page = msgspec.structs.replace(page, status=gone[1])
        return page

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
