"""A report is published as values that each fit their topic: a page with 100,000 links once
made a 2.7 MB outcome the broker refused, and the URL was refetched every second forever."""

from __future__ import annotations

import msgspec
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcrawl.agents.net.stages import Report
from streamcrawl.agents.stream.messages import (
    MESSAGE_BYTES,
    RECORD_OVERHEAD,
    frontier_values,
    report_messages,
)
from streamcrawl.schemas.codec import decode, encode
from streamcrawl.schemas.records import (
    MAX_PAGE_LINKS,
    Capture,
    FrontierBatch,
    Outcome,
    Outlink,
    Page,
    UrlRef,
)
from tests.captures import capture

OWN, OTHER = "http://a.test", "http://b.test"
PARENT = OWN + "/links"


def outcome(**kw: object) -> Outcome:
    base: dict[str, object] = {
        "crawl_id": "c",
        "origin": OWN,
        "kind": "page",
        "seq": 3,
        "url": PARENT,
        "state": "fetched",
        "started_at": 1.0,
        "finished_at": 2.0,
    }
    return Outcome(**{**base, **kw})  # type: ignore[arg-type]


def page(body: str | None = None, links: tuple[Outlink, ...] = ()) -> Page:
    return Page(
        crawl_id="c",
        url=PARENT,
        final_url=PARENT,
        origin=OWN,
        status=200,
        headers={"x-big": "h" * 60_000},
        content_type="text/html",
        charset="utf-8",
        title="t",
        depth=0,
        fetched_at=1.0,
        elapsed_ms=1.0,
        body_sha256="0" * 64,
        body_bytes=0,
        outlinks=0,
        links=links,
        links_total=len(links),
        body=body,
    )


def refs(origin: str, n: int) -> tuple[UrlRef, ...]:
    return tuple(UrlRef(f"{origin}/page/{i:06d}", 1, PARENT) for i in range(n))


def test_100k_links_are_split_and_none_is_lost() -> None:
    own, other = refs(OWN, 100_000), refs(OTHER, 100_000)
    report = Report(
        outcome(),
        None,
        [
            FrontierBatch(crawl_id="c", origin=OWN, urls=own),
            FrontierBatch(crawl_id="c", origin=OTHER, urls=other),
        ],
    )
    msgs = report_messages(report, page_bytes=16 * 1024 * 1024)
    assert msgs.trimmed
    assert len(msgs.outcome) <= MESSAGE_BYTES
    frontier = frontier_values(msgs.batches)
    assert all(len(v) <= MESSAGE_BYTES for _, v in frontier)
    sent = decode("outcomes", msgs.outcome)
    assert sent.links and sent.seq == 3 and sent.state == "fetched"
    by_origin: dict[str, list[UrlRef]] = {OWN: list(sent.links), OTHER: []}
    for origin, value in frontier:
        batch = decode("frontier", value)
        assert batch.origin == origin  # keyed by the origin whose URLs it carries
        by_origin[origin].extend(batch.urls)
    assert by_origin[OWN] == list(own)  # in order: the outcome's share first
    assert by_origin[OTHER] == list(other)


def test_a_small_report_is_one_outcome_with_its_links() -> None:
    own = refs(OWN, 3)
    report = Report(outcome(), None, [FrontierBatch(crawl_id="c", origin=OWN, urls=own)])
    msgs = report_messages(report, page_bytes=1 << 20)
    assert not msgs.trimmed and not frontier_values(msgs.batches)
    assert decode("outcomes", msgs.outcome).links == own


def test_a_page_over_the_pages_limit_loses_its_body_then_its_headers() -> None:
    report = Report(outcome(), page(body="x" * 200_000))
    msgs = report_messages(report, page_bytes=150_000)
    sent = decode("pages", msgs.pages[0])
    assert msgs.trimmed and sent.body is None and sent.headers
    msgs = report_messages(report, page_bytes=20_000)
    sent = decode("pages", msgs.pages[0])
    assert sent.body is None and sent.headers == {} and len(msgs.pages[0]) <= 20_000


