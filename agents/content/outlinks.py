"""A page's outlinks as its record carries them, for consumers (link graphs, ranking, checks).

``page_links`` turns the parser's raw links (``agents/content/parse.py``, document order, then the
``Link:`` header's) into the ``Outlink`` entries of ``Page.links``: pure, no I/O. The stages
canonicalize a page's hrefs once (``canonical_links``) and take both this list
(``record_links``) and the URLs the crawl follows (``followed``) from that one pass.

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
  the same rules the frontier applies (``check_all``: one call for the page's listed links); out
  of scope says which rule (``host``, ``depth``, ``exclude``, ``include``, ``trap:*``). Whether
  the URL is then fetched (robots.txt, the page budget, nofollow, already seen) is for the URL's
  own state to say.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from streamcrawl.agents.content.parse import Link
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.urls.canonical import Canonical
from streamcrawl.schemas.records import Outlink


class PageLinks(NamedTuple):
    """``Page.links``, ``Page.links_total`` and ``Page.links_truncated`` of one page."""

    links: tuple[Outlink, ...]
    total: int
    truncated: bool


# One link of a page and its canonical URL (a plain tuple: a page makes one per href).
CanonicalLink = tuple[Link, Canonical]


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


def canonical_links(
    links: Iterable[Link], header: Iterable[str], rules: CrawlRules, base: str
) -> list[CanonicalLink]:
    """Each link of the page with its canonical URL, in document order: ``links`` from its HTML,
    then ``header``, the absolute URLs its ``Link:`` header has the crawl follow (as ``header``
    links). Hrefs that do not canonicalize are left out. One canonicalization per href, shared
    by the page record's list (``record_links``) and the links the crawl follows (``followed``)."""
    raw = [*links, *(Link(url, False, tag="header") for url in header)]
    canons = rules.canonicalizer.each([link.href for link in raw], base)
    return [(link, canon) for link, canon in zip(raw, canons, strict=True) if canon is not None]


def followed(found: Iterable[CanonicalLink], honor_nofollow: bool) -> list[Canonical]:
    """The distinct canonical URLs of ``found`` the crawl follows, first occurrence's order:
    all of them, less nofollow links when ``honor_nofollow``."""
    seen: set[str] = set()
    out = []
    for link, canon in found:
        if canon.url not in seen and not (link.nofollow and honor_nofollow):
            seen.add(canon.url)
            out.append(canon)
    return out


def page_links(
    links: Iterable[Link], header: Iterable[str], rules: CrawlRules, base: str, depth: int
) -> PageLinks:
    """The page's outlinks (see the module docstring): ``links`` from its HTML, ``header`` the
    absolute URLs its ``Link:`` header has the crawl follow; ``depth`` is the page's own."""
    return record_links(canonical_links(links, header, rules, base), rules, depth)


def record_links(found: Iterable[CanonicalLink], rules: CrawlRules, depth: int) -> PageLinks:
    """``page_links`` of the links ``canonical_links`` found on a page at ``depth``."""
    limit = rules.policy.max_page_links
    first: dict[str, Link] = {}  # listed URL -> its first occurrence
    merged: dict[str, _Entry] = {}  # the listed URLs that occur again (few)
    others: set[str] = set()
    for link, canon in found:
        url = canon.url
        if url in first:
            entry = merged.get(url)
            if entry is None:
                entry = merged[url] = _Entry(first[url])
            entry.merge(link)
        elif len(first) < limit:
            first[url] = link
        else:
            others.add(url)
    reasons = rules.scope.check_all(first, depth + 1)
    out = []
    for (url, link), rule in zip(first.items(), reasons, strict=True):
        seen = merged.get(url, link)
        out.append(Outlink(url, seen.text, seen.rel, seen.tag, rule is None, rule))
    return PageLinks(tuple(out), len(first) + len(others), bool(others))
