"""Crawls with ``--render``, through both wirings (``tests/wirings.py``), against a local site
whose app pages are built by a script from a same-origin JSON fetch (docs/rendering.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamcrawl.agents.render.browser import RenderSettings, default_chromium
from streamcrawl.schemas.records import CrawlPolicy, RequestHeader
from tests.httpserver import RecordingServer, html, text
from tests.wirings import WIRINGS, crawl_with_pages

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not os.access(default_chromium(), os.X_OK), reason="no Chromium"),
]

APP = """<title>app</title><div id=root></div><script>
fetch('/app/links.json').then(r => r.json()).then(urls => {
  root.innerHTML = urls.map(u => `<a href="${u}">${u}</a>`).join('');
  document.title = 'built';
});</script>"""
FAST = RenderSettings(navigation_timeout=2.0, settle_timeout=1.0)


def site() -> dict[str, object]:
    return {
        "/": html("<a href=/app/>app</a> <a href=/loop>loop</a> <a href=/go>go</a>"),
        "/app/": html(APP),
        "/app/links.json": text('["/app/x", "/app/y"]', "application/json"),
        "/app/x": html("<p>x</p>"),
        "/app/y": html("<p>y</p>"),
        "/loop": html("<a href=/after-loop>after</a><script>while (true) {}</script>"),
        "/after-loop": html("<p>after</p>"),
        "/go": html("<p>leaving</p><script>location.replace('/gone-to')</script>"),
        "/gone-to": html("<p>arrived</p>"),
    }


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_render_always_reads_the_dom_and_keeps_http_copies_of_failures(
    wiring: str, tmp_path: Path
) -> None:
    async with RecordingServer(site()) as srv:
        policy = CrawlPolicy(
            crawl_id="render-always",
            seeds=(srv.url("/"),),
            delay=0.0,
            render="always",
            headers=(RequestHeader(name="X-Team", value="blue"),),
        )
        states, pages = await crawl_with_pages(wiring, policy, tmp_path, 90.0, render=FAST)
    by_url = {p.url: p for p in pages}
    app = by_url[srv.url("/app/")]
    # The links a script built were followed, and the title is the DOM's.
    assert app.render == "browser" and app.title == "built"
    assert app.render_ms is not None and app.render_ms > 0
    assert {srv.url("/app/x"), srv.url("/app/y")} <= set(states)
    assert states[srv.url("/app/x")].state == "fetched"
    # The JSON reached the server through the crawl's path: its header, once per render.
    json_asks = srv.requests("/app/links.json")
    assert json_asks and all(r.headers["X-Team"] == "blue" for r in json_asks)
    # Each page asked once: the renderer got the document the crawl had fetched.
    assert len(srv.requests("/app/")) == 1
    # An endless script: the HTTP copy is the page (its links followed), the error recorded.
    loop = by_url[srv.url("/loop")]
    assert loop.render == "none"
    assert loop.render_error is not None and loop.render_error.startswith("render_timeout: ")
    assert states[srv.url("/after-loop")].state == "fetched"
    # A script's navigation: handed to the frontier as a link, fetched by the crawl itself.
    assert states[srv.url("/gone-to")].state == "fetched"
    assert len(srv.requests("/gone-to")) == 1


async def test_render_include_limits_always_to_matching_urls(tmp_path: Path) -> None:
    async with RecordingServer(site()) as srv:
        policy = CrawlPolicy(
            crawl_id="render-include",
            seeds=(srv.url("/"),),
            delay=0.0,
            render="always",
            render_include=("/app/",),
            max_depth=1,
        )
        _states, pages = await crawl_with_pages("embedded", policy, tmp_path, 60.0, render=FAST)
    rendered = {p.url: p.render for p in pages}
    assert rendered[srv.url("/app/")] == "browser"
    assert rendered[srv.url("/")] == "none"
    assert rendered[srv.url("/loop")] == "none"


def test_crawl_without_a_browser_exits_2_in_one_line(tmp_path: Path) -> None:
    streamcrawl = str(Path(sys.executable).parent / "streamcrawl")
    env = {**os.environ, "STREAMCRAWL_CHROMIUM": str(tmp_path / "no-chromium")}
    done = subprocess.run(
        [streamcrawl, "crawl", "http://127.0.0.1:9/", "--render", "auto", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"streamcrawl: error: no Chromium at {tmp_path / 'no-chromium'}: install Debian's "
        "chromium (apt-get install chromium) or name the binary in STREAMCRAWL_CHROMIUM\n"
    )


async def test_subrequests_are_archived_with_the_page(tmp_path: Path) -> None:
    """A crawl with --warc: each subrequest is a request/response pair of its own, in the
    page's capture (docs/warc.md); the page's own response is there once."""
    from streamcrawl.agents.net.core import CrawlCore
    from streamcrawl.agents.net.network import Network
    from streamcrawl.topology.embedded.runner import EmbeddedCrawl
    from tests.integration.test_warc_crawl import records, validate

    async with RecordingServer(site()) as srv:
        policy = CrawlPolicy(
            crawl_id="render-warc",
            seeds=(srv.url("/app/"),),
            delay=0.0,
            render="always",
            warc=True,
            max_depth=0,
        )
        await EmbeddedCrawl(
            policy,
            out_dir=tmp_path / "out",
            state_dir=tmp_path / "st",
            warc=tmp_path / "w",
            core=CrawlCore(Network(), FAST),
        ).run()
    validate(tmp_path / "w")
    pairs = [
        (r.rec_type, r.rec_headers["WARC-Target-URI"])
        for r in records(tmp_path / "w")
        if r.rec_type in ("request", "response")
    ]
    json_url = srv.url("/app/links.json")
    assert ("request", json_url) in pairs and ("response", json_url) in pairs
    assert pairs.count(("response", srv.url("/app/"))) == 1  # the page, fetched once
