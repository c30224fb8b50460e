"""Crawlee for Python competitor of the rendering bench: a PlaywrightCrawler over the app site.

Run by ``bench/render_rows.py`` in the benchmark venv (``.bench-venv``)::

    python bench/competitors/crawlee_playwright.py --seeds SEEDS.txt --out DIR \
        [--chromium /usr/bin/chromium] [--concurrency 2]

The browser is the system's Chromium (``browser_launch_options={"executable_path": ...}``,
headless): Playwright downloads nothing. Otherwise Crawlee's defaults (its fingerprint
generator, one shared context, its browser pool), with ``respect_robots_txt_file=True``,
in-memory storage and ``ConcurrencySettings(max_concurrency=N)``, N the pages streamcrawl's
renderer has open at once, so both keep as many pages in flight.

Each page, once loaded, waits for Playwright's ``networkidle`` (no request for 0.5 s): the
rule streamcrawl's renderer settles a page by (docs/rendering.md, "The browser's life"), which
knows nothing of the site either. Then the rendered DOM's links are enqueued
(``same-hostname``).

Writes ``DIR/items.jsonl`` (url, links found) and prints ``{"pages": N}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from crawlee import ConcurrencySettings
from crawlee.crawlers import PlaywrightCrawler, PlaywrightCrawlingContext
from crawlee.storage_clients import MemoryStorageClient


async def crawl(seeds: list[str], out: Path, chromium: str, concurrency: int) -> int:
    crawler = PlaywrightCrawler(
        browser_type="chromium",
        headless=True,
        # Playwright's own default, which streamcrawl's renderer launches with: Crawlee asks
        # for the sandbox, which Chromium refuses to run as root.
        browser_launch_options={"executable_path": chromium, "chromium_sandbox": False},
        respect_robots_txt_file=True,
        concurrency_settings=ConcurrencySettings(
            min_concurrency=1, desired_concurrency=concurrency, max_concurrency=concurrency
        ),
        storage_client=MemoryStorageClient(),
        max_request_retries=2,
    )
    items = open(out / "items.jsonl", "w")  # noqa: SIM115 - closed after crawler.run()
    pages = 0

    @crawler.router.default_handler
    async def handle(context: PlaywrightCrawlingContext) -> None:
        nonlocal pages
        await context.page.wait_for_load_state("networkidle")
        links = await context.page.eval_on_selector_all("a[href]", "els => els.length")
        pages += 1
        items.write(json.dumps({"url": context.request.url, "links": links}) + "\n")
        await context.enqueue_links(strategy="same-hostname")

    await crawler.run(seeds)
    items.close()
    return pages


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--concurrency", type=int, default=2)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = Path(a.seeds).read_text().split()
    pages = asyncio.run(crawl(seeds, out, a.chromium, a.concurrency))
    print(json.dumps({"pages": pages}))


if __name__ == "__main__":
    main()
