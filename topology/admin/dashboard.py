"""The Grafana dashboard of a crawl, defined once here and written to the chart.

``PANELS`` is the definition: rows of panels, each with its PromQL queries over the workers'
metrics (``agents/stream/metrics.py``). ``dashboard()`` builds Grafana's JSON model from it;
``python -m streamcrawl.topology.admin.dashboard`` writes it to
``helm/streamcrawl/files/grafana-dashboard.json`` (``--check``: fails if that file is stale),
which the chart ships as a ConfigMap for Grafana's sidecar. Every query runs against a real
Prometheus that scraped a crawling worker in ``tests/integration/test_dashboard_queries.py``.

Queries select the workers by ``$namespace`` and ``$job`` (the labels a ServiceMonitor gives
them) and rate over ``$__rate_interval``; ``queries()`` lists them for the tests.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

UID = "streamcrawl-crawl"
OUT = (
    Path(__file__).resolve().parents[2]
    / "helm"
    / "streamcrawl"
    / "files"
    / "grafana-dashboard.json"
)
SEL = 'namespace=~"$namespace", job=~"$job"'
RATE = "$__rate_interval"


def m(name: str, extra: str = "") -> str:
    """``name{<the dashboard's selector>, extra}``."""
    return f"{name}{{{SEL}{', ' + extra if extra else ''}}}"


def quantile(q: float, histogram: str) -> str:
    return f"histogram_quantile({q}, sum by (le) (rate({m(histogram + '_bucket')}[{RATE}])))"


def share_of_origins(state: str) -> str:
    """The share of the origins with work that are in ``state`` (0 when none has work)."""
    origins = "streamcrawl_scheduler_origins_by_state"
    return f"sum({m(origins, f'state={state!r}')}) / clamp_min(sum({m(origins)}), 1)"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: str = "timeseries"  # or "stat"
    stack: bool = False
    width: int = 12
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


PANELS: tuple[Row, ...] = (
    Row(
        "Crawl",
        (
            Panel(
                "URLs ended per second, by state",
                "Terminal states the workers reached per second (fetched, failed, robots_denied, "
                "blocked, ...), robots.txt and due dispatches included.",
                (
                    Query(
                        f"sum by (state) (rate({m('streamcrawl_fetch_outcomes_total')}[{RATE}]))",
                        "{{state}}",
                    ),
                ),
                unit="reqps",
                stack=True,
            ),
            Panel(
                "Pages per second, by HTTP status class",
                "Fetched pages by the class of their final status.",
                (
                    Query(
                        "sum by (status_class) "
                        f"(rate({m('streamcrawl_fetch_pages_total')}[{RATE}]))",
                        "{{status_class}}",
                    ),
                ),
                unit="reqps",
                stack=True,
            ),
            Panel(
                "Fetch latency",
                "Request start to outcome, quantiles over all workers.",
                tuple(
                    Query(quantile(q, "streamcrawl_fetch_latency_seconds"), f"p{int(q * 100)}")
                    for q in (0.5, 0.95, 0.99)
                ),
                unit="s",
            ),
            Panel(
                "Body bytes per second",
                "Bytes of fetched page bodies, as received (before decompression).",
                (Query(f"sum(rate({m('streamcrawl_fetch_bytes_total')}[{RATE}]))", "bytes"),),
                unit="Bps",
            ),
        ),
    ),
    Row(
        "Frontier and politeness",
        (
            Panel(
                "Queued URLs",
                "URLs waiting in the frontier, per partition (origins in memory as last seen, "
                "the others as of the last walk of the table).",
                (
                    Query(
                        f"sum by (partition) ({m('streamcrawl_frontier_queue_size')})",
                        "partition {{partition}}",
                    ),
                ),
                stack=True,
            ),
            Panel(
                "Origins by what holds them",
                "Origins with work: fetching (a request in flight or its outcome not applied), "
                "ready (may start now, no capacity yet), waiting (politeness delay, backoff, "
                "pause, revisit not due).",
                (
                    Query(
                        f"sum by (state) ({m('streamcrawl_scheduler_origins_by_state')})",
                        "{{state}}",
                    ),
                ),
                stack=True,
            ),
            Panel(
                "Politeness-bound vs CPU-bound",
                "Share of origins with work that wait out their politeness delay (the crawl "
                "is politeness-bound when it is high), share that could start now but wait "
                "for capacity, and each worker's CPU in cores (a worker near 1 is CPU-bound).",
                (
                    Query(share_of_origins("waiting"), "politeness-bound share"),
                    Query(share_of_origins("ready"), "capacity-bound share"),
                    Query(
                        f"rate({m('process_cpu_seconds_total')}[{RATE}])",
                        "CPU {{instance}}",
                    ),
                ),
                unit="percentunit",
            ),
            Panel(
                "Politeness gap and turnaround",
                "Median time between two request starts on one origin (at or above its delay), "
                "and from a request's end to its origin's next start (the wiring's latency).",
                (
                    Query(quantile(0.5, "streamcrawl_scheduler_politeness_wait_seconds"), "gap"),
                    Query(quantile(0.5, "streamcrawl_scheduler_turnaround_seconds"), "turnaround"),
                ),
                unit="s",
            ),
        ),
    ),
    Row(
        "Kafka",
        (
            Panel(
                "Consumer lag per partition",
                "Messages of frontier and outcomes not consumed yet by the workers' group.",
                (
                    Query(
                        f"sum by (topic, partition) ({m('streamcrawl_kafka_consumer_lag')})",
                        "{{topic}}/{{partition}}",
                    ),
                ),
            ),
            Panel(
                "Rebalances and partitions",
                "Assignments received per interval, and frontier partitions each worker owns.",
                (
                    Query(
                        f"sum(increase({m('streamcrawl_kafka_rebalances_total')}[{RATE}]))",
                        "rebalances",
                    ),
                    Query(
                        f"sum by (instance) ({m('streamcrawl_kafka_partitions_assigned')})",
                        "partitions {{instance}}",
                    ),
                ),
            ),
            Panel(
                "Messages produced per second, by topic",
                "Messages the workers produced.",
                (
                    Query(
                        f"sum by (topic) (rate({m('streamcrawl_kafka_messages_sent_total')}"
                        f"[{RATE}]))",
                        "{{topic}}",
                    ),
                ),
                unit="ops",
            ),
        ),
    ),
    Row(
        "Sink",
        (
            Panel(
                "Sink write latency",
                "Duration of one Cassandra batch write.",
                tuple(
                    Query(quantile(q, "streamcrawl_sink_write_latency_seconds"), f"p{int(q * 100)}")
                    for q in (0.5, 0.95)
                ),
                unit="s",
            ),
            Panel(
                "Sink lag and rows",
                "Messages of pages and status not written to Cassandra yet, and rows written "
                "per second.",
                (
                    Query(f"sum({m('streamcrawl_sink_consumer_lag')})", "lag"),
                    Query(
                        f"sum by (kind) (rate({m('streamcrawl_sink_records_total')}[{RATE}]))",
                        "{{kind}} rows/s",
                    ),
                ),
            ),
        ),
    ),
    Row(
        "Errors and health",
        (
            Panel(
                "Errors by class",
                "Per second: URLs that failed, were blocked by the SSRF guard or denied by "
                "robots.txt; stage failures; reports not published; sink retries; undecodable "
                "messages; changelog partitions a table recovery sought again.",
                (
                    Query(
                        "sum by (state) (rate("
                        + m(
                            "streamcrawl_frontier_terminal_total",
                            'state=~"failed|blocked|robots_denied"',
                        )
                        + f"[{RATE}]))",
                        "{{state}}",
                    ),
                    Query(
                        f"sum by (kind) (rate({m('streamcrawl_pipeline_stage_failures_total')}"
                        f"[{RATE}]))",
                        "stage failure {{kind}}",
                    ),
                    Query(
                        f"sum by (what) (rate({m('streamcrawl_kafka_publish_failures_total')}"
                        f"[{RATE}]))",
                        "not published: {{what}}",
                    ),
                    Query(
                        f"sum by (reason) (rate({m('streamcrawl_sink_retries_total')}[{RATE}]))",
                        "sink retry {{reason}}",
                    ),
                    Query(
                        f"sum by (topic) (rate({m('streamcrawl_kafka_bad_messages_total')}"
                        f"[{RATE}]))",
                        "bad message {{topic}}",
                    ),
                    Query(
                        f"sum(rate({m('streamcrawl_tables_recovery_reseeks_total')}[{RATE}]))",
                        "table recovery sought again",
                    ),
                ),
                unit="ops",
            ),
            Panel(
                "Workers ready and services up",
                "Workers ready (/readyz), and each dependency as the workers' probes see it.",
                (
                    Query(f"sum({m('streamcrawl_worker_ready')})", "ready workers"),
                    Query(
                        f"min by (dependency) ({m('streamcrawl_health_up')})",
                        "{{dependency}} up",
                    ),
                ),
            ),
            Panel(
                "Table recovery",
                "Seconds each worker's running table recovery has taken (0: none runs).",
                (
                    Query(
                        f"max by (instance) ({m('streamcrawl_tables_recovery_seconds')})",
                        "{{instance}}",
                    ),
                ),
                unit="s",
            ),
            Panel(
                "State volume and memory",
                "Free share of each worker's state volume, and its resident memory.",
                (
                    Query(
                        f"{m('streamcrawl_state_volume_free_bytes')} / "
                        f"{m('streamcrawl_state_volume_size_bytes')}",
                        "free {{instance}}",
                    ),
                    Query(
                        f"{m('process_resident_memory_bytes')}",
                        "RSS {{instance}}",
                    ),
                ),
                unit="percentunit",
                extra={
                    "overrides": [
                        {
                            "matcher": {"id": "byRegexp", "options": "RSS.*"},
                            "properties": [{"id": "unit", "value": "bytes"}],
                        }
                    ]
                },
            ),
        ),
    ),
)


def queries() -> list[tuple[str, str]]:
    """(panel title, expr) of every query of the dashboard."""
    return [(p.title, q.expr) for row in PANELS for p in row.panels for q in p.queries]


def _variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": name},
        "definition": query,
        "refresh": 2,  # on time range change
        "includeAll": True,
        "multi": True,
        "current": {"text": "All", "value": "$__all"},
        "allValue": ".*",
        "sort": 1,
    }