def test_a_robots_body_that_escapes_to_over_the_limit_is_cut_at_a_line_end() -> None:
    # 500 KiB of control characters: each becomes a 6-byte JSON escape.
    body = ("Disallow: /x\x01\x02\x03\n" * 30_000)[: 500 * 1024]
    report = Report(outcome(kind="robots", seq=-1, robots_status=200, robots_body=body))
    msgs = report_messages(report, page_bytes=1 << 20)
    sent = decode("outcomes", msgs.outcome)
    assert len(msgs.outcome) <= MESSAGE_BYTES and msgs.trimmed
    assert sent.robots_body and sent.robots_body.endswith("\n")
    assert body.startswith(sent.robots_body)


def test_a_plain_robots_body_of_500_kib_is_kept_whole() -> None:
    body = ("Disallow: /private/path\n" * 30_000)[: 500 * 1024]
    report = Report(outcome(kind="robots", seq=-1, robots_status=200, robots_body=body))
    msgs = report_messages(report, page_bytes=1 << 20)
    assert not msgs.trimmed
    assert msgspec.json.decode(msgs.outcome)["robots_body"] == body


def outlinks(n: int) -> tuple[Outlink, ...]:
    return tuple(Outlink(f"{OWN}/page/{i:06d}", f"anchor text {i}", ("ugc",)) for i in range(n))


def test_a_page_over_the_pages_limit_loses_its_body_then_links_from_the_end() -> None:
    links = outlinks(20_000)  # ~1.3 MB of links
    report = Report(outcome(), page(body="x" * 200_000, links=links))
    for limit in (1 << 20, 300_000, 70_000):
        msgs = report_messages(report, page_bytes=limit)
        sent = decode("pages", msgs.pages[0])
        assert msgs.trimmed and len(msgs.pages[0]) <= limit and sent.body is None
        assert 0 < len(sent.links) < len(links) and sent.links == links[: len(sent.links)]
        assert sent.links_truncated and sent.links_total == len(links)
        assert sent.headers  # links go before the headers
        assert len(msgs.pages[0]) > limit - RECORD_OVERHEAD - 200  # as many as fit, not fewer
    msgs = report_messages(report, page_bytes=20_000)  # the headers alone are over
    sent = decode("pages", msgs.pages[0])
    assert len(msgs.pages[0]) <= 20_000 and sent.headers == {} and sent.links_truncated
    assert sent.links == links[: len(sent.links)]


def test_a_page_whose_links_fit_keeps_them_all_and_untruncated() -> None:
    links = outlinks(1_000)
    report = Report(outcome(), page(body="x" * 200_000, links=links))
    sent = decode("pages", report_messages(report, page_bytes=150_000).pages[0])
    assert sent.body is None and sent.links == links and not sent.links_truncated


def test_the_most_links_a_record_may_list_fit_the_default_pages_topic() -> None:
    """The record's bound with 100-byte URLs and long anchor texts: 16 MiB (Settings'
    max_message_bytes) holds MAX_PAGE_LINKS links when the URLs are short, and the cut keeps
    any record under it when they are not."""
    long = tuple(
        Outlink(f"{OWN}/{'p' * 2000}/{i}", "é" * 256, ("nofollow", "ugc")) for i in range(10_000)
    )
    msgs = report_messages(Report(outcome(), page(links=long)), page_bytes=16 * 1024 * 1024)
    assert len(msgs.pages[0]) <= 16 * 1024 * 1024 and msgs.trimmed
    short = outlinks(MAX_PAGE_LINKS)
    msgs = report_messages(Report(outcome(), page(links=short)), page_bytes=16 * 1024 * 1024)
    assert not msgs.trimmed and decode("pages", msgs.pages[0]).links == short


