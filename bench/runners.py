"""One function per crawler under test.  Each takes a ``RunContext`` and returns a result dict.

The harness (``bench/run.py``) starts nginx, calls the runner, stops nginx and adds what the
access log shows (pages fetched, missed, duplicates, private fetches, per-origin gaps).  A runner
only runs and measures the crawler:

    {"wall_s", "cpu_s", "peak_rss_mb", "returncode", "timed_out",
     "service_cpu_s": {"kafka": s, "cassandra": s},   # only for the topology, else {}
     "self_report": {...},                            # what the crawler said about itself
     "rss_samples": [(t, MB), ...]}                   # kept for the memory run

A runner that cannot run (crawler not installed) raises ``NotRun(reason)``: the report shows
"not run: reason", never zeros.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.measure import Measured, run_measured
from bench.site import SiteSpec

REPO = Path(__file__).resolve().parent.parent
COMPETITORS = Path(__file__).resolve().parent / "competitors"
BENCH_PYTHON = sys.executable  # run.py re-executes itself in the benchmark venv


class NotRun(Exception):
    """The crawler could not be run here; the message says why."""


@dataclass
class RunContext:
    spec: SiteSpec
    workdir: Path  # fresh per run: crawler output, state, logs
    delay: float = 0.0  # per-origin delay in seconds (politeness run)
    max_pages: int | None = None  # page budget (memory run); None = the whole site
    timeout: float = 1800.0
    profile: Path | None = None  # if set: record a py-spy profile (raw collapsed stacks) here
    stock: bool = False  # competitors without tracking-parameter stripping
    extra: dict = field(default_factory=dict)

    @property
    def seeds_file(self) -> Path:
        return Path(self.spec.root) / "seeds.txt"

    @property
    def seeds(self) -> list[str]:
        return self.seeds_file.read_text().split()


def _py_spy(argv: list[str], out: Path) -> list[str]:
    spy = Path(BENCH_PYTHON).with_name("py-spy")
    if not spy.exists():
        raise NotRun("py-spy missing from the benchmark venv")
    return [
        str(spy),
        "record",
        "--format",
        "raw",
        "--rate",
        "100",
        "--subprocesses",
        "--nonblocking",
        "-o",
        str(out),
        "--",
        *argv,
    ]


def _measure(argv: list[str], ctx: RunContext, env: dict[str, str] | None = None) -> Measured:
    if ctx.profile:
        argv = _py_spy(argv, ctx.profile)
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return run_measured(
        argv, env=full_env, cwd=ctx.workdir, timeout=ctx.timeout, log_dir=ctx.workdir / "logs"
    )


def _result(m: Measured, self_report: dict) -> dict:
    d = asdict(m)
    d.pop("argv")
    d["service_cpu_s"] = {}
    d["self_report"] = self_report
    return d


def _last_json(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return {}


def run_scrapy(ctx: RunContext) -> dict:
    """Scrapy CrawlSpider (bench/competitors/scrapy_spider.py) in the benchmark venv."""
    argv = [
        BENCH_PYTHON,
        str(COMPETITORS / "scrapy_spider.py"),
        "--seeds",
        str(ctx.seeds_file),
        "--out",
        str(ctx.workdir / "out"),
    ]
    if ctx.delay:
        argv += ["--delay", str(ctx.delay)]
    if ctx.stock:
        argv.append("--stock")
    if ctx.max_pages:
        raise NotRun("page budgets are only wired for streamcrawl")
    m = _measure(argv, ctx)
    return _result(m, _last_json(m.stdout))


def run_crawlee(ctx: RunContext) -> dict:
    """Crawlee ParselCrawler (bench/competitors/crawlee_crawler.py) in the benchmark venv."""
    if ctx.delay or ctx.max_pages:
        raise NotRun("the crawlee runner has no per-origin delay or page budget wired")
    argv = [
        BENCH_PYTHON,
        str(COMPETITORS / "crawlee_crawler.py"),
        "--seeds",
        str(ctx.seeds_file),
        "--out",
        str(ctx.workdir / "out"),
    ]
    if ctx.stock:
        argv.append("--stock")
    m = _measure(argv, ctx, env={"CRAWLEE_LOG_LEVEL": "WARNING"})
    return _result(m, _last_json(m.stdout))


def streamcrawl_binary() -> str:
    """The ``streamcrawl`` executable: $STREAMCRAWL_BIN, the repo's .venv, or PATH."""
    candidates = [
        os.environ.get("STREAMCRAWL_BIN"),
        str(REPO / ".venv" / "bin" / "streamcrawl"),
        shutil.which("streamcrawl"),
    ]
    for c in candidates:
        if c and Path(c).exists() and os.access(c, os.X_OK):
            return c
    raise NotRun(
        "streamcrawl not installed (set STREAMCRAWL_BIN or install it into /work/main/.venv)"
    )


