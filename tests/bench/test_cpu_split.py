"""The worker's CPU split (bench/cpu_split.py) and the rows bench.run reports with it, on
hand-made results: the arithmetic, the medians of runs, and the markdown of new and old files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import cpu_split
from bench.report import markdown
from bench.run import merge_results, parse_args, shape

A, B = 0.0025, 0.040  # CPU-seconds per page, CPU-seconds per second of crawling
IDLE = {"worker": 0.008, "kafka": 0.03, "cassandra": 0.02}
NO_SERVICES = {"kafka_cpu_s": None, "cassandra_cpu_s": None, "idle_rates": None}


def _run(pages: int, wall: float, cpu: float | None = None, **more) -> dict:
    """One run's figures as suite.one_run returns them; CPU on the model unless given."""
    cpu = A * pages + B * wall if cpu is None else cpu
    return {
        "status": "ok",
        "pages": pages,
        "wall_s": wall,
        "span_s": wall - 1,
        "span_pages_per_s": pages / (wall - 1),
        "pages_per_s": pages / wall,
        "cpu_s": cpu,
        "ms_cpu_per_page": 1000 * cpu / pages,
        "pages_per_cpu_s": pages / cpu,
        "peak_rss_mb": 150.0,
        "kafka_cpu_s": 0.5 + IDLE["kafka"] * wall,
        "cassandra_cpu_s": 0.25 + IDLE["cassandra"] * wall,
        "nginx_cpu_s": 0.1,
        "missed": 0,
        "duplicates": 0,
        "other_cpu_s": 0.0,
        "loadavg_1m": 0.5,
        "min_gap": 0.5,
        "wire": {"status": "ok", "min_gap": 0.5004},
        "idle_rates": IDLE,
        **more,
    }


def _row(label: str, runs: list[dict]) -> dict:
    return cpu_split.median_row(label, runs)


def _not_saturated(workers: tuple[str, ...] = ("kafka-1", "kafka-2")) -> dict:
    """16 x 100 at 0.5 s and 2 s, three runs each, CPU exactly on the model."""

    def part(delay: float, walls: list[float]) -> dict:
        site = {"origins": 16, "pages": 100, "expected": 1600, "delay": delay}
        site["ideal_pages_per_s"] = 16 / delay
        return {"_site": site, **{n: _row(n, [_run(1600, w) for w in walls]) for n in workers}}

    out = part(0.5, [51.0, 50.0, 52.0])
    out["split"] = part(2.0, [201.0, 200.0, 202.0])
    return out


@pytest.mark.parametrize(
    ("a", "b", "first", "second"),
    [
        (0.0025, 0.040, (1600, 50.0), (1600, 200.0)),  # same pages, two delays
        (0.004, 0.010, (400, 8.0), (2000, 100.0)),  # different pages too
        (0.001, 0.0, (1000, 10.0), (1000, 40.0)),  # no per-second cost
        (0.0, 0.05, (500, 5.0), (500, 20.0)),  # no per-page cost
    ],
)
def test_solve_recovers_both_parts(a: float, b: float, first: tuple, second: tuple) -> None:
    points = [(p, t, a * p + b * t) for p, t in (first, second)]
    got = cpu_split.solve(*points)
    assert got == pytest.approx((a, b), abs=1e-12)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ((1600, 50.0, 5.0), (1600, 60.0, 5.4)),  # seconds per page 1.2x apart: noise decides
        ((1600, 50.0, 5.0), (1600, 50.0, 5.0)),  # the same rate twice
        ((0, 50.0, 5.0), (1600, 200.0, 9.0)),  # no pages
    ],
)
def test_solve_refuses_rates_too_close_to_separate(first: tuple, second: tuple) -> None:
    assert cpu_split.solve(first, second) is None


def test_a_row_is_the_median_of_its_runs_and_the_smallest_gap() -> None:
    runs = [
        _run(1600, 50.0, min_gap=0.49, wire={"status": "ok", "min_gap": 0.5001}),
        _run(1600, 52.0, cpu=9.0, min_gap=0.5),
        _run(1600, 51.0, cpu=7.0, idle_rates={**IDLE, "kafka": 0.05}, wire=None),
    ]
    row = _row("kafka-1", runs)
    assert row["status"] == "ok" and len(row["runs"]) == 3
    assert row["wall_s"] == 51.0 and row["cpu_s"] == 7.0
    assert row["min_gap"] == 0.49 and row["wire"]["min_gap"] == 0.5001
    assert row["idle_rates"]["kafka"] == 0.03  # median of 0.03, 0.03, 0.05


def test_a_failed_run_marks_the_row_and_keeps_the_finished_ones() -> None:
    row = _row("kafka-2", [_run(1600, 50.0), {"status": "failed", "reason": "worker exited 1"}])
    assert (row["status"], row["reason"]) == ("failed", "worker exited 1")
    assert row["pages"] == 1600 and len(row["runs"]) == 1
    assert _row("kafka-2", [{"status": "not run", "reason": "no Kafka"}])["runs"] == []


