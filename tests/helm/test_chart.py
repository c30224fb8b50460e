"""The Helm chart: lints, renders, validates against Kubernetes schemas, and matches the app.

The application's side of the contract is derived from the code, never copied: env names from
``streamcrawl.topology.settings.env_names()``, secret-ness from the ``SecretStr`` fields of
``Settings``, CLI flags from ``streamcrawl.topology.cli.main.build_parser()``. Helm comes from
``scripts/ensure-helm.sh`` (built with ``go install`` into a cache the first time, which takes
minutes); when it cannot be installed these tests fail, they never skip.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import shlex
import subprocess
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError
from pydantic import SecretStr

from streamcrawl.topology.cli.main import build_parser
from streamcrawl.topology.settings import Settings, env_names

# Building helm with `go install` on a cold cache takes ~4 minutes on 2 cores.
pytestmark = pytest.mark.timeout(1800)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "streamcrawl"
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))
RELEASE = "sc"
NAMESPACE = "crawl"
# The newest Kubernetes the installed kubernetes-validate knows; the chart is rendered for it too.
KUBE_VERSION = kubernetes_validate.latest_version()
OLDEST_ACCEPTABLE_KUBE = (1, 33)
# CRD kinds have no schema in kubernetes-validate: checked by targeted assertions below.
CRD_KINDS = {
    "ServiceMonitor": "monitoring.coreos.com/v1",
    "PrometheusRule": "monitoring.coreos.com/v1",
    "PodMonitor": "monitoring.coreos.com/v1",
    "ScaledObject": "keda.sh/v1alpha1",
    "TriggerAuthentication": "keda.sh/v1alpha1",
}
STATE_MOUNT = "/var/lib/streamcrawl"

# Rendering cases: the defaults, every ci/ values file, and variants that reach other branches.
CASES: dict[str, list[str]] = {"default": []}
CASES |= {f"ci/{p.name}": ["-f", str(p)] for p in CI_VALUES}
CASES["ci-hpa"] = [*CASES["ci/production-values.yaml"], "--set", "autoscaling.type=hpa"]
# An egress proxy with a credential, behind the production NetworkPolicy (test_chart_requests.py).
CASES["ci-proxy"] = [
    *CASES["ci/production-values.yaml"],
    "--set-json",
    'worker.proxy={"url": "http://egress.proxy.svc:3128", "credential": "PROXY",'
    ' "noProxyFor": ["example.org", "intranet.example"]}',
    "--set",
    "worker.credentials.secretName=streamcrawl-credentials",
    "--set-json",
    'networkPolicy.proxy=[{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name":'
    ' "proxy"}}, "podSelector": {"matchLabels": {"app": "egress-proxy"}}}]',
]
# The render workers with their autoscaler, behind the production NetworkPolicy and monitoring
# (test_chart_render.py).
CASES["ci-render"] = [
    *CASES["ci/production-values.yaml"],
    "--set",
    "renderWorker.enabled=true,renderWorker.autoscaling.enabled=true",
]
CASES["minimal"] = [
    "--set",
    "serviceAccount.create=false,worker.pdb.enabled=false,hooks.createSchema=false,"
    "kafka.securityProtocol=SSL,kafka.tls.caSecret=kafka-ca,kafka.partitions=1,worker.replicas=1,"
    "kafka.sasl.passwordKey=password",
]


# --- helm -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def helm() -> str:
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "ensure-helm.sh")],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"cannot install helm with scripts/ensure-helm.sh:\n{proc.stderr}")
    return proc.stdout.strip().splitlines()[-1]


def run_helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *args], capture_output=True, text=True, check=False, timeout=300)


def template(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_helm(
        helm,
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--kube-version",
        KUBE_VERSION,
        *args,
    )


@functools.cache
def _render(helm: str, case: str) -> tuple[dict[str, Any], ...]:
    proc = template(helm, *CASES[case])
    assert proc.returncode == 0, f"helm template failed for {case}:\n{proc.stderr}"
    return tuple(d for d in yaml.safe_load_all(proc.stdout) if d)


@pytest.fixture(params=sorted(CASES))
def manifests(request: pytest.FixtureRequest, helm: str) -> list[dict[str, Any]]:
    return list(_render(helm, request.param))


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = of_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def statefulset(docs: list[dict[str, Any]], component: str = "worker") -> dict[str, Any]:
    """The StatefulSet of ``component`` (``worker``, or ``warc``: the WARC writer)."""
    found = [
        d
        for d in of_kind(docs, "StatefulSet")
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == component
    ]
    assert len(found) == 1, f"expected one {component} StatefulSet, got {len(found)}"
    return found[0]


def pod_specs(docs: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for doc in docs:
        if doc["kind"] in {"StatefulSet", "Deployment", "Job", "DaemonSet"}:
            yield doc, doc["spec"]["template"]["spec"]


def streamcrawl_containers(docs: list[dict[str, Any]]) -> Iterator[tuple[dict, dict, dict]]:
    for doc, spec in pod_specs(docs):
        for container in spec.get("containers", []) + spec.get("initContainers", []):
            yield doc, spec, container


def container_env(docs: list[dict[str, Any]], container: dict[str, Any]) -> dict[str, dict]:
    """Every env var the container gets: env entries plus the keys of envFrom ConfigMaps."""
    env = {e["name"]: e for e in container.get("env", [])}
    configmaps = {d["metadata"]["name"]: d for d in of_kind(docs, "ConfigMap")}
    for source in container.get("envFrom", []):
        ref = source.get("configMapRef")
        assert ref, f"envFrom other than a chart ConfigMap: {source}"
        assert ref["name"] in configmaps, (
            f"envFrom names a ConfigMap the chart does not render: {ref}"
        )
        for key, value in configmaps[ref["name"]]["data"].items():
            env.setdefault(key, {"name": key, "value": value})
    return env


def settings_from_env(env: dict[str, dict]) -> dict[str, str]:
    return {n: str(e["value"]) if "value" in e else "from-secret" for n, e in env.items()}


# --- lint and Kubernetes schemas ---------------------------------------------------------------


def test_validation_targets_a_current_kubernetes() -> None:
    major, minor = (int(x) for x in KUBE_VERSION.split(".")[:2])
    assert (major, minor) >= OLDEST_ACCEPTABLE_KUBE, (
        f"kubernetes-validate only knows Kubernetes {KUBE_VERSION}: upgrade it"
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_helm_lint(helm: str, case: str) -> None:
    proc = run_helm(
        helm, "lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION, *CASES[case]
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_manifests_match_kubernetes_schemas(manifests: list[dict[str, Any]]) -> None:
    errors = []
    for doc in manifests:
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] in CRD_KINDS:
            assert doc["apiVersion"] == CRD_KINDS[doc["kind"]], name
            continue
        try:
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{name}: {'.'.join(map(str, exc.path))}: {exc.message}")
        except SchemaNotFoundError as exc:
            errors.append(f"{name}: no schema: {exc}")
    assert not errors, "\n".join(errors)


# --- the application's contract: env names, secrets, CLI flags -------------------------------


def test_env_names_are_exactly_settings_the_app_reads(manifests: list[dict[str, Any]]) -> None:
    known = set(env_names())
    for doc, _, container in streamcrawl_containers(manifests):
        names = set(container_env(manifests, container))
        unknown = {n for n in names if n.startswith("STREAMCRAWL_")} - known
        assert not unknown, f"{doc['kind']}/{container['name']} sets env the app ignores: {unknown}"
    for cm in of_kind(manifests, "ConfigMap"):
        assert set(cm["data"]) <= known, f"ConfigMap keys outside env_names(): {cm['data']}"


def test_rendered_settings_are_valid(
    manifests: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the chart passes must load: the worker would otherwise crash-loop on a bad value."""
    for _, _, container in streamcrawl_containers(manifests):
        for name in env_names():
            monkeypatch.delenv(name, raising=False)
        for name, value in settings_from_env(container_env(manifests, container)).items():
            monkeypatch.setenv(name, value)
        Settings()


