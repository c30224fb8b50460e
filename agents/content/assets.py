"""What a page needs to be seen: the URLs of its stylesheets, scripts, images, fonts and media.

Pure and total: ``page_assets`` reads a page's lexbor tree (``agents/content/parse.py`` parsed
it once for everything) and ``stylesheet_assets`` a stylesheet's text; neither raises. What
each source gives (``AssetType``):

- ``<link href>`` by its ``rel``: ``stylesheet`` is ``css``; ``icon`` (and ``apple-touch-icon``,
  ``mask-icon``) is ``images``; ``modulepreload`` is ``js``; ``preload`` is typed by its ``as``
  (``style``, ``script``, ``image``, ``font``, ``audio``/``video``/``track``), others skipped;
- ``<script src>``: ``js``;
- ``<img src|srcset>``, ``<picture><source srcset>``, ``<input type=image src>``, ``<video
  poster>``: ``images``;
- ``<video src>``, ``<audio src>``, ``<source src>`` (of a video or audio), ``<track src>``:
  ``media``;
- the CSS of ``<style>`` elements and ``style`` attributes (``agents/content/css.py``): an
  ``@import`` is ``css``, a ``url()`` in ``@font-face`` is ``fonts``, any other ``url()`` is
  ``images``.

A stylesheet fetched as an asset gives the same CSS kinds. Only the crawl's types are kept
(``--assets``). Hrefs are kept raw, in document order, each once (its first type): resolving
them against the page's base and canonicalizing is the canonicalizer's. Empty hrefs,
fragments and ``data:`` URLs are not assets.

Bounded against hostile pages: at most ``MAX_PAGE_ASSETS`` per page (or stylesheet), at most
``MAX_SRCSET_CANDIDATES`` URLs of one ``srcset`` (a browser picks one of them; this keeps
every width a small site offers), read from its first ``MAX_SRCSET_CHARS`` characters.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Final, NamedTuple

from selectolax.lexbor import LexborHTMLParser, LexborNode

from streamcrawl.agents.content.css import CssRefKind, css_refs
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import (
    MAX_PAGE_ASSETS,
    AssetType,
    FrontierBatch,
    UrlKind,
    UrlRef,
)

log = logging.getLogger(__name__)

ASSET_TYPES: Final[tuple[AssetType, ...]] = ("css", "js", "images", "fonts", "media")
MAX_SRCSET_CANDIDATES: Final = 32
MAX_SRCSET_CHARS: Final = 16 * 1024

_SELECTOR: Final = (
    "link[href], script[src], img, source, video, audio, track[src], input[src], style, [style]"
)
_ICON_RELS: Final = frozenset({"icon", "apple-touch-icon", "apple-touch-icon-precomposed"})
_PRELOAD_AS: Final[dict[str, AssetType]] = {
    "style": "css",
    "script": "js",
    "image": "images",
    "font": "fonts",
    "audio": "media",
    "video": "media",
    "track": "media",
}
_CSS_TYPES: Final[dict[CssRefKind, AssetType]] = {
    "import": "css",
    "font": "fonts",
    "image": "images",
}
_SRCSET_GAP: Final = re.compile(r"[\s,]*")
_SRCSET_URL: Final = re.compile(r"\S+")
# A candidate's descriptors run to the next comma outside parentheses.
_SRCSET_DESCRIPTORS: Final = re.compile(r"[^,(]*(?:\([^)]*(?:\)|$)[^,(]*)*")


class Asset(NamedTuple):
    """One asset of a page or stylesheet: the raw href and what it is."""

    href: str
    type: AssetType


def srcset_urls(value: str, limit: int = MAX_SRCSET_CANDIDATES) -> list[str]:
    """The URLs of a ``srcset`` attribute, in order, at most ``limit`` (the HTML Standard's
    parsing: a candidate is a URL, then descriptors up to a comma outside parentheses; a URL
    that ends in commas ends there)."""
    return [value[start:end] for start, end in srcset_spans(value, limit)]


def srcset_spans(value: str, limit: int = MAX_SRCSET_CANDIDATES) -> list[tuple[int, int]]:
    """``[start, end)`` of each URL ``srcset_urls`` reads in ``value``."""
    value = value[:MAX_SRCSET_CHARS]
    spans: list[tuple[int, int]] = []
    at, end = 0, len(value)
    while len(spans) < limit:
        at = _SRCSET_GAP.match(value, at).end()  # type: ignore[union-attr]  # always matches
        found = _SRCSET_URL.match(value, at)
        if found is None:
            break
        start, stop = found.start(), found.end()
        at = stop
        if value[start:stop].endswith(","):
            stop = start + len(value[start:stop].rstrip(","))
        else:
            at = _SRCSET_DESCRIPTORS.match(value, at).end()  # type: ignore[union-attr]
        if stop > start:
            spans.append((start, stop))
        if at >= end:
            break
    return spans


def _rels(node: LexborNode) -> set[str]:
    return set((node.attributes.get("rel") or "").lower().split())


def _link(node: LexborNode) -> Iterable[Asset]:
    href = node.attributes.get("href") or ""
    rels = _rels(node)
    if "stylesheet" in rels:
        yield Asset(href, "css")
    elif rels & _ICON_RELS or "mask-icon" in rels:
        yield Asset(href, "images")
    elif "modulepreload" in rels:
        yield Asset(href, "js")
    elif "preload" in rels:
        kind = _PRELOAD_AS.get((node.attributes.get("as") or "").strip().lower())
        if kind is not None:
            yield Asset(href, kind)


def _media(node: LexborNode) -> Iterable[Asset]:
    """``video``, ``audio``, ``source``, ``track``: their ``src``, a video's poster, a
    picture source's ``srcset``."""
    attrs = node.attributes
    if node.tag == "video" and attrs.get("poster"):
        yield Asset(attrs.get("poster") or "", "images")
    if attrs.get("src"):
        yield Asset(attrs.get("src") or "", "media")
    if node.tag == "source" and attrs.get("srcset"):
        yield from (Asset(url, "images") for url in srcset_urls(attrs.get("srcset") or ""))


