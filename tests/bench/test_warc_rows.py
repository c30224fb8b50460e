"""The WARC rows of the comparison (bench/warc_rows.py, bench/runners.py): wget's command line,
the archive reader, the validators' verdicts, the coverage of wget's archive by streamcrawl's,
and the report's section, on hand-made files and results. No nginx, no crawl."""

from __future__ import annotations

import gzip
import io
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `bench` is a top-level folder of the repo, not an installed package
    sys.path.insert(0, str(REPO))

from bench import runners, warc_rows  # noqa: E402
from bench.context import RunContext  # noqa: E402
from bench.run import parse_args  # noqa: E402
from bench.site import TRACKING, generate  # noqa: E402

WARCIO = Path(sys.executable).parent / "warcio"
FASTWARC = Path(sys.executable).parent / "fastwarc"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):
    return generate(tmp_path_factory.mktemp("site"), origins=3, pages=5, base_port=21000)


def test_wget_crawls_recursively_from_the_first_root_into_the_runs_warc(site, tmp_path) -> None:
    argv = runners.wget_argv(RunContext(site, tmp_path), "/usr/bin/wget")
    assert argv[0] == "/usr/bin/wget"
    # one root: wget gives each URL of its command line its own seen set (a crawl per root)
    assert argv[-1] == site.seeds[0] and not set(site.seeds[1:]) & set(argv)
    for flag in ("--recursive", "--level=inf", "--execute=robots=on", "--delete-after"):
        assert flag in argv
    assert f"--warc-file={tmp_path / 'warc' / 'wget'}" in argv
    assert f"--directory-prefix={tmp_path / 'wget-files'}" in argv
    assert not any(a.startswith(("--span-hosts", "-H", "--wait")) for a in argv)


def test_wget_skips_tracking_links_unless_stock(site, tmp_path) -> None:
    argv = runners.wget_argv(RunContext(site, tmp_path))
    (reject,) = [a.split("=", 1)[1] for a in argv if a.startswith("--reject-regex=")]
    base = "http://127.0.0.1:21000/s3/p42.html"
    for query in TRACKING:  # every tracking parameter the site puts in its links
        assert re.search(reject, f"{base}?{query}"), query
    assert re.search(reject, f"{base}?a=1&fbclid=x")
    assert not re.search(reject, base) and not re.search(reject, f"{base}#utm_x")
    stock = runners.wget_argv(RunContext(site, tmp_path, stock=True))
    assert not any(a.startswith("--reject-regex") for a in stock)


