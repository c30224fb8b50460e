"""An embedded crawl into WARC files, read back by real WARC clients (warcio, FastWARC).

The test server records what it sent; the archive must hold those bytes: the payload as it went
over the wire (gzip and br still encoded, chunking removed), for pages, binary content,
redirects, 404s, robots.txt and sitemaps, with the exchange's request, its address and a
metadata record; a revisit is a ``revisit`` record that points at the response it repeats.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path
from typing import Any

import brotli
import pytest
from warcio.archiveiterator import ArchiveIterator

from streamcrawl.agents.sinks.warc.index import cdxj_lines
from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.embedded.runner import EmbeddedCrawl
from tests import warc_tools
from tests.httpserver import RecordingServer, Reply, html, stream, text

pytestmark = pytest.mark.timeout(120)

PAGE = b"<html><head><title>gz</title></head><body><a href=/br>br</a> caf\xc3\xa9</body></html>"
BR_PAGE = b"<html><body><a href=/chunked>chunked</a><a href=/img.png>img</a></body></html>"
PNG = bytes(range(256)) * 8  # binary: every byte value
GZ = gzip.compress(PAGE, mtime=0)  # the bytes the server sends
BR = brotli.compress(BR_PAGE)
SITEMAP = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>{root}/listed</loc></url>
</urlset>"""


def _bin(path: Path) -> str:
    return str(Path(sys.executable).parent / path)


def records(directory: Path) -> list[Any]:
    """Every record of every closed WARC file, in file order (payload read: raw, undecoded)."""
    out = []
    for path in sorted(directory.glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f, no_record_parse=True):
                rec.raw = rec.raw_stream.read()  # the whole block: HTTP head and payload
                out.append(rec)
    return out


def http_header(rec: Any, name: str) -> str | None:
    """A header of the HTTP head of a request or response record's block."""
    head = rec.raw.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")[1:]
    found = [v for k, _, v in (line.partition(": ") for line in head) if k.lower() == name.lower()]
    return found[0] if found else None


def status(rec: Any) -> str:
    return str(rec.raw.split(b" ", 2)[1].decode())


def validate(directory: Path) -> list[Path]:
    """Every closed file passes ``warcio check`` and FastWARC's digest check; none is open."""
    files = sorted(directory.glob("*.warc.gz"))
    assert files and not list(directory.glob("*.open"))
    for path in files:
        warc_tools.check(path)
    return files


def site(root: str) -> dict[str, Any]:
    return {
        "/": html('<a href="/gz">gz</a> <a href="/go">redirect</a> <a href="/missing">404</a>'),
        "/robots.txt": text(f"User-agent: *\nAllow: /\nSitemap: {root}/sitemap.xml\n"),
        "/sitemap.xml": text(SITEMAP.replace(b"{root}", root.encode()), "application/xml"),
        "/listed": html("listed in the sitemap"),
        "/gz": Reply(
            headers={"Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip"},
            body=GZ,
        ),
        "/br": Reply(
            headers={"Content-Type": "text/html", "Content-Encoding": "br"},
            body=BR,
        ),
        "/chunked": stream(200_000, chunk=50_000),
        "/img.png": Reply(headers={"Content-Type": "image/png"}, body=PNG),
        "/go": Reply(status=301, headers={"Location": "/target"}, body=b"moved to /target"),
        "/target": html("redirected here"),
    }


def policy(srv: RecordingServer, **kw: Any) -> CrawlPolicy:
    return CrawlPolicy(
        crawl_id="w1",
        seeds=(srv.url("/"),),
        delay=0.0,
        warc=True,
        content_types=("text/html", "image/png"),
        **kw,
    )


