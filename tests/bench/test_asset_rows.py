"""The page-assets comparison with wget (bench/asset_rows.py): its servers, the figures of a
run, the check that streamcrawl fetched every asset wget did, the report's section and its
``--out`` file merged by ``python -m bench.run --report-from``; then both crawlers once on a
three-page site."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bench import asset_rows
from bench.asset_rows import Server, assets_section, median, missing, requested
from bench.run import merge_results, source_command

FILES = {"/": ("text/html", b"<p>home"), "/a.css?v=2": ("text/css", b"p{}")}


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def test_a_server_answers_by_path_and_query_and_logs_every_request() -> None:
    with Server(dict(FILES)).running() as srv:
        base = f"http://127.0.0.1:{srv.port}"
        assert get(base + "/a.css?v=2") == (200, b"p{}")
        assert get(base + "/a.css")[0] == 404
        assert get(base + "/robots.txt")[0] == 404
        get(base + "/")
    assert srv.log == ["/a.css?v=2", "/a.css", "/robots.txt", "/"]
    assets, requests, pages = requested({"http://h": srv})
    assert (assets, requests, pages) == ({"http://h/a.css?v=2", "http://h/a.css"}, 4, 1)


def run(cpu: float, assets: list[str]) -> dict:
    return {
        "status": "ok", "assets": assets, "requests": 10, "pages": 4, "copy_bytes": 2_000_000,
        "state_bytes": 0, "warc_bytes": 3_000_000, "cpu_s": cpu, "cpu_ms_per_page": cpu * 250,
        "wall_s": 1.0,
    }  # fmt: skip


def part() -> dict:
    wget = median([run(0.1, ["http://h/a", "http://h/b"]), run(0.3, ["http://h/a"])])
    ours = median([run(0.2, ["http://h/a", "http://h/c"]), {"status": "failed", "reason": "x"}])
    medians = {"wget": wget, "streamcrawl": ours}
    return {"command": "python -m bench.asset_rows --runs 2", "pages": 4, "site_assets": 9,
            "median": medians, "missing": missing(medians)}  # fmt: skip


def test_medians_the_check_and_the_section() -> None:
    got = part()
    wget = got["median"]["wget"]
    assert (wget["runs"], wget["cpu_ms_per_page"], wget["cpu_range"]) == (2, 50.0, [25.0, 75.0])
    assert wget["assets"] == ["http://h/a"]  # the last ok run's
    assert got["missing"] == []
    lines = assets_section(got)
    row = "| GNU Wget -r -p -k -H --warc-file | 2 | 4 | 1 | 10 | 2.00 | 0.00 | 3.00 |"
    assert f"{row} 50.00 (25.00-75.00) |" in lines
    assert "**Assets wget fetched that streamcrawl did not: 0**." in lines
    assert "Assets streamcrawl fetched that wget did not: 1: `/c`." in lines
    got["median"]["wget"]["assets"] = ["http://h/a", "http://h/b"]
    got["missing"] = missing(got["median"])
    assert "**Assets wget fetched that streamcrawl did not: 1**: `/b`." in assets_section(got)
    got["median"]["streamcrawl"] = {"status": "failed", "reason": "exit 2"}
    assert missing(got["median"]) is None
    assert any("**failed**: exit 2" in line for line in assets_section(got))


def test_the_out_file_is_merged_by_the_report(tmp_path: Path) -> None:
    out = tmp_path / "assets.json"
    out.write_text(json.dumps({"assets": part()}))
    assert source_command(json.loads(out.read_text())) == "python -m bench.asset_rows --runs 2"
    first = tmp_path / "a.json"
    first.write_text(json.dumps({"args": {}, "main": {"_site": {}}, "assets": {"old": 1}}))
    merged = merge_results([first, out], [])
    assert merged["assets"]["source"] == "assets.json" and "old" not in merged["assets"]
    assert "From `assets.json`: `python -m bench.asset_rows --runs 2`." in assets_section(
        merged["assets"]
    )


@pytest.mark.skipif(shutil.which("wget") is None, reason="no wget")
def test_both_crawlers_on_a_small_site(tmp_path: Path) -> None:
    got = asset_rows.compare(pages=3, runs=1, workdir=tmp_path)
    wget, ours = got["median"]["wget"], got["median"]["streamcrawl"]
    assert (wget["status"], ours["status"]) == ("ok", "ok"), got["runs"]
    assert wget["pages"] == ours["pages"] == 3
    assert len(ours["assets"]) == got["site_assets"] == 16 and got["missing"] == []
    assert ours["copy_bytes"] > 0 and ours["warc_bytes"] > 0 and wget["warc_bytes"] > 0