def test_allow_networks_reach_the_workers_guard(helm: str, monkeypatch: pytest.MonkeyPatch) -> None:
    proc = template(helm, "--set", "worker.allowNetworks={10.1.0.0/16,fd00::/8}")
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    (data,) = [cm["data"] for cm in of_kind(docs, "ConfigMap")]
    assert data["STREAMCRAWL_ALLOW_NETWORKS"] == "10.1.0.0/16,fd00::/8"
    monkeypatch.setenv("STREAMCRAWL_ALLOW_NETWORKS", data["STREAMCRAWL_ALLOW_NETWORKS"])
    guard = Settings().address_guard()
    assert guard.allows("10.1.2.3") and guard.allows("fd00::1") and not guard.allows("10.2.0.1")
    default = one(list(_render(helm, "default")), "ConfigMap")["data"]
    assert default["STREAMCRAWL_ALLOW_NETWORKS"] == ""  # public addresses only


def secret_env_names() -> set[str]:
    return {
        "STREAMCRAWL_" + name.upper()
        for name, field in Settings.model_fields.items()
        if SecretStr in typing.get_args(field.annotation) or field.annotation is SecretStr
    }


def test_credentials_come_from_existing_secrets(manifests: list[dict[str, Any]]) -> None:
    secret_names = secret_env_names()
    assert "STREAMCRAWL_KAFKA_SASL_PASSWORD" in secret_names
    assert not of_kind(manifests, "Secret"), (
        "the chart must not create Secrets: it uses existing ones"
    )
    for cm in of_kind(manifests, "ConfigMap"):
        assert not set(cm["data"]) & secret_names, "a credential in a ConfigMap"
    for doc, spec, container in streamcrawl_containers(manifests):
        env = container_env(manifests, container)
        for name in secret_names & set(env):
            assert "secretKeyRef" in env[name].get("valueFrom", {}), f"{name} not from a Secret"
        for name in CA_FILES & set(env):
            secret, key = ca_secret_of(spec, container, env[name]["value"])
            assert secret and key, f"{doc['kind']}: {name} is not a key of a mounted Secret"