async def test_the_archive_holds_every_exchange_as_the_server_sent_it(tmp_path: Path) -> None:
    async with RecordingServer() as srv:
        srv.routes.update(site(srv.origin))
        summary = await EmbeddedCrawl(
            policy(srv), out_dir=tmp_path / "out", state_dir=tmp_path / "st", warc=tmp_path / "w"
        ).run()
    assert summary.states["fetched"] == 7  # /go ends at /target
    validate(tmp_path / "w")
    recs = records(tmp_path / "w")
    assert recs[0].rec_type == "warcinfo"
    responses = {r.rec_headers["WARC-Target-URI"]: r for r in recs if r.rec_type == "response"}
    requests = {r.rec_headers["WARC-Target-URI"]: r for r in recs if r.rec_type == "request"}
    url = srv.url

    def payload(path: str) -> bytes:
        rec = responses[url(path)]
        head, _, body = rec.raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 ")
        return bytes(body)

    # Content-encoded payloads are stored as they came: still gzip / br.
    assert payload("/gz") == GZ and gzip.decompress(payload("/gz")) == PAGE
    assert payload("/br") == BR and brotli.decompress(payload("/br")) == BR_PAGE
    # warcio's replay stream decodes them back to what the parse stage saw.
    files = sorted((tmp_path / "w").glob("*.warc.gz"))
    assert warc_tools.replay(files, url("/gz")) == PAGE
    assert warc_tools.replay(files, url("/br")) == BR_PAGE
    assert warc_tools.replay(files, url("/img.png")) == PNG
    assert warc_tools.replay(files, url("/chunked")) == b"x" * 200_000
    assert warc_tools.replay(files, url("/missing")) == b"not found"  # the 404's own body
    assert warc_tools.replay(files, url("/go")) == b"moved to /target"  # the 301's body
    assert payload("/img.png") == PNG
    # Chunked: de-chunked, said so in the headers, with the stored length.
    chunked = responses[url("/chunked")]
    assert payload("/chunked") == b"x" * 200_000
    assert http_header(chunked, "X-Crawler-Transfer-Encoding") == "chunked"
    assert http_header(chunked, "Transfer-Encoding") is None
    assert http_header(chunked, "Content-Length") == "200000"
    # Redirects, 404s, robots.txt and the sitemap are archived too.
    assert status(responses[url("/go")]) == "301"
    assert http_header(responses[url("/go")], "Location") == "/target"
    assert url("/target") in responses
    assert status(responses[url("/missing")]) == "404"
    assert b"User-agent: *" in payload("/robots.txt")
    assert b"<urlset" in payload("/sitemap.xml") and url("/listed") in responses
    # Every response has its request, from the address the guard let through.
    for target, rec in responses.items():
        req = requests[target]
        assert rec.rec_headers["WARC-IP-Address"] == "127.0.0.1"
        assert req.rec_headers["WARC-Concurrent-To"] == rec.rec_headers["WARC-Record-ID"]
        assert req.raw.startswith(b"GET /")
        assert b"\r\nUser-Agent: " in req.raw and b"\r\nHost: 127.0.0.1:" in req.raw
    # The metadata record of the home page lists its outlinks and depth.
    meta = [r for r in recs if r.rec_type == "metadata"]
    home = next(r for r in meta if r.rec_headers["WARC-Target-URI"] == url("/"))
    assert f"outlink: {url('/gz')}".encode() in home.raw and b"depth: 0" in home.raw
    gz = next(r for r in meta if r.rec_headers["WARC-Target-URI"] == url("/gz"))
    assert f"via: {url('/')}".encode() in gz.raw


async def test_a_body_cut_at_max_body_is_marked_truncated(tmp_path: Path) -> None:
    async with RecordingServer() as srv:
        srv.routes.update({"/": html("<a href=/big>big</a>"), "/big": stream(300_000)})
        await EmbeddedCrawl(
            policy(srv, max_body=100_000, obey_robots=False),
            out_dir=tmp_path / "out",
            state_dir=tmp_path / "st",
            warc=tmp_path / "w",
        ).run()
    validate(tmp_path / "w")
    big = next(
        r
        for r in records(tmp_path / "w")
        if r.rec_type == "response" and r.rec_headers["WARC-Target-URI"].endswith("/big")
    )
    assert big.rec_headers["WARC-Truncated"] == "length"
    assert len(big.raw.partition(b"\r\n\r\n")[2]) <= 100_000


