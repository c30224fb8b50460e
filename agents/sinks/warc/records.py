"""The WARC/1.1 records of a crawl's captures: pure functions, no file I/O (docs/warc.md,
"Records").

A capture (``schemas.records.Capture``) becomes, per HTTP exchange, a ``request`` and a
``response`` record (the last one a ``revisit`` when the capture says so), then one
``metadata`` record. Record ids are derived from the capture (``record_id``), so writing the
same capture twice (a replay after a crash) yields the same ids. Each record is encoded as its
own gzip member (``WarcRecord.encode``), the layout every WARC reader and index expects.
"""

from __future__ import annotations

import hashlib
import re
import uuid
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from typing import Literal

from isal import isal_zlib

from streamcrawl.schemas.records import Capture, Exchange

RecordKind = Literal["request", "response", "revisit", "metadata"]

VERSION_LINE = "WARC/1.1"
FORMAT = "WARC File Format 1.1"
CONFORMS_TO = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
PROFILES = {
    "server-not-modified": "http://netpreserve.org/warc/1.1/revisit/server-not-modified",
    "identical-payload-digest": "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
}
HTTP_REQUEST = "application/http; msgtype=request"
# An extension field of request records (WARC 1.1 allows them): the request headers whose
# values were replaced by a fixed mark, lower-case, comma-separated.
REDACTED_FIELD = "WARC-Redacted-Headers"
HTTP_RESPONSE = "application/http; msgtype=response"
WARC_FIELDS = "application/warc-fields"

# Deflate level of every record, 0-9: 1-3 are ISA-L's levels (``isal``), 4-9 zlib's, 0 stores.
# Why 1, and what a higher level would cost: docs/warc.md, "Files", "gzip level" (measured by
# bench/warc_write.py).
DEFAULT_LEVEL = 1
_ISAL_LEVELS = range(1, isal_zlib.ISAL_BEST_COMPRESSION + 1)

# Fixed forever: uuid5(NAMESPACE_URL, "https://github.com/streamcrawl/streamcrawl/warc/record-id").
# Changing it changes every record id: a replay would no longer repeat the ids it repeats.
_NAMESPACE = uuid.UUID("9ea757d7-1f37-5e56-bfdf-7e6feecf05f8").bytes
# What may not appear raw in a header value: whitespace and controls (a URI is percent-encoded,
# so a CR or LF from a hostile URL can never end a header line).
_UNSAFE = re.compile(r"[\x00-\x20\x7f]")
_COMPRESSED_TYPES = {
    b"application/gzip",
    b"application/x-gzip",
    b"application/zip",
    b"application/zstd",
}
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_END = b"\r\n\r\n"
_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B32_PAIRS = [a + b for a in _B32 for b in _B32]  # 10 bits -> two letters
_B32_SHIFTS = range(150, -1, -10)


def record_id(crawl_id: str, target_uri: str, date: float, kind: str) -> str:
    """``<urn:uuid:...>``: a uuid5 of the crawl, the target URI, the exchange's date (its exact
    float) and the record kind (request/response/revisit/metadata). The same capture always
    yields the same ids, so a replayed capture repeats its records' ids (docs/warc.md, "Record
    ids and duplicates")."""
    # uuid.uuid5 spelled out, without its UUID object: cheaper, and run four times per capture
    # (tested equal).
    name = f"{crawl_id}\n{target_uri}\n{date!r}\n{kind}".encode()
    b = bytearray(hashlib.sha1(_NAMESPACE + name).digest()[:16])
    b[6] = (b[6] & 0x0F) | 0x50  # version 5
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = b.hex()
    return f"<urn:uuid:{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}>"


