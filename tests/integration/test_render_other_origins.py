"""A rendered page's subrequests to another origin, in the embedded crawl (Debian's Chromium):
made in that origin's politeness slot, under its robots.txt, with its request options, as the
crawl's own fetches of it are (docs/rendering.md, "The network path";
agents/net/other_origins.py). Checked on the wire: the other origin's server records when each
request arrived."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from streamcrawl.agents.net.core import CrawlCore
from streamcrawl.agents.net.credentials import Credentials
from streamcrawl.agents.net.network import Network
from streamcrawl.agents.render.browser import RenderSettings, default_chromium
from streamcrawl.schemas.codec import decode
from streamcrawl.schemas.records import CrawlPolicy, OriginAuth, Page, RequestHeader
from streamcrawl.topology.embedded.runner import EmbeddedCrawl
from tests.httpserver import LOOPBACK_GUARD, RecordingServer, Reply, html, text

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not os.access(default_chromium(), os.X_OK), reason="no Chromium"),
]

SETTINGS = RenderSettings(navigation_timeout=5.0, settle_timeout=3.0)
B_PAGES = [f"/b{n}" for n in range(1, 7)]
ROBOTS = "User-agent: *\nCrawl-delay: {delay}\nDisallow: /private\n"


def app(other: str, also: tuple[str, ...] = ("/private/secret.json", "/excluded.json")) -> str:
    """A page whose script builds its links from ``other``'s JSON (a CORS fetch), and asks
    for files of ``other`` it may not have (``also``: by default one its robots.txt refuses
    and one out of the crawl's scope)."""
    asks = "".join(f"\n  fetch('{other}{path}').catch(() => null)," for path in also)
    return f"""<title>app</title><div id=root></div><script>
Promise.all([
  fetch('{other}/data.json').then(r => r.json()),{asks}
]).then(([urls]) => {{
  root.innerHTML = urls.map(u => `<a href="${{u}}">${{u}}</a>`).join('');
  document.title = 'built';
}});</script>"""


def data(urls: list[str]) -> Reply:
    body = json.dumps(urls)
    return Reply(
        200, {"Content-Type": "application/json", "Access-Control-Allow-Origin": "*"}, body
    )


async def crawl(
    policy: CrawlPolicy, tmp_path: Path, network: Network
) -> tuple[CrawlCore, dict[str, Page]]:
    """Crawl ``policy`` embedded, rendering with ``SETTINGS``: the core (its renderer's
    refusals) and the page records by URL."""
    core = CrawlCore(network, SETTINGS)
    await EmbeddedCrawl(
        policy, out_dir=tmp_path / "out", state_dir=tmp_path / "st", core=core
    ).run()
    lines = (tmp_path / "out/pages.jsonl").read_text().splitlines()
    pages: dict[str, Page] = {}
    for line in lines:
        page = decode("pages", line)
        pages[page.url] = page
    return core, pages


async def test_a_subrequest_to_a_crawled_origin_keeps_its_delay_and_robots(
    tmp_path: Path,
) -> None:
    async with RecordingServer() as a, RecordingServer() as b:
        a.routes.update({"/": html(app(b.origin)), "/from-b": html("<p>from b</p>")})
        b.routes.update(
            {
                "/robots.txt": text(ROBOTS.format(delay=1)),
                "/": html(" ".join(f"<a href=/b{n}>{n}</a>" for n in range(1, 7))),
                **{f"/b{n}": html(f"<p>{n}</p>") for n in range(1, 7)},
                "/data.json": data([a.url("/from-b")]),
                "/excluded.json": data([]),
                "/private/secret.json": data([]),
            }
        )
        policy = CrawlPolicy(
            crawl_id="other-origins",
            seeds=(a.url("/"), b.url("/")),
            delay=0.0,
            render="always",
            render_include=(f"^{re.escape(a.url('/'))}$",),  # B's pages: fetches only
            exclude=("excluded",),
            headers=(RequestHeader(name="X-Only-B", value="1", origin=b.origin),),
            auth=(OriginAuth(origin=a.origin, credential="SITE_A"),),
        )
        environ = {"STREAMCRAWL_CREDENTIAL_SITE_A": "basic:alice:secret-of-a"}
        network = Network(guard=LOOPBACK_GUARD, credentials=Credentials(environ=environ))
        core, pages = await crawl(policy, tmp_path, network)
    page = pages[a.url("/")]
    # B's data reached the DOM: the page's links are those B's JSON named.
    assert page.render == "browser" and page.title == "built"
    assert a.url("/from-b") in pages
    # Refused by rule: B's robots.txt, and the crawl's scope (its exclude patterns).
    assert page.render_refused == 2
    assert core.renderer().refused == {"robots": 1, "scope": 1}
    assert sorted(b.paths()) == sorted(["/", "/data.json", "/robots.txt", *B_PAGES])
    # Every request to B, the crawl's and the subrequest, at least B's Crawl-delay apart,
    # measured on B's side: a subrequest that ignored B's slot would arrive within it.
    assert min(b.gaps()) >= 1.0 - 0.02, b.log
    # What a fetch of B carries: B's header, not A's credential.
    asked = b.requests("/data.json")[0].headers
    assert asked["X-Only-B"] == "1" and "Authorization" not in asked
    assert "Authorization" in a.requests("/")[0].headers


async def test_an_origin_only_subrequests_reach_is_asked_for_robots_txt_once(
    tmp_path: Path,
) -> None:
    async with RecordingServer() as a, RecordingServer() as b:
        a.routes.update(
            {"/": html(app(b.origin) + "<a href=/two>two</a>"), "/two": html(app(b.origin))}
        )
        b.routes.update({"/robots.txt": text(ROBOTS.format(delay=1)), "/data.json": data([])})
        policy = CrawlPolicy(
            crawl_id="other-origins-2",
            seeds=(a.url("/"),),
            delay=0.0,
            render="always",
            exclude=("excluded",),
        )
        core, pages = await crawl(policy, tmp_path, Network(guard=LOOPBACK_GUARD))
    assert {p.title for p in pages.values()} == {"built"}
    # robots.txt once for the crawl, then each page's data, B's Crawl-delay apart.
    assert b.paths() == ["/robots.txt", "/data.json", "/data.json"]
    assert min(b.gaps()) >= 1.0 - 0.02, b.log
    assert core.renderer().refused == {"robots": 2, "scope": 2}


async def test_a_slot_not_free_before_the_page_settles_is_refused(tmp_path: Path) -> None:
    async with RecordingServer() as a, RecordingServer() as b:
        a.routes.update({"/": html(app(b.origin))})
        b.routes.update({"/robots.txt": text(ROBOTS.format(delay=8)), "/data.json": data([])})
        policy = CrawlPolicy(
            crawl_id="other-origins-3",
            seeds=(a.url("/"),),
            delay=0.0,
            render="always",
            exclude=("excluded",),
        )
        core, pages = await crawl(policy, tmp_path, Network(guard=LOOPBACK_GUARD))
    # B's next request may start 8 s after its robots.txt: past the page's settle time.
    assert core.renderer().refused == {"robots": 1, "scope": 1, "slot_timeout": 1}
    assert pages[a.url("/")].render_refused == 3
    assert b.paths() == ["/robots.txt"]


async def test_two_origins_whose_pages_fetch_from_each_other_render_at_once(
    tmp_path: Path,
) -> None:
    """A's page fetches B's data while B's page, rendered at the same time, fetches A's: each
    render's own subrequests borrow its origin's slot too, so neither waits for the other's
    render to end (which would refuse both, ``slot_timeout``)."""
    async with RecordingServer() as a, RecordingServer() as b:
        for srv, other in ((a, b), (b, a)):
            srv.routes.update(
                {
                    "/robots.txt": text(ROBOTS.format(delay=1)),
                    "/": html(app(other.origin)),
                    "/data.json": data([]),
                }
            )
        policy = CrawlPolicy(
            crawl_id="other-origins-4",
            seeds=(a.url("/"), b.url("/")),
            delay=0.0,
            render="always",
            exclude=("excluded",),
        )
        core, pages = await crawl(policy, tmp_path, Network(guard=LOOPBACK_GUARD))
    assert {url: p.title for url, p in pages.items()} == {a.url("/"): "built", b.url("/"): "built"}
    assert core.renderer().refused == {"robots": 2, "scope": 2}
    for srv in (a, b):
        assert sorted(srv.paths()) == ["/", "/data.json", "/robots.txt"]
        assert min(srv.gaps()) >= 1.0 - 0.02, srv.log