def _etag_site() -> dict[str, Any]:
    async def page(request: Any) -> Any:
        from aiohttp import web

        if request.headers.get("If-None-Match") == '"v1"':
            return web.Response(status=304, headers={"ETag": '"v1"'})
        return web.Response(
            body=b"<html><body>same</body></html>",
            headers={"Content-Type": "text/html", "ETag": '"v1"'},
        )

    return {"/": html("<a href=/etag>e</a><a href=/same>s</a>"), "/etag": page, "/same": html("x")}


async def test_revisits_become_revisit_records_that_point_at_the_response(tmp_path: Path) -> None:
    async with RecordingServer() as srv:
        srv.routes.update(_etag_site())
        crawl = EmbeddedCrawl(
            policy(srv, recrawl_after=1.0, recrawl_jitter=0.0, obey_robots=False),
            out_dir=tmp_path / "out",
            state_dir=tmp_path / "st",
            warc=tmp_path / "w",
        )

        async def stop_after_revisits() -> None:
            import asyncio

            while len(srv.requests("/etag")) < 3 or len(srv.requests("/same")) < 3:
                await asyncio.sleep(0.05)
            crawl.stop()

        import asyncio

        await asyncio.gather(crawl.run(), stop_after_revisits())
    validate(tmp_path / "w")
    recs = records(tmp_path / "w")
    by_id = {r.rec_headers["WARC-Record-ID"]: r for r in recs}
    revisits = [r for r in recs if r.rec_type == "revisit"]
    profiles = {r.rec_headers["WARC-Target-URI"]: r.rec_headers["WARC-Profile"] for r in revisits}
    assert profiles[srv.url("/etag")].endswith("/revisit/server-not-modified")
    assert profiles[srv.url("/same")].endswith("/revisit/identical-payload-digest")
    for rec in revisits:
        original = by_id[rec.rec_headers["WARC-Refers-To"]]  # it is in the archive
        assert original.rec_type == "response"
        assert original.rec_headers["WARC-Target-URI"] == rec.rec_headers["WARC-Target-URI"]
        assert original.rec_headers["WARC-Date"] == rec.rec_headers["WARC-Refers-To-Date"]
        assert rec.rec_headers["WARC-Refers-To-Target-URI"] == rec.rec_headers["WARC-Target-URI"]
    # The index lists each capture once; a revisit as warc/revisit.
    index = cdxj_lines(sorted((tmp_path / "w").glob("*.warc.gz")))
    assert any('"mime": "warc/revisit"' in line for line in index)


def test_kill_9_leaves_only_valid_closed_files_and_resume_starts_a_new_one(
    tmp_path: Path,
) -> None:
    import os
    import signal
    import time

    slow = {f"/p{i}": html(f"<a href=/p{i + 1}>next</a>" + "x" * 2000) for i in range(400)}
    with RecordingServer(slow) as srv:
        cmd = [
            _bin(Path("streamcrawl")),
            "crawl",
            srv.url("/p0"),
            "--crawl-id",
            "k9",
            "--delay",
            "0.02",
            "--ignore-robots",
            "--out",
            str(tmp_path / "out"),
            "--state-dir",
            str(tmp_path / "st"),
            "--warc",
            str(tmp_path / "w"),
            "--no-progress",
            "--allow-network",
            "127.0.0.0/8",
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while len(srv.log) < 60 and time.time() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert list((tmp_path / "w").glob("*.open")), "a crawl killed mid-way leaves its file open"
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr
    files = validate(tmp_path / "w")
    assert len(files) == 2  # the recovered file and the resumed crawl's own
    fetched = {
        r.rec_headers["WARC-Target-URI"]
        for r in records(tmp_path / "w")
        if r.rec_type == "response"
    }
    assert fetched == {srv.url(f"/p{i}") for i in range(401)}  # /p400: the 404 at the end
