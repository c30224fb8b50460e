"""Records shared by both wirings: crawl spec, frontier batches, fetch outcomes, pages, URL states.

All are ``msgspec.Struct`` so that encoding is fast and the JSON Schema published in
``schemas/json/`` is derived from the very classes the code uses. Every wire record carries ``v``,
the schema version; readers reject versions they do not know.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

# v2: CrawlPolicy, FrontierBatch and UrlRef carry their bounds (below); readers still accept v1
# records, validated against the v2 bounds (``schemas.codec.KNOWN_VERSIONS``). Also v2, for
# discovery through sitemaps and feeds: the discovery fields of CrawlPolicy, ``kind``/``lastmod``
# of UrlRef, ``lastmod`` of Outcome and UrlStatus, the ``sitemap``/``feed`` terminal states.
# v3: a page's outlinks (``Page.links``, ``links_total``, ``links_truncated``) and
# ``CrawlPolicy.max_page_links`` (docs/architecture.md, "Outlinks in the page record (schema
# v3)"); v1 and v2 records are still accepted (no links: ``links`` is empty and ``links_total``
# null). ``Page.outlinks`` keeps its v1 meaning. Which versions are read, and why:
# docs/compatibility.md.
# v4: continuous crawling (docs/architecture.md, "Continuous crawling"): the ``recrawl_*`` and
# ``max_fetches_per_hour`` fields of CrawlPolicy, ``changefreq`` of UrlRef; ``Page.change`` with the
# previous digest and fetch time; the validators and digest of an Outcome and its ``due`` kind;
# the ``gone`` terminal state. v1-v3 records are still accepted (a crawl without revisits; a
# page record without ``change``).
# v5: web archives (docs/warc.md): ``CrawlPolicy.warc`` and the ``captures`` topic, whose
# ``Capture`` records carry each fetch's HTTP exchanges as received for the WARC writer. v1-v4
# records are still accepted (a crawl that writes no archive).
# v6: requests users shape (docs/requests.md): the request options of CrawlPolicy (``headers``,
# ``cookies``, ``cookie_presets``, ``auth``, ``warc_credentials``), the ``set_cookies`` of an
# Outcome (for the origin's cookie jar) and the ``redacted`` header names of an Exchange. A
# credential's value is never in a record: the spec names it, the process holds it. v1-v5
# records are still accepted (a crawl that sends no header, cookie or credential of its own).
# Also v6, extraction without code (docs/extraction.md): ``CrawlPolicy.extract``, named CSS
# selectors, and ``Page.data``, what they matched; ``CrawlPolicy.main_text`` (``--text``) and
# ``Page.main_text``/``language``; a v1-v5 spec extracts nothing and a v1-v5 page has ``data``,
# ``main_text`` and ``language`` null.
# v7: crawl plugins (docs/plugins.md): ``CrawlPolicy.plugins``, the plugins a crawl runs by name
# with their arguments, and ``Page.plugin_errors``, what a plugin that raised or ran past its
# time budget left in the record; a page extractor's object in ``Page.data`` under its name.
# v1-v6 records are still accepted (a crawl that runs no plugin, a page without plugin errors).
# v7, page assets (docs/assets.md): ``CrawlPolicy.assets`` (the types fetched), ``max_assets``
# and ``asset_hosts``; the ``asset`` and ``stylesheet`` URL kinds (UrlRef, QueueEntry, Capture);
# ``Page.assets``, the asset URLs a page needs. v1-v6 records are still accepted (a crawl that
# fetches no asset; a page record that lists none).
# v7: JavaScript rendering (docs/rendering.md): ``CrawlPolicy.render`` and ``render_include``;
# a page's ``render`` (how it was read: ``none`` or ``browser``), ``render_ms``,
# ``render_error`` and ``render_refused``; an outcome's ``render_needed`` (what ``auto`` learns
# from). v1-v6 records are still accepted (a crawl that renders nothing; a page read over HTTP).
# v7, the Kafka wiring's render stage: the ``render`` topic, whose ``RenderRequest`` records carry
# a fetched page a fetch worker hands to the render workers (docs/rendering.md, "The Kafka
# wiring"); a topic between the project's own processes, published with the others.
# v8, slot leases of the Kafka wiring (docs/rendering.md, "Other origins in the Kafka wiring"):
# ``SlotMessage`` records on ``outcomes`` (a second record of that topic, told apart by its
# ``kind``) ask the owner of an origin's partition for a loan of its politeness slot and give it
# back, and the ``grants`` topic, whose ``SlotGrant`` records are its answers; between the
# project's own processes. v1-v7 records are still accepted (no other record changed).
SCHEMA_VERSION = 8


class TerminalState(enum.StrEnum):
    """The one final state recorded for every URL admitted to the frontier."""

    FETCHED = "fetched"
    ROBOTS_DENIED = "robots_denied"
    OUT_OF_SCOPE = "out_of_scope"
    SKIPPED_CONTENT_TYPE = "skipped_content_type"
    TOO_LARGE = "too_large"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # A same-origin redirect led to a URL this crawl already has: no second fetch of that page.
    DUPLICATE = "duplicate"
    # A cross-origin redirect: the target was handed to its own origin's queue (own politeness,
    # own robots.txt), where it gets its own terminal state.
    REDIRECTED = "redirected"
    # The SSRF guard refused every address of the host (not public, not allowed): nothing was
    # sent; last_error names the addresses. Added in schema v2.
    BLOCKED = "blocked"
    # A sitemap (or sitemap index) / an RSS or Atom feed was fetched and its URLs were admitted
    # (agents/content/sitemap.py, agents/content/feeds.py): not a page, so not counted as one.
    SITEMAP = "sitemap"
    FEED = "feed"
    # Continuous crawling (v4): a revisit found the URL gone (404 or 410, confirmed by a
    # second revisit after a backoff); it is dropped from the schedule.
    GONE = "gone"


CrawlRunState = Literal["running", "paused", "stopped"]

DEFAULT_USER_AGENT = "streamcrawl/0.1 (+https://github.com/streamcrawl/streamcrawl)"
DEFAULT_STRIP_PARAMS = ("utm_*", "gclid", "fbclid", "dclid", "msclkid", "mc_eid", "_hsenc")
DEFAULT_CONTENT_TYPES = ("text/html", "application/xhtml+xml")

# Bounds of a crawl spec and of a seed request, checked by the decoder of every topic, by the CLI
# and published in the JSON Schemas: a message outside them is refused, never applied. Generous
# for a large production crawl, small enough that one message cannot swamp a worker (see
# docs/architecture.md, "Crawl spec bounds").
MAX_SEEDS = 10_000
MAX_HOSTS = 10_000
MAX_PATTERNS = 256
MAX_PATTERN_CHARS = 2_048
MAX_URL_CHARS = 65_536
MAX_BATCH_URLS = 10_000
MAX_PAGES = 10**12
# Page.links: at most MAX_PAGE_LINKS entries (the crawl's max_page_links, default
# DEFAULT_PAGE_LINKS), anchor texts of at most MAX_ANCHOR_CHARS, at most MAX_REL_TOKENS rel
# tokens of at most MAX_REL_CHARS each (docs/architecture.md, "Outlinks in the page record").
MAX_PAGE_LINKS = 100_000
DEFAULT_PAGE_LINKS = 1_000
MAX_ANCHOR_CHARS = 256
MAX_REL_TOKENS = 8
MAX_REL_CHARS = 32
DAY = 86_400.0
# Request options (v6): headers of a crawl (each origin's included), cookie presets, credential
# names; header names are RFC 9110 tokens, values one line of visible text.
MAX_REQUEST_HEADERS = 64
MAX_HEADER_VALUE_CHARS = 8_192
MAX_COOKIE_PRESETS = 256
MAX_COOKIE_CHARS = 4_096
MAX_AUTH = 256
# Extraction (v6, docs/extraction.md): at most MAX_EXTRACTORS named selectors of at most
# MAX_SELECTOR_CHARS each; in Page.data each string has at most MAX_EXTRACT_CHARS characters,
# each list at most MAX_EXTRACT_VALUES strings, and the whole object at most MAX_DATA_BYTES of
# JSON (agents/content/extract.py cuts values to fit and marks the object DATA_TRUNCATED).
MAX_EXTRACTORS = 32
# Main text (v6, ``--text``; docs/extraction.md): at most MAX_MAIN_TEXT_CHARS characters of a
# page's main content, cut at a word boundary (agents/content/maintext.py).
MAX_MAIN_TEXT_CHARS = 100_000
MAX_SELECTOR_CHARS = 1_024
MAX_EXTRACT_CHARS = 4_096
MAX_EXTRACT_VALUES = 256
MAX_DATA_BYTES = 65_536
DATA_TRUNCATED = "_truncated"
# Plugins (v7, docs/plugins.md): at most MAX_PLUGINS per crawl, each one's arguments at most
# MAX_PLUGIN_ARGS_BYTES of JSON (checked when the crawl's rules compile, ``CrawlRules``); a page
# record keeps at most MAX_PLUGIN_ERRORS errors of at most MAX_PLUGIN_ERROR_CHARS each.
MAX_PLUGINS = 16
MAX_PLUGIN_ARGS_BYTES = 8_192
MAX_PLUGIN_ERRORS = 32
MAX_PLUGIN_ERROR_CHARS = 500
# Page assets (v7, docs/assets.md): at most MAX_PAGE_ASSETS asset URLs in a page record
# (agents/content/assets.py finds at most that many per page or stylesheet).
MAX_PAGE_ASSETS = 500
MAX_ASSETS = 10**12

CrawlId = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
        description="1-100 letters, digits, '.', '_' or '-', starting with a letter or digit.",
    ),
]
Url = Annotated[str, Meta(min_length=1, max_length=MAX_URL_CHARS)]
Origin = Annotated[str, Meta(min_length=1, max_length=1_024)]
Host = Annotated[str, Meta(min_length=1, max_length=261)]  # a 253-byte DNS name + ":65535"
Pattern = Annotated[str, Meta(max_length=MAX_PATTERN_CHARS)]
Name = Annotated[str, Meta(min_length=1, max_length=255)]
Seconds = Annotated[float, Meta(ge=0.0, le=DAY)]
Timeout = Annotated[float, Meta(gt=0.0, le=3_600.0)]
# A revisit interval (v4): one second (tests, a busy feed) to a year.
Interval = Annotated[float, Meta(ge=1.0, le=365 * DAY)]
RecrawlMode = Literal["adaptive", "fixed"]
# When pages are rendered in a browser (docs/rendering.md, "When to render").
RenderMode = Literal["never", "always", "auto"]
# How a page record's document was read: over HTTP only, or as a browser rendered it.
PageRender = Literal["none", "browser"]
# What a fetch found, against the copy of its previous fetch (Page.change, v4).
Change = Literal["new", "changed", "unchanged", "gone"]
HeaderName = Annotated[
    str,
    Meta(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$", description="an RFC 9110 token"),
]
HeaderValue = Annotated[
    str,
    Meta(
        max_length=MAX_HEADER_VALUE_CHARS,
        pattern=r"^[^\x00-\x08\x0a-\x1f\x7f]*$",
        description="one line: no control character but tab",
    ),
]
# The name of a credential the process holds (STREAMCRAWL_CREDENTIAL_<NAME>, or a file of that
# name in the credentials folder): never its value.
CredentialName = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_]{0,63}$",
        description="1-64 letters, digits or '_', starting with a letter or digit",
    ),
]
WarcCredentials = Literal["redact", "keep"]
ExtractName = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$",
        description="1-64 letters, digits, '_', '.' or '-', starting with a letter or '_'",
    ),
]
ExtractText = Annotated[str, Meta(max_length=MAX_EXTRACT_CHARS)]
# One value of Page.data: a string (first match), a list of strings (``all``), null (no
# match), ``true`` under DATA_TRUNCATED, or (v7) a page extractor plugin's JSON object under the
# plugin's name (docs/plugins.md; the whole ``data`` stays within MAX_DATA_BYTES).
ExtractValue = (
    ExtractText
    | Annotated[list[ExtractText], Meta(max_length=MAX_EXTRACT_VALUES)]
    | bool
    | dict[str, Any]
    | None
)
PageData = Annotated[
    dict[ExtractName, ExtractValue], Meta(max_length=MAX_EXTRACTORS + MAX_PLUGINS + 1)
]
# A plugin's name: its entry point's in the ``streamcrawl.plugins`` group (v7), and the key of a
# page extractor's object in Page.data.
PluginName = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$",
        description="1-64 letters, digits, '_', '.' or '-', starting with a letter or '_'",
    ),
]
PluginError = Annotated[str, Meta(max_length=MAX_PLUGIN_ERROR_CHARS)]
# What ``--assets`` fetches (v7, docs/assets.md).
AssetType = Literal["css", "js", "images", "fonts", "media"]


class RequestHeader(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A header sent with every request of a crawl (v6), or, with ``origin``, with those of
    that origin only (robots.txt included). Which names a crawl may set: docs/requests.md."""

    name: HeaderName
    value: HeaderValue
    origin: Origin | None = None


