"""A hostile web on local servers: crawl traps, decode bombs, a drip, deep nesting, a page of
100,000 links, NULs and bad UTF-8, huge headers, a huge robots.txt, a robots.txt redirect loop,
redirects to other schemes. ``expected`` says which terminal state each URL must end in.

Three origins: ``main`` (the traps and bad pages, linked from ``/``), ``big_robots`` (a
robots.txt of 600 KiB whose rules past the first 500 KiB must be ignored, RFC 9309 section
2.5) and ``loop_robots`` (robots.txt redirects in a loop: unavailable, so everything allowed).
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Callable

from aiohttp import web

from tests.httpserver import RecordingServer, Reply, bomb, html, redirect, stream, text

LINKS = 100_000
BOMB = 200 * 1024 * 1024  # decoded bytes of each bomb; a few hundred KB on the wire
MAX_BODY = 8 * 1024 * 1024  # the crawl's max_body: every bomb ends too_large
TIMEOUT = 2.0  # the crawl's per-request deadline: the drip ends failed (timeout)
ELSEWHERE = "http://elsewhere.test"  # out of scope: its links are never fetched
PAGES = (
    "/cal/{this_month}",
    "/sess?sid={sid}",
    "/s/{sid}/a",
    "/rep/a/",
    "/bomb/gzip",
    "/bomb/deflate",
    "/bomb/br",
    "/bomb/nested",
    "/drip",
    "/deep",
    "/links",
    "/nul",
    "/headers",
    "/header-line",
    "/to-ftp",
    "/to-javascript",
    "/to-file",
)


def _session_id() -> str:
    return secrets.token_hex(16)


def _month(day: datetime.date, months: int) -> str:
    index = day.year * 12 + day.month - 1 + months
    return f"{index // 12:04d}-{index % 12 + 1:02d}"


def calendar() -> Callable[[web.Request], object]:
    """``/cal/YYYY-MM`` links to the previous and the next month, forever."""

    async def handler(request: web.Request) -> web.StreamResponse:
        year, month = (int(x) for x in request.path.rsplit("/", 1)[-1].split("-"))
        day = datetime.date(year, month, 1)
        links = f'<a href="/cal/{_month(day, -1)}">prev</a><a href="/cal/{_month(day, 1)}">n</a>'
        return web.Response(text=f"<html>{links}</html>", content_type="text/html")

    return handler


async def _query_session(request: web.Request) -> web.StreamResponse:
    """Every page links to itself and a sibling under a new session id (query)."""
    links = f'<a href="/sess?sid={_session_id()}">me</a><a href="/sess/b?sid={_session_id()}">b</a>'
    return web.Response(text=f"<html>{links}</html>", content_type="text/html")


async def _path_session(request: web.Request) -> web.StreamResponse:
    """Every page links to two pages under a new session id in the path."""
    sid = _session_id()
    links = f'<a href="/s/{sid}/a">a</a><a href="/s/{sid}/b">b</a>'
    return web.Response(text=f"<html>{links}</html>", content_type="text/html")


async def _repeated(request: web.Request) -> web.StreamResponse:
    """``/rep/a/`` links to ``a/`` relative: /rep/a/a/, /rep/a/a/a/, ..."""
    return web.Response(text='<html><a href="a/">deeper</a></html>', content_type="text/html")


def _nested_gzip() -> Reply:
    import gzip

    inner = gzip.compress(b"\0" * BOMB)
    return Reply(
        headers={"Content-Type": "text/html", "Content-Encoding": "gzip, gzip"},
        body=gzip.compress(inner),
    )


def main_routes(today: datetime.date) -> dict[str, object]:
    """Routes of the main origin (``{sid}`` in the seed links is filled per server)."""
    sid = _session_id()
    this_month = _month(today, 0)
    seeds = [p.format(this_month=this_month, sid=sid) for p in PAGES]
    index = "".join(f'<a href="{p}">x</a>' for p in seeds)
    deep = "<div>" * 200_000 + '<a href="/after-deep">x</a>' + "</div>" * 200_000
    many = "".join(f'<a href="{ELSEWHERE}/p{i}">{i}</a>' for i in range(LINKS))
    nul = b"<html><title>n\x00l</title>\xff\xfe\x80<a href='/after-nul'>\x00x</a>\xc3\x28</html>"
    many_headers = {f"X-Filler-{i}": "v" * 1000 for i in range(64)}  # 64 KiB of headers
    return {
        "/robots.txt": text("User-agent: *\nAllow: /\n"),
        "/": html(f"<html><body>{index}</body></html>"),
        "/cal/": calendar(),
        "/sess": _query_session,
        "/sess/b": _query_session,
        "/s/": _path_session,
        "/rep/": _repeated,
        "/bomb/gzip": bomb(BOMB, "gzip"),
        "/bomb/deflate": bomb(BOMB, "deflate"),
        "/bomb/br": bomb(BOMB, "br"),
        "/bomb/nested": _nested_gzip(),
        "/drip": stream(100, chunk=1, chunk_delay=1.0),
        "/deep": html(deep),
        "/after-deep": html("<p>never linked: past the nesting cut</p>"),
        "/links": html(f"<html><body>{many}</body></html>"),
        "/nul": Reply(headers={"Content-Type": "text/html; charset=utf-8"}, body=nul),
        "/after-nul": html("<p>ok</p>"),
        "/headers": Reply(headers={"Content-Type": "text/html", **many_headers}, body=b"<p>h</p>"),
        "/header-line": Reply(
            headers={"Content-Type": "text/html", "X-Huge": "v" * 64 * 1024}, body=b"<p>h</p>"
        ),
        "/to-ftp": redirect("ftp://127.0.0.1/file"),
        "/to-javascript": redirect("javascript:alert(1)"),
        "/to-file": redirect("file:///etc/passwd"),
    }


def big_robots_routes() -> dict[str, object]:
    early = "User-agent: *\nDisallow: /private\n"
    filler = "# " + "x" * 98 + "\n"
    late = "Disallow: /late\n"
    body = early + filler * (600 * 1024 // len(filler)) + late
    return {
        "/robots.txt": text(body),
        "/": html('<a href="/private">p</a><a href="/late">l</a>'),
        "/private": html("<p>private</p>"),
        "/late": html("<p>late</p>"),
    }


def loop_robots_routes() -> dict[str, object]:
    return {
        "/robots.txt": redirect("/robots-a"),
        "/robots-a": redirect("/robots-b"),
        "/robots-b": redirect("/robots.txt"),
        "/": html('<a href="/page">p</a>'),
        "/page": html("<p>allowed: robots.txt is unavailable</p>"),
    }


def serve(srv: RecordingServer, routes: dict[str, object]) -> None:
    srv.routes.update(routes)  # type: ignore[arg-type]