def test_the_split_comes_from_the_medians_with_the_range_over_run_pairs() -> None:
    ns = _not_saturated()
    ns["split"]["kafka-1"]["runs"][0]["cpu_s"] += 0.6  # one noisy run: widens the range only
    fits = cpu_split.split(ns)
    assert set(fits) == {"kafka-1", "kafka-2"}
    f = fits["kafka-1"]
    assert f["status"] == "ok"
    assert f["a_ms_per_page"] == pytest.approx(1000 * A)
    assert f["b_ms_per_s"] == pytest.approx(1000 * B)
    # +0.6 CPU-s over the 150 s between the delays: b 4 ms/s higher, a 4 x 50 / 1600 lower
    assert f["b_range"] == pytest.approx([1000 * B, 1000 * B + 4.0], abs=0.1)
    assert f["a_range"] == pytest.approx([1000 * A - 0.125, 1000 * A], abs=0.01)
    assert f["worker_idle_ms_per_s"] == pytest.approx(8.0)
    assert [p["delay"] for p in f["points"]] == [0.5, 2.0]


def test_no_split_without_the_second_delay_or_with_a_failed_row() -> None:
    ns = _not_saturated()
    assert cpu_split.split({k: v for k, v in ns.items() if k != "split"}) == {}
    ns["split"]["kafka-2"] = _row("kafka-2", [{"status": "failed", "reason": "stalled"}])
    assert cpu_split.split(ns)["kafka-2"]["status"] == "not measured"


def _results(ns: dict | None = None) -> dict:
    main_site = {"origins": 8, "pages": 500, "expected": 4000, "links_per_page": 28}
    main: dict = {"_site": main_site}
    for name, wall in (("kafka-1", 13.0), ("kafka-2", 12.0)):
        run = _run(4000, wall, cpu=8.0, private_fetched=0, requests=4008)
        run |= {"robots_duplicates": 0, "unexpected": 0}
        del run["idle_rates"]  # the saturated rows have no idle window
        main[name] = {"label": name, "status": "ok", "runs": [run]}
        main[name]["median"] = {**run, "private_fetched_max": 0}
    dz_site = {"origins": 4, "pages": 500, "expected": 2000, "per_origin_concurrency": 1}
    delay_zero = {
        "_site": dz_site,
        "embedded": _row("embedded", [_run(2000, 20.0, cpu=3.0, **NO_SERVICES)]),
        "kafka-1": _row("kafka-1", [_run(2000, 40.0)]),
    }
    return {
        "args": {
            **{"origins": 8, "pages": 500, "runs": 3, "only": ["kafka-1", "kafka-2"]},
            **{"memory": False, "stock": False, "no_politeness": True, "no_profile": True},
        },
        "env": {"date": "today", "repo_commit": "abc1234"},
        "elapsed_s": 60.0,
        "main": main,
        "delay_zero": delay_zero,
        "not_saturated": _not_saturated() if ns is None else ns,
    }


def test_every_kafka_row_is_predicted_with_its_own_worker_count() -> None:
    rows = {(r["row"], r["name"]): r for r in cpu_split.kafka_rows(_results())}
    sat = rows[("saturated, 8 x 500", "kafka-1")]
    assert sat["predicted_s"] == pytest.approx(A * 4000 + B * 13.0)
    assert sat["per_second_s"] == pytest.approx(B * 13.0)
    # no idle window of its own: the not-saturated runs' rates, with as many workers
    assert not sat["idle_own"]
    assert sat["services"]["kafka"]["idle_s"] == pytest.approx(IDLE["kafka"] * 13.0)
    assert sat["services"]["kafka"]["crawl_s"] == pytest.approx(0.5)
    few = rows[("few origins, 4 x 500 at delay 0", "kafka-1")]
    assert few["idle_own"] and few["cpu_s"] == pytest.approx(few["predicted_s"])
    assert few["services"]["cassandra"]["crawl_s"] == pytest.approx(0.25)
    fitted = rows[("not saturated, 16 x 100 at 2 s (fit)", "kafka-2")]
    assert fitted["cpu_s"] == pytest.approx(fitted["predicted_s"])
    assert ("few origins, 4 x 500 at delay 0", "kafka-2") not in rows  # not measured
    assert len(rows) == 2 + 1 + 4


def test_rows_of_another_results_file_are_not_predicted() -> None:
    results = _results()
    results["not_saturated"]["source"] = "later.json"  # merged in by --report-from
    titles = {r["row"] for r in cpu_split.kafka_rows(results)}
    assert not any(t.startswith(("saturated", "few origins")) for t in titles)


def _rows(md: str, section: str, table: int = 0) -> list[list[str]]:
    """The cells of the body rows of table ``table`` under the heading ``section``."""
    text = md[md.index(section) + 1 :]
    end = text.find("\n## ")
    text = text if end < 0 else text[:end]
    tables: list[list[str]] = []
    for ln, prev in zip(text.splitlines(), ["", *text.splitlines()], strict=False):
        if ln.startswith("|") and not prev.startswith("|"):
            tables.append([])
        if ln.startswith("|"):
            tables[-1].append(ln)
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in tables[table][2:]]


