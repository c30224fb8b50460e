"""Micro-benchmark of writing one capture as WARC records: warcio against our direct writer.

Run: ``python -m bench.probes.warc_write`` (with ``zlib-ng`` importable, e.g. ``pip install --target
/tmp/deflate zlib-ng`` and ``PYTHONPATH=/tmp/deflate``, it adds its rows; ``isal`` is a
dependency of the project). A typical capture of one page: a request of ~300 B, a response head
of ~300 B, a payload of 10 KB (``html``: plain HTML; ``gzip``: a payload that came Content-
Encoding gzip, already compressed), written as request + response + metadata records, each its
own gzip member; a different payload per capture. Prints, per payload, CPU microseconds per
capture (best of 5 rounds: the machine may be shared) and bytes written per capture, for:

* ``warcio (level 9)``: ``warcio.warcwriter.WARCWriter`` (warc_version 1.1, gzip, its fixed
  level 9), the HTTP heads parsed by warcio as its users do; ``warcio (level 1)``: the same
  with its gzip wrapper patched to level 1;
* ``records only``: ``agents.sinks.warc.records.capture_records`` (fields, ids, digests), no
  compression;
* ``direct L``: ``capture_records`` + ``encode`` at level L: what ``WarcFiles`` writes (levels
  1-3 by ISA-L, 4-9 by zlib, 0 stored; a compressed payload's record is stored whatever L);
* ``isal L``, ``zlib-ng L``: the same records compressed by that library at its level L (the
  rows that chose ISA-L over zlib: zlib's level 1 took 169 us for the html capture, ISA-L's 93).

The project's budget: archiving adds at most 15 % to an embedded crawl's ~1 ms of CPU per page,
i.e. about 150 us per capture (docs/warc.md, "Files", has the figures and the choice of level).

Informs: that WARC records are written by our own writer rather than warcio, and compressed by
ISA-L at level 1 (docs/warc.md, "Records"; docs/warc.md, "Files").
"""

from __future__ import annotations

import functools
import gzip
import importlib
import io
import random
import time
import zlib
from collections.abc import Callable
from typing import BinaryIO

from warcio import warcwriter
from warcio.warcwriter import WARCWriter

from streamcrawl.agents.sinks.warc.records import WarcRecord, capture_records, encode
from streamcrawl.schemas.records import Capture, Exchange

_GZIP = warcwriter.GzippingWrapper
WARCINFO = "<urn:uuid:00000000-0000-4000-8000-000000000000>"
WORDS = [
    "the", "crawler", "archive", "record", "page", "link", "index", "stream", "kafka", "origin",
    "fetch", "robots", "policy", "frontier", "queue", "schedule", "revisit", "digest",
    "payload", "response", "request", "header", "content", "html", "table", "body", "div",
    "span", "class", "href", "title", "meta", "script", "style", "section", "article", "nav",
]  # fmt: skip


def html(size: int, seed: int = 7) -> bytes:
    """Deterministic HTML of ``size`` bytes that compresses about like a real page (~4x)."""
    rng = random.Random(seed)
    out = ["<!doctype html><html><head><title>Page</title></head><body>\n"]
    while sum(map(len, out)) < size:
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 25)))
        link = f"/s{rng.randint(0, 7)}/p{rng.randint(0, 99999)}.html"
        out.append(
            f'<p class="c{rng.randint(0, 9)}"><a href="{link}">{words}</a> {rng.random()}</p>\n'
        )
    return "".join(out).encode()[:size]


def gzipped(size: int, seed: int = 11) -> bytes:
    """A gzip stream of about ``size`` bytes (a page sent with Content-Encoding: gzip)."""
    text = html(size * 4, seed)
    data = gzip.compress(text, 6)
    while len(data) > size:
        text = text[: int(len(text) * size / len(data))]
        data = gzip.compress(text, 6)
    return data


def capture(payload: bytes, i: int, encoding: str | None) -> Capture:
    url = f"https://example.com/s{i % 8}/p{i}.html"
    request = (
        f"GET /s{i % 8}/p{i}.html HTTP/1.1\r\nHost: example.com\r\n"
        "User-Agent: streamcrawl/0.1 (+https://github.com/streamcrawl/streamcrawl)\r\n"
        "Accept: text/html,application/xhtml+xml;q=0.9,*/*;q=0.8\r\n"
        "Accept-Encoding: gzip, deflate, br\r\nAccept-Language: en\r\n"
        "Connection: keep-alive\r\n\r\n"
    ).encode()
    coding = f"Content-Encoding: {encoding}\r\n" if encoding else ""
    response = (
        "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sat, 05 Dec 2026 06:00:00 GMT\r\n"
        "Content-Type: text/html; charset=utf-8\r\nLast-Modified: Fri, 04 Dec 2026 06:00:00 GMT\r\n"
        f'ETag: "{i:08x}-2800"\r\nCache-Control: max-age=600\r\n{coding}'
        f"Content-Length: {len(payload)}\r\nConnection: keep-alive\r\n\r\n"
    ).encode()
    exchange = Exchange(
        target_uri=url, date=1_796_450_400.0 + i, request=request, response=response,
        payload=payload, ip="93.184.216.34",
    )  # fmt: skip
    return Capture(
        crawl_id="bench", origin="https://example.com", url=url, depth=3,
        via="https://example.com/", elapsed_ms=42.0,
        outlinks=tuple(f"https://example.com/s{k % 8}/p{k}.html" for k in range(i, i + 30)),
        exchanges=(exchange,),
    )  # fmt: skip


