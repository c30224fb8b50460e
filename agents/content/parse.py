"""Extract what the crawl needs from an HTML page: title, base, links, canonical, meta robots.

Pure and total: ``parse_html`` never raises, whatever the markup (hostile input yields fewer
fields, not an error). One lexbor parse and one CSS query per page; the nodes come back in
document order and are dispatched by tag.

Link choices:

- ``a[href]`` and ``area[href]``; ``nofollow`` when their ``rel`` has the ``nofollow`` token.
- ``iframe[src]`` and ``frame[src]``: the documents a browser loads into the page.
  ``ugc`` and ``sponsored`` are hints for search engines about ranking, not crawl directives, so
  they do not count as nofollow.
- ``link[href]`` only for ``rel`` next, prev/previous, and alternate without a non-HTML ``type``
  (language variants, not RSS feeds); never stylesheet, icon, preload and the like, which are
  not pages. ``rel=canonical`` goes to ``canonical``, not to ``links``. ``rel=alternate`` with
  an RSS or Atom ``type`` goes to ``feeds``, not to ``links`` (fetched as feeds:
  ``agents/content/listings.py``).
- the URL of ``<meta http-equiv=refresh>``.
- empty hrefs and bare ``#fragment`` hrefs (this same page) are dropped; other hrefs are kept
  raw (stripped): resolving them against ``base`` and filtering schemes is the canonicalizer's.
- deduplicated by raw href, first occurrence's position; nofollow only if every occurrence is.
- each link also carries what ``Page.links`` shows consumers (``agents/content/outlinks.py``): its
  anchor text (the text content of an ``a``, the ``alt`` of an ``area``; whitespace collapsed,
  at most ``MAX_ANCHOR_CHARS``; the first non-empty one of its occurrences), its rel tokens
  (lowercase, in order, at most ``MAX_REL_TOKENS`` of at most ``MAX_REL_CHARS`` characters; those
  every occurrence has) and the tag of its first occurrence. Anchor text is read only for an
  href's first occurrence and while it is still empty, so that it costs little per link
  (``bench/micro_outlinks.py``; docs/performance.md, "Outlinks in the page record").
"""

from __future__ import annotations

import logging
import re
from typing import Final, NamedTuple

from selectolax.lexbor import LexborDocumentOptions, LexborHTMLParser, LexborNode

from streamcrawl.agents.errors import InvalidURL
from streamcrawl.agents.robots.rules import robots_directives
from streamcrawl.agents.urls.canonical import resolve
from streamcrawl.schemas.records import MAX_ANCHOR_CHARS, MAX_REL_CHARS, MAX_REL_TOKENS, LinkTag

log = logging.getLogger(__name__)

MAX_TITLE_CHARS: Final = 2048
# Without DOM mutation events lexbor does less work per node; the events only implement
# behaviours such as <selectedcontent> mirroring an <option>, which link extraction never sees.
_OPTIONS: Final = int(LexborDocumentOptions.WO_EVENTS)
_SELECTOR: Final = (
    "title, base[href], a[href], area[href], link[href], meta, iframe[src], frame[src]"
)
_FOLLOWED_LINK_RELS: Final = frozenset({"next", "prev", "previous", "alternate"})
_NOT_PAGE_RELS: Final = frozenset({"stylesheet", "icon", "preload", "prefetch", "modulepreload"})
_HTML_TYPES: Final = frozenset({"", "text/html", "application/xhtml+xml"})
FEED_TYPES: Final = frozenset({"application/rss+xml", "application/atom+xml"})
# HTML Standard "shared declarative refresh steps": "5; url='x'", "0;URL=x", "3, x", "x" alone.
_REFRESH: Final = re.compile(
    r"""\s*[0-9.]*\s*[;,]?\s*(?:url\s*=\s*)?(?P<q>["']?)(?P<url>.*)""", re.IGNORECASE | re.DOTALL
)
_SPACES: Final = re.compile(r"\s+")

# lexbor's tree builder scans the stack of open elements for each block start tag (the "p in
# button scope" check), so deep nesting costs depth x tags: 200k nested <div> take hours of CPU.
# Browsers cap the tree depth (Blink: 512); we parse only the part of the page before the
# nesting passes MAX_DEPTH. Pages with fewer than _DEPTH_CHECK_TAGS "<" cannot be deep enough
# to matter (worst case a few tens of ms), so the common page pays one str.count.
MAX_DEPTH: Final = 512
_DEPTH_CHECK_TAGS: Final = 5000
# Raw-text elements are skipped whole ("i<n" in a script is not a tag); a closing "/" pops.
_TAG: Final = re.compile(
    r"<(?:(script|style|textarea|xmp|title)\b.*?</\1\s*>|(/?)([A-Za-z][A-Za-z0-9-]{0,40}))",
    re.IGNORECASE | re.DOTALL,
)
# Elements that never deepen the tree when left open: void elements, and those that a new
# sibling closes (p, li, td...) or that cannot nest (a, form, button...).
_FLAT_NAMES: Final = (
    "area base br col embed hr img input link meta param source track wbr keygen html head body"
    " a button form nobr select option optgroup p li dd dt rb rp rt rtc tr td th thead tbody"
    " tfoot caption colgroup h1 h2 h3 h4 h5 h6 script style textarea xmp title"
)
_FLAT: Final = frozenset(_FLAT_NAMES.split())


