"""One render: what the browser asked for, and how each request was answered.

The browser has no network of its own (``browser.py``): every request of a page is routed here.
The first main-frame navigation gets the document the crawl already fetched (a page is never
fetched twice); a later main-frame navigation (a script's ``location = ...``, a meta refresh) is
aborted and kept as the page's ``navigation``, for the frontier to queue as a link; images,
fonts and media are refused unless the renderer loads them; every other request goes to the
``Serve`` callable, which either answers it (``Served``) or says why not (a string).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

# Resource types a render refuses unless it loads them (Playwright's names): the crawl's
# ``--assets`` asks for them (``agents/policy/rendering.py``, ``render_loads``), or the process's
# ``RenderSettings.media`` for all.
MEDIA_TYPES: Final = frozenset({"image", "font", "media"})
# Seconds without a subrequest in flight after which a page counts as settled (Playwright's
# "networkidle" uses the same quiet time).
QUIET: Final = 0.5
# Response headers not passed on to the browser: the body handed over is decoded and whole.
_DROPPED_HEADERS: Final = frozenset(
    {"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"}
)


@dataclass(frozen=True)
class BrowserRequest:
    """A request the browser made: ``resource_type`` as Playwright names it (``document``,
    ``script``, ``fetch``, ``xhr``, ``stylesheet``...)."""

    url: str
    method: str
    resource_type: str


@dataclass(frozen=True)
class Served:
    """A response to hand to the browser: the status, headers and the decoded body."""

    status: int
    headers: dict[str, str]
    body: bytes


Serve = Callable[[BrowserRequest], Awaitable["Served | str"]]
"""Answers a subrequest (``Served``) or refuses it: the string is the reason, e.g.
``"cross_origin"``, ``"robots"``, ``"blocked"`` (the SSRF guard), ``"timeout"``."""


@dataclass(frozen=True)
class Subrequest:
    """One request the page made; ``refused``: why it was not answered (None: served)."""

    url: str
    resource_type: str
    refused: str | None = None


@dataclass
class Rendered:
    """What a render produced: the DOM as HTML (``page.content()``), how long it took, the
    page's subrequests, and where a script tried to send the page (None: it stayed)."""

    html: str
    render_ms: float
    subrequests: list[Subrequest]
    navigation: str | None = None

    @property
    def refused(self) -> int:
        return sum(1 for s in self.subrequests if s.refused is not None)


@dataclass
class PageRoutes:
    """The route handler of one page: serves the document once, then every subrequest through
    ``serve``, and records each."""

    url: str
    document: Served
    serve: Serve
    loads: frozenset[str] = frozenset()  # of MEDIA_TYPES, those this render loads
    max_subrequests: int = 100
    subrequests: list[Subrequest] = field(default_factory=list)
    navigation: str | None = None
    document_served: bool = False
    pending: int = 0  # subrequests being answered
    last: float = field(default_factory=time.monotonic)  # when the last one began or ended

    async def settled(self, timeout: float) -> None:
        """Return once no subrequest has been in flight for ``QUIET`` seconds, or after
        ``timeout`` (a page that keeps polling is taken as it is then)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pending == 0 and time.monotonic() - self.last >= QUIET:
                return
            await asyncio.sleep(QUIET / 5)

    async def handle(self, route: Any) -> None:
        """Playwright's route handler: every request of the page passes here."""
        from playwright.async_api import Error as PlaywrightError

        # The page may close while its request is being answered: then nothing is answered.
        with contextlib.suppress(PlaywrightError):
            await self._answer(route, route.request)

    async def _answer(self, route: Any, request: Any) -> None:
        if request.is_navigation_request() and request.frame.parent_frame is None:
            await self._navigation(route, request.url)
            return
        refusal = self._refusal(request.resource_type, request.method)
        answer = (
            refusal
            if refusal is not None
            else await self._served(
                BrowserRequest(request.url, request.method, request.resource_type)
            )
        )
        if isinstance(answer, str):
            self.subrequests.append(Subrequest(request.url, request.resource_type, answer))
            await route.abort("blockedbyclient")
            return
        self.subrequests.append(Subrequest(request.url, request.resource_type))
        await fulfill(route, answer)

    async def _served(self, request: BrowserRequest) -> Served | str:
        self.pending += 1
        self.last = time.monotonic()
        try:
            return await self.serve(request)
        finally:
            self.pending -= 1
            self.last = time.monotonic()

    def _refusal(self, resource_type: str, method: str) -> str | None:
        """Why a subrequest is refused before anything is sent; None: it may be served."""
        if resource_type in MEDIA_TYPES and resource_type not in self.loads:
            return "media"
        if method != "GET":
            return "method"  # a crawler reads; it does not post forms or beacons
        if len(self.subrequests) >= self.max_subrequests:
            return "too_many"
        return None

    async def _navigation(self, route: Any, url: str) -> None:
        if not self.document_served:
            self.document_served = True
            await fulfill(route, self.document)
            return
        # The page tries to leave: the target is a link for the frontier, not followed here.
        if self.navigation is None:
            self.navigation = url
        self.subrequests.append(Subrequest(url, "document", "navigation"))
        await route.abort("aborted")


async def fulfill(route: Any, served: Served) -> None:
    """Hand ``served`` to the browser (headers that described the wire encoding dropped)."""
    headers = {k: v for k, v in served.headers.items() if k.lower() not in _DROPPED_HEADERS}
    await route.fulfill(status=served.status, headers=headers, body=served.body)
