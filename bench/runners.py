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
import subprocess
from dataclasses import asdict
from pathlib import Path

from bench.context import (
    BENCH_PYTHON,
    REPO,
    NotRun,
    RunContext,
    code_state,
    py_spy_argv,
    streamcrawl_binary,
    streamcrawl_version,
)
from bench.kafka_runner import run_kafka_topology
from bench.measure import Measured, run_measured

__all__ = ["LABELS", "REPO", "RUNNERS", "NotRun", "RunContext", "streamcrawl_version"]

COMPETITORS = Path(__file__).resolve().parent / "competitors"


def _measure(argv: list[str], ctx: RunContext, env: dict[str, str] | None = None) -> Measured:
    if ctx.profile:
        argv = py_spy_argv(argv, ctx.profile)
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


def embedded_argv(ctx: RunContext) -> list[str]:
    """The ``streamcrawl crawl`` command line for this run (the CLI of README.md)."""
    exe = streamcrawl_binary()
    # Without a budget under test, leave room so that the budget never truncates the crawl.
    budget = ctx.max_pages or 2 * ctx.spec.expected_pages
    per_origin = (
        []
        if ctx.per_origin_concurrency is None
        else ["--per-origin-concurrency", str(ctx.per_origin_concurrency)]
    )
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
        *per_origin,
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
