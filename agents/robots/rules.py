"""robots.txt (RFC 9309) and X-Robots-Tag decisions; pure (the file is fetched by
``agents/net/robots_fetch.py``).

What a robots.txt response means (RFC 9309 section 2.3.1):

- 2xx: the body is parsed (protego) and rules are matched on our product token;
- 3xx left after 5 followed redirects, and every 4xx (401, 403, 404, 429 alike): "unavailable",
  everything is allowed;
- ``ROBOTS_BLOCKED`` (0, not an HTTP status): the SSRF guard refused the address of the file
  (or of a redirect target), so no request was sent: "unavailable", everything is allowed,
  cached only for ``robots_error_ttl``. Each page fetch then meets the same guard and ends
  ``blocked`` (or, after a DNS change, is fetched and the file is asked for again soon);
- 5xx, another status, or no response at all (``status is None``: DNS, refused, timeout):
  "unreachable", everything is disallowed, and the caller caches that only for
  ``policy.robots_error_ttl`` (see ``robots_expiry``).

Only the first ``ROBOTS_MAX_BYTES`` (500 KiB, the RFC's minimum) of a body are parsed.

Known deviation, from protego 0.7: a group matches when its name is found in our product token
at a token start, so a ``User-agent: stream`` group would also apply to ``streamcrawl`` (the RFC
wants the whole token). The most specific (longest) matching group still wins.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Iterable, Mapping
from typing import Final

from protego import Protego

from streamcrawl.schemas.records import CrawlPolicy

log = logging.getLogger(__name__)

ROBOTS_MAX_BYTES: Final = 500 * 1024
ROBOTS_MAX_REDIRECTS: Final = 5
ROBOTS_BLOCKED: Final = 0  # the robots_status of a fetch the SSRF guard refused

# RFC 9309 section 2.2.1: the product token is [a-zA-Z_-]+.
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]+")


def robots_url(origin: str) -> str:
    """``"https://example.com:8443"`` -> ``"https://example.com:8443/robots.txt"``."""
    return origin.rstrip("/") + "/robots.txt"


@functools.lru_cache(maxsize=64)
def product_token(user_agent: str) -> str:
    """The RFC 9309 product token of a User-Agent, lower-cased; ``""`` if it has none.

    >>> product_token("streamcrawl/0.1 (+https://example.com)")
    'streamcrawl'
    """
    match = _PRODUCT_TOKEN.match(user_agent.strip())
    return match.group(0).lower() if match else ""


def robots_text(body: str | bytes) -> str:
    """The first 500 KiB of a robots.txt as text, without a partial last line (a cut rule
    could mean anything); a body of more than ``ROBOTS_MAX_BYTES`` reads as cut."""
    if isinstance(body, str):
        # Re-encode only when the text could be over the cap (a char is at most 4 bytes).
        if len(body) * 4 <= ROBOTS_MAX_BYTES:
            return body.removeprefix("\ufeff")
        body = body.encode("utf-8", errors="replace")
    if len(body) > ROBOTS_MAX_BYTES:
        body = body[:ROBOTS_MAX_BYTES]
        cut = max(body.rfind(b"\n"), body.rfind(b"\r"))
        body = body[: cut + 1] if cut >= 0 else b""
    # RFC 9309: robots.txt is UTF-8; bad bytes must not make the whole file unusable.
    return body.decode("utf-8", errors="replace").removeprefix("\ufeff")


class RobotsRules:
    """The rules of one origin's robots.txt; build with ``from_response`` (or ``allow_everything``
    / ``disallow_everything``). Cheap to query: protego caches the matched group per agent."""

    __slots__ = ("_parser", "allow_all", "disallow_all")

    def __init__(
        self, parser: Protego | None, *, allow_all: bool = False, disallow_all: bool = False
    ) -> None:
        self._parser = parser
        self.allow_all = allow_all and not disallow_all
        self.disallow_all = disallow_all

    @classmethod
    def allow_everything(cls) -> RobotsRules:
        return cls(None, allow_all=True)

    @classmethod
    def disallow_everything(cls) -> RobotsRules:
        return cls(None, disallow_all=True)

    @classmethod
    def from_response(cls, status: int | None, body: str | bytes | None) -> RobotsRules:
        """Rules for a robots.txt response (see the module docstring); never raises."""
        if status == ROBOTS_BLOCKED:
            return cls.allow_everything()
        if status is None or not 200 <= status <= 499:
            return cls.disallow_everything()
        if status >= 300 or not body:
            return cls.allow_everything()
        try:
            parser = Protego.parse(robots_text(body))
        except Exception:  # a parser bug on hostile input must not stop the crawl of an origin
            log.warning("robots.txt could not be parsed; treating it as empty", exc_info=True)
            return cls.allow_everything()
        return cls(parser)

    @property
    def unreachable(self) -> bool:
        """True for the "disallow everything" of a 5xx or failed fetch."""
        return self.disallow_all

    def allowed(self, url: str, user_agent: str) -> bool:
        """May ``user_agent`` (a full User-Agent; matched on its product token) fetch ``url``?"""
        if self._parser is None:
            return not self.disallow_all
        return self._parser.can_fetch(url, product_token(user_agent))

    def crawl_delay(self, user_agent: str) -> float | None:
        """The Crawl-delay of the group matching ``user_agent``, in seconds; None if absent or
        not a finite non-negative number. Callers cap it (``policy.max_crawl_delay``)."""
        if self._parser is None:
            return None
        delay = self._parser.crawl_delay(product_token(user_agent))
        if delay is None or not math.isfinite(delay) or delay < 0:
            return None
        return float(delay)

    def sitemaps(self) -> list[str]:
        """Sitemap URLs listed anywhere in the file, in order."""
        return [] if self._parser is None else list(self._parser.sitemaps)


def robots_expiry(status: int | None, now: float, policy: CrawlPolicy) -> float:
    """When a robots.txt fetched at ``now`` must be fetched again: ``robots_error_ttl`` after a
    5xx/unreachable (its "disallow everything" is temporary) or a guard refusal (the address
    may change), else ``robots_ttl``."""
    unreachable = status is None or not 200 <= status <= 499
    return now + (policy.robots_error_ttl if unreachable else policy.robots_ttl)


# --- X-Robots-Tag -------------------------------------------------------------------------

# Directives that carry a value after ":"; anything else before a ":" is a user-agent scope.
_VALUED_DIRECTIVES: Final = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)


_DIRECTIVE_NAME: Final = re.compile(r"[a-z][a-z_-]*").fullmatch


def robots_directives(content: str) -> set[str]:
    """Directive names in a robots meta/header value; ``none`` adds noindex and nofollow.

    >>> sorted(robots_directives("NoIndex, max-snippet:20 ,none"))
    ['max-snippet', 'nofollow', 'noindex', 'none']
    """
    out: set[str] = set()
    for part in content.split(","):
        name = part.partition(":")[0].strip().lower()
        if _DIRECTIVE_NAME(name):  # skips e.g. the pieces of a date that contained a comma
            out.add(name)
    if "none" in out:
        out.update(("noindex", "nofollow"))
    return out


def x_robots_tag(headers: Mapping[str, str], user_agent: str) -> frozenset[str]:
    """Directives of the X-Robots-Tag header(s) that apply to us: unscoped ones, and those
    scoped to our product token (``"streamcrawl: noindex"``); ``"googlebot: ..."`` is ignored.

    A scope applies to the directives after it in the same header value, until the next scope.
    With a multidict every header is read separately. With a plain dict whose repeated headers
    were joined with ", " (as ``FetchResult.headers``) a scoped header followed by an unscoped
    one reads as one scope, so in that rare layout an unscoped directive can be missed.
    """
    getall = getattr(headers, "getall", None)
    if getall is not None:
        values: Iterable[str] = getall("X-Robots-Tag", [])
    else:
        value = headers.get("x-robots-tag") or headers.get("X-Robots-Tag")
        values = [value] if value else []
    token = product_token(user_agent)
    out: set[str] = set()
    for value in values:
        scope: str | None = None
        for part in value.split(","):
            head, sep, rest = part.partition(":")
            head = head.strip().lower()
            if sep and head not in _VALUED_DIRECTIVES and " " not in head:
                scope, part = head, rest
            if scope is None or scope == token:
                out |= robots_directives(part)
    return frozenset(out)
