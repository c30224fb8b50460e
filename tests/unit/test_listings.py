"""``listings.merge``: the one link-batch merge of both wirings (the stages merge one page's
links and feeds; the Kafka wiring's ``LinkBatches`` merges the reports of many pages)."""

from __future__ import annotations

from streamcrawl.agents.content.listings import merge
from streamcrawl.schemas.records import FrontierBatch, UrlKind, UrlRef

A, B = "http://a.test", "http://b.test"


def batch(origin: str, *paths: str, crawl: str = "c", kind: UrlKind = "page") -> FrontierBatch:
    refs = tuple(UrlRef(f"{origin}{p}", 1, "http://p.test/", kind) for p in paths)
    return FrontierBatch(crawl_id=crawl, origin=origin, urls=refs)


def test_a_pages_links_and_feeds_become_one_batch_per_origin_in_order() -> None:
    page = [batch(A, "/1", "/2"), batch(B, "/x")]
    feeds = [batch(A, "/feed", kind="feed"), batch(B, "/rss", kind="feed")]
    merged = merge(page + feeds)
    assert [m.origin for m in merged] == [A, B]
    assert [(u.url, u.kind) for u in merged[0].urls] == [
        (A + "/1", "page"),
        (A + "/2", "page"),
        (A + "/feed", "feed"),
    ]
    assert merge(page) == page  # one batch per origin already: unchanged


def test_batches_of_different_crawls_stay_apart() -> None:
    merged = merge([batch(A, "/1"), batch(A, "/1", crawl="d"), batch(A, "/2")])
    assert [(m.crawl_id, [u.url for u in m.urls]) for m in merged] == [
        ("c", [A + "/1", A + "/2"]),
        ("d", [A + "/1"]),
    ]
