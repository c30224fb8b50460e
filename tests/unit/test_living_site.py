"""tests/living_site.py: the changing site the continuous-crawl tests and bench crawl, served by
a real RecordingServer on 127.0.0.1 and fetched with aiohttp."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import pytest
from multidict import CIMultiDictProxy

from tests.httpserver import RecordingServer
from tests.living_site import (
    ODD_ETAG,
    WEAK_ETAG,
    LivingSite,
    ManualClock,
    etag_matches,
    http_date,
    parse_http_date,
)

Got = tuple[int, CIMultiDictProxy[str], bytes]
Get = Callable[..., Awaitable[Got]]


@asynccontextmanager
async def serving(site: LivingSite) -> AsyncIterator[Get]:
    """``get(path, inm=None, ims=None)``: a GET with those conditions, as (status, headers,
    body)."""
    async with RecordingServer(site.routes()) as srv, aiohttp.ClientSession() as session:

        async def get(path: str, inm: str | None = None, ims: str | None = None) -> Got:
            pairs = {"If-None-Match": inm, "If-Modified-Since": ims}
            headers = {k: v for k, v in pairs.items() if v is not None}
            async with session.get(srv.url(path), headers=headers) as resp:
                return resp.status, resp.headers, await resp.read()

        yield get


# --- pure parts ---------------------------------------------------------------------------


def test_http_dates_in_the_three_formats_round_trip() -> None:
    t = 784_111_777  # RFC 9110 5.6.7's example
    assert http_date(t) == "Sun, 06 Nov 1994 08:49:37 GMT"
    assert http_date(t, "rfc850") == "Sunday, 06-Nov-94 08:49:37 GMT"
    assert http_date(t, "asctime") == "Sun Nov  6 08:49:37 1994"
    assert all(parse_http_date(http_date(t, s)) == t for s in ("imf", "rfc850", "asctime"))


@pytest.mark.parametrize(
    "value", ["Sun, 06 Nov 1994 08:49:37 +0000", "Mon, 06 Nov 1994 08:49:37 GMT", "yesterday", ""]
)
def test_what_is_no_http_date_is_ignored(value: str) -> None:
    assert parse_http_date(value) is None


@pytest.mark.parametrize(
    ("if_none_match", "etag", "match"),
    [
        ('"a"', '"a"', True),
        ('W/"a"', '"a"', True),  # weak comparison
        ('"a"', 'W/"a"', True),
        ('"x", "a"', '"a"', True),
        ("*", '"a"', True),
        ('"p0, v1 r0"', '"p0, v1 r0"', True),  # a comma inside the quotes is one tag
        ('"p0', '"p0, v1 r0"', False),  # an ETag cut at its comma
        ("p0, v1 r0", '"p0, v1 r0"', False),  # quotes dropped
        ('"b"', '"a"', False),
    ],
)
def test_if_none_match_by_weak_comparison(if_none_match: str, etag: str, match: bool) -> None:
    assert etag_matches(if_none_match, etag) is match


def test_history_gives_the_version_live_at_any_time() -> None:
    clock = ManualClock(1000.0)
    site = LivingSite(["/", "/a"], clock=clock)
    clock.advance(10)
    assert site.change("/a") == 2
    clock.advance(10)
    site.touch("/a")  # validators only: not a change
    assert site.history("/a") == [(1000.0, 1), (1010.0, 2)]
    assert [site.version_at("/a", t) for t in (999, 1000, 1009, 1010, 5000)] == [0, 1, 1, 2, 2]


def test_home_links_every_page_and_custom_bodies_name_the_version() -> None:
    site = LivingSite({"/": ["/b"], "/a": "<p>{version}</p>", "/b": "<p>plain</p>"})
    assert b'href="/b"' in site.body("/") and b'href="/a"' not in site.body("/")
    site.change("/a")
    site.change("/b")
    assert site.body("/a") == b"<p>2</p>"
    assert site.body("/b") == b"<p>plain</p><p>version 2</p>"
    default = LivingSite(["/", "/a", "/b"])
    assert b'href="/a"' in default.body("/") and b'href="/b"' in default.body("/")
    assert b'href="/"' in default.body("/a")


# --- served by a real server --------------------------------------------------------------


async def test_conditional_get_answers_304_without_body() -> None:
    site = LivingSite(["/", "/a"], clock=ManualClock())
    async with serving(site) as get:
        status, headers, body = await get("/a")
        etag, modified = headers["ETag"], headers["Last-Modified"]
        assert status == 200 and body == site.body("/a") and b"version 1" in body
        assert (etag, modified) == (site.sent_etag("/a"), site.sent_last_modified("/a"))
        assert etag.startswith('"') and modified.endswith(" GMT")
        for conditions in ({"inm": etag}, {"ims": modified}):
            status, headers, body = await get("/a", **conditions)
            assert (status, body, headers["ETag"]) == (304, b"", etag)
    assert site.statuses("/a") == [200, 304, 304]
    assert site.conditional("/a") == [(None, None), (etag, None), (None, modified)]
    assert [s.body_bytes for s in site.served("/a")] == [len(site.body("/a")), 0, 0]


async def test_change_and_touch_make_old_validators_stale() -> None:
    clock = ManualClock()
    site = LivingSite(["/", "/a", "/b"], clock=clock)
    async with serving(site) as get:
        first = {p: (await get(p))[1] for p in ("/a", "/b")}
        clock.advance(5)
        site.change("/a")
        site.touch("/b")
        status_a, headers_a, body_a = await get("/a", inm=first["/a"]["ETag"])
        status_b, headers_b, body_b = await get("/b", inm=first["/b"]["ETag"])
        stale_date = await get("/b", ims=first["/b"]["Last-Modified"])
    assert status_a == 200 and b"version 2" in body_a and headers_a["ETag"] != first["/a"]["ETag"]
    assert status_b == 200 and b"version 1" in body_b  # same body, new validators
    assert headers_b["ETag"] != first["/b"]["ETag"] and stale_date[0] == 200
    assert headers_b["Last-Modified"] != first["/b"]["Last-Modified"]
    assert [s.version for s in site.served("/a")] == [1, 2]


async def test_if_none_match_takes_precedence_over_if_modified_since() -> None:
    site = LivingSite(["/", "/a"], clock=ManualClock())
    async with serving(site) as get:
        _, headers, _ = await get("/a")
        etag, modified = headers["ETag"], headers["Last-Modified"]
        ancient = http_date(0)
        stale_tag = await get("/a", inm='"other"', ims=modified)
        fresh_tag = await get("/a", inm=etag, ims=ancient)
        bad_date = await get("/a", ims="yesterday")
    assert (stale_tag[0], fresh_tag[0], bad_date[0]) == (200, 304, 200)
    assert site.conditional("/a")[1:] == [
        ('"other"', modified),
        (etag, ancient),
        (None, "yesterday"),
    ]


async def test_ignore_mode_answers_200_and_none_mode_sends_no_validators() -> None:
    site = LivingSite(["/", "/a", "/b"], clock=ManualClock())
    site.configure("/a", mode="ignore")
    site.configure("/b", mode="none")
    async with serving(site) as get:
        _, headers, _ = await get("/a")
        again = await get("/a", inm=headers["ETag"], ims=headers["Last-Modified"])
        bare = await get("/b")
    assert again[0] == 200 and again[2] == site.body("/a") and "ETag" in again[1]
    assert bare[0] == 200 and "ETag" not in bare[1] and "Last-Modified" not in bare[1]
    assert site.sent_etag("/b") is None and site.sent_last_modified("/b") is None


async def test_unusual_validators_are_matched_only_when_echoed_exactly() -> None:
    site = LivingSite(["/", "/odd", "/weak"], clock=ManualClock(), dates="rfc850")
    site.configure("/odd", etag=ODD_ETAG)
    site.configure("/weak", etag=WEAK_ETAG, dates="asctime")
    async with serving(site) as get:
        _, odd, _ = await get("/odd")
        _, weak, _ = await get("/weak")
        assert "," in odd["ETag"] and " " in odd["ETag"] and weak["ETag"].startswith('W/"')
        assert odd["Last-Modified"].count("-") == 2 and "," not in weak["Last-Modified"]
        echoed = [await get(p, inm=h["ETag"]) for p, h in (("/odd", odd), ("/weak", weak))]
        cut = await get("/odd", inm=odd["ETag"].split(",")[0])
        dated = await get("/odd", ims=odd["Last-Modified"])
    assert [g[0] for g in echoed] == [304, 304] and cut[0] == 200 and dated[0] == 304
    assert site.conditional("/odd")[1] == (odd["ETag"], None)
    assert site.conditional("/odd")[3] == (None, site.sent_last_modified("/odd"))


async def test_only_one_validator_when_the_other_is_configured_off() -> None:
    site = LivingSite(["/", "/a"], clock=ManualClock(), etag=None)
    async with serving(site) as get:
        _, headers, _ = await get("/a")
        assert "ETag" not in headers
        assert (await get("/a", inm="*"))[0] == 200  # no ETag: nothing to match
        assert (await get("/a", ims=headers["Last-Modified"]))[0] == 304


@pytest.mark.parametrize("status", [404, 410])
async def test_removed_pages_answer_their_status_until_restored(status: int) -> None:
    site = LivingSite(["/", "/a"], clock=ManualClock())
    async with serving(site) as get:
        _, headers, _ = await get("/a")
        site.remove("/a", status)
        gone = await get("/a", inm=headers["ETag"])
        site.restore("/a")
        back = await get("/a", inm=headers["ETag"])
    assert (gone[0], back[0]) == (status, 304)
    assert site.statuses("/a") == [200, status, 304]


async def test_robots_allows_all_and_the_sitemap_lists_lastmod() -> None:
    clock = ManualClock(1_700_000_000.0)
    site = LivingSite(["/", "/a", "/b", "/c"], clock=clock)
    clock.advance(3600)
    site.change("/a")
    site.set_lastmod("/b", clock() + 86_400)  # a lastmod in the future
    site.set_lastmod("/c", "2020-01-01")
    site.remove("/", 410)
    async with serving(site) as get:
        robots = (await get("/robots.txt"))[2].decode()
        status, headers, doc = await get("/sitemap.xml")
    assert "User-agent: *" in robots and "Allow: /" in robots and "/sitemap.xml" in robots
    assert status == 200 and headers["Content-Type"].startswith("application/xml")
    xml = doc.decode()
    assert "/a</loc><lastmod>2023-11-14T23:13:20+00:00</lastmod>" in xml
    assert "/b</loc><lastmod>2023-11-15T23:13:20+00:00</lastmod>" in xml
    assert "/c</loc><lastmod>2020-01-01</lastmod>" in xml
    assert xml.count("<url>") == 3  # the removed page is not listed


def test_pages_change_from_the_test_thread_while_the_server_thread_answers() -> None:
    site = LivingSite(["/", "/a"])  # the real clock

    async def fetch_a(url: str) -> int:
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            return int((await resp.text()).split("version ")[1].split("<")[0])

    with RecordingServer(site.routes()) as srv:
        seen = [asyncio.run(fetch_a(srv.url("/a")))]
        for _ in range(3):
            site.change("/a")
            seen.append(asyncio.run(fetch_a(srv.url("/a"))))
    assert seen == [1, 2, 3, 4]
    served = site.served("/a")
    assert [site.version_at("/a", s.t) for s in served] == [s.version for s in served]
