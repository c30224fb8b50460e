"""The fetch stage against a local RecordingServer: timeouts, caps, encodings, redirects, errors."""

from __future__ import annotations

import email.utils
import gzip
import time
import zlib
from collections.abc import AsyncIterator

import aiohttp
import brotli
import pytest
from multidict import CIMultiDict

from streamcrawl.agents.content.charset import BodyTooLarge, Decoder, decode_html, normalize_charset
from streamcrawl.agents.errors import FetchPermanent, FetchRetryable
from streamcrawl.agents.net.fetch import FetchResult, HopCheck, fetch, make_session
from streamcrawl.agents.net.response import join_headers, parse_content_type, parse_retry_after
from streamcrawl.schemas.records import CrawlPolicy
from tests.httpserver import (
    LOOPBACK_GUARD,
    RecordingServer,
    Reply,
    bomb,
    compressed,
    html,
    no_content_type,
    redirect,
    reset,
    retry_after,
    slow,
    stream,
    text,
)

UA = "streamcrawl/0.1 (+https://example.com/bot)"
POLICY = CrawlPolicy(
    crawl_id="t", user_agent=UA, timeout=2.0, connect_timeout=1.0, max_body=100_000
)
_ENCODERS = {"gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress}
PAGE = "<html><head><title>t</title></head><body>" + "x" * 500 + "</body></html>"


def follow(_: str) -> str | None:
    return None


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    s = make_session(guard=LOOPBACK_GUARD)
    yield s
    await s.close()


async def get(
    session: aiohttp.ClientSession,
    routes: dict[str, object],
    path: str = "/",
    policy: CrawlPolicy = POLICY,
    hop_check: HopCheck = follow,
) -> tuple[FetchResult, RecordingServer]:
    async with RecordingServer(routes) as srv:
        result = await fetch(session, srv.url(path), policy, hop_check=hop_check)
    return result, srv


# --- success -----------------------------------------------------------------------------


async def test_ok(session: aiohttp.ClientSession) -> None:
    before = time.time()
    r, srv = await get(session, {"/": html(PAGE, headers={"X-A": "1"})})
    assert (r.status, r.content_type, r.charset, r.text) == (200, "text/html", "utf-8", PAGE)
    assert r.body == PAGE.encode() and r.stopped is None and r.redirects == ()
    assert r.url == r.final_url == srv.url("/")
    assert r.headers["x-a"] == "1" and "content-type" in r.headers
    assert before <= r.started_at <= time.time() and r.elapsed_ms >= 0
    sent = srv.log[0].headers
    assert sent["User-Agent"] == UA
    assert sent["Accept-Encoding"] == "gzip, deflate, br"
    assert "Cookie" not in sent


async def test_no_cookies_kept(session: aiohttp.ClientSession) -> None:
    routes = {"/": html(PAGE, headers={"Set-Cookie": "a=1; Path=/"})}
    async with RecordingServer(routes) as srv:
        await fetch(session, srv.url("/"), POLICY, hop_check=follow)
        await fetch(session, srv.url("/"), POLICY, hop_check=follow)
    assert "Cookie" not in srv.log[1].headers


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
async def test_content_encodings(session: aiohttp.ClientSession, encoding: str) -> None:
    r, _ = await get(session, {"/": compressed(PAGE.encode(), encoding)})
    assert r.text == PAGE and r.stopped is None


async def test_raw_deflate(session: aiohttp.ClientSession) -> None:
    c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    raw = c.compress(PAGE.encode()) + c.flush()
    headers = {"Content-Type": "text/html", "Content-Encoding": "deflate"}
    r, _ = await get(session, {"/": Reply(headers=headers, body=raw)})
    assert r.text == PAGE


async def test_corrupt_gzip_is_permanent(session: aiohttp.ClientSession) -> None:
    headers = {"Content-Type": "text/html", "Content-Encoding": "gzip"}
    with pytest.raises(FetchPermanent) as exc:
        await get(session, {"/": Reply(headers=headers, body=b"not gzip at all")})
    assert exc.value.error_class == "bad_encoding"


# --- size cap and content-type filter ----------------------------------------------------


async def test_content_length_over_cap_not_read(session: aiohttp.ClientSession) -> None:
    r, srv = await get(session, {"/": stream(5_000_000, content_length=True)})
    assert r.stopped == "too_large" and r.body == b"" and r.status == 200
    assert srv.sent.get("/", 0) < 5_000_000


async def test_chunked_over_cap_cut(session: aiohttp.ClientSession) -> None:
    r, srv = await get(session, {"/": stream(5_000_000, chunk=16_384)})
    assert r.stopped == "too_large" and r.body == b""
    assert srv.sent.get("/", 0) < 5_000_000


async def test_body_at_cap_is_kept(session: aiohttp.ClientSession) -> None:
    r, _ = await get(session, {"/": stream(POLICY.max_body, chunk=7_000)})
    assert r.stopped is None and len(r.body) == POLICY.max_body


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
async def test_bomb_capped(session: aiohttp.ClientSession, encoding: str) -> None:
    r, _ = await get(session, {"/": bomb(50_000_000, encoding)})
    assert r.stopped == "too_large" and r.body == b""


async def test_non_html_not_downloaded(session: aiohttp.ClientSession) -> None:
    t0 = time.perf_counter()
    r, srv = await get(session, {"/img": stream(50_000_000, content_type="image/png")}, "/img")
    assert r.stopped == "skipped_content_type" and r.body == b"" and r.text is None
    assert r.content_type == "image/png"
    assert srv.paths() == ["/img"]  # the server saw the request...
    assert srv.sent.get("/img", 0) < 50_000_000  # ...but the body was not downloaded
    assert time.perf_counter() - t0 < 2.0


async def test_missing_content_type_sniffed_as_html(session: aiohttp.ClientSession) -> None:
    r, _ = await get(session, {"/": no_content_type("  <!DOCTYPE html><title>x</title>")})
    assert r.stopped is None and r.content_type == "text/html" and r.text is not None


async def test_missing_content_type_binary_skipped(session: aiohttp.ClientSession) -> None:
    r, _ = await get(session, {"/": no_content_type(b"\x89PNG\r\n\x1a\n....")})
    assert r.stopped == "skipped_content_type" and r.body == b""


async def test_xhtml_accepted(session: aiohttp.ClientSession) -> None:
    r, _ = await get(session, {"/": text(PAGE, "application/xhtml+xml; charset=utf-8")})
    assert r.content_type == "application/xhtml+xml" and r.text == PAGE


# --- charset -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "body", "charset", "expected"),
    [
        ("text/html; charset=windows-1251", "Привет".encode("cp1251"), "cp1251", "Привет"),
        ("text/html", b"\xef\xbb\xbf<p>caf\xc3\xa9", "utf-8", "<p>café"),  # BOM
        ("text/html", b"\xff\xfe" + "<p>é".encode("utf-16-le"), "utf-16-le", "<p>é"),
        (
            "text/html",
            '<meta charset="shift_jis"><p>日本'.encode("shift_jis"),
            "shift_jis",
            '<meta charset="shift_jis"><p>日本',
        ),
        (
            "text/html",
            b'<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">\xe9',
            "cp1252",
            '<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">é',
        ),
        ("text/html; charset=bogus", "<p>é".encode(), "utf-8", "<p>é"),
    ],
)
async def test_charset(
    session: aiohttp.ClientSession, content_type: str, body: bytes, charset: str, expected: str
) -> None:
    r, _ = await get(session, {"/": Reply(headers={"Content-Type": content_type}, body=body)})
    assert (r.charset, r.text) == (charset, expected)


