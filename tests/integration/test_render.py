"""The renderer (agents/render/) and the browser's network path (agents/net/subrequests.py),
with Debian's Chromium, against local servers that record what they were asked.

Each test renders a document the crawl "already fetched" (handed to the renderer, never asked
of the server again) and serves the page's subrequests through ``Subrequests``: streamcrawl's
session, SSRF guard, robots.txt, politeness and the crawl's headers. docs/rendering.md.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator

import pytest

from streamcrawl.agents.errors import ErrorClass, RenderError
from streamcrawl.agents.frontier.scheduler import Dispatch
from streamcrawl.agents.net.fetch import make_session
from streamcrawl.agents.net.network import Network
from streamcrawl.agents.net.subrequests import Subrequests
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.render.browser import Renderer, RenderSettings, default_chromium
from streamcrawl.agents.render.page import Rendered, Served
from streamcrawl.agents.robots.rules import RobotsRules
from streamcrawl.schemas.records import CrawlPolicy, QueueEntry, RequestHeader
from tests.fakedns import StaticResolver
from tests.httpserver import LOOPBACK_GUARD, RecordingServer, html, slow, text

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not os.access(default_chromium(), os.X_OK), reason="no Chromium"),
]

APP = """<title>app</title><div id=root></div>
<script>
fetch('/data.json').then(r => r.json()).then(urls => {
  root.innerHTML = urls.map(u => `<a href="${u}">${u}</a>`).join('');
}).catch(e => { root.innerHTML = '<p id=failed>failed</p>'; });
</script>"""
LINKS = text('["/a", "/b"]', "application/json")
FAST = RenderSettings(navigation_timeout=3.0, settle_timeout=2.0)


@pytest.fixture
async def renderer() -> AsyncIterator[Renderer]:
    r = Renderer(FAST)
    try:
        yield r
    finally:
        await r.close()


def dispatch(url: str, origin: str, **fields: object) -> Dispatch:
    fields = {"delay": 0.0, **fields}
    policy = CrawlPolicy(crawl_id="render", seeds=(url,), **fields)  # type: ignore[arg-type]
    entry = QueueEntry(crawl_id="render", url=url, depth=0)
    robots = RobotsRules.from_response(200, "User-agent: *\nDisallow: /private\n")
    return Dispatch("page", origin, 1, entry, CrawlRules.from_policy(policy), robots=robots)


async def render(
    renderer: Renderer,
    url: str,
    origin: str,
    body: str,
    *,
    resolver: StaticResolver | None = None,
    **fields: object,
) -> Rendered:
    """Render ``body`` as the document of ``url``, its subrequests served by streamcrawl."""
    d = dispatch(url, origin, **fields)
    network = Network(guard=LOOPBACK_GUARD, resolver=resolver)
    request = network.request(d)
    assert not isinstance(request, str)
    session = make_session(guard=network.guard, resolver=resolver)
    serve = Subrequests(session, d, request, None, last_sent=0.0)
    document = Served(200, {"content-type": "text/html"}, body.encode())
    try:
        return await renderer.render(origin, url, document, serve, loads=serve.loads)
    finally:
        await serve.close()
        await session.close()


async def test_a_page_built_from_same_origin_json_is_rendered_through_our_path(
    renderer: Renderer,
) -> None:
    async with RecordingServer({"/data.json": LINKS}) as srv:
        header = RequestHeader(name="X-Team", value="blue")
        rendered = await render(renderer, srv.url("/"), srv.origin, APP, headers=(header,))
    assert '<a href="/a">/a</a><a href="/b">/b</a>' in rendered.html
    # The JSON came from the server once, asked by streamcrawl (the crawl's header and user
    # agent); the document itself was never asked for again.
    assert srv.paths() == ["/data.json"]
    asked = srv.requests("/data.json")[0].headers
    assert asked["X-Team"] == "blue"
    assert asked["User-Agent"] == CrawlPolicy(crawl_id="x").user_agent
    assert [(s.resource_type, s.refused) for s in rendered.subrequests] == [("fetch", None)]
    assert rendered.render_ms > 0


async def test_an_address_the_guard_refuses_is_refused_and_the_page_still_renders(
    renderer: Renderer,
) -> None:
    # The page's host now resolves to an internal address (DNS rebinding): streamcrawl's
    # resolver decides, its guard refuses, nothing is dialled; the browser resolves nothing.
    async with RecordingServer({"/data.json": LINKS}) as srv:
        port = srv.url("/").rsplit(":", 1)[1].rstrip("/")
        resolver = StaticResolver({"rebind.test": [["10.0.0.5"]]})
        url = f"http://rebind.test:{port}/"
        rendered = await render(renderer, url, f"http://rebind.test:{port}", APP, resolver=resolver)
    assert '<p id="failed">failed</p>' in rendered.html
    assert [s.refused for s in rendered.subrequests] == [ErrorClass.BLOCKED]
    assert rendered.refused == 1
    assert renderer.refused == {ErrorClass.BLOCKED: 1}  # the render worker's metric
    assert srv.paths() == []


async def test_cross_origin_robots_and_media_are_refused_by_rule(renderer: Renderer) -> None:
    async with (
        RecordingServer({"/data.json": LINKS}) as other,
        RecordingServer({"/x.js": text("1", "text/javascript")}) as srv,
    ):
        body = (
            f"<script src='{other.url('/x.js')}'></script><script src='/private/p.js'></script>"
            "<img src='/i.png'><script src='/x.js'></script>"
        )
        rendered = await render(renderer, srv.url("/"), srv.origin, body)
    assert {s.url: s.refused for s in rendered.subrequests} == {
        other.url("/x.js"): "cross_origin",
        srv.url("/private/p.js"): "robots",
        srv.url("/i.png"): "media",
        srv.url("/x.js"): None,
    }
    assert renderer.refused == {"cross_origin": 1, "robots": 1, "media": 1}
    assert other.paths() == []
    assert srv.paths() == ["/x.js"]


async def test_a_crawl_that_asks_for_images_gets_them_in_its_renders_too(
    renderer: Renderer,
) -> None:
    # --assets images: the render loads the page's images (on the crawl's path, as any
    # subrequest) and still refuses the media the crawl did not ask for.
    async with RecordingServer({"/i.png": text("png", "image/png")}) as srv:
        body = "<img src='/i.png'><video src='/v.mp4' autoplay muted></video>"
        rendered = await render(renderer, srv.url("/"), srv.origin, body, assets=("images",))
    assert {s.url: s.refused for s in rendered.subrequests} == {
        srv.url("/i.png"): None,
        srv.url("/v.mp4"): "media",
    }
    assert srv.paths() == ["/i.png"]


async def test_subrequests_keep_the_crawls_delay_on_the_wire(renderer: Renderer) -> None:
    js = text("1", "text/javascript")
    async with RecordingServer({"/1.js": js, "/2.js": js, "/3.js": js}) as srv:
        body = "".join(f"<script src='/{n}.js'></script>" for n in (1, 2, 3))
        started = time.time()
        await render(renderer, srv.url("/"), srv.origin, body, delay=0.4)
    arrivals = [r.t for r in srv.requests("/1.js") + srv.requests("/2.js") + srv.requests("/3.js")]
    # The first waits for the page's own fetch (last_sent=0: long ago), then one every 0.4 s.
    assert arrivals[0] >= started
    assert min(srv.gaps()) >= 0.4 - 0.01


async def test_a_script_redirect_is_handed_over_not_followed(renderer: Renderer) -> None:
    async with RecordingServer({"/next": html("<p>next</p>")}) as srv:
        body = "<p>here</p><script>setTimeout(() => { location.href = '/next?x=1'; }, 50)</script>"
        rendered = await render(renderer, srv.url("/"), srv.origin, body)
    assert rendered.navigation == srv.url("/next?x=1")
    assert "<p>here</p>" in rendered.html
    assert srv.paths() == []


async def test_an_endless_script_times_out_and_the_renderer_goes_on(renderer: Renderer) -> None:
    async with RecordingServer({"/data.json": LINKS}) as srv:
        started = time.perf_counter()
        with pytest.raises(RenderError) as caught:
            await render(renderer, srv.url("/"), srv.origin, "<script>while (true) {}</script>")
        assert caught.value.error_class == ErrorClass.RENDER_TIMEOUT
        assert time.perf_counter() - started < FAST.navigation_timeout + 6
        rendered = await render(renderer, srv.url("/"), srv.origin, APP)
    assert '<a href="/a">' in rendered.html


async def test_a_killed_browser_is_a_render_crash_and_is_restarted(renderer: Renderer) -> None:
    async with RecordingServer({"/data.json": slow(1.5, LINKS)}) as srv:
        task = asyncio.create_task(render(renderer, srv.url("/"), srv.origin, APP))
        while not srv.paths():  # the render waits for its JSON: the browser is busy
            await asyncio.sleep(0.05)
        pids = renderer.browser_pids()
        os.kill(pids[0], signal.SIGKILL)
        with pytest.raises(RenderError) as caught:
            await task
        assert caught.value.error_class == ErrorClass.RENDER_CRASH
        srv.routes["/data.json"] = LINKS
        rendered = await render(renderer, srv.url("/"), srv.origin, APP)
    assert '<a href="/a">' in rendered.html
    assert renderer.launches == 2
    assert renderer.browser_pids()[0] != pids[0]


async def test_the_browser_is_recycled_after_n_renders() -> None:
    r = Renderer(RenderSettings(navigation_timeout=3.0, settle_timeout=1.0, recycle_after=2))
    try:
        async with RecordingServer({"/data.json": LINKS}) as srv:
            for _ in range(5):
                await render(r, srv.url("/"), srv.origin, APP)
        assert r.launches == 3  # renders 1-2, 3-4, 5
        assert r.rss() > 0
    finally:
        await r.close()
    assert r.browser_pids() == []


TICKING = """<title>ticking</title><div id=root></div>
<script>
fetch('/data.json').then(r => r.json()).then(urls => {
  root.innerHTML = urls.map(u => `<a href="${u}">${u}</a>`).join('');
});
setInterval(() => fetch('/tick'), 50);
</script>"""


async def test_an_origins_next_render_reuses_its_page_and_none_of_its_scripts(
    renderer: Renderer,
) -> None:
    # The page is kept open for the origin's next render (its renderer process with it), but
    # reset first: the first page's timer asks nothing once its render ended, and the second
    # render's DOM and subrequests are its own.
    async with RecordingServer({"/data.json": LINKS, "/tick": text("")}) as srv:
        first = await render(renderer, srv.url("/one"), srv.origin, TICKING)
        ticks = len(srv.requests("/tick"))
        await asyncio.sleep(0.5)
        assert len(srv.requests("/tick")) == ticks
        second = await render(renderer, srv.url("/two"), srv.origin, APP)
    assert renderer.pages_opened == 1
    assert '<a href="/a">/a</a>' in first.html and '<a href="/a">/a</a>' in second.html
    assert "ticking" not in second.html
    assert [s.url.rsplit("/", 1)[1] for s in second.subrequests] == ["data.json"]


class Counter:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> Counter:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()


async def test_the_browser_opens_no_socket_of_its_own(renderer: Renderer) -> None:
    """What page routes do not see (a WebSocket, a beacon at unload) finds no network: the
    counting server on loopback is never reached, by name or by address."""
    async with Counter() as counter, RecordingServer() as srv:
        target = f"127.0.0.1:{counter.port}"
        body = f"""<p>x</p><script>
          try {{ new WebSocket('ws://{target}/'); }} catch (e) {{}}
          try {{ new WebSocket('ws://localhost:{counter.port}/'); }} catch (e) {{}}
          try {{ new EventSource('http://{target}/events'); }} catch (e) {{}}
          navigator.sendBeacon('http://{target}/beacon', 'x');
          window.open('http://{target}/popup');
        </script><iframe src='http://{target}/frame'></iframe>"""
        rendered = await render(renderer, srv.url("/"), srv.origin, body)
        await asyncio.sleep(1.0)
    assert "<p>x</p>" in rendered.html
    assert counter.connections == 0
    assert {s.refused for s in rendered.subrequests} <= {"cross_origin", "method"}


async def test_an_unrouted_request_fails_in_the_browser_as_launched() -> None:
    """The design, without the routes: Chromium as the renderer launches it cannot reach a
    server on loopback (its proxy is a port nobody listens on, loopback not bypassed)."""
    from playwright.async_api import Error, async_playwright

    from streamcrawl.agents.render.browser import closed_port, isolated_args

    held = closed_port()
    async with Counter() as counter, async_playwright() as p:
        args = isolated_args(held.getsockname()[1], "test")
        browser = await p.chromium.launch(executable_path=default_chromium(), args=args)
        try:
            page = await browser.new_page()
            with pytest.raises(Error, match="ERR_PROXY_CONNECTION_FAILED"):
                await page.goto(f"http://127.0.0.1:{counter.port}/", timeout=10_000)
        finally:
            await browser.close()
            held.close()
    assert counter.connections == 0


async def test_a_thousand_frames_are_held_to_the_subrequest_bound(renderer: Renderer) -> None:
    """A script that opens 1,000 same-origin frames: at most ``max_subrequests`` reach the
    server, the others it asks are refused (``too_many``, counted), the render ends
    (rendered, or by its timeout: a clear error class) and the next render works."""
    async with RecordingServer({"/f": html("<p>frame</p>"), "/data.json": LINKS}) as srv:
        body = (
            "<p id=done>page</p><script>for (let i = 0; i < 1000; i++) {"
            "const f = document.createElement('iframe'); f.src = '/f?' + i;"
            " document.body.appendChild(f); }</script>"
        )
        try:
            await render(renderer, srv.url("/"), srv.origin, body)
        except RenderError as exc:
            assert exc.error_class == ErrorClass.RENDER_TIMEOUT
        served = len(srv.paths())
        rendered = await render(renderer, srv.url("/"), srv.origin, APP)
    assert served <= FAST.max_subrequests
    assert renderer.refused["too_many"] > 0  # those the page asked before it ended
    assert '<a href="/a">' in rendered.html


async def test_a_script_that_allocates_without_bound_ends_and_the_renderer_goes_on(
    renderer: Renderer,
) -> None:
    """Memory a script takes without bound: the render ends (its tab runs out of heap, or the
    time runs out) with a render error class, and the next render works."""
    async with RecordingServer({"/data.json": LINKS}) as srv:
        hog = "<script>const a = []; while (true) { a.push(new Array(1e6).fill(1)); }</script>"
        with pytest.raises(RenderError) as caught:
            await render(renderer, srv.url("/"), srv.origin, hog)
        assert caught.value.error_class in (ErrorClass.RENDER_TIMEOUT, ErrorClass.RENDER_CRASH)
        rendered = await render(renderer, srv.url("/"), srv.origin, APP)
    assert '<a href="/a">' in rendered.html
