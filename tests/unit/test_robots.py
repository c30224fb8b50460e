"""robots.txt decisions (RFC 9309), the robots fetch against a local server, X-Robots-Tag."""

from __future__ import annotations

import gzip
import os
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from streamcrawl.agents.net.fetch import SentAt, make_session
from streamcrawl.agents.net.robots_fetch import fetch_robots
from streamcrawl.agents.robots.rules import (
    ROBOTS_MAX_BYTES,
    RobotsRules,
    product_token,
    robots_directives,
    robots_expiry,
    robots_url,
    x_robots_tag,
)
from streamcrawl.schemas.records import CrawlPolicy
from tests.httpserver import LOOPBACK_GUARD, RecordingServer, Reply, redirect, reset, slow, text

UA = "streamcrawl/0.1 (+https://example.com/bot)"
POLICY = CrawlPolicy(crawl_id="t", user_agent=UA, timeout=2.0, connect_timeout=1.0)


def rules(body: str | bytes, status: int = 200) -> RobotsRules:
    return RobotsRules.from_response(status, body)


# --- small pure functions ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        ("http://example.com", "http://example.com/robots.txt"),
        ("https://example.com:8443", "https://example.com:8443/robots.txt"),
        ("http://example.com/", "http://example.com/robots.txt"),
    ],
)
def test_robots_url(origin: str, expected: str) -> None:
    assert robots_url(origin) == expected


@pytest.mark.parametrize(
    ("ua", "token"),
    [
        (UA, "streamcrawl"),
        ("StreamCrawl", "streamcrawl"),
        ("my_bot-x/2.0", "my_bot-x"),
        ("Mozilla/5.0 (compatible; Foo)", "mozilla"),
        ("", ""),
        ("42bot", ""),
    ],
)
def test_product_token(ua: str, token: str) -> None:
    assert product_token(ua) == token


# --- status handling ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "allowed"),
    [
        (200, False),  # the body below disallows /private
        (404, True),
        (401, True),  # RFC 9309: 4xx including 401/403 means "unavailable": allow all
        (403, True),
        (410, True),
        (429, True),
        (308, True),  # a redirect left over after the hop limit: unavailable
        (500, False),
        (503, False),
        (None, False),  # unreachable
        (600, False),
    ],
)
def test_status_decides(status: int | None, allowed: bool) -> None:
    r = RobotsRules.from_response(status, "User-agent: *\nDisallow: /private\n")
    assert r.allowed("http://e.com/private/x", UA) is allowed
    assert r.allowed("http://e.com/public", UA) is (True if status == 200 else allowed)


def test_flags() -> None:
    assert RobotsRules.from_response(404, None).allow_all
    assert RobotsRules.from_response(503, None).disallow_all
    assert RobotsRules.from_response(None, None).unreachable
    parsed = rules("User-agent: *\nDisallow: /x")
    assert not parsed.allow_all and not parsed.disallow_all
    assert rules("", 200).allowed("http://e.com/anything", UA)


def test_expiry() -> None:
    policy = CrawlPolicy(crawl_id="t", robots_ttl=1000.0, robots_error_ttl=10.0)
    assert robots_expiry(200, 5.0, policy) == 1005.0
    assert robots_expiry(404, 5.0, policy) == 1005.0
    assert robots_expiry(503, 5.0, policy) == 15.0
    assert robots_expiry(None, 5.0, policy) == 15.0


# --- rules -------------------------------------------------------------------------------

GROUPS = """
User-agent: *
Disallow: /

User-agent: StreamCrawl
Disallow: /private
Allow: /private/ok
Crawl-delay: 2.5

User-agent: otherbot
Allow: /
Crawl-delay: 9
Sitemap: https://e.com/sitemap.xml
"""


@pytest.mark.parametrize(
    ("url", "ua", "allowed"),
    [
        ("http://e.com/page", UA, True),  # our group beats "*"
        ("http://e.com/private/x", UA, False),
        ("http://e.com/private/ok/1", UA, True),  # longest match wins
        ("http://e.com/page", "STREAMCRAWL/2", True),  # token match is case-insensitive
        ("http://e.com/page", "somebot/1.0", False),  # falls back to "*"
        ("http://e.com/page", "otherbot", True),
        ("http://e.com/robots.txt", "somebot", True),  # robots.txt itself is always allowed
    ],
)
def test_groups(url: str, ua: str, allowed: bool) -> None:
    assert rules(GROUPS).allowed(url, ua) is allowed


def test_crawl_delay_and_sitemaps() -> None:
    r = rules(GROUPS + "\nSitemap: https://e.com/news.xml\n")
    assert r.crawl_delay(UA) == 2.5
    assert r.crawl_delay("otherbot") == 9.0
    assert r.crawl_delay("somebot") is None
    assert r.sitemaps() == ["https://e.com/sitemap.xml", "https://e.com/news.xml"]
    assert RobotsRules.from_response(404, None).sitemaps() == []
    assert RobotsRules.from_response(404, None).crawl_delay(UA) is None


