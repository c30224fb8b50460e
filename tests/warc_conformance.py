"""WARC/1.1 conformance of the files the tests write, and the sample captures they write.

``problems(path)`` reads a file with warcio and checks the WARC 1.1 rules a record must keep
(mandatory and forbidden fields per record type, field syntax, the HTTP record types,
revisit profiles, warc-fields blocks) and what our writer promises of a file (warcinfo first
and named by every record, unique ids, Concurrent-To inside the file, digests that verify).
The rule list follows what the unreleased ``warcio test`` command checks, written anew.
"""

from __future__ import annotations

import gzip
import ipaddress
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator

from streamcrawl.schemas.records import Capture, CaptureRevisit, Exchange
from tests.warc_tools import warcio_bin

BIN = Path(sys.executable).parent
TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z")
DIGEST = re.compile(r"[A-Za-z0-9-]+:[A-Za-z0-9/+=_-]+")
BRACKETED = ("WARC-Record-ID", "WARC-Concurrent-To", "WARC-Refers-To", "WARC-Warcinfo-ID")
URIS = ("WARC-Target-URI", "WARC-Refers-To-Target-URI")
PROFILE = "http://netpreserve.org/warc/1.1/revisit/"
HTTP_TYPES = {"request": "application/http;msgtype=request"} | {
    kind: "application/http;msgtype=response" for kind in ("response", "revisit")
}
COMMON = {"WARC-Record-ID", "Content-Length", "WARC-Date", "WARC-Type"}
HTTP_FORBIDDEN = {
    "WARC-Refers-To", "WARC-Refers-To-Target-URI", "WARC-Refers-To-Date", "WARC-Filename",
    "WARC-Profile",
}  # fmt: skip
RULES: dict[str, tuple[set[str], set[str]]] = {  # type -> (required, forbidden)
    "warcinfo": (COMMON | {"Content-Type"}, {"WARC-Refers-To", "WARC-Profile"}),
    "request": (COMMON | {"Content-Type", "WARC-Target-URI"}, HTTP_FORBIDDEN),
    "response": (COMMON | {"Content-Type", "WARC-Target-URI"}, HTTP_FORBIDDEN),
    "revisit": (COMMON | {"Content-Type", "WARC-Target-URI", "WARC-Profile"}, {"WARC-Filename"}),
    "metadata": (
        COMMON | {"Content-Type"},
        HTTP_FORBIDDEN - {"WARC-Refers-To"} | {"WARC-Payload-Digest"},
    ),
}


def problems(path: Path) -> list[str]:
    """Every rule ``path`` breaks, as ``<record id>: <what>``; [] when it conforms."""
    out: list[str] = []
    ids: list[str] = []
    links: list[tuple[str, str]] = []
    warcinfo = None
    for n, (record, block) in enumerate(read(path)):
        headers: list[tuple[str, str]] = record.rec_headers.headers
        fields = dict(headers)
        rid, kind = fields.get("WARC-Record-ID", f"#{n}"), fields.get("WARC-Type", "")
        out += [f"{rid}: {p}" for p in record_problems(record.rec_headers.protocol, headers, block)]
        if record.digest_checker.passed is False:
            out.append(f"{rid}: digest: {record.digest_checker.problems}")
        if n == 0:
            warcinfo = rid
            if kind != "warcinfo":
                out.append(f"{rid}: the first record is not a warcinfo")
            if fields.get("WARC-Filename") != path.name.removesuffix(".open"):
                out.append(f"{rid}: WARC-Filename is not the file's name")
        elif fields.get("WARC-Warcinfo-ID") != warcinfo:
            out.append(f"{rid}: WARC-Warcinfo-ID does not name the file's warcinfo")
        ids.append(rid)
        links += [(rid, value) for name, value in headers if name == "WARC-Concurrent-To"]
    out += [f"{rid}: duplicate record id" for rid in {i for i in ids if ids.count(i) > 1}]
    out += [f"{rid}: Concurrent-To {to} not in the file" for rid, to in links if to not in ids]
    return out


def read(path: Path) -> Iterator[tuple[Any, bytes]]:
    """Each record of ``path`` (digests checked as its block is read) with its block."""
    with open(path, "rb") as fh:
        for record in ArchiveIterator(fh, check_digests=True):
            yield record, record.raw_stream.read()


