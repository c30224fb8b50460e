"""The Grafana dashboard: the chart's JSON is generated from ``topology/admin/dashboard.py``
(one definition), every query selects the dashboard's workers, and the layout is sound. That
each query returns data from a real Prometheus is tests/integration/test_dashboard_queries.py.
"""

from __future__ import annotations

import json
import re

from streamcrawl.topology.admin import dashboard

METRIC = re.compile(r"\b((?:streamcrawl|process)_[a-z_]+)(\{[^}]*\})?")


def test_the_charts_copy_is_the_generated_one() -> None:
    assert dashboard.main(["--check"]) == 0, "run: python -m streamcrawl.topology.admin.dashboard"
    assert json.loads(dashboard.OUT.read_text()) == dashboard.dashboard()


def test_every_metric_in_every_query_is_selected_by_namespace_and_job() -> None:
    for title, expr in dashboard.queries():
        found = METRIC.findall(expr)
        assert found, (title, expr)
        for name, selector in found:
            assert selector.startswith("{" + dashboard.SEL), (title, name, expr)


def test_the_queries_name_metrics_the_workers_export() -> None:
    from streamcrawl.agents.stream.metrics import Metrics

    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
    exported = {
        family.name + suffix
        for family in Metrics(state_dir=dashboard.OUT.parent).registry.collect()
        for suffix in suffixes.get(family.type, ("",))
    }
    used = {name for _, expr in dashboard.queries() for name, _ in METRIC.findall(expr)}
    assert used - exported == set()


def test_panels_have_unique_ids_fit_the_grid_and_use_the_datasource_variable() -> None:
    model = dashboard.dashboard()
    ids = [p["id"] for p in model["panels"]]
    assert len(ids) == len(set(ids))
    for p in model["panels"]:
        grid = p["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${datasource}"
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs))
    names = [v["name"] for v in model["templating"]["list"]]
    assert names == ["datasource", "namespace", "job"]
    # Rows cover what an operator asked for (issue 35).
    titles = " ".join(p["title"] for p in model["panels"]).lower()
    for topic in ("by state", "latency", "bytes", "queued", "origins", "lag", "politeness",
                  "sink", "rebalances", "errors"):  # fmt: skip
        assert topic in titles, topic
