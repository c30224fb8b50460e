"""A small web site whose pages change, served by ``RecordingServer``, for continuous crawling.

Usage::

    site = LivingSite(["/", "/a", "/b"], clock=(clock := ManualClock()))
    async with RecordingServer(site.routes()) as srv:
        ...  # crawl srv.url("/")
        clock.advance(60)
        site.change("/a")  # new body (it names the version), new ETag and Last-Modified
        site.touch("/b")  # new ETag and Last-Modified, same body
        ...  # revisit
        assert site.conditional("/b")[1] == (site.served("/b")[0].etag, None)

Each page answers per its mode: ``validators`` sends ETag and Last-Modified and answers 304
(no body) to a matching If-None-Match, or, when no If-None-Match was sent, to an
If-Modified-Since at or after Last-Modified (RFC 9110 13.1.2, 13.1.3 and 13.2.2);
``ignore`` sends them and always answers 200; ``none`` sends neither. Validator formats are
per page, some unusual on purpose (``ODD_ETAG``, ``rfc850`` dates) so a test can check that a
crawler echoes them byte for byte. Every request is recorded (``Served``) with the time of the
site's clock, the clock of ``history``, so a test or bench can tell how fresh a copy was.
Mutations and records are guarded by one lock: the sync server answers from its own thread.
"""

from __future__ import annotations

import bisect
import email.utils
import enum
import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

from aiohttp import web

Mode = Literal["validators", "ignore", "none"]
DateStyle = Literal["imf", "rfc850", "asctime"]

# ETag templates: {p} the page's index, {v} its version, {r} its validator revision (touches).
STRONG_ETAG = '"p{p}-v{v}.{r}"'
WEAK_ETAG = 'W/"p{p}-v{v}.{r}"'
ODD_ETAG = '"p{p}, v{v} r{r}"'  # a comma and spaces inside the quotes

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_ENTITY_TAG = re.compile(r'\s*(?:W/)?"([^"]*)"\s*(?:,|$)')
_HTML = "text/html; charset=utf-8"


class _Keep(enum.Enum):
    KEEP = 0  # configure(): leave this setting as it is


KEEP = _Keep.KEEP