CA_FILES = {"STREAMCRAWL_KAFKA_SSL_CAFILE", "STREAMCRAWL_CASSANDRA_SSL_CAFILE"}


def ca_secret_of(
    spec: dict[str, Any], container: dict[str, Any], cafile: str
) -> tuple[str | None, str | None]:
    """(Secret name, key) that the file ``cafile`` of the container comes from, or Nones."""
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        if not cafile.startswith(mount["mountPath"] + "/"):
            continue
        secret = volumes[mount["name"]].get("secret")
        if secret is None:
            return None, None
        path = cafile.removeprefix(mount["mountPath"] + "/")
        keys = {item["path"]: item["key"] for item in secret.get("items", [])}
        return secret["secretName"], keys.get(path)
    return None, None


def test_production_values_wire_every_credential(helm: str) -> None:
    docs = list(_render(helm, "ci/production-values.yaml"))
    sts = statefulset(docs)
    env = container_env(docs, sts["spec"]["template"]["spec"]["containers"][0])
    for name in (
        "STREAMCRAWL_KAFKA_SASL_PASSWORD",
        "STREAMCRAWL_CASSANDRA_USERNAME",
        "STREAMCRAWL_CASSANDRA_PASSWORD",
        "STREAMCRAWL_KAFKA_SSL_CAFILE",
        "STREAMCRAWL_KAFKA_SASL_MECHANISM",
        "STREAMCRAWL_CASSANDRA_SSL",
        "STREAMCRAWL_CASSANDRA_SSL_CAFILE",
    ):
        assert name in env, name


@pytest.mark.parametrize("kind", ["StatefulSet", "Job"])
def test_the_cas_come_from_the_secrets_named_in_values(helm: str, kind: str) -> None:
    """Each CA file the app reads is the key of the Secret the values name, in every pod."""
    docs = list(_render(helm, "ci/production-values.yaml"))
    values = yaml.safe_load((CHART / "ci" / "production-values.yaml").read_text())
    wanted = {
        "STREAMCRAWL_KAFKA_SSL_CAFILE": values["kafka"]["tls"],
        "STREAMCRAWL_CASSANDRA_SSL_CAFILE": values["cassandra"]["tls"],
    }
    pods = [(d, s, c) for d, s, c in streamcrawl_containers(docs) if d["kind"] == kind]
    assert pods
    for _, spec, container in pods:
        env = container_env(docs, container)
        assert env["STREAMCRAWL_CASSANDRA_SSL"]["value"] == "true"
        for name, tls in wanted.items():
            found = ca_secret_of(spec, container, env[name]["value"])
            assert found == (tls["caSecret"], tls.get("caKey", "ca.crt")), name