def test_embedded_warc_is_the_embedded_command_plus_warc(site, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(runners, "streamcrawl_binary", lambda: "streamcrawl")
    ctx = RunContext(site, tmp_path)
    plain = runners.embedded_argv(ctx)
    assert runners.embedded_argv(ctx, tmp_path / "warc") == [*plain, "--warc", f"{tmp_path}/warc"]
    assert "--warc" not in plain


def test_only_accepts_the_warc_rows_and_they_are_in_the_default() -> None:
    assert parse_args(["--only", "embedded-warc,wget"]).only == ["embedded-warc", "wget"]
    quick = parse_args(["--quick"])
    assert "embedded-warc" in quick.only and "wget" in quick.only
    assert quick.delay_zero_shape == (2, 250, 0.0)
    assert parse_args(["--quick", "--delay-zero", "none"]).delay_zero_shape is None


@pytest.mark.parametrize(
    ("theirs", "ours", "missing", "extra"),
    [
        ("ab", "ab", [], 0),
        ("ab", "abc", [], 1),
        ("cab", "b", ["a", "c"], 0),
        ("", "a", [], 1),
        ("a", "", ["a"], 0),
    ],
)
def test_coverage_lists_what_ours_lacks(theirs, ours, missing, extra) -> None:
    got = warc_rows.coverage(dict.fromkeys(theirs, "d"), dict.fromkeys(ours, "d"), sample=5)
    assert (got["missing_sample"], got["missing"], got["extra"]) == (missing, len(missing), extra)
    assert (got["theirs"], got["ours"]) == (len(theirs), len(ours))
    assert got["payload_differs"] == 0


def test_coverage_lists_only_the_first_missing() -> None:
    got = warc_rows.coverage({f"u{i}": "d" for i in range(9)}, {}, sample=3)
    assert got["missing"] == 9 and got["missing_sample"] == ["u0", "u1", "u2"]


def test_coverage_names_pages_archived_with_other_bytes() -> None:
    theirs = {"a": "sha1:A", "b": "sha1:B", "c": None, "d": "sha1:D"}
    ours = {"a": "sha1:A", "b": "sha1:X", "c": None, "e": "sha1:E"}
    got = warc_rows.coverage(theirs, ours)
    assert got["payload_differs_sample"] == ["b", "c"] and got["missing_sample"] == ["d"]


def _record(kind: str, uri: str, block: bytes, digest: str | None = None) -> bytes:
    head = f"WARC/1.1\r\nWARC-Type: {kind}\r\nWARC-Target-URI: {uri}\r\n"
    head += "WARC-Record-ID: <urn:uuid:12345678-1234-4234-8234-123456789012>\r\n"
    head += "WARC-Date: 2026-01-01T00:00:00Z\r\n"
    head += f"Content-Type: application/http; msgtype={kind}\r\n"
    if digest:
        head += f"WARC-Block-Digest: {digest}\r\nWARC-Payload-Digest: {digest}\r\n"
    head += f"Content-Length: {len(block)}\r\n\r\n"
    return gzip.compress(head.encode() + block + b"\r\n\r\n")  # one gzip member per record


def _http(status: str, body: bytes = b"hello") -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


def test_reader_walks_every_member_and_reads_statuses(tmp_path) -> None:
    path = tmp_path / "a.warc.gz"
    path.write_bytes(
        _record("request", "http://h/", b"GET / HTTP/1.1\r\n\r\n")
        + _record("response", "<http://h/>", _http("200 OK"))  # as wget 1.21 writes it
        + _record("response", "http://h/x", _http("404 Not Found"))
    )
    got = [(r.kind, r.target, r.status) for r in warc_rows.read_records(path)]
    assert got == [
        ("request", "http://h/", None),
        ("response", "http://h/", 200),
        ("response", "http://h/x", 404),
    ]
    summary, uris = warc_rows.check_run(tmp_path, {})
    assert uris == {"http://h/": None} and summary["bracketed_uris"] == 1
    assert (summary["responses"], summary["responses_200"]) == (2, 1)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-20],  # a gzip member cut short
        lambda data: gzip.compress(gzip.decompress(data)[:-6]),  # a block cut short
        lambda data: gzip.compress(b"HTTP/1.1 200 OK\r\n\r\n"),  # no WARC version line
    ],
)
def test_reader_refuses_a_broken_file(tmp_path, damage) -> None:
    path = tmp_path / "a.warc.gz"
    path.write_bytes(damage(_record("response", "http://h/", _http("200 OK"))))
    with pytest.raises(ValueError, match=r"a\.warc\.gz|record 1"):
        list(warc_rows.read_records(path))


def test_finished_files_and_leftovers(tmp_path) -> None:
    (tmp_path / "b.warc.gz").write_bytes(b"x" * 3)
    (tmp_path / "a.warc.gz").write_bytes(b"x" * 4)
    (tmp_path / "c.warc.gz.open").write_bytes(b"x")
    (tmp_path / "index.cdxj").write_bytes(b"x")  # another file: neither a WARC nor unfinished
    done, leftovers = warc_rows.warc_files(tmp_path)
    assert [p.name for p in done] == ["a.warc.gz", "b.warc.gz"] and leftovers == ["c.warc.gz.open"]
    assert warc_rows.written(tmp_path)["warc_bytes"] == 7
    assert warc_rows.written(tmp_path / "none")["warc_files"] == 0