def test_charset_detection_without_declaration() -> None:
    body = ("<p>" + "Съешь же ещё этих мягких французских булок, да выпей чаю. " * 20).encode(
        "cp1251"
    )
    text, charset = decode_html(body, None)
    assert charset == "cp1251" and "французских" in text


def test_decode_html_never_raises() -> None:
    for body in (b"", b"\x00\xff\xfe\x00", bytes(range(256)) * 10):
        for label in (None, "utf-8", "rot13", "base64", "x" * 100):
            text, charset = decode_html(body, label)
            assert isinstance(text, str) and normalize_charset(charset) is not None


# --- redirects ---------------------------------------------------------------------------


async def test_redirects_followed_with_absolute_targets(session: aiohttp.ClientSession) -> None:
    seen: list[str] = []

    def check(target: str) -> str | None:
        seen.append(target)
        return None

    routes = {"/a": redirect("/b"), "/b": redirect("c#frag", 307), "/c": html(PAGE)}
    async with RecordingServer(routes) as srv:
        r = await fetch(session, srv.url("/a"), POLICY, hop_check=check)
    assert seen == [srv.url("/b"), srv.url("/c")]
    assert r.redirects == (srv.url("/b"), srv.url("/c"))
    assert r.final_url == srv.url("/c") and r.url == srv.url("/a") and r.text == PAGE