def _node_assets(node: LexborNode) -> Iterable[Asset]:
    tag, attrs = node.tag, node.attributes
    if tag == "link":
        yield from _link(node)
    elif tag == "script":
        yield Asset(attrs.get("src") or "", "js")
    elif tag == "img":
        yield Asset(attrs.get("src") or "", "images")
        yield from (Asset(url, "images") for url in srcset_urls(attrs.get("srcset") or ""))
    elif tag in ("video", "audio", "source", "track"):
        yield from _media(node)
    elif tag == "input" and (attrs.get("type") or "").strip().lower() == "image":
        yield Asset(attrs.get("src") or "", "images")
    elif tag == "style":
        yield from stylesheet_assets(node.text(deep=True))
    if tag != "style" and attrs.get("style"):
        yield from stylesheet_assets(attrs.get("style") or "")


def _wanted(href: str) -> str | None:
    href = href.strip()
    if not href or href.startswith("#") or href[:5].lower() == "data:":
        return None
    return href


def _keep(assets: Iterable[Asset], types: frozenset[str], limit: int) -> list[Asset]:
    """The wanted assets of ``types``, each href once (first type), at most ``limit``."""
    kept: dict[str, Asset] = {}
    for asset in assets:
        href = _wanted(asset.href)
        if href is None or asset.type not in types or href in kept:
            continue
        kept[href] = Asset(href, asset.type)
        if len(kept) >= limit:
            break
    return list(kept.values())


def page_assets(
    tree: LexborHTMLParser | None, types: frozenset[str], limit: int = MAX_PAGE_ASSETS
) -> list[Asset]:
    """The assets of ``types`` a page's tree (None: lexbor failed on it) needs, in document
    order (see the module docstring); never raises."""
    if tree is None or not types:
        return []
    try:
        nodes = tree.css(_SELECTOR)
        return _keep((a for node in nodes for a in _node_assets(node)), types, limit)
    except Exception:  # hostile markup costs this page's assets, not the crawl
        log.warning("assets of a page could not be read", exc_info=True)
        return []


def stylesheet_assets(
    text: str, types: frozenset[str] | None = None, limit: int = MAX_PAGE_ASSETS
) -> list[Asset]:
    """The assets a stylesheet's ``text`` refers to (``@import``: css, ``@font-face``
    ``url()``: fonts, other ``url()``: images), of ``types`` (None: all), at most ``limit``."""
    assets = (Asset(ref.url, _CSS_TYPES[ref.kind]) for ref in css_refs(text, limit))
    return _keep(assets, frozenset(ASSET_TYPES) if types is None else types, limit)


def asset_batches(
    rules: CrawlRules,
    crawl_id: str,
    assets: Iterable[Asset],
    base: str,
    parent: str,
    depth: int,
) -> tuple[list[FrontierBatch], list[str]]:
    """``assets`` (found in ``parent``, resolved against ``base``) as frontier URLs at
    ``depth``: one batch per origin, a stylesheet of kind ``stylesheet``, any other asset
    ``asset``; and their distinct canonical URLs in order (``Page.assets``). Hrefs that do not
    canonicalize (not http(s), too long) are left out, and so is ``parent`` itself."""
    found = list(assets)
    canons = rules.canonicalizer.each([asset.href for asset in found], base)
    by_origin: dict[str, dict[str, UrlRef]] = {}
    urls: dict[str, None] = {}
    for asset, canon in zip(found, canons, strict=True):
        if canon is None or canon.url == parent or canon.url in urls:
            continue
        urls[canon.url] = None
        kind: UrlKind = "stylesheet" if asset.type == "css" else "asset"
        by_origin.setdefault(canon.origin, {})[canon.url] = UrlRef(canon.url, depth, parent, kind)
    batches = [
        FrontierBatch(crawl_id=crawl_id, origin=origin, urls=tuple(refs.values()))
        for origin, refs in by_origin.items()
    ]
    return batches, list(urls)