@pytest.mark.skipif(not WARCIO.exists() or not FASTWARC.exists(), reason="validators missing")
def test_both_validators_pass_a_good_file_and_fail_a_bad_digest(tmp_path) -> None:
    from warcio.warcwriter import WARCWriter

    good = tmp_path / "good" / "a.warc.gz"
    good.parent.mkdir()
    with good.open("wb") as f:
        writer = WARCWriter(f, gzip=True, warc_version="1.1")
        block = io.BytesIO(_http("200 OK", b"<html>page</html>"))
        writer.write_record(writer.create_warc_record("http://h/", "response", payload=block))
    bad = tmp_path / "bad" / "a.warc.gz"
    bad.parent.mkdir()
    bad.write_bytes(_record("response", "http://h/", _http("200 OK"), "sha1:" + "A" * 32))
    tools = {
        "warcio": [str(WARCIO), "check"],
        "fastwarc": [str(FASTWARC), "check", "--verify-payloads"],
        "absent": None,
    }
    summary, uris = warc_rows.check_run(good.parent, tools)
    (entry,) = summary["files"]
    assert entry["checks"]["warcio"]["ok"] and entry["checks"]["fastwarc"]["ok"]
    assert entry["checks"]["absent"] == {"ok": None, "detail": "not installed"}
    assert list(uris) == ["http://h/"] and uris["http://h/"].startswith("sha1:")
    assert summary["responses_200"] == 1
    summary, _ = warc_rows.check_run(bad.parent, tools)
    checks = summary["files"][0]["checks"]
    assert checks["warcio"]["ok"] is False and "digest" in checks["warcio"]["detail"]
    assert checks["fastwarc"]["ok"] is False


def _run(ms: float, warc_bytes: int | None = None, pages: int = 100) -> dict:
    per_page = warc_bytes / pages if warc_bytes else None
    return {
        "ms_cpu_per_page": ms,
        "pages": pages,
        "warc_bytes": warc_bytes,
        "warc_bytes_per_page": per_page,
        "private_fetched": 0,
    }


def _entry(label: str, runs: list[dict]) -> dict:
    from bench.suite import _median

    return {"label": label, "status": "ok", "runs": runs, "median": _median(runs)}


def _file(name: str, warcio_ok: bool = True) -> dict:
    detail = "" if warcio_ok else "exit 1: payload digest failed"
    return {
        "name": name,
        "bytes": 10,
        "records": 3,
        "checks": {
            "warcio": {"ok": warcio_ok, "detail": detail},
            "fastwarc": {"ok": True, "detail": ""},
        },
    }


def _summary(*files: dict, leftovers: tuple[str, ...] = ()) -> dict:
    return {"files": list(files), "leftovers": list(leftovers), "responses_200": 100}


def _results() -> tuple[dict, dict]:
    main = {
        "_site": {"origins": 4, "pages": 25, "expected": 100, "links_per_page": 30},
        "embedded": _entry("embedded", [_run(1.0), _run(1.2), _run(1.1)]),
        "embedded-warc": _entry(
            "embedded --warc",
            [_run(1.3, 900_000), _run(1.25, 1_000_000), _run(1.4, 1_100_000)],
        ),
        "wget": _entry("wget", [_run(3.0, 2_000_000), _run(3.1, 2_000_000), _run(2.9, 2_000_000)]),
        "scrapy": _entry("Scrapy", [_run(10.0), _run(11.0), _run(12.0)]),
    }
    missing = ["http://127.0.0.1:20001/s1/p9.html", "http://127.0.0.1:20002/"]
    warc = {
        "validators": {"warcio": "warcio 1.8.1", "fastwarc": "fastwarc 2.0.1"},
        "runs": {
            "embedded-warc": [
                _summary(_file("a.warc.gz"), _file("b.warc.gz")),
                _summary(_file("a.warc.gz"), leftovers=("b.warc.gz.open",)),
                _summary(_file("a.warc.gz")),
            ],
            "wget": [_summary(_file("wget.warc.gz", warcio_ok=False)) for _ in range(3)],
        },
        "coverage": [
            {
                "round": 1,
                "pages": {
                    "theirs": 100,
                    "ours": 100,
                    "missing": 0,
                    "missing_sample": [],
                    "extra": 0,
                },
                "robots": {"theirs": 4, "ours": 4, "missing": 0, "missing_sample": [], "extra": 0},
            },
            {
                "round": 2,
                "pages": {
                    "theirs": 100,
                    "ours": 98,
                    "missing": 2,
                    "missing_sample": missing,
                    "extra": 0,
                    "payload_differs": 1,
                    "payload_differs_sample": ["http://127.0.0.1:20000/"],
                },
                "robots": {"theirs": 4, "ours": 0, "missing": 4, "missing_sample": [], "extra": 0},
            },
        ],
    }
    return main, warc


