"""What a plugin is: one of three kinds, each a small typed interface, declared by a ``Plugin``
that an entry point of the group ``streamcrawl.plugins`` names (docs/plugins.md).

- ``UrlFilter.check(url, depth=, source=)``: None admits the URL, a string refuses it (the
  reason, recorded with ``out_of_scope``). Asked at admission, for every URL a crawl has not
  seen (a seed, a page's link, a sitemap's URL), and for each same-origin redirect hop.
- ``LinkExtractor.links(page, links)``: the links of a parsed page to follow, from those the
  built-in rules kept; what it adds still passes canonicalization, scope, robots and dedupe.
- ``PageExtractor.extract(page)``: a JSON object, put in the page record's ``data`` under the
  plugin's name.

A plugin must be deterministic: the same page (or URL) gives the same answer, because an
event may be handled twice and a replay must give the same record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, runtime_checkable

from selectolax.lexbor import LexborHTMLParser

GROUP: Final = "streamcrawl.plugins"
Kind = Literal["url_filter", "link_extractor", "page_extractor"]
KINDS: Final[tuple[Kind, ...]] = ("url_filter", "link_extractor", "page_extractor")
# Where a URL a filter is asked about comes from: a seed (no parent), a link or a listing's
# URL (a parent), or a redirect hop of a fetch.
Source = Literal["seed", "link", "redirect"]
JSON = Any  # a value msgspec.json encodes: None, bool, int, float, str, list, dict[str, JSON]
# A plugin call's time budget by default, in seconds, per kind (docs/plugins.md, "Budgets"):
# a URL filter is asked once per URL, the others once per page.
DEFAULT_BUDGETS: Final[Mapping[Kind, float]] = {
    "url_filter": 0.05,
    "link_extractor": 1.0,
    "page_extractor": 1.0,
}


@dataclass(frozen=True, slots=True)
class PageView:
    """A fetched page as plugins see it; read-only by contract (``tree`` is the tree the
    page's links and the crawl's extractors were read from: do not change it).

    ``text``: the decoded body, None for a content type the crawl takes that is not text
    (``tree`` is None then too). ``data``: what the crawl's extractors and earlier page
    extractors put in the record so far (None: nothing)."""

    url: str
    status: int
    headers: Mapping[str, str]
    text: str | None
    tree: LexborHTMLParser | None
    base: str
    data: Mapping[str, JSON] | None = None


@runtime_checkable
class UrlFilter(Protocol):
    def check(self, url: str, *, depth: int, source: Source) -> str | None:
        """None: admitted; else why the URL is refused (one short line)."""
        ...


@runtime_checkable
class LinkExtractor(Protocol):
    def links(self, page: PageView, links: list[str]) -> list[str]:
        """The absolute URLs to follow, given the canonical ``links`` the built-in rules kept;
        a link left out is dropped, a link added is checked like any other."""
        ...


@runtime_checkable
class PageExtractor(Protocol):
    def extract(self, page: PageView) -> dict[str, JSON]:
        """Fields for the page record's ``data``, under the plugin's name."""
        ...


Instance = UrlFilter | LinkExtractor | PageExtractor
_PROTOCOLS: Final[Mapping[Kind, type]] = {
    "url_filter": UrlFilter,
    "link_extractor": LinkExtractor,
    "page_extractor": PageExtractor,
}


@dataclass(frozen=True, slots=True)
class Plugin:
    """A plugin's declaration, the object its entry point names.

    ``create`` builds the instance a crawl uses, once per crawl and worker: called with no
    argument when ``args`` is None (the plugin takes none), else with the crawl's arguments
    converted to ``args`` (a ``msgspec.Struct`` or another type ``msgspec.convert`` takes,
    which is the plugin's schema). ``budget``: seconds one call may take (default: by kind,
    ``DEFAULT_BUDGETS``)."""

    kind: Kind
    create: Callable[..., Any]
    args: Any = None
    budget: float | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"plugin kind {self.kind!r} is not one of {', '.join(KINDS)}")

    @property
    def budget_s(self) -> float:
        return self.budget if self.budget is not None else DEFAULT_BUDGETS[self.kind]

    def accepts(self, instance: object) -> bool:
        """Whether ``instance`` has the method its kind calls."""
        return isinstance(instance, _PROTOCOLS[self.kind])