def test_cassandra_tls_without_a_ca_secret_uses_the_system_cas(helm: str) -> None:
    proc = template(helm, "--set", "cassandra.tls.enabled=true")
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    for _, spec, container in streamcrawl_containers(docs):
        env = container_env(docs, container)
        assert env["STREAMCRAWL_CASSANDRA_SSL"]["value"] == "true"
        assert "STREAMCRAWL_CASSANDRA_SSL_CAFILE" not in env
        assert "cassandra-ca" not in {v["name"] for v in spec["volumes"]}


def accepted_flags(parser: argparse.ArgumentParser) -> dict[tuple[str, ...], set[str]]:
    """Flags accepted after each subcommand path, e.g. ("admin",) -> {"--partitions", ...}."""
    out: dict[tuple[str, ...], set[str]] = {}

    def walk(p: argparse.ArgumentParser, path: tuple[str, ...], inherited: set[str]) -> None:
        flags = inherited | {o for a in p._actions for o in a.option_strings}
        out[path] = flags
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name), set())

    walk(parser, (), set())
    return out


def check_argv(argv: list[str]) -> None:
    """argv (without the program name) parses, and each --flag belongs to its subcommand."""
    parser = build_parser()
    flags_by_path = accepted_flags(parser)
    path: tuple[str, ...] = ()
    for word in argv:
        if (*path, word) in flags_by_path:
            path = (*path, word)
        elif word.startswith("--"):
            flag = word.split("=", 1)[0]
            allowed = flags_by_path[path] | flags_by_path[()]
            assert flag in allowed, f"{' '.join(path)}: the CLI does not accept {flag}"
    parser.exit = lambda status=0, message=None: pytest.fail(f"{argv}: {message}")  # type: ignore[method-assign]
    try:
        parser.parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"the CLI rejects {argv}: exit {exc.code}")


def test_cli_args_are_accepted_by_the_parser(manifests: list[dict[str, Any]]) -> None:
    checked = 0
    for _, _, container in streamcrawl_containers(manifests):
        argv = [*container.get("command", []), *container.get("args", [])]
        if argv and argv[0] == "streamcrawl":
            argv = argv[1:]
        assert argv, f"{container['name']}: no subcommand"
        check_argv(argv)
        checked += 1
    assert checked


