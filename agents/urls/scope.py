"""Crawl scope: is a canonical URL at a given depth part of this crawl?

``Scope.from_policy(policy)`` compiles the policy once; ``Scope.check(url, depth)`` returns
``None`` when the URL is in scope, else the first failing rule, checked in this order:

1. ``"host"``: the URL's host is not a seed host, not in ``allow_hosts`` and not equal to or
   under one of ``allow_domains``.  For seeds and ``allow_hosts`` a leading ``www.`` is ignored
   on both sides (``www.example.com`` and ``example.com`` are the same site); scheme and port
   never matter.  ``allow_domains`` entries must be registrable or below (``example.co.uk``,
   ``blog.example.com``), never a public suffix (``co.uk``): checked against the Public Suffix
   List snapshot bundled with ``publicsuffixlist``.  ``allow_hosts`` and
   ``allow_domains`` ADD to the seeds' hosts: the seeds themselves are always in scope.
2. ``"depth"``: ``depth > max_depth`` (seeds are depth 0; ``None`` means unlimited).
3. ``"exclude"``: one of the ``exclude`` regexes matches (a search on the canonical URL, with
   RE2: linear time whatever the pattern, see ``agents/urls/patterns.py``).
4. ``"include"``: there are ``include`` regexes and none matches.
5. Trap guards: ``"trap:url_length"`` (longer than ``max_url_length``), ``"trap:path_depth"``
   (more than ``max_path_depth`` non-empty path segments), ``"trap:repeated_segment"`` (one
   non-empty segment occurs ``max_segment_repeats`` times or more ANYWHERE in the path, not only
   consecutively: ``/a/b/a/b/a/`` is a trap at 3, and so is ``/cal/2024/cal/x/cal``; values
   below 2 disable this guard), ``"trap:session_id"`` (a session id in a path segment) and
   ``"trap:calendar"`` (a calendar page far from the current year); see ``agents/urls/traps.py``.

``max_pages`` is not checked here: the frontier counts pages.

A page's assets (docs/assets.md) have a scope of their own, ``Scope.check_asset``: their host
(any host, or with ``asset_hosts`` the crawl's own hosts and those), the ``exclude`` patterns and
the URL length; neither ``max_depth`` (an asset's depth counts steps from its page, bounded by
``agents/policy/assets.py``), ``include`` (written for pages) nor the path traps.

Every rule but ``"depth"`` depends on the URL alone (and, for the calendar, on the current
year), and a URL is checked once per page that links it (``agents/content/outlinks.py``) and
again when the frontier admits it: those reasons are kept per URL in a bounded LRU
(``CACHED_URLS``), emptied when the year changes.
"""

from __future__ import annotations

import datetime
import functools
import ipaddress
import time
from collections import Counter
from collections.abc import Callable, Iterable

from publicsuffixlist import PublicSuffixList

from streamcrawl.agents.errors import ConfigError, InvalidURL
from streamcrawl.agents.urls.canonical import CanonicalOptions, canonicalize
from streamcrawl.agents.urls.host import canonical_host
from streamcrawl.agents.urls.patterns import UrlPattern, compile_patterns
from streamcrawl.agents.urls.traps import calendar_out_of_range, session_in_path
from streamcrawl.schemas.records import CrawlPolicy

CACHED_URLS = 32768  # URLs whose depth-free scope reason a Scope remembers


@functools.cache
def _public_suffix_list() -> PublicSuffixList:
    # The snapshot bundled with the publicsuffixlist package; loaded once, at first use; never
    # fetched.
    return PublicSuffixList()


def registrable_domain(host: str) -> str | None:
    """The registrable domain (eTLD+1) of a canonical host: ``a.b.example.co.uk`` ->
    ``example.co.uk``.  ``None`` for IP addresses and for hosts that are public suffixes
    themselves (``co.uk``, ``localhost``).  Private-section suffixes count (``github.io``).
    """
    host = host.rstrip(".").lower()
    if not host or host.startswith("[") or _is_ip(host):
        return None
    domain: str | None = _public_suffix_list().privatesuffix(host)
    return domain


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _site(host: str) -> str:
    """The host with one leading "www." removed: how hosts are compared."""
    return host[4:] if host.startswith("www.") else host


