"""Extraction without code through both wirings (``tests/wirings.py``): the crawl's extractors
fill the ``data`` of every page record, in the embedded crawl's ``pages.jsonl`` and on the
agents' ``pages`` topic alike. The Kafka wiring against the real broker and Cassandra:
``tests/integration/test_extraction_kafka.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamcrawl.schemas.records import CrawlPolicy, Extractor
from tests.httpserver import RecordingServer, html, text
from tests.wirings import WIRINGS, crawl_with_pages

pytestmark = pytest.mark.integration

EXTRACT = (
    Extractor(name="name", selector="h1.name"),
    Extractor(name="price", selector=".price::text"),
    Extractor(name="tags", selector="a.tag::attr(href)", all=True),
    Extractor(name="title", selector="title"),
)


def shop() -> dict[str, object]:
    return {
        "/": html(
            "<title>Shop</title><h1 class=name> Blue\n  mug </h1><p>Only <span class=price>"
            "9.99</span> today</p><a class=tag href=/t/kitchen>kitchen</a>"
            "<a class=tag href=/t/blue>blue</a><a href=/p2>next</a><a href=/mug.png>photo</a>"
        ),
        "/p2": html("<title>Red cup</title><h1 class=name>Red cup</h1><a class=tag>no href</a>"),
        "/t/kitchen": html("<title>Kitchen</title>"),
        "/t/blue": html("<title>Blue</title>"),
        "/mug.png": text(b"\x89PNG\r\n\x1a\n", "image/png"),
    }


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_the_extractors_fill_the_data_of_every_page_record(
    wiring: str, tmp_path: Path
) -> None:
    async with RecordingServer(shop()) as srv:  # type: ignore[arg-type]
        policy = CrawlPolicy(
            crawl_id="x", seeds=(srv.url("/"),), delay=0.0, obey_robots=False, extract=EXTRACT,
            content_types=("text/html", "image/png"),
        )  # fmt: skip
        states, pages = await crawl_with_pages(wiring, policy, tmp_path, timeout=30)
    assert {s.state for s in states.values()} == {"fetched"} and len(pages) == 5
    data = {page.url: page.data for page in pages}
    assert data == {
        srv.url("/"): {
            "name": "Blue mug",
            "price": "9.99",
            "tags": ["/t/kitchen", "/t/blue"],  # as written in the page
            "title": "Shop",
        },
        srv.url("/p2"): {"name": "Red cup", "price": None, "tags": [], "title": "Red cup"},
        srv.url("/t/kitchen"): {"name": None, "price": None, "tags": [], "title": "Kitchen"},
        srv.url("/t/blue"): {"name": None, "price": None, "tags": [], "title": "Blue"},
        # a content type the crawl takes that is not text: nothing to read
        srv.url("/mug.png"): {"name": None, "price": None, "tags": [], "title": None},
    }


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_crawl_without_extractors_has_no_data(wiring: str, tmp_path: Path) -> None:
    async with RecordingServer(shop()) as srv:  # type: ignore[arg-type]
        policy = CrawlPolicy(crawl_id="x", seeds=(srv.url("/"),), delay=0.0, obey_robots=False)
        _states, pages = await crawl_with_pages(wiring, policy, tmp_path, timeout=30)
    assert len(pages) == 4 and all(page.data is None for page in pages)


ARTICLE = (
    "<html><head><title>Crawling news</title></head><body>"
    "<nav><a href=/>Home</a> <a href=/about>About</a> <a href=/shop>Shop</a></nav>"
    "<article><h1>Polite crawlers</h1>"
    "<p>A polite crawler waits between two requests to the same site, reads the site's robots "
    "file before anything else, and backs off when the server answers that it is busy.</p>"
    "<p>Keeping each site's queue in one partition lets one worker own its politeness, so no "
    "shared limiter is needed and the delay holds across a whole cluster of workers.</p>"
    "</article><aside><p>Related: ten tips for your garden</p></aside>"
    "<footer><p>Copyright 2026, all rights reserved</p></footer></body></html>"
)
DEUTSCH = (
    "<html><head><title>Nachrichten</title></head><body><nav><a href=/>Start</a></nav>"
    "<article><p>Ein höflicher Crawler wartet zwischen zwei Anfragen an dieselbe Website und "
    "liest zuerst die robots-Datei der Website, bevor er irgendetwas anderes abruft.</p>"
    "</article><footer><p>Impressum</p></footer></body></html>"
)


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_text_keeps_each_pages_main_text_and_language(wiring: str, tmp_path: Path) -> None:
    routes = {
        "/": html(ARTICLE + '<a href="/de">de</a>'),
        "/de": html(DEUTSCH),
        "/hidden": html("<meta name=robots content=noindex>" + ARTICLE),
    }
    async with RecordingServer(routes) as srv:
        srv.routes["/"] = html(
            ARTICLE.replace("</body>", '<a href="/de">de</a> <a href="/hidden">h</a></body>')
        )
        policy = CrawlPolicy(
            crawl_id="t", seeds=(srv.url("/"),), delay=0.0, obey_robots=False, main_text=True
        )
        _states, pages = await crawl_with_pages(wiring, policy, tmp_path, timeout=30)
    by_url = {page.url: page for page in pages}
    home, de, hidden = by_url[srv.url("/")], by_url[srv.url("/de")], by_url[srv.url("/hidden")]
    assert home.language == "en" and home.main_text is not None
    assert "backs off when the server answers" in home.main_text
    assert "garden" not in home.main_text  # the aside
    assert "Copyright" not in home.main_text and "About" not in home.main_text
    assert de.language == "de" and de.main_text is not None and "höflicher" in de.main_text
    assert hidden.main_text is None and hidden.language is None  # noindex: no index content


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_crawl_without_text_keeps_none(wiring: str, tmp_path: Path) -> None:
    async with RecordingServer({"/": html(ARTICLE)}) as srv:
        policy = CrawlPolicy(crawl_id="t", seeds=(srv.url("/"),), delay=0.0, obey_robots=False)
        _states, pages = await crawl_with_pages(wiring, policy, tmp_path, timeout=30)
    assert [(p.main_text, p.language) for p in pages] == [(None, None)]