def test_a_cut_page_passes_the_producers_own_size_check_with_the_longest_key() -> None:
    """aiokafka refuses a record whose estimate (key, value, framing) is over
    ``max_request_size``: a value of exactly the limit was refused (1,048,580 > 1,048,576)."""
    key = ("http://" + "h" * 1_000 + ":65535")[:1_024].encode()
    for p in (page(body="x" * 3_000_000), page(links=outlinks(100_000))):
        (value,) = report_messages(Report(outcome(), p), page_bytes=1 << 20).pages
        assert DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, []) <= 1 << 20


# --- captures (crawls with CrawlPolicy.warc) ---------------------------------------------------


def test_a_report_without_a_capture_sends_none() -> None:
    """Crawls that do not archive pay nothing: the stages hand no capture, nothing goes out."""
    msgs = report_messages(Report(outcome(), page()), page_bytes=1 << 20)
    assert msgs.captures == [] and not msgs.trimmed


def test_a_capture_that_fits_is_sent_whole() -> None:
    whole = capture("/", b"x" * 100_000, outlinks=(OWN + "/a",))
    msgs = report_messages(Report(outcome(), page(), capture=whole), page_bytes=1 << 20)
    assert msgs.captures == [encode(whole)] and not msgs.trimmed


def test_a_capture_over_the_limit_loses_payload_from_its_largest_exchange() -> None:
    """Never dropped: the largest payload is cut (WARC-Truncated: length), the others and
    every head stay as they were."""
    big, small = bytes(range(256)) * 4_000, b"y" * 20_000  # 1,024,000 and 20,000 bytes
    whole = capture("/", small, big)
    limit = 400_000
    msgs = report_messages(Report(outcome(), None, capture=whole), page_bytes=limit)
    (value,) = msgs.captures
    sent: Capture = decode("captures", value)
    assert msgs.trimmed and limit - RECORD_OVERHEAD - 16 <= len(value) <= limit - RECORD_OVERHEAD
    first, last = sent.exchanges
    assert first == whole.exchanges[0]  # the small one is whole
    assert last.truncated == "length" and big.startswith(last.payload)
    assert 0 < len(last.payload) < len(big)
    assert (last.request, last.response) == (
        whole.exchanges[1].request,
        whole.exchanges[1].response,
    )
    assert msgspec.structs.replace(sent, exchanges=()) == msgspec.structs.replace(
        whole, exchanges=()
    )


def test_a_capture_whose_payloads_alone_are_not_enough_loses_outlinks_from_the_end() -> None:
    links = tuple(f"{OWN}/{'p' * 1000}/{i}" for i in range(1_000))  # ~1 MB of outlinks
    whole = capture("/", b"z" * 500_000, outlinks=links)
    msgs = report_messages(Report(outcome(), None, capture=whole), page_bytes=600_000)
    (value,) = msgs.captures
    sent: Capture = decode("captures", value)
    assert len(value) <= 600_000 - RECORD_OVERHEAD
    assert sent.exchanges[0].payload == b"" and sent.exchanges[0].truncated == "length"
    assert 0 < len(sent.outlinks) < len(links) and sent.outlinks == links[: len(sent.outlinks)]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 400_000), min_size=1, max_size=6),
    limit=st.integers(40_000, 1_200_000),
)
def test_a_cut_capture_fits_and_keeps_prefixes_of_its_payloads(
    sizes: list[int], limit: int
) -> None:
    payloads = [bytes([i]) * n for i, n in enumerate(sizes)]
    whole = capture("/", *payloads)
    (value,) = report_messages(Report(outcome(), None, capture=whole), page_bytes=limit).captures
    assert len(value) <= limit - RECORD_OVERHEAD
    sent: Capture = decode("captures", value)
    assert len(sent.exchanges) == len(payloads)
    for before, after in zip(whole.exchanges, sent.exchanges, strict=True):
        assert before.payload.startswith(after.payload)
        cut = len(after.payload) < len(before.payload)
        assert (after.truncated == "length") == cut
        assert msgspec.structs.replace(after, payload=b"", truncated=None) == (
            msgspec.structs.replace(before, payload=b"")
        )