def warc_date(ts: float) -> str:
    """WARC 1.1 date of an epoch time: UTC, microseconds (``2026-12-05T06:00:00.123456Z``);
    the same float always gives the same string."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def sha1_digest(*parts: bytes) -> str:
    """``sha1:`` + base32 of the parts' concatenation: the labelled digest that warcio,
    Heritrix and wget write."""
    h = hashlib.sha1()
    for part in parts:
        h.update(part)
    # base64.b32encode spelled out for 20 bytes (160 bits: 32 letters, no padding): it is pure
    # Python, and this costs two thirds of it, four times per capture (tested equal).
    n = int.from_bytes(h.digest())
    return "sha1:" + "".join([_B32_PAIRS[(n >> shift) & 0x3FF] for shift in _B32_SHIFTS])


def uri(value: str) -> str:
    """``value`` safe as a header value: whitespace and controls percent-encoded (a crawled URL
    has none; this keeps a hostile one from breaking the record)."""
    if value.isprintable() and " " not in value:  # the fast path: one C scan
        return value
    return _UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", value)


def compressed(head: bytes) -> bool:
    """Whether the payload of the HTTP response ``head`` is compressed already: a
    Content-Encoding other than identity, or a gzip/zip/zstd media type (a sitemap .gz).
    Its record is then stored at gzip level 0, which costs a copy instead of a futile
    compression (docs/warc.md, "Files")."""
    lower = head.lower()
    return _header(lower, b"content-encoding") not in (b"", b"identity") or (
        _header(lower, b"content-type").split(b";")[0].strip() in _COMPRESSED_TYPES
    )


def _header(lower_head: bytes, name: bytes) -> bytes:
    """The value of the first header ``name`` (lowercase) of a lowercased head; b"": none."""
    start = lower_head.find(b"\n" + name + b":")
    if start < 0:
        return b""
    start += len(name) + 2
    end = lower_head.find(b"\n", start)
    return lower_head[start : end if end >= 0 else None].strip()


@dataclass(frozen=True, slots=True)
class WarcRecord:
    """One WARC record: its named fields in order, without ``Content-Length`` (``encode`` adds
    it), its block as parts, and whether the block is mostly compressed data already."""

    fields: tuple[tuple[str, str], ...]
    block: tuple[bytes, ...]
    compressed: bool = False

    def get(self, name: str) -> str | None:
        """The first value of field ``name`` (exact case); None: absent."""
        return next((value for key, value in self.fields if key == name), None)

    @property
    def id(self) -> str:
        return self.get("WARC-Record-ID") or ""

    def to_bytes(self) -> bytes:
        """The record, uncompressed: version line, fields, Content-Length, block, CRLF CRLF."""
        length = sum(map(len, self.block))
        head = "".join([f"{name}: {value}\r\n" for name, value in self.fields])
        head = f"{VERSION_LINE}\r\n{head}Content-Length: {length}\r\n\r\n"
        return b"".join((head.encode(), *self.block, _END))

    def encode(self, level: int = DEFAULT_LEVEL) -> bytes:
        """The record as one gzip member at ``level`` (``DEFAULT_LEVEL``), stored when
        ``compressed``."""
        if self.compressed or level == 0:
            return zlib.compress(self.to_bytes(), 0, wbits=31)
        if level in _ISAL_LEVELS:
            return bytes(isal_zlib.compress(self.to_bytes(), level, wbits=31))
        return zlib.compress(self.to_bytes(), level, wbits=31)


def encode(records: Iterable[WarcRecord], level: int = DEFAULT_LEVEL) -> bytes:
    """The records, each its own gzip member, concatenated."""
    return b"".join([record.encode(level) for record in records])


def capture_records(capture: Capture, warcinfo_id: str) -> list[WarcRecord]:
    """The records of one capture, in order: request and response per exchange (the last
    response a revisit when ``capture.revisit``), then its metadata record. Every record names
    ``warcinfo_id`` (the warcinfo of the file it goes into). A capture without exchanges has
    no records."""
    out: list[WarcRecord] = []
    date = ""
    last = len(capture.exchanges) - 1
    for i, exchange in enumerate(capture.exchanges):
        date = warc_date(exchange.date)
        if i == last and capture.revisit is not None:
            answer = _revisit(capture, exchange, date, warcinfo_id)
        else:
            answer = _response(capture.crawl_id, exchange, date, warcinfo_id)
        out += [_request(capture.crawl_id, exchange, date, answer.id, warcinfo_id), answer]
    if out:
        out.append(_metadata(capture, date, out[-1].id, warcinfo_id))
    return out


def _common(
    kind: RecordKind, rid: str, date: str, exchange: Exchange, warcinfo_id: str
) -> list[tuple[str, str]]:
    fields = [
        ("WARC-Type", kind),
        ("WARC-Record-ID", rid),
        ("WARC-Date", date),
        ("WARC-Target-URI", uri(exchange.target_uri)),
        ("WARC-Warcinfo-ID", warcinfo_id),
    ]
    if exchange.ip and kind != "metadata":
        fields.append(("WARC-IP-Address", uri(exchange.ip)))
    return fields


def _request(
    crawl_id: str, exchange: Exchange, date: str, answer_id: str, warcinfo_id: str
) -> WarcRecord:
    rid = record_id(crawl_id, exchange.target_uri, exchange.date, "request")
    fields = _common("request", rid, date, exchange, warcinfo_id)
    fields += [
        ("WARC-Concurrent-To", answer_id),
        ("WARC-Block-Digest", sha1_digest(exchange.request)),
        ("Content-Type", HTTP_REQUEST),
    ]
    if exchange.redacted:
        # The block holds these request headers' values as a fixed mark, not as sent
        # (credentials and cookies: docs/requests.md); a reader must not replay them.
        fields.append((REDACTED_FIELD, ", ".join(exchange.redacted)))
    return WarcRecord(tuple(fields), (exchange.request,))


def _response(crawl_id: str, exchange: Exchange, date: str, warcinfo_id: str) -> WarcRecord:
    rid = record_id(crawl_id, exchange.target_uri, exchange.date, "response")
    fields = _common("response", rid, date, exchange, warcinfo_id)
    fields += [
        ("WARC-Block-Digest", sha1_digest(exchange.response, exchange.payload)),
        ("WARC-Payload-Digest", sha1_digest(exchange.payload)),
        ("Content-Type", HTTP_RESPONSE),
    ]
    if exchange.truncated is not None:
        fields.append(("WARC-Truncated", exchange.truncated))
    block = (exchange.response, exchange.payload)
    return WarcRecord(tuple(fields), block, bool(exchange.payload) and compressed(block[0]))


def _revisit(capture: Capture, exchange: Exchange, date: str, warcinfo_id: str) -> WarcRecord:
    """The response head only: the payload is left out (WARC-Truncated: length when there was
    one), as the revisit profiles allow and Heritrix does."""
    revisit = capture.revisit
    assert revisit is not None
    rid = record_id(capture.crawl_id, exchange.target_uri, exchange.date, "revisit")
    refers_to = record_id(
        capture.crawl_id, revisit.refers_to_uri, revisit.refers_to_date, "response"
    )
    fields = _common("revisit", rid, date, exchange, warcinfo_id)
    fields += [
        ("WARC-Profile", PROFILES[revisit.profile]),
        ("WARC-Refers-To", refers_to),
        ("WARC-Refers-To-Target-URI", uri(revisit.refers_to_uri)),
        ("WARC-Refers-To-Date", warc_date(revisit.refers_to_date)),
        ("WARC-Block-Digest", sha1_digest(exchange.response)),
    ]
    if revisit.profile == "identical-payload-digest":
        fields.append(("WARC-Payload-Digest", sha1_digest(exchange.payload)))
    fields.append(("Content-Type", HTTP_RESPONSE))
    if exchange.payload:
        fields.append(("WARC-Truncated", "length"))
    return WarcRecord(tuple(fields), (exchange.response,))


def _metadata(capture: Capture, date: str, answer_id: str, warcinfo_id: str) -> WarcRecord:
    """``via``, ``depth`` (hops from the seed; not ``hopsFromSeed``, which is a string of hop
    types this crawl does not track), ``fetchTimeMs`` and one ``outlink`` per outlink."""
    last = capture.exchanges[-1]
    rid = record_id(capture.crawl_id, last.target_uri, last.date, "metadata")
    lines = [f"via: {uri(capture.via)}\r\n"] if capture.via else []
    lines.append(f"depth: {capture.depth}\r\n")
    lines.append(f"fetchTimeMs: {round(capture.elapsed_ms)}\r\n")
    links = "".join(capture.outlinks)
    safe = links.isprintable() and " " not in links  # one scan for all, not one per link
    lines += [f"outlink: {link if safe else uri(link)}\r\n" for link in capture.outlinks]
    block = "".join(lines).encode()
    fields = _common("metadata", rid, date, last, warcinfo_id)
    fields += [
        ("WARC-Concurrent-To", answer_id),
        ("WARC-Block-Digest", sha1_digest(block)),
        ("Content-Type", WARC_FIELDS),
    ]
    return WarcRecord(tuple(fields), (block,))


@cache
def software() -> str:
    """``streamcrawl/<installed version>`` (``0+unknown`` when run from an uninstalled tree)."""
    try:
        return f"streamcrawl/{metadata.version('streamcrawl')}"
    except metadata.PackageNotFoundError:
        return "streamcrawl/0+unknown"


def warcinfo_record(
    filename: str, *, date: float, hostname: str, info: Mapping[str, str] | None = None
) -> WarcRecord:
    """The warcinfo record that opens the file ``filename``, with a fresh uuid4 id.

    Its fields: ``software``, ``format``, ``conformsTo``, ``hostname``, then ``info`` in order
    (e.g. ``operator``, ``isPartOf`` for the crawl ids). Raises ValueError when an ``info``
    name is not a token or a value holds a control character (it would break the record).
    """
    check_info(info or {})
    fields = {
        "software": software(),
        "format": FORMAT,
        "conformsTo": CONFORMS_TO,
        "hostname": hostname,
        **(info or {}),
    }
    block = "".join(f"{name}: {value}\r\n" for name, value in fields.items()).encode()
    header = (
        ("WARC-Type", "warcinfo"),
        ("WARC-Record-ID", f"<urn:uuid:{uuid.uuid4()}>"),
        ("WARC-Date", warc_date(date)),
        ("WARC-Filename", filename),
        ("WARC-Block-Digest", sha1_digest(block)),
        ("Content-Type", WARC_FIELDS),
    )
    return WarcRecord(header, (block,))


def check_info(info: Mapping[str, str]) -> None:
    """Raise ValueError, naming the field, when ``info`` cannot go into a warcinfo record."""
    for name, value in info.items():
        if not _TOKEN.fullmatch(name):
            raise ValueError(f"warcinfo field name {name!r}: use letters, digits and -_.")
        if re.search(r"[\x00-\x1f\x7f]", value):
            raise ValueError(f"warcinfo field {name}: remove control characters from its value")


def record_type(data: bytes) -> str | None:
    """The WARC-Type of ``data`` (one decompressed gzip member) when it is exactly one
    complete WARC/1.x record (its block as long as its Content-Length, then CRLF CRLF);
    None otherwise."""
    if not data.startswith(b"WARC/1."):
        return None
    end = data.find(_END)
    if end < 0:
        return None
    fields = dict(_field(line) for line in data[:end].split(b"\r\n")[1:])
    try:
        length = int(fields.get(b"content-length", b"-1"))
    except ValueError:
        return None
    if length < 0 or len(data) != end + 4 + length + 4 or not data.endswith(_END):
        return None
    kind = fields.get(b"warc-type")
    return kind.decode("ascii", "replace") if kind else None


def _field(line: bytes) -> tuple[bytes, bytes]:
    name, _, value = line.partition(b":")
    return name.strip().lower(), value.strip()
