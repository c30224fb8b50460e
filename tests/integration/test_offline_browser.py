"""``crawl --assets all --save-to DIR`` (docs/assets.md, "Offline copy"): the copy of a styled
page and its CDN opens in headless Chromium from ``file://`` as the page was online: every
asset it asks for is a file of the copy and loads, its stylesheets apply and its images decode.
The browser has no network (every name unresolvable, the servers stopped before it starts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.asset_site import BACKGROUND_RGB, HEADING_RGB, css_color, site
from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.embedded.runner import EmbeddedCrawl
from tests.browser import chromium, natural_width, needs_chromium, style, visit
from tests.httpserver import RecordingServer, text

pytestmark = [pytest.mark.integration, needs_chromium]

ALL = ("css", "js", "images", "fonts", "media")
CHECKS = {
    "heading": style("#title", "color"),  # the CDN's stylesheet
    "background": style("body", "backgroundColor"),  # the site's
    "hero": style("#hero", "backgroundImage"),  # a url() of the site's stylesheet
    "border": style("#logo", "borderTopStyle"),  # what the site's stylesheet imports
    "script": "document.documentElement.dataset.app || ''",
    **{name: natural_width(f"#{name}") for name in ("logo", "photo", "own", "copy", "cdnlogo")},
}


def serve(srv: RecordingServer, cdn: RecordingServer) -> None:
    own, cdn_files = site(cdn.url("").rstrip("/").replace("127.0.0.1", "localhost"))
    srv.routes.update({path: text(body, ctype) for path, (ctype, body) in own.items()})
    cdn.routes.update({path: text(body, ctype) for path, (ctype, body) in cdn_files.items()})


async def test_the_copy_opens_from_file_with_its_styles_and_images(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    async with RecordingServer() as srv, RecordingServer() as cdn:
        serve(srv, cdn)
        spec = CrawlPolicy(crawl_id="t", seeds=(srv.url("/"),), delay=0.0, max_pages=2, assets=ALL)
        await EmbeddedCrawl(
            spec, out_dir=tmp_path / "out", state_dir=tmp_path / "state", save_to=copy
        ).run()
        host = srv.url("/").split("://")[1].rstrip("/").replace(":", "_")
    home = copy / host / "index.html"
    async with chromium() as browser:
        seen = await visit(browser, home.as_uri(), CHECKS)
    assert seen.failed == []
    assert len(seen.requests) >= 12  # the page, 4 stylesheets, 2 scripts, images, the font
    outside = [u for u in seen.requests if not u.startswith(copy.as_uri() + "/")]
    assert outside == []  # every request a file of the copy
    assert any(u.endswith(".woff2") for u in seen.requests)
    v = seen.values
    assert (v["heading"], v["background"]) == (css_color(HEADING_RGB), css_color(BACKGROUND_RGB))
    assert v["hero"].startswith('url("file://') and v["hero"].endswith('/img/bg.png")')
    assert (v["border"], v["script"]) == ("solid", "yes")
    assert (v["logo"], v["photo"], v["own"], v["copy"], v["cdnlogo"]) == (64, 120, 40, 64, 64)