# Text read for an anchor before its whitespace is collapsed: an <a> may wrap a whole page.
_ANCHOR_READ_CHARS: Final = 16 * MAX_ANCHOR_CHARS


class Link(NamedTuple):
    """One outgoing link: the raw, stripped attribute value, whether it is nofollow, and (for
    ``Page.links``) its anchor text, rel tokens and the tag it came from."""

    href: str
    nofollow: bool
    text: str = ""
    rel: tuple[str, ...] = ()
    tag: LinkTag = "a"


class ParsedPage(NamedTuple):
    """What ``parse_html`` extracts from one page."""

    title: str | None  # whitespace collapsed, at most MAX_TITLE_CHARS; None if absent/empty
    base: str  # absolute: a valid http(s) <base href> resolved against the URL, else the URL
    links: list[Link]
    canonical: str | None  # raw href of the first <link rel=canonical>
    meta_robots: frozenset[str]  # from <meta name=robots> and <meta name=PRODUCT_TOKEN>
    meta_refresh: str | None  # raw URL of the first <meta http-equiv=refresh> that has one
    feeds: tuple[str, ...] = ()  # raw hrefs of <link rel=alternate type=RSS/Atom>, first-seen order


def _rel(attrs: dict[str, str | None]) -> set[str]:
    return set((attrs.get("rel") or "").lower().split())


def _rel_tokens(rel: str) -> tuple[str, ...]:
    """The rel tokens a link record keeps: lowercase, first-seen order, bounded."""
    tokens = dict.fromkeys(t for t in rel.lower().split() if len(t) <= MAX_REL_CHARS)
    return tuple(tokens)[:MAX_REL_TOKENS]


def _anchor_text(node: LexborNode, tag: LinkTag) -> str:
    text = (node.attributes.get("alt") or "") if tag == "area" else node.text(deep=True)
    return " ".join(text[:_ANCHOR_READ_CHARS].split())[:MAX_ANCHOR_CHARS].rstrip()


def _refresh_url(content: str) -> str | None:
    match = _REFRESH.match(content)
    if match is None:
        return None
    url = match.group("url").strip()
    quote = match.group("q")
    if quote and quote in url:
        url = url[: url.index(quote)]
    return url.strip() or None


def _resolve_base(url: str, href: str) -> str:
    try:
        base = resolve(href, url)  # as browsers resolve it (WHATWG)
    except InvalidURL:
        return url
    return base if base.startswith(("http://", "https://")) else url


