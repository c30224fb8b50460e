"""A crawl's request options, checked and compiled: the headers each origin gets, the cookie
presets, the credential each origin is sent (by name).

Pure: no I/O. The CLI parses flags with ``parse_header`` and ``parse_origin``; every wiring
compiles a spec with ``RequestPlan.from_policy`` (part of ``CrawlRules``), which refuses what
no flag could have produced (a spec from another producer), so a worker never sends a framing
header or a credential a spec smuggled in as a plain header. docs/requests.md is the user's
side of this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import msgspec

from streamcrawl.agents.errors import ConfigError, InvalidURL
from streamcrawl.agents.urls.cookies import preset
from streamcrawl.agents.urls.scope import Scope
from streamcrawl.schemas.records import (
    Cookie,
    CookiePreset,
    CrawlPolicy,
    HeaderName,
    HeaderValue,
)

ACCEPT: Final = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"
# No zstd: the zstandard decompressobj has no output limit, so it is not bomb-safe.
ACCEPT_ENCODING: Final = "gzip, deflate, br"

# Headers a crawl may not set, lower-case, each with the one line that says why (or what to use
# instead). Framing and hop-by-hop headers (RFC 9110 7.6.1, RFC 9112): the HTTP client writes
# them, and a wrong one desynchronises the connection. The others have a flag of their own, or
# are the crawler's to send: a credential in a header would travel in the spec.
FORBIDDEN: Final[Mapping[str, str]] = {
    "host": "the crawler sends the URL's own Host",
    "content-length": "a framing header: the HTTP client writes it",
    "transfer-encoding": "a framing header: the HTTP client writes it",
    "connection": "a hop-by-hop header: the HTTP client manages connections",
    "keep-alive": "a hop-by-hop header: the HTTP client manages connections",
    "proxy-connection": "a hop-by-hop header: the HTTP client manages connections",
    "te": "a hop-by-hop header: the HTTP client manages connections",
    "trailer": "a hop-by-hop header: the HTTP client manages connections",
    "upgrade": "a hop-by-hop header: the HTTP client manages connections",
    "expect": "a framing header: the crawler sends no request body",
    "accept-encoding": "the crawler decodes gzip, deflate and br only, within --max-body",
    "range": "the crawler reads whole bodies",
    "if-none-match": "revisits send their own validators",
    "if-modified-since": "revisits send their own validators",
    "user-agent": "use --user-agent (its product token selects the robots.txt group)",
    "cookie": "use --cookies and --cookie-for ORIGIN 'name=value'",
    "authorization": "use --auth-for ORIGIN NAME: credentials never travel in a crawl spec",
    "proxy-authorization": "proxies are a process setting: --proxy and --proxy-credential",
}


def crawler_headers(user_agent: str) -> dict[str, str]:
    """The headers the crawler sends with every request, before a crawl's own."""
    return {"User-Agent": user_agent, "Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING}


def check_header(name: str, value: str) -> None:
    """``ConfigError`` (one line) unless a crawl may send ``name: value``."""
    try:
        msgspec.convert(name, HeaderName)
    except msgspec.ValidationError:
        raise ConfigError(f"header name {name!r} is not an HTTP token") from None
    try:
        msgspec.convert(value, HeaderValue)
    except msgspec.ValidationError:
        raise ConfigError(
            f"the value of header {name} must be one line of at most 8192 characters"
        ) from None
    why = FORBIDDEN.get(name.lower())
    if why is not None:
        raise ConfigError(f"header {name} cannot be set by a crawl: {why}")


def parse_header(text: str) -> tuple[str, str]:
    """``'Name: value'`` -> ``("Name", "value")``; ``ConfigError`` (one line) if malformed or
    not allowed (``FORBIDDEN``)."""
    name, colon, value = text.partition(":")
    if not colon:
        raise ConfigError(f"header {text[:80]!r} is not 'Name: value'")
    name, value = name.strip(), value.strip()
    check_header(name, value)
    return name, value


def parse_origin(text: str) -> str:
    """The origin (``scheme://host[:port]``, canonical) a per-origin option names; a URL with a
    path is refused, so that nobody reads a path-scoped option into it."""
    from streamcrawl.agents.urls.canonical import canonicalize

    try:
        canon = canonicalize(text)
    except InvalidURL as exc:
        raise ConfigError(f"origin {text[:80]!r} is not an http(s) origin: {exc}") from None
    if canon.url.rstrip("/") != canon.origin:
        raise ConfigError(f"{text[:80]!r} is not an origin: give scheme://host[:port] only")
    return canon.origin


@dataclass(frozen=True)
class RequestPlan:
    """What every request of one crawl carries, per origin: built once per crawl.

    ``headers_for(origin)`` is the full header set of a request to ``origin`` (robots.txt
    included) before validators, cookies and the credential: the crawl's headers over the
    crawler's own (Accept, Accept-Encoding, User-Agent), then the origin's over those.
    """

    common: Mapping[str, str]
    by_origin: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    credentials: Mapping[str, str] = field(default_factory=dict)  # origin -> credential name
    presets: Mapping[str, tuple[Cookie, ...]] = field(default_factory=dict)  # origin -> jar
    cookies: bool = False

    @classmethod
    def from_policy(cls, policy: CrawlPolicy, scope: Scope | None = None) -> RequestPlan:
        """``ConfigError`` (one line) for a header a crawl may not set, or a per-origin option
        that names no origin, or (with the crawl's ``scope``) an origin outside its hosts: a
        header, cookie or credential for an origin the crawl never fetches is a mistake."""
        common = crawler_headers(policy.user_agent)
        by_origin: dict[str, dict[str, str]] = {}
        for header in policy.headers:
            check_header(header.name, header.value)
            if header.origin is None:
                _put(common, header.name, header.value)
            else:
                origin = _in_scope(scope, parse_origin(header.origin), "--header-for")
                _put(by_origin.setdefault(origin, {}), header.name, header.value)
        credentials: dict[str, str] = {}
        for auth in policy.auth:
            origin = parse_origin(auth.origin)
            _in_scope(scope, origin, "--auth-for")
            if credentials.setdefault(origin, auth.credential) != auth.credential:
                raise ConfigError(f"two credentials named for {origin}: give one --auth-for")
        return cls(
            common=common,
            by_origin=_merged(common, by_origin),
            credentials=credentials,
            presets=_presets(policy.cookie_presets, scope),
            cookies=policy.cookies or bool(policy.cookie_presets),
        )

    def headers_for(self, origin: str) -> Mapping[str, str]:
        return self.by_origin.get(origin, self.common)


def _put(headers: dict[str, str], name: str, value: str) -> None:
    """Set ``name`` (case-insensitively replacing an earlier one)."""
    for old in [k for k in headers if k.lower() == name.lower()]:
        del headers[old]
    headers[name] = value


def _merged(
    common: Mapping[str, str], by_origin: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for origin, headers in by_origin.items():
        merged = dict(common)
        for name, value in headers.items():
            _put(merged, name, value)
        out[origin] = merged
    return out


def check_cookie(pair: str) -> tuple[str, str]:
    """``'name=value'`` -> ``(name, value)``: a cookie a crawl presets (RFC 6265 4.1.1: the
    name a token, the value without ``;``, ``,``, ``"``, ``\\``, spaces or controls);
    ``ConfigError`` (one line) otherwise."""
    name, eq, value = pair.partition("=")
    if not eq or not name:
        raise ConfigError(f"cookie {pair[:80]!r} is not 'name=value'")
    try:
        msgspec.convert(name, HeaderName)
    except msgspec.ValidationError:
        raise ConfigError(f"cookie name {name[:80]!r} is not an HTTP token") from None
    if any(c in _COOKIE_VALUE_BAD or not c.isprintable() or c.isspace() for c in value):
        raise ConfigError(f"the value of cookie {name} holds a character RFC 6265 refuses")
    return name, value


_COOKIE_VALUE_BAD: Final = frozenset(';,"\\')


def _in_scope(scope: Scope | None, origin: str, flag: str) -> str:
    if scope is not None and scope.check(origin + "/", 0) == "host":
        raise ConfigError(f"{flag} {origin}: not a host this crawl fetches (its scope)")
    return origin


def _presets(
    presets: tuple[CookiePreset, ...], scope: Scope | None
) -> dict[str, tuple[Cookie, ...]]:
    """Each origin's preset cookies, made once per crawl (a later one of a name replaces an
    earlier one, as a server's would)."""
    out: dict[str, dict[str, Cookie]] = {}
    for p in presets:
        origin = _in_scope(scope, parse_origin(p.origin), "--cookie-for")
        check_cookie(p.cookie)
        cookie = preset(origin, p.cookie)
        out.setdefault(origin, {})[cookie.name] = cookie
    return {o: tuple(c.values()) for o, c in out.items()}
