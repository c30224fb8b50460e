"""``streamcrawl.crawl``: an embedded crawl as an async iterator of its page records.

Against local servers: each page is yielded once its state is committed, as pages.jsonl has it;
the options are the crawl command's flags, checked before anything starts; and a crawl closed
early (``break``, ``aclose()``, a cancelled task, Ctrl-C in a process) resumes with the same
crawl id so that every URL ends with exactly one terminal state across the runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

import streamcrawl
from tests.httpserver import RecordingServer, html, slow

pytestmark = pytest.mark.integration

PAGES = 16


def site(pages: int = PAGES, delay: float = 0.0) -> dict[str, object]:
    """``/`` links ``/p/0`` ... ``/p/{pages - 1}``, each answered after ``delay`` seconds."""
    links = "".join(f'<a href="/p/{i}">{i}</a>' for i in range(pages))
    routes: dict[str, object] = {"/": html(f"<title>home</title>{links}")}
    for i in range(pages):
        routes[f"/p/{i}"] = slow(delay, html(f"<title>page {i}</title>"))
    return routes


def records(path: Path) -> list[streamcrawl.Page]:
    return [
        msgspec.json.decode(line, type=streamcrawl.Page) for line in path.read_bytes().splitlines()
    ]


def terminal_states(out: Path) -> Counter[str]:
    """How many lines of urls.jsonl each URL has."""
    return Counter(
        json.loads(line)["url"] for line in (out / "urls.jsonl").read_text().splitlines()
    )


def options(tmp_path: Path, **more: object) -> dict[str, object]:
    return {
        "crawl_id": "api",
        "out": tmp_path / "out",
        "state_dir": tmp_path / "state",
        "delay": 0,
        **more,
    }


async def test_each_page_is_yielded_as_pages_jsonl_has_it(tmp_path: Path) -> None:
    async with RecordingServer(site(6)) as srv:
        seen = [page async for page in streamcrawl.crawl(srv.url("/"), **options(tmp_path))]
    assert sorted(p.url for p in seen) == sorted(srv.url(path) for path in site(6))
    assert seen == records(tmp_path / "out/pages.jsonl")
    assert {p.title for p in seen} == {"home", *(f"page {i}" for i in range(6))}
    assert set(terminal_states(tmp_path / "out").values()) == {1}


@pytest.mark.parametrize(
    ("given", "error", "message"),
    [
        ({"max_pagez": 3}, TypeError, "unexpected keyword argument 'max_pagez'"),
        ({"json": True}, TypeError, "unexpected keyword argument 'json'"),
        ({"ignore_robots": "yes"}, TypeError, "ignore_robots is a switch"),
        ({"include": "/a"}, TypeError, "include takes a list"),
        ({"delay": "soon"}, streamcrawl.ConfigError, "delay: expected seconds, got 'soon'"),
        ({"max_pages": 0}, streamcrawl.ConfigError, "max_pages: "),
        ({"concurrency": 0}, streamcrawl.ConfigError, "concurrency: must be at least 1"),
        ({"header": ["Host: x"]}, streamcrawl.ConfigError, "Host"),
        ({"auth_for": [("http://127.0.0.1:9", "NOPE")]}, streamcrawl.ConfigError, "NOPE"),
        ({"recrawl_now": True}, streamcrawl.ConfigError, "--recrawl-now needs --recrawl-after"),
    ],
)
def test_options_are_checked_before_anything_starts(
    tmp_path: Path, given: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        streamcrawl.crawl("http://127.0.0.1:9/", **options(tmp_path, **given))
    with pytest.raises(streamcrawl.InvalidURL):
        streamcrawl.crawl("ftp://a.example/", **options(tmp_path))
    assert list(tmp_path.iterdir()) == []  # no state, no output


async def test_options_reach_the_crawl(tmp_path: Path) -> None:
    """Values as Python has them (numbers, paths, lists, pairs) mean what the flags mean."""
    async with RecordingServer(site(4)) as srv:
        crawl = streamcrawl.crawl(
            srv.url("/"),
            **options(tmp_path),
            exclude=[r"/p/[02]$"],
            header_for=[(srv.origin, "X-Api: 1")],
            max_page_links=2,
            ignore_robots=True,
        )
        seen = [page async for page in crawl]
    assert sorted(p.url for p in seen) == [srv.url("/"), srv.url("/p/1"), srv.url("/p/3")]
    assert all(r.headers.get("X-Api") == "1" for r in srv.log)
    assert "/robots.txt" not in srv.paths()
    assert len(seen[0].links) == 2


async def first(crawl: AsyncIterator[streamcrawl.Page], n: int, how: str) -> list[str]:
    """The URLs of the first ``n`` pages of ``crawl``, which is then closed ``how``."""
    seen: list[str] = []
    if how == "break":
        async for page in crawl:
            seen.append(page.url)
            if len(seen) == n:
                break  # the event loop closes it; the next crawl of the state waits for that
    elif how == "aclose":
        async with contextlib.aclosing(crawl) as pages:
            async for page in pages:
                seen.append(page.url)
                if len(seen) == n:
                    break
    else:
        enough = asyncio.Event()

        async def consume() -> None:
            async for page in crawl:
                seen.append(page.url)
                if len(seen) == n:
                    enough.set()

        task = asyncio.create_task(consume())
        await enough.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    return seen


@pytest.mark.parametrize("how", ["break", "aclose", "cancel"])
async def test_closed_early_then_resumed_every_url_ends_once(tmp_path: Path, how: str) -> None:
    routes = site(delay=0.2)
    async with RecordingServer(routes) as srv:
        given = options(tmp_path, per_origin_concurrency=4)
        before = await first(streamcrawl.crawl(srv.url("/"), **given), 3, how)
        after = [page.url async for page in streamcrawl.crawl(srv.url("/"), **given)]
    out = tmp_path / "out"
    assert len(before) == 3 or (how == "cancel" and len(before) > 3)  # the rest of a commit
    assert after
    assert not set(before) & set(after)  # a resumed crawl yields no page committed before
    assert terminal_states(out) == {srv.url(path): 1 for path in routes}
    written = [p.url for p in records(out / "pages.jsonl")]
    assert sorted(written) == sorted(set(written)) == sorted(srv.url(path) for path in routes)
    # Those between: in flight at the close, committed in its grace, not yielded.
    assert set(before) | set(after) <= set(written)


SCRIPT = """
import asyncio, sys
import streamcrawl

async def main() -> None:
    async for page in streamcrawl.crawl(
        sys.argv[1], crawl_id="api", out="out", state_dir="state", delay=0,
        per_origin_concurrency=4,
    ):
        print(page.url, flush=True)

asyncio.run(main())
"""


def test_ctrl_c_then_resumed_every_url_ends_once(tmp_path: Path) -> None:
    (tmp_path / "crawl.py").write_text(textwrap.dedent(SCRIPT))
    routes = site(delay=0.2)
    with RecordingServer(routes) as srv:
        argv = [sys.executable, "crawl.py", srv.url("/")]
        with subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, text=True) as proc:
            assert proc.stdout is not None
            before = [proc.stdout.readline().strip() for _ in range(3)]
            proc.send_signal(signal.SIGINT)
            rest, _ = proc.communicate(timeout=30)
        assert proc.returncode != 0  # KeyboardInterrupt, once the crawl has closed
        resumed = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    after = resumed.stdout.split()
    assert not set(before + rest.split()) & set(after)
    assert terminal_states(tmp_path / "out") == {srv.url(path): 1 for path in routes}