def documented_commands(text: str) -> list[list[str]]:
    """`streamcrawl ...` command lines of a doc (after `--` of kubectl exec), `\\` lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    commands = []
    for line in joined.splitlines():
        match = re.search(r"(?:^|\s--\s+|^\s*\$?\s*)streamcrawl\s+([a-z].*)$", line)
        if match and "{{" not in match.group(1):
            words = shlex.split(match.group(1).split(" #")[0])
            commands.append(words)
    return commands


@pytest.mark.parametrize(
    "doc", ["helm/streamcrawl/templates/NOTES.txt", "docs/kubernetes.md"], ids=lambda d: d
)
def test_documented_commands_parse(doc: str) -> None:
    commands = documented_commands((ROOT / doc).read_text())
    assert commands, f"{doc} shows no streamcrawl command"
    for argv in commands:
        check_argv(argv)


# --- worker shape -------------------------------------------------------------------------------


def test_worker_statefulset(manifests: list[dict[str, Any]]) -> None:
    sts = statefulset(manifests)
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    (worker,) = [c for c in pod["containers"] if c["name"] == "worker"]
    env = {n: e.get("value") for n, e in container_env(manifests, worker).items()}

    assert spec["podManagementPolicy"] == "Parallel"
    claims = {t["metadata"]["name"]: t for t in spec["volumeClaimTemplates"]}
    assert "state" in claims and claims["state"]["spec"]["resources"]["requests"]["storage"]
    mounts = {m["name"]: m["mountPath"] for m in worker["volumeMounts"]}
    assert mounts["state"] == env["STREAMCRAWL_STATE_DIR"] == STATE_MOUNT

    ports = {p["name"]: p["containerPort"] for p in worker["ports"]}
    assert str(ports["http"]) == env["STREAMCRAWL_WEB_PORT"]
    assert worker["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert worker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert worker["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["terminationGracePeriodSeconds"] >= 30

    assert pod["securityContext"]["runAsNonRoot"] is True
    assert worker["securityContext"]["readOnlyRootFilesystem"] is True
    assert worker["securityContext"]["allowPrivilegeEscalation"] is False
    assert mounts["tmp"] == "/tmp"
    assert any(v["name"] == "tmp" and "emptyDir" in v for v in pod["volumes"])

    service = one(manifests, "Service")
    assert service["spec"]["clusterIP"] == "None"
    assert spec["serviceName"] == service["metadata"]["name"]
    labels = spec["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    for pdb in of_kind(manifests, "PodDisruptionBudget"):
        assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    for constraint in pod.get("topologySpreadConstraints", []):
        assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()


def test_production_pods_schedule_as_asked(helm: str) -> None:
    pod = statefulset(list(_render(helm, "ci/production-values.yaml")))["spec"]["template"]
    spec = pod["spec"]
    assert spec["nodeSelector"] and spec["tolerations"] and spec["affinity"]
    assert len(spec["topologySpreadConstraints"]) == 2
    assert one(list(_render(helm, "default")), "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1


# --- hooks ------------------------------------------------------------------------------------


def test_setup_hooks_run_in_order_before_the_workers(helm: str) -> None:
    docs = list(_render(helm, "default"))
    jobs = of_kind(docs, "Job")
    by_command = {tuple(j["spec"]["template"]["spec"]["containers"][0]["args"]): j for j in jobs}
    topics = by_command[("admin", "create-topics")]
    schema = by_command[("admin", "create-schema")]
    for job in (topics, schema):
        notes = job["metadata"]["annotations"]
        assert set(notes["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
        assert "before-hook-creation" in notes["helm.sh/hook-delete-policy"]
        pod = job["spec"]["template"]["spec"]
        # Pre-install hooks run before the release's own objects exist.
        assert not pod["containers"][0].get("envFrom"), "a hook cannot read the release ConfigMap"
        sa_names = {d["metadata"]["name"] for d in of_kind(docs, "ServiceAccount")}
        assert pod.get("serviceAccountName") not in sa_names, "a hook cannot use the release SA"
    weight = int(topics["metadata"]["annotations"]["helm.sh/hook-weight"])
    assert weight < int(schema["metadata"]["annotations"]["helm.sh/hook-weight"])
    for doc in docs:
        if doc["kind"] != "Job":
            assert "helm.sh/hook" not in doc["metadata"].get("annotations", {}), doc["kind"]


# Settings of the worker pods alone: the credentials are mounted where requests are sent, and
# the hooks send none (test_chart_requests.py checks they get no credential).
WORKER_ONLY_ENV = {"STREAMCRAWL_CREDENTIALS_DIR"}


def test_hooks_get_the_same_settings_as_the_workers(manifests: list[dict[str, Any]]) -> None:
    sts = statefulset(manifests)
    worker_env = container_env(manifests, sts["spec"]["template"]["spec"]["containers"][0])
    worker_env = {n: e for n, e in worker_env.items() if n not in WORKER_ONLY_ENV}
    for job in of_kind(manifests, "Job"):
        job_env = container_env(manifests, job["spec"]["template"]["spec"]["containers"][0])
        assert job_env == worker_env, job["metadata"]["name"]


# --- scaling bounded by partitions ---------------------------------------------------------------


def partitions(docs: list[dict[str, Any]]) -> int:
    return int(one(docs, "ConfigMap")["data"]["STREAMCRAWL_PARTITIONS"])


def test_replicas_never_exceed_partitions(manifests: list[dict[str, Any]]) -> None:
    limit = partitions(manifests)
    sts = statefulset(manifests)
    # The workers' autoscaler (the render workers' scales their Deployment: test_chart_render.py).
    hpas = [
        h
        for h in of_kind(manifests, "HorizontalPodAutoscaler")
        if h["spec"]["scaleTargetRef"]["kind"] == "StatefulSet"
    ]
    scalers = hpas + of_kind(manifests, "ScaledObject")
    assert scalers or "replicas" in sts["spec"]
    assert sts["spec"].get("replicas", 0) <= limit
    for deployment in of_kind(manifests, "Deployment"):
        assert deployment["spec"].get("replicas", 0) <= limit
    for hpa in hpas:
        assert "replicas" not in sts["spec"], "the HPA owns the replica count"
        assert hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"] <= limit
        assert hpa["spec"]["scaleTargetRef"]["name"] == sts["metadata"]["name"]
    for so in of_kind(manifests, "ScaledObject"):
        assert "replicas" not in sts["spec"], "KEDA owns the replica count"
        assert so["spec"]["minReplicaCount"] <= so["spec"]["maxReplicaCount"] <= limit
        target = so["spec"]["scaleTargetRef"]
        assert (target["kind"], target["name"]) == ("StatefulSet", sts["metadata"]["name"])
        (trigger,) = so["spec"]["triggers"]
        assert trigger["type"] == "kafka"
        assert trigger["metadata"]["allowIdleConsumers"] == "false"
        auth = trigger.get("authenticationRef")
        if auth:
            names = {d["metadata"]["name"] for d in of_kind(manifests, "TriggerAuthentication")}
            assert auth["name"] in names


def test_service_monitor_scrapes_the_metrics_port(helm: str) -> None:
    docs = list(_render(helm, "ci/production-values.yaml"))
    monitor = one(docs, "ServiceMonitor")
    service = one(docs, "Service")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


TOO_MANY = "must not exceed kafka.partitions"


@pytest.mark.parametrize(
    "values",
    [
        "worker.replicas=13",
        "kafka.partitions=2",
        "autoscaling.enabled=true,autoscaling.type=keda,autoscaling.maxReplicas=13",
        "autoscaling.enabled=true,autoscaling.type=hpa,autoscaling.maxReplicas=13",
        "warc.enabled=true,warc.replicas=13",
        "renderWorker.enabled=true,renderWorker.replicas=13",
        "renderWorker.enabled=true,renderWorker.autoscaling.enabled=true,"
        "renderWorker.autoscaling.maxReplicas=13",
    ],
)
def test_render_fails_when_replicas_exceed_partitions(helm: str, values: str) -> None:
    proc = template(helm, "--set", values)
    assert proc.returncode != 0, "rendered more workers than partitions"
    assert TOO_MANY in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["--set", "kafka.securityProtocol=SASL_SSL"], "set kafka.sasl.mechanism"),
        (
            ["--set", "kafka.securityProtocol=SASL_SSL,kafka.sasl.mechanism=PLAIN"],
            "set kafka.sasl.existingSecret",
        ),
        (["--set", "kafka.tls.caSecret=ca"], "use SSL or SASL_SSL"),
        (["--set", "cassandra.tls.caSecret=ca"], "cassandra.tls.enabled is false"),
    ],
)
def test_render_fails_on_inconsistent_security(helm: str, values: list[str], message: str) -> None:
    proc = template(helm, *values)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


# --- values.schema.json ---------------------------------------------------------------------------

SCHEMA_ERROR = "values don't meet the specifications of the schema"


@pytest.mark.parametrize(
    "values",
    [
        pytest.param("worker:\n  replicas: three\n", id="wrong-type-int"),
        pytest.param("worker:\n  sinkEnabled: 'yes'\n", id="wrong-type-bool"),
        pytest.param("kafka:\n  partitions: 0\n", id="below-minimum"),
        pytest.param("kafka:\n  securityProtocol: TLS\n", id="bad-enum"),
        pytest.param("replicas: 3\n", id="unknown-top-level-key"),
        pytest.param("worker:\n  replica: 3\n", id="unknown-nested-key"),
        pytest.param("kafka:\n  sasl:\n    password: hunter2\n", id="password-as-value"),
        pytest.param("kafka:\n  topicPrefix: 'bad prefix'\n", id="bad-pattern"),
        pytest.param(
            "worker:\n  extraEnv:\n    - name: STREAMCRAWL_PARTITIONS\n      value: '3'\n",
            id="streamcrawl-env-via-extraEnv",
        ),
        pytest.param("worker:\n  livenessProbe:\n    path: /x\n", id="unknown-probe-key"),
    ],
)
def test_schema_rejects_bad_values(helm: str, tmp_path: Path, values: str) -> None:
    bad = tmp_path / "values.yaml"
    bad.write_text(values)
    proc = template(helm, "-f", str(bad))
    assert proc.returncode != 0, "the chart accepted bad values"
    assert SCHEMA_ERROR in proc.stderr, proc.stderr


def test_every_value_is_documented() -> None:
    """Each value (or its section) has a comment right above it in values.yaml."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    lines = (CHART / "values.yaml").read_text().splitlines()
    root = yaml.compose((CHART / "values.yaml").read_text())
    undocumented: list[str] = []

    def walk(node: yaml.MappingNode, schema_node: dict[str, Any], path: str) -> None:
        props = schema_node.get("properties")
        if props is None:
            return  # a free-form Kubernetes object (resources, affinity...)
        for key_node, value_node in node.value:
            key = key_node.value
            assert key in props, f"{path}{key} is not in values.schema.json"
            above = lines[key_node.start_mark.line - 1].strip() if key_node.start_mark.line else ""
            if above.startswith("#"):
                continue  # documented here, children included
            if isinstance(value_node, yaml.MappingNode) and "properties" in props[key]:
                walk(value_node, props[key], f"{path}{key}.")  # a bare section: its keys say it
            else:
                undocumented.append(path + key)

    walk(root, schema, "")
    assert not undocumented, f"values without a comment: {undocumented}"


