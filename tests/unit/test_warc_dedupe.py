"""Digest dedupe of page assets (agents/sinks/warc/dedupe.py): an asset whose payload the writer
archived already is written as an ``identical-payload-digest`` revisit of that response; pages,
errors, truncated bodies, other crawls and replays of the same capture are not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamcrawl.agents.sinks.warc.dedupe import PayloadDigests
from streamcrawl.agents.sinks.warc.files import WarcFiles
from streamcrawl.agents.sinks.warc.records import PROFILES, record_id
from streamcrawl.schemas.records import Capture, CaptureKind
from tests.warc_conformance import DATE0, assert_valid, exchange, read

LOGO = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def asset(
    path: str, date: float, payload: bytes = LOGO, *, kind: CaptureKind = "asset", **kw: Any
) -> Capture:
    url = f"https://cdn.example{path}"
    return Capture(
        crawl_id=kw.pop("crawl_id", "c1"), origin="https://cdn.example", url=url, kind=kind,
        depth=1, exchanges=(exchange(url, date, payload, **kw),),
    )  # fmt: skip


def kinds(captures: list[Capture], directory: Path, *, valid: bool = True) -> list[dict[str, str]]:
    """The fields of the response and revisit records of ``captures`` as one writer writes
    them (and, unless not ``valid``, a file that warcio and FastWARC accept)."""
    with WarcFiles(directory, hostname="h") as files:
        files.write(captures)
    [path] = files.closed
    if valid:
        assert_valid(path)
    return [
        dict(record.rec_headers.headers)
        for record, _ in read(path)
        if record.rec_type in ("response", "revisit")
    ]


def test_an_asset_seen_before_is_a_revisit_of_the_first_response(tmp_path: Path) -> None:
    first, again = asset("/logo.png", DATE0), asset("/copy/logo.png", DATE0 + 1)
    style = asset("/s.css", DATE0 + 2, LOGO, kind="stylesheet")
    response, revisit, style_revisit = kinds([first, again, style], tmp_path)
    assert response["WARC-Type"] == "response"
    assert revisit["WARC-Type"] == style_revisit["WARC-Type"] == "revisit"
    assert revisit["WARC-Profile"] == PROFILES["identical-payload-digest"]
    assert revisit["WARC-Refers-To"] == response["WARC-Record-ID"]
    assert revisit["WARC-Refers-To"] == record_id("c1", first.url, DATE0, "response")
    assert revisit["WARC-Refers-To-Target-URI"] == "https://cdn.example/logo.png"
    assert revisit["WARC-Refers-To-Date"] == response["WARC-Date"]
    assert revisit["WARC-Target-URI"] == "https://cdn.example/copy/logo.png"
    assert revisit["WARC-Payload-Digest"] == response["WARC-Payload-Digest"]
    assert style_revisit["WARC-Refers-To"] == response["WARC-Record-ID"]


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(dict(kind="page"), id="a page"),
        pytest.param(dict(status="404 Not Found"), id="an error"),
        pytest.param(dict(truncated="length"), id="truncated"),
        pytest.param(dict(crawl_id="c2"), id="another crawl"),
        pytest.param(dict(payload=LOGO + b"!"), id="another payload"),
        pytest.param(dict(payload=b""), id="no payload"),
    ],
)
def test_what_is_always_written_in_full(second: dict[str, Any], tmp_path: Path) -> None:
    records = kinds([asset("/a.png", DATE0), asset("/b.png", DATE0 + 1, **second)], tmp_path)
    assert [r["WARC-Type"] for r in records] == ["response", "response"]


def test_an_error_or_a_page_is_not_what_a_later_asset_refers_to(tmp_path: Path) -> None:
    captures = [asset("/e.png", DATE0, status="404 Not Found"), asset("/p", DATE0 + 1, kind="page")]
    records = kinds([*captures, asset("/a.png", DATE0 + 2)], tmp_path)
    assert [r["WARC-Type"] for r in records] == ["response"] * 3


def test_a_capture_written_again_is_the_response_it_was(tmp_path: Path) -> None:
    first = asset("/logo.png", DATE0)
    records = kinds([first, first], tmp_path, valid=False)  # the same record ids twice
    assert [r["WARC-Type"] for r in records] == ["response", "response"]
    assert records[0]["WARC-Record-ID"] == records[1]["WARC-Record-ID"]  # the index keeps one


def test_the_oldest_digests_are_forgotten_first() -> None:
    digests = PayloadDigests(limit=2)
    for n in range(3):
        digests.dedupe(asset(f"/{n}.png", DATE0 + n, bytes([n]) * 10))
    assert len(digests) == 2
    assert digests.dedupe(asset("/0b.png", DATE0 + 9, bytes([0]) * 10)).revisit is None
    assert digests.dedupe(asset("/2b.png", DATE0 + 9, bytes([2]) * 10)).revisit is not None
    with pytest.raises(ValueError, match="limit"):
        PayloadDigests(limit=0)
