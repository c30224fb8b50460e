"""``python -m bench.run --report-from A,B``: what a later results file adds to the first
(bench/run.py ``merge_results``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.run import merge_results

SITE = {"origins": 8, "pages": 500}


def _row(label: str, ms: float) -> dict:
    return {"label": label, "status": "ok", "ms_cpu_per_page": ms}


def _results(tag: str, ms: float) -> dict:
    return {
        "args": {},
        "main": {"_site": SITE, "kafka-1": {"label": "1 worker", "runs": [{"ms": ms}]}},
        "politeness": {"_site": {"origins": 256}, "kafka-1": _row("1 worker", ms)},
        "not_saturated": {"_site": {"delay": 0.5}, "kafka-1": _row("1", ms), "tag": tag},
        "idle": {"status": "ok", "worker_core_share": ms / 100, "tag": tag},
    }


def _write(tmp_path: Path, name: str, results: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(results))
    return path


def test_a_later_file_adds_its_runs_and_replaces_whole_sections(tmp_path: Path) -> None:
    first = _write(tmp_path, "a.json", _results("a", 2.0))
    later = _write(tmp_path, "b.json", _results("b", 3.0))
    merged = merge_results([first, later], [])
    assert merged["main"]["kafka-1"]["runs"] == [{"ms": 2.0}]
    assert merged["main"]["kafka-1-rerun"]["label"] == "1 worker — separate run (b.json)"
    assert merged["politeness"]["kafka-1"]["label"] == "1 worker (b.json)"
    # the not-saturated rows are compared with each other: never one file's with another's
    assert merged["not_saturated"]["tag"] == "b" and merged["not_saturated"]["source"] == "b.json"
    assert merged["idle"]["tag"] == "b" and merged["idle"]["source"] == "b.json"


def test_a_file_without_a_section_leaves_the_first_ones(tmp_path: Path) -> None:
    first = _write(tmp_path, "a.json", _results("a", 2.0))
    rerun = _results("b", 3.0)
    del rerun["not_saturated"], rerun["idle"]
    merged = merge_results([first, _write(tmp_path, "b.json", rerun)], [])
    assert merged["not_saturated"]["tag"] == "a" and "source" not in merged["not_saturated"]
    assert merged["idle"]["tag"] == "a" and "source" not in merged["idle"]


def test_rows_of_another_site_are_refused(tmp_path: Path) -> None:
    first = _write(tmp_path, "a.json", _results("a", 2.0))
    other = _results("b", 3.0)
    other["main"]["_site"] = {"origins": 4, "pages": 500}
    with pytest.raises(SystemExit, match="main is on another site"):
        merge_results([first, _write(tmp_path, "b.json", other)], [])


def test_sections_say_where_they_came_from() -> None:
    from bench.worker_rows import idle_section

    row = {"status": "ok", "partitions": 12, "seconds": 60, "loadavg_1m": 0.3}
    row |= {"worker_core_share": 0.013, "worker_core_share_windows": [0.013]}
    row |= {"service_core_share": {}, "source": "b.json"}
    assert "From `b.json`." in idle_section(row)
    assert not any("From" in line for line in idle_section({**row, "source": None}))


RESHARD_RUN = {
    "seen_urls": 1_000_000,
    "entries": {"seen": 1_400_000, "pending": 200_000, "origins": 10_000},
    "origins": 10_000,
    "partitions": [3, 6],
    "build_s": 80.0,
    "reshard_s": 49.4,
    "reshard_s_per_million_seen": 49.4,
    "peak_rss_mb": 329,
    "steps": [
        "moved 1710000 table entries",
        "step tables done in 24.5 s",
        "step verified done in 18.2 s",
    ],
}


def test_a_reshard_file_is_merged_whole_and_reported(tmp_path: Path) -> None:
    from bench.report import reshard_section
    from bench.run import source_command

    first = _write(tmp_path, "a.json", _results("a", 2.0))
    reshard = {"reshard": {"command": "python -m bench.probes.reshard --seen 1000000", "runs": []}}
    reshard["reshard"]["runs"].append(RESHARD_RUN)
    merged = merge_results([first, _write(tmp_path, "r.json", reshard)], [])
    assert merged["main"]["kafka-1"]["runs"] == [{"ms": 2.0}]  # a file without main rows
    assert merged["reshard"]["source"] == "r.json"
    assert source_command(reshard) == "python -m bench.probes.reshard --seen 1000000"
    lines = reshard_section(merged["reshard"])
    assert "From `r.json`: `python -m bench.probes.reshard --seen 1000000`." in lines
    assert lines[-1] == "" and lines[-2] == (
        "| 1,000,000 | 10,000 | 3 -> 6 | 1,710,000 | 24.5 | 18.2 | 49.4 | 49.4 | 329 |"
    )
