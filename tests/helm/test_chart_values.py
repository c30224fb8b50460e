"""Every chart value has an effect: changed, it changes the rendered manifests. A value nothing
reads is a lie to operators, so each leaf of values.yaml is rendered changed (in the context
that makes it matter: ``serviceMonitor.*`` with the ServiceMonitor on, ...) and compared with
the render without the change. What the env values then do in the worker is
tests/unit/test_settings_effects.py.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamcrawl.topology.settings import Settings
from tests.helm.test_chart import (  # noqa: F401 - helm: a fixture
    CHART,
    SCHEMA_ERROR,
    helm,
    of_kind,
    template,
)

VALUES = yaml.safe_load((CHART / "values.yaml").read_text("utf-8"))

# Values that make the keys under a prefix matter (the longest matching prefix wins).
CONTEXTS: dict[str, dict[str, Any]] = {
    "serviceMonitor.": {"serviceMonitor": {"enabled": True}},
    "prometheusRule.": {"prometheusRule": {"enabled": True}},
    "grafanaDashboard.": {"grafanaDashboard": {"enabled": True}},
    "autoscaling.": {"autoscaling": {"enabled": True}},
    "autoscaling.hpa.": {"autoscaling": {"enabled": True, "type": "hpa"}},
    "autoscaling.type": {"autoscaling": {"enabled": True}},
    "kafka.sasl.": {
        "kafka": {
            "securityProtocol": "SASL_SSL",
            "sasl": {
                "mechanism": "SCRAM-SHA-512",
                "existingSecret": "kafka-user",
                "username": "crawler",
            },
        }
    },
    "kafka.sasl.usernameKey": {
        "kafka": {
            "securityProtocol": "SASL_SSL",
            "sasl": {
                "mechanism": "SCRAM-SHA-512",
                "existingSecret": "kafka-user",
                "usernameKey": "user",
            },
        }
    },
    "kafka.tls.": {"kafka": {"securityProtocol": "SSL", "tls": {"caSecret": "kafka-ca"}}},
    "kafka.acks": {"kafka": {"idempotence": False}},  # idempotence needs acks all
    "cassandra.auth.": {"cassandra": {"auth": {"existingSecret": "cassandra-user"}}},
    "cassandra.tls.ca": {"cassandra": {"tls": {"enabled": True, "caSecret": "cassandra-ca"}}},
    "warc.": {"warc": {"enabled": True}},
    "renderWorker.": {"renderWorker": {"enabled": True}},
    "renderWorker.autoscaling.": {
        "renderWorker": {"enabled": True, "autoscaling": {"enabled": True}}
    },
    "networkPolicy.": {
        "networkPolicy": {
            "enabled": True,
            "kafka": [{"ipBlock": {"cidr": "10.1.0.0/16"}}],
            "cassandra": [{"ipBlock": {"cidr": "10.2.0.0/16"}}],
        }
    },
    "networkPolicy.proxy": {
        "networkPolicy": {
            "enabled": True,
            "kafka": [{"ipBlock": {"cidr": "10.1.0.0/16"}}],
            "cassandra": [{"ipBlock": {"cidr": "10.2.0.0/16"}}],
            "proxy": [{"ipBlock": {"cidr": "10.8.0.0/16"}}],
        },
        "worker": {"proxy": {"url": "http://proxy.internal:3128"}},
    },
    # noProxyFor and credential need a proxy, and the credential the Secret it is read from.
    "worker.proxy.": {
        "worker": {
            "proxy": {"url": "http://proxy.internal:3128"},
            "credentials": {"secretName": "streamcrawl-credentials"},
        }
    },
}

# New values where the generic change (flip, +1, a new string) would not be a valid value.
CHANGES: dict[str, Any] = {
    "image.pullPolicy": "Always",
    "image.digest": "sha256:" + "0" * 64,
    "kafka.securityProtocol": "SSL",
    "kafka.sasl.mechanism": "SCRAM-SHA-256",
    "networkPolicy.dns": [{"namespaceSelector": {"matchLabels": {"name": "dns"}}}],
    "networkPolicy.kafka": [{"ipBlock": {"cidr": "10.3.0.0/16"}}],
    "networkPolicy.cassandra": [{"ipBlock": {"cidr": "10.4.0.0/16"}}],
    "networkPolicy.proxy": [{"ipBlock": {"cidr": "10.9.0.0/16"}}],
    "kafka.tls.caSecret": "other-ca",
    "cassandra.keyspace": "other_ks",
    "cassandra.replication": "{'class': 'SimpleStrategy', 'replication_factor': 1}",
    "cassandra.writeConsistency": "QUORUM",
    "cassandra.readConsistency": "ONE",
    "kafka.acks": "1",
    "worker.replicas": 2,
    "worker.logLevel": "DEBUG",
    "worker.allowNetworks": ["10.0.0.0/8"],
    "worker.proxy.url": "http://egress.internal:8080",
    "worker.proxy.noProxyFor": ["example.org"],
    "worker.proxy.credential": "PROXY",
    "worker.extraEnv": [{"name": "TZ", "value": "UTC"}],
    "worker.resources.requests.cpu": "750m",
    "worker.resources.requests.memory": "1536Mi",
    "worker.resources.limits.memory": "3Gi",
    "worker.podSecurityContext.fsGroupChangePolicy": "Always",
    "worker.podSecurityContext.seccompProfile.type": "Unconfined",
    "worker.podSecurityContext.runAsNonRoot": False,
    "worker.securityContext.runAsNonRoot": False,
    "worker.securityContext.capabilities.drop": ["ALL", "NET_RAW"],
    "worker.tmpSizeLimit": "512Mi",
    "worker.tolerations": [{"key": "crawl", "operator": "Exists", "effect": "NoSchedule"}],
    "worker.topologySpreadConstraints": VALUES["worker"]["topologySpreadConstraints"][:1],
    "worker.persistence.size": "20Gi",
    "worker.persistence.accessModes": ["ReadWriteMany"],
    "worker.persistence.whenDeleted": "Delete",
    "worker.persistence.whenScaled": "Delete",
    "imagePullSecrets": [{"name": "regcred"}],
    "serviceMonitor.interval": "60s",
    "serviceMonitor.scrapeTimeout": "20s",
    "prometheusRule.runbookBaseUrl": "https://wiki.example.com/crawl",
    "autoscaling.type": "hpa",
    "autoscaling.minReplicas": 2,
    "autoscaling.maxReplicas": 11,
    "autoscaling.topic": "outcomes",
    "autoscaling.behavior.scaleDown.policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}],
    "autoscaling.behavior.scaleUp.policies": [{"type": "Pods", "value": 3, "periodSeconds": 60}],
    "hooks.resources.requests.cpu": "200m",
    "hooks.resources.requests.memory": "384Mi",
    "hooks.resources.limits.memory": "768Mi",
    "seedDefaults.recrawlAfter": "1d",
    "seedDefaults.recrawlMin": "1h",
    "seedDefaults.recrawlMax": "30d",
    "seedDefaults.recrawlMode": "fixed",
    "warc.maxSize": "500M",
    "warc.resources.requests.cpu": "200m",
    "warc.resources.requests.memory": "384Mi",
    "warc.resources.limits.memory": "1Gi",
    "warc.tolerations": [{"key": "archive", "operator": "Exists", "effect": "NoSchedule"}],
    "warc.persistence.size": "1Ti",
    "warc.persistence.accessModes": ["ReadWriteOncePod"],
    "warc.persistence.whenDeleted": "Delete",
    "warc.persistence.whenScaled": "Delete",
    "renderWorker.resources.requests.cpu": "1500m",
    "renderWorker.resources.requests.memory": "2Gi",
    "renderWorker.resources.limits.memory": "4Gi",
    "renderWorker.tmpSizeLimit": "2Gi",
    "renderWorker.tolerations": [{"key": "render", "operator": "Exists", "effect": "NoSchedule"}],
}


def leaves(values: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every leaf; an empty dict or any list is a leaf."""
    if isinstance(values, dict) and values:
        for key, value in values.items():
            yield from leaves(value, (*path, key))
    else:
        yield ".".join(path), values


