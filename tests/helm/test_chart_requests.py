"""The workers' side of the requests in the chart: the egress proxy (``worker.proxy``) and the
credentials Secret (``worker.credentials.secretName``), docs/requests.md and docs/kubernetes.md.

A credential's value is never a chart value: the chart takes the name of an existing Secret,
mounts it into the worker pods only, and points ``STREAMCRAWL_CREDENTIALS_DIR`` at it; a crawl
or the proxy names a credential, a key of that Secret. The generic checks (Kubernetes schemas,
env names, settings that load, lint) run over these values as the ``ci-proxy`` case of
test_chart.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
import yaml

from streamcrawl.agents.net import credentials as creds
from streamcrawl.schemas.records import CredentialName
from streamcrawl.topology.settings import Settings, env_names
from tests.helm.test_chart import (
    CASES,
    CHART,
    SCHEMA_ERROR,
    _render,
    container_env,
    one,
    settings_from_env,
    statefulset,
    streamcrawl_containers,
    template,
)
from tests.helm.test_chart import helm as helm  # the fixture: Helm from scripts/ensure-helm.sh
from tests.helm.test_chart import manifests as manifests  # the fixture: each case rendered

CASE = "ci-proxy"
SCHEMA = json.loads((CHART / "values.schema.json").read_text("utf-8"))
REQUEST_ENV = {
    "STREAMCRAWL_PROXY",
    "STREAMCRAWL_NO_PROXY_FOR",
    "STREAMCRAWL_PROXY_CREDENTIAL",
    "STREAMCRAWL_CREDENTIALS_DIR",
}


def docs_of(helm: str, *args: str) -> list[dict[str, Any]]:
    proc = template(helm, *args)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def worker_pod(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod spec, worker container) of the worker StatefulSet."""
    pod = statefulset(docs)["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "worker"]
    return pod, container


def credential_mounts(pod: dict[str, Any], container: dict[str, Any]) -> list[tuple[dict, dict]]:
    """(volume, mount) of each Secret volume the container mounts that is no CA bundle (those
    are under /etc/streamcrawl/; the state volumes are claims, not pod volumes)."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    return [
        (volumes[m["name"]], m)
        for m in container.get("volumeMounts", [])
        if "secret" in volumes.get(m["name"], {})
        and not m["mountPath"].startswith("/etc/streamcrawl/")
    ]


# --- the proxy --------------------------------------------------------------------------------


def test_nothing_of_it_renders_unless_set(helm: str) -> None:
    docs = list(_render(helm, "ci/production-values.yaml"))
    for _, spec, container in streamcrawl_containers(docs):
        assert not REQUEST_ENV & set(container_env(docs, container))
        assert not credential_mounts(spec, container)
    rules = one(docs, "NetworkPolicy")["spec"]["egress"]
    assert len(rules) == 4  # DNS, Kafka, Cassandra, public addresses: no proxy rule


def test_the_values_are_the_workers_proxy(
    helm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rendered worker, its Secret written out as files, sends its requests through the
    proxy of the values, with the credential they name, except to the hosts of noProxyFor."""
    docs = list(_render(helm, CASE))
    pod, container = worker_pod(docs)
    env = container_env(docs, container)
    ((volume, mount),) = credential_mounts(pod, container)
    assert env["STREAMCRAWL_CREDENTIALS_DIR"]["value"] == mount["mountPath"]
    secret = tmp_path / volume["secret"]["secretName"]  # the Secret's keys, as the kubelet writes
    secret.mkdir()
    (secret / "PROXY").write_text("basic:crawler:hunter2")
    for name in [*env_names(), creds.env_name("PROXY")]:
        monkeypatch.delenv(name, raising=False)
    for name, value in settings_from_env(env).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("STREAMCRAWL_CREDENTIALS_DIR", str(secret))
    proxy = Settings().network().proxy
    assert proxy is not None
    assert (proxy.url, proxy.no_proxy_for) == (
        "http://egress.proxy.svc:3128",
        ("example.org", "intranet.example"),
    )
    assert proxy.auth is not None and (proxy.auth.login, proxy.auth.password) == (
        "crawler",
        "hunter2",
    )
    assert proxy.route("https://www.example.org/") is None
    assert proxy.route("https://example.com/") == proxy.url


@pytest.mark.parametrize(
    ("url", "port"),
    [
        ("http://egress.proxy.svc:3128", 3128),
        ("http://10.0.0.5:8080/", 8080),
        ("http://squid.proxy", 80),
        ("http://[fd00::1]", 80),
        ("http://[fd00::1]:3128", 3128),
    ],
)
def test_the_network_policy_lets_the_workers_reach_the_proxy(
    helm: str, url: str, port: int
) -> None:
    """On the proxy's port (80 when its URL names none, as the worker reads it), to the peers
    of networkPolicy.proxy only; the other rules are unchanged."""
    docs = docs_of(helm, *CASES[CASE], "--set", f"worker.proxy.url={url}")
    dns, kafka, cassandra, proxy, public = one(docs, "NetworkPolicy")["spec"]["egress"]
    assert proxy["ports"] == [{"protocol": "TCP", "port": port}]
    assert proxy["to"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "proxy"}},
            "podSelector": {"matchLabels": {"app": "egress-proxy"}},
        }
    ]
    assert [r["ports"][0]["port"] for r in (dns, kafka, cassandra)] == [53, 9093, 9042]
    assert "ports" not in public
    read = Settings(proxy=url).network().proxy  # the port the worker dials
    assert read is not None and read.port == port


