"""The chart ships the Grafana dashboard as a ConfigMap for Grafana's sidecar, only when
``grafanaDashboard.enabled``, carrying the generated JSON byte for byte."""

from __future__ import annotations

import json

import yaml

from streamcrawl.topology.admin import dashboard
from tests.helm.test_chart import _render, of_kind, template
from tests.helm.test_chart import helm as helm  # the fixture: Helm from scripts/ensure-helm.sh


def dashboards(docs: list[dict]) -> list[dict]:  # type: ignore[type-arg]
    return [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]


def test_no_dashboard_unless_enabled(helm: str) -> None:
    assert dashboards(list(_render(helm, "default"))) == []


def test_the_dashboard_configmap_carries_the_generated_json_and_the_sidecar_label(
    helm: str,
) -> None:
    proc = template(
        helm,
        "--set",
        "grafanaDashboard.enabled=true",
        "--set-string",
        "grafanaDashboard.annotations.grafana_folder=Crawling",
    )
    assert proc.returncode == 0, proc.stderr
    (cm,) = dashboards([d for d in yaml.safe_load_all(proc.stdout) if d])
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Crawling"}
    (name,) = cm["data"]
    assert name.endswith(".json")
    assert json.loads(cm["data"][name]) == dashboard.dashboard()
