"""What a WARC archive needs of a fetch: each HTTP exchange as it went over the wire.

A crawl with ``CrawlPolicy.warc`` hands ``fetch`` (and ``fetch_robots``) a ``Recorder``. For each
response, ``begin`` takes the request as aiohttp sent it and the response head as received;
``end`` takes the payload as it came off the connection: before content decoding (the bytes the
decoder was fed, so the parse stage sees exactly what it saw without archiving, and nothing is
downloaded twice) and with chunking removed (aiohttp de-chunks). Practice for a de-chunked
payload (Common Crawl's, WARC readers expect it): the response keeps its headers byte for byte
except ``Transfer-Encoding``, which is renamed ``X-Crawler-Transfer-Encoding``, and a
``Content-Length`` with the stored length is added when there was none (docs/warc.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

import aiohttp

from streamcrawl.agents.frontier.scheduler import Dispatch
from streamcrawl.schemas.records import Capture, CaptureRevisit, Exchange, Page, Truncated

_CHUNK: Final = 64 * 1024
# What a redacted request header's value is archived as (docs/requests.md, docs/warc.md).
REDACTED: Final = "REDACTED"


@dataclass
class _Pending:
    target_uri: str
    date: float
    request: bytes
    status_line: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    ip: str | None
    redacted: tuple[str, ...] = ()


class Recorder:
    """Collects the exchanges of ONE fetch, in order (redirect hops first)."""

    __slots__ = ("_pending", "chunks", "exchanges", "redact")

    def __init__(self, redact: frozenset[str] = frozenset()) -> None:
        """``redact``: lower-case names of request headers whose values are recorded as
        ``REDACTED`` (credentials and cookies; ``CrawlPolicy.warc_credentials``)."""
        self.redact = redact
        self.exchanges: list[Exchange] = []
        self._pending: _Pending | None = None
        # The raw chunks of the body being read: ``read_body(raw_parts=recorder.chunks)``.
        self.chunks: list[bytes] = []

    def begin(self, resp: aiohttp.ClientResponse, date: float) -> None:
        """A response's head arrived; ``date``: when its request was written."""
        info = resp.request_info
        request = [f"{info.method} {info.url.raw_path_qs} HTTP/1.1\r\n"]
        redacted: list[str] = []
        for name, value in info.headers.items():
            if name.lower() in self.redact:
                redacted.append(name.lower())
                value = REDACTED
            request.append(f"{name}: {value}\r\n")
        request.append("\r\n")
        version = resp.version
        major, minor = (version.major, version.minor) if version is not None else (1, 1)
        reason = resp.reason or ""
        self.chunks = []
        self._pending = _Pending(
            target_uri=str(info.url),
            date=date,
            request="".join(request).encode("utf-8", "surrogateescape"),
            status_line=f"HTTP/{major}.{minor} {resp.status} {reason}\r\n".encode("latin-1"),
            headers=tuple(resp.raw_headers),
            ip=_peer(resp),
            redacted=tuple(sorted(set(redacted))),
        )

    def end(self, payload: bytes = b"", truncated: Truncated | None = None) -> None:
        """The response's payload as received (raw), and why it is cut, if it is."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        self.exchanges.append(
            Exchange(
                target_uri=pending.target_uri,
                date=pending.date,
                request=pending.request,
                response=response_head(pending.status_line, pending.headers, len(payload)),
                payload=payload,
                ip=pending.ip,
                truncated=truncated,
                redacted=pending.redacted,
            )
        )

    def end_read(self, cap: int | None = None, truncated: Truncated | None = None) -> None:
        """End the exchange with the ``chunks`` its body was read in, the first ``cap`` bytes
        of them when given."""
        payload, self.chunks = b"".join(self.chunks), []
        self.end(payload if cap is None else payload[:cap], truncated)


async def record_rest(resp: aiohttp.ClientResponse, recorder: Recorder, cap: int) -> None:
    """End ``recorder``'s exchange with the rest of ``resp``'s payload, raw, at most ``cap``
    bytes (a longer one is cut: ``WARC-Truncated: length``). For responses a crawl does not
    otherwise read (redirects, errors, 304): a network error while reading keeps what came
    (``disconnect``) instead of replacing the response's own outcome."""
    parts: list[bytes] = []
    size = 0
    truncated: Truncated | None = None
    try:
        async for chunk in resp.content.iter_chunked(_CHUNK):
            if size + len(chunk) > cap:
                parts.append(chunk[: cap - size])
                truncated = "length"
                resp.close()
                break
            parts.append(chunk)
            size += len(chunk)
    except (aiohttp.ClientError, OSError, TimeoutError):
        truncated = "disconnect"
    recorder.end(b"".join(parts), truncated)


def response_head(
    status_line: bytes, headers: tuple[tuple[bytes, bytes], ...], stored: int
) -> bytes:
    """The response head as received, with the de-chunking said (module docstring)."""
    out = [status_line]
    has_length = False
    for name, value in headers:
        lower = name.lower()
        if lower == b"transfer-encoding":
            name = b"X-Crawler-Transfer-Encoding"
        elif lower == b"content-length":
            has_length = True
        out.append(name + b": " + value + b"\r\n")
    if not has_length:
        out.append(b"Content-Length: %d\r\n" % stored)
    out.append(b"\r\n")
    return b"".join(out)


def _peer(resp: aiohttp.ClientResponse) -> str | None:
    """The address the response came from. aiohttp releases the connection (``resp.connection``
    None) as soon as a small body has arrived with the head, so the protocol it read from is
    asked: aiohttp 3.x keeps it as ``_protocol``, and no public API names the peer.
    ``test_capture.py`` fails if that changes."""
    protocol = getattr(resp, "_protocol", None)
    transport = getattr(protocol, "transport", None)
    if transport is None:
        return None
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if peer else None


def page_capture(
    d: Dispatch, page: Page | None, status: int | None, recorder: Recorder, started: float
) -> Capture:
    """The WARC capture of a page, sitemap or feed fetch. A revisit that found the page
    unchanged refers to the response of the fetch that last found it new or changed (its
    ``changed_at`` is that response's WARC-Date): a 304 as ``server-not-modified`` (the URL
    asked, with validators, is the one that answered then), the same body as
    ``identical-payload-digest``."""
    entry = d.entry
    assert entry is not None
    exchanges = tuple(recorder.exchanges)
    revisit = None
    previous = entry.revisit
    if page is not None and page.change == "unchanged" and previous is not None:
        refers_to_date = previous.changed_at or previous.fetched_at
        if status == 304:
            revisit = CaptureRevisit(
                profile="server-not-modified",
                refers_to_uri=exchanges[0].target_uri,
                refers_to_date=refers_to_date,
            )
        else:
            revisit = CaptureRevisit(
                profile="identical-payload-digest",
                refers_to_uri=exchanges[-1].target_uri,
                refers_to_date=refers_to_date,
            )
    outlinks = tuple(link.url for link in page.links) if page is not None else ()
    return Capture(
        crawl_id=entry.crawl_id,
        origin=d.origin,
        url=entry.url,
        kind=entry.kind,
        depth=entry.depth,
        via=entry.parent,
        elapsed_ms=page.elapsed_ms if page is not None else (time.time() - started) * 1000.0,
        outlinks=outlinks,
        exchanges=exchanges,
        revisit=revisit,
    )