class _Collector:
    """Accumulates the fields while the nodes are visited once, in document order."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token
        self.title: str | None = None
        self.base: str | None = None
        self.canonical: str | None = None
        self.refresh: str | None = None
        self.robots: set[str] = set()
        # href -> its Link so far (occurrences merged); dicts keep insertion order
        self.links: dict[str, Link] = {}
        self.feeds: dict[str, None] = {}

    def add_link(
        self,
        href: str | None,
        tag: LinkTag,
        rel: str | None = None,
        node: LexborNode | None = None,
    ) -> None:
        """Record one occurrence of a link; ``node`` (an ``a``/``area``) gives its text."""
        if not href:
            return
        href = href.strip()
        if not href or href.startswith("#"):
            return
        nofollow = rel is not None and "nofollow" in rel.lower().split()
        tokens = _rel_tokens(rel) if rel else ()
        seen = self.links.get(href)
        if seen is None:
            text = _anchor_text(node, tag) if node is not None else ""
            self.links[href] = Link(href, nofollow, text, tokens, tag)
            return
        merged = seen._replace(
            nofollow=seen.nofollow and nofollow,
            text=seen.text or (_anchor_text(node, tag) if node is not None else ""),
            rel=tuple(t for t in seen.rel if t in tokens),
        )
        if merged != seen:
            self.links[href] = merged

    def visit(self, node: LexborNode) -> None:
        tag = node.tag
        attrs = node.attributes
        if tag == "a" or tag == "area":  # the hot path: most nodes are anchors
            self.add_link(attrs.get("href"), "a" if tag == "a" else "area", attrs.get("rel"), node)
        elif tag == "link":
            self._link(attrs)
        elif tag == "meta":
            self._meta(attrs)
        elif tag == "iframe" or tag == "frame":
            self.add_link(attrs.get("src"), "iframe" if tag == "iframe" else "frame")
        elif tag == "title":
            if self.title is None:
                text = _SPACES.sub(" ", node.text(deep=True)).strip()[:MAX_TITLE_CHARS]
                self.title = text or None
        elif tag == "base" and self.base is None:
            self.base = _resolve_base(self.url, (attrs.get("href") or "").strip())

    def _link(self, attrs: dict[str, str | None]) -> None:
        rel = _rel(attrs)
        if "canonical" in rel and self.canonical is None:
            self.canonical = (attrs.get("href") or "").strip() or None
        if rel & _FOLLOWED_LINK_RELS and not rel & _NOT_PAGE_RELS:
            media = (attrs.get("type") or "").split(";")[0].strip().lower()
            if "alternate" not in rel or media in _HTML_TYPES:
                self.add_link(attrs.get("href"), "link", attrs.get("rel"))
            elif media in FEED_TYPES and "alternate" in rel and "nofollow" not in rel:
                href = (attrs.get("href") or "").strip()
                if href:
                    self.feeds[href] = None

    def _meta(self, attrs: dict[str, str | None]) -> None:
        content = attrs.get("content") or ""
        name = (attrs.get("name") or "").strip().lower()
        if name == "robots" or (name and name == self.token):
            self.robots |= robots_directives(content)
        elif (attrs.get("http-equiv") or "").strip().lower() == "refresh" and self.refresh is None:
            self.refresh = _refresh_url(content)
            self.add_link(self.refresh, "refresh")

    def page(self) -> ParsedPage:
        return ParsedPage(
            title=self.title,
            base=self.base or self.url,
            links=list(self.links.values()),
            canonical=self.canonical,
            meta_robots=frozenset(self.robots),
            meta_refresh=self.refresh,
            feeds=tuple(self.feeds),
        )


class HtmlTree(NamedTuple):
    """One page parsed once, for every reader of its tree (``parse_html``, the crawl's
    extractors: ``agents/content/extract.py``)."""

    tree: LexborHTMLParser | None  # None: lexbor failed on this input
    tags: int  # the "<" of the part parsed: at least its elements, less a few implied ones


def parse_tree(html: str, url: str = "") -> HtmlTree:
    """Parse ``html`` (fetched from ``url``, for the log) with lexbor; never raises. A page
    nested deeper than ``MAX_DEPTH`` is parsed only up to that point (hostile markup; lexbor's
    cost grows with depth times tags)."""
    try:
        html = _cut_at_max_depth(html)
        tags = html.count("<")
        try:
            return HtmlTree(LexborHTMLParser(html, options=_OPTIONS), tags)
        except UnicodeEncodeError:  # lone surrogates cannot be encoded to UTF-8 for lexbor
            data = html.encode("utf-8", errors="replace")
            return HtmlTree(LexborHTMLParser(data, options=_OPTIONS), tags)
    except Exception:  # a parser failure on hostile input costs this page's fields, not the crawl
        log.warning("HTML of %s could not be parsed", url, exc_info=True)
        return HtmlTree(None, 0)


def _cut_at_max_depth(html: str) -> str:
    """``html`` up to where its open-element nesting would pass ``MAX_DEPTH`` (approximate)."""
    if html.count("<") < _DEPTH_CHECK_TAGS:
        return html
    depth = 0
    for match in _TAG.finditer(html):
        name = match.group(3)
        if name is None or name.lower() in _FLAT:
            continue
        if match.group(2):
            depth -= depth > 0
            continue
        depth += 1
        if depth > MAX_DEPTH:
            log.info("HTML nested deeper than %d; the rest of the page is ignored", MAX_DEPTH)
            return html[: match.start()]
    return html


def parse_html(
    html: str, url: str, *, product_token: str = "streamcrawl", parsed: HtmlTree | None = None
) -> ParsedPage:
    """Parse ``html`` fetched from ``url``; never raises (see the module docstring).

    ``product_token`` is our robots product token: ``<meta name="streamcrawl">`` applies to us
    like ``<meta name="robots">``. ``parsed``: the page's tree, when the caller parsed it
    already (``parse_tree``) to read it for more than this, so that it is parsed once.
    """
    collector = _Collector(url, product_token.lower())
    tree = (parsed if parsed is not None else parse_tree(html, url)).tree
    if tree is None:
        return collector.page()
    try:
        for node in tree.css(_SELECTOR):
            collector.visit(node)
    except Exception:  # a parser failure on hostile input costs this page's fields, not the crawl
        log.warning("HTML of %s could not be parsed", url, exc_info=True)
    return collector.page()
