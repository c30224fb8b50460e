"""The WARC records of a capture (agents/sinks/warc/records.py): ids, dates, digests, fields,
blocks and gzip members, without files."""

from __future__ import annotations

import base64
import hashlib
import uuid
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamcrawl.agents.sinks.warc.records import (
    CONFORMS_TO,
    PROFILES,
    WarcRecord,
    capture_records,
    compressed,
    encode,
    record_id,
    record_type,
    sha1_digest,
    software,
    uri,
    warc_date,
    warcinfo_record,
)
from streamcrawl.schemas.records import Capture
from tests.warc_conformance import (
    DATE0,
    HTML,
    exchange,
    gzipped,
    page,
    record_problems,
    redirected,
    revisit_of,
)

INFO = "<urn:uuid:11111111-2222-4333-8444-555555555555>"
NAMESPACE = uuid.UUID("9ea757d7-1f37-5e56-bfdf-7e6feecf05f8")


def fields(record: WarcRecord) -> dict[str, str]:
    return dict(record.fields)


def parsed(record: WarcRecord) -> tuple[str, list[tuple[str, str]], bytes]:
    """(version line, fields, block) of the record as ``encode`` writes it, read back."""
    data = zlib.decompress(record.encode(), wbits=31)
    head, _, rest = data.partition(b"\r\n\r\n")
    version, *lines = head.decode().split("\r\n")
    headers = [(n, v) for n, _, v in (line.partition(": ") for line in lines)]
    assert rest.endswith(b"\r\n\r\n")
    return version, headers, rest[:-4]


def test_record_ids_are_uuid5_of_crawl_uri_date_and_kind() -> None:
    rid = record_id("c1", "https://example.org/", 1.5, "response")
    name = "c1\nhttps://example.org/\n1.5\nresponse"
    assert rid == f"<urn:uuid:{uuid.uuid5(NAMESPACE, name)}>"
    assert rid == record_id("c1", "https://example.org/", 1.5, "response")
    others = {
        record_id("c2", "https://example.org/", 1.5, "response"),
        record_id("c1", "https://example.org/x", 1.5, "response"),
        record_id("c1", "https://example.org/", 1.5000001, "response"),
        record_id("c1", "https://example.org/", 1.5, "request"),
    }
    assert rid not in others and len(others) == 4


@given(st.text(), st.text(), st.floats(allow_nan=False), st.sampled_from(["request", "revisit"]))
def test_record_ids_match_uuid_uuid5(crawl: str, url: str, date: float, kind: str) -> None:
    name = f"{crawl}\n{url}\n{date!r}\n{kind}"
    assert record_id(crawl, url, date, kind) == f"<urn:uuid:{uuid.uuid5(NAMESPACE, name)}>"


@pytest.mark.parametrize(
    ("ts", "text"),
    [
        (0.0, "1970-01-01T00:00:00.000000Z"),
        (DATE0, "2026-12-05T06:00:00.123456Z"),
        (1_796_450_400.5, "2026-12-05T06:00:00.500000Z"),
        (951_782_400.000001, "2000-02-29T00:00:00.000001Z"),
    ],
)
def test_warc_dates(ts: float, text: str) -> None:
    assert warc_date(ts) == text


@given(st.binary())
def test_sha1_digest_is_labelled_base32(data: bytes) -> None:
    expected = "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()
    assert sha1_digest(data) == expected
    assert sha1_digest(data[:3], data[3:]) == expected


