"""The one-real-site bench (bench/doc_site.py) on hand-made results, no services: a run's
figures from an access log, the medians, the targets, the report's section, and the ``--out``
file merged by ``python -m bench.run --report-from``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import doc_site
from bench.doc_site import doc_site_section
from bench.run import merge_results, source_command


def _median(
    pages_per_s: float, crawler: float, kafka: float | None = None, pages: float = 527.0
) -> dict:
    row = {"status": "ok", "runs": 3, "pages": pages, "span_s": pages / pages_per_s}
    row |= {"span_pages_per_s": pages_per_s, "crawler_ms": crawler}
    row |= {"kafka_ms": kafka, "cassandra_ms": None if kafka is None else 1.0}
    row["total_ms"] = crawler + (0 if kafka is None else kafka + 1.0)
    return row


def _part() -> dict:
    def package(pages: int, kb: float, kafka: dict, embedded: dict) -> dict:
        medians = {"kafka-1": kafka, "embedded": embedded}
        return {"page_kb": kb, "pages": pages, "runs": [], "median": medians}

    return {
        "command": "python -m bench.doc_site --runs 3",
        "delay": 0.0,
        "per_origin_concurrency": 1,
        "packages": {
            # postgresql-doc-15: 200 pages/s (met); python3.11-doc: 80 pages/s (not met) and
            # 9.2 ms all-in (met)
            "postgresql-doc-15": package(
                1169, 13.5, _median(200, 2.0, 0.6, 1169.0), _median(400, 1.0, None, 1169.0)
            ),
            "python3.11-doc": package(530, 93.0, _median(80, 6.2, 2.0), _median(160, 4.6)),
        },
    }


def test_the_targets_are_the_kafka_rate_on_each_package_and_the_cpu_on_the_large_pages() -> None:
    got = [(v["package"], v["what"], v["value"], v["met"]) for v in doc_site.verdicts(_part())]
    assert got == [
        ("postgresql-doc-15", "rate", 200, True),
        ("python3.11-doc", "rate", 80, False),
        ("python3.11-doc", "cpu", pytest.approx(9.2), True),
    ]


def test_a_target_whose_row_failed_is_not_measured() -> None:
    part = _part()
    part["packages"]["python3.11-doc"]["median"]["kafka-1"] = {
        "status": "failed",
        "reason": "RuntimeError: a worker exited | 1",
        "runs": 0,
    }
    assert [v["met"] for v in doc_site.verdicts(part)] == [True, None, None]
    text = "\n".join(doc_site_section(part))
    assert "| **failed**: RuntimeError: a worker exited \\| 1 |" in text
    assert text.count("| not measured |") == 2


def test_the_section_shows_each_wiring_against_the_embedded_crawl_and_the_verdicts() -> None:
    lines = doc_site_section(_part())
    assert lines[0] == "## One real site: a documentation tree, one origin, delay 0"
    assert "`python -m bench.doc_site --runs 3`." in lines
    assert (
        "| python3.11-doc | Kafka topology, 1 worker | 3 | 527 / 530 | 93.0 | 6.6 | 80 | 6.20 "
        "| 2.00 | 1.00 | 9.20 | 0.50x | 2.00x |"
    ) in lines
    assert (
        "| python3.11-doc | streamcrawl crawl (embedded) | 3 | 527 / 530 | 93.0 | 3.3 | 160 "
        "| 4.60 | - | - | 4.60 | - | - |"
    ) in lines
    targets = [line for line in lines if "pages/s over the span" in line or "all-in CPU" in line]
    assert targets == [
        "| postgresql-doc-15 | Kafka topology, 1 worker | pages/s over the span >= 100 (one "
        "origin, concurrency 1) | 200 pages/s | met |",
        "| python3.11-doc | Kafka topology, 1 worker | pages/s over the span >= 100 (one "
        "origin, concurrency 1) | 80 pages/s | **not met** |",
        "| python3.11-doc | Kafka topology, 1 worker | all-in CPU <= 15 ms/page (worker + broker "
        "+ Cassandra) | 9.2 ms/page | met |",
    ]


def test_medians_leave_failed_runs_out() -> None:
    rows = [
        {"status": "ok", "pages": 527, "span_pages_per_s": 100.0, "total_ms": 9.0},
        {"status": "failed", "reason": "boom"},
        {"status": "ok", "pages": 527, "span_pages_per_s": 110.0, "total_ms": None},
    ]
    m = doc_site.median(rows)
    assert m["runs"] == 2 and m["span_pages_per_s"] == 105.0 and m["total_ms"] == 9.0
    assert m["kafka_ms"] is None
    assert doc_site.median(rows[1:2]) == {"status": "failed", "reason": "boom", "runs": 0}


def _hit(port: int, uri: str, end: float, status: int = 200) -> str:
    return f"{end:.3f}\t{port}\tGET\t{uri}\t{status}\t1000\t0.010\tbench-streamcrawl\n"


def test_a_run_counts_the_trees_html_pages_over_the_logs_span(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "library").mkdir(parents=True)
    (tree / "index.html").write_text("x" * 1024)
    (tree / "library" / "os.html").write_text("x" * 3072)
    (tree / "_sources").mkdir()
    (tree / "_sources" / "os.rst.txt").write_text("not a page")
    spec = doc_site.serve(tree, tmp_path / "run")
    port = spec.base_port
    assert (Path(spec.root) / str(port)).resolve() == tree.resolve()
    assert Path(spec.root, "seeds.txt").read_text() == f"http://127.0.0.1:{port}/index.html\n"
    assert spec.expected_pages == 2 and doc_site.page_kb(tree) == 2.0
    log = tmp_path / "access.log"
    log.write_text(
        _hit(port, "/index.html", 100.01)
        + _hit(port, "/_sources/os.rst.txt", 100.51)
        + _hit(port, "/library/os.html", 100.51)
        + _hit(port, "/library/os.html", 100.81)  # a repeat: one page
    )
    res = {"wall_s": 4.0, "cpu_s": 0.02, "peak_rss_mb": 80.0, "timed_out": False}
    row = doc_site.figures(spec, log, {**res, "service_cpu_s": {"kafka": 0.01, "cassandra": None}})
    assert (row["pages"], row["requests"], row["duplicates"]) == (2, 4, 1)
    assert row["span_s"] == 0.81 and row["span_pages_per_s"] == pytest.approx(2 / 0.81, abs=0.1)
    assert (row["crawler_ms"], row["kafka_ms"], row["cassandra_ms"]) == (10.0, 5.0, None)
    assert row["total_ms"] is None  # a service not measured: no all-in figure
    embedded = doc_site.figures(spec, log, {**res, "service_cpu_s": {}})
    assert embedded["total_ms"] == 10.0 and "kafka_ms" not in embedded


def test_the_out_file_is_merged_whole_and_names_its_command(tmp_path: Path, monkeypatch) -> None:
    crawled = []

    def fake_package(package: str, args) -> dict:
        crawled.append(package)
        return _part()["packages"][package]

    monkeypatch.setattr(doc_site, "package_part", fake_package)
    out = tmp_path / "d.json"
    argv = ["--package", "postgresql-doc-15", "--package", "python3.11-doc", "--runs", "3"]
    doc_site.main([*argv, "--out", str(out)])
    assert crawled == ["postgresql-doc-15", "python3.11-doc"]
    written = json.loads(out.read_text())
    command = f"python -m bench.doc_site {' '.join(argv)} --out {out}"
    assert written["doc_site"]["command"] == command
    assert source_command(written) == command
    first = tmp_path / "a.json"
    first.write_text(json.dumps({"args": {}, "main": {"_site": {}}, "doc_site": {"old": 1}}))
    merged = merge_results([first, out], [])
    assert merged["doc_site"]["source"] == "d.json" and "old" not in merged["doc_site"]
    lines = doc_site_section(merged["doc_site"])
    assert f"From `d.json`: `{command}`." in lines


def test_packages_are_a_comma_list_or_repeated_and_default_to_both(monkeypatch) -> None:
    crawled = []
    monkeypatch.setattr(
        doc_site, "package_part", lambda p, args: crawled.append(p) or {"median": {}}
    )
    doc_site.main(["--package", "a,b", "--package", "c"])
    doc_site.main([])
    assert crawled == ["a", "b", "c", "postgresql-doc-15", "python3.11-doc"]


def test_the_report_shows_the_section_when_a_results_file_has_it() -> None:
    from bench.report import markdown
    from bench.run import ALL

    args = {"origins": 1, "pages": 1, "runs": 1, "only": ALL, "memory": False, "stock": False}
    args |= {"no_politeness": True, "no_profile": True}
    site = {"origins": 1, "pages": 1, "expected": 1, "links_per_page": 1}
    results = {"env": {"date": "d", "repo_commit": "c"}, "args": args, "elapsed_s": 0.0}
    results |= {"main": {"_site": site}}
    assert "## One real site" not in markdown(results, "chart.png")
    text = markdown({**results, "doc_site": _part()}, "chart.png")
    assert "\n## One real site: a documentation tree, one origin, delay 0\n" in text