# --- the credentials Secret -------------------------------------------------------------------


def readable_by_the_worker(mode: int, pod_security: dict[str, Any]) -> bool:
    """A Secret volume's files are root's, of group fsGroup when the pod has one (the kubelet
    then also adds group read): the worker, uid runAsUser with fsGroup among its groups, reads
    them through the group, or else through "other"."""
    if pod_security.get("fsGroup") is not None:
        return bool(mode & 0o040)
    return bool(mode & 0o004)


@pytest.mark.parametrize("fs_group", [True, False], ids=["fsGroup", "no-fsGroup"])
def test_the_worker_mounts_the_secret_read_only(helm: str, tmp_path: Path, fs_group: bool) -> None:
    args = list(CASES[CASE])
    if not fs_group:
        file = tmp_path / "values.yaml"
        file.write_text(yaml.safe_dump({"worker": {"podSecurityContext": {"fsGroup": None}}}))
        args += ["-f", str(file)]
    docs = docs_of(helm, *args)
    pod, container = worker_pod(docs)
    assert ("fsGroup" in pod["securityContext"]) is fs_group
    ((volume, mount),) = credential_mounts(pod, container)
    assert volume["secret"] == {
        "secretName": "streamcrawl-credentials",
        "defaultMode": 0o440 if fs_group else 0o444,
    }  # every key, one file each: a key is a credential name
    assert mount["readOnly"] is True
    assert mount["mountPath"] == container_env(docs, container)[creds.ENV_DIR]["value"]
    mode = volume["secret"]["defaultMode"]
    assert not mode & 0o222, "the credential files must not be writable"
    assert not mode & 0o111
    assert readable_by_the_worker(mode, pod["securityContext"])


def test_only_the_workers_get_the_credentials(helm: str) -> None:
    """The hook Jobs and the WARC writer send no request: no credential is mounted there."""
    docs = list(_render(helm, CASE))
    others = [
        (doc, spec, container)
        for doc, spec, container in streamcrawl_containers(docs)
        if doc["metadata"]["labels"]["app.kubernetes.io/component"] != "worker"
    ]
    assert {d["kind"] for d, _, _ in others} == {"Job", "StatefulSet"}  # hooks, WARC writer
    for doc, spec, container in others:
        secrets = {v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
        assert "streamcrawl-credentials" not in secrets, doc["metadata"]["name"]
        assert creds.ENV_DIR not in container_env(docs, container), doc["metadata"]["name"]


def test_the_chart_never_sets_a_credential_variable(manifests: list[dict[str, Any]]) -> None:
    """``STREAMCRAWL_CREDENTIAL_<NAME>`` holds a credential's value (agents/net/credentials.py)
    and is no setting: the chart never sets one, in any container or ConfigMap."""
    assert not [n for n in env_names() if n.startswith(creds.ENV_PREFIX)]
    for doc, _, container in streamcrawl_containers(manifests):
        names = set(container_env(manifests, container))
        held = {n for n in names if n.startswith(creds.ENV_PREFIX)}
        assert not held, f"{doc['kind']}/{container['name']} sets credential variables {held}"


# --- what the values refuse ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"proxy": {"url": "https://proxy:3128"}}, id="https-proxy"),
        pytest.param({"proxy": {"url": "socks5://proxy:1080"}}, id="socks-proxy"),
        pytest.param({"proxy": {"url": "proxy:3128"}}, id="no-scheme"),
        pytest.param({"proxy": {"url": "http://crawler:hunter2@proxy:3128"}}, id="password-in-url"),
        pytest.param({"proxy": {"url": "http://proxy:3128/path"}}, id="path-in-url"),
        pytest.param({"proxy": {"url": "http://proxy:3128", "password": "x"}}, id="proxy-password"),
        pytest.param({"proxy": {"noProxyFor": ["a.example,b.example"]}}, id="comma-in-host"),
        pytest.param({"proxy": {"credential": "PARTNER-1"}}, id="credential-name-dash"),
        pytest.param({"proxy": {"credential": "basic:crawler:hunter2"}}, id="credential-value"),
        pytest.param({"credentials": {"PARTNER": "basic:crawler:x"}}, id="credential-as-value"),
        pytest.param({"credentials": {"secretName": "Crawl_Secrets"}}, id="secret-not-dns"),
        pytest.param({"credentials": {"secretName": "a" * 254}}, id="secret-too-long"),
    ],
)
def test_the_schema_refuses_bad_request_values(
    helm: str, tmp_path: Path, values: dict[str, Any]
) -> None:
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump({"worker": values}))
    proc = template(helm, "-f", str(file))
    assert proc.returncode != 0 and SCHEMA_ERROR in proc.stderr, proc.stderr


