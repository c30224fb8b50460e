"""The many-origins row (bench/many_origins.py) on hand-made results: its figures, the targets
against the embedded crawl, its section in the report, and bench.run's option."""

from __future__ import annotations

import pytest

from bench import many_origins
from bench.run import parse_args

SITE = {
    "origins": 2000,
    "pages": 5,
    "expected": 10000,
    "links_per_page": 30,
    "delay": 1.0,
    "ideal_pages_per_s": 2000.0,
}


def _row(label: str, span: float, cpu: float, **more) -> dict:
    return {
        "label": label,
        "status": "ok",
        "runs": [{}],
        "pages": 10000,
        "requests": 12000,
        "span_s": span,
        "wall_s": span + 2,
        "cpu_s": cpu,
        "peak_rss_mb": 120.0,
        "min_gap": 1.0,
        **more,
    }


def _part() -> dict:
    kafka = {"kafka_cpu_s": 10.0, "cassandra_cpu_s": 6.0}
    idle = {"worker": 0.01, "kafka": 0.05, "cassandra": 0.02}
    return {
        "_site": SITE,
        "embedded": _row("embedded", 10.0, 12.0),  # 1,000 pages/s, 1.2 ms a page
        "kafka-1": _row("kafka-1", 25.0, 30.0, idle_rates=idle, **kafka),  # 400/s, 3.0 ms
        "kafka-2": _row("kafka-2", 10.5, 16.0, idle_rates=idle, **kafka),  # 952/s, 1.6 ms
    }


def test_figures_charge_every_request_to_the_pages_and_take_the_idle_out() -> None:
    f = many_origins.figures(_part()["kafka-1"], SITE)
    assert f["pages_per_s"] == pytest.approx(400.0)
    assert f["of_ideal"] == pytest.approx(0.2)
    assert f["requests_per_s"] == pytest.approx(480.0)
    assert f["ms_cpu_per_page"] == pytest.approx(3.0)
    assert f["kafka_ms_per_page"] == pytest.approx((10.0 - 0.05 * 27) / 10)
    assert f["cassandra_ms_per_page"] == pytest.approx((6.0 - 0.02 * 27) / 10)
    embedded = many_origins.figures(_part()["embedded"], SITE)
    assert embedded["kafka_ms_per_page"] is None


def test_the_targets_compare_with_the_embedded_crawl_on_the_same_site() -> None:
    got = {(v["row"], v["target"].split()[0]): v for v in many_origins.verdicts(_part())}
    rate1 = got[("kafka-1", "pages/s")]
    assert rate1["ratio"] == pytest.approx(0.4) and not rate1["met"]
    rate2 = got[("kafka-2", "pages/s")]
    assert rate2["ratio"] == pytest.approx(1000 / 10.5 / 100) and rate2["met"]
    assert not got[("kafka-1", "workers'")]["met"]  # 2.5x
    assert got[("kafka-2", "workers'")]["ratio"] == pytest.approx(1.6 / 1.2)
    assert got[("kafka-2", "workers'")]["met"]


def test_no_targets_without_the_embedded_row() -> None:
    part = _part()
    part["embedded"] = {"label": "embedded", "status": "failed", "reason": "boom"}
    assert many_origins.verdicts(part) == []
    text = "\n".join(many_origins.section(part))
    assert "**failed**: boom" in text


def test_the_section_shows_each_row_and_the_verdicts() -> None:
    text = "\n".join(many_origins.section(_part()))
    assert "## Many origins: 2,000 origins x 5 pages, delay 1 s" in text
    assert "| kafka-1 | 1 | 10,000 / 10,000 | 25.0 | 400 | 20% | 480 | 30.00 | 3.00 |" in text
    assert "| kafka-1 | pages/s >= 50% of the embedded crawl's | 40% | **not met** |" in text
    assert "| kafka-2 | workers' CPU per page <= 1.5x the embedded crawl's | 1.33x | met |" in text


def test_the_option_its_default_quick_and_none() -> None:
    assert parse_args([]).many_origins_shape == (2000, 5, 1.0)
    assert parse_args(["--quick"]).many_origins_shape == (200, 5, 1.0)
    assert parse_args(["--many-origins", "none"]).many_origins_shape is None
    assert parse_args(["--many-origins", "10x3"]).many_origins_shape == (10, 3, 1.0)
