"""The Kafka wiring under test, started and stopped: ``start_topology`` (a topic prefix, keyspace
and crawl id unique to this run; ``streamcrawl admin create-topics`` and ``create-schema``;
``workers`` x ``streamcrawl worker``, each with its own state dir and web port and waited for
until ``/readyz`` answers 200; a status poller, ``bench.kafka_status``, that has read the
counts topic once), the workers stopped with SIGTERM (SIGKILL after 30 s) and the run's topics
and keyspace deleted when it exits, whatever happened; and ``idle_rates``, what the ready
topology costs with nothing to crawl. The steps of a crawl on it: ``bench.kafka_runner``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from bench.context import REPO, NotRun, code_state, py_spy_argv, streamcrawl_binary
from bench.measure import ServiceMeter
from bench.site import SiteSpec

USER_AGENT = "bench-streamcrawl"


def _service_env() -> dict[str, str]:
    """Kafka/Cassandra endpoints: the environment, else ``.services/env``; NotRun if neither."""
    keys = ("STREAMCRAWL_KAFKA_BOOTSTRAP", "STREAMCRAWL_CASSANDRA_HOSTS")
    found = {k: os.environ[k] for k in keys if os.environ.get(k)}
    env_file = REPO / ".services" / "env"
    if len(found) < len(keys) and env_file.exists():
        for line in env_file.read_text().splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            if key.strip() in keys:
                found.setdefault(key.strip(), value.strip().strip("'\""))
    if len(found) < len(keys):
        raise NotRun("no Kafka/Cassandra (source .services/env or run scripts/services.sh start)")
    return found


def _service_pid(name: str, marker: str) -> int | None:
    """PID of a running service JVM: ``.services/NAME/pid``, else the process whose command
    line contains ``marker`` (``kafka.Kafka``, ``CassandraDaemon``)."""
    import psutil

    def matches(p: psutil.Process) -> bool:
        try:
            return marker in " ".join(p.cmdline())
        except psutil.Error:
            return False

    try:
        pid = int((REPO / ".services" / name / "pid").read_text().split()[0])
        if matches(psutil.Process(pid)):
            return pid
    except (OSError, ValueError, IndexError, psutil.Error):
        pass
    return next((p.pid for p in psutil.process_iter() if matches(p)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def http_get(port: int, path: str) -> tuple[int, str]:
    """(status, body) of GET http://127.0.0.1:PORT/PATH; (0, "") when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), ""
    except OSError:
        return 0, ""