def test_a_page_is_request_response_metadata() -> None:
    capture = page(1)
    ex = capture.exchanges[0]
    request, response, meta = capture_records(capture, INFO)
    assert [fields(r)["WARC-Type"] for r in (request, response, meta)] == [
        "request", "response", "metadata",
    ]  # fmt: skip
    req, resp = fields(request), fields(response)
    assert req["WARC-Record-ID"] == record_id("c1", ex.target_uri, ex.date, "request")
    assert resp["WARC-Record-ID"] == record_id("c1", ex.target_uri, ex.date, "response")
    assert req["WARC-Concurrent-To"] == resp["WARC-Record-ID"]
    for f in (req, resp):
        assert f["WARC-Target-URI"] == ex.target_uri
        assert f["WARC-Date"] == "2026-12-05T06:00:01.123456Z"
        assert f["WARC-IP-Address"] == "192.0.2.7"
        assert f["WARC-Warcinfo-ID"] == INFO
    assert req["Content-Type"] == "application/http; msgtype=request"
    assert resp["Content-Type"] == "application/http; msgtype=response"
    assert request.block == (ex.request,) and response.block == (ex.response, ex.payload)
    assert req["WARC-Block-Digest"] == sha1_digest(ex.request)
    assert resp["WARC-Block-Digest"] == sha1_digest(ex.response + ex.payload)
    assert resp["WARC-Payload-Digest"] == sha1_digest(HTML)
    assert "WARC-Truncated" not in resp and "WARC-IP-Address" not in fields(meta)


def test_the_metadata_record() -> None:
    capture = page(1)
    *_, response, meta = capture_records(capture, INFO)
    f = fields(meta)
    assert f["Content-Type"] == "application/warc-fields"
    assert f["WARC-Concurrent-To"] == response.id
    assert f["WARC-Target-URI"] == capture.exchanges[-1].target_uri
    assert f["WARC-Date"] == fields(response)["WARC-Date"]
    assert meta.block == (
        b"via: https://example.org/\r\n"
        b"depth: 2\r\n"
        b"fetchTimeMs: 13\r\n"
        b"outlink: https://example.org/p/2\r\n"
        b"outlink: https://other.example/x?a=1\r\n",
    )
    assert f["WARC-Block-Digest"] == sha1_digest(meta.block[0])


def test_a_redirect_chain_has_a_pair_per_hop_and_one_metadata() -> None:
    capture = redirected(3)
    records = capture_records(capture, INFO)
    assert [fields(r)["WARC-Type"] for r in records] == [
        "request", "response", "request", "response", "metadata",
    ]  # fmt: skip
    assert [fields(r)["WARC-Target-URI"] for r in records[:4:2]] == [
        "http://example.org/r/3", "https://example.org/r/3/",
    ]  # fmt: skip
    assert fields(records[2])["WARC-Concurrent-To"] == records[3].id
    assert fields(records[4])["WARC-Concurrent-To"] == records[3].id
    assert fields(records[4])["WARC-Target-URI"] == "https://example.org/r/3/"
    assert len({r.id for r in records}) == 5


def test_a_capture_without_exchanges_has_no_records() -> None:
    assert capture_records(Capture(crawl_id="c1", origin="o", url="https://o/"), INFO) == []


@pytest.mark.parametrize("profile", ["server-not-modified", "identical-payload-digest"])
def test_a_revisit_refers_to_the_response_it_repeats(profile: str) -> None:
    original = page(1)
    original_response = capture_records(original, INFO)[1]
    again = revisit_of(original, profile, DATE0 + 86_400)
    request, revisit, meta = capture_records(again, INFO)
    f = fields(revisit)
    ex = again.exchanges[0]
    assert f["WARC-Type"] == "revisit" and f["WARC-Profile"] == PROFILES[profile]
    assert f["WARC-Record-ID"] == record_id("c1", ex.target_uri, ex.date, "revisit")
    assert f["WARC-Refers-To"] == original_response.id
    assert f["WARC-Refers-To-Target-URI"] == original.exchanges[0].target_uri
    assert f["WARC-Refers-To-Date"] == fields(original_response)["WARC-Date"]
    assert f["Content-Type"] == "application/http; msgtype=response"
    assert revisit.block == (ex.response,)  # the head only
    assert f["WARC-Block-Digest"] == sha1_digest(ex.response)
    assert fields(request)["WARC-Concurrent-To"] == revisit.id
    assert fields(meta)["WARC-Concurrent-To"] == revisit.id
    if profile == "identical-payload-digest":
        assert f["WARC-Payload-Digest"] == fields(original_response)["WARC-Payload-Digest"]
        assert f["WARC-Truncated"] == "length"
    else:
        assert "WARC-Payload-Digest" not in f and "WARC-Truncated" not in f