def _row(lines: list[str], label: str) -> list[str]:
    (row,) = [ln for ln in lines if ln.startswith(f"| {label} |")]
    return [c.strip() for c in row.strip("|").split("|")]


def test_section_shows_cost_bytes_validation_and_coverage() -> None:
    main, warc = _results()
    lines = warc_rows.warc_section(main, warc)
    text = "\n".join(lines)
    warc_row = _row(lines, "embedded --warc")
    # ms CPU/page (range), x embedded, MB, bytes/page, warcio, fastwarc, pages
    assert warc_row[2:] == ["1.30 (1.25-1.40)", "1.18", "1.0", "10,000", "4/5", "4/5", "100"]
    wget_row = _row(lines, "wget")
    assert wget_row[3] == "2.73" and wget_row[6:8] == ["0/3", "3/3"]
    assert _row(lines, "embedded")[3:6] == ["1.00", "-", "-"]
    assert _row(lines, "Scrapy")[6] == "-"
    # the target: 1.3 / 1.1 = 1.18 > 1.15; per-round ratios 1.30, 1.04, 1.27
    assert "1.18x (medians, per round 1.04-1.30): **not met**" in text
    assert "Pages in wget's archive missing from streamcrawl's: 2** (worst of 2" in text
    assert "`http://127.0.0.1:20001/s1/p9.html`, `http://127.0.0.1:20002/`" in text
    assert "4 / 4 / 0, 4 / 0 / 4" in text
    assert "Payload-Digest differs: 1 (worst round; first: `http://127.0.0.1:20000/`)" in text
    assert "checked by warcio 1.8.1 and fastwarc 2.0.1" in text
    assert "unfinished file `b.warc.gz.open`" in text
    assert "angle brackets" not in text
    warc["runs"]["wget"][0]["bracketed_uris"] = 2000
    assert "in `wget`'s archive: compared without them" in "\n".join(
        warc_rows.warc_section(main, warc)
    )
    assert "`wget` run 1 `wget.warc.gz`: warcio: exit 1: payload digest failed" in text


def test_section_meets_the_target_and_says_what_was_not_measured() -> None:
    main, warc = _results()
    for r in main["embedded-warc"]["runs"]:
        r["ms_cpu_per_page"] = 1.2
    main["embedded-warc"]["median"]["ms_cpu_per_page"] = 1.2
    warc["coverage"] = []
    text = "\n".join(warc_rows.warc_section(main, warc))
    assert "1.09x (medians, per round 1.00-1.20): met" in text
    assert "Coverage: not measured" in text
    del main["embedded"]
    assert "not measured (needs `embedded` and `embedded-warc`)" in "\n".join(
        warc_rows.warc_section(main, warc)
    )
    assert warc_rows.warc_section({"_site": {}, "embedded": main["scrapy"]}, None) == []


def test_section_shows_a_crawler_that_did_not_run() -> None:
    main, warc = _results()
    main["wget"] = {
        "label": "wget",
        "status": "not run",
        "reason": "wget not\ninstalled",
        "runs": [],
    }
    assert _row(warc_rows.warc_section(main, warc), "wget")[1] == "**not run**: wget not installed"