def _panel(p: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": p.unit}
    if p.kind == "timeseries":
        defaults["custom"] = {
            "drawStyle": "line",
            "fillOpacity": 20 if p.stack else 0,
            "stacking": {"mode": "normal" if p.stack else "none", "group": "A"},
        }
    return {
        "id": pid,
        "type": p.kind,
        "title": p.title,
        "description": p.description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": x, "y": y, "w": p.width, "h": 8},
        "fieldConfig": {"defaults": defaults, "overrides": p.extra.get("overrides", [])},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [
            {
                "refId": chr(ord("A") + i),
                "expr": q.expr,
                "legendFormat": q.legend or "__auto",
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
            }
            for i, q in enumerate(p.queries)
        ],
    }


def dashboard() -> dict[str, Any]:
    """Grafana's JSON model of the dashboard (schema 39, Grafana 10/11)."""
    panels: list[dict[str, Any]] = []
    pid, y = 1, 0
    for row in PANELS:
        panels.append(
            {"id": pid, "type": "row", "title": row.title, "collapsed": False,
             "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []}
        )  # fmt: skip
        pid, y, x = pid + 1, y + 1, 0
        for p in row.panels:
            if x + p.width > 24:
                x, y = 0, y + 8
            panels.append(_panel(p, pid, x, y))
            pid, x = pid + 1, x + p.width
        y += 8
    return {
        "uid": UID,
        "title": "streamcrawl",
        "description": "A streamcrawl crawl: rates, latency, frontier, politeness, Kafka, sink, "
        "errors (docs/operations.md).",
        "tags": ["streamcrawl", "crawler"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "timezone": "",
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                },
                _variable(
                    "namespace", "Namespace", "label_values(streamcrawl_worker_ready, namespace)"
                ),
                _variable(
                    "job",
                    "Job",
                    'label_values(streamcrawl_worker_ready{namespace=~"$namespace"}, job)',
                ),
            ]
        },
        "annotations": {"list": []},
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamcrawl.topology.admin.dashboard")
    parser.add_argument("--check", action="store_true", help="fail if the chart's copy is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(
                f"{OUT} is stale: run python -m streamcrawl.topology.admin.dashboard",
                file=sys.stderr,
            )
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