def test_a_truncated_payload_says_why() -> None:
    record = capture_records(page(1, truncated="length"), INFO)[1]
    assert fields(record)["WARC-Truncated"] == "length"


def test_every_record_conforms() -> None:
    original = page(1)
    captures = [
        original, redirected(2), gzipped(3), page(4, ip=None, truncated="time"),
        revisit_of(original, "server-not-modified", DATE0 + 9),
        revisit_of(original, "identical-payload-digest", DATE0 + 10),
    ]  # fmt: skip
    for capture in captures:
        for record in capture_records(capture, INFO):
            version, headers, block = parsed(record)
            problems = record_problems(version, headers, block)
            if fields(record).get("WARC-IP-Address") is None and record.get("WARC-Type") in (
                "request", "response",
            ):  # fmt: skip
                problems.remove(f"{record.get('WARC-Type')} of http(s) lacks WARC-IP-Address")
            assert problems == [], (record.fields, problems)


@pytest.mark.parametrize(
    ("name", "value", "found"),
    [
        ("WARC-Target-URI", "<https://example.org/>", "is not a bare uri"),
        ("WARC-Target-URI", "https://example.org/a b", "is not a bare uri"),
        ("WARC-Concurrent-To", "urn:uuid:x", "is not <uri>"),
        ("WARC-Date", "2026-12-05T06:00:00.1234567890Z", "WARC-Date"),
        ("WARC-IP-Address", "192.0.2.300", "WARC-IP-Address"),
        ("WARC-Truncated", "yes", "WARC-Truncated"),
        ("WARC-Block-Digest", "AAAA", "WARC-Block-Digest"),
        ("Content-Type", "text", "Content-Type"),
        ("WARC-Refers-To", "<urn:uuid:x>", "request has WARC-Refers-To"),
        ("WARC-Type", "request", "duplicate WARC-Type"),
    ],
)
def test_the_record_rules_find_a_broken_field(name: str, value: str, found: str) -> None:
    version, headers, block = parsed(capture_records(page(1), INFO)[0])
    headers = [(n, v) for n, v in headers if n != name or name == "WARC-Type"] + [(name, value)]
    problems = record_problems(version, headers, block)
    assert any(found in problem for problem in problems), problems


def test_a_hostile_url_cannot_break_a_header() -> None:
    url = "https://example.org/a b\r\nWARC-Type: response"
    capture = Capture(
        crawl_id="c1", origin="https://example.org", url=url, via="https://x/\n", outlinks=(url,),
        exchanges=(exchange(url, DATE0),),
    )  # fmt: skip
    request, _, meta = capture_records(capture, INFO)
    version, headers, block = parsed(request)
    target = "https://example.org/a%20b%0D%0AWARC-Type:%20response"
    assert dict(headers)["WARC-Target-URI"] == target
    assert [name for name, _ in headers].count("WARC-Type") == 1
    assert record_problems(version, headers, block) == []
    assert meta.block[0].decode().split("\r\n")[0] == "via: https://x/%0A"
    assert f"outlink: {target}\r\n".encode() in meta.block[0]
    # The record id is of the URL as given: a replay of it yields the same id.
    assert request.id == record_id("c1", url, DATE0, "request")


