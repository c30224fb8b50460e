"""Page assets in both wirings (docs/assets.md): what a page needs is fetched from its own origin
and a second one (a "CDN", another local port), under its own budget and scope, never read for
page links; a stylesheet's own assets are followed to a bounded depth."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from streamcrawl.agents.policy.assets import MAX_ASSET_DEPTH
from streamcrawl.schemas.records import CrawlPolicy
from tests.httpserver import RecordingServer, Reply, html, stream, text
from tests.wirings import WIRINGS, crawl, crawl_with_pages

pytestmark = pytest.mark.integration

GIB = 1 << 30


def on_cdn(cdn: RecordingServer, path: str) -> str:
    """A URL of the "CDN": another host name (scope compares hosts, not ports)."""
    return cdn.url(path).replace("127.0.0.1", "localhost")


def site(srv: RecordingServer, cdn: RecordingServer) -> None:
    """Two pages sharing a stylesheet that imports itself and a 1,000-deep @import chain; a
    script with a source map; images (one a page in disguise), a font, a poster, a 1 GiB
    video, an asset robots.txt denies, and a stylesheet and image on the CDN."""
    page = f"""<html><head>
    <link rel=stylesheet href="/s.css"><link rel=stylesheet href="{on_cdn(cdn, "/cdn.css")}">
    <script src="/app.js"></script><link rel=icon href="/favicon.ico">
    </head><body><img src="/a.png" srcset="/a2.png 2x"><img src="/private/x.png">
    <video poster="/poster.jpg" src="/big.mp4"></video>
    <a href="/p2">next</a><a href="{on_cdn(cdn, "/cdn-page")}">a page on the CDN</a>
    </body></html>"""
    srv.routes.update(
        {
            "/robots.txt": text("User-agent: *\nDisallow: /private/\n"),
            "/": html(page),
            "/p2": html('<link rel=stylesheet href="/s.css"><img src="/p2.png">'),
            "/s.css": text(
                '@import url(/s.css); @import "/deep/0.css";\n'
                "@font-face { src: url(/f.woff2) } body { background: url(bg.png) }",
                "text/css",
            ),
            "/deep/": _deep_chain,
            "/app.js": Reply(
                headers={"Content-Type": "text/javascript", "SourceMap": "/app.js.map"},
                body="document.write('<a href=/from-script>x</a>')",
            ),
            "/app.js.map": text("{}", "application/json"),
            "/favicon.ico": text(b"\0", "image/x-icon"),
            # An image that is HTML: an asset is never read for page links.
            "/a.png": html('<a href="/never">a link in an asset</a>'),
            "/a2.png": text(b"\x89PNG", "image/png"),
            "/p2.png": text(b"\x89PNG", "image/png"),
            "/bg.png": text(b"\x89PNG", "image/png"),
            "/f.woff2": text(b"wOF2", "font/woff2"),
            "/poster.jpg": text(b"\xff\xd8", "image/jpeg"),
            "/big.mp4": stream(GIB, content_type="video/mp4"),
        }
    )
    cdn.routes.update(
        {
            "/cdn.css": text("p { background: url(img/c.png) }", "text/css"),
            "/img/c.png": text(b"\x89PNG", "image/png"),
            "/cdn-page": html("<title>not crawled</title>"),
        }
    )


async def _deep_chain(request: object) -> object:
    from aiohttp import web

    assert isinstance(request, web.Request)
    n = int(request.path.rsplit("/", 1)[1].removesuffix(".css"))
    return web.Response(text=f'@import "/deep/{n + 1}.css";', content_type="text/css")


def policy(srv: RecordingServer, **fields: object) -> CrawlPolicy:
    return CrawlPolicy(
        crawl_id="t",
        seeds=(srv.url("/"),),
        delay=0.0,
        assets=("css", "js", "images", "fonts", "media"),
        max_body=1 << 20,
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_pages_assets_are_fetched_once_bounded_and_never_parsed(
    wiring: str, tmp_path: Path
) -> None:
    async with RecordingServer() as srv, RecordingServer() as cdn:
        site(srv, cdn)
        states, pages = await crawl_with_pages(wiring, policy(srv, max_pages=2), tmp_path)
    got = {url: s.state for url, s in states.items()}
    fetched = ["/s.css", "/app.js", "/app.js.map", "/favicon.ico", "/a.png", "/a2.png"]
    fetched += ["/p2.png", "/bg.png", "/f.woff2", "/poster.jpg"]
    chain = [f"/deep/{n}.css" for n in range(MAX_ASSET_DEPTH - 1)]
    assert got == {
        srv.url("/"): "fetched",
        srv.url("/p2"): "fetched",
        **{srv.url(p): "fetched" for p in fetched + chain},
        on_cdn(cdn, "/cdn.css"): "fetched",
        on_cdn(cdn, "/img/c.png"): "fetched",
        srv.url("/private/x.png"): "robots_denied",
        srv.url("/big.mp4"): "too_large",
        on_cdn(cdn, "/cdn-page"): "out_of_scope",  # a page link: the page scope
    }
    requests = Counter(srv.paths())
    assert all(n == 1 for n in requests.values()), requests  # the self-import once
    assert "/never" not in requests and "/from-script" not in requests
    assert f"/deep/{MAX_ASSET_DEPTH - 1}.css" not in requests  # the chain ends
    assert srv.sent["/big.mp4"] < 16 << 20  # the 1 GiB body was not downloaded
    assert [s.depth for u, s in states.items() if u == srv.url("/s.css")] == [1]
    assert states[srv.url(chain[-1])].depth == MAX_ASSET_DEPTH
    home = next(p for p in pages if p.url == srv.url("/"))
    assert home.assets == (
        srv.url("/s.css"),
        on_cdn(cdn, "/cdn.css"),
        srv.url("/app.js"),
        srv.url("/favicon.ico"),
        srv.url("/a.png"),
        srv.url("/a2.png"),
        srv.url("/private/x.png"),
        srv.url("/poster.jpg"),
        srv.url("/big.mp4"),
    )
    assert len(pages) == 2  # assets have no page record, and take none of max_pages


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_asset_budget_types_and_hosts(wiring: str, tmp_path: Path) -> None:
    async with RecordingServer() as srv, RecordingServer() as cdn:
        site(srv, cdn)
        spec = CrawlPolicy(
            crawl_id="t",
            seeds=(srv.url("/"),),
            delay=0.0,
            max_pages=1,
            assets=("css", "images"),
            max_assets=3,
            asset_hosts=(),  # the crawl's own hosts only
        )
        states = await crawl(wiring, spec, tmp_path)
    got = {url: (s.state, s.last_error) for url, s in states.items()}
    assert got[on_cdn(cdn, "/cdn.css")] == ("out_of_scope", "host")
    assert got[srv.url("/p2")] == ("cancelled", "max_pages")
    # The first three of the page's own css and images, in document order; the rest, and
    # what the stylesheet needs (/deep/0.css, bg.png; its font is not of the types), over
    # the asset budget. Scripts and media are not of the crawl's types: never admitted.
    assert {u for u, (state, _) in got.items() if state == "fetched"} == {
        srv.url(p) for p in ("/", "/s.css", "/favicon.ico", "/a.png")
    }
    over = {srv.url(p) for p in ("/a2.png", "/private/x.png", "/poster.jpg", "/deep/0.css")}
    assert {u for u, s in got.items() if s == ("cancelled", "max_assets")} == over | {
        srv.url("/bg.png")
    }
    assert srv.url("/app.js") not in got and srv.url("/big.mp4") not in got


async def test_assets_are_archived_like_pages(tmp_path: Path) -> None:
    from warcio.archiveiterator import ArchiveIterator

    from streamcrawl.topology.embedded.runner import EmbeddedCrawl

    async with RecordingServer() as srv, RecordingServer() as cdn:
        site(srv, cdn)
        spec = CrawlPolicy(
            crawl_id="t", seeds=(srv.url("/"),), delay=0.0, max_pages=1, assets=("css",),
            warc=True,
        )  # fmt: skip
        await EmbeddedCrawl(
            spec, out_dir=tmp_path / "out", state_dir=tmp_path / "state", warc=tmp_path / "warc"
        ).run()
    responses = set()
    for path in (tmp_path / "warc").glob("*.warc.gz"):
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type == "response":
                    responses.add(record.rec_headers.get_header("WARC-Target-URI"))
    assert {srv.url("/s.css"), on_cdn(cdn, "/cdn.css"), srv.url("/deep/0.css")} <= responses


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_url_a_page_needs_and_links_to_is_its_asset(wiring: str, tmp_path: Path) -> None:
    """A stylesheet and an image the page links to (``<a href>``) before it uses them are
    crawled as its assets: fetched whole, not as pages skipped for their type. An image that
    another page linked to first was crawled as a page: it is not fetched again."""
    async with RecordingServer() as srv:
        srv.routes.update(
            {
                "/": html(
                    '<a href="/s.css">the style</a><a href="/big.png">the photo</a>'
                    '<a href="/shown-later.png">later</a><a href="/p2">p2</a>'
                    '<link rel=stylesheet href="/s.css"><img src="/big.png">'
                ),
                "/p2": html('<img src="/shown-later.png">'),
                "/s.css": text("body { color: red }", "text/css"),
                "/big.png": text(b"\x89PNG", "image/png"),
                "/shown-later.png": text(b"\x89PNG", "image/png"),
            }
        )
        spec = CrawlPolicy(crawl_id="t", seeds=(srv.url("/"),), delay=0.0, assets=("css", "images"))
        states, pages = await crawl_with_pages(wiring, spec, tmp_path)
    got = {url.removeprefix(srv.origin): (s.state, s.depth) for url, s in states.items()}
    assert got == {
        "/": ("fetched", 0),
        "/s.css": ("fetched", 1),
        "/big.png": ("fetched", 1),
        "/p2": ("fetched", 1),
        "/shown-later.png": ("skipped_content_type", 1),  # a link of / before an asset of /p2
    }
    assert Counter(srv.paths())["/s.css"] == 1
    home = next(p for p in pages if p.url == srv.url("/"))
    assert home.assets == (srv.url("/s.css"), srv.url("/big.png"))