class Scope:
    """The compiled scope rules of one crawl (see the module docstring for the rules)."""

    __slots__ = (
        "_asset_sites",
        "_clock",
        "_domains",
        "_exclude",
        "_include",
        "_max_depth",
        "_max_path_depth",
        "_max_repeats",
        "_max_url_length",
        "_reason",
        "_sites",
        "_year",
        "_year_span",
    )

    def __init__(
        self,
        *,
        sites: frozenset[str],
        domains: tuple[str, ...] = (),
        include: tuple[UrlPattern, ...] = (),
        exclude: tuple[UrlPattern, ...] = (),
        max_depth: int | None = None,
        max_url_length: int = 2048,
        max_path_depth: int = 32,
        max_segment_repeats: int = 3,
        asset_sites: frozenset[str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``asset_sites``: hosts an asset may be on besides ``sites`` and ``domains`` (None:
        any host). ``clock``: epoch seconds, for the calendar rule's current year (tests)."""
        self._asset_sites = asset_sites
        self._sites = sites
        self._domains = domains
        self._include = include
        self._exclude = exclude
        self._max_depth = max_depth
        self._max_url_length = max_url_length
        self._max_path_depth = max_path_depth
        self._max_repeats = max_segment_repeats
        self._clock = clock
        self._year = 0
        self._year_span = (0.0, 0.0)  # [start, end) of self._year in epoch seconds
        self._reason = functools.lru_cache(maxsize=CACHED_URLS)(self._url_reason)

    @classmethod
    def from_policy(cls, policy: CrawlPolicy) -> Scope:
        """Compile a policy's scope once.

        Raises ``ConfigError`` for an invalid seed, host, domain (including a public suffix such
        as ``co.uk``, which would admit a whole registry) or regex.
        """
        options = CanonicalOptions.from_policy(policy)
        seeds = (*policy.seeds, *policy.sitemap_seeds)  # a --sitemap seed's host is a seed's
        sites = {_site(_host_of(seed, options, "seed")) for seed in seeds}
        sites.update(
            _site(_host_of(host, options, "allow_hosts entry")) for host in policy.allow_hosts
        )
        domains = tuple(_allowed_domain(domain) for domain in policy.allow_domains)
        asset_sites = None
        if policy.asset_hosts is not None:
            asset_sites = frozenset(
                _site(_host_of(host, options, "asset_hosts entry")) for host in policy.asset_hosts
            )
        return cls(
            sites=frozenset(sites),
            domains=domains,
            include=_compile(policy.include, "include"),
            exclude=_compile(policy.exclude, "exclude"),
            max_depth=policy.max_depth,
            max_url_length=policy.max_url_length,
            max_path_depth=policy.max_path_depth,
            max_segment_repeats=policy.max_segment_repeats,
            asset_sites=asset_sites,
        )

    def check(self, url: str, depth: int) -> str | None:
        """``None`` when the canonical ``url`` at ``depth`` is in scope, else the reason."""
        self._keep_year()
        reason = self._reason(url)
        if reason == "host":
            return reason
        if self._max_depth is not None and depth > self._max_depth:
            return "depth"
        return reason

    def check_asset(self, url: str) -> str | None:
        """``None`` when the canonical ``url`` of a page asset is in the assets' scope, else the
        reason: ``"host"``, ``"exclude"`` or ``"trap:url_length"`` (see the module docstring)."""
        start = url.find("://") + 3
        slash = url.find("/", start)
        authority = url[start : slash if slash != -1 else len(url)]
        if self._asset_sites is not None and not (
            self._host_allowed(authority) or _site(_host_only(authority)) in self._asset_sites
        ):
            return "host"
        if any(pattern.search(url) for pattern in self._exclude):
            return "exclude"
        if len(url) > self._max_url_length:
            return "trap:url_length"
        return None

    def check_all(self, urls: Iterable[str], depth: int) -> list[str | None]:
        """``check`` of each URL at one ``depth``, in order (a page's links: one clock read and
        one depth test for them all)."""
        self._keep_year()
        reason = self._reason
        if self._max_depth is None or depth <= self._max_depth:
            return [reason(url) for url in urls]
        return ["host" if reason(url) == "host" else "depth" for url in urls]

    def _keep_year(self) -> None:
        now = self._clock()
        if not self._year_span[0] <= now < self._year_span[1]:
            self._new_year(now)

    def _new_year(self, now: float) -> None:
        """The calendar rule's window moved (or was never set): forget every cached reason."""
        year = datetime.datetime.fromtimestamp(now, datetime.UTC).year
        start = datetime.datetime(year, 1, 1, tzinfo=datetime.UTC).timestamp()
        end = datetime.datetime(year + 1, 1, 1, tzinfo=datetime.UTC).timestamp()
        self._year, self._year_span = year, (start, end)
        self._reason.cache_clear()

    def _url_reason(self, url: str) -> str | None:
        """Every rule of ``check`` except ``"depth"``, in the same order, for this year."""
        start = url.find("://") + 3
        slash = url.find("/", start)
        if slash == -1:
            slash = len(url)
        if not self._host_allowed(url[start:slash]):
            return "host"
        if any(pattern.search(url) for pattern in self._exclude):
            return "exclude"
        if self._include and not any(pattern.search(url) for pattern in self._include):
            return "include"
        if len(url) > self._max_url_length:
            return "trap:url_length"
        path, _, query = url[slash:].partition("?")
        trap = self._path_trap(path)
        if trap is None and session_in_path(path):
            trap = "trap:session_id"
        if trap is None and calendar_out_of_range(path, query, self._year):
            trap = "trap:calendar"
        return trap

    def _host_allowed(self, authority: str) -> bool:
        host = _host_only(authority)
        if _site(host) in self._sites:
            return True
        # Domains match the host as written: allow_domains=("www.example.com",) is not example.com.
        return any(host == domain or host.endswith("." + domain) for domain in self._domains)

    def _path_trap(self, path: str) -> str | None:
        segments = [segment for segment in path.split("/") if segment]
        if len(segments) > self._max_path_depth:
            return "trap:path_depth"
        repeats = self._max_repeats
        # A repeat count needs at least (repeats - 1) duplicates: skip Counter for most paths.
        if (
            repeats >= 2
            and len(segments) - len(set(segments)) >= repeats - 1
            and Counter(segments).most_common(1)[0][1] >= repeats
        ):
            return "trap:repeated_segment"
        return None


def _host_only(authority: str) -> str:
    """The host of ``host[:port]``."""
    if not authority.endswith("]"):  # IPv6 literals contain ":" but never a port inside
        return authority.partition(":")[0]
    if "]:" in authority:
        return authority[: authority.index("]:") + 1]
    return authority


def _host_of(value: str, options: CanonicalOptions, what: str) -> str:
    """The canonical host of a URL or of a bare ``host[:port]``."""
    url = value if "://" in value else f"http://{value}/"
    try:
        origin = canonicalize(url, options=options).origin
    except InvalidURL as exc:
        raise ConfigError(f"{what} {value!r} is not a valid http(s) URL or host: {exc}") from None
    authority = origin.partition("://")[2]
    return authority if authority.endswith("]") else authority.rpartition(":")[0] or authority


def _allowed_domain(value: str) -> str:
    try:
        domain = canonical_host(value.strip().strip("."))
    except InvalidURL as exc:
        raise ConfigError(f"allow_domains entry {value!r} is not a valid domain: {exc}") from None
    if registrable_domain(domain) is None:
        raise ConfigError(
            f"allow_domains entry {value!r} is a public suffix or an IP address; "
            "name a registrable domain such as example.co.uk (or use allow_hosts for an IP)"
        )
    return domain


def _compile(patterns: tuple[str, ...], what: str) -> tuple[UrlPattern, ...]:
    return compile_patterns(patterns, f"{what} pattern")