def test_the_report_shows_the_new_rows_and_the_split() -> None:
    md = markdown(_results(), "chart.png")
    few = _rows(md, "## Few origins at delay 0: 4 origins x 500 pages, 1 request per origin")
    assert few[0][0] == "embedded" and few[0][-2:] == ["-", "-"]  # no broker, no Cassandra
    # kafka-1: 2,000 pages, 40 s from the seed, 39 s in the log; CPU and the broker's and
    # Cassandra's (less their idle rate x 40 s; the idle part) over the 40 s
    assert few[1] == [
        *("kafka-1", "1", "2,000 / 2,000", "40.0", "39.0", "51", "12.8", "6.60", "3.30", "16%"),
        *("150", "0.5 (1.2)", "0.2 (0.8)"),
    ]
    ns = _rows(md, "## Not saturated: 16 origins x 100 pages, delay 0.5 s and 2 s")
    assert [r[:4] for r in ns] == [
        ["0.5", "1", "3", "1,600"],
        ["0.5", "2", "3", "1,600"],
        ["2", "1", "3", "1,600"],
        ["2", "2", "3", "1,600"],
    ]
    fits = _rows(md, "## Worker CPU: per page and per second")
    assert fits[0][:4] == ["1", "**2.50** (2.50 .. 2.50)", "**40.0** (40.0 .. 40.0)", "8.0"]
    assert fits[0][4].startswith("0.5 s: 1,600 pages, 51.0 s, 6.04 CPU s; 2 s: 1,600 pages")
    rows = {(r[0], r[1]): r for r in _rows(md, "## Worker CPU", table=1)}
    # 8.00 CPU-s measured; 2.5 ms x 4,000 pages + 40 ms x 13 s = 10.52 predicted, 5% of it
    # per second; the broker's and Cassandra's idle rates pooled from the not-saturated runs
    assert rows[("saturated, 8 x 500", "1")][5:] == [
        *("8.00", "10.52", "5%", "0.76", "0.5 (0.4) †", "0.2 (0.3) †"),
    ]
    assert rows[("few origins, 4 x 500 at delay 0", "1")][5:9] == ["6.60", "6.60", "24%", "1.00"]
    assert ("not saturated, 16 x 100 at 2 s (fit)", "2") in rows
    assert md.index("## Few origins") < md.index("## Not saturated") < md.index("## Worker CPU")


def test_an_older_results_file_still_renders() -> None:
    """A not-saturated section of single runs (no medians, no second delay), no few-origins
    rows, and args without the newer options."""
    results = _results()
    del results["delay_zero"]
    old_row = _run(1600, 51.0)
    del old_row["idle_rates"]
    old_row["wire"] = {"status": "ok", "min_gap": 0.5003, "origins_under_delay": []}
    results["not_saturated"] = {
        "_site": {"origins": 16, "pages": 100, "expected": 1600, "delay": 0.5},
        "kafka-1": {"label": "kafka-1", **old_row},
    }
    results["not_saturated"]["_site"]["ideal_pages_per_s"] = 32.0
    md = markdown(results, "chart.png")
    assert "## Not saturated: 16 origins x 100 pages, delay 0.5 s\n" in md
    assert "| 0.5 | 1 | 1 | 1,600 | 50.0 | 32 |" in md
    assert "Not part of this run (`--split DELAY`)." in md
    assert "Few origins" not in md


def test_the_command_line_names_the_new_options_when_changed() -> None:
    results = _results()
    results["args"] |= {"delay_zero": "2x20", "split": "none", "not_saturated": "16x100@0.5"}
    results["args"]["idle_seconds"] = 0.0
    head = markdown(results, "chart.png").splitlines()[2]
    assert "--delay-zero 2x20 --split none --idle-seconds 0`" in head


def test_shapes_and_delays_on_the_command_line() -> None:
    assert shape("4x500") == (4, 500, 0.0)
    assert shape("16x100@0.5") == (16, 100, 0.5)
    assert shape("16x100", 0.5) == (16, 100, 0.5)
    assert shape("none") is None
    with pytest.raises(ValueError, match="ORIGINSxPAGES"):
        shape("16by100")
    args = parse_args(["--not-saturated", "16x100@0.5", "--split", "1.5", "--delay-zero", "none"])
    assert (args.split_delay, args.delay_zero_shape) == (1.5, None)
    assert parse_args(["--split", "none"]).split_delay is None
    with pytest.raises(SystemExit):  # 0.5 s and 0.6 s: the fit would be noise
        parse_args(["--not-saturated", "16x100@0.5", "--split", "0.6"])


def test_a_later_file_brings_its_few_origins_rows_whole(tmp_path: Path) -> None:
    first, later = _results(), _results()
    later["delay_zero"]["_site"]["origins"] = 2
    paths = []
    for name, results in (("a.json", first), ("b.json", later)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(results))
    merged = merge_results(paths, [])
    assert merged["delay_zero"]["_site"]["origins"] == 2
    assert merged["delay_zero"]["source"] == "b.json"
    assert merged["not_saturated"]["source"] == "b.json"