async def test_hop_check_stops(session: aiohttp.ClientSession) -> None:
    routes = {"/a": redirect("http://elsewhere.example/x", 302)}
    r, srv = await get(session, routes, "/a", hop_check=lambda t: "out_of_scope")
    assert r.stopped == "out_of_scope" and r.status == 302
    assert r.redirect_target == "http://elsewhere.example/x"
    assert r.final_url == srv.url("/a") and r.redirects == () and r.body == b""


async def test_hop_check_exception_propagates(session: aiohttp.ClientSession) -> None:
    def broken(_: str) -> str | None:
        raise KeyError("caller bug")

    with pytest.raises(KeyError):
        await get(session, {"/a": redirect("/b")}, "/a", hop_check=broken)


async def test_redirect_loop(session: aiohttp.ClientSession) -> None:
    with pytest.raises(FetchPermanent) as exc:
        await get(session, {"/a": redirect("/b"), "/b": redirect("/a")}, "/a")
    assert exc.value.error_class == "redirect_loop"


async def test_too_many_redirects(session: aiohttp.ClientSession) -> None:
    routes: dict[str, object] = {f"/r{i}": redirect(f"/r{i + 1}") for i in range(10)}
    policy = CrawlPolicy(crawl_id="t", user_agent=UA, max_redirects=3)
    with pytest.raises(FetchPermanent) as exc:
        await get(session, routes, "/r0", policy)
    assert exc.value.error_class == "too_many_redirects"


async def test_bad_redirect_scheme(session: aiohttp.ClientSession) -> None:
    with pytest.raises(FetchPermanent) as exc:
        await get(session, {"/a": redirect("mailto:x@example.com")}, "/a")
    assert exc.value.error_class == "bad_redirect"


async def test_redirect_without_location_is_a_result(session: aiohttp.ClientSession) -> None:
    r, _ = await get(session, {"/": Reply(status=302)})
    assert r.status == 302 and r.stopped is None and r.body == b""


# --- errors ------------------------------------------------------------------------------


async def test_timeout(session: aiohttp.ClientSession) -> None:
    policy = CrawlPolicy(crawl_id="t", user_agent=UA, timeout=0.2, connect_timeout=0.2)
    with pytest.raises(FetchRetryable) as exc:
        await get(session, {"/": slow(1.5)}, policy=policy)
    assert exc.value.error_class == "timeout"


async def test_slow_body_read_timeout(session: aiohttp.ClientSession) -> None:
    policy = CrawlPolicy(crawl_id="t", user_agent=UA, timeout=0.3, connect_timeout=0.2)
    with pytest.raises(FetchRetryable) as exc:
        await get(session, {"/": stream(10_000, chunk=100, chunk_delay=0.5)}, policy=policy)
    assert exc.value.error_class == "timeout"


async def test_retry_after_seconds(session: aiohttp.ClientSession) -> None:
    with pytest.raises(FetchRetryable) as exc:
        await get(session, {"/": retry_after(429, "120")})
    assert (exc.value.status, exc.value.retry_after, exc.value.error_class) == (
        429,
        120.0,
        "http_429",
    )


async def test_retry_after_http_date(session: aiohttp.ClientSession) -> None:
    date = email.utils.formatdate(time.time() + 60, usegmt=True)
    with pytest.raises(FetchRetryable) as exc:
        await get(session, {"/": retry_after(503, date)})
    assert exc.value.status == 503 and exc.value.error_class == "http_5xx"
    assert exc.value.retry_after is not None and 55 <= exc.value.retry_after <= 61


