"""The browser's requests, on the crawl's own network path.

A rendered page's scripts, stylesheets, XHRs and frames are not fetched by the browser (it has
no network: ``agents/render/browser.py``) but here, by ``fetch`` over the process's session:
the SSRF guard judges each resolved address, the proxy carries it, the dispatch's
``RequestContext`` gives it the crawl's headers, cookies and credential for the origin, and the
crawl's recorder archives it (a request/response pair in the WARC, as for the page).

The rule (docs/rendering.md, "The network path"):

- same origin as the page, unless the wiring can borrow other origins' slots (``OtherOrigins``:
  the embedded crawl's scheduler lends them, the Kafka render worker borrows them from their
  owners): without it a subrequest to another origin is refused (``cross_origin``), it would
  need that origin's robots.txt and its own politeness slot; with it, a subrequest to another
  origin in the crawl's asset scope (else ``scope``) is fetched in that origin's slot, under
  its robots.txt (``agents/net/other_origins.py``);
- robots.txt of the origin is obeyed (``robots``);
- one at a time, each ``delay`` seconds (the crawl's delay, or robots.txt's Crawl-delay) after
  the previous request to the origin was on the wire, the page's own fetch first: the render
  holds the origin's slot, and it is as polite as the crawl; with ``OtherOrigins`` whose lender
  lends the page's own origin (the embedded crawl), its subrequests too are sent in loans of
  its slot (the owner freed it when the page's fetch ended), so that two pages rendered at
  once, each fetching from the other's origin, do not wait for each other's render to end;
- a redirect is followed within the origin only; an error is the fetch's error class
  (``blocked``: the guard refused the address, ``timeout``, ``http_4xx``...).
"""

from __future__ import annotations

import asyncio
import time
from typing import Final

import aiohttp
import msgspec

from streamcrawl.agents.errors import FetchError
from streamcrawl.agents.frontier.scheduler import Dispatch
from streamcrawl.agents.net.capture import Recorder
from streamcrawl.agents.net.fetch import fetch
from streamcrawl.agents.net.other_origins import OtherOrigins
from streamcrawl.agents.net.request import RequestContext
from streamcrawl.agents.policy import rendering
from streamcrawl.agents.render.page import BrowserRequest, Served
from streamcrawl.agents.robots.rules import RobotsRules, robots_url

# What a page's subrequests may be: scripts, styles, data, frames (images, fonts and media are
# refused before they get here unless the renderer loads them).
SUBREQUEST_TYPES: Final = (
    "text/html",
    "application/xhtml+xml",
    "text/javascript",
    "application/javascript",
    "application/x-javascript",
    "text/ecmascript",
    "application/ecmascript",
    "application/json",
    "application/ld+json",
    "text/css",
    "text/plain",
    "text/xml",
    "application/xml",
    "image/svg+xml",
    "application/wasm",
)
# And what a render that loads images, fonts or media (``PageRoutes.loads``) takes of them.
LOADED_TYPES: Final = {
    "image": (
        "image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp",
        "image/x-icon", "image/vnd.microsoft.icon",
    ),
    "font": (
        "font/woff", "font/woff2", "font/ttf", "font/otf", "application/font-woff",
        "application/font-woff2", "application/x-font-ttf", "application/vnd.ms-fontobject",
    ),
    "media": (
        "video/mp4", "video/webm", "video/ogg", "audio/mpeg", "audio/ogg", "audio/wav",
        "audio/webm", "audio/mp4", "application/vnd.apple.mpegurl", "application/dash+xml",
    ),
}  # fmt: skip


def subrequest_types(loads: frozenset[str]) -> tuple[str, ...]:
    """The content types a render's subrequests take, with those of the types it loads."""
    return SUBREQUEST_TYPES + tuple(t for kind in sorted(loads) for t in LOADED_TYPES[kind])