def changed(path: str, value: Any) -> Any:
    if path in CHANGES:
        return CHANGES[path]
    if isinstance(value, bool):
        return not value
    if isinstance(value, float):
        return value / 2
    if isinstance(value, str) and re.fullmatch(r"[0-9]+[smhdwy]", value):
        return f"{int(value[:-1]) + 1}{value[-1]}"  # a Prometheus duration, one unit longer
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return "changed" if value == "" else f"changed-{value}"
    if isinstance(value, dict):
        return {"example.com/changed": "yes"}
    if isinstance(value, list) and value and isinstance(value[0], str):
        return value[:-1]
    raise AssertionError(f"no change defined for {path}={value!r}: add one to CHANGES")


def nested(path: str, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    node = out
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return out


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def lookup(values: dict[str, Any], path: str, default: Any) -> Any:
    node: Any = values
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


def context(path: str) -> dict[str, Any]:
    matches = [p for p in CONTEXTS if path.startswith(p)]
    return CONTEXTS[max(matches, key=len)] if matches else {}


def render(helm_bin: str, values: dict[str, Any], tmp_path: Path, name: str) -> str:
    file = tmp_path / f"{name}.yaml"
    file.write_text(yaml.safe_dump(values), "utf-8")
    proc = template(helm_bin, "-f", str(file))
    assert proc.returncode == 0, f"helm template failed ({name}):\n{proc.stderr}"
    return proc.stdout


@pytest.mark.parametrize(
    ("path", "value"), list(leaves(VALUES)), ids=[p for p, _ in leaves(VALUES)]
)
def test_the_value_changes_the_manifests(
    helm: str,  # noqa: F811
    tmp_path: Path,
    path: str,
    value: Any,
) -> None:
    base = context(path)
    value = lookup(base, path, value)  # the context may set the value itself (``enabled``)
    new = changed(path, value)
    assert new != value
    before = render(helm, base, tmp_path, "before")
    after = render(helm, merge(base, nested(path, new)), tmp_path, "after")
    assert after != before, f"{path}: {value!r} -> {new!r} changes nothing in the manifests"


@pytest.mark.parametrize(("value", "expected"), [(None, 30.0), (7.5, 7.5), (600, 600.0)])
def test_unready_after_reaches_the_workers_health(
    helm: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    value: float | None,
    expected: float,
) -> None:
    """``worker.unreadyAfterS`` is the worker's ``unready_after_s`` (default 30 s: the
    setting's own default), as a number the settings accept."""
    values = {} if value is None else {"worker": {"unreadyAfterS": value}}
    docs = [d for d in yaml.safe_load_all(render(helm, values, tmp_path, "unready")) if d]
    (data,) = [cm["data"] for cm in of_kind(docs, "ConfigMap")]
    monkeypatch.setenv("STREAMCRAWL_UNREADY_AFTER_S", data["STREAMCRAWL_UNREADY_AFTER_S"])
    assert Settings().unready_after_s == expected
    assert Settings.model_fields["unready_after_s"].default == VALUES["worker"]["unreadyAfterS"]


@pytest.mark.parametrize("value", [0.5, 3601, "30"])
def test_unready_after_is_bounded_like_the_setting(
    helm: str,  # noqa: F811
    tmp_path: Path,
    value: object,
) -> None:
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump({"worker": {"unreadyAfterS": value}}), "utf-8")
    assert template(helm, "-f", str(file)).returncode != 0


