"""The one redirect resolver, and the page fetch and the robots fetch following it alike."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import unquote

import aiohttp
import pytest

from streamcrawl.agents.errors import FetchPermanent
from streamcrawl.agents.net.fetch import fetch, make_session
from streamcrawl.agents.net.redirects import resolve_redirect
from streamcrawl.agents.net.robots_fetch import fetch_robots
from streamcrawl.schemas.records import CrawlPolicy
from tests.httpserver import LOOPBACK_GUARD, RecordingServer, html, redirect

POLICY = CrawlPolicy(crawl_id="t", user_agent="streamcrawl/0.1", timeout=2.0, connect_timeout=1.0)


@pytest.mark.parametrize(
    ("location", "target"),
    [
        ("/b?q='x'", "http://a.test/b?q=%27x%27"),  # the query encoding a browser applies
        ("\\\\b.test\\p", "http://b.test/p"),  # backslashes are slashes in special schemes
        ("http:/other/x", "http://a.test/other/x"),  # same scheme: relative
        ("  /b\t\n/c#frag  ", "http://a.test/b/c"),  # outer spaces, tabs and newlines dropped
        ("http://@b.test/", "http://b.test/"),  # an empty userinfo is dropped
    ],
)
def test_location_resolved_as_a_browser_resolves_it(location: str, target: str) -> None:
    assert resolve_redirect("http://a.test/dir/page", location) == target


@pytest.mark.parametrize(
    "location",
    ["http://[::1", "ftp://a.test/f", "mailto:x@a.test", "file:///etc/passwd", "", None],
)
def test_location_that_is_no_http_url_is_refused(location: str | None) -> None:
    assert resolve_redirect("http://a.test/", location) is None


# --- both fetches against a local server --------------------------------------------------

# (Location sent by /robots.txt, with {host} for the server's host:port; the path and query the
# next request must ask for, or None when no request may follow). The server logs them decoded.
AGREEMENT = [
    ("/b?q='x'", "/b?q=%27x%27"),
    ("\\\\{host}\\p", "/p"),
    ("http:/other/x", "/other/x"),
    ("/t\t/u#frag", "/t/u"),
    ("http://@{host}/d", "/d"),
    ("../up/./x", "/up/x"),
    ("?only=query", "/robots.txt?only=query"),
    ("HTTP://{host}/Case", "/Case"),
    ("http://[::1", None),
    ("ftp://{host}/f", None),
    ("mailto:x@a.test", None),
    ("file:///etc/passwd", None),
    ("javascript:alert(1)", None),
    ("http://exa mple.test/", None),
]


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    s = make_session(guard=LOOPBACK_GUARD)
    yield s
    await s.close()


@pytest.mark.parametrize(("location", "path"), AGREEMENT)
async def test_page_and_robots_fetch_follow_a_location_alike(
    session: aiohttp.ClientSession, location: str, path: str | None
) -> None:
    async with RecordingServer() as srv:
        srv.routes["/robots.txt"] = redirect(location.format(host=f"{srv.host}:{srv.port}"))
        if path is not None:
            srv.routes[unquote(path)] = html("<html><title>t</title></html>")
        expected = ["/robots.txt"] if path is None else ["/robots.txt", unquote(path)]

        if path is None:
            with pytest.raises(FetchPermanent) as info:
                await fetch(session, srv.url("/robots.txt"), POLICY, hop_check=lambda _: None)
            assert info.value.error_class == "bad_redirect"
        else:
            page = await fetch(session, srv.url("/robots.txt"), POLICY, hop_check=lambda _: None)
            assert page.status == 200 and page.redirects == (srv.url(path),)
        assert srv.paths() == expected

        status, _ = await fetch_robots(session, srv.origin, POLICY)
        assert status == (301 if path is None else 200)
        assert srv.paths() == expected * 2
