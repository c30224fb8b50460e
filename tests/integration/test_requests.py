"""Requests users shape, through both wirings (``tests/wirings.py``), against local servers that
record what they were sent and Debian's tinyproxy (docs/requests.md).

A login-protected crawl: a header on every request (robots.txt included) and one for one origin
only, a session cookie a login redirect sets, basic auth that one origin of two wants; the
credential is searched for in everything the crawl wrote and logged. A crawl through the real
proxy, whose own log shows every request went through it, and that a target the SSRF guard
refuses never reached it.
"""

from __future__ import annotations

import gzip
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamcrawl.agents.net.credentials import Credentials
from streamcrawl.agents.net.network import Network
from streamcrawl.agents.net.proxy import parse_proxy
from streamcrawl.schemas.records import CrawlPolicy, OriginAuth, RequestHeader
from tests.fakedns import StaticResolver
from tests.httpserver import LOOPBACK_GUARD, RecordingServer, html
from tests.integration.request_site import SESSION, USER, Site, request_site
from tests.proxy import tinyproxy
from tests.wirings import WIRINGS, crawl

pytestmark = pytest.mark.integration

CANARY = "canary-" + uuid.uuid4().hex


def site_policy(site: Site, crawl_id: str, **fields: object) -> CrawlPolicy:
    return CrawlPolicy(
        crawl_id=crawl_id,
        seeds=(site.a.url("/"),),
        delay=0.0,
        cookies=True,
        headers=(
            RequestHeader(name="X-Team", value="blue"),
            RequestHeader(name="X-Only-B", value="1", origin=site.b.origin),
        ),
        auth=(OriginAuth(origin=site.b.origin, credential="SITE_B"),),
        **fields,  # type: ignore[arg-type]
    )


def network(**fields: object) -> Network:
    environ = {"STREAMCRAWL_CREDENTIAL_SITE_B": f"basic:{USER}:{CANARY}"}
    return Network(guard=LOOPBACK_GUARD, credentials=Credentials(environ=environ), **fields)  # type: ignore[arg-type]


def written(tmp_path: Path) -> bytes:
    """Every byte the crawl wrote under ``tmp_path`` (gzip members opened)."""
    out = []
    for path in sorted(p for p in tmp_path.rglob("*") if p.is_file()):
        data = path.read_bytes()
        out.append(gzip.decompress(data) if path.name.endswith(".gz") else data)
    return b"\n".join(out)


