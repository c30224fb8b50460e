"""The dashboard's queries and the chart's alert rules, against a real Prometheus.

Debian's ``prometheus`` (``.ci/run`` installs it) runs on loopback and scrapes a real worker
every second while it crawls a local site with pages, a robots.txt denial and a seed the SSRF
guard blocks. Each query of ``topology/admin/dashboard.py`` (``$__rate_interval`` and the
variables filled in as Grafana would) must succeed and return at least one series with a number
in it, and the dashboard's variables must list the scrape's namespace and job.

The same Prometheus evaluates the chart's PrometheusRule (rendered by Helm, every ``for`` set to
0 s so that a rule true for one evaluation fires): on the real series every rule evaluates
without error and none fires once the healthy crawl is done; then the worker is killed and
StreamcrawlWorkerDown fires. (Each alert on synthetic series: tests/helm/test_chart_alerts.py.)
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamcrawl.topology.admin import dashboard
from tests.helm.test_chart import CHART
from tests.helm.test_chart import helm as helm  # the fixture: Helm from scripts/ensure-helm.sh
from tests.helm.test_chart_alerts import render, rules_file
from tests.httpserver import RecordingServer, html, text
from tests.integration.site import Cluster, Worker, free_port

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration]

NAMESPACE, JOB, POD = "crawl-test", "streamcrawl-worker", "w1"
RATE_INTERVAL = "40s"  # Grafana's $__rate_interval for a 1 s scrape and a 10-minute range


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:  # a failure, not a skip: CI installs Debian's prometheus (.ci/run)
        pytest.fail("prometheus is not installed: apt-get install prometheus (see .ci/run)")
    return found


class Prometheus:
    def __init__(self, tmp: Path, target_port: int, rules: Path) -> None:
        self.port = free_port()
        config = tmp / "prometheus.yml"
        config.write_text(
            json.dumps(  # YAML is a superset of JSON
                {
                    "global": {
                        "scrape_interval": "1s",
                        "scrape_timeout": "1s",
                        "evaluation_interval": "1s",
                    },
                    "rule_files": [str(rules)],
                    "scrape_configs": [
                        {
                            "job_name": JOB,
                            "static_configs": [
                                {
                                    "targets": [f"127.0.0.1:{target_port}"],
                                    "labels": {"namespace": NAMESPACE, "pod": POD},
                                }
                            ],
                        }
                    ],
                }
            )
        )
        self.log = tmp / "prometheus.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    prometheus_binary(),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=log,
            )

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:  # a bad query: 400 with the parser's error
            return json.loads(exc.read())

    def wait_up(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-2000:]
            try:
                targets = self.api("targets")["data"]["activeTargets"]
            except OSError:
                targets = []
            if targets and targets[0]["health"] == "up":
                return
            time.sleep(0.5)
        raise AssertionError(
            f"prometheus did not scrape the worker: {self.log.read_text()[-2000:]}"
        )

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster.create(tmp_path, partitions=2)
    try:
        yield cluster
    finally:
        cluster.stop_all()


def alert_rules(helm: str, tmp_path: Path, prefix: str) -> Path:
    """The chart's rules for this test's scrape and topics, each firing after one evaluation."""
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())["prometheusRule"]
    rules: dict[str, Any] = {
        "enabled": True,
        "selector": f'namespace="{NAMESPACE}", job="{JOB}"',
        # This machine's disk is not the state volume the chart sizes: only a 1 % floor.
        "stateVolumeFilling": {"freeRatio": 0.01},
        "stateVolumeAlmostFull": {"freeRatio": 0.01},
    }
    for name, alert in defaults.items():
        if isinstance(alert, dict) and "for" in alert:
            rules.setdefault(name, {})["for"] = "0s"
    docs = render(helm, tmp_path, {"prometheusRule": rules, "kafka": {"topicPrefix": prefix}})
    return rules_file(docs, tmp_path)


def firing(prom: Prometheus) -> list[dict[str, Any]]:
    return [a for a in prom.api("alerts")["data"]["alerts"] if a["state"] == "firing"]


def grafana(expr: str) -> str:
    """``expr`` with the dashboard's variables filled in as Grafana does."""
    return (
        expr.replace("$__rate_interval", RATE_INTERVAL)
        .replace("$namespace", NAMESPACE)
        .replace("$job", JOB)
    )