class ManualClock:
    """A clock a test moves by hand: ``clock()`` is ``now``; ``advance(s)`` adds to it."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def http_date(t: float, style: DateStyle = "imf") -> str:
    """``t`` (epoch seconds, truncated) as an HTTP-date: IMF-fixdate or one of the obsolete
    RFC 850 and asctime formats (RFC 9110 5.6.7). Locale-free."""
    d = datetime.fromtimestamp(int(t), UTC)
    day, month = _DAYS[d.weekday()], _MONTHS[d.month - 1]
    if style == "imf":
        return f"{day}, {d:%d} {month} {d:%Y %H:%M:%S} GMT"
    if style == "rfc850":
        return f"{_WEEKDAYS[d.weekday()]}, {d:%d}-{month}-{d:%y %H:%M:%S} GMT"
    return f"{day} {month} {d.day:2d} {d:%H:%M:%S %Y}"


def parse_http_date(value: str) -> float | None:
    """Epoch seconds of an HTTP-date in any of its three formats, exactly as ``http_date``
    writes them; None for anything else (RFC 9110 13.1.3: an invalid date is ignored)."""
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    t = parsed.replace(tzinfo=parsed.tzinfo or UTC).timestamp()
    styles: tuple[DateStyle, ...] = ("imf", "rfc850", "asctime")
    return t if any(http_date(t, s) == value for s in styles) else None


def etag_matches(if_none_match: str, etag: str) -> bool:
    """Whether an If-None-Match list matches ``etag`` by weak comparison (RFC 9110 8.8.3.2):
    ``*``, or any listed tag with the same opaque-tag, ``W/`` ignored on either side."""
    if if_none_match.strip() == "*":
        return True
    tags = _ENTITY_TAG.findall(if_none_match)
    return etag.removeprefix("W/").strip('"') in tags


@dataclass(frozen=True)
class Served:
    """One request the site answered: the site clock's time, the exact If-None-Match and
    If-Modified-Since received (None if absent), the status, the page version answered, the
    body bytes sent, and the ETag and Last-Modified sent (None if none)."""

    path: str
    t: float
    method: str
    if_none_match: str | None
    if_modified_since: str | None
    status: int
    version: int
    body_bytes: int
    etag: str | None
    last_modified: str | None


@dataclass
class _Page:
    index: int
    links: list[str]
    template: str | None
    mode: Mode
    etag: str | None
    dates: DateStyle | None
    version: int = 1
    revision: int = 0
    modified: float = 0.0  # time of the last change or touch: Last-Modified
    gone: int | None = None
    lastmod: float | str | None = None  # the sitemap's <lastmod> when set explicitly
    history: list[tuple[float, int]] = field(default_factory=list)


class LivingSite:
    """Pages whose content and validators change when a test says so.

    ``pages``: paths, or a mapping of path to its links (a list of paths) or to its own HTML
    (a ``str``; ``{version}`` in it is replaced by the version, else ``<p>version N</p>`` is
    appended). By default ``/`` links every other page and the others link ``/``.
    ``mode``, ``etag`` (a template as ``STRONG_ETAG``, None: no ETag) and ``dates`` (None: no
    Last-Modified) apply to every page until ``configure`` changes them.
    """

    def __init__(
        self,
        pages: Iterable[str] | Mapping[str, Sequence[str] | str],
        *,
        clock: Callable[[], float] = time.time,
        mode: Mode = "validators",
        etag: str | None = STRONG_ETAG,
        dates: DateStyle | None = "imf",
        sitemap: bool = True,
    ) -> None:
        spec: Mapping[str, Sequence[str] | str | None] = (
            pages if isinstance(pages, Mapping) else dict.fromkeys(pages)
        )
        self.clock = clock
        self.sitemap = sitemap
        self._lock = threading.Lock()
        self._served: list[Served] = []
        now = clock()
        self._pages: dict[str, _Page] = {}
        for i, (path, value) in enumerate(spec.items()):
            custom = isinstance(value, str)
            links = _default_links(path, spec) if value is None or custom else list(value)
            template = value if isinstance(value, str) else None
            page = _Page(i, links, template, mode, etag, dates, modified=now, history=[(now, 1)])
            self._pages[path] = page

    # -- what a test changes -----------------------------------------------------------------
    def change(self, path: str) -> int:
        """A new version of ``path``: new body, ETag and Last-Modified. Returns the version.
        Last-Modified has one-second resolution: a test that relies on it moves the clock a
        second or more between changes."""
        with self._lock:
            page = self._pages[path]
            now = self.clock()
            page.version += 1
            page.revision = 0
            page.modified = now
            page.history.append((now, page.version))
            return page.version

    def touch(self, path: str) -> None:
        """New ETag and Last-Modified for the same body (validators that change alone)."""
        with self._lock:
            page = self._pages[path]
            page.revision += 1
            page.modified = self.clock()

    def remove(self, path: str, status: int = 404) -> None:
        """``path`` answers ``status`` (404 or 410) until ``restore``; not in the sitemap."""
        with self._lock:
            self._pages[path].gone = status

    def restore(self, path: str) -> None:
        """``path`` answers its current version again."""
        with self._lock:
            self._pages[path].gone = None

    def configure(
        self,
        *paths: str,
        mode: Mode | None = None,
        etag: str | _Keep | None = KEEP,
        dates: DateStyle | _Keep | None = KEEP,
    ) -> None:
        """Set the ``mode``, ``etag`` template (None: no ETag) and/or ``dates`` style (None: no
        Last-Modified) of ``paths``, default every page; what is not passed stays."""
        with self._lock:
            for path in paths or list(self._pages):
                page = self._pages[path]
                page.mode = mode or page.mode
                page.etag = page.etag if isinstance(etag, _Keep) else etag
                page.dates = page.dates if isinstance(dates, _Keep) else dates

    def set_lastmod(self, path: str, value: float | str | None) -> None:
        """The sitemap's ``<lastmod>`` of ``path``: epoch seconds (a future one too), a raw
        string sent as is, or None for the time of its last change."""
        with self._lock:
            self._pages[path].lastmod = value

    # -- what it served ----------------------------------------------------------------------
    def served(self, path: str | None = None) -> list[Served]:
        """Requests answered, for ``path`` or all, in the order answered."""
        with self._lock:
            return [s for s in self._served if path is None or s.path == path]

    def conditional(self, path: str) -> list[tuple[str | None, str | None]]:
        """(If-None-Match, If-Modified-Since) of each request for ``path``, exact strings."""
        return [(s.if_none_match, s.if_modified_since) for s in self.served(path)]

    def statuses(self, path: str) -> list[int]:
        """The status of each answer for ``path``."""
        return [s.status for s in self.served(path)]

    def history(self, path: str) -> list[tuple[float, int]]:
        """(time, version) of each content change of ``path``, creation first; touches and
        removals are not changes."""
        with self._lock:
            return list(self._pages[path].history)

    def version(self, path: str) -> int:
        """The current version of ``path``."""
        with self._lock:
            return self._pages[path].version

    def version_at(self, path: str, t: float) -> int:
        """The version ``path`` had at time ``t`` (0 before the site existed)."""
        history = self.history(path)
        i = bisect.bisect_right([when for when, _ in history], t)
        return history[i - 1][1] if i else 0

    def body(self, path: str) -> bytes:
        """The body a 200 for ``path`` carries now."""
        with self._lock:
            return self._body(path, self._pages[path])

    def sent_etag(self, path: str) -> str | None:
        """The ETag of the last answer for ``path`` (None: none sent, or no answer yet); the
        earlier ones are in ``served(path)[i].etag``."""
        served = self.served(path)
        return served[-1].etag if served else None

    def sent_last_modified(self, path: str) -> str | None:
        """The Last-Modified of the last answer for ``path`` (None: none sent or no answer)."""
        served = self.served(path)
        return served[-1].last_modified if served else None

    # -- serving -----------------------------------------------------------------------------
    def routes(self) -> dict[str, Any]:
        """Routes for ``RecordingServer``: every page, ``/robots.txt`` (allow all) and, with
        ``sitemap``, ``/sitemap.xml``."""
        routes: dict[str, Any] = {path: partial(self._serve, path) for path in self._pages}
        routes["/robots.txt"] = self._robots
        if self.sitemap:
            routes["/sitemap.xml"] = self._sitemap
        return routes

    async def _serve(self, path: str, request: web.Request) -> web.StreamResponse:
        with self._lock:
            served, response = self._answer(path, request)
            self._served.append(served)
        return response

    def _answer(self, path: str, request: web.Request) -> tuple[Served, web.Response]:
        page = self._pages[path]
        inm = request.headers.get("If-None-Match")
        ims = request.headers.get("If-Modified-Since")
        headers = _validators(page)
        if page.gone is not None:
            # RFC 9110 13.2.1: preconditions only apply to an answer that would be 2xx.
            status, headers, body = page.gone, {"Content-Type": _HTML}, b"<p>gone</p>"
        elif page.mode == "validators" and _not_modified(page, inm, ims, headers):
            status, body = 304, b""
        else:
            status, body = 200, self._body(path, page)
            headers["Content-Type"] = _HTML
        sent = 0 if request.method == "HEAD" else len(body)
        served = Served(
            path, self.clock(), request.method, inm, ims, status, page.version, sent,
            headers.get("ETag"), headers.get("Last-Modified"),
        )  # fmt: skip
        return served, web.Response(status=status, headers=headers, body=body or None)

    @staticmethod
    def _body(path: str, page: _Page) -> bytes:
        if page.template is not None:
            body = page.template.replace("{version}", str(page.version))
            named = "{version}" in page.template
            return (body if named else f"{body}<p>version {page.version}</p>").encode()
        links = "".join(f'<li><a href="{link}">{link}</a></li>' for link in page.links)
        return (
            f"<!doctype html><html><head><title>{path} v{page.version}</title></head><body>"
            f"<h1>{path}</h1><p>version {page.version}</p><ul>{links}</ul></body></html>"
        ).encode()

    async def _robots(self, request: web.Request) -> web.StreamResponse:
        lines = ["User-agent: *", "Allow: /"]
        if self.sitemap:
            lines.append(f"Sitemap: {request.scheme}://{request.host}/sitemap.xml")
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def _sitemap(self, request: web.Request) -> web.StreamResponse:
        """The sitemap, with an ETag of its content (it changes when a listed lastmod does),
        answered 304 to a matching If-None-Match; recorded like a page."""
        origin = f"{request.scheme}://{request.host}"
        with self._lock:
            rows = [
                f"<url><loc>{origin}{path}</loc><lastmod>{_lastmod(page)}</lastmod></url>"
                for path, page in self._pages.items()
                if page.gone is None
            ]
            xmlns = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
            doc = f'<?xml version="1.0" encoding="UTF-8"?><urlset {xmlns}>{"".join(rows)}</urlset>'
            etag = f'"s-{hashlib.sha1(doc.encode()).hexdigest()[:16]}"'
            inm = request.headers.get("If-None-Match")
            status = 304 if inm is not None and etag_matches(inm, etag) else 200
            body = doc.encode() if status == 200 else b""
            self._served.append(
                Served(
                    "/sitemap.xml",
                    self.clock(),
                    request.method,
                    inm,
                    request.headers.get("If-Modified-Since"),
                    status,
                    0,
                    len(body),
                    etag,
                    None,
                )
            )
        headers = {"ETag": etag}
        if status == 200:
            headers["Content-Type"] = "application/xml"
        return web.Response(status=status, headers=headers, body=body or None)


def _default_links(path: str, paths: Iterable[str]) -> list[str]:
    """The home page links every other page; the others link the home page, if there is one."""
    others = [p for p in paths if p != path]
    return others if path == "/" else [p for p in others if p == "/"]


def _validators(page: _Page) -> dict[str, str]:
    """The ETag and Last-Modified ``page`` sends now (none in mode ``none``)."""
    headers: dict[str, str] = {}
    if page.mode != "none" and page.etag is not None:
        headers["ETag"] = page.etag.format(p=page.index, v=page.version, r=page.revision)
    if page.mode != "none" and page.dates is not None:
        headers["Last-Modified"] = http_date(page.modified, page.dates)
    return headers


def _not_modified(page: _Page, inm: str | None, ims: str | None, headers: dict[str, str]) -> bool:
    """Whether a GET of ``page`` with these conditions is answered 304."""
    # RFC 9110 13.2.2: If-None-Match decides when present; If-Modified-Since only without it.
    if inm is not None:
        return "ETag" in headers and etag_matches(inm, headers["ETag"])
    since = parse_http_date(ims) if ims is not None else None
    return since is not None and "Last-Modified" in headers and int(page.modified) <= since


def _lastmod(page: _Page) -> str:
    """A page's sitemap ``<lastmod>``: the explicit one, else its last change (W3C datetime)."""
    if isinstance(page.lastmod, str):
        return page.lastmod
    t = page.history[-1][0] if page.lastmod is None else page.lastmod
    return datetime.fromtimestamp(int(t), UTC).isoformat()