def record_problems(protocol: str, headers: list[tuple[str, str]], block: bytes) -> list[str]:
    """The rules one record breaks: version, field syntax, fields by type, HTTP, revisits."""
    fields = dict(headers)
    kind = fields.get("WARC-Type", "")
    out = [] if protocol == "WARC/1.1" else [f"version {protocol}"]
    names = [name for name, _ in headers]
    out += [
        f"duplicate {n}" for n in set(names) if names.count(n) > 1 and n != "WARC-Concurrent-To"
    ]
    out += [f"field name {n!r}" for n in names if not TOKEN.fullmatch(n)]
    for name, value in headers:
        out += field_problems(name, value)
    required, forbidden = RULES.get(kind, (COMMON, set()))
    out += [f"{kind} lacks {name}" for name in sorted(required - fields.keys())]
    out += [f"{kind} has {name}" for name in sorted(forbidden & fields.keys())]
    target = fields.get("WARC-Target-URI", "")
    if kind in HTTP_TYPES and target.startswith(("http:", "https:")):
        if fields.get("Content-Type", "").lower().replace("; ", ";") != HTTP_TYPES[kind]:
            out.append(f"{kind} Content-Type {fields.get('Content-Type')}")
        if "WARC-IP-Address" not in fields:
            out.append(f"{kind} of http(s) lacks WARC-IP-Address")
    if kind == "revisit":
        out += revisit_problems(fields)
    if fields.get("Content-Type") == "application/warc-fields":
        out += warc_fields_problems(block)
    return out


def field_problems(name: str, value: str) -> list[str]:
    if name in BRACKETED and not re.fullmatch(r"<[A-Za-z][A-Za-z0-9+.-]*:\S+>", value):
        return [f"{name} {value!r} is not <uri>"]
    if name in URIS and not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s<>]+", value):
        return [f"{name} {value!r} is not a bare uri"]
    if name in ("WARC-Date", "WARC-Refers-To-Date") and not DATE.fullmatch(value):
        return [f"{name} {value!r}"]
    if name == "Content-Length" and not value.isdigit():
        return [f"Content-Length {value!r}"]
    if name in ("WARC-Block-Digest", "WARC-Payload-Digest") and not DIGEST.fullmatch(value):
        return [f"{name} {value!r}"]
    if name == "WARC-Truncated" and value not in ("length", "time", "disconnect", "unspecified"):
        return [f"WARC-Truncated {value!r}"]
    if name == "Content-Type" and not re.fullmatch(
        rf"{TOKEN.pattern}/{TOKEN.pattern}(;.*)?", value
    ):
        return [f"Content-Type {value!r}"]
    if name == "WARC-IP-Address":
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return [f"WARC-IP-Address {value!r}"]
    return []


def revisit_problems(fields: dict[str, str]) -> list[str]:
    profile = fields.get("WARC-Profile", "")
    out = [] if profile.startswith(PROFILE) else [f"revisit profile {profile!r}"]
    if profile.endswith("/identical-payload-digest") and "WARC-Payload-Digest" not in fields:
        out.append("identical-payload-digest revisit lacks WARC-Payload-Digest")
    if profile.endswith("/server-not-modified") and "WARC-Payload-Digest" in fields:
        out.append("server-not-modified revisit has WARC-Payload-Digest")
    return out + [
        f"revisit lacks {name}"
        for name in ("WARC-Refers-To", "WARC-Refers-To-Target-URI", "WARC-Refers-To-Date")
        if name not in fields
    ]


def warc_fields_problems(block: bytes) -> list[str]:
    """application/warc-fields: UTF-8 lines ending CRLF, each ``name: value``."""
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError:
        return ["warc-fields not UTF-8"]
    if text and not text.endswith("\r\n"):
        return ["warc-fields does not end with CRLF"]
    return [
        f"warc-fields line {line!r}"
        for line in text.split("\r\n")[:-1]
        if "\n" in line or not TOKEN.fullmatch(line.partition(":")[0]) or ": " not in line
    ]


def check_with_tools(path: Path) -> None:
    """``warcio check`` and ``fastwarc check`` (block and payload digests) accept ``path``."""
    warcio_check(path)
    fastwarc_check(path)


