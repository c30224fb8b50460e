"""Admission: the steps ``Frontier.admit`` takes for each URL of a batch of ONE origin.

``Frontier.admit`` (``agents.frontier.frontier``) states the contract. ``Admitting`` holds one
call's inputs and what it has done so far (the origin's record once read, the seen keys it
wrote, how many URLs it queued), and takes each URL through its steps: canonicalize it, and
then, if it was seen before, count it a duplicate, repeat the terminal status of a replayed
event, move a revisit a sitemap lists as modified to the queue, or queue again what a crash
lost; if it is new, end it at admission (scope, budget, robots.txt) or queue it.

A page asset (``agents/policy/assets.py``) has its own scope (``Scope.check_asset``), depth
bound and budget: the crawl's asset budget less the assets this store queued (``assets_key``;
in the Kafka wiring each frontier partition's store counts its own), and it takes none of the
page budget.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import msgspec

from streamcrawl.agents.frontier import queue, revisits
from streamcrawl.agents.frontier.records import (
    admitted_count,
    admitted_key,
    assets_count,
    assets_key,
    load_origin,
    seen_key,
    store_origin,
)
from streamcrawl.agents.frontier.statuses import (
    ended_at_admission,
    ended_mark,
    ended_status,
    queued_by,
    queued_mark,
)
from streamcrawl.agents.frontier.store import Changes
from streamcrawl.agents.plugins.api import Source
from streamcrawl.agents.policy.assets import MAX_ASSET_DEPTH, asset_budget, is_asset
from streamcrawl.agents.policy.revisit import lastmod_forces
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import (
    FrontierBatch,
    OriginState,
    QueueEntry,
    Revisit,
    TerminalState,
    UrlRef,
    UrlStatus,
)


@dataclass
class Admission:
    """What ``admit`` did with a batch."""

    queued: list[tuple[int, QueueEntry]] = field(default_factory=list)
    statuses: list[UrlStatus] = field(default_factory=list)
    # URLs whose canonical origin differs from the batch key: re-send them keyed correctly.
    misrouted: dict[str, list[UrlRef]] = field(default_factory=dict)
    duplicates: int = 0
    invalid: int = 0
    assets: int = 0  # page assets among ``queued`` (not in the page budget)
    moves: list[revisits.LaneMove] = field(default_factory=list)  # revisits that left lanes
    forced: int = 0  # revisits a sitemap's newer lastmod moved to the queue (not in queued)
    state: OriginState | None = None  # the origin's state after the batch; None: not read


@dataclass
class Admitting:
    """One ``Frontier.admit`` call: its inputs (see there) and what it has done so far."""

    ch: Changes
    batch: FrontierBatch
    rules: CrawlRules
    budget: int | None
    source: bytes
    now: float
    result: Admission = field(default_factory=Admission)
    # Loaded only once a URL needs it: a batch of links seen before (most of them, once a
    # crawl is under way) neither reads nor decodes its origin's record.
    st: OriginState | None = None
    queued: int = 0
    assets: int = 0  # page assets among ``queued``
    assets_left: int | None = -1  # the asset budget left before this call; -1: not read yet
    marked: set[bytes] = field(default_factory=set)  # seen keys written by this call

    def origin(self) -> OriginState:
        """The origin's state, read from ``ch`` when first needed."""
        if self.st is None:
            self.st = load_origin(self.ch, self.batch.origin)
        return self.st

    def canonical(self, ref: UrlRef) -> str | None:
        """``ref``'s canonical URL; None: it is invalid or of another origin (``misrouted``)."""
        canon = self.rules.canonicalizer.try_canonicalize(ref.url)
        if canon is None:
            self.result.invalid += 1
            return None
        if canon.origin != self.batch.origin:
            self.result.misrouted.setdefault(canon.origin, []).append(
                msgspec.structs.replace(ref, url=canon.url)
            )
            return None
        return canon.url

    def add(self, ref: UrlRef, url: str) -> None:
        """Admit one canonical URL of the batch's origin."""
        key = seen_key(self.batch.crawl_id, url)
        seen = self.ch.get(key)
        if seen is None:
            self.marked.add(key)
            self._add_new(ref, url, key)
            return
        if not self.source and ref.lastmod is None:
            self.result.duplicates += 1  # most links of a page: nothing replays, nothing due
            return
        again = self._seen_again(ref, url, key, seen)
        if again is not None:
            # This very event queued it at `again`, but a crash lost the origin state that
            # counted it: queue it there again (same entry, same key), not at a new tail,
            # which would fetch it twice.
            self.marked.add(key)
            self._push(again, _entry(self.batch.crawl_id, url, ref))

    def _seen_again(self, ref: UrlRef, url: str, key: bytes, seen: bytes) -> int | None:
        """A URL seen before: the seq to queue it at again (a crash lost the origin state that
        counted it); None: done with it (a duplicate, a replayed end, a forced revisit)."""
        # Without a source (the embedded crawl) no event replays: a plain duplicate.
        replay = self.source and key not in self.marked
        ended = ended_at_admission(seen, self.source) if replay else None
        if ended is not None:  # this very event, replayed: its status may be lost
            self.result.statuses.append(ended_status(self.batch, ref, url, *ended, self.now))
            self.marked.add(key)
            return None
        if self._force(ref, url, key, seen):
            return None
        again = queued_by(seen, self.source) if replay else None
        if again is None or again < self.origin().tail:
            self.result.duplicates += 1
            return None
        return again

    def _force(self, ref: UrlRef, url: str, key: bytes, seen: bytes) -> bool:
        """Whether a sitemap lists the URL as modified since its last fetch, which moved its
        revisit from its lane to the queue (due now)."""
        at = revisits.read_pointer(seen) if ref.lastmod is not None else None
        if at is None or self.rules.revisit is None or key in self.marked:
            return False
        crawl_id = self.batch.crawl_id
        newer = functools.partial(_listed_newer, ref.lastmod, self.now)
        forced = revisits.force(self.ch, self.origin(), crawl_id, url, at, newer)
        if forced is None or forced.revisit is None:
            return False
        self.marked.add(key)
        self.result.forced += 1
        self.result.moves.append((crawl_id, forced.revisit.due, -1))
        return True

    def _add_new(self, ref: UrlRef, url: str, key: bytes) -> None:
        """A URL not seen before: end it at admission (scope, budget, robots.txt) or queue it."""
        source: Source = "link" if ref.parent is not None else "seed"
        refusal = _refused(url, ref, self.rules, self._over_budget(ref), source)
        if refusal is None and _robots_denies(self.origin(), url, self.rules, self.now):
            refusal = TerminalState.ROBOTS_DENIED, None
        if refusal is not None:
            state, reason = refusal
            self.ch.put(key, ended_mark(self.source, state, reason, ref.depth))
            self.result.statuses.append(
                ended_status(self.batch, ref, url, state, reason, ref.depth, self.now)
            )
            return
        st = self.origin()
        self.ch.put(key, queued_mark(self.source, st.tail, ref.depth))
        self._push(st.tail, _entry(self.batch.crawl_id, url, ref))

    def _over_budget(self, ref: UrlRef) -> bool:
        """Whether queueing ``ref`` would pass its budget: the pages' or the assets'."""
        if not is_asset(ref.kind):
            return self.budget is not None and self.queued - self.assets >= self.budget
        if self.assets_left == -1:
            total = asset_budget(self.rules.policy)
            used = assets_count(self.ch, self.batch.crawl_id)
            self.assets_left = None if total is None else max(0, total - used)
        return self.assets_left is not None and self.assets >= self.assets_left

    def _push(self, seq: int, entry: QueueEntry) -> None:
        """Queue ``entry`` at ``seq`` of the origin's queue, and count it."""
        self.result.queued.append((seq, entry))
        queue.push(self.ch, self.origin(), seq, entry)
        self.queued += 1
        if is_asset(entry.kind):
            self.assets += 1

    def finish(self, count_admitted: bool) -> Admission:
        """Store what the batch changed of the origin's state and of the admitted count."""
        if (self.queued or self.result.forced) and self.st is not None:
            store_origin(self.ch, self.st)
        crawl_id = self.batch.crawl_id
        if self.queued > self.assets and count_admitted:
            total = admitted_count(self.ch, crawl_id) + self.queued - self.assets
            self.ch.put(admitted_key(crawl_id), str(total).encode())
        if self.assets:  # in every wiring: the asset budget is this store's
            total = assets_count(self.ch, crawl_id) + self.assets
            self.ch.put(assets_key(crawl_id), str(total).encode())
        self.result.assets = self.assets
        self.result.state = self.st
        return self.result