def leaks(data: bytes, site: Site) -> bool:
    return CANARY.encode() in data or site.basic.split()[1].encode() in data


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_login_protected_crawl_sends_each_origin_what_it_wants(
    wiring: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with request_site(CANARY) as site:
        states = await crawl(wiring, site_policy(site, "login"), tmp_path, network=network())
        fetched = {url for url, s in states.items() if s.state == "fetched"}
        assert fetched == site.expected_fetched(), states
        for request in site.a.log:  # robots.txt included
            assert request.headers.get("X-Team") == "blue", request
            assert "Authorization" not in request.headers and "X-Only-B" not in request.headers
        assert site.b.log and site.b.paths()[0] == "/robots.txt"
        for request in site.b.log:
            assert request.headers.get("Authorization") == site.basic, request
            assert request.headers.get("X-Only-B") == "1" and request.headers["X-Team"] == "blue"
        # The redirect's Set-Cookie went with its next hop, and from the jar to a later fetch.
        for path in ("/members", "/members/2"):
            (member,) = site.a.requests(path)
            assert SESSION in member.headers.get("Cookie", ""), member
        assert "Cookie" not in site.a.requests("/login")[0].headers
    assert not leaks(written(tmp_path), site)
    assert not leaks(caplog.text.encode(), site)


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_credential_the_process_lacks_ends_the_origins_urls_naming_it(
    wiring: str, tmp_path: Path
) -> None:
    async with request_site(CANARY) as site:
        policy = site_policy(site, "missing")
        policy = CrawlPolicy(
            **{
                **{f: getattr(policy, f) for f in policy.__struct_fields__},
                "auth": (OriginAuth(origin=site.b.origin, credential="NOT_HERE"),),
            }
        )
        states = await crawl(wiring, policy, tmp_path, network=network())
        state = states[site.b.url("/")]
        assert state.state == "failed"
        assert state.last_error is not None
        assert state.last_error.startswith("missing_credential: credential NOT_HERE")
        assert "STREAMCRAWL_CREDENTIAL_NOT_HERE" in state.last_error
        assert site.b.paths() == ["/robots.txt"]  # asked without a credential; no page
        assert states[site.a.url("/hdr")].state == "fetched"  # the crawl goes on


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_every_request_goes_through_the_proxy_and_a_refused_target_never_reaches_it(
    wiring: str, tmp_path: Path
) -> None:
    internal = "http://internal.test/x"
    resolver = StaticResolver({"internal.test": [["10.1.2.3"]]})
    with tinyproxy(tmp_path / "proxy") as proxy:
        async with request_site(CANARY) as site:
            site.a.routes["/"] = html(f'<a href="/hdr">t</a> <a href="{internal}">in</a>')
            policy = site_policy(site, "proxied", allow_hosts=("internal.test",))
            via = network(proxy=parse_proxy(proxy.url), resolver=resolver)
            states = await crawl(wiring, policy, tmp_path / "crawl", network=via)
            assert states[site.a.url("/hdr")].state == "fetched"
            assert states[internal].state == "blocked", states[internal]
            sent = [f"GET {site.a.url(p)} HTTP/1.1" for p in site.a.paths()]
            assert sorted(proxy.requests()) == sorted(sent)
        assert "internal.test" not in proxy.log() and "10.1.2.3" not in proxy.log()
        assert resolver.asked == ["internal.test"]  # judged here, before any proxy was asked


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_proxy_that_wants_a_password_gets_the_processes_credential(
    wiring: str, tmp_path: Path
) -> None:
    environ = {"STREAMCRAWL_CREDENTIAL_PROXY": f"basic:px:{CANARY}"}
    credentials = Credentials(environ=environ)
    with tinyproxy(tmp_path / "proxy", basic_auth=("px", CANARY)) as proxy:
        async with RecordingServer({"/": html("<title>home</title>")}) as srv:
            policy = CrawlPolicy(crawl_id="auth-proxy", seeds=(srv.url("/"),), delay=0.0)
            held = credentials.get("PROXY")
            via = Network(guard=LOOPBACK_GUARD, proxy=parse_proxy(proxy.url, (), held))
            states = await crawl(wiring, policy, tmp_path / "crawl", network=via)
            assert states[srv.url("/")].state == "fetched"
            assert f"GET {srv.url('/')} HTTP/1.1" in proxy.requests()
            # the proxy's credential is the proxy's: the server never sees it
            assert all("Proxy-Authorization" not in r.headers for r in srv.log)
    assert CANARY.encode() not in written(tmp_path / "crawl")


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_proxy_that_refuses_connections_is_a_proxy_error_retried(
    wiring: str, tmp_path: Path
) -> None:
    async with RecordingServer({"/": html("<title>home</title>")}) as srv:
        # robots.txt off: its fetch would fail the same way and deny the origin
        policy = CrawlPolicy(
            crawl_id="no-proxy", seeds=(srv.url("/"),), delay=0.0, retries=1, obey_robots=False
        )
        via = Network(guard=LOOPBACK_GUARD, proxy=parse_proxy("http://127.0.0.1:9"))
        states = await crawl(wiring, policy, tmp_path, network=via)
        state = states[srv.url("/")]
        assert state.state == "failed" and state.attempts == 2
        assert state.last_error is not None and state.last_error.startswith("proxy: "), state
        assert srv.log == []


@pytest.mark.parametrize("keep", [False, True])
async def test_warc_request_records_hold_credentials_and_cookies_only_when_asked(
    keep: bool, tmp_path: Path
) -> None:
    from streamcrawl.agents.net.core import CrawlCore
    from streamcrawl.topology.embedded.runner import EmbeddedCrawl

    async with request_site(CANARY) as site:
        policy = site_policy(
            site, "archived", warc=True, warc_credentials="keep" if keep else "redact"
        )
        await EmbeddedCrawl(
            policy,
            out_dir=tmp_path / "out",
            state_dir=tmp_path / "state",
            warc=tmp_path / "warc",
            core=CrawlCore(network()),
        ).run()
    requests = request_records(tmp_path / "warc")
    to_b = [r for r in requests if r.uri.startswith(site.b.origin)]
    member = next(r for r in requests if r.uri == site.a.url("/members/2"))
    assert to_b
    archive = written(tmp_path / "warc")
    if keep:
        assert site.basic.encode() in archive
        assert all(r.redacted is None for r in requests)
        assert SESSION in member.head
    else:
        assert not leaks(archive, site)
        # Request records only: a response's Set-Cookie is archived as received.
        assert not any(SESSION in r.head for r in requests)
        for record in to_b:
            assert record.redacted == "authorization"
            assert "Authorization: REDACTED\r\n" in record.head
        assert member.redacted == "cookie" and "Cookie: REDACTED\r\n" in member.head


@dataclass
class RequestRecord:
    uri: str
    redacted: str | None
    head: str  # the request line and headers as archived


def request_records(folder: Path) -> list[RequestRecord]:
    from warcio.archiveiterator import ArchiveIterator

    out = []
    for path in sorted(folder.glob("*.warc.gz")):
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type != "request":
                    continue
                out.append(
                    RequestRecord(
                        record.rec_headers.get_header("WARC-Target-URI"),
                        record.rec_headers.get_header("WARC-Redacted-Headers"),
                        record.http_headers.to_str(),
                    )
                )
    return out
