"""The embedded crawl end to end against local servers that log every request.

Each assertion reads the servers' logs: what was really asked, and when. The tests taking the
``run_crawl`` fixture (dedupe, robots, redirects, politeness, size cap, budget) run twice: through
the embedded runner and through the Kafka agents wired in one process (tests/kafka_agents.py), so
the two wirings cannot drift apart unnoticed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.embedded.runner import EmbeddedCrawl
from tests.httpserver import RecordingServer, html, redirect, slow, stream, text
from tests.kafka_agents import AgentsCrawl
from tests.unit.test_dispatch import CountingTask

pytestmark = pytest.mark.integration

ROBOTS = text("User-agent: *\nDisallow: /private/\n")


def page(*links: str, title: str = "t") -> object:
    anchors = "".join(f'<a href="{href}">x</a>' for href in links)
    return html(f"<html><head><title>{title}</title></head><body>{anchors}</body></html>")


async def crawl(tmp_path: Path, seeds: list[str], **policy: object) -> tuple[dict, list, list]:
    spec = CrawlPolicy(crawl_id="t", seeds=tuple(seeds), **{"delay": 0.0, **policy})  # type: ignore[arg-type]
    summary = await EmbeddedCrawl(
        spec, out_dir=tmp_path / "out", state_dir=tmp_path / "state", concurrency=8
    ).run()
    pages = [json.loads(line) for line in (tmp_path / "out/pages.jsonl").read_text().splitlines()]
    urls = [json.loads(line) for line in (tmp_path / "out/urls.jsonl").read_text().splitlines()]
    return summary.as_dict(), pages, urls


async def crawl_kafka(
    tmp_path: Path, seeds: list[str], **policy: object
) -> tuple[dict, list, list]:
    """``crawl`` through the Kafka agents: the same summary keys, page and URL records."""
    spec = CrawlPolicy(crawl_id="t", seeds=tuple(seeds), **{"delay": 0.0, **policy})  # type: ignore[arg-type]
    started = time.monotonic()
    agents = await AgentsCrawl(spec).run()
    urls = [msgspec.to_builtins(s) for s in agents.statuses]
    summary = {
        "pages": len(agents.pages),
        "states": Counter(u["state"] for u in urls),
        "elapsed_s": time.monotonic() - started,
    }
    return summary, [msgspec.to_builtins(p) for p in agents.pages], urls


Crawl = Callable[..., Awaitable[tuple[dict[str, Any], list[Any], list[Any]]]]


@pytest.fixture(params=["embedded", "kafka"])
def run_crawl(request: pytest.FixtureRequest) -> Crawl:
    """``crawl`` through the embedded runner, or through the in-process Kafka agents."""
    return crawl if request.param == "embedded" else crawl_kafka


def fetched_paths(srv: RecordingServer) -> Counter[str]:
    return Counter(r.path for r in srv.log if r.path != "/robots.txt")


async def test_variants_fetched_once_and_disallowed_never(tmp_path: Path, run_crawl: Crawl) -> None:
    async with RecordingServer() as srv:
        host_upper = srv.origin.replace("127.0.0.1", "127.0.0.1").upper().replace("HTTP", "http")
        srv.routes.update(
            {
                "/robots.txt": ROBOTS,
                "/": page(
                    "/a",
                    "/a#frag",
                    "/a?utm_source=x",
                    "/a?gclid=1&utm_medium=y",
                    f"{host_upper}/a",
                    "./a",
                    "/b?y=2&x=1",
                    "/b?x=1&y=2",
                    "/private/p",
                    "/private/q#z",
                ),
                "/a": page("/", "/b?x=1&y=2#top"),
                "/b?x=1&y=2": page("/a"),
                "/private/p": page(),
                "/private/q": page(),
            }
        )
        summary, pages, urls = await run_crawl(tmp_path, [srv.url("/")])
    counts = fetched_paths(srv)
    assert counts == Counter({"/": 1, "/a": 1, "/b?x=1&y=2": 1}), counts
    assert [r.path for r in srv.log].count("/robots.txt") == 1
    states = Counter(u["state"] for u in urls)
    assert states == {"fetched": 3, "robots_denied": 2}
    assert len(pages) == 3 and summary["pages"] == 3
    assert len({u["url"] for u in urls}) == len(urls)  # one terminal state per URL


async def test_per_origin_gaps_respect_delay_and_origins_run_in_parallel(
    tmp_path: Path, run_crawl: Crawl
) -> None:
    n = 8
    async with RecordingServer() as a, RecordingServer() as b:
        for srv in (a, b):
            srv.routes.update({f"/{i}": page(f"/{i + 1}") for i in range(n)})
            srv.routes[f"/{n}"] = page()
        summary, _, _ = await run_crawl(tmp_path, [a.url("/0"), b.url("/0")], delay=0.2)
    for srv in (a, b):
        gaps = srv.gaps()
        assert len(gaps) == n + 1  # robots.txt + n+1 pages
        assert min(gaps) >= 0.2 - 0.01, gaps
    # Both origins were crawled side by side: the whole crawl took about one origin's time.
    assert summary["elapsed_s"] < (n + 1) * 0.2 * 1.6


async def test_crawl_delay_from_robots(tmp_path: Path, run_crawl: Crawl) -> None:
    async with RecordingServer() as srv:
        srv.routes.update(
            {
                "/robots.txt": text("User-agent: streamcrawl\nCrawl-delay: 0.3\n"),
                "/0": page("/1"),
                "/1": page("/2"),
                "/2": page(),
            }
        )
        await run_crawl(tmp_path, [srv.url("/0")], delay=0.0)
    assert min(srv.gaps(lambda r: r.path != "/robots.txt")) >= 0.3 - 0.01


async def test_retry_after_is_respected_then_succeeds(tmp_path: Path) -> None:
    from aiohttp import web

    calls = {"n": 0}

    async def flaky(request: web.Request) -> web.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            return web.Response(status=429, headers={"Retry-After": "1"}, text="slow down")
        return web.Response(text="<title>ok</title>", content_type="text/html")

    async with RecordingServer({"/": flaky}) as srv:
        _, _pages, urls = await crawl(tmp_path, [srv.url("/")], retries=2)
    times = [r.t for r in srv.log if r.path == "/"]
    assert len(times) == 2
    assert times[1] - times[0] >= 1.0 - 0.01
    assert [u["state"] for u in urls] == ["fetched"]
    assert urls[0]["attempts"] == 2


async def test_retries_exhausted_record_failed_with_last_error(tmp_path: Path) -> None:
    async with RecordingServer({"/": text("boom", status=500)}) as srv:
        _, pages, urls = await crawl(tmp_path, [srv.url("/")], retries=1, max_backoff=0.2)
    assert len([r for r in srv.log if r.path == "/"]) == 2
    assert urls[0]["state"] == "failed" and "500" in (urls[0]["last_error"] or "")
    assert pages == []


async def test_redirect_loop_terminates(tmp_path: Path, run_crawl: Crawl) -> None:
    async with RecordingServer({"/a": redirect("/b"), "/b": redirect("/a")}) as srv:
        _, _, urls = await run_crawl(tmp_path, [srv.url("/a")])
    assert len(srv.log) <= 8
    assert {u["state"] for u in urls} <= {"failed", "duplicate"}


async def test_same_origin_redirect_target_not_fetched_twice(
    tmp_path: Path, run_crawl: Crawl
) -> None:
    async with RecordingServer() as srv:
        srv.routes.update({"/": page("/old", "/new"), "/old": redirect("/new"), "/new": page("/")})
        _, pages, _urls = await run_crawl(tmp_path, [srv.url("/")], per_origin_concurrency=1)
    counts = fetched_paths(srv)
    assert counts["/new"] == 1, counts
    assert sorted(p["final_url"].rsplit("/", 1)[1] for p in pages) == ["", "new"]


async def test_oversized_body_cut_and_non_html_not_downloaded(
    tmp_path: Path, run_crawl: Crawl
) -> None:
    big = 5 * 1024 * 1024
    async with RecordingServer() as srv:
        srv.routes.update(
            {
                "/": page("/big", "/pic.png"),
                "/big": stream(big, chunk=64 * 1024),
                "/pic.png": stream(big, content_type="image/png"),
            }
        )
        _, _pages, urls = await run_crawl(tmp_path, [srv.url("/")], max_body=256 * 1024)
    by_path = {u["url"].rsplit("/", 1)[1]: u["state"] for u in urls}
    assert by_path["big"] == "too_large"
    assert by_path["pic.png"] == "skipped_content_type"
    assert srv.sent.get("/big", 0) < big
    assert srv.sent.get("/pic.png", 0) < big


async def test_slow_origin_does_not_block_the_others(tmp_path: Path) -> None:
    async with RecordingServer() as fast, RecordingServer() as slowsrv:
        fast.routes.update({f"/{i}": page(f"/{i + 1}") for i in range(10)})
        fast.routes["/10"] = page()
        slowsrv.routes.update({"/": slow(3.0, page())})
        await crawl(tmp_path, [slowsrv.url("/"), fast.url("/0")], timeout=10.0)
    fast_done = max(r.t for r in fast.log)
    slow_started = min(r.t for r in slowsrv.log if r.path == "/")
    assert fast_done < slow_started + 3.0  # the fast origin finished while the slow one hung


async def test_max_pages_and_depth(tmp_path: Path, run_crawl: Crawl) -> None:
    async with RecordingServer() as srv:
        srv.routes.update({f"/{i}": page(f"/{i + 1}", f"/{i + 2}") for i in range(30)})
        _, pages, urls = await run_crawl(tmp_path, [srv.url("/0")], max_pages=5)
    assert len(pages) == 5
    assert Counter(u["state"] for u in urls)["fetched"] == 5
    async with RecordingServer() as srv:
        srv.routes.update({f"/{i}": page(f"/{i + 1}") for i in range(30)})
        _, pages, _ = await run_crawl(tmp_path / "d", [srv.url("/0")], max_depth=2)
    assert sorted(p["depth"] for p in pages) == [0, 1, 2]


async def test_hostile_pages_do_not_crash_the_run(tmp_path: Path) -> None:
    nested = "<div>" * 20000 + "x"
    async with RecordingServer() as srv:
        srv.routes.update(
            {
                "/robots.txt": text(b"\xff\xfe\x00garbage\nDisallow: /\x00\n" * 100),
                "/": page("/nested", "/nul", "/latin", "/empty", "http://[::1", "http://a b/"),
                "/nested": html(nested),
                "/nul": html(b"<a href='/x\x00y'>\x00</a>"),
                "/latin": html(
                    "<title>caf\xe9</title>".encode("latin-1"),
                    headers={"Content-Type": "text/html; charset=latin-1"},
                ),
                "/empty": html(b""),
            }
        )
        summary, pages, _urls = await crawl(tmp_path, [srv.url("/")])
    titles = {p["url"].rsplit("/", 1)[1]: p["title"] for p in pages}
    assert titles.get("latin") == "café"
    assert summary["states"]["fetched"] >= 5


async def test_unreachable_seed_is_recorded_failed(tmp_path: Path) -> None:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    _, pages, urls = await crawl(
        tmp_path,
        [f"http://127.0.0.1:{port}/"],
        retries=1,
        max_backoff=0.2,
        robots_error_ttl=0.2,
        obey_robots=False,
    )
    assert pages == []
    assert [u["state"] for u in urls] == ["failed"]


async def test_output_records_have_the_documented_fields(tmp_path: Path) -> None:
    async with RecordingServer({"/": page("/a", title="Home"), "/a": page()}) as srv:
        _, pages, urls = await crawl(tmp_path, [srv.url("/")])
    for field in (
        "url",
        "final_url",
        "status",
        "content_type",
        "title",
        "depth",
        "fetched_at",
        "body_sha256",
        "outlinks",
    ):
        assert field in pages[0]
    assert pages[0]["title"] == "Home" and pages[0]["outlinks"] == 1
    assert {"url", "state", "depth", "attempts", "last_error"} <= set(urls[0])
    msgspec.json.decode(json.dumps(urls[0]).encode())


async def test_robots_5xx_waits_and_retries_before_any_page(
    tmp_path: Path, run_crawl: Crawl
) -> None:
    from aiohttp import web

    calls = {"n": 0}

    async def robots(_: web.Request) -> web.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            return web.Response(status=503, text="busy")
        return web.Response(text="User-agent: *\nDisallow: /no\n")

    async with RecordingServer(
        {"/robots.txt": robots, "/": page("/no", "/yes"), "/yes": page(), "/no": page()}
    ) as srv:
        _, _, urls = await run_crawl(tmp_path, [srv.url("/")])
    paths = [r.path for r in srv.log]
    assert paths[:2] == ["/robots.txt", "/robots.txt"]  # no page before robots.txt answered
    assert "/no" not in paths
    assert {u["url"].rsplit("/", 1)[1]: u["state"] for u in urls} == {
        "": "fetched",
        "yes": "fetched",
        "no": "robots_denied",
    }


async def test_robots_unreachable_for_good_denies_instead_of_hanging(tmp_path: Path) -> None:
    async with RecordingServer({"/robots.txt": text("down", status=500), "/": page()}) as srv:
        _, pages, urls = await crawl(tmp_path, [srv.url("/")], retries=1, robots_error_ttl=0.5)
    assert pages == [] and [u["state"] for u in urls] == ["robots_denied"]
    assert all(r.path == "/robots.txt" for r in srv.log)


async def test_redirect_hops_keep_the_origin_delay(tmp_path: Path, run_crawl: Crawl) -> None:
    async with RecordingServer() as srv:
        srv.routes.update({"/": page("/a"), "/a": redirect("/b"), "/b": redirect("/c"),
                           "/c": page()})  # fmt: skip
        await run_crawl(tmp_path, [srv.url("/")], delay=0.3)
    assert [r.path for r in srv.log] == ["/robots.txt", "/", "/a", "/b", "/c"]
    assert min(srv.gaps()) >= 0.3 - 0.01, srv.gaps()


async def test_bodies_in_the_page_stream_by_default_in_the_sinks_when_stored(
    tmp_path: Path,
) -> None:
    """The Kafka wiring's pages carry the decoded body unless --no-bodies; the embedded
    pages.jsonl (a sink) keeps it only with --store-bodies."""
    async with RecordingServer() as srv:
        srv.routes.update({"/": page("/a", title="é"), "/a": page()})
        seeds = [srv.url("/")]
        _, streamed, _ = await crawl_kafka(tmp_path / "k1", seeds)
        assert {p["url"]: "<title>é</title>" in (p["body"] or "") for p in streamed} == {
            srv.url("/"): True, srv.url("/a"): False,
        }  # fmt: skip
        assert all(p["body"] for p in streamed)
        _, bare, _ = await crawl_kafka(tmp_path / "k2", seeds, stream_bodies=False)
        assert [p["body"] for p in bare] == [None, None]
        _, files, _ = await crawl(tmp_path / "e1", seeds)
        assert [p.get("body") for p in files] == [None, None]
        _, stored, _ = await crawl(tmp_path / "e2", seeds, store_bodies=True)
        assert all(p["body"] for p in stored)


async def test_the_loop_waits_without_touching_every_request_in_flight(tmp_path: Path) -> None:
    """Each request's task gets one done callback, when it starts: waiting on all the requests
    in flight (``asyncio.wait``) put one on each at every turn of the loop, O(requests in
    flight) per page (``agents.net.dispatch``)."""
    runs: list[CountingTask] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> CountingTask:
        task = CountingTask(coro, loop=loop, **kwargs)
        if coro.__qualname__ == "Stages.run":
            runs.append(task)
        return task

    async with RecordingServer() as srv:
        paths = [f"/p{i}" for i in range(16)]
        srv.routes["/"] = page(*paths)
        srv.routes.update({p: slow(0.02 * (i % 8 + 1), page()) for i, p in enumerate(paths)})
        loop = asyncio.get_running_loop()
        previous = loop.get_task_factory()
        loop.set_task_factory(factory)
        try:
            summary, _, _ = await crawl(
                tmp_path, [srv.url("/")], obey_robots=False, per_origin_concurrency=8
            )
        finally:
            loop.set_task_factory(previous)
    assert summary["pages"] == 17 and len(runs) == 17
    assert [t.callbacks for t in runs] == [1] * 17
