"""A local site of two origins that wants what users shape requests for (docs/requests.md).

Origin A (``a``): ``/`` links to ``/hdr``, ``/login`` and B's ``/``; ``/hdr`` answers 403 unless
the request has ``X-Team: blue``; ``/login`` sets a session cookie and redirects to
``/members``, which (like ``/members/2``, which it links) answers 401 without that cookie.
Origin B (``b``): every path, robots.txt included, answers 401 without basic auth of
``USER``/``password``; ``/`` links to ``/b2`` and back to A's ``/hdr``.

Both servers record every request (``tests/httpserver.py``), so a test can check what each
origin was sent: the credential only to B, the header on every request, the cookie after login.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiohttp import web

from tests.httpserver import RecordingServer, html, text

USER = "crawler"
SESSION = "sid=s3ss10n-" + uuid.uuid4().hex[:8]


@dataclass
class Site:
    a: RecordingServer
    b: RecordingServer
    password: str

    @property
    def basic(self) -> str:
        """The Authorization header value B wants."""
        token = base64.b64encode(f"{USER}:{self.password}".encode()).decode()
        return f"Basic {token}"

    def expected_fetched(self) -> set[str]:
        a, b = self.a.url, self.b.url
        return {a("/"), a("/hdr"), a("/login"), a("/members/2"), b("/"), b("/b2")}


async def _needs_header(request: web.Request) -> web.Response:
    if request.headers.get("X-Team") != "blue":
        return web.Response(status=403, text="forbidden")
    return web.Response(text="<title>team page</title>", content_type="text/html")


def _members(links: str) -> object:
    async def handler(request: web.Request) -> web.Response:
        if SESSION not in request.headers.get("Cookie", ""):
            return web.Response(status=401, text="log in first")
        return web.Response(text=f"<title>members</title>{links}", content_type="text/html")

    return handler


def _basic(password: str, body: str, content_type: str = "text/html") -> object:
    wanted = "Basic " + base64.b64encode(f"{USER}:{password}".encode()).decode()

    async def handler(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != wanted:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="b"'})
        return web.Response(text=body, content_type=content_type)

    return handler


@asynccontextmanager
async def request_site(password: str) -> AsyncIterator[Site]:
    """Both origins, serving; ``password`` is B's (a canary the tests search for)."""
    async with RecordingServer() as a, RecordingServer() as b:
        a.routes.update(
            {
                "/robots.txt": text("User-agent: *\nAllow: /\n"),
                "/": html(
                    f'<a href="/hdr">team</a> <a href="/login">log in</a> '
                    f'<a href="{b.url("/")}">partner</a>'
                ),
                "/hdr": _needs_header,
                "/login": (
                    302,
                    {"Location": "/members", "Set-Cookie": f"{SESSION}; Path=/; HttpOnly"},
                    b"",
                ),
                "/members": _members('<a href="/members/2">more</a>'),
                "/members/2": _members(""),
            }
        )
        b.routes.update(
            {
                "/robots.txt": _basic(password, "User-agent: *\nAllow: /\n", "text/plain"),
                "/": _basic(password, f'<a href="/b2">b2</a> <a href="{a.url("/hdr")}">a</a>'),
                "/b2": _basic(password, "<title>b2</title>"),
            }
        )
        yield Site(a, b, password)
