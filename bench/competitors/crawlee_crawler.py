"""Crawlee for Python competitor: a ParselCrawler over the synthetic web.

Run by ``bench/runners.py`` in the benchmark venv (``.bench-venv``)::

    python bench/competitors/crawlee_crawler.py --seeds SEEDS.txt --out DIR [--stock]

Options: ``respect_robots_txt_file=True``; ``ConcurrencySettings(desired_concurrency=64,
max_concurrency=64)`` (Crawlee's autoscaled pool still lowers concurrency when it sees the CPU
overloaded); in-memory storage (``MemoryStorageClient``, nothing under ``./storage``);
``enqueue_links(strategy="same-hostname")``, which compares hosts without ports (crawlee
``_utils/urls.py``), so every 127.0.0.1 origin is in scope, the other strategies either split
by port or consult the public suffix list.  The default HTTP client (impit) is used.

Canonicalization: Crawlee's unique key drops fragments and ``utm_*`` parameters but keeps
``gclid``; unless ``--stock`` is given, ``transform_request_function`` also drops
``gclid``/``fbclid`` and rewrites the URL to its clean form, so that every crawler does the same
work.  The server log counts whatever duplicates remain.

Writes ``DIR/items.jsonl`` (url, status, title per page) and ``DIR/summary.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from crawlee import ConcurrencySettings
from crawlee.crawlers import ParselCrawler, ParselCrawlingContext
from crawlee.storage_clients import MemoryStorageClient

TRACKING_EXACT = frozenset({"gclid", "fbclid", "msclkid", "dclid"})


def strip_tracking(url: str) -> str:
    parts = urlsplit(url)
    query = [
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if not k.startswith("utm_") and k not in TRACKING_EXACT
    ]
    return urlunsplit(parts._replace(query=urlencode(query), fragment=""))


def clean_request(options):
    options["url"] = strip_tracking(options["url"])
    return options


async def crawl(seeds: list[str], out: Path, stock: bool) -> dict:
    crawler = ParselCrawler(
        respect_robots_txt_file=True,
        concurrency_settings=ConcurrencySettings(desired_concurrency=64, max_concurrency=64),
        storage_client=MemoryStorageClient(),
        max_request_retries=2,
    )
    items = open(out / "items.jsonl", "w")  # noqa: SIM115 - closed after crawler.run()
    pages = 0

    @crawler.router.default_handler
    async def handle(context: ParselCrawlingContext) -> None:
        nonlocal pages
        pages += 1
        title = context.selector.css("title::text").get()
        items.write(
            json.dumps(
                {
                    "url": context.request.url,
                    "status": context.http_response.status_code,
                    "title": title,
                }
            )
            + "\n"
        )
        await context.enqueue_links(
            strategy="same-hostname", transform_request_function=None if stock else clean_request
        )

    stats = await crawler.run(seeds)
    items.close()
    return {"pages": pages, "stats": json.loads(json.dumps(stats.to_dict(), default=str))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stock", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = asyncio.run(crawl(Path(a.seeds).read_text().split(), out, a.stock))
    (out / "summary.json").write_text(json.dumps(summary))
    print(json.dumps({"pages": summary["pages"]}))


if __name__ == "__main__":
    main()