def direct(level: int | None) -> Callable[[Capture], int]:
    """Our writer; ``None``: build the records without compressing them."""
    if level is None:
        return lambda c: len(capture_records(c, WARCINFO))
    return lambda c: len(encode(capture_records(c, WARCINFO), level))


def other_deflate(module: str, level: int) -> Callable[[], Callable[[Capture], int]] | None:
    """Our records compressed by ``isal.isal_zlib`` or ``zlib_ng.zlib_ng`` instead of zlib
    (compressed payloads still stored, by zlib level 0); None: the package is not installed."""
    try:
        lib = importlib.import_module(module)
    except ImportError:
        return None

    def member(record: WarcRecord) -> bytes:
        if record.compressed:
            return zlib.compress(record.to_bytes(), 0, wbits=31)
        return bytes(lib.compress(record.to_bytes(), level, wbits=31))

    return lambda: lambda c: sum(len(member(r)) for r in capture_records(c, WARCINFO))


class _Level1Gzip(warcwriter.GzippingWrapper):  # type: ignore[misc]
    """warcio's gzip wrapper at level 1 instead of its fixed 9: what warcio costs apart from
    its choice of level."""

    def __init__(self, out: BinaryIO) -> None:
        super().__init__(out)
        self.compressor = zlib.compressobj(1, zlib.DEFLATED, zlib.MAX_WBITS + 16)


def warcio_writer(level1: bool = False) -> Callable[[Capture], int]:
    """warcio's WARCWriter: request, response and metadata records, heads parsed by warcio."""
    warcwriter.GzippingWrapper = _Level1Gzip if level1 else _GZIP
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True, warc_version="1.1")

    def write(c: Capture) -> int:
        start = out.tell()
        ex = c.exchanges[-1]
        body = io.BytesIO(ex.response + ex.payload)
        response = writer.create_warc_record(ex.target_uri, "response", payload=body)
        sent = io.BytesIO(ex.request)
        request = writer.create_warc_record(ex.target_uri, "request", payload=sent)
        request.rec_headers.add_header("WARC-Concurrent-To", response.rec_headers["WARC-Record-ID"])
        lines = [f"via: {c.via}", f"depth: {c.depth}", f"fetchTimeMs: {round(c.elapsed_ms)}"]
        lines += [f"outlink: {link}" for link in c.outlinks]
        block = io.BytesIO(("\r\n".join(lines) + "\r\n").encode())
        meta = writer.create_warc_record(
            ex.target_uri, "metadata", payload=block, warc_content_type="application/warc-fields"
        )
        for record in (request, response, meta):
            record.rec_headers.add_header("WARC-IP-Address", ex.ip or "")
            writer.write_record(record)
        return out.tell() - start

    return write


def per_capture(write: Callable[[Capture], int], captures: list[Capture]) -> tuple[float, float]:
    """(CPU microseconds, bytes written) per capture, best of 5 rounds."""
    best, size = float("inf"), 0
    for _ in range(5):
        start = time.process_time()
        size = sum(write(c) for c in captures)
        best = min(best, time.process_time() - start)
    return best / len(captures) * 1e6, size / len(captures)


def main(count: int = 400) -> None:
    # A different payload per capture: compressing the same bytes again and again runs a third
    # faster (the CPU's branch predictors learn them), which no crawl sees.
    payloads = {
        "html": ([html(10_240, seed) for seed in range(count)], None),
        "gzip": ([gzipped(10_240, seed) for seed in range(count)], "gzip"),
    }
    writers: dict[str, Callable[[], Callable[[Capture], int]] | None] = {
        "warcio (level 9)": warcio_writer,
        "warcio (level 1)": lambda: warcio_writer(level1=True),
        "records only": lambda: direct(None),
        **{f"direct {level}": functools.partial(direct, level) for level in (0, 1, 2, 3, 6, 9)},
        **{f"isal {level}": other_deflate("isal.isal_zlib", level) for level in (0, 1, 2)},
        **{f"zlib-ng {level}": other_deflate("zlib_ng.zlib_ng", level) for level in (1, 2)},
    }
    for name, (pages, encoding) in payloads.items():
        captures = [capture(page, i, encoding) for i, page in enumerate(pages)]
        print(f"{name} payload ({len(pages[0])} B):")
        for label, make in writers.items():
            if make is None:
                print(f"  {label:>16}: not installed")
                continue
            micros, size = per_capture(make(), captures)
            bytes_out = f"{size:8.0f} B" if size > 3 else ""
            print(f"  {label:>16}: {micros:7.1f} us/capture {bytes_out}")


if __name__ == "__main__":
    main()
