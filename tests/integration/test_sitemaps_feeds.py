"""Sitemaps and feeds in both wirings: pages reachable only through a gzipped sitemap index
listed in robots.txt, --sitemap seeds, --no-sitemaps, feed-only pages, and hostile XML
(billion laughs, external entities) that admits nothing and fetches nothing."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.embedded.runner import EmbeddedCrawl
from tests.httpserver import RecordingServer, html, text
from tests.wirings import WIRINGS, crawl

pytestmark = pytest.mark.integration

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
PAGES = [f"/only-in-sitemap/{i}" for i in range(12)]


def urlset(srv: RecordingServer, paths: list[str], lastmod: str | None = None) -> str:
    mod = f"<lastmod>{lastmod}</lastmod>" if lastmod else ""
    rows = "".join(f"<url><loc>{srv.url(p)}</loc>{mod}</url>" for p in paths)
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset {NS}>{rows}</urlset>'


def gz(body: str) -> object:
    return text(gzip.compress(body.encode()), "application/x-gzip")


def sitemap_site(srv: RecordingServer) -> None:
    """Pages linked from nowhere: only a gzipped index (from robots.txt) leads to them."""
    index = "".join(
        f"<sitemap><loc>{srv.url(p)}</loc></sitemap>" for p in ("/maps/a.xml.gz", "/maps/b.xml")
    )
    srv.routes.update(
        {
            "/robots.txt": text(f"User-agent: *\nAllow: /\nSitemap: {srv.url('/index.xml.gz')}\n"),
            "/": html("<p>nothing linked</p>"),
            "/index.xml.gz": gz(f"<sitemapindex {NS}>{index}</sitemapindex>"),
            "/maps/a.xml.gz": gz(urlset(srv, PAGES[:8], "2024-05-01")),
            "/maps/b.xml": text(urlset(srv, PAGES[8:]), "application/xml"),
        }
    )
    for path in PAGES:
        srv.routes[path] = html(f"<title>{path}</title>")


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_pages_only_in_a_gzipped_sitemap_index_are_crawled(
    wiring: str, tmp_path: Path
) -> None:
    async with RecordingServer() as srv:
        sitemap_site(srv)
        policy = CrawlPolicy(crawl_id="t", seeds=(srv.url("/"),), delay=0.0)
        states = await crawl(wiring, policy, tmp_path, timeout=60)
    got = {url: s.state for url, s in states.items()}
    sitemaps = ["/index.xml.gz", "/maps/a.xml.gz", "/maps/b.xml"]
    assert got == {
        srv.url("/"): "fetched",
        **{srv.url(p): "sitemap" for p in sitemaps},
        **{srv.url(p): "fetched" for p in PAGES},
    }
    requests = Counter(srv.paths())
    assert all(n == 1 for n in requests.values()), requests
    assert states[srv.url("/maps/a.xml.gz")].depth == 1  # one level below the index
    assert states[srv.url(PAGES[0])].depth == 2


async def test_lastmod_is_kept_with_the_url(tmp_path: Path) -> None:
    async with RecordingServer() as srv:
        sitemap_site(srv)
        policy = CrawlPolicy(crawl_id="t", seeds=(srv.url("/"),), delay=0.0)
        await EmbeddedCrawl(
            policy, out_dir=tmp_path / "out", state_dir=tmp_path / "state", concurrency=4
        ).run()
    rows = [json.loads(line) for line in (tmp_path / "out/urls.jsonl").read_text().splitlines()]
    lastmod = {r["url"]: r.get("lastmod") for r in rows}
    assert {lastmod[srv.url(p)] for p in PAGES[:8]} == {"2024-05-01"}
    assert {lastmod[srv.url(p)] for p in PAGES[8:]} == {None}


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_sitemap_seed_alone_starts_a_crawl(wiring: str, tmp_path: Path) -> None:
    async with RecordingServer() as srv:
        sitemap_site(srv)
        srv.routes["/robots.txt"] = text("User-agent: *\nDisallow: /only-in-sitemap/11\n")
        policy = CrawlPolicy(crawl_id="t", sitemap_seeds=(srv.url("/maps/b.xml"),), delay=0.0)
        states = await crawl(wiring, policy, tmp_path, timeout=30)
    assert {url: s.state for url, s in states.items()} == {
        srv.url("/maps/b.xml"): "sitemap",
        **{srv.url(p): "fetched" for p in PAGES[8:11]},
        srv.url(PAGES[11]): "robots_denied",  # listed URLs pass robots like links
    }


BOMB = (
    '<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "aaaaaaaaaa">'
    + "".join(
        f'<!ENTITY {c} "{("&" + p + ";") * 10}">'
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + f"]><urlset {NS}><url><loc>&i;</loc></url></urlset>"
)


def xxe(srv: RecordingServer) -> str:
    return (
        f'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x SYSTEM "{srv.url("/xxe")}">'
        '<!ENTITY f SYSTEM "file:///etc/hostname">]>'
        f"<urlset {NS}><url><loc>{srv.url('/p')}&x;&f;</loc></url></urlset>"
    )


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_hostile_sitemaps_expand_and_fetch_nothing(wiring: str, tmp_path: Path) -> None:
    async with RecordingServer() as srv:
        srv.routes.update(
            {
                "/robots.txt": text(
                    f"Sitemap: {srv.url('/bomb.xml')}\nSitemap: {srv.url('/xxe.xml')}\n"
                ),
                "/": html("<p>x</p>"),
                "/bomb.xml": text(BOMB, "application/xml"),
                "/xxe.xml": text(xxe(srv), "text/xml"),
                "/xxe": text("http://127.0.0.1:1/leak"),
            }
        )
        policy = CrawlPolicy(crawl_id="t", seeds=(srv.url("/"),), delay=0.0)
        states = await crawl(wiring, policy, tmp_path, timeout=30)
    assert {url: s.state for url, s in states.items()} == {
        srv.url("/"): "fetched",
        srv.url("/bomb.xml"): "sitemap",
        srv.url("/xxe.xml"): "sitemap",
    }
    assert "/xxe" not in srv.paths() and "/p" not in srv.paths()


def feed_site(srv: RecordingServer) -> None:
    rss = (
        '<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>'
        f"<item><link>{srv.url('/post/1')}</link></item>"
        '<item><guid isPermaLink="true">/post/2</guid></item>'
        '<item><guid isPermaLink="false">urn:x</guid></item>'
        "</channel></rss>"
    )
    atom = (
        '<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
        '<entry><link rel="alternate" href="/post/3"/><link rel="edit" href="/edit/3"/></entry>'
        "</feed>"
    )
    srv.routes.update(
        {
            "/": html(
                "<head><link rel=alternate type=application/rss+xml href=/feed.rss>"
                "<link rel=alternate type=application/atom+xml href=/feed.atom></head>"
            ),
            "/feed.rss": text(rss, "application/rss+xml"),
            "/feed.atom": text(atom, "application/atom+xml"),
            **{f"/post/{i}": html(f"<title>{i}</title>") for i in (1, 2, 3)},
        }
    )


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_pages_only_in_feeds_are_found(wiring: str, tmp_path: Path) -> None:
    async with RecordingServer() as srv:
        feed_site(srv)
        policy = CrawlPolicy(crawl_id="t", seeds=(srv.url("/"),), delay=0.0, obey_robots=False)
        states = await crawl(wiring, policy, tmp_path, timeout=30)
    assert {url: s.state for url, s in states.items()} == {
        srv.url("/"): "fetched",
        srv.url("/feed.rss"): "feed",
        srv.url("/feed.atom"): "feed",
        **{srv.url(f"/post/{i}"): "fetched" for i in (1, 2, 3)},
    }
    assert "/edit/3" not in srv.paths()


@pytest.mark.parametrize("wiring", WIRINGS)
@pytest.mark.parametrize("off", ["sitemaps", "feeds"])
async def test_no_sitemaps_and_no_feeds_turn_discovery_off(
    wiring: str, off: str, tmp_path: Path
) -> None:
    async with RecordingServer() as srv:
        (sitemap_site if off == "sitemaps" else feed_site)(srv)
        policy = CrawlPolicy(crawl_id="t", seeds=(srv.url("/"),), delay=0.0, **{off: False})
        states = await crawl(wiring, policy, tmp_path, timeout=30)
    assert {url: s.state for url, s in states.items()} == {srv.url("/"): "fetched"}
    assert set(srv.paths()) <= {"/", "/robots.txt"}
