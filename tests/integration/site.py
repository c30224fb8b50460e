"""A small generated multi-origin site for topology tests, and the harness that runs workers.

Origin ``k`` serves ``/`` and ``/p1`` .. ``/p{n-1}``: page ``i`` links to pages ``i+1``, ``2i``
and ``3i`` of its own origin (when they exist) and to page ``i`` of the next origin, so every
page is reachable from every seed and links cross origins. ``robots.txt`` allows everything.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from streamcrawl.agents.sinks.cassandra.driver import connect, create_schema
from streamcrawl.topology.admin import config as admin_config
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.settings import Settings, load_settings
from tests.httpserver import Handler, RecordingServer, text
from tests.integration.site_process import RemoteServer
from tests.integration.site_process import serve_site as serve_site


def page_path(i: int) -> str:
    return "/" if i == 0 else f"/p{i}"


def build_routes(servers: list[RecordingServer], pages: int) -> None:
    """Fill every server's routes (servers must be started: their ports are in the links)."""
    for k, srv in enumerate(servers):
        nxt = servers[(k + 1) % len(servers)]
        srv.routes["/robots.txt"] = text("User-agent: *\nAllow: /\n")
        for i in range(pages):
            own = sorted({j for j in (i + 1, 2 * i, 3 * i) if 0 < j < pages and j != i})
            links = [f'<a href="{page_path(j)}">p{j}</a>' for j in own]
            links.append(f'<a href="{nxt.url(page_path(i))}">next origin</a>')
            title = f"<title>o{k} p{i}</title>"
            body = f"<html><head>{title}</head><body>{''.join(links)}</body></html>"
            srv.routes[page_path(i)] = validated(body)


def validated(body: str) -> Handler:
    """A static page with an ETag of its body, answered 304 (no body) to an If-None-Match
    that names it: what a continuous crawl's revisits of the site get."""
    etag = f'"{hashlib.sha1(body.encode()).hexdigest()[:16]}"'

    async def serve(request: web.Request) -> web.StreamResponse:
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(text=body, content_type="text/html", headers={"ETag": etag})

    return serve


def page_requests(srv: RecordingServer | RemoteServer) -> list[str]:
    """Requested paths other than robots.txt."""
    return [p for p in srv.paths() if p != "/robots.txt"]


# -- worker harness: services, topics/keyspace, worker subprocesses, Cassandra reads ------------

ROOT = Path(__file__).resolve().parents[2]
STREAMCRAWL = str(Path(sys.executable).parent / "streamcrawl")


def service_env() -> dict[str, str]:
    """Kafka/Cassandra endpoints from the environment, else from ``.services/env``; skips the
    test when there are none (``scripts/services.sh start`` provides them)."""
    found = {
        k: os.environ[k]
        for k in ("STREAMCRAWL_KAFKA_BOOTSTRAP", "STREAMCRAWL_CASSANDRA_HOSTS")
        if k in os.environ
    }
    env_file = ROOT / ".services" / "env"
    if len(found) < 2 and env_file.exists():
        for line in env_file.read_text().splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            found.setdefault(key.strip(), value.strip().strip("'\""))
    if "STREAMCRAWL_KAFKA_BOOTSTRAP" not in found or "STREAMCRAWL_CASSANDRA_HOSTS" not in found:
        pytest.skip("no Kafka/Cassandra: run scripts/services.sh start")
    return found


