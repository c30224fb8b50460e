"""The chart's ``warc`` component: the WARC writer StatefulSet (``streamcrawl warc --out /warc``),
rendered only when ``warc.enabled``, with the workers' Kafka settings and credentials and a
volume per pod. The generic checks (Kubernetes schemas, env names, credentials from Secrets,
CLI args the parser accepts) run over it through ci/production-values.yaml in test_chart.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from streamcrawl.topology.cli.main import build_parser
from streamcrawl.topology.settings import Settings, env_names
from tests.helm.test_chart import (
    CHART,
    SCHEMA_ERROR,
    _render,
    container_env,
    of_kind,
    settings_from_env,
    statefulset,
    template,
)
from tests.helm.test_chart import helm as helm  # the fixture: Helm from scripts/ensure-helm.sh

PRODUCTION = yaml.safe_load((CHART / "ci" / "production-values.yaml").read_text("utf-8"))


def writer(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(StatefulSet, pod spec, container) of the WARC writer."""
    sts = statefulset(docs, "warc")
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return sts, pod, container


def test_nothing_of_the_writer_renders_unless_enabled(helm: str) -> None:
    docs = list(_render(helm, "default"))
    components = {d["metadata"]["labels"].get("app.kubernetes.io/component") for d in docs}
    assert "warc" not in components
    assert [d["metadata"]["name"] for d in of_kind(docs, "StatefulSet")] == [
        "sc-streamcrawl-worker"
    ]


def test_the_writer_runs_warc_into_its_volume(helm: str) -> None:
    sts, pod, container = writer(list(_render(helm, "ci/production-values.yaml")))
    args = build_parser().parse_args(container["args"])
    values = PRODUCTION["warc"]
    assert (args.command, args.warc_action, args.out) == ("warc", None, Path("/warc"))
    assert (args.warc_max_size, args.prefix) == (5 << 30, "streamcrawl")
    assert sts["spec"]["replicas"] == values["replicas"]
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == values["persistence"]["size"]
    assert claim["spec"]["storageClassName"] == values["persistence"]["storageClassName"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == "/warc"
    assert pod["nodeSelector"] == values["nodeSelector"]
    assert pod["tolerations"] == values["tolerations"]
    assert pod["terminationGracePeriodSeconds"] >= 10  # a batch is written, synced, committed


def test_the_writer_gets_the_workers_kafka_settings_and_credentials(
    helm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = list(_render(helm, "ci/production-values.yaml"))
    _, pod, container = writer(docs)
    worker = statefulset(docs)
    worker_pod = worker["spec"]["template"]["spec"]
    env = container_env(docs, container)
    assert env == container_env(docs, worker_pod["containers"][0])
    assert (
        env["STREAMCRAWL_KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"]
        == (PRODUCTION["kafka"]["sasl"]["existingSecret"])
    )
    worker_volumes = {v["name"]: v for v in worker_pod["volumes"]}
    assert {v["name"]: v for v in pod["volumes"]} == {
        name: v for name, v in worker_volumes.items() if name != "state"
    }
    for name in env_names():
        monkeypatch.delenv(name, raising=False)
    for name, value in settings_from_env(env).items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert (settings.kafka_security_protocol, settings.topic_prefix) == ("SASL_SSL", "crawl.prod")


def test_the_writer_runs_as_the_workers_do(helm: str) -> None:
    docs = list(_render(helm, "ci/production-values.yaml"))
    sts, pod, container = writer(docs)
    worker_pod = statefulset(docs)["spec"]["template"]["spec"]
    assert pod["securityContext"] == worker_pod["securityContext"]
    assert container["securityContext"] == worker_pod["containers"][0]["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # Its own pods: no worker Service, budget, scaler or NetworkPolicy selects them.
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"].items() <= labels.items()
    for doc in docs:
        selector = doc.get("spec", {}).get("selector")
        if doc["kind"] in {"Service", "PodDisruptionBudget"}:
            assert not selector.get("matchLabels", selector).items() <= labels.items()
    for policy in of_kind(docs, "NetworkPolicy"):
        assert not policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


def test_seed_defaults_warc_reaches_the_pods(helm: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``seedDefaults.warc`` makes `streamcrawl seed` run in the pods archive every crawl
    (its effect on the published policy: tests/unit/test_seed_defaults.py)."""
    for case, expected in (("default", False), ("ci/production-values.yaml", True)):
        (config,) = of_kind(list(_render(helm, case)), "ConfigMap")
        for name in env_names():
            monkeypatch.delenv(name, raising=False)
        for name, value in config["data"].items():
            monkeypatch.setenv(name, value)
        assert Settings().seed_warc is expected
        assert ("STREAMCRAWL_SEED_WARC" in config["data"]) is expected


@pytest.mark.parametrize(
    "values",
    [
        "warc:\n  maxSize: big\n",
        "warc:\n  maxSize: 0G\n",
        "warc:\n  prefix: 'a/b'\n",
        "warc:\n  persistence:\n    accessModes: []\n",
        "seedDefaults:\n  warc: 'yes'\n",
    ],
    ids=["size-not-a-size", "size-zero", "prefix-with-slash", "no-access-mode", "seed-not-bool"],
)
def test_the_schema_refuses_bad_writer_values(helm: str, tmp_path: Path, values: str) -> None:
    file = tmp_path / "values.yaml"
    file.write_text(values, "utf-8")
    proc = template(helm, "-f", str(file))
    assert proc.returncode != 0 and SCHEMA_ERROR in proc.stderr, proc.stderr
