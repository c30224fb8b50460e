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

import json
import os
import shutil
import subprocess
import sys
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
    m = _measure(embedded_argv(ctx), ctx)
    if m.returncode != 0 and not m.timed_out:
        raise RuntimeError(f"streamcrawl crawl exited {m.returncode}: {m.stderr_tail[-500:]}")
    return _result(m, _last_json(m.stdout))


def run_kafka_topology(ctx: RunContext, workers: int) -> dict:
    """The Kafka wiring with ``workers`` workers on real Kafka and Cassandra.  TO BE WIRED.

    Contract for whoever wires it (same result dict as the other runners):
      * start (or reuse) the broker and Cassandra; create topics/schema
        (``streamcrawl admin create-topics|create-schema``) with a topic prefix unique to this run;
      * start ``workers`` x ``streamcrawl worker`` processes; publish the crawl with
        ``streamcrawl seed <ctx.seeds> --crawl-id <id> --delay <ctx.delay> --allow-host 127.0.0.1
        --max-pages <budget>`` and wait until ``streamcrawl status --crawl-id <id> --json`` shows
        nothing queued or in flight (bound the wait by ctx.timeout);
      * measure with ``bench.measure``: ``ServiceMeter(worker_pids)`` for "cpu_s"/"peak_rss_mb",
        ``ServiceMeter([broker_pid])`` and ``ServiceMeter([cassandra_pid])`` for
        "service_cpu_s": {"kafka": s, "cassandra": s}; "wall_s" from seed to drained;
      * honour ctx.profile (py-spy record --pid on one worker) and ctx.max_pages.
    """
    raise NotImplementedError("waiting for the topology")


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