@pytest.mark.parametrize("status", [408, 500, 502, 503, 504])
async def test_retryable_statuses(session: aiohttp.ClientSession, status: int) -> None:
    with pytest.raises(FetchRetryable) as exc:
        await get(session, {"/": html("busy", status=status)})
    assert exc.value.status == status and exc.value.retry_after is None


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 451])
async def test_permanent_statuses(session: aiohttp.ClientSession, status: int) -> None:
    with pytest.raises(FetchPermanent) as exc:
        await get(session, {"/": html("no", status=status)})
    assert exc.value.status == status and exc.value.error_class == "http_4xx"


async def test_connection_refused(session: aiohttp.ClientSession) -> None:
    async with RecordingServer() as srv:
        url = srv.url("/")
    with pytest.raises(FetchRetryable) as exc:
        await fetch(session, url, POLICY, hop_check=follow)
    assert exc.value.error_class == "connect"


async def test_connection_reset(session: aiohttp.ClientSession) -> None:
    with pytest.raises(FetchRetryable) as exc:
        await get(session, {"/": reset()})
    assert exc.value.error_class in ("reset", "network")


async def test_invalid_url_is_retryable_not_a_crash(session: aiohttp.ClientSession) -> None:
    with pytest.raises((FetchRetryable, FetchPermanent)):
        await fetch(session, "http://[bad/", POLICY, hop_check=follow)


# --- helpers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("text/html; charset=UTF-8", ("text/html", "UTF-8")),
        ('Text/HTML;Charset="iso-8859-1"', ("text/html", "iso-8859-1")),
        ("application/xhtml+xml", ("application/xhtml+xml", None)),
        ("", (None, None)),
        (None, (None, None)),
        ("; charset=utf-8", (None, "utf-8")),
    ],
)
def test_parse_content_type(value: str | None, expected: tuple[str | None, str | None]) -> None:
    assert parse_content_type(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("30", 30.0),
        (" 0 ", 0.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # in the past: retry now
        ("-5", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def test_join_headers() -> None:
    h: CIMultiDict[str] = CIMultiDict([("Set-Cookie", "a"), ("set-cookie", "b"), ("X", "1")])
    assert join_headers(h) == {"set-cookie": "a, b", "x": "1"}


async def test_sent_at_is_when_the_request_left() -> None:
    policy = CrawlPolicy(crawl_id="t")
    async with RecordingServer({"/": html("<title>x</title>")}) as srv:
        session = make_session(guard=LOOPBACK_GUARD)
        try:
            before = time.time()
            result = await fetch(session, srv.url("/"), policy, hop_check=lambda _t: None)
        finally:
            await session.close()
    (request,) = srv.log
    assert before <= result.started_at <= result.sent_at
    # request.t is the kernel's arrival time (tests/arrivals.py): the stamp is never before
    # the request was on the wire (else the next request's delay would start early).
    assert request.t <= result.sent_at < request.t + 0.05


@pytest.mark.parametrize(
    ("encoding", "layers"),
    [
        ("gzip, gzip", ("gzip", "gzip")),
        ("deflate, br", ("deflate", "br")),
        ("gzip,br", ("gzip", "br")),
    ],
)
def test_nested_content_codings_are_decoded_in_reverse(
    encoding: str, layers: tuple[str, str]
) -> None:
    data = b"<p>" + b"nested " * 1000 + b"</p>"
    body = data
    for name in layers:
        body = _ENCODERS[name](body)
    decoder = Decoder(encoding, 1 << 20)
    assert decoder.feed(body) + decoder.flush() == data


def test_a_nested_bomb_stops_at_the_cap() -> None:
    inner = gzip.compress(b"\0" * (64 << 20))
    decoder = Decoder("gzip, gzip", 1 << 20)
    with pytest.raises(BodyTooLarge):
        decoder.feed(gzip.compress(inner))
        decoder.flush()


def test_too_many_codings_are_refused() -> None:
    with pytest.raises(FetchPermanent, match="content codings"):
        Decoder("gzip, gzip, gzip, gzip", 1 << 20)


async def test_a_header_line_over_the_limit_is_a_permanent_bad_response(
    session: aiohttp.ClientSession,
) -> None:
    routes = {"/": Reply(headers={"Content-Type": "text/html", "X-Huge": "v" * 65536})}
    async with RecordingServer(routes) as srv:
        with pytest.raises(FetchPermanent) as info:
            await fetch(session, srv.url("/"), POLICY, hop_check=follow)
    assert info.value.error_class == "bad_response" and len(str(info.value)) <= 500
