"""Cookies of a crawl (``--cookies``, ``--cookie-for``): RFC 6265 as pure functions on a jar.

A jar is a tuple of ``schemas.records.Cookie`` kept in its origin's state. Nothing here reads a
clock or does I/O: the time is an argument, so the frontier (the single writer of that state)
applying a replayed outcome's Set-Cookie lines with the outcome's own time gets the same jar.

- ``receive(jar, set_cookie, url, now)``: one Set-Cookie header value received from ``url``,
  parsed (RFC 6265 section 5.2) and stored (5.3); the new jar.
- ``header_for(jar, url, now)``: the Cookie header to send to ``url`` (5.4), or None.
- ``preset(origin, pair)``: the cookie a ``name=value`` given on the command line sets.
- ``prune(jar, now)``: the jar without its expired cookies.
- ``parse_date(text)``: a cookie date (5.1.1) in epoch seconds.

From RFC 6265bis, the rules that change what a crawler sends: over http a response can neither
set a Secure cookie nor replace or shadow one; the ``__Secure-`` and ``__Host-`` name prefixes
(any case); an expiry at most ``MAX_AGE`` seconds ahead; a line with a control character is
ignored. SameSite and Partitioned are ignored: every request of a crawl is a top-level one. A
line without "=" is ignored (RFC 6265; not a nameless cookie as in RFC 6265bis).

Bounds, so that a site cannot grow its origin's state: a Set-Cookie value over ``MAX_LINE``
bytes is ignored unread, a cookie whose name, value, domain and path are over ``MAX_COOKIE``
bytes is ignored, and a jar keeps ``MAX_COOKIES``: the expired go first, then the oldest created.

Parsed by hand, step by step as the RFC's algorithms say, because no kept library fits:
``http.cookies.SimpleCookie`` drops a whole header for a space in a value or a flag it does
not know (``Partitioned``) and reads other attributes (``Priority=High``) as cookies;
``http.cookiejar``'s lenient parser and date parser
(``parse_ns_headers``, ``http2time``) are outside its ``__all__``, its ``CookieJar`` reads the
clock, and ``http2time`` refuses dates 5.1.1 accepts (asctime's, JavaScript's ``Thu Jan 01 1970
00:00:00 GMT+0000``); ``email.utils.parsedate_to_datetime`` applies zone offsets 5.1.1 ignores,
reads the year 69 as 1969 (5.1.1: 2069) and refuses other dates (``10:18:14.123``); aiohttp's
parser is private; the PyPI packages for RFC 6265 are unmaintained (``cookies``) or unproven.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit

import msgspec

from streamcrawl.agents.errors import InvalidURL
from streamcrawl.agents.urls.host import canonical_host
from streamcrawl.agents.urls.scope import registrable_domain
from streamcrawl.schemas.records import Cookie

MAX_COOKIES = 50  # cookies per jar
MAX_COOKIE = 4096  # bytes of a cookie's name, value, domain and path
MAX_LINE = 8192  # bytes of a Set-Cookie value
MAX_AGE = 400 * 86400  # the furthest expiry, in seconds from now (RFC 6265bis)

_WSP = " \t"
# Control characters but tab (RFC 6265bis ignores a line that has one), and lone surrogates:
# bytes of a header that were not UTF-8, which a stored jar could not encode.
_FORBIDDEN = re.compile("[\x00-\x08\x0a-\x1f\x7f\ud800-\udfff]")
_PRESET_FORBIDDEN = re.compile("[\x00-\x1f\x7f\ud800-\udfff;]")
_MAX_AGE_VALUE = re.compile("-?[0-9]+")
# RFC 6265 5.1.1: the delimiters between the tokens of a date, and the tokens it looks for.
_DATE_DELIMITERS = re.compile("[\x09\x20-\x2f\x3b-\x40\x5b-\x60\x7b-\x7e]+")
_TIME = re.compile("([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:[^0-9]|$)")
_DAY = re.compile("([0-9]{1,2})(?:[^0-9]|$)")
_YEAR = re.compile("([0-9]{2,4})(?:[^0-9]|$)")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


class _Request(NamedTuple):
    scheme: str
    host: str  # canonical (agents.urls.host)
    path: str  # starts with "/"


@dataclass(slots=True)
class _Attributes:
    """The cookie-av list of one Set-Cookie value, each valid attribute replacing an earlier one
    of its name (5.2.1-5.2.6). ``path``: None without a Path attribute, "" for the default path."""

    expires: float | None = None
    max_age: float | None = None
    domain: str | None = None
    path: str | None = None
    secure: bool = False
    http_only: bool = False


def receive(jar: tuple[Cookie, ...], set_cookie: str, url: str, now: float) -> tuple[Cookie, ...]:
    """The jar after the Set-Cookie header value ``set_cookie`` was received from ``url`` at
    ``now`` (epoch seconds): the cookie it sets added, or replacing the one of the same name,
    domain and path (whose ``created`` it keeps), or that one deleted (an expiry in the past).

    A value that breaks a rule is ignored, never raised. The result holds no cookie expired at
    ``now`` and at most ``MAX_COOKIES``; it is ``jar`` itself when nothing changed.
    """
    request = _request(url)
    cookie = None if request is None else _parse(set_cookie, request, now)
    if cookie is None or request is None:
        return prune(jar, now)
    if request.scheme != "https" and _shadows_secure(jar, cookie):
        return prune(jar, now)
    kept = []
    created = now
    for old in jar:
        if old.name == cookie.name and old.domain == cookie.domain and old.path == cookie.path:
            created = old.created
        else:
            kept.append(old)
    kept.append(msgspec.structs.replace(cookie, created=created))
    return _evict(prune(tuple(kept), now))  # an expiry in the past: deleted here


def header_for(jar: tuple[Cookie, ...], url: str, now: float) -> str | None:
    """The value of the Cookie header to send with a request for ``url`` at ``now`` (5.4):
    the jar's unexpired cookies whose domain and path match the URL (Secure ones over https
    only), longer paths first, then the earlier created. None when no cookie applies.

    >>> jar = receive((), "sid=1; Path=/a", "https://example.com/a/b", 0.0)
    >>> jar = receive(jar, "lang=en", "https://example.com/", 1.0)
    >>> header_for(jar, "https://example.com/a", 2.0)
    'sid=1; lang=en'
    """
    request = _request(url)
    if request is None:
        return None
    chosen = [cookie for cookie in jar if _applies(cookie, request, now)]
    if not chosen:
        return None
    chosen.sort(key=lambda cookie: (-len(cookie.path), cookie.created))
    return "; ".join(f"{cookie.name}={cookie.value}" for cookie in chosen)


def preset(origin: str, pair: str) -> Cookie:
    """The cookie ``--cookie-for ORIGIN 'name=value'`` sets: a session cookie for the origin's
    host only, every path, not Secure (sent over the origin's own scheme); ``created`` 0, so it
    goes first on its path. A server may replace it (same name, path "/").

    Raises ValueError, with a one-line reason that never quotes the value (it may be a secret),
    when the origin is not an http(s) URL or the pair has no "=", an empty name, a ";" or a
    control character, or is over ``MAX_COOKIE`` bytes with the host.
    """
    request = _request(origin)
    if request is None:
        raise ValueError(f"cookie origin {origin!r} is not an http(s) URL with a host")
    name, eq, value = pair.partition("=")
    name, value = name.strip(_WSP), value.strip(_WSP)
    where = f"cookie for {request.scheme}://{request.host}"
    if not eq:
        raise ValueError(f"{where}: no '=' (expected name=value)")
    if not name:
        raise ValueError(f"{where}: empty name (expected name=value)")
    if _PRESET_FORBIDDEN.search(pair):
        raise ValueError(f"{where} {name[:40]!r}: a ';' or a control character in name=value")
    cookie = Cookie(name=name, value=value, domain=request.host)
    if _size(cookie) > MAX_COOKIE:
        raise ValueError(f"{where} {name[:40]!r}: longer than {MAX_COOKIE} bytes")
    return cookie


def prune(jar: tuple[Cookie, ...], now: float) -> tuple[Cookie, ...]:
    """The jar without the cookies expired at ``now``; ``jar`` itself when none is."""
    kept = tuple(cookie for cookie in jar if cookie.expires is None or cookie.expires > now)
    return jar if len(kept) == len(jar) else kept


def parse_date(text: str) -> float | None:
    """The epoch seconds of a cookie date (RFC 6265 5.1.1: a time, a day, a month and a year
    found among the tokens in any order, always UTC); None when ``text`` is none.

    >>> parse_date("Wed, 09-Jun-21 10:18:14 GMT")
    1623233894.0
    >>> parse_date("Thu Jan 01 1970 00:00:00 GMT+0100")
    0.0
    """
    hms = day = month = year = None
    for token in _DATE_DELIMITERS.split(text):
        if hms is None and (found := _TIME.match(token)):
            hms = tuple(int(part) for part in found.groups())
        elif day is None and (found := _DAY.match(token)):
            day = int(found[1])
        elif month is None and token[:3].lower() in _MONTHS:
            month = _MONTHS.index(token[:3].lower()) + 1
        elif year is None and (found := _YEAR.match(token)):
            year = int(found[1])
    if hms is None or day is None or month is None or year is None:
        return None
    year += 1900 if 70 <= year <= 99 else 2000 if year <= 69 else 0
    hour, minute, second = hms
    if year < 1601 or hour > 23 or minute > 59 or second > 59:
        return None
    try:
        moment = datetime.datetime(year, month, day, hour, minute, second, tzinfo=datetime.UTC)
    except ValueError:  # a day out of range for its month, or 0
        return None
    return moment.timestamp()


def _request(url: str) -> _Request | None:
    """The scheme, canonical host and path of an http(s) URL; None for any other text."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        if parts.scheme not in ("http", "https") or not host:
            return None
        host = canonical_host(f"[{host}]" if ":" in host else host)
    except (ValueError, InvalidURL):
        return None
    return _Request(parts.scheme, host, parts.path if parts.path[:1] == "/" else "/")


def _parse(line: str, request: _Request, now: float) -> Cookie | None:
    """The cookie a Set-Cookie value received for ``request`` sets (5.2; 5.3, steps 1-10 and
    the prefixes of RFC 6265bis); None when the value is to be ignored."""
    if len(line) > MAX_LINE or _FORBIDDEN.search(line) or len(line.encode()) > MAX_LINE:
        return None
    pair, _, rest = line.partition(";")
    name, eq, value = pair.partition("=")
    name, value = name.strip(_WSP), value.strip(_WSP)
    if not eq or not name:
        return None
    attributes = _attributes(rest, now)
    domain = _domain(attributes.domain, request.host)
    if domain is None or (attributes.secure and request.scheme != "https"):
        return None
    path = attributes.path or _default_path(request.path)
    if not _prefix_allows(name.lower(), attributes, path):
        return None
    expires = attributes.expires if attributes.max_age is None else attributes.max_age
    cookie = Cookie(
        name=name,
        value=value,
        domain=domain or request.host,
        host_only=not domain,
        path=path,
        secure=attributes.secure,
        http_only=attributes.http_only,
        expires=None if expires is None else min(expires, now + MAX_AGE),
        created=now,
    )
    return cookie if _size(cookie) <= MAX_COOKIE else None


def _attributes(text: str, now: float) -> _Attributes:
    """The attributes after the name=value pair (5.2, 5.2.1-5.2.6); unknown ones are skipped."""
    found = _Attributes()
    for item in text.split(";"):
        key, _, value = item.partition("=")
        key, value = key.strip(_WSP).lower(), value.strip(_WSP)
        if key == "expires":
            date = parse_date(value)
            found.expires = found.expires if date is None else date
        elif key == "max-age" and _MAX_AGE_VALUE.fullmatch(value):
            found.max_age = _max_age(value, now)
        elif key == "domain" and value:
            found.domain = value[1:] if value[0] == "." else value
        elif key == "path":
            found.path = value if value[:1] == "/" else ""
        elif key == "secure":
            found.secure = True
        elif key == "httponly":
            found.http_only = True
    return found


def _max_age(value: str, now: float) -> float:
    """The expiry a Max-Age of digits, maybe negative, gives (5.2.2): zero or less, the
    earliest time there is; else ``now`` plus that many seconds, at most ``MAX_AGE``."""
    digits = value.lstrip("0")
    if value[0] == "-" or not digits:
        return float("-inf")
    return now + (MAX_AGE if len(digits) > len(str(MAX_AGE)) else min(int(digits), MAX_AGE))


def _domain(attribute: str | None, host: str) -> str | None:
    """The domain of a domain cookie, "" for a host-only cookie, None when the Domain attribute
    makes the cookie ignored: not a host, a public suffix other than the host itself (5.3, step
    5: the Public Suffix List bundled with ``publicsuffixlist``), or not matching the host."""
    if attribute is None:
        return ""
    try:
        domain = canonical_host(attribute)
    except InvalidURL:
        return None
    if registrable_domain(domain) is None:  # a public suffix, or an IP address
        return "" if domain == host else None
    return domain if _domain_match(host, domain) else None


def _prefix_allows(name: str, attributes: _Attributes, path: str) -> bool:
    """Whether the RFC 6265bis name prefixes allow a cookie of lower-case ``name``: ``__secure-``
    needs Secure; ``__host-`` needs Secure, no Domain, and a Path attribute giving "/"."""
    if name.startswith("__secure-"):
        return attributes.secure
    if name.startswith("__host-"):
        has_path = attributes.path is not None
        return attributes.secure and attributes.domain is None and has_path and path == "/"
    return True


def _shadows_secure(jar: tuple[Cookie, ...], cookie: Cookie) -> bool:
    """Whether the jar has a Secure cookie that a cookie set over http would replace or shadow:
    the same name, either domain matching the other, and a path of the new one under the old
    one's (RFC 6265bis, "leave secure cookies alone")."""
    return any(
        old.secure
        and old.name == cookie.name
        and (_domain_match(old.domain, cookie.domain) or _domain_match(cookie.domain, old.domain))
        and _path_match(cookie.path, old.path)
        for old in jar
    )


def _applies(cookie: Cookie, request: _Request, now: float) -> bool:
    """Whether ``cookie`` goes with ``request`` at ``now`` (5.4, step 1)."""
    if cookie.expires is not None and cookie.expires <= now:
        return False
    if cookie.secure and request.scheme != "https":
        return False
    if cookie.host_only:
        return request.host == cookie.domain and _path_match(request.path, cookie.path)
    return _domain_match(request.host, cookie.domain) and _path_match(request.path, cookie.path)


def _domain_match(host: str, domain: str) -> bool:
    """5.1.3: the host is the domain, or a name (not an IP address) ending in "." + domain."""
    if host == domain:
        return True
    is_ip = host[:1] == "[" or host.rpartition(".")[2].isdigit()  # canonical hosts only
    return not is_ip and host.endswith("." + domain)


def _path_match(request_path: str, cookie_path: str) -> bool:
    """5.1.4: the request path is the cookie path, or under it as a directory."""
    if not request_path.startswith(cookie_path):
        return False
    rest = request_path[len(cookie_path) :]
    return not rest or cookie_path.endswith("/") or rest[0] == "/"


def _default_path(path: str) -> str:
    """5.1.4: the request path up to, not including, its last "/"; "/" when that is empty."""
    return path[: path.rfind("/")] or "/"


def _size(cookie: Cookie) -> int:
    parts = (cookie.name, cookie.value, cookie.domain, cookie.path)
    return sum(len(part.encode()) for part in parts)


def _evict(jar: tuple[Cookie, ...]) -> tuple[Cookie, ...]:
    """The jar without its least recently created cookies beyond ``MAX_COOKIES``."""
    excess = len(jar) - MAX_COOKIES
    if excess <= 0:
        return jar
    order = sorted(range(len(jar)), key=lambda index: (jar[index].created, index))
    dropped = set(order[:excess])
    return tuple(cookie for index, cookie in enumerate(jar) if index not in dropped)