def site(srv: RecordingServer, pages: int) -> None:
    srv.routes["/robots.txt"] = text("User-agent: *\nDisallow: /private\n")
    links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(pages))
    srv.routes["/"] = html(
        f'<title>home</title>{links}<a href="/private/x">private</a><a href="/missing">404</a>'
    )
    for i in range(pages):
        srv.routes[f"/p{i}"] = html(f"<title>p{i}</title>" + "x" * 2000)


def test_dashboard_queries_and_alert_rules_on_a_real_prometheus(
    tmp_path: Path, cluster: Cluster, helm: str
) -> None:
    prom: Prometheus | None = None
    pages = 24
    rules = alert_rules(helm, tmp_path, cluster.env["STREAMCRAWL_TOPIC_PREFIX"])
    try:
        with RecordingServer() as srv:
            site(srv, pages)
            worker: Worker = cluster.start_worker("w1")
            prom = Prometheus(tmp_path, worker.port, rules)
            worker.wait_ready()
            prom.wait_up()
            # 0.5 s apart: the crawl lasts ~15 s, so Prometheus scrapes it many times.
            # A second seed on an address the SSRF guard refuses (nothing is sent to it).
            cluster.seed([srv.url("/"), "http://10.255.255.1/"], "dash", "--delay", "0.5")
            # the pages, /, /missing, /private/x, the blocked seed
            states = cluster.wait_states(pages + 4, timeout=120)
            assert states[srv.url("/private/x")] == "robots_denied"
            assert states["http://10.255.255.1/"] == "blocked"
            time.sleep(3)  # the last scrapes after the sink's writes
            now = str(time.time())
            empty: list[str] = []
            for title, expr in dashboard.queries():
                answer = prom.api("query", query=grafana(expr), time=now)
                assert answer["status"] == "success", (title, expr, answer)
                values = [float(r["value"][1]) for r in answer["data"]["result"]]
                if not any(math.isfinite(v) for v in values):
                    empty.append(f"{title}: {expr} -> {answer['data']['result']}")
            assert empty == []
            # The census behind the politeness panel saw the crawl's origin while it ran
            # (whether it was waiting or ready depends on this machine's load, so which one is
            # tests/unit/test_scheduler.py's to check).
            census = grafana(f"sum({dashboard.m('streamcrawl_scheduler_origins_by_state')})")
            seen = prom.api("query", query=f"max_over_time(({census})[60s:1s])", time=now)
            assert float(seen["data"]["result"][0]["value"][1]) >= 1, seen
            # The variables' queries (label_values) list what the scrape config gave.
            namespaces = prom.api(
                "label/namespace/values", **{"match[]": "streamcrawl_worker_ready"}
            )
            assert namespaces["data"] == [NAMESPACE]
            jobs = prom.api("label/job/values", **{"match[]": "streamcrawl_worker_ready"})
            assert jobs["data"] == [JOB]

            # The alert rules: every one evaluates on the real series, none fires when the
            # crawl is done and healthy...
            groups = prom.api("rules")["data"]["groups"]
            evaluated = [r for g in groups for r in g["rules"]]
            assert len(evaluated) >= 10
            assert [(r["name"], r.get("lastError")) for r in evaluated if r["health"] != "ok"] == []
            assert firing(prom) == []
            # ... and a dead worker fires StreamcrawlWorkerDown for its pod.
            worker.proc.kill()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not firing(prom):
                time.sleep(1)
            names = {(a["labels"]["alertname"], a["labels"].get("pod")) for a in firing(prom)}
            assert ("StreamcrawlWorkerDown", POD) in names, names
    finally:
        if prom is not None:
            prom.stop()