def streamcrawl_version() -> str | None:
    """The installed streamcrawl's version (from its venv's metadata), or None."""
    try:
        exe = streamcrawl_binary()
    except NotRun:
        return None
    py = Path(exe).with_name("python")
    code = "import importlib.metadata as m; print(m.version('streamcrawl'))"
    argv = [str(py), "-c", code] if py.exists() else [exe, "--version"]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return (
        r.stdout.strip().splitlines()[-1]
        if r.returncode == 0 and r.stdout.strip()
        else "unknown version"
    )


def code_state() -> dict:
    """The streamcrawl code a run used: HEAD, and the uncommitted changes to the package
    directories (other engineers edit the tree the editable install runs from)."""
    dirs = ["agents", "topology", "schemas"]

    def git(*a: str) -> str:
        try:
            r = subprocess.run(
                ["git", "-C", str(REPO), *a], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return r.stdout

    diff = git("diff", "HEAD", "--", *dirs)
    return {
        "commit": git("rev-parse", "--short", "HEAD").strip(),
        "uncommitted": git("diff", "HEAD", "--name-only", "--", *dirs).split(),
        "diff_sha1": hashlib.sha1(diff.encode()).hexdigest()[:12] if diff else None,
    }


def embedded_argv(ctx: RunContext) -> list[str]:
    """The ``streamcrawl crawl`` command line for this run (ARCHITECTURE.md section 7)."""
    exe = streamcrawl_binary()
    # Without a budget under test, leave room so that the budget never truncates the crawl.
    budget = ctx.max_pages or 2 * ctx.spec.expected_pages
    return [
        exe,
        "crawl",
        *ctx.seeds,
        "--out",
        str(ctx.workdir / "out"),
        "--state-dir",
        str(ctx.workdir / "state"),
        "--delay",
        str(ctx.delay),
        "--concurrency",
        "64",
        "--max-pages",
        str(budget),
        "--allow-host",
        "127.0.0.1",
        "--user-agent",
        "bench-streamcrawl",
        "--json",
    ]


def run_streamcrawl_embedded(ctx: RunContext) -> dict:
    """``streamcrawl crawl`` (embedded) as a subprocess; its --json summary is self_report."""
    exe = streamcrawl_binary()
    probe = subprocess.run([exe, "crawl", "--help"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        raise NotRun(
            f"`streamcrawl crawl --help` failed: {(probe.stderr or probe.stdout).strip()[-200:]}"
        )
    code = code_state()
    m = _measure(embedded_argv(ctx), ctx)
    if m.returncode != 0 and not m.timed_out:
        raise RuntimeError(f"streamcrawl crawl exited {m.returncode}: {m.stderr_tail[-500:]}")
    return _result(m, {**_last_json(m.stdout), "code": code})


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


def _get_status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return 0


def _size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path else 0
    except OSError:
        return 0


def _log_tail(path: Path, n: int = 1500) -> str:
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


class _StatusPoller:
    """``bench.kafka_status`` in the streamcrawl venv: the latest terminal-state counts."""

    def __init__(self, python: str, crawl_id: str, env: dict[str, str], log: Path) -> None:
        self._err = open(log, "wb")  # noqa: SIM115 (closed by stop)
        self.proc = subprocess.Popen(
            [python, "-m", "bench.kafka_status", "--crawl-id", crawl_id, "--interval", "0.5"],
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


def run_kafka_topology(ctx: RunContext, workers: int) -> dict:
    """The Kafka wiring with ``workers`` workers on the running Kafka and Cassandra.

    * a topic prefix, keyspace and crawl id unique to this run; ``streamcrawl admin
      create-topics`` and ``create-schema`` with ``kafka_partitions(spec)`` partitions;
    * ``workers`` x ``streamcrawl worker`` (own state dir and web port, concurrency 64), each
      waited for until ``/readyz`` answers 200;
    * ``streamcrawl seed <all roots> --delay <ctx.delay> --per-origin-concurrency 8 (1 with a
      delay) --allow-host 127.0.0.1 --user-agent bench-streamcrawl --max-pages <budget>``;
    * drained = Cassandra's terminal-state counts (``bench.kafka_status``, what ``streamcrawl
      status --json`` reports) hold every expected page as ``fetched`` (or the budget's worth
      of states), unchanged for 3 s; a crawl whose counts stop moving for 60 s short of that, with
      no request to the site for 30 s (``ctx.extra["access_log"]``), ends too (the access log
      then shows what was missed);
    * "wall_s" from the seed to the last change of the counts; "cpu_s"/"peak_rss_mb" of the
      worker processes over the same interval (``ServiceMeter``; start-up and rebalancing
      before the seed are in self_report, not in cpu_s); "service_cpu_s" of the Kafka broker
      and Cassandra JVMs (shared services: other work on the machine may use them too);
    * ctx.profile: worker 1 runs under ``py-spy record``; the workers are then stopped with
      SIGTERM (SIGKILL after 30 s).
    """
    from bench.measure import ServiceMeter

    exe = streamcrawl_binary()
    venv_python = str(Path(exe).with_name("python"))
    tag = uuid.uuid4().hex[:10]
    crawl_id = f"bench-{tag}"
    partitions = kafka_partitions(ctx.spec)
    env = {
        **os.environ,
        **_service_env(),
        "STREAMCRAWL_TOPIC_PREFIX": f"bench-{tag}",
        "STREAMCRAWL_CASSANDRA_KEYSPACE": f"bench_{tag}",
        "STREAMCRAWL_PARTITIONS": str(partitions),
        "STREAMCRAWL_CONCURRENCY": "64",
        "STREAMCRAWL_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    logs = ctx.workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for what in ("create-topics", "create-schema"):
        r = subprocess.run(
            [exe, "admin", what], env=env, capture_output=True, text=True, timeout=300
        )
        if r.returncode != 0:
            raise RuntimeError(f"streamcrawl admin {what} exited {r.returncode}: {r.stderr[-500:]}")
    kafka_pid = _service_pid("kafka", "kafka.Kafka")
    cassandra_pid = _service_pid("cassandra", "CassandraDaemon")
    budget = ctx.max_pages or 2 * ctx.spec.expected_pages
    code = code_state()
    procs: list[subprocess.Popen] = []
    ports: list[int] = []
    wrapped: set[int] = set()
    files = []
    poller: _StatusPoller | None = None
    meters: list[ServiceMeter] = []
    t_start = time.monotonic()
    try:
        for i in range(workers):
            port = _free_port()
            wenv = {
                **env,
                "STREAMCRAWL_STATE_DIR": str(ctx.workdir / f"state-w{i + 1}"),
                "STREAMCRAWL_WEB_PORT": str(port),
            }
            argv = [exe, "worker"]
            if ctx.profile and i == 0:
                argv = _py_spy(argv, ctx.profile)
            log = open(logs / f"worker-{i + 1}.log", "wb")  # noqa: SIM115 (closed below)
            files.append(log)
            p = subprocess.Popen(
                argv,
                env=wenv,
                cwd=ctx.workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            procs.append(p)
            ports.append(port)
            if ctx.profile and i == 0:
                wrapped.add(p.pid)
        startup_meter = ServiceMeter([p.pid for p in procs]).start()
        poller = _StatusPoller(venv_python, crawl_id, env, logs / "status-poller.log")
        deadline = time.monotonic() + min(300.0, ctx.timeout)
        for i, (p, port) in enumerate(zip(procs, ports, strict=True)):
            while _get_status(port, "/readyz") != 200:
                if p.poll() is not None:
                    raise RuntimeError(
                        f"worker {i + 1} exited {p.returncode}: "
                        f"{_log_tail(logs / f'worker-{i + 1}.log', 500)}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(f"worker {i + 1} not ready after {deadline - t_start} s")
                time.sleep(0.5)
        while poller.latest is None:  # the poller's Cassandra session is up
            if poller.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"status poller: {_log_tail(logs / 'status-poller.log', 500)}")
            time.sleep(0.2)
        startup_s = time.monotonic() - t_start
        startup_cpu_s = startup_meter.stop()

        worker_meter = ServiceMeter([p.pid for p in procs]).start()
        meters.append(worker_meter)
        svc: dict[str, ServiceMeter | None] = {
            "kafka": ServiceMeter([kafka_pid]).start() if kafka_pid else None,
            "cassandra": ServiceMeter([cassandra_pid]).start() if cassandra_pid else None,
        }
        meters += [m for m in svc.values() if m]
        seed_argv = [
            exe,
            "seed",
            *ctx.seeds,
            "--crawl-id",
            crawl_id,
            "--delay",
            str(ctx.delay),
            "--per-origin-concurrency",
            "1" if ctx.delay else "8",
            "--allow-host",
            "127.0.0.1",
            "--user-agent",
            "bench-streamcrawl",
            "--max-pages",
            str(budget),
        ]
        t0, t0_unix = time.monotonic(), time.time()
        r = subprocess.run(seed_argv, env=env, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"streamcrawl seed exited {r.returncode}: {r.stderr[-500:]}")

        def snapshot() -> tuple[float, float, dict[str, float | None]]:
            return (
                worker_meter.cpu_now(),
                worker_meter.peak_rss_mb,
                {k: (m.cpu_now() if m else None) for k, m in svc.items()},
            )

        access_log = ctx.extra.get("access_log")
        log_size, log_seen = -1, time.monotonic()
        last_total, last_t, last_seen = -1, t0_unix, time.monotonic()
        snap = snapshot()
        states: dict[str, int] = {}
        timed_out = stalled = False
        while True:
            for i, p in enumerate(procs):
                if p.poll() is not None:
                    raise RuntimeError(
                        f"worker {i + 1} exited {p.returncode} during the crawl: "
                        f"{_log_tail(logs / f'worker-{i + 1}.log', 500)}"
                    )
            now = time.monotonic()
            latest = poller.latest or {}
            states = latest.get("states") or {}
            total = sum(states.values())
            if total != last_total:
                last_total, last_t, last_seen = total, latest.get("t", time.time()), now
                snap = snapshot()
            quiet = now - last_seen
            size = _size(access_log)
            if size != log_size:
                log_size, log_seen = size, now
            complete = states.get("fetched", 0) >= ctx.spec.expected_pages or (
                ctx.max_pages is not None and total >= ctx.max_pages
            )
            if total and complete and quiet >= 3.0:
                break
            # Stalled: no new terminal state for 60 s and no request to the site for 30 s
            # (the Cassandra sink can lag the fetches by tens of seconds under load).
            if total and quiet >= 60.0 and now - log_seen >= 30.0:
                stalled = True
                break
            if now - t0 > ctx.timeout:
                timed_out = True
                snap = snapshot()
                last_t = time.time()
                break
            if poller.proc.poll() is not None:
                raise RuntimeError(f"status poller: {_log_tail(logs / 'status-poller.log', 500)}")
            time.sleep(0.25)
        wall = max(0.0, last_t - t0_unix)
        cpu_s, _, service_cpu = snap
        for m in meters:
            m.stop()
    finally:
        if poller is not None:
            poller.stop()
        codes = _stop_procs(procs, wrapped)
        for m in meters:
            m.stop()
        for f in files:
            f.close()
    result = {
        "returncode": next((c for c in codes if c not in (0, -signal.SIGTERM, None)), 0),
        "wall_s": wall,
        "cpu_s": cpu_s,
        "user_s": None,
        "sys_s": None,
        "peak_rss_mb": worker_meter.peak_rss_mb,
        "timed_out": timed_out,
        "stderr_tail": _log_tail(logs / "worker-1.log"),
        "service_cpu_s": service_cpu,
        "self_report": {
            "crawl_id": crawl_id,
            "topic_prefix": env["STREAMCRAWL_TOPIC_PREFIX"],
            "keyspace": env["STREAMCRAWL_CASSANDRA_KEYSPACE"],
            "partitions": partitions,
            "workers": workers,
            "states": states,
            "stalled": stalled,
            "startup_s": startup_s,
            "startup_cpu_s": startup_cpu_s,
            "worker_exit_codes": codes,
            "kafka_pid": kafka_pid,
            "cassandra_pid": cassandra_pid,
            "code": code,
        },
    }
    if ctx.max_pages:
        result["rss_samples"] = [(t, mb) for t, mb in worker_meter.rss_samples if t <= wall + 1]
    return result


RUNNERS = {
    "scrapy": run_scrapy,
    "crawlee": run_crawlee,
    "embedded": run_streamcrawl_embedded,
    "kafka-1": lambda ctx: run_kafka_topology(ctx, workers=1),
    "kafka-2": lambda ctx: run_kafka_topology(ctx, workers=2),
}

LABELS = {
    "scrapy": "Scrapy (CrawlSpider)",
    "crawlee": "Crawlee for Python (ParselCrawler)",
    "embedded": "streamcrawl crawl (embedded)",
    "kafka-1": "streamcrawl Kafka topology, 1 worker",
    "kafka-2": "streamcrawl Kafka topology, 2 workers",
}