def cli(env: dict[str, str], *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """Run ``streamcrawl ARGS`` with ``env`` over the environment; output captured, no check."""
    return subprocess.run(
        [STREAMCRAWL, *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Cluster:
    """Unique topics + keyspace for one test, and the worker processes it started."""

    env: dict[str, str]
    tmp: Path
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _cassandra: Any = None

    @classmethod
    def create(cls, tmp: Path, partitions: int, services: dict[str, str] | None = None) -> Cluster:
        """``services``: the settings of the services to use (default: ``service_env()``)."""
        tag = uuid.uuid4().hex[:10]
        env = {
            **(services if services is not None else service_env()),
            "STREAMCRAWL_TOPIC_PREFIX": f"topo-{tag}",
            "STREAMCRAWL_CASSANDRA_KEYSPACE": f"topo_{tag}",
            "STREAMCRAWL_PARTITIONS": str(partitions),
            "STREAMCRAWL_LOG_LEVEL": "INFO",
            # The test sites listen on loopback, which the SSRF guard refuses by default.
            "STREAMCRAWL_ALLOW_NETWORKS": "127.0.0.0/8",
        }
        cluster = cls(env, tmp)
        admin.create_topics(cluster.settings())
        create_schema(cluster.settings().cassandra_config())
        return cluster

    def settings(self, **over: Any) -> Settings:
        names = {k.removeprefix("STREAMCRAWL_").lower(): v for k, v in self.env.items()}
        return load_settings(**{**names, **over})

    def start_worker(self, name: str, **env: str) -> Worker:
        port = free_port()
        wenv = {
            **os.environ,
            **self.env,
            "STREAMCRAWL_STATE_DIR": str(self.tmp / name),
            "STREAMCRAWL_WEB_PORT": str(port),
            **env,
        }
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 (closed by stop_all)
        proc = subprocess.Popen([STREAMCRAWL, "worker"], env=wenv, stdout=log, stderr=log)
        self.workers.append(proc)
        return Worker(name, proc, port, self.tmp / f"{name}.log")

    def start_render_worker(self, name: str, **env: str) -> Worker:
        """``streamcrawl render-worker`` (its log ``<name>.log``, its web port free), killed
        by ``stop_workers``."""
        port = free_port()
        wenv = {**os.environ, **self.env, "STREAMCRAWL_RENDER_WEB_PORT": str(port), **env}
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 (closed by stop_all)
        proc = subprocess.Popen([STREAMCRAWL, "render-worker"], env=wenv, stdout=log, stderr=log)
        self.workers.append(proc)
        return Worker(name, proc, port, self.tmp / f"{name}.log")

    def seed(self, urls: list[str], crawl_id: str, *flags: str) -> None:
        subprocess.run(
            [STREAMCRAWL, "seed", *urls, "--crawl-id", crawl_id, *flags],
            env={**os.environ, **self.env},
            check=True,
            capture_output=True,
            timeout=60,
        )

    def stop_workers(self) -> None:
        """Kill every worker this cluster started (their table copies stay on disk)."""
        for proc in self.workers:
            if proc.poll() is None:
                proc.kill()
            proc.wait(30)

    def stop_all(self) -> None:
        """Kill the workers, then drop the test's keyspace and topics: a suite (or a loop of
        fault tests) that leaves them grows the services' heaps until Cassandra dies of
        OutOfMemoryError (seen with ~250 keyspaces on a 1 GiB heap)."""
        self.stop_workers()
        try:
            with contextlib.suppress(Exception):  # best effort: a stopped service keeps them
                self.query("DROP KEYSPACE IF EXISTS {ks}")
        finally:
            if self._cassandra is not None:
                self._cassandra[0].shutdown()
                self._cassandra = None
        with contextlib.suppress(Exception):
            self._delete_topics()

    def _delete_topics(self) -> None:
        settings = self.settings()
        client = AdminClient(admin_config.librdkafka_config(settings))
        ours = (f"{settings.topic_prefix}.", f"{settings.topic_prefix}-")
        names = [t for t in client.list_topics(timeout=10).topics if t.startswith(ours)]
        for future in client.delete_topics(names, operation_timeout=10).values():
            future.result(timeout=15)

    def session(self) -> Any:
        """One Cassandra session for the test (a connect per poll would steal the GIL from the
        recording servers' thread and blur their request timestamps)."""
        if self._cassandra is None:
            self._cassandra = connect(self.settings().cassandra_config())
        return self._cassandra[1]

    def query(self, cql: str) -> list[Any]:
        ks = self.env["STREAMCRAWL_CASSANDRA_KEYSPACE"]
        return list(self.session().execute(cql.replace("{ks}", ks)))

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        """Every row of a sink table (the keyspace is this test's alone), sorted."""
        return sorted(tuple(r) for r in self.query(f"SELECT * FROM {{ks}}.{table}"))

    def states(self) -> dict[str, str]:
        """URL -> terminal state, from ``url_status``."""
        return {r.url: r.state for r in self.query("SELECT url, state FROM {ks}.url_status")}

    def wait_states(self, expected: int, timeout: float) -> dict[str, str]:
        """Poll until ``expected`` URLs have a terminal state (+2 s to settle); fails on timeout."""
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            for proc in self.workers:
                assert proc.poll() in (None, -9, 0), f"a worker exited with {proc.returncode}"
            states = self.states()
            if len(states) >= expected:
                time.sleep(2.0)
                return self.states()
            time.sleep(2.0)
        raise AssertionError(
            f"only {len(states)}/{expected} URLs reached a terminal state\n{self.diagnosis()}"
        )

    def diagnosis(self, lines: int = 12) -> str:
        """What a stalled crawl's failure should show: the frontier's counts as ``status``
        reads them from Kafka (ahead of Cassandra's states: the sink lags; level: the frontier
        stalled) and the last warnings and errors of each worker's log."""
        parts = []
        status = cli(self.env, "status", "--json", timeout=60)
        parts.append(f"status --json (exit {status.returncode}): {status.stdout}{status.stderr}")
        for log in sorted(self.tmp.glob("*.log")):
            text = log.read_text(errors="replace").splitlines()
            worse = [line for line in text if "WARNING" in line or "ERROR" in line]
            parts.append(f"{log.name}: {len(text)} lines, last warnings and errors:")
            parts += [f"  {line[:400]}" for line in worse[-lines:]]
        return "\n".join(parts)


@dataclass
class Worker:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"{self.name} exited: see {self.log}"
            if self.get("/readyz")[0] == 200:
                return
            time.sleep(0.5)
        raise AssertionError(f"{self.name} not ready after {timeout} s: see {self.log}")

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        _, text = self.get("/metrics")
        total = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    total += sample.value
        return total
