"""The CDXJ index of WARC files (agents/sinks/warc/index.py): SURT keys, fields, order,
offsets, and replayed duplicates dropped."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from streamcrawl.agents.sinks.warc.files import WarcFiles
from streamcrawl.agents.sinks.warc.index import cdxj_lines, surt
from streamcrawl.agents.sinks.warc.records import capture_records, sha1_digest
from tests.warc_conformance import BIN, DATE0, HTML, gzipped, page, redirected, revisit_of

FIELDS = ["url", "mime", "status", "digest", "length", "offset", "filename"]


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://www.archive.org/", "org,archive)/"),
        ("http://archive.org/", "org,archive)/"),
        ("http://archive.org", "org,archive)/"),
        ("http://archive.org/goo/", "org,archive)/goo"),
        ("http://archive.org/goo/?", "org,archive)/goo"),
        ("http://archive.org/goo/?b&a", "org,archive)/goo?a&b"),
        ("http://archive.org/goo/?a=2&b&a=1", "org,archive)/goo?a=1&a=2&b"),
        ("http://ARCHIVE.ORG/", "org,archive)/"),
        ("http://archive.org./", "org,archive)/"),
        ("http://www.archive.org:80/", "org,archive)/"),
        ("https://www.archive.org:80/", "org,archive:80)/"),
        ("http://www.archive.org:443/", "org,archive:443)/"),
        ("https://www.archive.org:443/", "org,archive)/"),
        ("http://www12.foo.com/", "com,foo)/"),
        ("http://www2foo.com/", "com,www2foo)/"),
        ("http://www2.www2foo.com/", "com,www2foo)/"),
        ("http://foo.www.com/", "com,www,foo)/"),
        ("http://example.com/foo?X=Y", "com,example)/foo?x=y"),
        ("https://www.example.com/Path/File.HTML#frag", "com,example)/path/file.html"),
        ("http://user:pw@example.com/", "com,example)/"),
        ("http://127.0.0.1:8080/a", "1,0,0,127:8080)/a"),
        ("http://[::1]/x", "[::1])/x"),
        ("https://example.org/caf%C3%A9?q=%20", "org,example)/caf%c3%a9?q=%20"),
        ("dns:archive.org", "dns:archive.org"),
        ("mailto:foo@example.com", "mailto:foo@example.com"),
    ],
)
def test_surt(url: str, key: str) -> None:
    assert surt(url) == key


def write(directory: Path, captures: list[object]) -> Path:
    with WarcFiles(directory, hostname="h") as files:
        files.write(captures)  # type: ignore[arg-type]
    [path] = files.closed
    return path


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[list[str], Path, Path]:
    """Two files: the second repeats a capture of the first (a replay after a crash)."""
    original = page(1)
    first = write(tmp_path / "a", [original, gzipped(2), redirected(3)])
    again = revisit_of(original, "identical-payload-digest", DATE0 + 86_400)
    second = write(tmp_path / "b", [page(1), page(4), again])
    return cdxj_lines([first, second]), first, second


def parse(line: str) -> tuple[str, str, dict[str, str]]:
    key, timestamp, data = line.split(" ", 2)
    return key, timestamp, json.loads(data)


def test_lines_are_sorted_with_the_pywb_fields(indexed: tuple[list[str], Path, Path]) -> None:
    lines = indexed[0]
    assert lines == sorted(lines)
    entries = [parse(line) for line in lines]
    assert [(key, e["url"], e["status"]) for key, _, e in entries] == [
        ("org,example)/p/1", "https://example.org/p/1", "200"),
        ("org,example)/p/1", "https://example.org/p/1", "200"),  # the revisit, a day later
        ("org,example)/p/2", "https://example.org/p/2", "200"),
        ("org,example)/p/4", "https://example.org/p/4", "200"),
        ("org,example)/r/3", "http://example.org/r/3", "301"),
        ("org,example)/r/3", "https://example.org/r/3/", "200"),
    ]
    for key, timestamp, entry in entries:
        no_type = entry["status"] == "301"  # the hop's response had no Content-Type
        assert list(entry) == [f for f in FIELDS if f != "mime" or not no_type]
        assert re.fullmatch(r"\d{14}", timestamp) and key == surt(entry["url"])
    assert [ts for _, ts, _ in entries[:2]] == ["20261205060001", "20261206060000"]
    assert entries[0][2]["mime"] == "text/html"  # without its charset parameter
    assert entries[0][2]["digest"] == sha1_digest(HTML).removeprefix("sha1:")
    assert entries[2][2]["digest"] == sha1_digest(gzipped(2).exchanges[0].payload)[5:]


def test_a_revisit_is_indexed_as_warc_revisit(indexed: tuple[list[str], Path, Path]) -> None:
    lines, _, second = indexed
    _, _, revisit = parse(lines[1])
    _, _, original = parse(lines[0])
    assert revisit["mime"] == "warc/revisit" and revisit["filename"] == second.name
    assert revisit["digest"] == original["digest"]


def test_a_replayed_capture_is_indexed_once(indexed: tuple[list[str], Path, Path]) -> None:
    lines, first, second = indexed
    entries = [parse(line)[2] for line in lines]
    page1 = [
        e for e in entries if e["url"] == "https://example.org/p/1" and e["mime"] != "warc/revisit"
    ]
    assert [e["filename"] for e in page1] == [first.name]  # the first copy, not the replay's
    assert sorted({e["filename"] for e in entries}) == sorted([first.name, second.name])
    assert len(cdxj_lines([second, first])) == len(lines)
    assert parse(cdxj_lines([second, first])[0])[2]["filename"] == second.name


def test_offsets_and_lengths_point_at_the_records(indexed: tuple[list[str], Path, Path]) -> None:
    lines, first, second = indexed
    by_name = {first.name: first, second.name: second}
    for line in lines:
        entry = parse(line)[2]
        path = by_name[entry["filename"]]
        offset, length = int(entry["offset"]), int(entry["length"])
        with open(path, "rb") as fh:
            fh.seek(offset)
            member = fh.read(length)
        record = next(iter(ArchiveIterator(_Bytes(member))))
        assert record.rec_type in ("response", "revisit")
        assert record.rec_headers["WARC-Target-URI"] == entry["url"]
        assert record.http_headers.get_statuscode() == entry["status"]


def test_offsets_and_lengths_agree_with_warcio_index(
    indexed: tuple[list[str], Path, Path],
) -> None:
    lines, first, second = indexed
    ours = {(e["filename"], e["offset"], e["length"]) for e in (parse(x)[2] for x in lines)}
    theirs = set()
    for path in (first, second):
        command = [str(BIN / "warcio"), "index", "-f", "warc-type,offset,length", str(path)]
        done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60)
        for row in map(json.loads, done.stdout.splitlines()):
            if row["warc-type"] in ("response", "revisit"):
                theirs.add((path.name, row["offset"], row["length"]))
    replayed = ours ^ theirs
    assert len(replayed) == 1  # warcio indexes the replayed page/1 response again
    [(name, _, _)] = replayed
    assert name == second.name


def test_only_responses_and_revisits_are_indexed(tmp_path: Path) -> None:
    path = write(tmp_path, [page(1)])
    assert len(cdxj_lines([path])) == 1
    assert len(capture_records(page(1), "<urn:uuid:x>")) == 3


class _Bytes:
    """A readable buffer for ArchiveIterator (io.BytesIO would do; this states the need)."""

    def __init__(self, data: bytes) -> None:
        self._data, self._pos = data, 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size < 0 else self._pos + size
        out, self._pos = self._data[self._pos : end], min(end, len(self._data))
        return out