class Subrequests:
    """Serves the browser's requests of one dispatch's render (a ``Serve`` callable).

    ``last_sent``: when the previous request to the origin was on the wire (the page's own
    fetch first); ``others``: how requests to other origins are made (None: refused);
    ``close`` cancels what is still in flight, so that nothing is sent for the page once its
    render ended."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        d: Dispatch,
        request: RequestContext,
        recorder: Recorder | None,
        last_sent: float,
        others: OtherOrigins | None = None,
    ) -> None:
        self.session = session
        self.d = d
        self.request = request
        self.recorder = recorder
        self.last_sent = last_sent
        self.others = others
        self.delay = d.rules.delay_for(d.robots)
        self.loads = rendering.render_loads(d.rules.policy.assets)
        types = subrequest_types(self.loads)
        self.policy = msgspec.structs.replace(d.rules.policy, content_types=types)
        self._turn = asyncio.Lock()
        self._tasks: set[asyncio.Task[Served | str]] = set()
        self.closed = False

    async def __call__(self, browser: BrowserRequest) -> Served | str:
        url = browser.url.partition("#")[0]
        origin, reason = self._target(url)
        if reason is not None or self.closed:
            return reason or "closed"
        if origin == self.d.origin:
            task = asyncio.ensure_future(self._fetch(url))
        else:
            assert self.others is not None
            rules, policy = self.d.rules, self.policy
            task = asyncio.ensure_future(
                self.others.fetch(url, origin, rules, policy, self.recorder)
            )
        self._tasks.add(task)
        try:
            return await task
        except asyncio.CancelledError:
            return "closed"
        finally:
            self._tasks.discard(task)

    async def close(self) -> None:
        """Cancel the subrequests still in flight; later ones are refused (``closed``)."""
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _target(self, url: str) -> tuple[str, str | None]:
        """The origin of a subrequest to ``url`` and why it is refused (None: it is not, so
        far: another origin's robots.txt is read by ``OtherOrigins``)."""
        canon = self.d.rules.canonicalizer.try_canonicalize(url)
        if canon is None:
            return "", "bad_url"
        if canon.origin == self.d.origin:
            return canon.origin, self._refusal(url)
        if self.others is None:
            return canon.origin, "cross_origin"
        # A resource of an in-scope page: the scope of the crawl's assets (docs/rendering.md).
        if self.d.rules.scope.check_asset(canon.url) is not None:
            return canon.origin, "scope"
        return canon.origin, None

    def _refusal(self, url: str) -> str | None:
        """Why ``url`` is not fetched within the page's origin (the rule of the module
        docstring); None: it is."""
        canon = self.d.rules.canonicalizer.try_canonicalize(url)
        if canon is None:
            return "bad_url"
        if canon.origin != self.d.origin:
            return "cross_origin"
        robots = self.d.robots
        if (
            robots is not None
            and url != robots_url(self.d.origin)
            and not robots.allowed(canon.url, self.policy.user_agent)
        ):
            return "robots"
        return None

    async def _fetch(self, url: str) -> Served | str:
        if self.others is not None and self.others.owner.lends_own:  # lent (module doc)
            robots = self.d.robots or RobotsRules.allow_everything()
            answer, sent = await self.others.send(
                url, self.d.origin, self.d.rules, self.policy, self.recorder, self.request, robots
            )
            if sent is not None:
                self.last_sent = max(self.last_sent, sent)
            return answer
        async with self._turn:
            wait = self.last_sent + self.delay - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                result = await fetch(
                    self.session,
                    url,
                    self.policy,
                    hop_check=self._hop_check,
                    hop_delay=self.delay,
                    recorder=self.recorder,
                    request=self.request,
                )
            except FetchError as exc:
                self.last_sent = time.time()
                return str(exc.error_class)
            self.last_sent = result.sent_at
        if result.stopped is not None:
            return result.stopped
        return Served(result.status, result.headers, result.body)

    def _hop_check(self, target: str) -> str | None:
        """A subrequest's redirect is followed within the origin, as robots.txt allows."""
        return self._refusal(target)
