"""Scrapy competitor: a stock CrawlSpider + LinkExtractor over the synthetic web.

Run by ``bench/runners.py`` in the benchmark venv (``.bench-venv``), never the project venv::

    python bench/competitors/scrapy_spider.py --seeds SEEDS.txt --out DIR [--delay S] [--stock]

Settings: ROBOTSTXT_OBEY=True, CONCURRENT_REQUESTS=64 and
CONCURRENT_REQUESTS_PER_DOMAIN=64 (Scrapy's download slot is the *hostname*, and every origin here
is 127.0.0.1, so the per-domain limit must equal the global one or it would cap the whole crawl),
DOWNLOAD_DELAY=0, LOG_LEVEL=WARNING, allowed_domains=["127.0.0.1"] (all ports).

Canonicalization: Scrapy's duplicate filter ignores fragments but keeps tracking parameters, so a
stock spider fetches ``p7.html`` and ``p7.html?utm_source=..`` twice.  Unless ``--stock`` is
given, the LinkExtractor gets a ``process_value`` that drops ``utm_*``/``gclid``/``fbclid`` - the
idiomatic Scrapy fix - so that every crawler does the same work.  The server log counts whatever
duplicates remain.

With ``--delay S`` (politeness run) each origin (host:port) gets its own download slot
(``meta["download_slot"]`` on start requests, rule requests and, by a downloader middleware,
robots.txt requests; Scrapy's default slot is the hostname, which would put all 127.0.0.1
origins in one slot), SCHEDULER_PRIORITY_QUEUE=DownloaderAwarePriorityQueue (Scrapy's advice
for broad crawls),
CONCURRENT_REQUESTS_PER_DOMAIN=1, DOWNLOAD_DELAY=S and DOWNLOAD_DELAY_JITTER=0 (Scrapy 2.19's
name for RANDOMIZE_DOWNLOAD_DELAY=False; the default jitter goes as low as 0.5 x S).

Writes ``DIR/items.jsonl`` (url, status, title per page) and ``DIR/summary.json`` (Scrapy stats).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

TRACKING_EXACT = frozenset({"gclid", "fbclid", "msclkid", "dclid"})


def strip_tracking(href: str) -> str:
    parts = urlsplit(href)
    if not parts.query:
        return href
    query = [
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if not k.startswith("utm_") and k not in TRACKING_EXACT
    ]
    return urlunsplit(parts._replace(query=urlencode(query)))


class PerOriginSlot:
    """Downloader middleware: one download slot (delay, concurrency) per host:port."""

    def process_request(self, request, spider=None):
        request.meta.setdefault("download_slot", urlsplit(request.url).netloc)


class BenchSpider(CrawlSpider):
    name = "bench"
    allowed_domains = ["127.0.0.1"]

    def __init__(self, seeds: list[str], stock: bool, per_origin_slots: bool = False, **kw):
        self.start_urls = seeds
        self.per_origin_slots = per_origin_slots
        extractor = LinkExtractor() if stock else LinkExtractor(process_value=strip_tracking)
        self.rules = (
            Rule(
                extractor,
                callback="parse_item",
                follow=True,
                process_request="set_slot" if per_origin_slots else None,
            ),
        )
        super().__init__(**kw)

    # The slot must be on the request before the scheduler sees it, for
    # DownloaderAwarePriorityQueue to spread requests over origins.
    def set_slot(self, request, response=None):
        request.meta.setdefault("download_slot", urlsplit(request.url).netloc)
        return request

    async def start(self):
        async for request in super().start():
            yield self.set_slot(request) if self.per_origin_slots else request

    def parse_start_url(self, response):
        return self.parse_item(response)

    def parse_item(self, response):
        yield {
            "url": response.url,
            "status": response.status,
            "title": response.css("title::text").get(),
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--stock", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = Path(a.seeds).read_text().split()
    settings = {
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": 64,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 64,
        "DOWNLOAD_DELAY": 0,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
        "USER_AGENT": "bench-scrapy",
        "FEEDS": {str(out / "items.jsonl"): {"format": "jsonlines", "overwrite": True}},
    }
    if a.delay > 0:
        settings.update(
            {
                "DOWNLOAD_DELAY": a.delay,
                "DOWNLOAD_DELAY_JITTER": 0,
                "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
                "DOWNLOADER_MIDDLEWARES": {"__main__.PerOriginSlot": 50},  # robots.txt requests
                # Scrapy's advice for broad crawls: pick requests by downloader slot load.
                "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
            }
        )
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(BenchSpider)
    process.crawl(crawler, seeds=seeds, stock=a.stock, per_origin_slots=a.delay > 0)
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    pages = stats.get("item_scraped_count", 0)
    (out / "summary.json").write_text(json.dumps({"pages": pages, "stats": stats}, default=str))
    print(json.dumps({"pages": pages}))


if __name__ == "__main__":
    main()