def log_tail(path: Path, n: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def _stop_procs(procs: list[subprocess.Popen], wrapped: set[int], grace: float = 30.0) -> list:
    """SIGTERM every worker (the worker itself when py-spy wraps it, so that py-spy writes its
    profile), wait up to ``grace`` s, then SIGKILL the process groups left."""
    import psutil

    for p in procs:
        if p.poll() is not None:
            continue
        targets = []
        if p.pid in wrapped:
            with contextlib.suppress(psutil.Error):
                targets = [c.pid for c in psutil.Process(p.pid).children()]
        for pid in targets or [p.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(30)
    return [p.returncode for p in procs]


# Seconds between two reads of the terminal-state counts, by one long-lived client of the
# broker (``bench.kafka_status``: two ``ListOffsets`` a read, whatever the partitions).
STATUS_POLL_S = 0.5


class _StatusPoller:
    """``bench.kafka_status`` in the streamcrawl venv: the latest terminal-state counts."""

    def __init__(self, python: str, crawl_id: str, env: dict[str, str], log: Path) -> None:
        self._err = open(log, "wb")  # noqa: SIM115 (closed by stop)
        interval = str(STATUS_POLL_S)
        self.proc = subprocess.Popen(
            [python, "-m", "bench.kafka_status", "--crawl-id", crawl_id, "--interval", interval],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=self._err,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self.latest: dict | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.latest = json.loads(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._err.close()


def kafka_partitions(spec: SiteSpec) -> int:
    """Partitions per topic: one per origin, at least 2 (so two workers share), at most 12."""
    return min(max(spec.origins, 2), 12)


@dataclass
class Topology:
    """Running workers on a prefix and keyspace of their own, and what measures them."""

    exe: str
    env: dict[str, str]  # the workers' and the CLI's environment (without per-worker keys)
    crawl_id: str
    partitions: int
    logs: Path
    code: dict
    kafka_pid: int | None
    cassandra_pid: int | None
    procs: list[subprocess.Popen] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)  # each worker's web port (/metrics, /readyz)
    wrapped: set[int] = field(default_factory=set)  # workers run under py-spy
    poller: _StatusPoller | None = None
    meters: list[ServiceMeter] = field(default_factory=list)  # stopped with the workers
    files: list[IO[bytes]] = field(default_factory=list)
    startup_s: float = 0.0
    startup_cpu_s: float = 0.0
    exit_codes: list[int | None] = field(default_factory=list)  # set once stopped

    def check_workers(self, when: str = "") -> None:
        """Raise if a worker has exited (with the tail of its log)."""
        for i, p in enumerate(self.procs):
            if p.poll() is not None:
                raise RuntimeError(
                    f"worker {i + 1} exited {p.returncode}{when}: "
                    f"{log_tail(self.logs / f'worker-{i + 1}.log', 500)}"
                )

    def check_poller(self) -> None:
        if self.poller is None or self.poller.proc.poll() is not None:
            raise RuntimeError(f"status poller: {log_tail(self.logs / 'status-poller.log', 500)}")

    def stop(self) -> None:
        if self.poller is not None:
            self.poller.stop()
        self.exit_codes = _stop_procs(self.procs, self.wrapped)
        for m in self.meters:
            m.stop()
        for f in self.files:
            f.close()


def _admin(exe: str, env: dict[str, str]) -> None:
    for what in ("create-topics", "create-schema"):
        r = subprocess.run(
            [exe, "admin", what], env=env, capture_output=True, text=True, timeout=300
        )
        if r.returncode != 0:
            raise RuntimeError(f"streamcrawl admin {what} exited {r.returncode}: {r.stderr[-500:]}")


def _start_workers(topo: Topology, workdir: Path, workers: int, profile: Path | None) -> None:
    for i in range(workers):
        port = _free_port()
        wenv = {
            **topo.env,
            "STREAMCRAWL_STATE_DIR": str(workdir / f"state-w{i + 1}"),
            "STREAMCRAWL_WEB_PORT": str(port),
        }
        argv = [topo.exe, "worker"]
        if profile:  # worker 1 into ``profile``, worker N into ``profile`` + ".wN"
            argv = py_spy_argv(argv, profile if i == 0 else _worker_file(profile, i + 1))
        log = open(topo.logs / f"worker-{i + 1}.log", "wb")  # noqa: SIM115 (closed by stop)
        topo.files.append(log)
        p = subprocess.Popen(
            argv,
            env=wenv,
            cwd=workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        topo.procs.append(p)
        topo.ports.append(port)
        if profile:
            topo.wrapped.add(p.pid)


def _worker_file(profile: Path, n: int) -> Path:
    return profile.with_name(f"{profile.name}.w{n}")


def worker_pages(topo: Topology) -> tuple[list[int | None], dict[str, float]]:
    """Pages each worker fetched (its ``streamcrawl_fetch_pages`` counter; None: no answer),
    and what all of them counted (``worker_counts``). Each worker's whole ``/metrics`` goes
    to ``logs/metrics-wN.txt``."""
    pages: list[int | None] = []
    bodies: list[str] = []
    for i, port in enumerate(topo.ports):
        status, body = http_get(port, "/metrics")
        (topo.logs / f"metrics-w{i + 1}.txt").write_text(body)
        if status != 200:
            pages.append(None)
            continue
        bodies.append(body)
        pages.append(int(metric_sum(body, "streamcrawl_fetch_pages_total")))
    return pages, worker_counts(bodies)


# What a run's workers counted, summed over them: the Kafka messages they sent by topic
# (``sent.<topic>``), and the frontier agent's batches and events and the sink's writes, which
# grow with the workers rather than the pages when a crawl is not saturated
# (docs/performance.md, "What a second worker costs").
COUNTED = {
    "frontier_batches": "streamcrawl_frontier_batch_events_count",
    "frontier_events": "streamcrawl_frontier_batch_events_sum",
    "sink_writes": "streamcrawl_sink_write_latency_seconds_count",
}
_SENT = "streamcrawl_kafka_messages_sent_total{"


def worker_counts(bodies: list[str]) -> dict[str, float]:
    """``COUNTED`` and the messages sent by topic, summed over the ``/metrics`` texts."""
    counts = {name: sum(metric_sum(b, metric) for b in bodies) for name, metric in COUNTED.items()}
    for body in bodies:
        for line in body.splitlines():
            if line.startswith(_SENT):
                labels, _, value = line[len(_SENT) :].rpartition("} ")
                topic = labels.partition('topic="')[2].partition('"')[0]
                counts[f"sent.{topic}"] = counts.get(f"sent.{topic}", 0.0) + float(value)
    return counts


def metric_sum(body: str, name: str) -> float:
    """The sum of the samples of ``name`` (with any labels) in a ``/metrics`` text."""
    total = 0.0
    for line in body.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _wait_ready(topo: Topology, deadline: float, t_start: float) -> None:
    """Every worker answers /readyz 200 and the status poller has counts."""
    for i, (p, port) in enumerate(zip(topo.procs, topo.ports, strict=True)):
        while http_get(port, "/readyz")[0] != 200:
            if p.poll() is not None:
                topo.check_workers()
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker {i + 1} not ready after {deadline - t_start} s")
            time.sleep(0.5)
    assert topo.poller is not None
    while topo.poller.latest is None:  # the poller reads the counts topic
        if time.monotonic() > deadline:
            raise RuntimeError(f"status poller: {log_tail(topo.logs / 'status-poller.log', 500)}")
        topo.check_poller()
        time.sleep(0.2)


@contextlib.contextmanager
def start_topology(
    workdir: Path,
    workers: int,
    partitions: int,
    *,
    profile: Path | None = None,
    ready_timeout: float = 300.0,
    concurrency: int = 64,
    log_level: str = "WARNING",
) -> Iterator[Topology]:
    """Topics, keyspace and ``workers`` ready workers (concurrency ``concurrency``); each under
    ``py-spy record`` when ``profile`` is set (worker 1 into ``profile``, worker N into
    ``profile`` + ``.wN``). Stops them all on exit (``exit_codes``)."""
    exe = streamcrawl_binary()
    tag = uuid.uuid4().hex[:10]
    env = {
        **os.environ,
        **_service_env(),
        "STREAMCRAWL_TOPIC_PREFIX": f"bench-{tag}",
        "STREAMCRAWL_CASSANDRA_KEYSPACE": f"bench_{tag}",
        "STREAMCRAWL_PARTITIONS": str(partitions),
        "STREAMCRAWL_CONCURRENCY": str(concurrency),
        "STREAMCRAWL_LOG_LEVEL": log_level,
        # The bench site listens on loopback, which the SSRF guard refuses by default.
        "STREAMCRAWL_ALLOW_NETWORKS": "127.0.0.0/8",
        "PYTHONUNBUFFERED": "1",
    }
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    _admin(exe, env)
    topo = Topology(
        exe=exe,
        env=env,
        crawl_id=f"bench-{tag}",
        partitions=partitions,
        logs=logs,
        code=code_state(),
        kafka_pid=_service_pid("kafka", "kafka.Kafka"),
        cassandra_pid=_service_pid("cassandra", "CassandraDaemon"),
    )
    t_start = time.monotonic()
    try:
        _start_workers(topo, workdir, workers, profile)
        startup_meter = ServiceMeter([p.pid for p in topo.procs]).start()
        topo.meters.append(startup_meter)
        python = str(Path(exe).with_name("python"))
        topo.poller = _StatusPoller(python, topo.crawl_id, env, logs / "status-poller.log")
        _wait_ready(topo, t_start + ready_timeout, t_start)
        topo.startup_s = time.monotonic() - t_start
        topo.startup_cpu_s = startup_meter.stop()
        yield topo
    finally:
        topo.stop()
        if not os.environ.get("STREAMCRAWL_BENCH_KEEP"):
            _drop_run_state(str(Path(exe).with_name("python")), env)


def _drop_run_state(python: str, env: dict[str, str]) -> None:
    """``bench.drop_run_state`` in the streamcrawl venv (``python``; the bench's own venv has
    no Cassandra driver): delete the run's topics and keyspace once its workers stopped.
    ``STREAMCRAWL_BENCH_KEEP=1`` keeps them (``bench.probes.page_records`` reads finished runs'
    ``pages`` topics). A failure is printed, not raised: the run's figures are already taken."""
    r = subprocess.run(
        [python, "-m", "bench.drop_run_state"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if r.returncode != 0:
        prefix = env["STREAMCRAWL_TOPIC_PREFIX"]
        print(f"bench: could not delete {prefix}'s topics and keyspace: {r.stderr[-300:]}")


def idle_rates(topo: Topology, seconds: float, settle: float = 2.0) -> dict[str, float | None]:
    """CPU-seconds per second of the workers (all together), the broker and Cassandra while
    the ready topology has nothing to crawl: ``seconds`` measured after ``settle``. What the
    services use then is not the crawl's (other work may use them too: the machine is shared)."""
    time.sleep(settle)
    meters = {
        "worker": ServiceMeter([p.pid for p in topo.procs]).start(),
        "kafka": ServiceMeter([topo.kafka_pid]).start() if topo.kafka_pid else None,
        "cassandra": ServiceMeter([topo.cassandra_pid]).start() if topo.cassandra_pid else None,
    }
    time.sleep(seconds)
    return {k: (m.stop() / seconds if m else None) for k, m in meters.items()}
