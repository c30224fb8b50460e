"""The chart's secured wiring, run against the secured services (``secure_services``).

The chart is rendered for SASL_SSL Kafka and TLS + password Cassandra with every credential and
CA in a Secret; the Secrets are then "mounted" the way the kubelet would (``secretKeyRef``
values from the services' credentials, secret volumes as files), and what the pods would run
runs here: the ``create-topics`` and ``create-schema`` hook Jobs, then the worker of the
StatefulSet until it is ready; and the ``warc`` component's writer, until it has written a
capture. A wrong variable name, mount path or Secret key in the chart fails here, not in a
cluster.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from warcio.archiveiterator import ArchiveIterator

from streamcrawl.schemas.codec import encode
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.settings import load_settings
from tests.captures import capture
from tests.helm.test_chart import container_env, streamcrawl_containers, template
from tests.helm.test_chart import helm as helm  # the fixture: Helm from scripts/ensure-helm.sh
from tests.integration.site import STREAMCRAWL, Worker, free_port

pytestmark = [pytest.mark.integration, pytest.mark.secure]


def the_secrets(services: dict[str, str]) -> dict[str, dict[str, str]]:
    """The Secrets an operator (Strimzi, K8ssandra, cert-manager) would have made."""
    return {
        "crawler-kafka": {
            "user": services["STREAMCRAWL_KAFKA_SASL_USERNAME"],
            "password": services["STREAMCRAWL_KAFKA_SASL_PASSWORD"],
        },
        "cluster-ca-cert": {"ca.crt": Path(services["STREAMCRAWL_KAFKA_SSL_CAFILE"]).read_text()},
        "crawl-superuser": {
            "username": services["STREAMCRAWL_CASSANDRA_USERNAME"],
            "password": services["STREAMCRAWL_CASSANDRA_PASSWORD"],
        },
        "cassandra-ca": {"ca.pem": Path(services["STREAMCRAWL_CASSANDRA_SSL_CAFILE"]).read_text()},
    }


def render(helm: str, services: dict[str, str], tag: str, *extra: str) -> list[dict[str, Any]]:
    values = {
        "kafka.bootstrap": services["STREAMCRAWL_KAFKA_BOOTSTRAP"],
        "kafka.topicPrefix": f"chart-{tag}",
        "kafka.securityProtocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.existingSecret": "crawler-kafka",
        "kafka.sasl.usernameKey": "user",
        "kafka.tls.caSecret": "cluster-ca-cert",
        "cassandra.hosts": services["STREAMCRAWL_CASSANDRA_HOSTS"],
        "cassandra.keyspace": f"chart_{tag}",
        "cassandra.auth.existingSecret": "crawl-superuser",
        "cassandra.tls.caSecret": "cassandra-ca",
        "cassandra.tls.caKey": "ca.pem",
    }
    args = [f"--set-string={k}={v}" for k, v in values.items()]
    typed = "cassandra.tls.enabled=true,kafka.partitions=2,worker.replicas=1"
    typed += ",kafka.replicationFactor=1,kafka.minInsyncReplicas=1"  # one broker, one node
    single = "cassandra.replication=\"{'class': 'SimpleStrategy', 'replication_factor': 1}\""
    proc = template(helm, *args, "--set", typed, "--set-json", single, *extra)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def pod_env(
    docs: list[dict[str, Any]],
    spec: dict[str, Any],
    container: dict[str, Any],
    secrets: dict[str, dict[str, str]],
    root: Path,
) -> dict[str, str]:
    """The container's environment as the kubelet gives it, with its secret volumes written
    under ``root`` (and the paths into them moved there)."""
    volumes = {v["name"]: v for v in spec["volumes"]}
    moved: dict[str, str] = {}
    for mount in container["volumeMounts"]:
        secret = volumes.get(mount["name"], {}).get("secret")  # "state" is a claim template
        if secret is None:
            continue
        folder = root / mount["mountPath"].lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        for item in secret["items"]:
            (folder / item["path"]).write_text(secrets[secret["secretName"]][item["key"]])
        moved[mount["mountPath"] + "/"] = str(folder) + "/"
    env = {}
    for name, entry in container_env(docs, container).items():
        if "value" in entry:
            value = str(entry["value"])
            for mount_path, folder in moved.items():
                value = value.replace(mount_path, folder) if value.startswith(mount_path) else value
        else:
            ref = entry["valueFrom"]["secretKeyRef"]
            value = secrets[ref["name"]][ref["key"]]
        env[name] = value
    return env


def run_env(env: dict[str, str]) -> dict[str, str]:
    """The process environment: ours without any STREAMCRAWL_* (only the pod's), plus ``env``."""
    return {k: v for k, v in os.environ.items() if not k.startswith("STREAMCRAWL_")} | env


def test_the_charts_hooks_and_worker_run_against_the_secured_services(
    helm: str, secure_services: dict[str, str], tmp_path: Path
) -> None:
    docs = render(helm, secure_services, uuid.uuid4().hex[:10])
    secrets = the_secrets(secure_services)
    pods = {d["metadata"]["name"]: (d, spec, c) for d, spec, c in streamcrawl_containers(docs)}
    jobs = sorted(
        (d for d, _, _ in pods.values() if d["kind"] == "Job"),
        key=lambda d: int(d["metadata"]["annotations"]["helm.sh/hook-weight"]),
    )
    assert [j["metadata"]["name"].rsplit("-", 2)[-2:] for j in jobs] == [
        ["create", "topics"],
        ["create", "schema"],
    ]
    for job in jobs:
        _, spec, container = pods[job["metadata"]["name"]]
        env = pod_env(docs, spec, container, secrets, tmp_path / job["metadata"]["name"])
        assert (
            env["STREAMCRAWL_KAFKA_SASL_PASSWORD"]
            == secure_services["STREAMCRAWL_KAFKA_SASL_PASSWORD"]
        )
        done = subprocess.run(
            [STREAMCRAWL, *container["args"]],
            env=run_env(env),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    (sts,) = [d for d, _, _ in pods.values() if d["kind"] == "StatefulSet"]
    _, spec, container = pods[sts["metadata"]["name"]]
    env = pod_env(docs, spec, container, secrets, tmp_path / "worker")
    port = free_port()  # the pod's state volume and port, here
    env |= {"STREAMCRAWL_STATE_DIR": str(tmp_path / "state"), "STREAMCRAWL_WEB_PORT": str(port)}
    log = tmp_path / "worker.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [STREAMCRAWL, *container["args"]], env=run_env(env), stdout=out, stderr=out
        )
    try:
        Worker("chart-worker", proc, port, log).wait_ready(timeout=120)
    finally:
        proc.kill()
        proc.wait(30)


def test_the_charts_warc_writer_runs_against_the_secured_services(
    helm: str, secure_services: dict[str, str], tmp_path: Path
) -> None:
    """The ``warc`` component's pod, as rendered: it reaches the SASL_SSL Kafka with the
    workers' Secrets and CA, writes a capture published there, and exits 0 on SIGTERM."""
    docs = render(helm, secure_services, uuid.uuid4().hex[:10], "--set", "warc.enabled=true")
    secrets = the_secrets(secure_services)
    pods = {d["metadata"]["name"]: (d, spec, c) for d, spec, c in streamcrawl_containers(docs)}
    (topics_job,) = [n for n in pods if n.endswith("create-topics")]
    _, spec, container = pods[topics_job]
    env = run_env(pod_env(docs, spec, container, secrets, tmp_path / "hook"))
    done = subprocess.run(
        [STREAMCRAWL, *container["args"]], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    (writer,) = [n for n in pods if pods[n][0]["kind"] == "StatefulSet" and n.endswith("-warc")]
    _, spec, container = pods[writer]
    out = tmp_path / "warc"  # the pod's volume, here
    args = [str(out) if a == "/warc" else a for a in container["args"]]
    env = run_env(pod_env(docs, spec, container, secrets, tmp_path / "writer"))
    prefix = "STREAMCRAWL_"
    pod = {k.removeprefix(prefix).lower(): v for k, v in env.items() if k.startswith(prefix)}
    settings = load_settings(**pod)  # the pod's own settings, credentials included
    archived = capture("/secure", crawl_id="secure")
    admin.publish(settings, "captures", [(archived.origin.encode(), encode(archived))])
    log = tmp_path / "warc.log"
    with log.open("ab") as stderr:
        proc = subprocess.Popen([STREAMCRAWL, *args], env=env, stderr=stderr)
    try:
        deadline = time.monotonic() + 60
        while not list(out.glob("*.open")):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()
    finally:
        proc.kill()
        proc.wait(30)
    (path,) = out.glob("*.warc.gz")
    with path.open("rb") as fh:
        uris = [r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(fh)]
    assert archived.url in uris