class CookiePreset(msgspec.Struct, frozen=True, kw_only=True):
    """A cookie the crawl's jar holds for ``origin`` from the start (v6): ``name=value``."""

    origin: Origin
    cookie: Annotated[str, Meta(min_length=2, max_length=MAX_COOKIE_CHARS)]


class OriginAuth(msgspec.Struct, frozen=True, kw_only=True):
    """The credential sent to ``origin``, by name (v6): the value stays with the process."""

    origin: Origin
    credential: CredentialName


class Extractor(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A named CSS selector whose matches fill ``Page.data[name]`` (v6; docs/extraction.md).

    ``selector``: CSS, optionally ending in ``::text`` (the element's text, whitespace
    collapsed: the default) or ``::attr(NAME)`` (an attribute's value). ``all``: a list of every
    match, else the first match (or null)."""

    name: ExtractName
    selector: Annotated[str, Meta(min_length=1, max_length=MAX_SELECTOR_CHARS)]
    all: bool = False


class PluginSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A plugin a crawl runs (v7; docs/plugins.md): the name of its entry point in the
    ``streamcrawl.plugins`` group and its arguments, a JSON object the plugin's own schema
    checks (at most MAX_PLUGIN_ARGS_BYTES of JSON)."""

    name: PluginName
    args: dict[str, Any] = {}


class CrawlPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """Everything that defines one crawl; published on the ``control`` topic keyed by crawl id."""

    v: int = SCHEMA_VERSION
    crawl_id: CrawlId
    seeds: Annotated[tuple[Url, ...], Meta(max_length=MAX_SEEDS)] = ()
    # Scope: the seeds' hosts ("www." ignored) always, plus allow_hosts and allow_domains.
    allow_hosts: Annotated[tuple[Host, ...], Meta(max_length=MAX_HOSTS)] = ()
    allow_domains: Annotated[tuple[Host, ...], Meta(max_length=MAX_HOSTS)] = ()
    include: Annotated[tuple[Pattern, ...], Meta(max_length=MAX_PATTERNS)] = ()
    exclude: Annotated[tuple[Pattern, ...], Meta(max_length=MAX_PATTERNS)] = ()
    max_depth: Annotated[int, Meta(ge=0, le=1_000_000)] | None = None
    max_pages: Annotated[int, Meta(ge=1, le=MAX_PAGES)] | None = None
    # Trap guards.
    max_url_length: Annotated[int, Meta(ge=16, le=MAX_URL_CHARS)] = 2048
    max_path_depth: Annotated[int, Meta(ge=1, le=1_000)] = 32
    max_segment_repeats: Annotated[int, Meta(ge=1, le=1_000)] = 3
    # Canonicalization.
    strip_params: Annotated[tuple[Name, ...], Meta(max_length=MAX_PATTERNS)] = DEFAULT_STRIP_PARAMS
    sort_query: bool = True
    fold_trailing_slash: bool = False
    # Politeness.
    delay: Seconds = 1.0
    per_origin_concurrency: Annotated[int, Meta(ge=1, le=100)] = 1
    max_crawl_delay: Seconds = 30.0
    max_backoff: Seconds = 300.0
    # Robots and page directives.
    user_agent: Annotated[str, Meta(min_length=1, max_length=512)] = DEFAULT_USER_AGENT
    obey_robots: bool = True
    robots_ttl: Annotated[float, Meta(ge=0.0, le=30 * DAY)] = 86400.0
    robots_error_ttl: Seconds = 300.0
    honor_nofollow: bool = True
    honor_noindex: bool = True
    honor_x_robots_tag: bool = True
    # Discovery: follow a page's rel=canonical (<link> or Link header) instead of its own links;
    # sitemaps of each origin's robots.txt (and sitemap seeds); RSS/Atom feeds linked by pages.
    follow_canonical: bool = False
    sitemaps: bool = True
    sitemap_seeds: Annotated[tuple[Url, ...], Meta(max_length=MAX_SEEDS)] = ()
    feeds: bool = True
    # Fetching.
    max_body: Annotated[int, Meta(ge=1, le=1 << 30)] = 10 * 1024 * 1024
    timeout: Timeout = 30.0
    connect_timeout: Timeout = 10.0
    retries: Annotated[int, Meta(ge=0, le=100)] = 2
    # Page records list the first max_page_links distinct links of a page (v3; 0: none, the
    # total is still counted).
    max_page_links: Annotated[int, Meta(ge=0, le=MAX_PAGE_LINKS)] = DEFAULT_PAGE_LINKS
    max_redirects: Annotated[int, Meta(ge=0, le=100)] = 5
    content_types: Annotated[tuple[Name, ...], Meta(max_length=MAX_PATTERNS)] = (
        DEFAULT_CONTENT_TYPES
    )
    store_bodies: bool = False
    # Kafka wiring: the page record on the pages topic carries the decoded body (zstd on the
    # wire, at most max_body and the topic's message size); store_bodies decides the sinks.
    stream_bodies: bool = True
    # Continuous crawling (v4; docs/architecture.md, "Continuous crawling"). None: each URL is
    # fetched once. Else a fetched URL is revisited after an interval: ``recrawl_after`` at
    # first, then (adaptive) longer after no change and shorter after a change, within
    # [recrawl_min, recrawl_max] (defaults: recrawl_after / 8 and x 14), feeds within
    # [recrawl_feed_min, recrawl_max] (default: recrawl_min / 4), each due time brought up to
    # recrawl_jitter of its interval sooner. ``recrawl_at``: every URL fetched before it is due
    # now (``streamcrawl recrawl``). ``max_fetches_per_hour`` bounds the crawl's requests, first
    # fetches and revisits together (per worker in the Kafka wiring).
    recrawl_after: Interval | None = None
    recrawl_min: Interval | None = None
    recrawl_max: Interval | None = None
    recrawl_feed_min: Interval | None = None
    recrawl_mode: RecrawlMode = "adaptive"
    recrawl_jitter: Annotated[float, Meta(ge=0.0, le=0.5)] = 0.1
    recrawl_at: Annotated[float, Meta(ge=0.0)] = 0.0
    max_fetches_per_hour: Annotated[int, Meta(ge=1, le=10**9)] | None = None
    # Kafka wiring (``streamcrawl seed --keep-versions N``): besides the latest copy of each
    # page, Cassandra keeps the digest, status and fetch time of its N newest versions (fetches
    # that found it new or changed; table ``page_versions``); 0 keeps none. The embedded
    # crawl's pages.jsonl has every fetch already.
    keep_versions: Annotated[int, Meta(ge=0, le=100)] = 0
    # v5 (``crawl --warc DIR``, ``seed --warc``): every fetch's HTTP exchanges as received
    # (``Capture``) go to a WARC archive: the embedded crawl writes it, the Kafka workers
    # publish them on ``captures`` for ``streamcrawl warc`` (docs/warc.md).
    warc: bool = False
    # v6, requests users shape (docs/requests.md): headers of every request (or of one origin's),
    # a cookie jar per origin (``cookies``) with presets, credentials by name per origin, and
    # whether WARC request records keep credential and cookie values (default: a fixed mark).
    headers: Annotated[tuple[RequestHeader, ...], Meta(max_length=MAX_REQUEST_HEADERS)] = ()
    cookies: bool = False
    cookie_presets: Annotated[tuple[CookiePreset, ...], Meta(max_length=MAX_COOKIE_PRESETS)] = ()
    auth: Annotated[tuple[OriginAuth, ...], Meta(max_length=MAX_AUTH)] = ()
    warc_credentials: WarcCredentials = "redact"
    # v6, extraction without code (``--extract NAME=SELECTOR``, docs/extraction.md): each page
    # record's ``data`` holds what these selectors matched; none: ``data`` is null.
    extract: Annotated[tuple[Extractor, ...], Meta(max_length=MAX_EXTRACTORS)] = ()
    # v6, ``--text``: each page record keeps its main text and language (``Page.main_text``).
    main_text: bool = False
    # v7, ``--plugin NAME[=JSON]`` (docs/plugins.md): plugins run in this order, after the
    # built-in rules, which they cannot loosen.
    plugins: Annotated[tuple[PluginSpec, ...], Meta(max_length=MAX_PLUGINS)] = ()
    # v7, page assets (``--assets``, docs/assets.md): the types of asset fetched for each page
    # (none: pages only); at most ``max_assets`` asset URLs queued (None: ten per page of
    # ``max_pages``, unbounded without it), not counted in ``max_pages``; their hosts:
    # ``asset_hosts`` None is any host, else the crawl's own hosts and these.
    assets: Annotated[tuple[AssetType, ...], Meta(max_length=5)] = ()
    max_assets: Annotated[int, Meta(ge=1, le=MAX_ASSETS)] | None = None
    asset_hosts: Annotated[tuple[Host, ...], Meta(max_length=MAX_HOSTS)] | None = None
    # v7, ``--render`` (docs/rendering.md): which HTML pages a browser renders before they are
    # parsed: ``never``, ``always``, or ``auto`` (those that look built by scripts, learned per
    # origin and path prefix); ``render_include``: URLs that match are rendered whenever the
    # mode is not ``never``, and with ``always`` only they are.
    render: RenderMode = "never"
    render_include: Annotated[tuple[Pattern, ...], Meta(max_length=MAX_PATTERNS)] = ()

    def wants_bodies(self) -> bool:
        """Whether page records carry their decoded body: for the page stream or the sinks."""
        return self.stream_bodies or self.store_bodies

    state: CrawlRunState = "running"


# What a queued URL is fetched as: a page (HTML), a sitemap or sitemap index, a feed, or (v7)
# an asset of a page: a stylesheet (read for its own assets) or any other (not read).
UrlKind = Literal["page", "sitemap", "feed", "asset", "stylesheet"]
LastMod = Annotated[str, Meta(max_length=64)]
ChangeFreq = Annotated[str, Meta(max_length=16)]


class UrlRef(msgspec.Struct, frozen=True, array_like=False, omit_defaults=True):
    """A discovered URL: its text (canonical when the sender canonicalized it), depth, parent;
    ``kind`` and, for URLs listed in a sitemap, its ``lastmod`` (as written there, W3C date)
    and (v4) ``changefreq``."""

    url: Url
    depth: Annotated[int, Meta(ge=0)]
    parent: Url | None = None
    kind: UrlKind = "page"
    lastmod: LastMod | None = None
    changefreq: ChangeFreq | None = None


class FrontierBatch(msgspec.Struct, frozen=True, kw_only=True):
    """URLs sent to the frontier keyed by ``origin``: that origin's, and those of other
    origins of the key's partition (the fetch service merges links per partition); a URL of an
    origin of another partition is re-sent keyed by its origin."""

    v: int = SCHEMA_VERSION
    crawl_id: CrawlId
    origin: Origin
    urls: Annotated[tuple[UrlRef, ...], Meta(max_length=MAX_BATCH_URLS)]


class Revisit(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the previous fetch of a URL of a continuous crawl found, and when it is due again
    (``agents/frontier/revisits.py``). Stored with its queue entry; on the wire only in a
    ``RenderRequest``."""

    fetched_at: float  # the previous fetch's request start
    level: int  # its place on the crawl's interval ladder (agents/policy/revisit.py)
    due: float  # when it is due again
    etag: str | None = None  # validators exactly as the server sent them
    last_modified: str | None = None
    digest: str | None = None  # sha256 hex of the previous body
    status: int | None = None
    changed_at: float = 0.0  # the last fetch that found a new or changed copy
    gone: int = 0  # 404/410 answers in a row
    errors: int = 0  # failed revisits in a row
    forced: bool = False  # made due now (a sitemap's newer lastmod, ``streamcrawl recrawl``)
    state: str = "fetched"  # the terminal state last reported for the URL


class Cookie(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One cookie of an origin's jar, as RFC 6265 section 5.3 stores it (``agents/urls/cookies.py``
    sets and sends it). Stored with its origin's state (``OriginState.jars``); on the wire only
    in a ``RenderRequest`` (the jar its page was fetched with)."""

    name: str
    value: str
    domain: str  # canonical host or domain, lower case, no leading dot
    host_only: bool = True  # sent to ``domain`` exactly, not to its subdomains
    path: str = "/"
    secure: bool = False  # sent over https only
    http_only: bool = False  # kept for fidelity: a crawler has no script API to hide it from
    expires: float | None = None  # epoch seconds; None: a session cookie, kept for the crawl
    created: float = 0.0  # when first set; orders the Cookie header and eviction


class QueueEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One URL waiting in its origin's durable FIFO queue (``revisit``: a URL fetched before,
    due again)."""

    crawl_id: str
    url: str
    depth: int
    parent: str | None = None
    attempts: int = 0
    last_error: str | None = None
    kind: UrlKind = "page"
    lastmod: str | None = None
    changefreq: str | None = None
    revisit: Revisit | None = None


class SetCookie(msgspec.Struct, frozen=True, kw_only=True):
    """A ``Set-Cookie`` header a response carried (v6), with the URL of that response: the
    frontier stores it in the origin's cookie jar (``agents/net/cookies.py``)."""

    url: Url
    header: Annotated[str, Meta(max_length=MAX_HEADER_VALUE_CHARS)]


# ``due`` (v4): no request; the frontier moves the origin's due revisits into its queue.
OutcomeKind = Literal["page", "robots", "due"]


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """The result of one fetch attempt, applied by the frontier (the single state writer).

    ``state`` is a terminal state, or ``"retry"`` when the attempt failed and may be retried.
    ``seq`` identifies the queue entry that was fetched (robots outcomes have ``seq = -1``).
    ``backoff`` tells the frontier to back the origin off (429/503, 5xx, timeouts).
    ``robots_status`` 0 (robots outcomes): the SSRF guard refused the address, nothing was sent.
    ``links`` are URLs of this same origin found in the page: the frontier admits them and
    applies the outcome in one state change (one message instead of a ``frontier`` batch plus
    the outcome); links of other origins still travel as ``frontier`` batches.
    """

    v: int = SCHEMA_VERSION
    crawl_id: str
    origin: str
    kind: OutcomeKind
    seq: int
    url: str
    state: str
    depth: int = 0
    attempts: int = 1
    status: int | None = None
    error: str | None = None
    retry_after: float | None = None
    backoff: bool = False
    started_at: float
    finished_at: float
    final_url: str | None = None
    robots_body: str | None = None
    robots_status: int | None = None
    links: tuple[UrlRef, ...] = ()
    lastmod: str | None = None  # the entry's, so that a replayed outcome repeats its status
    # v4, for the revisit schedule: the validators of the response, as sent, and the sha256
    # hex of its body (None: no body read; a 304 keeps the previous digest).
    etag: str | None = None
    last_modified: str | None = None
    digest: str | None = None
    # v4: a revisit's (None: a first fetch): the state last reported for the URL, and the
    # 404/410 answers in a row before this one (so that a replay repeats what it reported).
    reported: str | None = None
    gone: int = 0
    # v6, a crawl with ``cookies``: the Set-Cookie headers of the fetch's responses, in order
    # (redirect hops first), for the origin's jar; applied as of ``finished_at``.
    set_cookies: Annotated[tuple[SetCookie, ...], Meta(max_length=256)] = ()
    # v7, ``--render auto``: a page rendered and read over HTTP both: whether the render found
    # links the HTTP copy lacks (None: not compared). The frontier tallies it per path prefix
    # in ``OriginState.renders`` (docs/rendering.md, "auto").
    render_needed: bool | None = None


# Where a link was found: <a>, <area>, <link rel=next/prev/alternate>, <iframe>, <frame>,
# <meta http-equiv=refresh>, or the response's ``Link:`` header.
LinkTag = Literal["a", "area", "link", "iframe", "frame", "refresh", "header"]
RelToken = Annotated[str, Meta(min_length=1, max_length=MAX_REL_CHARS)]


class Outlink(msgspec.Struct, frozen=True, omit_defaults=True):
    """One distinct link of a page (schema v3; ``agents/content/outlinks.py``).

    ``url`` canonical, as the frontier keys it; ``text`` the anchor text, whitespace collapsed
    (empty: none); ``rel`` its rel tokens, lowercase, in order (those every occurrence of the
    URL on the page has); ``in_scope`` whether the crawl's scope admits it one level below the
    page, else ``scope_rule`` names the rule (``host``, ``depth``, ``exclude``, ``include``,
    ``trap:*``). Fields at their default are left out of the JSON.
    """

    url: Url
    text: Annotated[str, Meta(max_length=MAX_ANCHOR_CHARS)] = ""
    rel: Annotated[tuple[RelToken, ...], Meta(max_length=MAX_REL_TOKENS)] = ()
    tag: LinkTag = "a"
    in_scope: bool = True
    scope_rule: Name | None = None


class Page(msgspec.Struct, frozen=True, kw_only=True):
    """A fetched page, published on the ``pages`` topic and written by the sinks.

    ``outlinks`` (since v1) counts the distinct URLs the page handed to the frontier: its
    links minus nofollow ones (when honoured), minus itself, none past ``max_depth``.
    ``links`` (v3) lists what the page links to, for consumers: its first ``max_page_links``
    distinct canonical links in document order, nofollow and out-of-scope ones included;
    ``links_total`` counts them all (``None``: a v1/v2 record, not counted) and
    ``links_truncated`` says whether some were left out (or cut to fit the topic's message).
    """

    v: int = SCHEMA_VERSION
    crawl_id: str
    url: str
    final_url: str
    origin: str
    status: int
    headers: dict[str, str]
    content_type: str | None
    charset: str | None
    title: str | None
    depth: int
    fetched_at: float
    elapsed_ms: float
    body_sha256: str
    body_bytes: int
    outlinks: int
    canonical: str | None = None
    noindex: bool = False
    redirects: tuple[str, ...] = ()
    links: Annotated[tuple[Outlink, ...], Meta(max_length=MAX_PAGE_LINKS)] = ()
    links_total: Annotated[int, Meta(ge=0)] | None = None
    links_truncated: bool = False
    body: str | None = None
    # v4: what this fetch found against the previous one (None: a v1-v3 record): ``new`` (first
    # fetch), ``changed``, ``unchanged`` (a 304, or the same body digest: the record has no
    # body, links or title) or ``gone``; the previous fetch's digest and time.
    change: Change | None = None
    previous_sha256: str | None = None
    previous_fetched_at: float | None = None
    # v6: what the crawl's extractors matched (``CrawlPolicy.extract``), by name; None: the
    # crawl extracts nothing (or the record has no body: a revisit that found the page
    # unchanged, or gone). ``data["_truncated"]`` is true when a value was cut to its bounds or
    # left out (docs/extraction.md).
    data: PageData | None = None
    # v6, ``--text`` (docs/extraction.md, "Main text and language"): the page's main content
    # without boilerplate, at most MAX_MAIN_TEXT_CHARS, and its language (ISO 639-1); None:
    # the crawl does not keep it, or the page has none (or is noindex).
    main_text: Annotated[str, Meta(max_length=MAX_MAIN_TEXT_CHARS)] | None = None
    language: Annotated[str, Meta(max_length=8)] | None = None
    # v7 (docs/plugins.md): "NAME: error" of each plugin call that raised or ran past its
    # time budget on this page (its result dropped; the page went out all the same).
    plugin_errors: Annotated[tuple[PluginError, ...], Meta(max_length=MAX_PLUGIN_ERRORS)] = ()
    # v7, a crawl with ``assets``: the canonical URLs of the assets the page needs, of the
    # crawl's types, in document order (docs/assets.md); each is a URL of the crawl with its
    # own state in the status stream.
    assets: Annotated[tuple[Url, ...], Meta(max_length=MAX_PAGE_ASSETS)] = ()
    # v7 (docs/rendering.md): ``browser``: the links, title, data and text come from the DOM a
    # browser rendered (``body`` too, when kept; ``body_sha256``/``body_bytes`` stay the HTTP
    # response's); ``render_ms``: how long the render took; ``render_error``: why a render
    # failed (``render_timeout: ...``, ``render_crash: ...``; the record is then the HTTP
    # copy's, ``render`` ``none``); ``render_refused``: the page's subrequests refused.
    render: PageRender = "none"
    render_ms: Annotated[float, Meta(ge=0.0)] | None = None
    render_error: Annotated[str, Meta(max_length=500)] | None = None
    render_refused: Annotated[int, Meta(ge=0)] = 0


class UrlStatus(msgspec.Struct, frozen=True, kw_only=True):
    """The terminal state of one URL of one crawl."""

    v: int = SCHEMA_VERSION
    crawl_id: str
    url: str
    origin: str
    state: TerminalState
    depth: int
    attempts: int = 0
    status: int | None = None
    last_error: str | None = None
    final_url: str | None = None
    updated_at: float
    lastmod: str | None = None  # the sitemap's <lastmod> of this URL, if it was listed in one
    # v4, continuous crawling: the state this one replaces (a revisit found the URL gone, or
    # fetched it after a failure), so that counts move it instead of adding a URL.
    previous: TerminalState | None = None


class Lane(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A FIFO of revisits of one crawl and one ladder level at one origin: seqs [head, tail),
    one key each (``agents/frontier/revisits.py``); ``head_due``/``head_fetched`` are the due
    and previous fetch time of the entry at ``head``, ``tail_due`` the latest due pushed."""

    crawl_id: str
    level: int
    head: int = 0
    tail: int = 0
    head_due: float = 0.0
    head_fetched: float = 0.0
    tail_due: float = 0.0


class RenderTally(msgspec.Struct, array_like=True):
    """Renders of one path prefix compared with its HTTP copies: ``checked``, and of those
    ``needed`` (the render found links the HTTP copy lacks)."""

    checked: int = 0
    needed: int = 0


class OriginState(msgspec.Struct, kw_only=True):
    """Per-origin frontier state: queue bounds, timing, backoff and the cached robots.txt.

    Pending entries live at ``[head, tail)`` (``agents.frontier.queue``: the open segment inline
    here, sealed segments of ``SEGMENT`` entries under their own keys). ``next_fetch_at`` is the
    earliest time the next request to this origin may start (epoch seconds).
    """

    origin: str
    head: int = 0
    tail: int = 0
    next_fetch_at: float = 0.0
    failures: int = 0
    backoff_until: float = 0.0
    robots_status: int | None = None
    robots_body: str | None = None
    robots_expires: float = 0.0
    fetched: int = 0
    errors: int = 0
    # The queue's layout (agents/frontier/queue.py): entries of the open segment, seqs in
    # [head, tail) ended out of order, retried entries of sealed segments. ``legacy_end`` (where
    # an unreleased layout, a key per seq, ended) is no longer read or written
    # (docs/compatibility.md).
    inline: list[QueueEntry | None] = msgspec.field(default_factory=list)
    done: list[int] = msgspec.field(default_factory=list)
    patched: dict[int, QueueEntry] = msgspec.field(default_factory=dict)
    legacy_end: int = -1
    # Continuous crawling: the origin's revisit lanes (agents/frontier/revisits.py), each a
    # FIFO of revisits of one crawl and one interval, so due times grow along it.
    lanes: list[Lane] = msgspec.field(default_factory=list)
    # A crawl with cookies (``CrawlPolicy.cookies``): its cookie jar for this origin, by crawl
    # id, as the outcomes' Set-Cookie headers left it (``agents/net/cookies.py``).
    jars: dict[str, tuple[Cookie, ...]] = msgspec.field(default_factory=dict)
    # ``--render auto``: by crawl id, then path prefix, what renders of its pages found
    # (``agents/policy/rendering.py``).
    renders: dict[str, dict[str, RenderTally]] = msgspec.field(default_factory=dict)


# Topic name (after ``<prefix>.``) -> value record. ``status`` carries terminal URL states keyed by
# origin, consumed by the Cassandra sink.


# v5: what the WARC writer needs of one fetch (docs/warc.md).
Truncated = Literal["length", "time", "disconnect", "unspecified"]
RevisitProfile = Literal["server-not-modified", "identical-payload-digest"]
CaptureKind = Literal["page", "robots", "sitemap", "feed", "asset", "stylesheet"]


class Exchange(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One HTTP request and its response, as they went over the wire (one hop of a redirect
    chain). Bytes are base64 in JSON.

    ``request``: the request line and headers as sent, ending in an empty line.
    ``response``: the status line and headers as received, ending in an empty line; a
    ``Transfer-Encoding`` header is renamed ``X-Crawler-Transfer-Encoding`` (the payload is
    stored de-chunked) and, when the response had no ``Content-Length``, one is added with the
    stored payload's length. ``payload``: the body as received, before any content decoding
    (still gzip/br when it came so), cut where ``truncated`` says (WARC-Truncated).
    ``date``: when the request was written (epoch seconds): the records' WARC-Date.
    ``ip``: the address the connection went to (WARC-IP-Address).
    """

    target_uri: Url
    date: float
    request: bytes
    response: bytes
    payload: bytes = b""
    ip: Annotated[str, Meta(max_length=64)] | None = None
    truncated: Truncated | None = None
    # v6: the request headers whose values ``request`` holds as ``REDACTED`` (credentials and
    # cookies, unless the crawl keeps them: ``CrawlPolicy.warc_credentials``), lower-case.
    redacted: Annotated[tuple[HeaderName, ...], Meta(max_length=MAX_REQUEST_HEADERS)] = ()


class CaptureRevisit(msgspec.Struct, frozen=True, kw_only=True):
    """The last exchange of a capture repeats an earlier response: a ``revisit`` record of
    ``profile``, referring to the response record of ``refers_to_uri`` written at
    ``refers_to_date`` (its record id follows from them: ``agents/sinks/warc``)."""

    profile: RevisitProfile
    refers_to_uri: Url
    refers_to_date: float


class Capture(msgspec.Struct, frozen=True, kw_only=True):
    """One fetch's HTTP exchanges for the WARC archive, published on ``captures`` (keyed by
    origin) by a crawl with ``CrawlPolicy.warc``.

    ``url``: what the crawl asked for (a page, sitemap or feed URL, or the origin's
    robots.txt); ``exchanges`` in order, redirects first. ``depth``, ``via`` (the page that
    linked to it), ``outlinks`` (the page's links, canonical) and ``elapsed_ms`` go into the
    WARC ``metadata`` record. ``revisit``: the last exchange is written as a revisit record.
    """

    v: int = SCHEMA_VERSION
    crawl_id: CrawlId
    origin: Origin
    url: Url
    kind: CaptureKind = "page"
    depth: Annotated[int, Meta(ge=0)] = 0
    via: Url | None = None
    elapsed_ms: float = 0.0
    outlinks: Annotated[tuple[Url, ...], Meta(max_length=MAX_PAGE_LINKS)] = ()
    exchanges: Annotated[tuple[Exchange, ...], Meta(max_length=101)] = ()
    revisit: CaptureRevisit | None = None


class RenderRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A fetched page to render, published on ``render`` keyed by origin (v7).

    A fetch worker of the Kafka wiring sends it instead of parsing a page its crawl renders; a
    render worker (``streamcrawl render-worker``) renders it and publishes what the fetch would
    have: the page, its link batches and, last, the outcome of ``seq`` (docs/rendering.md, "The
    Kafka wiring"). ``entry``: the queue entry fetched; ``final_url``: the response's URL,
    canonical (``response_url`` as fetched); the response (``status``, ``headers``, ``body``
    decoded from its encodings and within the crawl's ``max_body``, ``charset`` the codec of
    its text); the fetch's times (``sent_at``: its last request on the wire, where the render's
    subrequest delay starts); the origin's robots.txt as the dispatch read it; the cookies the
    dispatch sent and the ``set_cookies`` its responses carried; ``exchanges``: the fetch's own
    (a crawl with ``warc``), the render's subrequests are added to them. ``expires_at``: the
    fetch worker stops waiting then and publishes the HTTP copy itself; a render worker drops a
    request past it.
    """

    v: int = SCHEMA_VERSION
    crawl_id: CrawlId
    origin: Origin
    seq: Annotated[int, Meta(ge=0)]
    entry: QueueEntry
    final_url: Url
    response_url: Url
    status: int
    headers: dict[str, str] = {}
    content_type: str | None = None
    charset: str | None = None
    body: bytes = b""
    started_at: float
    elapsed_ms: float = 0.0
    sent_at: float
    redirects: tuple[Url, ...] = ()
    robots_status: int | None = None
    robots_body: str | None = None
    cookies: tuple[Cookie, ...] = ()
    set_cookies: Annotated[tuple[SetCookie, ...], Meta(max_length=256)] = ()
    exchanges: Annotated[tuple[Exchange, ...], Meta(max_length=101)] = ()
    dispatched_at: float
    expires_at: float


SlotKind = Literal["claim", "return"]


class SlotMessage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A render worker's request for a loan of ``origin``'s slot, on ``outcomes`` keyed by
    origin (v8), read by the worker that owns the origin's partition (docs/rendering.md); its
    ``kind`` tells it from an ``Outcome``, the topic's other record.

    ``claim``: lend the slot to the request ``claim_id`` of worker ``worker_id`` (answered by a
    ``SlotGrant`` on ``grants`` keyed by ``worker_id``); ignored past ``not_after``, when the
    worker has stopped waiting. ``return``: the loan of ``claim_id`` ended, its request on the
    wire at ``sent_at`` (null: never sent; a claim not granted yet is withdrawn); ``delay``:
    the delay the borrower read (the origin's robots.txt may say more than its owner knows).
    Never a header, cookie or credential: the render worker holds its own."""

    v: int = SCHEMA_VERSION
    kind: SlotKind
    claim_id: Annotated[str, Meta(min_length=1, max_length=64)]
    crawl_id: CrawlId
    origin: Origin
    worker_id: Annotated[str, Meta(min_length=1, max_length=64)]
    not_after: float = 0.0
    sent_at: float | None = None
    delay: Annotated[float, Meta(ge=0.0)] = 0.0


class SlotGrant(msgspec.Struct, frozen=True, kw_only=True):
    """The owner's loan of ``origin``'s slot to the claim ``claim_id``, on ``grants`` keyed by
    ``worker_id`` (v8): its request may be sent until ``send_by``, then ``delay`` seconds hold
    the origin's next one (from its ``sent_at``); the origin's robots.txt as the owner holds it
    (``robots_expires`` 0: it holds none fresh, the borrower fetches it in this loan)."""

    v: int = SCHEMA_VERSION
    claim_id: Annotated[str, Meta(min_length=1, max_length=64)]
    crawl_id: CrawlId
    origin: Origin
    worker_id: Annotated[str, Meta(min_length=1, max_length=64)]
    send_by: float
    delay: Annotated[float, Meta(ge=0.0)]
    robots_status: int | None = None
    robots_body: str | None = None
    robots_expires: float = 0.0


WIRE_RECORDS: dict[str, type[msgspec.Struct]] = {
    "control": CrawlPolicy,
    "frontier": FrontierBatch,
    "outcomes": Outcome,
    "pages": Page,
    "status": UrlStatus,
    "captures": Capture,
    "render": RenderRequest,
    "grants": SlotGrant,
}
# A topic's other records, told apart from its first by a field's values (``kind``): a value
# that is not its first record is decoded as these, in order, from the version named.
ALSO_ON: dict[str, tuple[tuple[type[msgspec.Struct], int], ...]] = {
    "outcomes": ((SlotMessage, 8),),
}
# The schema version that introduced a topic: its earlier versions publish no schema for it.
TOPIC_SINCE: dict[str, int] = {"captures": 5, "render": 7, "grants": 8}