def test_autoscaling_measures_the_workers_consumer_group(helm: str) -> None:
    """KEDA must watch the group the workers really use: the Faust app id."""
    from streamcrawl.topology.admin.topics import app_id
    from streamcrawl.topology.settings import Settings

    proc = template(
        helm, "--set", "kafka.topicPrefix=crawlx", "--set", "autoscaling.enabled=true",
        "--set", "autoscaling.type=keda",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    (scaled,) = of_kind(docs, "ScaledObject")
    groups = {t["metadata"]["consumerGroup"] for t in scaled["spec"]["triggers"]}
    assert groups == {app_id(Settings(topic_prefix="crawlx"))}


# --- NetworkPolicy (defence in depth behind the SSRF guard) ---------------------------------


def test_production_network_policy_allows_dns_services_and_public_addresses_only(
    helm: str,
) -> None:
    from streamcrawl.agents.net import guard as netguard

    docs = list(_render(helm, "ci/production-values.yaml"))
    policy = one(docs, "NetworkPolicy")
    worker = statefulset(docs)
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"] == worker["spec"]["selector"]["matchLabels"]
    assert spec["policyTypes"] == ["Egress"]
    dns, kafka, cassandra, public = spec["egress"]
    assert {(p["protocol"], p["port"]) for p in dns["ports"]} == {("UDP", 53), ("TCP", 53)}
    assert dns["to"][0]["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
    # Ports from kafka.bootstrap (crawl-kafka-bootstrap.kafka.svc:9093) and cassandra.hosts.
    assert kafka["ports"] == [{"protocol": "TCP", "port": 9093}]
    assert kafka["to"][0]["podSelector"]["matchLabels"]["strimzi.io/cluster"] == "crawl"
    assert cassandra["ports"] == [{"protocol": "TCP", "port": 9042}]
    assert "ports" not in public  # any port, but only public addresses
    v4, v6 = (peer["ipBlock"] for peer in public["to"])
    assert (v4["cidr"], v6["cidr"]) == ("0.0.0.0/0", "::/0")
    # The same ranges as the guard refuses (NAT64 left to the guard, which reads inside it).
    guard = {str(n) for n in netguard._BLOCKED}
    assert set(v4["except"]) | set(v6["except"]) == guard
    assert "169.254.0.0/16" in v4["except"] and "fc00::/7" in v6["except"]


def test_network_policy_adds_allow_networks_and_needs_its_peers(helm: str) -> None:
    values = [*CASES["ci/production-values.yaml"], "--set", "worker.allowNetworks={10.5.0.0/16}"]
    proc = template(helm, *values)
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    public = one(docs, "NetworkPolicy")["spec"]["egress"][3]
    assert public["to"][2] == {"ipBlock": {"cidr": "10.5.0.0/16"}}
    assert of_kind(list(_render(helm, "default")), "NetworkPolicy") == []
    proc = template(helm, "--set", "networkPolicy.enabled=true")
    assert proc.returncode != 0
    assert "networkPolicy.enabled needs networkPolicy.kafka and networkPolicy.cassandra" in (
        proc.stderr
    )