def warcio_check(path: Path) -> None:
    command = [str(warcio_bin()), "check", "-v", str(path)]  # tests/warc_tools.py: why a venv
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def fastwarc_check(path: Path) -> None:
    """``fastwarc check`` verifies block digests; with ``--verify-payloads``, payload digests
    too, computing a revisit's over its (absent) payload, where WARC 1.1 makes the
    identical-payload-digest profile's the digest of the ORIGINAL payload: only there is
    PAYLOAD_FAIL right (warcio skips revisits' payload digests)."""
    command = [str(BIN / "fastwarc"), "check", "--quiet", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = path.with_name(path.name + ".fastwarc.txt")
    command = [str(BIN / "fastwarc"), "check", "--verify-payloads", "--quiet", "-o", str(report)]
    subprocess.run([*command, str(path)], capture_output=True, timeout=120)
    lines = report.read_text().splitlines()
    report.unlink()
    statuses = dict(line.rsplit(": ", 1) for line in lines)
    profiles = {
        dict(r.rec_headers.headers)["WARC-Record-ID"]: r.rec_headers.get_header("WARC-Profile")
        for r, _ in read(path)
    }
    assert statuses.keys() == profiles.keys(), (statuses, profiles)
    revisit = PROFILE + "identical-payload-digest"
    wrong = {
        rid: status
        for rid, status in statuses.items()
        if status not in ("OK, PAYLOAD_OK", "OK, PAYLOAD_NO_DIGEST")
        and not (status == "OK, PAYLOAD_FAIL" and profiles[rid] == revisit)
    }
    assert wrong == {}, f"fastwarc check --verify-payloads: {wrong}"


def assert_valid(path: Path) -> None:
    found = problems(path)
    assert found == [], found
    check_with_tools(path)


# --- sample captures ----------------------------------------------------------------------------

DATE0 = 1_796_450_400.123456  # 2026-12-05T06:00:00.123456Z
HTML = b"<!doctype html><title>t</title>" + b"<p>streamcrawl archives this page.</p>\n" * 40


def exchange(
    url: str,
    date: float,
    payload: bytes = HTML,
    *,
    status: str = "200 OK",
    headers: tuple[str, ...] = ("Content-Type: text/html; charset=utf-8",),
    ip: str | None = "192.0.2.7",
    truncated: Any = None,
) -> Exchange:
    """One exchange as the fetcher records it (a Content-Length of the stored payload)."""
    path = "/" + url.split("/", 3)[3] if url.count("/") >= 3 else "/"
    host = url.split("/")[2]
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: gzip, br\r\n\r\n"
    head = "".join(f"{h}\r\n" for h in headers)
    response = f"HTTP/1.1 {status}\r\n{head}Content-Length: {len(payload)}\r\n\r\n"
    return Exchange(
        target_uri=url, date=date, request=request.encode(), response=response.encode(),
        payload=payload, ip=ip, truncated=truncated,
    )  # fmt: skip


def page(i: int, *, crawl_id: str = "c1", payload: bytes = HTML, **kw: Any) -> Capture:
    """A page fetch: one exchange, a via, outlinks."""
    url = f"https://example.org/p/{i}"
    return Capture(
        crawl_id=crawl_id, origin="https://example.org", url=url, depth=2,
        via="https://example.org/", elapsed_ms=12.6,
        outlinks=(f"https://example.org/p/{i + 1}", "https://other.example/x?a=1"),
        exchanges=(exchange(url, DATE0 + i, payload, **kw),),
    )  # fmt: skip


def redirected(i: int) -> Capture:
    """A 301 hop, then the page."""
    first, final = f"http://example.org/r/{i}", f"https://example.org/r/{i}/"
    hop = exchange(
        first, DATE0 + i, b"", status="301 Moved Permanently", headers=(f"Location: {final}",)
    )
    return Capture(
        crawl_id="c1", origin="http://example.org", url=first, depth=1,
        exchanges=(hop, exchange(final, DATE0 + i + 0.25)),
    )  # fmt: skip


def gzipped(i: int) -> Capture:
    """A page that came Content-Encoding: gzip (the payload is stored as it came)."""
    body = gzip.compress(HTML, mtime=0)
    return page(i, payload=body, headers=("Content-Type: text/html", "Content-Encoding: gzip"))


def revisit_of(original: Capture, profile: str, date: float) -> Capture:
    """A later fetch of ``original``'s URL found unchanged: a 304 (server-not-modified) or the
    same body again (identical-payload-digest)."""
    first = original.exchanges[-1]
    if profile == "server-not-modified":
        again = exchange(first.target_uri, date, b"", status="304 Not Modified", headers=())
    else:
        again = exchange(first.target_uri, date, first.payload)
    return Capture(
        crawl_id=original.crawl_id, origin=original.origin, url=original.url,
        exchanges=(again,),
        revisit=CaptureRevisit(
            profile=profile,  # type: ignore[arg-type]
            refers_to_uri=first.target_uri, refers_to_date=first.date,
        ),
    )  # fmt: skip
