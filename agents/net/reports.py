"""What a page fetch reports, built from its dispatch and its fetch: the ``Outcome`` for the
frontier, the ``Page`` records of a revisit that found nothing new or a page confirmed gone, and
the ``FrontierBatch`` per origin of the links a page hands on. Pure: no I/O.
"""

from __future__ import annotations

import time
from typing import Any

from streamcrawl.agents.frontier.scheduler import Dispatch
from streamcrawl.agents.net.fetch import FetchResult
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.urls.canonical import Canonical
from streamcrawl.schemas.records import Change, FrontierBatch, Outcome, Page, UrlRef


def fetched_outcome(
    d: Dispatch, result: FetchResult, final_url: str, digest: str | None, state: str
) -> Outcome:
    """The outcome of a fetch with a response, its validators and body digest."""
    return page_outcome(
        d,
        state,
        started=result.sent_at,
        status=result.status,
        final_url=final_url,
        etag=result.headers.get("etag"),
        last_modified=result.headers.get("last-modified"),
        digest=digest,
    )


def page_record(d: Dispatch, change: Change, **fields: Any) -> Page:
    """A page record of ``d``'s entry: what ``change`` it reports, against the previous
    fetch's digest and time (a revisit's), and ``fields``."""
    entry = d.entry
    assert entry is not None
    previous = entry.revisit
    return Page(
        crawl_id=entry.crawl_id,
        url=entry.url,
        origin=d.origin,
        depth=entry.depth,
        change=change,
        previous_sha256=previous.digest if previous is not None else None,
        previous_fetched_at=previous.fetched_at if previous is not None else None,
        **fields,
    )


def unchanged_page(d: Dispatch, result: FetchResult, final_url: str) -> Page:
    """The small record of a revisit that found the page as it was: no body, no links;
    ``body_sha256`` is the stored copy's."""
    assert d.entry is not None and d.entry.revisit is not None
    return page_record(
        d,
        "unchanged",
        final_url=final_url,
        status=result.status,
        headers=result.headers,
        content_type=result.content_type,
        charset=None,
        title=None,
        fetched_at=result.started_at,
        elapsed_ms=result.elapsed_ms,
        body_sha256=d.entry.revisit.digest or "",
        body_bytes=len(result.body),
        outlinks=0,
        redirects=result.redirects,
    )


def gone_page(d: Dispatch, outcome: Outcome) -> Page:
    """The record of a page confirmed gone (a second 404/410 in a row)."""
    assert d.entry is not None and outcome.status is not None
    return page_record(
        d,
        "gone",
        final_url=d.entry.url,
        status=outcome.status,
        headers={},
        content_type=None,
        charset=None,
        title=None,
        fetched_at=outcome.started_at,
        elapsed_ms=(outcome.finished_at - outcome.started_at) * 1000.0,
        body_sha256="",
        body_bytes=0,
        outlinks=0,
    )


def link_batches(
    crawl_id: str, rules: CrawlRules, links: list[Canonical], parent: str, depth: int
) -> list[FrontierBatch]:
    """Group a page's distinct canonical links into one batch per target origin, less the
    page itself (``parent``).

    Links deeper than ``max_depth`` are not sent at all: they are never admitted, so they
    need no terminal state, and they would only cost messages.
    """
    max_depth = rules.policy.max_depth
    if not links or (max_depth is not None and depth > max_depth):
        return []
    by_origin: dict[str, list[UrlRef]] = {}
    for canon in links:
        if canon.url != parent:
            by_origin.setdefault(canon.origin, []).append(UrlRef(canon.url, depth, parent))
    return [
        FrontierBatch(crawl_id=crawl_id, origin=origin, urls=tuple(refs))
        for origin, refs in by_origin.items()
    ]


def page_outcome(
    d: Dispatch,
    state: str,
    *,
    started: float,
    status: int | None = None,
    error: str | None = None,
    retry_after: float | None = None,
    backoff: bool = False,
    final_url: str | None = None,
    etag: str | None = None,
    last_modified: str | None = None,
    digest: str | None = None,
) -> Outcome:
    """The outcome of ``d``'s page fetch attempt, ending in ``state``."""
    assert d.entry is not None
    return Outcome(
        crawl_id=d.entry.crawl_id,
        origin=d.origin,
        kind="page",
        seq=d.seq,
        url=d.entry.url,
        state=str(state),
        depth=d.entry.depth,
        attempts=d.entry.attempts + 1,
        status=status,
        error=error,
        retry_after=retry_after,
        backoff=backoff,
        started_at=started,
        finished_at=time.time(),
        final_url=final_url,
        lastmod=d.entry.lastmod,
        etag=etag,
        last_modified=last_modified,
        digest=digest,
        reported=d.entry.revisit.state if d.entry.revisit is not None else None,
        gone=d.entry.revisit.gone if d.entry.revisit is not None else 0,
    )
