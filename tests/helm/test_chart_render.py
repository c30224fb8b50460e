"""The chart's ``renderWorker`` component: the render workers' Deployment (``streamcrawl
render-worker``), rendered only when ``renderWorker.enabled``, with the workers' Kafka settings,
credentials and egress, its web port probed and scraped, and its HorizontalPodAutoscaler. The
generic checks (Kubernetes schemas, env names, credentials from Secrets, CLI args the parser
accepts, helm lint) run over it through the ``ci-render`` case of test_chart.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from streamcrawl.topology.cli.main import build_parser
from streamcrawl.topology.settings import Settings, env_names
from tests.helm.test_chart import (
    SCHEMA_ERROR,
    _render,
    container_env,
    of_kind,
    one,
    settings_from_env,
    statefulset,
    template,
)
from tests.helm.test_chart import helm as helm  # the fixture: Helm from scripts/ensure-helm.sh

COMPONENT = "render-worker"


def rendered(helm: str, *values: str) -> list[dict[str, Any]]:
    proc = template(helm, *values)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def component(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        d for d in docs if d["metadata"]["labels"].get("app.kubernetes.io/component") == COMPONENT
    ]


def render_worker(
    docs: list[dict[str, Any]],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(Deployment, pod spec, container) of the render workers."""
    deployment = one(component(docs), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return deployment, pod, container


def loaded(env: dict[str, dict], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings a process with the container's env reads."""
    for name in env_names():
        monkeypatch.delenv(name, raising=False)
    for name, value in settings_from_env(env).items():
        monkeypatch.setenv(name, value)
    return Settings()


def test_nothing_of_the_render_workers_renders_unless_enabled(helm: str) -> None:
    for case in ("default", "ci/production-values.yaml"):
        assert component(list(_render(helm, case))) == [], case
    assert of_kind(list(_render(helm, "default")), "Deployment") == []


def test_the_deployment_runs_render_workers_as_its_values_say(
    helm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = rendered(
        helm,
        "--set",
        "renderWorker.enabled=true,renderWorker.replicas=3,renderWorker.concurrency=4,"
        "renderWorker.webPort=7067,renderWorker.resources.limits.memory=5Gi",
    )
    deployment, _, container = render_worker(docs)
    assert deployment["spec"]["replicas"] == 3
    assert build_parser().parse_args(container["args"]).command == "render-worker"
    settings = loaded(container_env(docs, container), monkeypatch)
    assert (settings.render_concurrency, settings.render_web_port) == (4, 7067)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 7067}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["resources"]["limits"]["memory"] == "5Gi"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert of_kind(docs, "HorizontalPodAutoscaler") == []
    # The chart's image, unless renderWorker.image names one built with Chromium.
    worker_image = statefulset(docs)["spec"]["template"]["spec"]["containers"][0]["image"]
    assert container["image"] == worker_image
    docs = rendered(helm, "--set", "renderWorker.enabled=true,renderWorker.image.tag=1.0-render")
    assert render_worker(docs)[2]["image"] == worker_image.rsplit(":", 1)[0] + ":1.0-render"


def test_render_workers_get_the_workers_settings_credentials_and_security(
    helm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = list(_render(helm, "ci-render"))
    _, pod, container = render_worker(docs)
    worker_pod = statefulset(docs)["spec"]["template"]["spec"]
    (worker,) = worker_pod["containers"]
    env = container_env(docs, container)
    render_only = {"STREAMCRAWL_RENDER_CONCURRENCY", "STREAMCRAWL_RENDER_WEB_PORT"}
    assert {k: v for k, v in env.items() if k not in render_only} == container_env(docs, worker)
    settings = loaded(env, monkeypatch)
    assert (settings.kafka_security_protocol, settings.topic_prefix) == ("SASL_SSL", "crawl.prod")
    # The CAs and /tmp as the workers have them; no state volume (a render worker has none).
    worker_volumes = {v["name"]: v for v in worker_pod["volumes"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes.keys() == worker_volumes.keys()
    for name in volumes.keys() - {"tmp"}:
        assert volumes[name] == worker_volumes[name]
    assert "state" not in {m["name"] for m in container["volumeMounts"]}
    assert pod["securityContext"] == worker_pod["securityContext"]
    assert container["securityContext"] == worker["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_render_workers_scale_with_their_autoscaler(helm: str) -> None:
    docs = list(_render(helm, "ci-render"))
    deployment, _, _ = render_worker(docs)
    assert "replicas" not in deployment["spec"], "the HPA owns the replica count"
    hpa = one(component(docs), "HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 4)
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert metric["resource"]["target"]["averageUtilization"] == 70


def test_the_pod_monitor_scrapes_the_render_workers_metrics_port(helm: str) -> None:
    docs = list(_render(helm, "ci-render"))
    deployment, _, container = render_worker(docs)
    monitor = one(docs, "PodMonitor")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in {p["name"] for p in container["ports"]}
    # Not without the Prometheus Operator's ServiceMonitor switch.
    off = rendered(helm, "--set", "renderWorker.enabled=true")
    assert of_kind(off, "PodMonitor") == []


def test_render_workers_egress_is_the_workers_but_cassandra(helm: str) -> None:
    docs = list(_render(helm, "ci-render"))
    deployment, _, _ = render_worker(docs)
    policies = {p["metadata"]["name"]: p for p in of_kind(docs, "NetworkPolicy")}
    policy = policies[deployment["metadata"]["name"]]
    assert (
        policy["spec"]["podSelector"]["matchLabels"]
        == (deployment["spec"]["selector"]["matchLabels"])
    )
    worker = policies[statefulset(docs)["metadata"]["name"]]
    dns, kafka, _cassandra, public = worker["spec"]["egress"]
    assert policy["spec"]["egress"] == [dns, kafka, public]
    # The worker policy does not select render workers, nor theirs the workers.
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert not worker["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


@pytest.mark.parametrize(
    "values",
    [
        "renderWorker:\n  concurrency: 0\n",
        "renderWorker:\n  webPort: 80\n",
        "renderWorker:\n  autoscaling:\n    targetCPUUtilizationPercentage: 0\n",
        "renderWorker:\n  browser: chromium\n",
    ],
    ids=["no-concurrency", "privileged-port", "no-cpu-target", "unknown-key"],
)
def test_the_schema_refuses_bad_render_worker_values(
    helm: str, tmp_path: Path, values: str
) -> None:
    file = tmp_path / "values.yaml"
    file.write_text(values, "utf-8")
    proc = template(helm, "-f", str(file))
    assert proc.returncode != 0 and SCHEMA_ERROR in proc.stderr, proc.stderr


def test_min_replicas_above_max_fails(helm: str) -> None:
    proc = template(
        helm,
        "--set",
        "renderWorker.enabled=true,renderWorker.autoscaling.enabled=true,"
        "renderWorker.autoscaling.minReplicas=5",
    )
    assert proc.returncode != 0
    assert "renderWorker.autoscaling.minReplicas (5) must not exceed" in proc.stderr
