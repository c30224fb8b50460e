"""Continuous crawling end to end: a local site whose pages change, crawled with revisits.

What the server was asked is the truth: the validators each revisit sent (byte for byte what the
previous response carried), the 304s it answered without a body, the gaps between arrivals on
one origin; and what the crawl wrote: one ``new`` record per URL, one ``changed`` record per
change seen, small ``unchanged`` records, ``gone`` after a confirmed 404.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.embedded.runner import EmbeddedCrawl
from tests.httpserver import RecordingServer
from tests.kafka_agents import AgentsCrawl
from tests.living_site import ODD_ETAG, LivingSite

pytestmark = pytest.mark.integration

DELAY = 0.15


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


Result = tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]


def spec(seed: str, **policy: Any) -> CrawlPolicy:
    return CrawlPolicy(
        crawl_id="live",
        seeds=(seed,),
        delay=DELAY,
        **{
            "recrawl_after": 1.0,
            "recrawl_min": 1.0,
            "recrawl_mode": "fixed",
            "recrawl_jitter": 0.0,
            **policy,
        },
    )


async def crawl_for(tmp_path: Path, seed: str, seconds: float, **policy: Any) -> Result:
    """Run a continuous crawl for ``seconds`` (it never ends by itself), then stop it."""
    crawl = EmbeddedCrawl(
        spec(seed, **policy), out_dir=tmp_path / "out", state_dir=tmp_path / "state"
    )
    task = asyncio.create_task(crawl.run())
    await asyncio.sleep(seconds)
    assert not task.done(), "a continuous crawl must keep running until stopped"
    crawl.stop()
    summary = await task
    out = tmp_path / "out"
    return summary.as_dict(), records(out / "pages.jsonl"), records(out / "urls.jsonl")


async def crawl_kafka_for(_tmp_path: Path, seed: str, seconds: float, **policy: Any) -> Result:
    """The same through the Kafka agents in one loop (tests/kafka_agents.py)."""
    agents = await AgentsCrawl(spec(seed, **policy)).run(for_seconds=seconds)
    pages = [msgspec.to_builtins(p) for p in agents.pages]
    changes = [p["change"] for p in pages]
    summary = {"revisits": len(changes) - changes.count("new"), "changes": Counter(changes)}
    return summary, pages, [msgspec.to_builtins(s) for s in agents.statuses]


@pytest.fixture(params=["embedded", "kafka"])
def crawl_in(request: pytest.FixtureRequest) -> Any:
    """``crawl_for`` through the embedded runner, or through the in-process Kafka agents."""
    return crawl_for if request.param == "embedded" else crawl_kafka_for


def of(pages: list[dict[str, Any]], url: str) -> list[dict[str, Any]]:
    return [p for p in pages if p["url"] == url]


async def test_revisits_echo_validators_and_publish_one_record_per_change(
    tmp_path: Path, crawl_in: Any
) -> None:
    site = LivingSite(["/", "/a", "/b"], sitemap=False)
    site.configure("/a", etag=ODD_ETAG, dates="rfc850")  # unusual, echoed as they are
    async with RecordingServer(site.routes()) as srv:
        task = asyncio.create_task(crawl_in(tmp_path, srv.url("/"), 5.0))
        await asyncio.sleep(2.2)
        site.change("/a")
        await asyncio.sleep(1.2)
        site.change("/a")
        summary, pages, urls = await task
    for path in ("/", "/a", "/b"):
        served = site.served(path)
        assert len(served) >= 3, (path, len(served))
        assert site.conditional(path)[0] == (None, None)  # a first fetch has no validators
        for before, after in itertools.pairwise(served):
            # Each revisit sends exactly what the previous answer carried.
            assert (after.if_none_match, after.if_modified_since) == (
                before.etag,
                before.last_modified,
            )
        assert all(s.body_bytes == 0 for s in served if s.status == 304)
    # /a changed twice: two "changed" records, each with the digest it replaced.
    a = of(pages, srv.url("/a"))
    changes = [p["change"] for p in a]
    assert changes[0] == "new" and changes.count("new") == 1
    assert changes.count("changed") == 2, changes
    changed = [p for p in a if p["change"] == "changed"]
    assert changed[0]["previous_sha256"] == a[0]["body_sha256"]
    assert changed[1]["previous_sha256"] == changed[0]["body_sha256"] != a[0]["body_sha256"]
    # Unchanged revisits are small: no body, no links, no title.
    unchanged = [p for p in pages if p["change"] == "unchanged"]
    assert unchanged and all(not p["links"] and p["title"] is None for p in unchanged)
    assert all(p["status"] == 304 and p["body_bytes"] == 0 for p in unchanged)
    # One terminal state per URL: revisits add none.
    assert sorted(u["url"] for u in urls) == sorted(srv.url(p) for p in ("/", "/a", "/b"))
    assert summary["revisits"] >= 6 and summary["changes"]["changed"] == 2
    # One origin: every request, revisits included, at least the delay apart on arrival.
    assert min(srv.gaps(lambda r: r.path != "/robots.txt")) >= DELAY - 0.002
    assert len(srv.requests("/robots.txt")) == 1  # its own 24 h cache


async def test_an_identical_body_is_unchanged_and_a_confirmed_404_is_gone(
    tmp_path: Path, crawl_in: Any
) -> None:
    site = LivingSite(["/", "/same", "/old"], sitemap=False)
    site.configure("/same", mode="ignore")  # sends validators, answers 200 every time
    async with RecordingServer(site.routes()) as srv:
        task = asyncio.create_task(crawl_in(tmp_path, srv.url("/"), 5.5))
        await asyncio.sleep(1.6)
        site.remove("/old", status=410)
        _summary, pages, urls = await task
    same = of(pages, srv.url("/same"))
    assert {s.status for s in site.served("/same")} == {200}
    assert [p["change"] for p in same][:1] == ["new"]
    assert len(same) >= 3 and {p["change"] for p in same[1:]} == {"unchanged"}
    assert all(p["status"] == 200 and p["body_sha256"] == same[0]["body_sha256"] for p in same)
    old = of(pages, srv.url("/old"))
    statuses = site.statuses("/old")
    # A 410 is confirmed once, then the URL is gone: published, and never asked for again.
    assert statuses.count(410) == 2 and statuses[-2:] == [410, 410], statuses
    assert old[-1]["change"] == "gone" and old[-1]["status"] == 410
    assert [p["change"] for p in old].count("gone") == 1
    gone = [u for u in urls if u["url"] == srv.url("/old")]
    assert [u["state"] for u in gone] == ["fetched", "gone"]


async def test_a_resumed_crawl_keeps_its_schedule_and_validators(tmp_path: Path) -> None:
    site = LivingSite(["/", "/a"], sitemap=False)
    async with RecordingServer(site.routes()) as srv:
        await crawl_for(tmp_path, srv.url("/"), 1.5)
        first = len(site.served("/a"))
        _, pages, _ = await crawl_for(tmp_path, srv.url("/"), 2.5)
    served = site.served("/a")
    assert len(served) > first
    # After the restart the revisits still carry the validators of the last answer.
    resumed = served[first]
    assert (resumed.if_none_match, resumed.if_modified_since) == (
        served[first - 1].etag,
        served[first - 1].last_modified,
    )
    assert [p["change"] for p in of(pages, srv.url("/a"))].count("new") == 1


async def test_recrawl_at_makes_every_fetched_url_due_at_once(tmp_path: Path) -> None:
    """``crawl --recrawl-now`` (CrawlPolicy.recrawl_at): a crawl whose revisits are an hour
    away fetches every page again at once when resumed, with its validators."""
    site = LivingSite(["/", "/a", "/b"], sitemap=False)
    hour = {"recrawl_after": 3600.0, "recrawl_min": 3600.0}
    async with RecordingServer(site.routes()) as srv:
        await crawl_for(tmp_path, srv.url("/"), 1.5, **hour)
        assert all(len(site.served(p)) == 1 for p in ("/", "/a", "/b"))
        await crawl_for(tmp_path, srv.url("/"), 1.5, **hour)  # resumed: nothing due yet
        assert all(len(site.served(p)) == 1 for p in ("/", "/a", "/b"))
        now = time.time()
        _, pages, _ = await crawl_for(tmp_path, srv.url("/"), 1.5, recrawl_at=now, **hour)
    for path in ("/", "/a", "/b"):
        served = site.served(path)
        assert len(served) == 2, (path, len(served))
        assert served[1].if_none_match == served[0].etag and served[1].status == 304
    assert [p["change"] for p in pages].count("new") == 3


async def test_sitemaps_are_revisited_with_their_own_validators(
    tmp_path: Path, crawl_in: Any
) -> None:
    site = LivingSite(["/", "/a"])  # robots.txt names /sitemap.xml
    async with RecordingServer(site.routes()) as srv:
        _, pages, urls = await crawl_in(tmp_path, srv.url("/"), 4.0)
    sitemap = site.served("/sitemap.xml")
    assert len(sitemap) >= 3, len(sitemap)
    assert site.conditional("/sitemap.xml")[0] == (None, None)
    for before, after in itertools.pairwise(sitemap):
        assert (after.if_none_match, after.if_modified_since) == (before.etag, before.last_modified)
    assert {s.status for s in sitemap[1:]} == {304}
    assert len(srv.requests("/robots.txt")) == 1
    # A sitemap is not a page: no page record, one `sitemap` state.
    assert not of(pages, srv.url("/sitemap.xml"))
    assert [u["state"] for u in urls if u["url"] == srv.url("/sitemap.xml")] == ["sitemap"]
