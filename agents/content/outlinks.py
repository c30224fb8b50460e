"""A page's outlinks as its record carries them, for consumers (link graphs, ranking, checks).

``page_links`` turns the parser's raw links (``agents/content/parse.py``, document order, then the
``Link:`` header's) into the ``Outlink`` entries of ``Page.links``: pure, no I/O.

- Canonical: each href is resolved against the page's base and canonicalized with the crawl's
  own canonicalizer, so an entry's ``url`` is the key the frontier would use. Hrefs that do not
  canonicalize (``mailto:``, ``javascript:``, a bad host, longer than ``max_url_length``) are
  neither listed nor counted.
- Deduplicated by canonical URL: one entry per URL, at the position of its first occurrence.
  Its ``text`` is the first non-empty anchor text of its occurrences, its ``rel`` the tokens
  every occurrence has (so ``nofollow`` is there exactly when no occurrence is followable, as
  the crawl decides), its ``tag`` the first occurrence's.
- Bounded: the first ``limit`` distinct URLs are listed (``CrawlPolicy.max_page_links``);
  ``total`` counts them all and ``truncated`` says whether some were left out. The scope rules
  run on the listed ones only, so a page of 100,000 links costs one set of its URLs, not
  100,000 scope checks.
- In scope: ``Scope.check`` at the page's depth + 1 (the depth the link would be admitted at),
  the same call the frontier makes; out of scope says which rule (``host``, ``depth``,
  ``exclude``, ``include``, ``trap:*``). Whether the URL is then fetched (robots.txt, the page
  budget, nofollow, already seen) is for the URL's own state to say.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from streamcrawl.agents.content.parse import Link
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import Outlink


class PageLinks(NamedTuple):
    """``Page.links``, ``Page.links_total`` and ``Page.links_truncated`` of one page."""

    links: tuple[Outlink, ...]
    total: int
    truncated: bool


class _Entry:
    """One listed URL while its occurrences are merged."""

    __slots__ = ("rel", "tag", "text")

    def __init__(self, link: Link) -> None:
        self.text = link.text
        self.rel = link.rel
        self.tag = link.tag

    def merge(self, link: Link) -> None:
        if not self.text:
            self.text = link.text
        if self.rel:
            self.rel = tuple(token for token in self.rel if token in link.rel)


def page_links(
    links: Iterable[Link], header: Iterable[str], rules: CrawlRules, base: str, depth: int
) -> PageLinks:
    """The page's outlinks (see the module docstring): ``links`` from its HTML, ``header`` the
    absolute URLs its ``Link:`` header has the crawl follow; ``depth`` is the page's own."""
    limit = rules.policy.max_page_links
    canonical = rules.canonicalizer.each
    listed: dict[str, _Entry] = {}
    others: set[str] = set()
    raw = [*links, *(Link(url, False, tag="header") for url in header)]
    for link, canon in zip(raw, canonical((link.href for link in raw), base), strict=True):
        if canon is None:
            continue
        url = canon.url
        entry = listed.get(url)
        if entry is not None:
            entry.merge(link)
        elif len(listed) < limit:
            listed[url] = _Entry(link)
        else:
            others.add(url)
    scope = rules.scope.check
    out = []
    for url, entry in listed.items():
        rule = scope(url, depth + 1)
        out.append(
            Outlink(
                url=url,
                text=entry.text,
                rel=entry.rel,
                tag=entry.tag,
                in_scope=rule is None,
                scope_rule=rule,
            )
        )
    return PageLinks(tuple(out), len(listed) + len(others), bool(others))
