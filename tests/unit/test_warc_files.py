"""WARC files (agents/sinks/warc/files.py): what they hold as warcio and FastWARC read them,
naming, rotation, durable close, and recovery after a crash."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from streamcrawl.agents.sinks.warc.files import (
    WarcFiles,
    complete_captures,
    members,
    recover,
    serials,
)
from streamcrawl.agents.sinks.warc.records import (
    PROFILES,
    WarcRecord,
    capture_records,
    encode,
    record_id,
)
from streamcrawl.schemas.records import Capture
from tests.warc_conformance import (
    DATE0,
    HTML,
    assert_valid,
    fastwarc_check,
    gzipped,
    page,
    problems,
    read,
    redirected,
    revisit_of,
    warcio_check,
)

NAME = re.compile(r"streamcrawl-\d{20}-(\d{5})-host-1\.warc\.gz")


def writer(directory: Path, **kw: object) -> WarcFiles:
    return WarcFiles(directory, hostname="host-1", **kw)  # type: ignore[arg-type]


def records(path: Path) -> list[dict[str, str]]:
    """The fields of each record of ``path``, in order."""
    return [dict(record.rec_headers.headers) for record, _ in read(path)]


def ids(path: Path) -> list[str]:
    return [fields["WARC-Record-ID"] for fields in records(path)]


def test_a_file_is_open_while_written_and_final_once_closed(tmp_path: Path) -> None:
    files = writer(tmp_path)
    assert files.current is None and files.write([]) == 0
    written = files.write([page(1), page(2)])
    assert files.current is not None and files.current.name.endswith(".warc.gz.open")
    assert list(tmp_path.iterdir()) == [files.current]
    files.sync()
    assert files.current.stat().st_size == written
    files.close()
    [path] = tmp_path.iterdir()
    assert NAME.fullmatch(path.name) and files.closed == (path,) and files.current is None
    assert path.stat().st_size == written
    files.close()  # idempotent
    assert list(tmp_path.iterdir()) == [path]
    assert_valid(path)


def test_nothing_written_creates_no_file(tmp_path: Path) -> None:
    with writer(tmp_path) as files:
        assert files.write([Capture(crawl_id="c1", origin="o", url="https://o/")]) == 0
    assert list(tmp_path.iterdir()) == [] and files.closed == ()


def test_what_warcio_reads_back(tmp_path: Path) -> None:
    original = page(1)
    captures = [
        original, redirected(2), gzipped(3),
        revisit_of(original, "server-not-modified", DATE0 + 100),
        revisit_of(original, "identical-payload-digest", DATE0 + 200),
    ]  # fmt: skip
    with writer(tmp_path, info={"operator": "tests", "isPartOf": "c1"}) as files:
        files.write(captures)
    [path] = files.closed
    assert_valid(path)
    assert [f["WARC-Type"] for f in records(path)] == [
        "warcinfo",
        *["request", "response", "metadata"],
        *["request", "response", "request", "response", "metadata"],  # a redirect
        *["request", "response", "metadata"],
        *["request", "revisit", "metadata"] * 2,
    ]
    expected = [r.id for c in captures for r in capture_records(c, "x")]
    assert ids(path)[1:] == expected
    with open(path, "rb") as fh:
        responses = [
            (r.rec_headers["WARC-Target-URI"], r.raw_stream.read(), r)
            for r in ArchiveIterator(fh)
            if r.rec_type == "response" and r.http_headers.get_statuscode() == "200"
        ]
    assert [(url, body) for url, body, _ in responses[:2]] == [
        ("https://example.org/p/1", HTML), ("https://example.org/r/2/", HTML),
    ]  # fmt: skip
    assert responses[2][1] == gzipped(3).exchanges[0].payload  # stored as it came


def test_a_gzip_payload_reads_back_raw_and_decoded(tmp_path: Path) -> None:
    capture = gzipped(1)
    with writer(tmp_path) as files:
        files.write([capture])
    for decode, expected in ((False, capture.exchanges[0].payload), (True, HTML)):
        with open(files.closed[0], "rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "response":
                    stream = record.content_stream() if decode else record.raw_stream
                    assert stream.read() == expected
    assert gzip.decompress(capture.exchanges[0].payload) == HTML


def test_revisit_and_metadata_fields_in_the_file(tmp_path: Path) -> None:
    original = page(1)
    again = revisit_of(original, "identical-payload-digest", DATE0 + 100)
    with writer(tmp_path) as files:
        files.write([original, again])
    fields = records(files.closed[0])
    response, revisit = fields[2], fields[5]
    assert revisit["WARC-Profile"] == PROFILES["identical-payload-digest"]
    assert revisit["WARC-Refers-To"] == response["WARC-Record-ID"]
    assert revisit["WARC-Refers-To-Date"] == response["WARC-Date"]
    assert revisit["WARC-Refers-To-Target-URI"] == response["WARC-Target-URI"]
    assert revisit["WARC-Payload-Digest"] == response["WARC-Payload-Digest"]
    assert revisit["WARC-Truncated"] == "length"
    assert fields[4]["WARC-Concurrent-To"] == revisit["WARC-Record-ID"]  # its request
    assert fields[6]["WARC-Concurrent-To"] == revisit["WARC-Record-ID"]  # its metadata
    assert fields[1]["WARC-Concurrent-To"] == response["WARC-Record-ID"]
    blocks = [block for record, block in read(files.closed[0]) if record.rec_type == "metadata"]
    assert blocks[0].split(b"\r\n")[:3] == [
        b"via: https://example.org/",
        b"depth: 2",
        b"fetchTimeMs: 13",
    ]
    assert b"outlink: https://other.example/x?a=1\r\n" in blocks[0]
    assert blocks[0].count(b"outlink: ") == 2


def test_the_same_capture_always_gets_the_same_ids(tmp_path: Path) -> None:
    captures = [page(1), redirected(2)]
    for name in ("a", "b"):
        with writer(tmp_path / name) as files:
            files.write(captures)
    [a], [b] = (list((tmp_path / n).iterdir()) for n in "ab")
    assert ids(a)[1:] == ids(b)[1:] and len(set(ids(a)[1:])) == 8
    assert ids(a)[0] != ids(b)[0]  # each file's own warcinfo
    response = records(a)[2]
    assert response["WARC-Record-ID"] == record_id(
        "c1", "https://example.org/p/1", DATE0 + 1, "response"
    )


def test_files_rotate_between_captures(tmp_path: Path) -> None:
    captures = [page(i) for i in range(12)]
    one = len(encode(capture_records(captures[0], "<urn:uuid:x>")))
    with writer(tmp_path, max_size=3 * one) as files:
        for capture in captures:  # one at a time, as the Kafka writer does
            files.write([capture])
    paths = sorted(tmp_path.iterdir())
    assert paths == sorted(files.closed) and len(paths) >= 4
    assert [int(NAME.fullmatch(p.name).group(1)) for p in paths] == list(range(len(paths)))  # type: ignore[union-attr]
    urls = []
    for path in paths:
        assert_valid(path)
        kinds = [f["WARC-Type"] for f in records(path)]
        assert kinds[0] == "warcinfo" and kinds[1:] == ["request", "response", "metadata"] * (
            (len(kinds) - 1) // 3
        )
        urls += [f["WARC-Target-URI"] for f in records(path) if f["WARC-Type"] == "response"]
        assert path.stat().st_size < 3 * one + one + 1_000  # closed once past max_size
    assert urls == [c.url for c in captures]


def test_a_big_write_rotates_too(tmp_path: Path) -> None:
    with writer(tmp_path, max_size=1) as files:
        files.write([page(1), page(2), page(3)])
    assert len(files.closed) == 3 and files.current is None
    assert [len(records(p)) for p in files.closed] == [4, 4, 4]


def test_sync_makes_what_was_written_readable_from_disk(tmp_path: Path) -> None:
    files = writer(tmp_path)
    files.write([page(1), page(2)])
    files.sync()
    assert files.current is not None
    with open(files.current, "rb") as fh:
        assert complete_captures(fh) == (files.current.stat().st_size, 2)
    files.close()


def test_an_exception_leaves_the_file_open_for_recovery(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), writer(tmp_path) as files:
        files.write([page(1)])
        raise RuntimeError("crash")
    [path] = tmp_path.iterdir()
    assert path.name.endswith(".open") and files.closed == ()
    assert recover(tmp_path) == [path.with_name(path.name.removesuffix(".open"))]


def crashed(tmp_path: Path, tail: bytes, captures: int = 3) -> Path:
    """A file left ``.open`` by a crash after ``captures`` synced captures and ``tail``."""
    files = writer(tmp_path)
    files.write([page(i) for i in range(captures)])
    files.sync()
    assert files.current is not None
    path = files.current
    with open(path, "ab") as fh:
        fh.write(tail)
    return path


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(encode(capture_records(page(9), "<urn:uuid:x>")[:2]), id="half-a-capture"),
        pytest.param(
            capture_records(page(9), "<urn:uuid:x>")[1].encode()[:300], id="half-a-member"
        ),
        pytest.param(b"\x1f\x8b\x08\x00garbage" + bytes(500), id="garbage"),
        pytest.param(bytes(4096), id="zeros"),
        pytest.param(gzip.compress(b"not a warc record"), id="not-warc"),
    ],
)
def test_recover_keeps_exactly_the_complete_captures(tmp_path: Path, tail: bytes) -> None:
    path = crashed(tmp_path, tail)
    synced = path.stat().st_size - len(tail)
    [closed] = recover(tmp_path)
    assert closed == path.with_name(path.name.removesuffix(".open"))
    assert list(tmp_path.iterdir()) == [closed] and closed.stat().st_size == synced
    assert_valid(closed)
    expected = [r.id for i in range(3) for r in capture_records(page(i), "x")]
    assert ids(closed)[1:] == expected


def test_recover_deletes_a_file_with_only_its_warcinfo(tmp_path: Path) -> None:
    path = crashed(tmp_path, b"", captures=1)
    with open(path, "r+b") as fh:
        warcinfo_end, kind = next(members(fh))
        assert kind == "warcinfo"
        fh.truncate(warcinfo_end)  # the crash came before the first capture was complete
        fh.seek(warcinfo_end)
        fh.write(capture_records(page(9), "<urn:uuid:x>")[0].encode())
    assert recover(tmp_path) == [] and list(tmp_path.iterdir()) == []


def test_recover_leaves_closed_files_alone(tmp_path: Path) -> None:
    with writer(tmp_path) as files:
        files.write([page(1)])
    before = files.closed[0].read_bytes()
    assert recover(tmp_path) == []
    assert files.closed[0].read_bytes() == before


def test_serials_continue_after_the_highest_in_the_directory(tmp_path: Path) -> None:
    with writer(tmp_path, max_size=1) as files:
        files.write([page(1), page(2)])
    crashed(tmp_path, b"junk", captures=1)  # serial 2, left .open
    (tmp_path / "streamcrawl-20260101000000000000-00041-other-host.warc.gz").touch()
    (tmp_path / "other-20260101000000000000-00077-host-1.warc.gz").touch()
    assert sorted(serials(tmp_path, "streamcrawl", "host-1")) == [0, 1, 2]
    recover(tmp_path)
    with writer(tmp_path) as files:
        files.write([page(3)])
    assert NAME.fullmatch(files.closed[0].name).group(1) == "00003"  # type: ignore[union-attr]


def test_the_hostname_is_made_fit_for_a_file_name(tmp_path: Path) -> None:
    with WarcFiles(tmp_path, hostname="a b/c:d", prefix="crawl.1") as files:
        files.write([page(1)])
    assert re.fullmatch(r"crawl\.1-\d{20}-00000-a_b_c_d\.warc\.gz", files.closed[0].name)
    assert dict(records(files.closed[0])[0])["WARC-Filename"] == files.closed[0].name


def test_the_level_changes_what_is_written(tmp_path: Path) -> None:
    sizes = []
    for level in (0, 9):
        with writer(tmp_path / str(level), level=level) as files:
            sizes.append(files.write([page(1)]))
        assert_valid(files.closed[0])
    assert sizes[1] < sizes[0] // 2


@pytest.mark.parametrize(
    "kw",
    [{"prefix": "a/b"}, {"prefix": ""}, {"max_size": 0}, {"level": 10}, {"info": {"a b": "c"}}],
)
def test_bad_arguments_are_refused(tmp_path: Path, kw: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        writer(tmp_path, **kw)


def broken_file(directory: Path, change: dict[str, str | None]) -> Path:
    """A closed file whose response record has the fields ``change`` says (None: removed)."""
    with writer(directory) as files:
        files.write([page(1)])
    path = files.closed[0]
    with open(path, "rb") as fh:
        ends = [end for end, _ in members(fh)]
    data = path.read_bytes()
    response = capture_records(page(1), records(path)[0]["WARC-Record-ID"])[1]
    fields = [(k, change.get(k, v)) for k, v in response.fields if change.get(k, v) is not None]
    fields += [(k, v) for k, v in change.items() if v is not None and k not in dict(fields)]
    broken = WarcRecord(tuple(fields), response.block).encode()  # type: ignore[arg-type]
    path.write_bytes(data[: ends[1]] + broken + data[ends[2] :])
    return path


@pytest.mark.parametrize(
    ("change", "found"),
    [
        ({"WARC-Payload-Digest": "sha1:" + "A" * 32}, "digest"),
        ({"WARC-IP-Address": None}, "lacks WARC-IP-Address"),
        ({"WARC-Date": "2026-12-05 06:00:00"}, "WARC-Date"),
        ({"WARC-Profile": PROFILES["server-not-modified"]}, "response has WARC-Profile"),
        ({"WARC-Record-ID": "urn:uuid:x"}, "is not <uri>"),
    ],
)
def test_the_checks_find_a_broken_record(
    tmp_path: Path, change: dict[str, str | None], found: str
) -> None:
    path = broken_file(tmp_path, change)
    assert any(found in problem for problem in problems(path)), problems(path)


def test_the_tools_find_a_wrong_payload_digest(tmp_path: Path) -> None:
    path = broken_file(tmp_path, {"WARC-Payload-Digest": "sha1:" + "A" * 32})
    with pytest.raises(AssertionError, match="payload digest failed"):
        warcio_check(path)
    with pytest.raises(AssertionError, match="PAYLOAD_FAIL"):
        fastwarc_check(path)