@pytest.mark.parametrize(
    ("value", "safe"),
    [
        ("https://example.org/a?b=c#d", "https://example.org/a?b=c#d"),
        ("https://example.org/é", "https://example.org/é"),
        ("https://example.org/a b", "https://example.org/a%20b"),
        ("https://example.org/\t\x00\x7f", "https://example.org/%09%00%7F"),
    ],
)
def test_uri_encodes_whitespace_and_controls(value: str, safe: str) -> None:
    assert uri(value) == safe


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n", False),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n", True),
        (b"HTTP/1.1 200 OK\r\ncontent-encoding:br\r\n\r\n", True),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\n\r\n", False),
        (b"HTTP/1.1 200 OK\r\nContent-Type: application/x-gzip\r\n\r\n", True),
        (b"HTTP/1.1 200 OK\r\nContent-Type: Application/GZIP; x=y\r\n\r\n", True),
        (b"HTTP/1.1 200 OK\r\nX-Content-Encoding: gzip\r\n\r\n", False),
    ],
)
def test_compressed_payloads_are_recognised(head: bytes, expected: bool) -> None:
    assert compressed(head) is expected


def test_each_record_is_one_gzip_member_and_compressed_payloads_are_stored() -> None:
    plain, packed = capture_records(page(1), INFO)[1], capture_records(gzipped(2), INFO)[1]
    assert not plain.compressed and packed.compressed
    for record in (plain, packed):
        inflate = zlib.decompressobj(wbits=31)
        assert inflate.decompress(record.encode(6)) == record.to_bytes()
        assert inflate.eof and inflate.unused_data == b""
    assert packed.encode(9) == zlib.compress(packed.to_bytes(), 0, wbits=31)
    assert len(plain.encode(6)) < len(plain.to_bytes()) // 3
    records = capture_records(page(1), INFO)
    assert encode(records, 1) == b"".join(r.encode(1) for r in records)


def test_the_encoded_record() -> None:
    record = capture_records(page(1), INFO)[0]
    version, headers, block = parsed(record)
    assert version == "WARC/1.1"
    assert headers[:-1] == list(record.fields)
    assert headers[-1] == ("Content-Length", str(len(block)))
    assert block == record.block[0]


def test_the_warcinfo_record() -> None:
    one = warcinfo_record(
        "x.warc.gz", date=DATE0, hostname="crawler-1",
        info={"operator": "Archive Team <a@example.org>", "isPartOf": "c1"},
    )  # fmt: skip
    two = warcinfo_record("x.warc.gz", date=DATE0, hostname="crawler-1")
    assert one.id != two.id and uuid.UUID(one.id[10:-1]).version == 4
    f = fields(one)
    assert (f["WARC-Type"], f["WARC-Filename"]) == ("warcinfo", "x.warc.gz")
    assert f["WARC-Date"] == warc_date(DATE0)
    assert f["Content-Type"] == "application/warc-fields"
    assert one.block[0].decode().split("\r\n") == [
        f"software: {software()}",
        "format: WARC File Format 1.1",
        f"conformsTo: {CONFORMS_TO}",
        "hostname: crawler-1",
        "operator: Archive Team <a@example.org>",
        "isPartOf: c1",
        "",
    ]
    assert software() == "streamcrawl/0.1.0" or software().startswith("streamcrawl/")
    assert record_problems(*parsed(one)) == []


@pytest.mark.parametrize("info", [{"bad name": "x"}, {"operator": "a\r\nb"}, {"": "x"}])
def test_warcinfo_fields_that_would_break_the_record_are_refused(info: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="warcinfo field"):
        warcinfo_record("x.warc.gz", date=DATE0, hostname="h", info=info)


def test_record_type_accepts_exactly_one_complete_record() -> None:
    data = capture_records(page(1), INFO)[1].to_bytes()
    assert record_type(data) == "response"
    assert record_type(data[:-1]) is None
    assert record_type(data[:-4] + b"X\r\n\r\n") is None  # longer than its Content-Length
    assert record_type(data + b"WARC/1.1\r\n") is None
    assert record_type(b"HTTP/1.1 200 OK\r\n\r\n") is None
    assert record_type(b"") is None
    assert record_type(data.replace(b"Content-Length: ", b"Content-Length: x")) is None
