"""The Kafka messages of one report, each within its topic's message size.

A page with 100,000 links made one outcome of 2.7 MB; the broker refused it
(``MessageSizeTooLargeError``), the URL stayed at its queue head and was fetched again every
second, without end. So a report is cut to size before it is sent:

- the outcome carries as many of its own origin's links as fit in ``MESSAGE_BYTES``; the rest
  go to ``frontier`` as batches of that same origin (published, like every other batch,
  before the outcome, so nothing the page produced is lost once the outcome is applied);
- the batches for ``frontier`` stay unencoded (``Messages.batches``): the fetch service merges
  those of many reports (``agents.stream.links``) before ``frontier_values`` encodes them, a
  batch split into several when it does not fit, or holds more than ``MAX_BATCH_URLS`` URLs
  (the decoder refuses a bigger one);
- a robots.txt body that does not fit (JSON escapes can triple it) is cut at a line end;
- a page over ``page_bytes`` loses its body, then the links at the end of its ``links``
  (``links_truncated`` set), then its headers: the page row and its state are kept, neither is
  worth the crawl looping on it;
- a capture (``CrawlPolicy.warc``) over ``page_bytes`` has its largest payloads cut, each then
  marked ``truncated="length"`` (the WARC-Truncated its records carry), then its outlinks: the
  capture and every exchange of it are always sent (``_fit_capture``).

No I/O and no Faust: ``report_messages`` is pure, the fetch service sends what it returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final

import msgspec

from streamcrawl.agents.net.stages import Report
from streamcrawl.schemas.codec import encode
from streamcrawl.schemas.records import (
    MAX_BATCH_URLS,
    Capture,
    Exchange,
    FrontierBatch,
    Outcome,
    Outlink,
    Page,
    UrlRef,
)

# Kafka's default ``max.message.bytes`` is 1 MiB (+12); the topics other than ``pages`` keep
# it, and a record batch adds its own framing: keep each value well under it.
MESSAGE_BYTES: Final = 900 * 1024
_LINK_OVERHEAD: Final = 1  # the comma between two encoded links
# What a record adds to its value in the producer's size check against ``max_request_size``
# (= the pages topic's ``max.message.bytes``): the key (an origin, at most 1,024 bytes), and
# aiokafka's estimate of the batch header and record framing (61 + 21 bytes + varints).
RECORD_OVERHEAD: Final = 2048

_encode_ref = msgspec.json.Encoder().encode


@dataclass
class Messages:
    """What to send, in order: ``pages``, ``captures`` and ``batches`` first, the outcome
    last."""

    outcome: bytes
    origin: str
    pages: list[bytes] = field(default_factory=list)
    captures: list[bytes] = field(default_factory=list)  # a crawl with ``CrawlPolicy.warc``
    batches: list[FrontierBatch] = field(default_factory=list)  # for ``frontier``, unencoded
    trimmed: bool = False  # something did not fit and was split or cut


def report_messages(
    report: Report, *, page_bytes: int, message_bytes: int = MESSAGE_BYTES
) -> Messages:
    """The values a report is published as, each at most its topic's limit (``page_bytes``
    less ``RECORD_OVERHEAD`` for ``pages`` and ``captures``, ``message_bytes`` for the
    others)."""
    outcome = report.outcome
    own = [ref for b in report.batches if b.origin == outcome.origin for ref in b.urls]
    out = Messages(outcome=b"", origin=outcome.origin)
    robots_cut = False
    if outcome.robots_body is not None:
        outcome, robots_cut = _fit_robots(outcome, message_bytes)
    out.outcome, rest = _outcome_value(outcome, own, message_bytes)
    out.trimmed = robots_cut or bool(rest)
    out.batches = [b for b in report.batches if b.origin != outcome.origin and b.urls]
    if rest:
        out.batches.append(
            FrontierBatch(crawl_id=outcome.crawl_id, origin=outcome.origin, urls=rest)
        )
    if report.page is not None:
        page, cut = _fit_page(report.page, page_bytes - RECORD_OVERHEAD)
        out.pages.append(page)
        out.trimmed |= cut
    if report.capture is not None:
        capture, cut = _fit_capture(report.capture, page_bytes - RECORD_OVERHEAD)
        out.captures.append(capture)
        out.trimmed |= cut
    return out


def frontier_values(
    batches: Iterable[FrontierBatch], message_bytes: int = MESSAGE_BYTES
) -> list[tuple[str, bytes]]:
    """``batches`` encoded for ``frontier``: (origin, value) pairs in order, a batch split
    into several of the same origin where it is over ``message_bytes`` or ``MAX_BATCH_URLS``."""
    return [(b.origin, part) for b in batches for part in _split(b, message_bytes)]


def _outcome_value(
    outcome: Outcome, links: list[UrlRef], limit: int
) -> tuple[bytes, tuple[UrlRef, ...]]:
    """The outcome with as many ``links`` as fit (the others are returned)."""
    if links:
        outcome = msgspec.structs.replace(outcome, links=(*outcome.links, *links))
    whole = encode(outcome)
    if len(whole) <= limit:  # nearly always: one encoding, no link measured alone
        return whole, ()
    links = list(outcome.links)
    room = limit - len(encode(msgspec.structs.replace(outcome, links=())))
    kept = _take(links, room)
    value = encode(msgspec.structs.replace(outcome, links=tuple(links[:kept])))
    return value, tuple(links[kept:])


def _take(refs: Iterable[UrlRef | Outlink | str], room: int) -> int:
    """How many of ``refs`` (from the start) fit in ``room`` encoded bytes, as a JSON array."""
    used = n = 0
    for ref in refs:
        used += len(_encode_ref(ref)) + _LINK_OVERHEAD
        if used > room:
            break
        n += 1
    return n


def _split(batch: FrontierBatch, limit: int) -> Iterator[bytes]:
    """``batch`` as one or more encoded batches of the same origin, each within ``limit`` and
    of at most ``MAX_BATCH_URLS`` URLs."""
    whole = encode(batch)
    if (len(whole) <= limit and len(batch.urls) <= MAX_BATCH_URLS) or len(batch.urls) <= 1:
        yield whole
        return
    room = limit - len(encode(msgspec.structs.replace(batch, urls=())))
    urls = batch.urls
    while urls:
        n = max(1, min(MAX_BATCH_URLS, _take(urls, room)))
        yield encode(msgspec.structs.replace(batch, urls=urls[:n]))
        urls = urls[n:]


def _fit_robots(outcome: Outcome, limit: int) -> tuple[Outcome, bool]:
    """Cut the robots.txt body at a line end until the outcome fits (it is only ever over for
    a body full of characters JSON escapes or invalid bytes decoded as U+FFFD); also whether
    it was cut."""
    body = outcome.robots_body or ""
    size = len(encode(outcome))
    cut = False
    while size > limit and body:
        body = body[: int(len(body) * limit / size * 0.99)]
        end = max(body.rfind("\n"), body.rfind("\r"))
        body = body[: end + 1] if end >= 0 else ""
        outcome = msgspec.structs.replace(outcome, robots_body=body)
        size, cut = len(encode(outcome)), True
    return outcome, cut


def _fit_page(page: Page, limit: int) -> tuple[bytes, bool]:
    """The encoded page; without its body, then with fewer links, then without its headers,
    while it is over ``limit``."""
    value = encode(page)
    if len(value) <= limit:
        return value, False
    page = msgspec.structs.replace(page, body=None)
    value = encode(page)
    if len(value) > limit:
        fitted = _fit_links(page, limit)
        if len(value := encode(fitted)) > limit:  # the headers alone are over
            value = encode(_fit_links(msgspec.structs.replace(page, headers={}), limit))
    return value, True


def _fit_links(page: Page, limit: int) -> Page:
    """``page`` with as many of its first links as fit in ``limit`` bytes (all of them if
    they do); ``links_truncated`` once one is left out."""
    bare = msgspec.structs.replace(page, links=(), links_truncated=True)
    n = _take(page.links, limit - len(encode(bare)))
    if n == len(page.links):
        return page
    return msgspec.structs.replace(bare, links=page.links[:n])


def _fit_capture(capture: Capture, limit: int) -> tuple[bytes, bool]:
    """The encoded capture within ``limit`` bytes, and whether anything was cut: the largest
    payload first, as often as needed (each cut one marked ``truncated="length"``), then the
    outlinks from the end. Every exchange stays, its request and response heads whole, so
    heads alone over ``limit`` leave it over: the broker refuses the report, which the fetch
    service then publishes as a failed attempt (no loop).
    """
    value = encode(capture)
    if len(value) <= limit:
        return value, False
    exchanges = list(capture.exchanges)
    while len(value) > limit and any(x.payload for x in exchanges):
        i = max(range(len(exchanges)), key=lambda j: len(exchanges[j].payload))
        exchanges[i] = _cut_payload(exchanges[i], len(value) - limit)
        value = encode(msgspec.structs.replace(capture, exchanges=tuple(exchanges)))
    capture = msgspec.structs.replace(capture, exchanges=tuple(exchanges))
    if len(value) > limit and capture.outlinks:
        room = limit - len(encode(msgspec.structs.replace(capture, outlinks=())))
        n = _take(capture.outlinks, room)
        capture = msgspec.structs.replace(capture, outlinks=capture.outlinks[:n])
        value = encode(capture)
    return value, True


def _cut_payload(exchange: Exchange, over: int) -> Exchange:
    """``exchange`` with ``over`` encoded bytes less payload (base64: 4 characters per 3
    bytes), or none at all, marked ``truncated="length"``."""
    keep = max(0, len(exchange.payload) - (over * 3 + 3) // 4 - 3)
    return msgspec.structs.replace(exchange, payload=exchange.payload[:keep], truncated="length")
