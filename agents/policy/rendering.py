"""Which pages a browser renders: ``--render never|always|auto`` and ``--render-include``.

Pure functions, no I/O (docs/rendering.md, "When to render"):

- ``never``: none. ``always``: every HTML page, or, with ``--render-include``, only the pages
  whose URL matches. ``auto``: the matching pages, and those that look built by scripts.
- A page looks built by scripts (``looks_client_built``) when it has a script that could build
  it (one that runs: not a data block such as JSON-LD, and not a trivial inline one under
  ``MIN_INLINE_SCRIPT`` characters) and either a near-empty body (under ``NEAR_EMPTY``
  characters of text outside scripts and styles) or an app root (``id="root"``, ``"app"``,
  ``"__next"``...) and no link.
- ``auto`` learns per origin and path prefix (the first path segment: ``/app/``; the frontier
  keeps the tallies with the origin's state, ``OriginState.renders``): once a prefix has
  ``LEARNED_AFTER`` renders compared with their HTTP copies, the share of them that found
  links the HTTP copy lacks decides for its pages (rendered when at least half did); a
  ``RECHECK`` share of the pages not rendered, picked by a hash of the URL, is rendered anyway
  so that a guess that went wrong is seen and unlearned.
"""

from __future__ import annotations

import hashlib
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from selectolax.lexbor import LexborHTMLParser

from streamcrawl.schemas.records import AssetType, RenderMode, RenderTally

NEAR_EMPTY: Final = 200  # characters of visible text
MIN_INLINE_SCRIPT: Final = 32  # characters of an inline script that may build a page
# Script types that run (an empty type is JavaScript); any other is a data block or template.
_RUN_TYPES: Final = frozenset(
    {"", "module", "text/javascript", "application/javascript", "text/ecmascript"}
)
LEARNED_AFTER: Final = 3  # compared renders before a prefix's tally decides
MAX_PREFIXES: Final = 256  # tallies kept per crawl and origin; past them, the guess alone
RECHECK: Final = 0.02  # share of the pages not rendered that are rendered to check the guess
APP_ROOTS: Final = frozenset({"root", "app", "__next", "__nuxt", "___gatsby", "svelte", "main-app"})
_APP_ATTRIBUTES: Final = ("data-reactroot", "ng-app", "ng-version", "data-v-app")
# The asset types of ``--assets`` a render loads too (Playwright's resource types): a crawl that
# asks for a page's images, fonts or media gets them in its renders as well; without them a
# render refuses them (docs/rendering.md, "The network path").
_LOADS: Final = {"images": "image", "fonts": "font", "media": "media"}


def render_loads(assets: tuple[AssetType, ...]) -> frozenset[str]:
    """The resource types a render loads besides scripts, styles, data and frames."""
    return frozenset(_LOADS[a] for a in assets if a in _LOADS)


@dataclass(frozen=True)
class Signals:
    """What the HTTP copy of a page shows: scripts, visible text, links, an app root."""

    scripts: int
    text_chars: int
    links: int
    app_root: bool
    hrefs: frozenset[str] = frozenset()  # the links' href values, as written


def signals(html: str) -> Signals:
    """The signals of ``html`` (an HTTP response's text)."""
    tree = LexborHTMLParser(html)
    scripts = sum(1 for node in tree.css("script") if _may_build(node))
    anchors = tree.css("a[href]")
    hrefs = frozenset((a.attributes.get("href") or "").strip() for a in anchors)
    app_root = any(node.attributes.get("id") in APP_ROOTS for node in tree.css("[id]")) or any(
        tree.css_first(f"[{name}]") is not None for name in _APP_ATTRIBUTES
    )
    tree.strip_tags(["script", "style", "noscript", "template"])
    body = tree.body
    text = body.text(separator=" ", strip=True) if body is not None else ""
    return Signals(scripts, len(text), len(anchors), app_root, hrefs)


def _may_build(script: Any) -> bool:
    """Whether a ``<script>`` may build the page: it runs, from a file or with some code."""
    kind = (script.attributes.get("type") or "").strip().lower()
    if kind not in _RUN_TYPES:
        return False
    if script.attributes.get("src"):
        return True
    return len((script.text(deep=True) or "").strip()) >= MIN_INLINE_SCRIPT


def looks_client_built(s: Signals) -> bool:
    """The guess: scripts, and a near-empty body or an app root without links."""
    return s.scripts > 0 and (s.text_chars < NEAR_EMPTY or (s.app_root and s.links == 0))


def path_prefix(url: str) -> str:
    """The first path segment of ``url``, as the key of its tally: ``/app/``, or ``/``."""
    path = urlsplit(url).path
    first, sep, _ = path.lstrip("/").partition("/")
    return f"/{first}/" if first and sep else "/"


def rechecked(url: str, share: float = RECHECK) -> bool:
    """Whether ``url`` is among the ``share`` of pages rendered to check a guess (the same
    answer for the same path and query, in any process and on any origin: which pages of a
    site are rechecked does not depend on its host or port)."""
    parts = urlsplit(url)
    key = f"{parts.path}?{parts.query}" if parts.query else parts.path
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < share


def learned(tally: RenderTally | None) -> bool | None:
    """What a prefix's tally says (None: not enough renders compared yet)."""
    if tally is None or tally.checked < LEARNED_AFTER:
        return None
    return 2 * tally.needed >= tally.checked


def needs_http_signals(mode: RenderMode, included: bool) -> bool:
    """Whether the decision reads the HTTP copy (``auto``, for a page no pattern names)."""
    return mode == "auto" and not included


def decide(
    mode: RenderMode,
    url: str,
    *,
    included: bool,
    any_include: bool,
    looks: bool = False,
    tally: RenderTally | None = None,
) -> bool:
    """Whether ``url`` is rendered. ``included``: it matches ``--render-include``;
    ``any_include``: the crawl has such patterns; ``looks``: ``looks_client_built`` of its
    HTTP copy; ``tally``: its prefix's (``auto``)."""
    if mode == "never":
        return False
    if mode == "always":
        return included or not any_include
    if included:
        return True
    guess = learned(tally)
    if guess is None:
        guess = looks
    return guess or rechecked(url)


def found_more(http_links: AbstractSet[str], rendered_links: AbstractSet[str]) -> bool:
    """Whether a render was needed: its DOM links somewhere the HTTP copy does not."""
    return bool(rendered_links - http_links)


def tallied(tally: RenderTally | None, needed: bool) -> RenderTally:
    """``tally`` with one more compared render."""
    checked, found = (tally.checked, tally.needed) if tally is not None else (0, 0)
    return RenderTally(checked=checked + 1, needed=found + int(needed))