def test_seed_defaults_render_only_when_set(
    helm: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``seedDefaults`` are the worker pods' ``seed_*`` settings when set, and absent when empty
    (the default: a crawl seeded there fetches each URL once unless its flags say otherwise)."""
    seed = {"recrawlAfter": "1d", "recrawlMin": "2h", "recrawlMax": "30d", "recrawlMode": "fixed"}
    values = {"seedDefaults": seed | {"keepVersions": 5, "warc": True}}
    docs = [d for d in yaml.safe_load_all(render(helm, values, tmp_path, "seed")) if d]
    (data,) = [cm["data"] for cm in of_kind(docs, "ConfigMap")]
    assert {k: v for k, v in data.items() if k.startswith("STREAMCRAWL_SEED_")} == {
        "STREAMCRAWL_SEED_RECRAWL_AFTER": "1d",
        "STREAMCRAWL_SEED_RECRAWL_MIN": "2h",
        "STREAMCRAWL_SEED_RECRAWL_MAX": "30d",
        "STREAMCRAWL_SEED_RECRAWL_MODE": "fixed",
        "STREAMCRAWL_SEED_KEEP_VERSIONS": "5",
        "STREAMCRAWL_SEED_WARC": "true",
    }
    for name, value in data.items():
        monkeypatch.setenv(name, value)
    assert Settings().seed_policy() == {
        "recrawl_after": 86_400.0,
        "recrawl_min": 7_200.0,
        "recrawl_max": 30 * 86_400.0,
        "recrawl_mode": "fixed",
        "keep_versions": 5,
        "warc": True,
    }
    docs = [d for d in yaml.safe_load_all(render(helm, {}, tmp_path, "default")) if d]
    (data,) = [cm["data"] for cm in of_kind(docs, "ConfigMap")]
    assert not [k for k in data if k.startswith("STREAMCRAWL_SEED_")]


@pytest.mark.parametrize(
    "seed",
    [
        {"recrawlAfter": "soon"},
        {"recrawlMin": "1 fortnight"},
        {"recrawlMax": 3600},
        {"recrawlMode": "weekly"},
        {"keepVersions": 101},
    ],
    ids=["not-a-duration", "bad-unit", "not-text", "bad-mode", "too-many-versions"],
)
def test_the_schema_refuses_bad_seed_defaults(
    helm: str,  # noqa: F811
    tmp_path: Path,
    seed: dict[str, Any],
) -> None:
    """Caught at render. The bounds (1 s to 365 d; min <= after <= max) are the settings' own
    check, which fails the setup hooks (when on) before the workers roll."""
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump({"seedDefaults": seed}), "utf-8")
    proc = template(helm, "-f", str(file))
    assert proc.returncode != 0 and SCHEMA_ERROR in proc.stderr, proc.stderr


def test_the_chart_defaults_are_the_replicated_production_values(
    helm: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The chart installs on a cluster of 3+ brokers and Cassandra nodes: its defaults are the
    values that survive one of each lost (docs/kubernetes.md), unlike the settings' own
    defaults, which fit a single broker and node (a laptop)."""
    docs = [d for d in yaml.safe_load_all(render(helm, {}, tmp_path, "default")) if d]
    (data,) = [cm["data"] for cm in of_kind(docs, "ConfigMap")]
    for name, value in data.items():
        monkeypatch.setenv(name, value)
    chart = Settings()
    assert (chart.replication_factor, chart.min_insync_replicas) == (3, 2)
    assert (chart.kafka_acks, chart.kafka_idempotence) == ("all", True)
    assert chart.cassandra_replication == "{'class': 'NetworkTopologyStrategy', 'dc1': 3}"
    levels = (chart.cassandra_write_consistency, chart.cassandra_read_consistency)
    assert levels == ("LOCAL_QUORUM", "LOCAL_QUORUM")
    laptop = {name: field.default for name, field in Settings.model_fields.items()}
    assert (laptop["replication_factor"], laptop["min_insync_replicas"]) == (1, 1)
    assert "'replication_factor': 1" in laptop["cassandra_replication"]


@pytest.mark.parametrize(
    ("kafka", "message"),
    [
        ({"replicationFactor": 2, "minInsyncReplicas": 3}, "must not exceed kafka.replication"),
        ({"acks": "1"}, 'kafka.idempotence needs kafka.acks "all"'),
    ],
    ids=["min-isr-above-replication", "idempotence-without-acks-all"],
)
def test_render_fails_on_writes_that_cannot_succeed(
    helm: str,  # noqa: F811
    tmp_path: Path,
    kafka: dict[str, Any],
    message: str,
) -> None:
    """The settings refuse the same combinations (tests/unit/test_replication_settings.py)."""
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump({"kafka": kafka}), "utf-8")
    proc = template(helm, "-f", str(file))
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "values",
    [
        {"kafka": {"acks": 1}},
        {"kafka": {"acks": "0"}},
        {"kafka": {"minInsyncReplicas": 0}},
        {"cassandra": {"writeConsistency": "SERIAL"}},
        {"cassandra": {"readConsistency": "ANY"}},
    ],
    ids=["acks-as-number", "acks-0", "no-insync-replica", "serial-write", "read-at-any"],
)
def test_the_schema_refuses_bad_durability_values(
    helm: str,  # noqa: F811
    tmp_path: Path,
    values: dict[str, Any],
) -> None:
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values), "utf-8")
    proc = template(helm, "-f", str(file))
    assert proc.returncode != 0 and SCHEMA_ERROR in proc.stderr, proc.stderr
