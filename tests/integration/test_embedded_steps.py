"""The embedded crawl's loop in the caller's hands: ``start``, ``step``, ``close``.

``step`` hands back the page records a turn committed only once their state is written, and
``close`` gives the requests in flight their grace even when the crawl's task is cancelled.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from streamcrawl.agents.frontier.store import RocksStore
from streamcrawl.schemas.records import CrawlPolicy, Page
from streamcrawl.topology.embedded.runner import EmbeddedCrawl
from tests.httpserver import RecordingServer, html, slow

pytestmark = pytest.mark.integration


def site(pages: int) -> dict[str, object]:
    """``/`` links ``/p/0`` ... ``/p/{pages - 1}``; no robots.txt (404: all allowed)."""
    links = "".join(f'<a href="/p/{i}">{i}</a>' for i in range(pages))
    routes: dict[str, object] = {"/": html(f"<title>home</title>{links}")}
    routes |= {f"/p/{i}": html(f"<title>page {i}</title>") for i in range(pages)}
    return routes


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def embedded(tmp_path: Path, seed: str, **policy: object) -> EmbeddedCrawl:
    spec = CrawlPolicy(crawl_id="t", seeds=(seed,), **{"delay": 0.0, **policy})  # type: ignore[arg-type]
    return EmbeddedCrawl(spec, out_dir=tmp_path / "out", state_dir=tmp_path / "state")


async def test_step_returns_each_page_once_its_state_is_written(tmp_path: Path) -> None:
    async with RecordingServer(site(6)) as srv:
        crawl = embedded(tmp_path, srv.url("/"), per_origin_concurrency=3)
        returned: list[Page] = []
        try:
            await crawl.start()
            while (committed := await crawl.step()) is not None:
                written = {str(p["url"]) for p in lines(tmp_path / "out/pages.jsonl")}
                done = {str(u["url"]) for u in lines(tmp_path / "out/urls.jsonl")}
                for page in committed:
                    assert page.url in written and page.url in done
                returned += committed
        finally:
            summary = await crawl.close()
    assert sorted(p.url for p in returned) == sorted(srv.url(p) for p in site(6))
    assert [p.url for p in returned] == [p["url"] for p in lines(tmp_path / "out/pages.jsonl")]
    assert not summary.interrupted
    assert await crawl.close() is summary  # a second close changes nothing


async def test_a_cancelled_run_gives_requests_in_flight_their_grace(tmp_path: Path) -> None:
    routes = {"/": html('<a href="/slow">slow</a>'), "/slow": slow(0.5)}
    async with RecordingServer(routes) as srv:
        crawl = embedded(tmp_path, srv.url("/"))
        task = asyncio.create_task(crawl.run())
        while "/slow" not in srv.paths():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert [p["url"] for p in lines(tmp_path / "out/pages.jsonl")] == [
        srv.url("/"),
        srv.url("/slow"),
    ]
    assert crawl.summary.interrupted
    RocksStore(tmp_path / "state/t").close()  # the store was closed: it opens again


async def test_a_crawl_closed_before_its_end_is_interrupted(tmp_path: Path) -> None:
    async with RecordingServer(site(3)) as srv:
        crawl = embedded(tmp_path, srv.url("/"))
        await crawl.start()
        while not (committed := await crawl.step()):
            assert committed is not None
        summary = await crawl.close()  # one request at a time: none in flight between steps
    assert [p.url for p in committed] == [srv.url("/")]
    assert summary.interrupted
    assert await crawl.step() is None  # closed: nothing more starts
