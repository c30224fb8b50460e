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
