"""More link sources from the same parse, in both wirings: <area>, <iframe>, <frame>, Link:
response headers, and rel=canonical recorded (and optionally followed)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.embedded.runner import EmbeddedCrawl
from tests.httpserver import RecordingServer, html
from tests.wirings import WIRINGS, crawl

pytestmark = pytest.mark.integration


def sources_site() -> dict[str, object]:
    return {
        "/": html(
            "<map><area href=/area></map><iframe src=/iframe></iframe><a href=/frames>f</a>",
            headers={"Link": '</next>; rel="next", </c>; rel=canonical'},
        ),
        "/frames": html("<frameset><frame src=/frame></frameset>"),
        "/area": html("<p>a</p>"),
        "/iframe": html("<p>i</p>"),
        "/frame": html("<p>f</p>"),
        "/next": html("<p>n</p>"),
    }


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_area_iframe_frame_and_link_header_next_are_followed(
    wiring: str, tmp_path: Path
) -> None:
    async with RecordingServer(sources_site()) as srv:  # type: ignore[arg-type]
        policy = CrawlPolicy(crawl_id="t", seeds=(srv.url("/"),), delay=0.0, obey_robots=False)
        states = await crawl(wiring, policy, tmp_path, timeout=30)
    wanted = ["/", "/area", "/iframe", "/frames", "/frame", "/next"]
    assert {url: s.state for url, s in states.items()} == {srv.url(p): "fetched" for p in wanted}
    assert Counter(srv.paths()) == Counter(wanted)  # the Link canonical is recorded, not followed


def canonical_site() -> dict[str, object]:
    return {
        "/": html("<a href='/dup?s=1'>d</a><a href=/local>l</a>"),
        "/dup": html("<link rel=canonical href='/real#x'><a href=/only-from-dup>o</a>"),
        "/real": html("<p>real</p>"),
        "/only-from-dup": html("<p>o</p>"),
        "/local": html("<link rel=canonical href='file:///etc/passwd'>"),
    }


@pytest.mark.parametrize("wiring", WIRINGS)
@pytest.mark.parametrize("follow", [False, True])
async def test_follow_canonical_crawls_the_canonical_instead_of_the_pages_links(
    wiring: str, follow: bool, tmp_path: Path
) -> None:
    async with RecordingServer(canonical_site()) as srv:  # type: ignore[arg-type]
        policy = CrawlPolicy(
            crawl_id="t",
            seeds=(srv.url("/"),),
            delay=0.0,
            obey_robots=False,
            follow_canonical=follow,
        )
        states = await crawl(wiring, policy, tmp_path, timeout=30)
    fetched = {url for url, s in states.items() if s.state == "fetched"}
    common = {srv.url("/"), srv.url("/dup?s=1"), srv.url("/local")}
    if follow:
        assert fetched == common | {srv.url("/real")}
        assert "/only-from-dup" not in srv.paths()
    else:
        assert fetched == common | {srv.url("/only-from-dup")}
        assert "/real" not in srv.paths()


async def test_canonical_is_recorded_resolved_canonicalized_and_http_only(tmp_path: Path) -> None:
    site = canonical_site()
    site["/"] = html(
        "<a href='/dup?s=1'>d</a><a href=/local>l</a><a href=/hdr>h</a>",
        headers={"Link": "<HTTP://127.0.0.1:1/a/../b?utm_source=x>; rel=canonical"},
    )
    site["/hdr"] = html("<p>h</p>", headers={"Link": "</hdr-canonical>; rel=canonical"})
    async with RecordingServer(site) as srv:  # type: ignore[arg-type]
        policy = CrawlPolicy(crawl_id="t", seeds=(srv.url("/"),), delay=0.0, obey_robots=False)
        await EmbeddedCrawl(
            policy, out_dir=tmp_path / "out", state_dir=tmp_path / "state", concurrency=4
        ).run()
    pages = [json.loads(line) for line in (tmp_path / "out/pages.jsonl").read_text().splitlines()]
    canonical = {p["url"]: p["canonical"] for p in pages}
    assert canonical[srv.url("/")] == "http://127.0.0.1:1/b"  # from the Link header
    assert canonical[srv.url("/dup?s=1")] == srv.url("/real")  # <link>: resolved, no fragment
    assert canonical[srv.url("/local")] is None  # file:/// is not a crawlable canonical
    assert canonical[srv.url("/hdr")] == srv.url("/hdr-canonical")