@pytest.mark.parametrize("value", ["-3", "nan", "inf", "soon"])
def test_bad_crawl_delay_ignored(value: str) -> None:
    assert rules(f"User-agent: *\nCrawl-delay: {value}\n").crawl_delay(UA) is None


@pytest.mark.parametrize(
    ("robots", "path", "allowed"),
    [
        ("Disallow: /a\nAllow: /a/b", "/a/b/c", True),
        ("Disallow: /a/b\nAllow: /a", "/a/b/c", False),
        ("Disallow: /a\nAllow: /a", "/a", True),  # equal length: the least restrictive wins
        ("Disallow: /*.php$", "/x/index.php", False),
        ("Disallow: /*.php$", "/x/index.php?q=1", True),
        ("Disallow: /*.php", "/x/index.php?q=1", False),
        ("Disallow: /fish*", "/fishheads", False),
        ("Disallow: /fish*", "/Fish", True),  # paths are case-sensitive
        ("Disallow: /*/secret/", "/a/b/secret/c", False),
        ("Disallow: /$", "/", False),
        ("Disallow: /$", "/index", True),
        ("Disallow: /p%C3%A9", "/p\u00e9", False),  # percent-encoding normalised
        ("Disallow:", "/anything", True),  # empty Disallow allows everything
    ],
)
def test_matching(robots: str, path: str, allowed: bool) -> None:
    assert rules("User-agent: *\n" + robots).allowed("http://e.com" + path, UA) is allowed


def test_group_token_is_exact_product_token() -> None:
    # A group for another bot whose name contains ours must not apply to us.
    r = rules("User-agent: notstreamcrawl\nDisallow: /\n")
    assert r.allowed("http://e.com/x", UA)


# --- hostile bodies ----------------------------------------------------------------------


def test_garbage_bytes_do_not_raise() -> None:
    r = rules(os.urandom(20_000))
    assert isinstance(r.allowed("http://e.com/x", UA), bool)


def test_bom_and_bytes_body() -> None:
    r = rules(b"\xef\xbb\xbfUser-agent: *\r\nDisallow: /x\r\n")
    assert not r.allowed("http://e.com/x", UA)


def test_huge_body_is_capped_without_a_partial_last_line() -> None:
    head = b"User-agent: *\nDisallow: /early\n"
    filler = b"# " + b"x" * 100 + b"\n"
    body = head + filler * (ROBOTS_MAX_BYTES // len(filler) + 1)
    # This rule straddles the 500 KiB boundary: it must be dropped, not read as "Allow: /".
    body = body[: ROBOTS_MAX_BYTES - 5] + b"\nAllow: /early/but/late\n" + b"Disallow: /late\n"
    r = rules(body)
    assert not r.allowed("http://e.com/early/but/late", UA)
    assert r.allowed("http://e.com/late", UA)  # beyond the cap: not read
    assert not rules(body.decode()).allowed("http://e.com/early/x", UA)


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.binary(max_size=2000), st.text(max_size=2000)))
def test_any_body_any_url_never_raises(body: bytes | str) -> None:
    r = rules(body)
    assert isinstance(r.allowed("http://e.com/a?b=c", UA), bool)
    r.crawl_delay(UA)
    r.sitemaps()


# --- fetch_robots against a local server -------------------------------------------------


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    s = make_session(guard=LOOPBACK_GUARD)
    yield s
    await s.close()


async def test_fetch_ok_sends_our_user_agent(session: aiohttp.ClientSession) -> None:
    async with RecordingServer({"/robots.txt": text("User-agent: *\nDisallow: /x\n")}) as srv:
        status, body = await fetch_robots(session, srv.origin, POLICY)
        assert (status, body) == (200, "User-agent: *\nDisallow: /x\n")
        assert srv.log[0].headers["User-Agent"] == UA


async def test_fetch_404(session: aiohttp.ClientSession) -> None:
    async with RecordingServer({}) as srv:
        assert await fetch_robots(session, srv.origin, POLICY) == (404, None)


async def test_fetch_503(session: aiohttp.ClientSession) -> None:
    async with RecordingServer({"/robots.txt": text("busy", status=503)}) as srv:
        assert await fetch_robots(session, srv.origin, POLICY) == (503, None)


async def test_fetch_follows_redirects(session: aiohttp.ClientSession) -> None:
    routes = {
        "/robots.txt": redirect("/real-robots.txt"),
        "/real-robots.txt": redirect("/really", 302),
        "/really": text("User-agent: *\nDisallow: /\n"),
    }
    async with RecordingServer(routes) as srv:
        status, body = await fetch_robots(session, srv.origin, POLICY)
        assert status == 200 and body == "User-agent: *\nDisallow: /\n"
        assert srv.paths() == ["/robots.txt", "/real-robots.txt", "/really"]


