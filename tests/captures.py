"""Capture records the tests build by hand: what a crawl with ``CrawlPolicy.warc`` publishes on
``captures`` for one fetch (schemas/records.py), before the stages fill them themselves."""

from __future__ import annotations

from urllib.parse import urlsplit

from streamcrawl.schemas.records import Capture, Exchange

ORIGIN = "http://a.test"


def exchange(
    url: str, payload: bytes = b"<html>hello</html>", status: int = 200, date: float = 1.7e9
) -> Exchange:
    """One GET of ``url`` at ``date`` answered ``status`` with ``payload`` (a Content-Length of
    its size)."""
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "") or "/"
    return Exchange(
        target_uri=url,
        date=date,
        request=f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUser-Agent: t\r\n\r\n".encode(),
        response=(
            f"HTTP/1.1 {status} OK\r\nContent-Type: text/html\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        ).encode(),
        payload=payload,
        ip="127.0.0.1",
    )


def capture(
    path: str = "/",
    *payloads: bytes,
    crawl_id: str = "c",
    outlinks: tuple[str, ...] = (),
    origin: str = ORIGIN,
    date: float = 1.7e9,
) -> Capture:
    """The capture of ``origin + path`` fetched at ``date``: one exchange per payload (the
    earlier ones as if they were redirect hops to the same URL, a millisecond apart), one small
    page without payloads given."""
    url = origin + path
    bodies = payloads or (f"<html>{path}</html>".encode(),)
    return Capture(
        crawl_id=crawl_id,
        origin=origin,
        url=url,
        depth=1,
        elapsed_ms=3.0,
        outlinks=outlinks,
        exchanges=tuple(exchange(url, body, date=date + i / 1000) for i, body in enumerate(bodies)),
    )
