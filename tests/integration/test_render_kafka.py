"""The Kafka wiring's render stage against the real broker and Cassandra (docs/rendering.md,
"The Kafka wiring"): a fetch worker hands the pages a crawl renders to ``streamcrawl
render-worker`` processes on the ``render`` topic, never starting a browser itself; a render
worker killed -9 mid-render loses nothing (its request is consumed and rendered again)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from aiohttp import web

from streamcrawl.agents.render.browser import default_chromium
from tests.httpserver import RecordingServer, html, text
from tests.integration.site import Cluster

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.cassandra,
    pytest.mark.integration,
    pytest.mark.skipif(not os.access(default_chromium(), os.X_OK), reason="no Chromium"),
]

APP = """<title>app</title><div id=root></div><script>
fetch('/app/links.json').then(r => r.json()).then(urls => {
  root.innerHTML = urls.map(u => `<a href="${u}">${u}</a>`).join('');
  document.title = 'built';
});</script>"""
LINKS = '["/app/x", "/app/y"]'


def site(links: object) -> dict[str, object]:
    """A page whose links a script builds from a same-origin JSON fetch."""
    return {
        "/": html("<a href=/app/>app</a>"),
        "/app/": html(APP),
        "/app/links.json": links,
        "/app/x": html("<p>x</p>"),
        "/app/y": html("<p>y</p>"),
    }


def hanging_once(hang: float) -> object:
    """``/app/links.json``: the first request hangs ``hang`` s (a render in progress), the
    others are answered at once."""
    calls: list[float] = []

    async def serve(_request: web.Request) -> web.StreamResponse:
        calls.append(time.time())
        if len(calls) == 1:
            await asyncio.sleep(hang)
        return web.Response(text=LINKS, content_type="application/json")

    return serve


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster.create(tmp_path, partitions=2)
    try:
        yield c
    finally:
        c.stop_all()


def browsers_under(pid: int) -> list[str]:
    """The Chromium processes among ``pid``'s descendants."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p.name() for p in children if "chrom" in p.name().lower()]


def page_renders(cluster: Cluster) -> dict[str, str | None]:
    return {r.url: r.render for r in cluster.query("SELECT url, render FROM {ks}.pages")}


def wait_for(what: str, check: object, timeout: float, cluster: Cluster) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what}\n{cluster.diagnosis()}"
        time.sleep(0.5)


def test_a_render_worker_renders_for_a_fetch_worker_without_a_browser(cluster: Cluster) -> None:
    with RecordingServer(site(text(LINKS, "application/json"))) as srv:
        worker = cluster.start_worker("w1")
        renderer = cluster.start_render_worker("r1")
        worker.wait_ready()
        cluster.seed([srv.url("/")], "rk", "--render", "always", "--delay", "0")
        states = cluster.wait_states(4, timeout=180)
        # The links the script built from the JSON were crawled.
        assert states[srv.url("/app/x")] == "fetched", states
        assert states[srv.url("/app/y")] == "fetched", states
        wait_for(
            "the app page's row", lambda: srv.url("/app/") in page_renders(cluster), 60, cluster
        )
        renders = page_renders(cluster)
        assert renders[srv.url("/app/")] == "browser"
        assert renders[srv.url("/")] == "browser"
        # The fetch worker never started a browser; the render worker did.
        assert browsers_under(worker.proc.pid) == []
        assert browsers_under(renderer.proc.pid) != []
        assert srv.paths().count("/app/") == 1  # fetched once, by the fetch worker
        # Its web port counts what it rendered, and its browser.
        assert renderer.get("/healthz") == (200, "ok\n")
        assert renderer.metric("streamcrawl_render_pages_total", result="browser") >= 2
        assert renderer.metric("streamcrawl_render_seconds_count") >= 2
        assert renderer.metric("streamcrawl_render_browser_rss_bytes") > 0


def test_a_render_worker_killed_mid_render_loses_nothing(cluster: Cluster) -> None:
    with RecordingServer(site(hanging_once(60.0))) as srv:
        worker = cluster.start_worker("w1")
        first = cluster.start_render_worker("r1")
        worker.wait_ready()
        cluster.seed([srv.url("/")], "rk", "--render", "always", "--delay", "0")
        # The render of /app/ is under way: its script asked for the JSON (which hangs).
        wait_for("a render in progress", lambda: "/app/links.json" in srv.paths(), 120, cluster)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        cluster.start_render_worker("r2")
        states = cluster.wait_states(4, timeout=240)
        assert states[srv.url("/app/x")] == "fetched", states
        assert states[srv.url("/app/y")] == "fetched", states
        wait_for(
            "the app page's row", lambda: srv.url("/app/") in page_renders(cluster), 60, cluster
        )
        assert page_renders(cluster)[srv.url("/app/")] == "browser"
        # Rendered again after the kill: its JSON asked for a second time.
        assert srv.paths().count("/app/links.json") >= 2


# Pages that are hard on a render, as tests/integration/test_render.py has them in process: a
# script that calls an address the SSRF guard refuses (never dialled), one that redirects, one
# that never ends.
HARD = {
    "/": html("<a href=/guarded>g</a> <a href=/jump>j</a> <a href=/endless>e</a>"),
    "/guarded": html(
        "<title>app</title><script>fetch('http://10.0.0.5:9/x.json')"
        ".catch(() => { document.title = 'refused'; });</script>"
    ),
    "/jump": html(
        "<p>here</p><script>setTimeout(() => { location.href = '/landed'; }, 50)</script>"
    ),
    "/landed": html("<p>landed</p>"),
    "/endless": html("<p>never</p><script>while (true) {}</script>"),
}


def test_a_render_worker_refuses_redirects_and_times_out_as_in_process(cluster: Cluster) -> None:
    """In the Kafka wiring as in process: the guard's refusal is counted and the page still
    rendered, a script redirect is handed to the frontier as a link (the target crawled, not
    followed in the browser), an endless script ends ``render_timeout`` with the HTTP copy
    kept, and the render worker goes on."""
    with RecordingServer(HARD) as srv:
        worker = cluster.start_worker("w1")
        renderer = cluster.start_render_worker("r1")
        worker.wait_ready()
        cluster.seed([srv.url("/")], "rk", "--render", "always", "--delay", "0")
        states = cluster.wait_states(5, timeout=240)
        assert {states[srv.url(p)] for p in HARD} == {"fetched"}, states
        wait_for("every page's row", lambda: len(page_renders(cluster)) == len(HARD), 60, cluster)
        rows = {
            r.url: r
            for r in cluster.query(
                "SELECT url, render, render_error, render_refused FROM {ks}.pages"
            )
        }
        refused = renderer.metric("streamcrawl_render_subrequests_refused_total", reason="blocked")
    guarded = rows[srv.url("/guarded")]
    assert (guarded.render, guarded.render_refused) == ("browser", 1), guarded
    assert refused == 1  # by the SSRF guard: 10.0.0.5 is not dialled
    assert rows[srv.url("/jump")].render == "browser"
    assert srv.paths().count("/landed") == 1  # by the fetch worker, from the handed link
    endless = rows[srv.url("/endless")]
    assert endless.render == "none", endless
    assert (endless.render_error or "").startswith("render_timeout"), endless