async def test_fetch_redirect_to_other_origin(session: aiohttp.ClientSession) -> None:
    other = RecordingServer({"/r.txt": text("User-agent: *\nDisallow: /\n")})
    srv = RecordingServer()
    async with other, srv:
        srv.routes["/robots.txt"] = redirect(other.url("/r.txt"))
        status, _ = await fetch_robots(session, srv.origin, POLICY)
        assert status == 200 and other.paths() == ["/r.txt"]


async def test_fetch_six_redirects_is_unavailable(session: aiohttp.ClientSession) -> None:
    routes = {"/robots.txt": redirect("/r1")} | {f"/r{i}": redirect(f"/r{i + 1}") for i in range(6)}
    async with RecordingServer(routes) as srv:
        status, body = await fetch_robots(session, srv.origin, POLICY)
        assert len(srv.log) == 6  # robots.txt plus 5 followed hops, then give up
        assert status == 301 and body is None
        assert RobotsRules.from_response(status, body).allow_all


async def test_fetch_redirect_loop_ends(session: aiohttp.ClientSession) -> None:
    async with RecordingServer({"/robots.txt": redirect("/robots.txt")}) as srv:
        status, _ = await fetch_robots(session, srv.origin, POLICY)
        assert status == 301 and len(srv.log) == 6


async def test_fetch_unreachable(session: aiohttp.ClientSession) -> None:
    async with RecordingServer({}) as srv:
        origin = srv.origin
    assert await fetch_robots(session, origin, POLICY) == (None, None)  # connection refused


async def test_fetch_reset(session: aiohttp.ClientSession) -> None:
    async with RecordingServer({"/robots.txt": reset()}) as srv:
        assert await fetch_robots(session, srv.origin, POLICY) == (None, None)


async def test_fetch_timeout(session: aiohttp.ClientSession) -> None:
    policy = CrawlPolicy(crawl_id="t", user_agent=UA, timeout=0.2, connect_timeout=0.2)
    async with RecordingServer({"/robots.txt": slow(2.0)}) as srv:
        assert await fetch_robots(session, srv.origin, policy) == (None, None)


async def test_fetch_caps_body_and_decodes_gzip(session: aiohttp.ClientSession) -> None:
    big = b"User-agent: *\nDisallow: /a\n" + b"#" * 99 + b"\n"
    big = big * (2 * ROBOTS_MAX_BYTES // len(big))
    routes = {
        "/robots.txt": Reply(
            headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"},
            body=gzip.compress(big),
        )
    }
    async with RecordingServer(routes) as srv:
        status, body = await fetch_robots(session, srv.origin, POLICY)
        assert status == 200 and body is not None
        assert ROBOTS_MAX_BYTES - 200 < len(body) <= ROBOTS_MAX_BYTES
        assert body.endswith("\n")


# --- X-Robots-Tag and directive lists ----------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("noindex, nofollow", {"noindex", "nofollow"}),
        ("NONE", {"none", "noindex", "nofollow"}),
        ("index,follow", {"index", "follow"}),
        ("max-snippet:20, noarchive", {"max-snippet", "noarchive"}),
        ("", set()),
    ],
)
def test_robots_directives(content: str, expected: set[str]) -> None:
    assert robots_directives(content) == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["noindex, nofollow"], {"noindex", "nofollow"}),
        (["googlebot: noindex"], set()),
        (["streamcrawl: nofollow"], {"nofollow"}),
        (["StreamCrawl: noindex, nofollow"], {"noindex", "nofollow"}),
        (["googlebot: noindex", "nofollow"], {"nofollow"}),
        (["none"], {"none", "noindex", "nofollow"}),
        (["unavailable_after: 25 Jun 2010 15:00:00 PST"], {"unavailable_after"}),
        (["otherbot: noindex, streamcrawl: nofollow"], {"nofollow"}),
    ],
)
def test_x_robots_tag_multidict(values: list[str], expected: set[str]) -> None:
    headers: CIMultiDict[str] = CIMultiDict()
    for value in values:
        headers.add("X-Robots-Tag", value)
    assert x_robots_tag(headers, UA) == expected


def test_x_robots_tag_joined_dict() -> None:
    assert x_robots_tag({"x-robots-tag": "noindex, googlebot: nofollow"}, UA) == {"noindex"}
    assert x_robots_tag({"content-type": "text/html"}, UA) == frozenset()


async def test_fetch_reports_when_the_last_request_was_sent(
    session: aiohttp.ClientSession,
) -> None:
    """The origin's delay counts from the robots.txt request's send time, not its dispatch."""
    routes = {"/robots.txt": redirect("/real"), "/real": text("User-agent: *\nAllow: /\n")}
    async with RecordingServer(routes) as srv:
        sent = SentAt()
        before = time.time()
        assert (await fetch_robots(session, srv.origin, POLICY, sent))[0] == 200
        first, last = srv.log
        assert before <= first.t <= last.t
        # the redirect target's request, not the first, and never before it reached the wire
        # (the servers log kernel arrival times; on a loaded machine loopback delivery can
        # stamp the arrival a few microseconds after send() returned: 12 us seen in CI)
        assert last.t - 0.0005 <= sent.at <= last.t + 0.05
        assert sent.at > first.t