def _entry(crawl_id: str, url: str, ref: UrlRef) -> QueueEntry:
    """The queue entry of an admitted URL."""
    return QueueEntry(
        crawl_id=crawl_id,
        url=url,
        depth=ref.depth,
        parent=ref.parent,
        kind=ref.kind,
        lastmod=ref.lastmod,
        changefreq=ref.changefreq,
    )


def _listed_newer(lastmod: str | None, now: float, revisit: Revisit) -> bool:
    """Whether a sitemap's ``lastmod`` is newer than the revisit's last fetch (and not ahead)."""
    return lastmod_forces(lastmod, revisit.fetched_at, now)


def _refused(
    url: str, ref: UrlRef, rules: CrawlRules, over_budget: bool, source: Source
) -> tuple[TerminalState, str | None] | None:
    """(state, reason) of a new URL that ends at admission whatever its origin's state: a
    crawl whose plugin this process lacks (failed), out of scope (the built-in scope, or an
    asset's, then the crawl's URL filter plugins), or over the page (or asset) budget; None: it
    may be queued."""
    if rules.plugins.missing is not None:
        return TerminalState.FAILED, rules.plugins.missing
    asset = is_asset(ref.kind)
    if asset:
        reason = "depth" if ref.depth > MAX_ASSET_DEPTH else rules.scope.check_asset(url)
    else:
        reason = rules.scope.check(url, ref.depth)
    if reason is None and rules.plugins.url_filters:
        reason = rules.plugins.check(url, ref.depth, source)
    if reason is not None:
        return TerminalState.OUT_OF_SCOPE, reason
    if over_budget:
        return TerminalState.CANCELLED, "max_assets" if asset else "max_pages"
    return None


def _robots_denies(st: OriginState, url: str, rules: CrawlRules, now: float) -> bool:
    """Whether the origin's cached robots.txt, still fresh at ``now``, denies ``url``: the
    scheduler would dispatch it only to end it ``robots_denied`` (``Scheduler._decide``), so
    admission ends it at once. Only while the crawl runs (stopped, the scheduler cancels the
    URL instead; paused, it decides on resume), and only by a robots.txt that answered. An
    unreachable one's "disallow everything" stays with the scheduler: while robots.txt is
    being retried it holds the origin's URLs back (``robots_unusable``), and only once the
    retries are spent does it end them ``robots_denied``; deciding that here would need the
    same failure count, for a case that ends each of an origin's URLs once."""
    if rules.policy.state != "running" or rules.robots_expired(st, now):
        return False
    robots = rules.robots(st)  # parsed once per origin and expiry (``CrawlRules.robots``)
    return (
        robots is not None
        and not robots.unreachable
        and not robots.allowed(url, rules.policy.user_agent)
    )
