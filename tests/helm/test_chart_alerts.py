"""The chart's alerts (``templates/worker/prometheusrule.yaml``): a PrometheusRule rendered only
when ``prometheusRule.enabled``, whose rules ``promtool check rules`` accepts and whose alerts
``promtool test rules`` sees fire on the series that should fire them and stay quiet on the
others (tests/helm/alerts_test.yaml). promtool comes with Debian's ``prometheus`` package; when
it is missing these tests fail, they never skip.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm.test_chart import CHART, NAMESPACE, ROOT, _render, of_kind, one, template
from tests.helm.test_chart import helm as helm  # the fixture: Helm from scripts/ensure-helm.sh

pytestmark = pytest.mark.timeout(1800)  # the helm fixture may build Helm first

VALUES = yaml.safe_load((CHART / "values.yaml").read_text("utf-8"))
CASES = yaml.safe_load((Path(__file__).parent / "alerts_test.yaml").read_text("utf-8"))
WORKER_JOB = "sc-streamcrawl-worker-headless"
SELECTOR = f'namespace="{NAMESPACE}", job="{WORKER_JOB}"'


@pytest.fixture(scope="session")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: install Debian's `prometheus` package")
    return found


def render(helm: str, tmp_path: Path, values: dict[str, Any]) -> list[dict[str, Any]]:
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values), "utf-8")
    proc = template(helm, "-f", str(file))
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def rules_file(docs: list[dict[str, Any]], tmp_path: Path) -> Path:
    """The PrometheusRule's groups as a Prometheus rule file."""
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(one(docs, "PrometheusRule")["spec"]), "utf-8")
    return path


def alerts(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    groups = one(docs, "PrometheusRule")["spec"]["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"]}


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)


# --- off unless enabled ---------------------------------------------------------------------


def test_no_rule_renders_unless_enabled(helm: str) -> None:
    assert VALUES["prometheusRule"]["enabled"] is False
    assert of_kind(list(_render(helm, "default")), "PrometheusRule") == []


# --- promtool -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="defaults"),
        pytest.param(CASES["chart_values"], id="alerts_test-values"),
        pytest.param(
            yaml.safe_load((CHART / "ci" / "production-values.yaml").read_text("utf-8")),
            id="production-values",
        ),
    ],
)
def test_promtool_accepts_the_rules(
    helm: str, promtool: str, tmp_path: Path, values: dict[str, Any]
) -> None:
    values = values | {"prometheusRule": values.get("prometheusRule", {}) | {"enabled": True}}
    path = rules_file(render(helm, tmp_path, values), tmp_path)
    proc = run(promtool, "check", "rules", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def promtool_tests(rules: Path) -> dict[str, Any]:
    """alerts_test.yaml as promtool reads it: our keys dropped, ``$W`` the default selector."""
    out = {k: v for k, v in CASES.items() if k not in {"chart_values", "labels"}}
    out["rule_files"] = [str(rules)]
    for case in out["tests"]:
        for series in case["input_series"]:
            series["series"] = series["series"].replace("$W", SELECTOR)
    return out


def test_each_alert_fires_when_it_should_and_only_then(
    helm: str, promtool: str, tmp_path: Path
) -> None:
    docs = render(helm, tmp_path, CASES["chart_values"])
    tests = promtool_tests(rules_file(docs, tmp_path))
    checks = [check for case in tests["tests"] for check in case["alert_rule_test"]]
    fired = {c["alertname"] for c in checks if c["exp_alerts"]}
    quiet = {c["alertname"] for c in checks if not c["exp_alerts"]}
    assert fired == quiet == set(alerts(docs)), "each alert needs a firing and a quiet case"
    for check in checks:
        for alert in check["exp_alerts"]:
            assert set(alert["exp_annotations"]) == {"summary", "description", "runbook_url"}
    path = tmp_path / "alerts_test.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False), "utf-8")
    proc = run(promtool, "test", "rules", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- what each alert carries ----------------------------------------------------------------


def test_each_alert_has_a_severity_a_summary_and_its_runbook(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"prometheusRule": {"enabled": True}})
    base = VALUES["prometheusRule"]["runbookBaseUrl"]
    for name, rule in alerts(docs).items():
        short = name.removeprefix("Streamcrawl")  # StreamcrawlCrawlStalled: crawlStalled
        section = VALUES["prometheusRule"][short[0].lower() + short[1:]]
        assert rule["for"] == section["for"], name
        assert rule["labels"] == {"severity": section["severity"]}, name
        notes = rule["annotations"]
        assert notes["summary"] and notes["description"], name
        assert notes["runbook_url"] == f"{base}#{name.lower()}", name


def test_the_runbooks_are_in_the_operations_guide(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"prometheusRule": {"enabled": True}})
    guide = (ROOT / "docs" / "operations.md").read_text("utf-8").splitlines()
    missing = [name for name in alerts(docs) if f"### {name}" not in guide]
    assert not missing, f"docs/operations.md has no runbook for {missing}"


def test_the_rules_read_the_job_the_service_monitor_scrapes(helm: str, tmp_path: Path) -> None:
    """The Prometheus Operator names a ServiceMonitor's job after the Service it selects."""
    docs = render(
        helm, tmp_path, {"prometheusRule": {"enabled": True}, "serviceMonitor": {"enabled": True}}
    )
    monitor = one(docs, "ServiceMonitor")
    (service,) = [
        s
        for s in of_kind(docs, "Service")
        if monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
    ]
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]
    assert service["metadata"]["name"] == WORKER_JOB
    for name, rule in alerts(docs).items():
        assert "{" + SELECTOR in rule["expr"], name


def test_the_selector_labels_and_runbook_values_reach_the_rules(helm: str, tmp_path: Path) -> None:
    values = {
        "prometheusRule": {
            "enabled": True,
            "selector": 'job="crawlers"',
            "labels": {"release": "kube-prometheus-stack"},
            "alertLabels": {"team": "crawl"},
            "runbookBaseUrl": "https://wiki.example.com/crawl",
        }
    }
    docs = render(helm, tmp_path, values)
    rule = one(docs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    for name, alert in alerts(docs).items():
        assert SELECTOR not in alert["expr"] and '{job="crawlers"' in alert["expr"], name
        assert alert["labels"]["team"] == "crawl", name
        assert alert["annotations"]["runbook_url"].startswith("https://wiki.example.com/crawl#")
