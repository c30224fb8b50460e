"""Sitemaps and feeds in the crawl: which URLs they put in the frontier, and as what.

A sitemap or a feed is a queued URL like a page (``QueueEntry.kind``): it passes scope, robots
and the seen-set, waits its origin's politeness, and ends in its own terminal state
(``sitemap`` / ``feed``) instead of ``fetched``; it yields no page record. Where they come from:

- the ``Sitemap:`` lines of every robots.txt the crawl fetches (``robots_sitemaps``), and the
  crawl's ``sitemap_seeds`` (``--sitemap URL``), at depth 0, unless ``policy.sitemaps`` is off;
- a sitemap index lists more sitemaps, one level deeper; an index deeper than
  ``MAX_NESTING`` is not expanded;
- ``<link rel=alternate type=application/rss+xml|atom+xml>`` of a fetched page, one level
  deeper than the page, unless ``policy.feeds`` is off.

Every URL a sitemap or feed lists is one level deeper than it (``max_depth`` counts it as a
link), carries the sitemap's ``lastmod``, and is then admitted like any link.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Final, NamedTuple

import msgspec

from streamcrawl.agents.content.feeds import FEED_TYPES, parse_feed
from streamcrawl.agents.content.sitemap import MAX_BYTES, MAX_NESTING, SITEMAP_TYPES, parse_sitemap
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.robots.rules import RobotsRules, robots_url
from streamcrawl.schemas.records import (
    CrawlPolicy,
    FrontierBatch,
    QueueEntry,
    TerminalState,
    UrlKind,
    UrlRef,
)

LISTING_STATES: Final = {"sitemap": TerminalState.SITEMAP, "feed": TerminalState.FEED}


class Found(NamedTuple):
    """A URL found in a page, robots.txt, sitemap or feed, before canonicalization."""

    href: str
    kind: UrlKind = "page"
    lastmod: str | None = None
    changefreq: str | None = None


@functools.lru_cache(maxsize=64)
def listing_policy(policy: CrawlPolicy) -> CrawlPolicy:
    """``policy`` for fetching a sitemap or feed: XML and gzip types, up to 50 MiB."""
    types = tuple(dict.fromkeys((*SITEMAP_TYPES, *FEED_TYPES)))
    return msgspec.structs.replace(policy, content_types=types, max_body=MAX_BYTES)


def robots_sitemaps(
    rules: CrawlRules, crawl_id: str, origin: str, status: int | None, body: str | None
) -> list[FrontierBatch]:
    """The sitemaps a robots.txt lists, as depth-0 frontier batches (none when off)."""
    if not rules.policy.sitemaps or body is None:
        return []
    found = [Found(url, "sitemap") for url in RobotsRules.from_response(status, body).sitemaps()]
    return group(rules, crawl_id, found, robots_url(origin), robots_url(origin), 0)


def seed_sitemaps(rules: CrawlRules) -> list[FrontierBatch]:
    """The crawl's ``--sitemap`` seeds, as depth-0 frontier batches (none when off)."""
    policy = rules.policy
    if not policy.sitemaps or not policy.sitemap_seeds:
        return []
    found = [Found(url, "sitemap") for url in policy.sitemap_seeds]
    return group(rules, policy.crawl_id, found, None, None, 0)


def plan_seeds(rules: CrawlRules) -> list[FrontierBatch]:
    """A crawl's start: its seeds (canonical, depth 0) and its ``--sitemap`` seeds, one batch
    per origin, in the order they are given. Both wirings admit exactly these: the embedded
    crawl into its store, ``streamcrawl seed`` onto the frontier topic."""
    policy = rules.policy
    pages = [
        FrontierBatch(crawl_id=policy.crawl_id, origin=canon.origin, urls=(UrlRef(canon.url, 0),))
        for canon in map(rules.canonicalizer.canonicalize, policy.seeds)
    ]
    return merge([*pages, *seed_sitemaps(rules)])


def listed(rules: CrawlRules, entry: QueueEntry, body: bytes, url: str) -> list[FrontierBatch]:
    """What the fetched sitemap or feed ``entry`` (its body, from ``url``) adds to the crawl."""
    if entry.kind == "feed":
        found = [Found(link) for link in parse_feed(body)]
    else:
        sitemap = parse_sitemap(body)
        found = [Found(u.loc, "page", u.lastmod, u.changefreq) for u in sitemap.urls]
        if entry.depth < MAX_NESTING:
            found += [Found(s.loc, "sitemap", s.lastmod) for s in sitemap.sitemaps]
    return group(rules, entry.crawl_id, found, url, entry.url, entry.depth + 1)


def group(
    rules: CrawlRules,
    crawl_id: str,
    found: Iterable[Found],
    base: str | None,
    parent: str | None,
    depth: int,
) -> list[FrontierBatch]:
    """Canonicalize ``found`` against ``base`` and group it into one batch per origin, first
    occurrence kept; nothing deeper than ``max_depth`` (it would never be admitted)."""
    max_depth = rules.policy.max_depth
    if max_depth is not None and depth > max_depth:
        return []
    by_origin: dict[str, dict[str, UrlRef]] = {}
    for item in found:
        canon = rules.canonicalizer.try_canonicalize(item.href, base)
        if canon is None or canon.url == parent:
            continue
        refs = by_origin.setdefault(canon.origin, {})
        if canon.url not in refs:
            refs[canon.url] = UrlRef(
                canon.url, depth, parent, item.kind, item.lastmod, item.changefreq
            )
    return [
        FrontierBatch(crawl_id=crawl_id, origin=origin, urls=tuple(refs.values()))
        for origin, refs in by_origin.items()
    ]


def merge(batches: Iterable[FrontierBatch]) -> list[FrontierBatch]:
    """One batch per (crawl, origin), in the order each first came, with every URL of that
    crawl and origin in the order they came (duplicates kept: the frontier drops them).

    The wire rule is one message per page and target origin; the Kafka wiring also merges the
    batches of many pages (``agents.stream.links``), which may be of different crawls."""
    urls: dict[tuple[str, str], list[UrlRef]] = {}
    for batch in batches:
        urls.setdefault((batch.crawl_id, batch.origin), []).extend(batch.urls)
    return [
        FrontierBatch(crawl_id=crawl_id, origin=origin, urls=tuple(refs))
        for (crawl_id, origin), refs in urls.items()
    ]
