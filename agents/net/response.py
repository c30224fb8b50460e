"""Reading a response: its Content-Type, Retry-After and headers, its status as an error, and
its body, decoded under a size cap (``agents.net.fetch`` for pages, ``agents.net.robots_fetch``
for robots.txt).

``read_body`` reads the body raw (sessions are made with ``auto_decompress=False``) and decodes
it here, so that the cap applies to the DECODED size and a decompression bomb costs at most the
cap in memory.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Mapping
from typing import Final

import aiohttp

from streamcrawl.agents.content.charset import BodyTooLarge, Decoder, decode_html
from streamcrawl.agents.errors import ErrorClass, FetchPermanent, FetchRetryable

READ_CHUNK: Final = 64 * 1024
# Where we sniff a body that came without a Content-Type (WHATWG MIME sniffing reads 512 bytes).
_SNIFF_BYTES: Final = 512
_HTML_SIGNATURES: Final = (b"<!doctype html", b"<html", b"<head", b"<body", b"<title", b"<meta")
# Media types whose body is decoded to text (and ``+xml`` ones).
TEXT_TYPES: Final = ("text/", "application/xhtml+xml", "application/xml")


def parse_content_type(value: str | None) -> tuple[str | None, str | None]:
    """``"Text/HTML; charset=UTF-8"`` -> ``("text/html", "UTF-8")``; missing parts are None."""
    if not value:
        return None, None
    media, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset":
            charset = val.strip().strip("\"'") or None
    return media.strip().lower() or None, charset


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After value: delta-seconds or an HTTP-date; None if invalid."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; obsolete formats may lack a zone
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def join_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Lower-case header names; values of repeated headers (a multidict) joined with ", "."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def looks_like_html(prefix: bytes) -> bool:
    """WHATWG-style sniff: does the body start (after whitespace/BOM) with an HTML tag?"""
    head = prefix[:_SNIFF_BYTES].lstrip(b"\xef\xbb\xbf \t\r\n\x0c").lower()
    return head.startswith(_HTML_SIGNATURES) or head.startswith(b"<!--")


async def read_body(
    resp: aiohttp.ClientResponse,
    cap: int,
    *,
    truncate: bool = False,
    raw_parts: list[bytes] | None = None,
) -> bytes:
    """Read and decode ``resp``'s body; ``BodyTooLarge`` once raw or decoded size passes ``cap``.

    With ``truncate`` (the robots fetch) the first ``cap`` decoded bytes are returned instead
    and the rest is not downloaded. ``raw_parts`` (a WARC capture) gets every chunk as it came
    off the connection, before decoding: nothing is read twice.
    """
    decoder = Decoder(resp.headers.get("Content-Encoding"), cap, truncate=truncate)
    parts: list[bytes] = []
    raw = 0
    async for chunk in resp.content.iter_chunked(READ_CHUNK):
        if raw_parts is not None:
            raw_parts.append(chunk)
        raw += len(chunk)
        if raw > cap and not truncate:
            raise BodyTooLarge
        parts.append(decoder.feed(chunk))
        if decoder.full:
            resp.close()  # the rest is of no use: do not download it
            return b"".join(parts)
    parts.append(decoder.flush())
    return b"".join(parts)


_RETRYABLE_STATUS = {408: ErrorClass.HTTP_408, 429: ErrorClass.HTTP_429}


def raise_for_status(resp: aiohttp.ClientResponse, url: str) -> None:
    """``FetchRetryable`` for 408, 429 and 5xx (with Retry-After), ``FetchPermanent`` for
    other 4xx; nothing for the rest."""
    status = resp.status
    if status == 408 or status == 429 or 500 <= status <= 599:
        retry_after = parse_retry_after(resp.headers.get("Retry-After"))
        raise FetchRetryable(
            f"HTTP {status} from {url}; retry later",
            error_class=_RETRYABLE_STATUS.get(status, ErrorClass.HTTP_5XX),
            status=status,
            retry_after=retry_after,
        )
    if 400 <= status <= 499:
        raise FetchPermanent(
            f"HTTP {status} from {url}", error_class=ErrorClass.HTTP_4XX, status=status
        )


def error_class_of(exc: BaseException) -> ErrorClass:
    """The class of a network error that ended a request (a timeout, DNS, connect...)."""
    if isinstance(exc, TimeoutError):  # includes aiohttp's ServerTimeoutError family
        return ErrorClass.TIMEOUT
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return ErrorClass.DNS
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ErrorClass.CONNECT
    if isinstance(exc, aiohttp.ServerDisconnectedError | ConnectionResetError):
        return ErrorClass.RESET
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ErrorClass.PAYLOAD
    return ErrorClass.NETWORK


# Decoding a multi-megabyte body takes milliseconds; off the loop it cannot stall other fetches.
_DECODE_IN_THREAD: Final = 512 * 1024


async def decode_text(body: bytes, header_charset: str | None) -> tuple[str, str]:
    """``body`` as text and the codec used (``decode_html``), off the loop when large."""
    if len(body) < _DECODE_IN_THREAD:
        return decode_html(body, header_charset)
    return await asyncio.to_thread(decode_html, body, header_charset)