def test_no_value_can_hold_a_credential() -> None:
    """Under worker.proxy and worker.credentials the only strings are a URL without userinfo,
    host names and names: the schema takes no other key there."""
    worker = SCHEMA["properties"]["worker"]["properties"]
    proxy, credentials = worker["proxy"], worker["credentials"]
    assert proxy["additionalProperties"] is False and credentials["additionalProperties"] is False
    assert set(proxy["properties"]) == {"url", "noProxyFor", "credential"}
    assert set(credentials["properties"]) == {"secretName"}
    url = proxy["properties"]["url"]
    jsonschema.validate("http://proxy:3128", url)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate("http://user:pw@proxy:3128", url)


@pytest.mark.parametrize(
    "name", ["", "PARTNER", "p", "a_b_9", "_X", "9", "X" * 64, "X" * 65, "A-B", "a.b", "a b", "é"]
)
def test_the_credential_name_is_the_apps(name: str) -> None:
    """The schema takes as worker.proxy.credential what the app takes as a credential name
    (``schemas.records.CredentialName``), and empty for none."""
    pattern = SCHEMA["properties"]["worker"]["properties"]["proxy"]["properties"]["credential"]
    try:
        jsonschema.validate(name, pattern)
        chart = True
    except jsonschema.ValidationError:
        chart = False
    try:
        msgspec.convert(name, CredentialName)
        app = True
    except msgspec.ValidationError:
        app = name == ""
    assert chart is app


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            ["--set", "worker.proxy.credential=PROXY"],
            "worker.proxy.noProxyFor and worker.proxy.credential need worker.proxy.url",
        ),
        (
            ["--set", "worker.proxy.noProxyFor={example.org}"],
            "worker.proxy.noProxyFor and worker.proxy.credential need worker.proxy.url",
        ),
        (
            ["--set", "worker.proxy.url=http://proxy:3128,worker.proxy.credential=PROXY"],
            "worker.proxy.credential PROXY is read from the Secret worker.credentials.secretName",
        ),
        (["--set", "worker.proxy.url=http://proxy:65536"], "the port must be 1-65535"),
        (
            [*CASES["ci/production-values.yaml"], "--set", "worker.proxy.url=http://proxy:3128"],
            "networkPolicy.enabled with worker.proxy.url needs networkPolicy.proxy",
        ),
        (
            [
                *CASES["ci/production-values.yaml"],
                "--set-json",
                'networkPolicy.proxy=[{"ipBlock": {"cidr": "10.9.0.0/16"}}]',
            ],
            "networkPolicy.proxy is set but worker.proxy.url is empty",
        ),
    ],
    ids=[
        "credential-without-proxy",
        "no-proxy-for-without-proxy",
        "credential-without-secret",
        "port-out-of-range",
        "policy-without-proxy-peers",
        "proxy-peers-without-proxy",
    ],
)
def test_render_fails_on_request_values_that_cannot_work(
    helm: str, values: list[str], message: str
) -> None:
    """Caught at render, before the workers roll: with these, a worker would exit 1 at start
    (a proxy credential without a proxy or not held, a port it cannot dial: agents/net/proxy.py),
    ignore a value (noProxyFor or proxy peers without a proxy), or be cut off from its proxy by
    the NetworkPolicy."""
    proc = template(helm, *values)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
