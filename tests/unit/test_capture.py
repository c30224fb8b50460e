"""The exchanges a fetch records for the WARC archive (``agents/net/capture.py``), against a
local server: what it sent is what the capture holds, and the fetch's own result is unchanged."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import aiohttp
import pytest

from streamcrawl.agents.errors import FetchPermanent, FetchRetryable
from streamcrawl.agents.net.capture import Recorder, response_head
from streamcrawl.agents.net.fetch import FetchResult, fetch, make_session
from streamcrawl.agents.net.robots_fetch import fetch_robots
from streamcrawl.schemas.records import CrawlPolicy
from tests.httpserver import LOOPBACK_GUARD, RecordingServer, Reply, html, redirect, stream, text

POLICY = CrawlPolicy(crawl_id="t", timeout=2.0, connect_timeout=1.0, max_body=100_000)
PAGE = b"<html><body>caf\xc3\xa9 " + b"x" * 300 + b"</body></html>"
GZ = gzip.compress(PAGE, mtime=0)


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    s = make_session(guard=LOOPBACK_GUARD)
    yield s
    await s.close()


async def get(
    session: aiohttp.ClientSession, routes: dict[str, object], path: str = "/"
) -> tuple[FetchResult, Recorder]:
    recorder = Recorder()
    async with RecordingServer(routes) as srv:
        result = await fetch(
            session, srv.url(path), POLICY, hop_check=lambda _: None, recorder=recorder
        )
    return result, recorder


def head_and_payload(rec: Recorder, i: int = -1) -> tuple[bytes, bytes]:
    ex = rec.exchanges[i]
    return ex.response, ex.payload


async def test_a_gzip_page_is_captured_raw_and_parsed_decoded(
    session: aiohttp.ClientSession,
) -> None:
    reply = Reply(headers={"Content-Type": "text/html", "Content-Encoding": "gzip"}, body=GZ)
    result, rec = await get(session, {"/": reply})
    assert result.body == PAGE and result.text is not None  # the parse stage's view
    (ex,) = rec.exchanges
    assert ex.payload == GZ and ex.truncated is None
    assert ex.response.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\nContent-Encoding: gzip\r\n" in ex.response
    assert ex.response.endswith(b"\r\n\r\n")
    assert ex.request.startswith(b"GET / HTTP/1.1\r\n") and ex.request.endswith(b"\r\n\r\n")
    assert b"\r\nAccept-Encoding: gzip, deflate, br\r\n" in ex.request
    assert ex.ip == "127.0.0.1" and ex.target_uri.endswith("/")
    assert ex.date == result.sent_at  # the WARC-Date: when the request was written


async def test_chunking_is_removed_and_said_in_the_headers(
    session: aiohttp.ClientSession,
) -> None:
    _, rec = await get(session, {"/": stream(150_000 // 2, chunk=10_000)})
    head, payload = head_and_payload(rec)
    assert payload == b"x" * 75_000
    assert b"\r\nX-Crawler-Transfer-Encoding: chunked\r\n" in head
    assert b"\r\nTransfer-Encoding:" not in head
    assert b"\r\nContent-Length: 75000\r\n" in head


async def test_each_redirect_hop_is_an_exchange(session: aiohttp.ClientSession) -> None:
    result, rec = await get(session, {"/": redirect("/b"), "/b": html("here")})
    assert [ex.target_uri.rsplit("/", 1)[1] for ex in rec.exchanges] == ["", "b"]
    assert rec.exchanges[0].response.startswith(b"HTTP/1.1 301 ")
    assert rec.exchanges[-1].date == result.sent_at


@pytest.mark.parametrize("status, error", [(404, FetchPermanent), (503, FetchRetryable)])
async def test_an_error_response_is_captured_before_the_fetch_raises(
    session: aiohttp.ClientSession, status: int, error: type[Exception]
) -> None:
    with pytest.raises(error):
        await get(session, {"/": html("gone away", status=status)})
    # get() raised before returning: capture again with a recorder we keep.
    rec = Recorder()
    async with RecordingServer({"/": html("gone away", status=status)}) as srv:
        with pytest.raises(error):
            await fetch(session, srv.url("/"), POLICY, hop_check=lambda _: None, recorder=rec)
    (ex,) = rec.exchanges
    assert ex.response.startswith(f"HTTP/1.1 {status} ".encode()) and ex.payload == b"gone away"


async def test_a_body_over_max_body_is_cut_and_marked(session: aiohttp.ClientSession) -> None:
    result, rec = await get(session, {"/": stream(300_000)})
    assert result.stopped == "too_large"
    (ex,) = rec.exchanges
    assert ex.truncated == "length" and len(ex.payload) <= POLICY.max_body


async def test_a_skipped_content_type_keeps_its_head_only(session: aiohttp.ClientSession) -> None:
    result, rec = await get(session, {"/": text("%PDF", "application/pdf")})
    assert result.stopped == "skipped_content_type"
    (ex,) = rec.exchanges
    assert ex.payload == b"" and ex.truncated == "unspecified"


async def test_robots_txt_is_captured(session: aiohttp.ClientSession) -> None:
    rec = Recorder()
    async with RecordingServer({"/robots.txt": text("User-agent: *\nDisallow: /x\n")}) as srv:
        status, body = await fetch_robots(session, srv.origin, POLICY, recorder=rec)
    assert status == 200 and body is not None
    (ex,) = rec.exchanges
    assert ex.payload == b"User-agent: *\nDisallow: /x\n" and ex.target_uri.endswith("/robots.txt")


def test_the_head_renames_transfer_encoding_and_keeps_the_rest_as_received() -> None:
    head = response_head(
        b"HTTP/1.1 200 OK\r\n",
        ((b"Set-Cookie", b"a=1"), (b"transfer-encoding", b"chunked"), (b"Set-Cookie", b"b=2")),
        7,
    )
    assert head == (
        b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-Crawler-Transfer-Encoding: chunked\r\n"
        b"Set-Cookie: b=2\r\nContent-Length: 7\r\n\r\n"
    )
    kept = response_head(b"HTTP/1.0 200 OK\r\n", ((b"Content-Length", b"9"),), 3)
    assert kept == b"HTTP/1.0 200 OK\r\nContent-Length: 9\r\n\r\n"  # a cut body keeps its header
